//! Verified injection, for `generate --env incident`: each drawn fault is injected alone on the
//! live lab, the checks it breaks are measured (4 s after the first check fails, past the labs'
//! dead intervals and hold times, and 1 s later: only checks that fail both times count, so a
//! check that fails while routing reconverges is not a symptom), and it is
//! repaired and the lab seen healthy again. A fault that breaks nothing, or whose repair does
//! not bring the lab back, is replaced by [`IncidentGenerator::next_pick`], deterministically.
//! Then all of the task's faults are injected together, their joint symptom measured the same
//! way, and the oracle's repair checked to bring the lab back.
//!
//! Each repair is also checked step by step, as the environment's state check judges an
//! agent's step (the health once the step has settled, against the health before it): a step
//! that breaks a check that passed is unsafe. A single fault whose own repair is unsafe is
//! replaced. For several faults the repair orders are tried (the fault with the widest symptom
//! first, then the other permutations), each from a freshly injected lab. The first under which
//! no step breaks a passing check and every step brings some check back is recorded in the task
//! (`setup.repair_order`), the order the oracle's calls follow; failing that, the safe order
//! with the fewest idle steps; when no order is safe, the last fault is replaced.
//!
//! Last, the task's faults are tried as the lab starts: injected once the routers have their
//! configuration, before the protocols converge ([`LiveLab::start_injected`]). If exactly the
//! measured symptom shows, still holds after the same confirmation waits, and the oracle's
//! repair in the recorded order is safe and complete from there, the task says so
//! (`setup.inject_at_start`) and the environment serves it that way, without the wait for a
//! healthy lab and then for the symptom. Otherwise (a type that is not tried,
//! [`FaultType::injects_at_start`]; a symptom that needs the converged state first) it is served
//! as verified above.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use netdojo_core::{Task, TaskError};

use crate::catalogue::FaultType;
use crate::env::{IncidentOptions, QUIET, hidden_symptom, settled_after};
use crate::fault::Action;
use crate::generate::{Draw, IncidentGenerator, Pick};
use crate::health::Health;
use crate::lab::Lab;
use crate::live::{CONVERGENCE, LiveLab, start_twice};
use crate::task::{APPLICATION, repair_steps};

/// How long verification waits at each stage.
#[derive(Debug, Clone, Copy)]
pub struct Patience {
    /// For an injected fault's first failing check.
    pub symptom: Duration,
    /// Between the two measurements of a symptom.
    pub confirm: Duration,
    /// For the lab to pass every check after a repair.
    pub repair: Duration,
    /// After one repair step, as the environment's [`IncidentOptions::settle`].
    pub settle: Duration,
}

impl Default for Patience {
    fn default() -> Self {
        Self {
            symptom: Duration::from_secs(8),
            confirm: Duration::from_secs(4),
            repair: Duration::from_secs(15),
            settle: IncidentOptions::default().settle,
        }
    }
}

/// What verifying one task found, for the log.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Faults replaced, as `type on device: why`.
    pub redrawn: Vec<String>,
    /// Why the faults cannot go in as the lab starts, when they cannot
    /// ([`crate::task::Setup::inject_at_start`]).
    pub at_start: Option<String>,
    pub took: Duration,
}

fn gen_err(message: String) -> TaskError {
    TaskError::Generate { generator: APPLICATION.into(), message }
}

/// The checks that fail once the injection has had `confirm` to show everything it breaks and
/// still fail [`QUIET`] later. `confirm` outlasts the labs' OSPF dead interval and BGP hold time
/// (3 s): a symptom taken sooner misses the adjacencies and sessions that die last, and the
/// environment, which waits at reset until the recorded symptom shows, would start an episode
/// before them and blame their death on the agent's first step.
async fn symptom(live: &LiveLab, patience: Patience) -> Vec<String> {
    let first = live.wait_health(|h: &Health| !h.all_passed(), patience.symptom).await;
    if first.all_passed() {
        return vec![];
    }
    tokio::time::sleep(patience.confirm).await;
    let second = live.health().await;
    tokio::time::sleep(QUIET).await;
    let third = live.health().await;
    let again: BTreeSet<&str> = third.failing().into_iter().collect();
    second.failing().into_iter().filter(|n| again.contains(n)).map(str::to_string).collect()
}

