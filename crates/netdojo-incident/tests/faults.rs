//! Every fault type on a real lab (namespaces, FRR, services): the lab comes up healthy, the
//! fault's inject actions break a check that passed (its symptom, within a bound), its repair
//! actions bring every check back. Prints each type's time to symptom and time to heal. Needs
//! root and FRR (skipped with a printed reason on a dev machine without them, never under CI).
//!
//! `NETDOJO_FAULTS_ALL=N` runs the first N candidates of each type on every lab instead of one
//! per type (a sweep of the derivation, not a CI test: N=1 is about 270 runs);
//! `NETDOJO_FAULTS_ONLY=type,type` and `NETDOJO_FAULTS_LAB=name` narrow either run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use netdojo_incident::faults::candidates;
use netdojo_incident::{Fault, FaultType, Lab, LiveLab};
use netdojo_linux::preflight::{self, Need};

/// OSPF's dead interval is 3 s and BGP's hold time 3 s in the labs; a route-map change waits
/// for BGP's route-map delay timer (5 s by default).
const SYMPTOM_WITHIN: Duration = Duration::from_secs(15);
const HEAL_WITHIN: Duration = Duration::from_secs(30);

fn labs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/incident/labs")
}

fn all_labs() -> Vec<Lab> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(labs_dir())
        .expect("testdata/incident/labs")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yml"))
        .collect();
    paths.sort();
    paths.iter().map(|p| Lab::load(p).unwrap_or_else(|e| panic!("{e}"))).collect()
}

#[derive(Debug)]
struct Outcome {
    lab: String,
    fault: Fault,
    symptom: Result<(Duration, Vec<String>), String>,
    heal: Result<Duration, String>,
}

async fn run_one(lab: Lab, fault: Fault) -> Outcome {
    let mut outcome = Outcome {
        lab: lab.name.clone(),
        fault: fault.clone(),
        symptom: Err("not reached".into()),
        heal: Err("not reached".into()),
    };
    let live = match LiveLab::start(&lab).await {
        Ok(live) => live,
        Err(e) => {
            outcome.symptom = Err(format!("the lab did not start: {e}"));
            return outcome;
        }
    };
    outcome.symptom = inject(&live, &fault).await;
    if outcome.symptom.is_ok() {
        outcome.heal = repair(&live, &fault).await;
    }
    live.stop().await;
    outcome
}

async fn inject(live: &LiveLab, fault: &Fault) -> Result<(Duration, Vec<String>), String> {
    let t0 = Instant::now();
    for a in &fault.inject {
        live.apply(a).await.map_err(|e| format!("inject {a:?}: {e}"))?;
    }
    loop {
        let left = SYMPTOM_WITHIN.saturating_sub(t0.elapsed());
        let polled = live.wait_health(|h| !h.all_passed(), left).await;
        if polled.all_passed() {
            return Err(format!("no check failed within {} s", SYMPTOM_WITHIN.as_secs()));
        }
        // A failing poll is confirmed with a verdict's patience before it counts.
        let verdict = live.health().await;
        if !verdict.all_passed() {
            return Ok((t0.elapsed(), verdict.failing().iter().map(|s| s.to_string()).collect()));
        }
        if t0.elapsed() >= SYMPTOM_WITHIN {
            return Err(format!("no check failed for sure within {} s", SYMPTOM_WITHIN.as_secs()));
        }
    }
}

async fn repair(live: &LiveLab, fault: &Fault) -> Result<Duration, String> {
    let t0 = Instant::now();
    for a in &fault.repair {
        live.apply(a).await.map_err(|e| format!("repair {a:?}: {e}"))?;
    }
    loop {
        let left = HEAL_WITHIN.saturating_sub(t0.elapsed());
        let polled = live.wait_health(|h| h.all_passed(), left).await;
        if !polled.all_passed() {
            return Err(format!(
                "still failing after {} s: {}",
                HEAL_WITHIN.as_secs(),
                polled.describe_failing()
            ));
        }
        let verdict = live.health().await;
        if verdict.all_passed() {
            return Ok(t0.elapsed());
        }
        if t0.elapsed() >= HEAL_WITHIN {
            return Err(format!(
                "still failing after {} s: {}",
                HEAL_WITHIN.as_secs(),
                verdict.describe_failing()
            ));
        }
    }
}

