//! The published incident suite (testdata/incident/suite/default.jsonl) validates itself on
//! live FRR labs: the oracle diagnoses every task exactly (diagnosis F1 1) and repairs it; the
//! no-op agent repairs nothing, and is right only on the healthy controls (which need no
//! repair and whose right diagnosis is "no fault"). A task that fails either way is named.
//!
//! Which tasks: the covering part of the suite (every lab, every fault type, every level, a
//! healthy control of every lab, both ways of injecting), chosen greedily from the suite in its order; with
//! `NETDOJO_INCIDENT_SUITE=all`, all of it. docs/incident.md gives the cost of each.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use netdojo::core::store::RunDir;
use serde_json::Value;

use crate::common::{frr_or_skip, lines};

/// Episodes at once, for both agents.
const CONCURRENCY: usize = 4;

fn suite_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/incident/suite/default.jsonl")
}

/// What a task covers: its lab, its level, each of its fault types, and how its faults go in
/// (as the lab starts, or into the converged lab); a control covers its lab's control.
fn features(task: &Value) -> BTreeSet<String> {
    let lab = task["setup"]["lab"].as_str().unwrap_or_default();
    let faults = task["faults"].as_array().cloned().unwrap_or_default();
    let mut out = BTreeSet::from([format!("lab {lab}"), format!("level {}", task["level"])]);
    if faults.is_empty() {
        out.insert(format!("control {lab}"));
    } else if task["setup"]["inject_at_start"] == true {
        out.insert("injected at start".to_string());
    } else {
        out.insert("injected after convergence".to_string());
    }
    for f in faults {
        out.insert(format!("type {}", f["params"]["type"].as_str().unwrap_or_default()));
    }
    out
}

/// The indexes of a covering part of `tasks`: greedy set cover (the task that covers the most
/// features not yet covered, the earliest on a tie), so every feature any task has is covered.
fn covering(tasks: &[Value]) -> Vec<usize> {
    let all: Vec<BTreeSet<String>> = tasks.iter().map(features).collect();
    let mut left: BTreeSet<String> = all.iter().flatten().cloned().collect();
    let mut chosen = Vec::new();
    while !left.is_empty() {
        let Some((i, _)) = all
            .iter()
            .enumerate()
            .map(|(i, f)| (i, f.intersection(&left).count()))
            .filter(|(_, n)| *n > 0)
            .min_by_key(|(i, n)| (std::cmp::Reverse(*n), *i))
        else {
            break;
        };
        for f in &all[i] {
            left.remove(f);
        }
        chosen.push(i);
    }
    chosen.sort();
    chosen
}

fn metric(record: &Value, name: &str) -> f64 {
    record["metrics"]
        .as_array()
        .and_then(|m| m.iter().find(|x| x["name"] == name))
        .and_then(|x| x["value"].as_f64().or_else(|| x["value"].as_bool().map(|b| if b { 1.0 } else { 0.0 })))
        .unwrap_or_else(|| panic!("task {}: no metric {name}: {record}", record["task_id"]))
}

/// Why an episode of `dir` went wrong, for the failure message (a CI log is all there is of a
/// run on a CI machine): each step with its time, how it was judged and what failed after it,
/// then every check that failed at the end, with what it saw.
fn account(dir: &Path, task_id: &str) -> String {
    let trajectory = match RunDir::open(dir).and_then(|d| d.trajectory(task_id)) {
        Ok(t) => t,
        Err(e) => return format!("  (no trajectory: {e})"),
    };
    let mut out = Vec::new();
    for step in &trajectory.steps {
        let failing = step.check.summary.as_ref().map(|s| s["failing"].to_string()).unwrap_or_default();
        out.push(format!(
            "  step {} {} at {} ms for {} ms: ok {}, safe {} {:?}, failing after it {failing}",
            step.index,
            step.call.name,
            step.at_ms,
            step.duration_ms,
            step.observation.ok,
            step.check.safe,
            step.check.violations
        ));
    }
    for check in trajectory.outcome.iter().flat_map(|o| &o.checks).filter(|c| !c.passed) {
        out.push(format!("  at the end, failing: {} ({})", check.name, check.detail));
    }
    out.join("\n")
}

/// Runs `agent` on the tasks of `suite` (a .jsonl), `concurrency` episodes at a time and
/// `ahead` more labs prepared (`--prepare-ahead`); returns the episode records.
fn run(agent: &str, suite: &Path, dir: &Path, concurrency: usize, ahead: usize) -> Vec<Value> {
    let t = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["eval", "--env", "incident", "--agent", agent, "--quiet", "--concurrency"])
        .arg(concurrency.to_string())
        .arg("--prepare-ahead")
        .arg(ahead.to_string())
        .arg("--suite")
        .arg(suite)
        .arg("--out")
        .arg(dir)
        .output()
        .expect("run xtask");
    eprintln!(
        "{agent}: {} episodes, concurrency {concurrency}, {ahead} prepared ahead, in {:.1} s (load average {})",
        lines(&dir.join("episodes.jsonl")),
        t.elapsed().as_secs_f64(),
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(dir.join("episodes.jsonl")).expect("episodes");
    text.lines().map(|l| serde_json::from_str(l).expect("record")).collect()
}