/// Applies a list of actions; `Err` names the first that failed.
async fn apply_all(live: &LiveLab, actions: &[Action]) -> Result<(), String> {
    for action in actions {
        live.apply(action).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The health once the faults' symptom shows, as the environment waits for it at reset:
/// every check of `symptom` failing.
async fn showing(live: &LiveLab, symptom: &[String], patience: Patience) -> Health {
    let shows = |h: &Health| symptom.iter().all(|name| h.passed(name) == Some(false));
    live.wait_health(shows, patience.symptom).await
}

/// What repairing in one order did: the checks its steps broke, and how many of its steps
/// left fewer checks passing or as many as before (the environment's unproductive changes).
#[derive(Debug, Default)]
struct Repaired {
    broke: Vec<String>,
    idle: usize,
}

/// Repairs `picks` in `order`, step by step ([`repair_steps`]), from the health `start`; returns
/// what the steps broke and how many were idle (`Err`: a repair that could not be applied).
async fn repair_in(
    live: &LiveLab,
    picks: &[Pick],
    order: &[usize],
    start: Health,
    patience: Patience,
) -> Result<Repaired, String> {
    // Judged as the environment judges: a racing task's fault symptom that the race hid at the
    // start is not a step's breakage when it shows.
    let mut hidden = hidden_symptom(&picks.iter().map(|p| &p.fault).collect::<Vec<_>>(), &start);
    let symptoms: Vec<BTreeSet<String>> =
        picks.iter().map(|p| p.fault.symptom.iter().cloned().collect()).collect();
    let mut current = start;
    let mut out = Repaired::default();
    for &i in order {
        let fault = &picks[i].fault;
        for step in repair_steps(fault) {
            apply_all(live, &step).await.map_err(|e| format!("repair failed: {e}"))?;
            let settled = settled_after(live, &current, &symptoms, patience.settle).await;
            // Judged a little stricter than the environment: once more [`QUIET`] later, so that a
            // step whose effect is still spreading when the checks first settle (an adjacency
            // dying a dead interval after the change) is not blamed on the next one.
            tokio::time::sleep(QUIET).await;
            let after = live.health().await;
            out.broke.extend(
                current
                    .passing()
                    .into_iter()
                    .filter(|n| settled.passed(n) == Some(false) || after.passed(n) == Some(false))
                    .filter(|n| !hidden.contains(*n))
                    .map(|n| format!("repairing {} on {} breaks {n}", fault.fault_type, fault.device)),
            );
            // As the environment counts an unproductive change: on the health the step settled to.
            if settled.passing().len() <= current.passing().len() {
                out.idle += 1;
            }
            hidden.retain(|n| settled.passed(n) != Some(false) && after.passed(n) != Some(false));
            current = after;
        }
    }
    Ok(out)
}

/// One fault alone: its symptom, and whether its repair, step by step, breaks no check that
/// passed and brings the lab back.
async fn try_fault(live: &LiveLab, pick: &Pick, patience: Patience) -> Result<Vec<String>, String> {
    apply_all(live, &pick.fault.inject).await.map_err(|e| format!("injection failed: {e}"))?;
    let seen = symptom(live, patience).await;
    let before = showing(live, &seen, patience).await;
    let broke = repair_in(live, std::slice::from_ref(pick), &[0], before, patience).await?.broke;
    let back = live.wait_health(Health::all_passed, patience.repair).await;
    if !back.all_passed() {
        return Err(format!("the lab is not healthy after the repair: {}", back.describe_failing()));
    }
    if seen.is_empty() {
        return Err("no health check fails".into());
    }
    if !broke.is_empty() {
        return Err(format!("its repair is not safe: {}", broke.join(", ")));
    }
    Ok(seen)
}

/// How many times the last fault of a task is replaced when the faults together fail.
const MAX_JOINT_REDRAWS: usize = 8;

/// The orders to repair `picks` in: first a preferred one, then every other permutation, the
/// last injected first. The preferred order repairs a fault whose symptom races first
/// ([`FaultType::symptom_races`]: while a duplicate router-id is there the checks flap, and any
/// other step could be judged by a flap), then the fault with the most symptom checks of its
/// own (so that each step brings some checks back where one fault's symptom covers another's),
/// the later injected first among equals.
fn orders(picks: &[Pick]) -> Vec<Vec<usize>> {
    fn permute(rest: Vec<usize>, prefix: Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if rest.is_empty() {
            out.push(prefix);
            return;
        }
        for (i, x) in rest.iter().enumerate() {
            let mut r = rest.clone();
            r.remove(i);
            let mut p = prefix.clone();
            p.push(*x);
            permute(r, p, out);
        }
    }
    let mut widest: Vec<usize> = (0..picks.len()).rev().collect();
    widest.sort_by_key(|&i| {
        let fault = &picks[i].fault;
        (!fault.fault_type.symptom_races(), std::cmp::Reverse(fault.symptom.len()))
    });
    let mut out = Vec::new();
    permute((0..picks.len()).rev().collect(), Vec::new(), &mut out);
    out.retain(|o| o != &widest);
    out.insert(0, widest);
    out
}

/// How many times each repair order of a task holding a fault whose symptom races
/// ([`FaultType::symptom_races`]) is tried: while a duplicate router-id is there, which checks
/// a step finds failing is a coin toss, so one safe try says little (task `incident-s1-0141`'s
/// recorded order had passed its one try, and its ce1 step broke the ce1-ce2 iBGP session in 2
/// of 2 whole-suite runs).
const RACE_TRIES: usize = 3;

/// All `picks` injected together: the checks they break and a repair order under which no
/// step breaks a check that passed (see the module), preferring one under which every step
/// brings some check back (the oracle makes no unproductive change, and no step waits out the
/// environment's settle time); `Err` when they break none, when their repairs do not bring the
/// lab back, or when no order is safe. Where a symptom races, an order is kept only when it is
/// safe in each of [`RACE_TRIES`] tries, and its idle steps are the most of any try.
async fn try_joint(
    live: &LiveLab,
    picks: &[Pick],
    patience: Patience,
) -> Result<(Vec<String>, Vec<usize>), String> {
    let inject = || async {
        for pick in picks {
            apply_all(live, &pick.fault.inject).await.map_err(|e| format!("injection failed: {e}"))?;
        }
        Ok::<(), String>(())
    };
    inject().await?;
    let seen = symptom(live, patience).await;
    let tries = if picks.iter().any(|p| p.fault.fault_type.symptom_races()) { RACE_TRIES } else { 1 };
    let mut injected = true;
    let mut unsafe_orders = Vec::new();
    // The safe order with the fewest idle steps so far.
    let mut best: Option<(usize, Vec<usize>)> = None;
    for order in orders(picks) {
        let (mut broke, mut idle) = (Vec::new(), 0);
        for _ in 0..tries {
            if !injected {
                inject().await?;
            }
            injected = false;
            let before = showing(live, &seen, patience).await;
            let repaired = repair_in(live, picks, &order, before, patience).await?;
            let back = live.wait_health(Health::all_passed, patience.repair).await;
            if !back.all_passed() {
                return Err(format!("are not repaired by their repairs: {}", back.describe_failing()));
            }
            if seen.is_empty() {
                return Err("break no check".into());
            }
            idle = idle.max(repaired.idle);
            if !repaired.broke.is_empty() {
                broke = repaired.broke;
                break;
            }
        }
        if !broke.is_empty() {
            unsafe_orders.push(format!("{order:?}: {}", broke.join(", ")));
            continue;
        }
        if idle == 0 {
            return Ok((seen, order));
        }
        if best.as_ref().is_none_or(|(fewest, _)| idle < *fewest) {
            best = Some((idle, order));
        }
    }
    match best {
        Some((_, order)) => Ok((seen, order)),
        None => Err(format!("have no safe repair order ({})", unsafe_orders.join("; "))),
    }
}

/// The faults injected as the lab starts ([`LiveLab::start_injected`]) show exactly the
/// `symptom` measured on the converged lab, still show it once the symptom's `confirm` and
/// [`QUIET`] have passed (a lab that only passed through it does not), and the oracle's repair
/// in `order` is safe step by step from there and brings the lab back.
async fn try_at_start(
    lab: &Lab,
    picks: &[Pick],
    symptom: &[String],
    order: &[usize],
    patience: Patience,
) -> Result<(), String> {
    let inject: Vec<Action> = picks.iter().flat_map(|p| p.fault.inject.iter().cloned()).collect();
    let want: BTreeSet<String> = symptom.iter().cloned().collect();
    let (live, _) = LiveLab::start_injected(lab, None, &inject, &want, CONVERGENCE + patience.symptom)
        .await
        .map_err(|e| e.to_string())?;
    let outcome = async {
        tokio::time::sleep(patience.confirm).await;
        for _ in 0..2 {
            let now = live.health().await;
            let failing = now.failing_set();
            if failing != want {
                return Err(format!(
                    "started with its faults, the lab moved on from the symptom: failing {}",
                    now.describe_failing()
                ));
            }
            tokio::time::sleep(QUIET).await;
        }
        let before = live.health().await;
        let broke = repair_in(&live, picks, order, before, patience).await?.broke;
        let back = live.wait_health(Health::all_passed, patience.repair).await;
        if !back.all_passed() {
            return Err(format!("started with its faults, not repaired: {}", back.describe_failing()));
        }
        if !broke.is_empty() {
            return Err(format!("started with its faults, the repair is not safe: {}", broke.join(", ")));
        }
        Ok(())
    }
    .await;
    live.stop().await;
    outcome
}

/// The healthy lab, started once more if it did not come up ([`start_twice`]): one bad start
/// should not end a generation that has run for a quarter of an hour.
async fn start(lab: &Lab) -> Result<LiveLab, TaskError> {
    start_twice(&lab.name, || LiveLab::start(lab))
        .await
        .map_err(|e| gen_err(format!("lab {}: {e}", lab.name)))
}

impl IncidentGenerator {
    /// Task `index`, verified on the live lab (see the module). Healthy controls are not
    /// started: [`LiveLab::start`] already refuses a lab that is not healthy.
    pub async fn verified(
        &self,
        seed: u64,
        index: u64,
        patience: Patience,
    ) -> Result<(Task, Report), TaskError> {
        let started = Instant::now();
        let draw = self.draw(seed, index)?;
        let mut report = Report::default();
        if draw.picks.is_empty() {
            let task = self.task(seed, index, &draw, Some(vec![]))?;
            report.took = started.elapsed();
            return Ok((task, report));
        }
        let lab = self.labs().get(&draw.lab).ok_or_else(|| gen_err(format!("no lab {}", draw.lab)))?;
        let mut live = start(lab).await?;
        let mut picks: Vec<Pick> = Vec::new();
        let mut tried: BTreeSet<(FaultType, usize)> = BTreeSet::new();
        for (i, original) in draw.picks.iter().enumerate() {
            let mut pick = original.clone();
            loop {
                tried.insert((pick.fault_type, pick.candidate));
                match try_fault(&live, &pick, patience).await {
                    Ok(seen) => {
                        pick.fault.symptom = seen;
                        break;
                    }
                    Err(why) => {
                        report.redrawn.push(format!("{} on {}: {why}", pick.fault_type, pick.fault.device));
                        // A lab a failed repair left broken is started afresh.
                        if !live.health().await.all_passed() {
                            live.stop().await;
                            live = start(lab).await?;
                        }
                        let taken: BTreeSet<String> = picks
                            .iter()
                            .chain(&draw.picks[i + 1..])
                            .map(|p| p.fault.device.clone())
                            .collect();
                        pick = self.next_pick(&draw.lab, &pick, &taken, &tried).ok_or_else(|| {
                            gen_err(format!(
                                "task {index}: lab {} has no fault left that shows a symptom",
                                draw.lab
                            ))
                        })?;
                    }
                }
            }
            picks.push(pick);
        }
        // All together: the joint symptom, then the oracle's repair in each order until one is
        // safe step by step. Faults that interfere (a repair that does not undo its fault while
        // another is present, an LSA of a duplicate router-id outliving its repair, a repair
        // that breaks a check while another fault is present, in every order) fail here: the
        // last fault is then replaced as above, on a fresh lab, and the whole is tried again.
        let mut joint = Vec::new();
        let mut repair_order = Vec::new();
        // One fault: its own measurement (and its safe repair) is the joint one.
        let attempts = if picks.len() == 1 {
            joint = picks[0].fault.symptom.clone();
            repair_order = vec![0];
            0
        } else {
            MAX_JOINT_REDRAWS + 1
        };
        for attempt in 0..attempts {
            match try_joint(&live, &picks, patience).await {
                Ok((seen, order)) => {
                    joint = seen;
                    repair_order = order;
                    break;
                }
                Err(why) if attempt < MAX_JOINT_REDRAWS && picks.len() > 1 => {
                    let Some(last) = picks.pop() else { break };
                    report
                        .redrawn
                        .push(format!("{} on {} with the others: {why}", last.fault_type, last.fault.device));
                    live.stop().await;
                    live = start(lab).await?;
                    let taken: BTreeSet<String> = picks.iter().map(|p| p.fault.device.clone()).collect();
                    let mut pick = last;
                    loop {
                        pick = self.next_pick(&draw.lab, &pick, &taken, &tried).ok_or_else(|| {
                            gen_err(format!("task {index}: lab {} has no fault left that combines", draw.lab))
                        })?;
                        tried.insert((pick.fault_type, pick.candidate));
                        match try_fault(&live, &pick, patience).await {
                            Ok(seen) => {
                                pick.fault.symptom = seen;
                                break;
                            }
                            Err(why) => {
                                report
                                    .redrawn
                                    .push(format!("{} on {}: {why}", pick.fault_type, pick.fault.device));
                                if !live.health().await.all_passed() {
                                    live.stop().await;
                                    live = start(lab).await?;
                                }
                            }
                        }
                    }
                    picks.push(pick);
                }
                Err(why) => {
                    live.stop().await;
                    return Err(gen_err(format!(
                        "task {index} on lab {}: the faults together {why}",
                        draw.lab
                    )));
                }
            }
        }
        live.stop().await;
        let inject_at_start = if picks.iter().any(|p| !p.fault.fault_type.injects_at_start()) {
            false
        } else {
            match try_at_start(lab, &picks, &joint, &repair_order, patience).await {
                Ok(()) => true,
                Err(why) => {
                    report.at_start = Some(why);
                    false
                }
            }
        };
        let verified = Draw { lab: draw.lab.clone(), picks, repair_order, inject_at_start };
        let task = self.task(seed, index, &verified, Some(joint))?;
        report.took = started.elapsed();
        Ok((task, report))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::Fault;

    fn pick(device: &str, symptom: usize) -> Pick {
        Pick {
            fault_type: FaultType::InterfaceDown,
            candidate: 0,
            fault: Fault {
                fault_type: FaultType::InterfaceDown,
                device: device.into(),
                detail: String::new(),
                inject: vec![],
                repair: vec![],
                symptom: (0..symptom).map(|i| format!("check {i}")).collect(),
            },
        }
    }

    #[test]
    fn the_widest_symptom_is_repaired_first_then_every_other_order_once() {
        // r2's symptom covers the others': repairing it first brings checks back at once.
        let picks = [pick("r1", 1), pick("r2", 3), pick("r3", 1)];
        let all = orders(&picks);
        assert_eq!(all[0], vec![1, 2, 0], "widest first, the later injected first among equals");
        assert_eq!(all[1], vec![2, 1, 0], "then the last injected first, as before");
        assert_eq!(all.len(), 6);
        let distinct: BTreeSet<&Vec<usize>> = all.iter().collect();
        assert_eq!(distinct.len(), 6, "no order twice");
        // Equal symptoms: the last injected first, as the order always began.
        assert_eq!(orders(&[pick("r1", 2), pick("r2", 2)]), vec![vec![1, 0], vec![0, 1]]);
        // A duplicate router-id goes first, however narrow its symptom.
        let mut racing = pick("r1", 1);
        racing.fault.fault_type = FaultType::OspfDuplicateRouterId;
        assert_eq!(orders(&[racing, pick("r2", 3)])[0], vec![0, 1]);
    }
}