/// A line of the table: type, lab, device, time to symptom, time to heal, what failed.
fn row(o: &Outcome) -> String {
    let ms = |d: &Duration| format!("{} ms", d.as_millis());
    let (s, checks) = match &o.symptom {
        Ok((d, checks)) => (ms(d), checks.join("; ")),
        Err(e) => ("-".into(), e.clone()),
    };
    let h = match &o.heal {
        Ok(d) => ms(d),
        Err(e) => format!("- ({e})"),
    };
    format!(
        "{:<30} {:<14} {:<10} {:>9} {:>7}  {checks}",
        o.fault.fault_type.id(),
        o.lab,
        o.fault.device,
        s,
        h
    )
}

/// One fault per type: the first candidate of the smallest lab that offers the type.
fn one_per_type(labs: &[Lab]) -> Vec<(Lab, Fault)> {
    let mut by_size: Vec<&Lab> = labs.iter().collect();
    by_size.sort_by_key(|l| (l.topology.nodes.0.len(), l.name.clone()));
    FaultType::ALL
        .iter()
        .filter_map(|t| {
            by_size.iter().find_map(|l| candidates(l, *t).into_iter().next().map(|f| ((*l).clone(), f)))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_type_shows_its_symptom_and_heals() {
    if !preflight::ready_or_skip("every_fault_type_shows_its_symptom_and_heals", &[Need::Root, Need::Frr]) {
        return;
    }
    let lab_filter = std::env::var("NETDOJO_FAULTS_LAB").ok();
    let labs: Vec<Lab> =
        all_labs().into_iter().filter(|l| lab_filter.as_ref().is_none_or(|f| *f == l.name)).collect();
    let only: Option<Vec<String>> =
        std::env::var("NETDOJO_FAULTS_ONLY").ok().map(|s| s.split(',').map(str::to_string).collect());
    let wanted = |t: &FaultType| only.as_ref().is_none_or(|o| o.iter().any(|x| x == t.id()));
    let sweep: Option<usize> = std::env::var("NETDOJO_FAULTS_ALL").ok().and_then(|n| n.parse().ok());
    let runs: Vec<(Lab, Fault)> = if let Some(n) = sweep {
        labs.iter()
            .flat_map(|l| {
                FaultType::ALL
                    .iter()
                    .flat_map(move |t| candidates(l, *t).into_iter().take(n).map(move |f| (l.clone(), f)))
            })
            .collect()
    } else {
        one_per_type(&labs)
    };
    let runs: Vec<(Lab, Fault)> = runs.into_iter().filter(|(_, f)| wanted(&f.fault_type)).collect();
    let started = Instant::now();
    // Two labs at a time: the CI machine has two cores.
    let gate = Arc::new(tokio::sync::Semaphore::new(2));
    let mut handles = Vec::new();
    for (lab, fault) in runs {
        let gate = gate.clone();
        handles.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await.expect("semaphore");
            let outcome = run_one(lab, fault).await;
            if sweep.is_some() {
                eprintln!("{}", row(&outcome));
            }
            outcome
        }));
    }
    let mut outcomes = Vec::new();
    for h in handles {
        match h.await {
            Ok(o) => outcomes.push(o),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    let mut failures = Vec::new();
    let mut covered: BTreeMap<FaultType, usize> = BTreeMap::new();
    eprintln!("{:<30} {:<14} {:<10} {:>9} {:>7}  symptom", "fault type", "lab", "device", "symptom", "heal");
    for o in &outcomes {
        let t = o.fault.fault_type;
        eprintln!("{}", row(o));
        match (&o.symptom, &o.heal) {
            (Ok(_), Ok(_)) => *covered.entry(t).or_default() += 1,
            (Err(e), _) | (Ok(_), Err(e)) => failures.push(format!(
                "{} on {} ({}: {}): {e}",
                t.id(),
                o.lab,
                o.fault.device,
                o.fault.detail
            )),
        }
    }
    eprintln!("{} runs in {} ms", outcomes.len(), started.elapsed().as_millis());
    let missing: Vec<&str> = FaultType::ALL
        .iter()
        .filter(|t| wanted(t) && lab_filter.is_none() && !covered.contains_key(t))
        .map(|t| t.id())
        .collect();
    assert!(
        failures.is_empty() && missing.is_empty(),
        "failures:\n{}\nno verified fault: {missing:?}",
        failures.join("\n")
    );
}
