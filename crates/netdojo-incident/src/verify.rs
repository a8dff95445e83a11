//! Verified injection, for `generate --env incident`: each drawn fault is injected alone on the
//! live lab, the checks it breaks are measured (twice, 2 s apart: only checks that fail both
//! times count, so a check that fails while routing reconverges is not a symptom), and it is
//! repaired and the lab seen healthy again. A fault that breaks nothing, or whose repair does
//! not bring the lab back, is replaced by [`IncidentGenerator::next_pick`], deterministically.
//! Then all of the task's faults are injected together, their joint symptom measured the same
//! way, and the oracle's repair checked to bring the lab back.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use netdojo_core::{Task, TaskError};

use crate::catalogue::FaultType;
use crate::generate::{Draw, IncidentGenerator, Pick};
use crate::health::Health;
use crate::lab::Lab;
use crate::live::LiveLab;
use crate::task::APPLICATION;

/// How long verification waits at each stage.
#[derive(Debug, Clone, Copy)]
pub struct Patience {
    /// For an injected fault's first failing check.
    pub symptom: Duration,
    /// Between the two measurements of a symptom.
    pub confirm: Duration,
    /// For the lab to pass every check after a repair.
    pub repair: Duration,
}

impl Default for Patience {
    fn default() -> Self {
        Self {
            symptom: Duration::from_secs(8),
            confirm: Duration::from_secs(2),
            repair: Duration::from_secs(15),
        }
    }
}

/// What verifying one task found, for the log.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Faults replaced, as `type on device: why`.
    pub redrawn: Vec<String>,
    pub took: Duration,
}

fn gen_err(message: String) -> TaskError {
    TaskError::Generate { generator: APPLICATION.into(), message }
}

/// The checks that fail now and still fail `confirm` later.
async fn symptom(live: &LiveLab, patience: Patience) -> Vec<String> {
    let first = live.wait_health(|h: &Health| !h.all_passed(), patience.symptom).await;
    if first.all_passed() {
        return vec![];
    }
    tokio::time::sleep(patience.confirm).await;
    let second = live.health().await;
    let again: BTreeSet<&str> = second.failing().into_iter().collect();
    first.failing().into_iter().filter(|n| again.contains(n)).map(str::to_string).collect()
}

/// Applies a list of actions; `Err` names the first that failed.
async fn apply_all(live: &LiveLab, actions: &[crate::fault::Action]) -> Result<(), String> {
    for action in actions {
        live.apply(action).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// One fault alone: its symptom, and whether its repair brought the lab back.
async fn try_fault(live: &LiveLab, pick: &Pick, patience: Patience) -> Result<Vec<String>, String> {
    apply_all(live, &pick.fault.inject).await.map_err(|e| format!("injection failed: {e}"))?;
    let seen = symptom(live, patience).await;
    apply_all(live, &pick.fault.repair).await.map_err(|e| format!("repair failed: {e}"))?;
    let back = live.wait_health(Health::all_passed, patience.repair).await;
    if !back.all_passed() {
        return Err(format!("the lab is not healthy after the repair: {}", back.describe_failing()));
    }
    if seen.is_empty() {
        return Err("no health check fails".into());
    }
    Ok(seen)
}

/// How many times the last fault of a task is replaced when the faults together fail.
const MAX_JOINT_REDRAWS: usize = 4;

/// All `picks` injected together: the checks they break; `Err` when they break none or their
/// repairs (last fault first) do not bring the lab back.
async fn try_joint(live: &LiveLab, picks: &[Pick], patience: Patience) -> Result<Vec<String>, String> {
    for pick in picks {
        apply_all(live, &pick.fault.inject).await.map_err(|e| format!("injection failed: {e}"))?;
    }
    let seen = symptom(live, patience).await;
    for pick in picks.iter().rev() {
        apply_all(live, &pick.fault.repair).await.map_err(|e| format!("repair failed: {e}"))?;
    }
    let back = live.wait_health(Health::all_passed, patience.repair).await;
    if !back.all_passed() {
        return Err(format!("are not repaired by their repairs: {}", back.describe_failing()));
    }
    if seen.is_empty() {
        return Err("break no check".into());
    }
    Ok(seen)
}

async fn start(lab: &Lab) -> Result<LiveLab, TaskError> {
    LiveLab::start(lab).await.map_err(|e| gen_err(format!("lab {}: {e}", lab.name)))
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
        // All together: the joint symptom, then the oracle's repair (last fault first). Faults
        // that interfere (a repair that does not undo its fault while another is present, an
        // LSA of a duplicate router-id outliving its repair) fail here: the last fault is then
        // replaced as above, on a fresh lab, and the whole is tried again.
        let mut joint = Vec::new();
        // One fault: its own measurement is the joint one.
        let attempts = if picks.len() == 1 {
            joint = picks[0].fault.symptom.clone();
            0
        } else {
            MAX_JOINT_REDRAWS + 1
        };
        for attempt in 0..attempts {
            match try_joint(&live, &picks, patience).await {
                Ok(seen) => {
                    joint = seen;
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
        let verified = Draw { lab: draw.lab.clone(), picks };
        let task = self.task(seed, index, &verified, Some(joint))?;
        report.took = started.elapsed();
        Ok((task, report))
    }
}