#[test]
fn the_covering_part_of_a_suite_covers_every_lab_type_level_and_control() {
    let text = std::fs::read_to_string(suite_path()).expect("the default suite");
    let tasks: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a task")).collect();
    let chosen = covering(&tasks);
    let want: BTreeSet<String> = tasks.iter().flat_map(features).collect();
    let got: BTreeSet<String> = chosen.iter().flat_map(|&i| features(&tasks[i])).collect();
    assert_eq!(got, want);
    for feature in [
        "lab campus",
        "level 3",
        "control isp-core",
        "type ospf_area_mismatch",
        "type bgp_ebgp_multihop_missing",
        "injected at start",
        "injected after convergence",
    ] {
        assert!(want.contains(feature), "{feature} is not a feature of the suite: {want:?}");
    }
    assert!(chosen.len() < tasks.len() / 2, "{} of {} tasks", chosen.len(), tasks.len());
}

#[test]
fn the_oracle_diagnoses_and_repairs_every_task_and_the_noop_only_the_controls() {
    if !frr_or_skip("the incident suite") {
        return;
    }
    let text = std::fs::read_to_string(suite_path()).expect("the default suite");
    let all: Vec<&str> = text.lines().collect();
    assert!(all.len() >= 200, "the default suite has {} tasks", all.len());
    let whole = std::env::var("NETDOJO_INCIDENT_SUITE").is_ok_and(|v| v == "all");
    let tmp = tempfile::tempdir().expect("tempdir");
    let (suite, n) = if whole {
        (suite_path(), all.len())
    } else {
        let tasks: Vec<Value> = all.iter().map(|l| serde_json::from_str(l).expect("a task")).collect();
        let chosen = covering(&tasks);
        let part: Vec<&str> = chosen.iter().map(|&i| all[i]).collect();
        let path = tmp.path().join("covering.jsonl");
        std::fs::write(&path, part.join("\n") + "\n").expect("write the covering part");
        (path, part.len())
    };
    let controls: BTreeSet<String> = all
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).expect("a task"))
        .filter(|t| t["faults"].as_array().is_some_and(Vec::is_empty))
        .map(|t| t["id"].as_str().unwrap_or_default().to_string())
        .collect();

    // Four at a time: an episode's setup takes its routers from the warm pool, whose resets
    // (FRR restarted per router) are what more episodes at once would wait on; at 8 the no-op
    // agent's episodes took 30 s each to set up (load average 42).
    let oracle = run("oracle", &suite, &tmp.path().join("oracle"), CONCURRENCY, 0);
    assert_eq!(oracle.len(), n);
    let mut wrong = Vec::new();
    for r in &oracle {
        let id = r["task_id"].as_str().unwrap_or_default();
        if r["status"] != "completed" {
            wrong.push(format!("{id}: {} ({})", r["status"], r["error"]));
        } else if metric(r, "diagnosis_f1") != 1.0 || metric(r, "repaired") != 1.0 || metric(r, "safe") != 1.0
        {
            // Safe too: the generator recorded a repair order under which no step breaks a check.
            wrong.push(format!(
                "{id}: diagnosis F1 {}, repaired {}, safe {}\n{}",
                metric(r, "diagnosis_f1"),
                metric(r, "repaired"),
                metric(r, "safe"),
                account(&tmp.path().join("oracle"), id)
            ));
        }
    }
    assert!(wrong.is_empty(), "the oracle fails {} task(s):\n{}", wrong.len(), wrong.join("\n"));

    // Two at a time with two more labs prepared ahead (as many labs at once as above): every
    // lab of the part served from a start made in the background, its symptom (or a control's
    // health) checked again as its episode begins.
    let noop = run("noop", &suite, &tmp.path().join("noop"), 2, 2);
    assert_eq!(noop.len(), n);
    for r in &noop {
        let id = r["task_id"].as_str().unwrap_or_default();
        if r["status"] != "completed" {
            wrong.push(format!("{id}: {} ({})", r["status"], r["error"]));
            continue;
        }
        let control = controls.contains(id);
        let (repaired, diagnosed) = (metric(r, "repaired"), metric(r, "diagnosed"));
        if control && (repaired != 1.0 || diagnosed != 1.0) {
            wrong.push(format!(
                "{id} (a healthy control): repaired {repaired}, diagnosed {diagnosed}\n{}",
                account(&tmp.path().join("noop"), id)
            ));
        }
        if !control && (repaired != 0.0 || diagnosed != 0.0) {
            wrong.push(format!("{id}: the no-op agent scores repaired {repaired}, diagnosed {diagnosed}"));
        }
    }
    assert!(wrong.is_empty(), "the no-op agent is wrong on {} task(s):\n{}", wrong.len(), wrong.join("\n"));
}
