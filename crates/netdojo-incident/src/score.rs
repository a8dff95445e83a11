//! The incident scores, read from the task and the trajectory (scorers are pure):
//!
//! - diagnosis: precision, recall and F1 of the agent's (device, type) pairs against the
//!   task's faults, and `diagnosed` when the two sets are equal;
//! - localisation: the same over devices only (`localised`);
//! - repair: `repaired` when every health check of the lab passes at the end;
//! - `correct` (netdojo-score's Correctness) needs both: the environment's outcome holds one
//!   check per health check and the [`DIAGNOSIS_CHECK`];
//! - per-step safety and unproductive changes come from the environment's state checks
//!   (netdojo-score's Safety and Productivity), steps, time and tokens from the runner.
//!
//! An agent's diagnosis is its last accepted `submit-diagnosis` call; none is an empty
//! diagnosis ("no fault"). Sets compare as sets: naming a fault twice counts it once.
//!
//! Empty sets (healthy controls, and agents that claim nothing) read as follows, so that each
//! measure is 1 exactly when the answer is right and 0 when it shares nothing with the truth:
//!
//! | truth | claimed | precision | recall | F1 |
//! |---|---|---|---|---|
//! | empty | empty | 1 | 1 | 1 |
//! | empty | some | 0 | 0 | 0 |
//! | some | empty | 0 | 0 | 0 |
//! | some | some | TP/claimed | TP/truth | 2TP/(truth+claimed) |

use std::collections::BTreeSet;

use netdojo_core::{Metric, Scorer, Task, Trajectory};
use serde_json::Value;

use crate::task::{Diagnosed, faults_of, tools, truth};

/// The outcome check that holds when the diagnosis equals the truth; every other check of an
/// incident outcome is a health check of the lab.
pub const DIAGNOSIS_CHECK: &str = "diagnosis";

/// How two sets agree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Agreement {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    /// The sets are equal.
    pub exact: bool,
}

/// Precision, recall and F1 of `claimed` against `truth`, with the empty cases of the module's
/// table.
pub fn agreement<T: Ord>(truth: &BTreeSet<T>, claimed: &BTreeSet<T>) -> Agreement {
    let exact = truth == claimed;
    if truth.is_empty() || claimed.is_empty() {
        let v = if exact { 1.0 } else { 0.0 };
        return Agreement { precision: v, recall: v, f1: v, exact };
    }
    let tp = truth.intersection(claimed).count() as f64;
    let (t, c) = (truth.len() as f64, claimed.len() as f64);
    Agreement { precision: tp / c, recall: tp / t, f1: 2.0 * tp / (t + c), exact }
}

/// The diagnosis a `submit-diagnosis` call's arguments hold; entries that do not parse are
/// left out (the environment refused such a call, so a scorer never sees one accepted).
pub fn parse_diagnosis(arguments: &Value) -> Result<Vec<Diagnosed>, String> {
    let faults = arguments.get("faults").ok_or("`faults` is missing")?;
    serde_json::from_value(faults.clone()).map_err(|e| format!("`faults`: {e}"))
}

/// The agent's diagnosis: its last accepted `submit-diagnosis`, or none.
pub fn claimed(episode: &Trajectory) -> BTreeSet<Diagnosed> {
    episode
        .steps
        .iter()
        .rev()
        .filter(|s| s.call.name == tools::SUBMIT && s.observation.ok && !s.invalid)
        .find_map(|s| parse_diagnosis(&s.call.arguments).ok())
        .map(|d| d.into_iter().collect())
        .unwrap_or_default()
}

/// Diagnosis and localisation against the truth.
pub fn diagnosis_scores(
    truth: &BTreeSet<Diagnosed>,
    claimed: &BTreeSet<Diagnosed>,
) -> (Agreement, Agreement) {
    let devices = |s: &BTreeSet<Diagnosed>| s.iter().map(|d| d.device.clone()).collect::<BTreeSet<_>>();
    (agreement(truth, claimed), agreement(&devices(truth), &devices(claimed)))
}

/// The incident metrics besides netdojo-score's: `diagnosis_precision`, `diagnosis_recall`,
/// `diagnosis_f1`, `diagnosed`; `localisation_precision`, `localisation_recall`,
/// `localisation_f1`, `localised`; `repaired`; `healthy_control` (the task has no fault, for
/// filtering).
#[derive(Debug, Clone, Copy, Default)]
pub struct IncidentScore;

impl Scorer for IncidentScore {
    fn name(&self) -> &str {
        "incident"
    }

    fn score(&self, task: &Task, episode: &Trajectory) -> Vec<Metric> {
        // A task whose faults do not read scores nothing: the environment refused it at reset.
        let Ok(faults) = faults_of(task) else { return vec![] };
        let truth: BTreeSet<Diagnosed> = truth(&faults).into_iter().collect();
        let (diagnosis, localisation) = diagnosis_scores(&truth, &claimed(episode));
        let repaired = episode.outcome.as_ref().is_some_and(|o| {
            let mut health = o.checks.iter().filter(|c| c.name != DIAGNOSIS_CHECK).peekable();
            health.peek().is_some() && health.all(|c| c.passed)
        });
        vec![
            Metric::value("diagnosis_precision", diagnosis.precision),
            Metric::value("diagnosis_recall", diagnosis.recall),
            Metric::value("diagnosis_f1", diagnosis.f1),
            Metric::pass("diagnosed", diagnosis.exact),
            Metric::value("localisation_precision", localisation.precision),
            Metric::value("localisation_recall", localisation.recall),
            Metric::value("localisation_f1", localisation.f1),
            Metric::pass("localised", localisation.exact),
            Metric::pass("repaired", repaired),
            Metric::pass("healthy_control", faults.is_empty()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::FaultType;
    use crate::fault::{Action, Fault};
    use crate::task::{core_fault, submit_call};
    use netdojo_core::{
        Check, EndReason, Observation, Outcome, StateCheck, Step, TaskKind, ToolCall, Trajectory,
    };
    use serde_json::json;

    fn d(device: &str, t: FaultType) -> Diagnosed {
        Diagnosed { device: device.into(), fault_type: t }
    }

    fn set(items: &[Diagnosed]) -> BTreeSet<Diagnosed> {
        items.iter().cloned().collect()
    }

    #[test]
    fn empty_sets_read_as_the_table_says() {
        let none = set(&[]);
        let one = set(&[d("r1", FaultType::InterfaceDown)]);
        assert_eq!(agreement(&none, &none), Agreement { precision: 1.0, recall: 1.0, f1: 1.0, exact: true });
        assert_eq!(agreement(&none, &one), Agreement { precision: 0.0, recall: 0.0, f1: 0.0, exact: false });
        assert_eq!(agreement(&one, &none), Agreement { precision: 0.0, recall: 0.0, f1: 0.0, exact: false });
    }

    #[test]
    fn partial_answers_score_their_overlap() {
        let truth = set(&[d("r1", FaultType::InterfaceDown), d("r3", FaultType::OspfAreaMismatch)]);
        // One right, one wrong type on the right device, one extra.
        let claimed = set(&[
            d("r1", FaultType::InterfaceDown),
            d("r3", FaultType::OspfHelloMismatch),
            d("r5", FaultType::StaticBlackhole),
        ]);
        let (diag, loc) = diagnosis_scores(&truth, &claimed);
        assert!((diag.precision - 1.0 / 3.0).abs() < 1e-12);
        assert!((diag.recall - 0.5).abs() < 1e-12);
        assert!((diag.f1 - 0.4).abs() < 1e-12, "2*1/(2+3)");
        assert!(!diag.exact);
        // Devices: truth {r1, r3}, claimed {r1, r3, r5}.
        assert!((loc.precision - 2.0 / 3.0).abs() < 1e-12);
        assert!((loc.recall - 1.0).abs() < 1e-12);
        assert!((loc.f1 - 0.8).abs() < 1e-12);
        assert!(!loc.exact);
        let (diag, loc) = diagnosis_scores(&truth, &truth);
        assert!(diag.exact && loc.exact && diag.f1 == 1.0);
    }

    fn fault(device: &str, t: FaultType) -> Fault {
        Fault {
            fault_type: t,
            device: device.into(),
            detail: String::new(),
            inject: vec![Action::Linux { device: device.into(), line: "ip link set eth1 down".into() }],
            repair: vec![Action::Linux { device: device.into(), line: "ip link set eth1 up".into() }],
            symptom: vec!["reach h1 -> 10.0.2.10".into()],
        }
    }

    fn task(faults: &[Fault]) -> Task {
        Task {
            id: "t".into(),
            application: "incident".into(),
            level: faults.len() as u8,
            label: "x".into(),
            domain: None,
            seed: None,
            query: "q".into(),
            setup: json!(null),
            kind: TaskKind::Reactive { faults: faults.iter().map(core_fault).collect(), repair: vec![] },
        }
    }

    fn step(call: ToolCall, ok: bool) -> Step {
        let observation =
            if ok { Observation::ok(&call, "ok", None) } else { Observation::error(&call, "no") };
        Step {
            index: 0,
            turn: 0,
            reasoning: String::new(),
            call,
            observation,
            invalid: false,
            check: StateCheck::safe(),
            at_ms: 0,
            duration_ms: 0,
            usage: None,
        }
    }

    fn episode(steps: Vec<Step>, health: &[bool]) -> Trajectory {
        let mut t = Trajectory::new("t", "a");
        t.steps = steps;
        t.end = EndReason::Finished;
        t.outcome = Some(Outcome {
            checks: health.iter().enumerate().map(|(i, p)| Check::new(format!("c{i}"), *p, "")).collect(),
            export: json!(null),
        });
        t
    }

    fn metric(metrics: &[Metric], name: &str) -> f64 {
        metrics.iter().find(|m| m.name == name).map(|m| m.value.as_f64()).unwrap_or(f64::NAN)
    }

    #[test]
    fn the_last_accepted_diagnosis_counts_and_repair_is_separate() {
        let faults = [fault("r2", FaultType::InterfaceDown)];
        let right = submit_call(&[d("r2", FaultType::InterfaceDown)]);
        let wrong = submit_call(&[d("r1", FaultType::InterfaceDown)]);
        let refused =
            ToolCall::new(tools::SUBMIT, json!({"faults": [{"device": "r9", "type": "interface_down"}]}));
        // Right, then wrong: the wrong one stands. A refused call after it changes nothing.
        let ep =
            episode(vec![step(right.clone(), true), step(wrong, true), step(refused, false)], &[true, true]);
        let m = IncidentScore.score(&task(&faults), &ep);
        assert_eq!(metric(&m, "diagnosis_f1"), 0.0);
        assert_eq!(metric(&m, "localised"), 0.0);
        assert_eq!(metric(&m, "repaired"), 1.0, "diagnosed wrong, repaired right");
        // Right diagnosis, a health check still failing: diagnosed, not repaired.
        let ep = episode(vec![step(right, true)], &[true, false]);
        let m = IncidentScore.score(&task(&faults), &ep);
        assert_eq!((metric(&m, "diagnosed"), metric(&m, "repaired")), (1.0, 0.0));
        assert_eq!(metric(&m, "healthy_control"), 0.0);
    }

    #[test]
    fn a_healthy_control_wants_no_diagnosis() {
        let control = task(&[]);
        // No submission at all: an empty diagnosis, which is right.
        let m = IncidentScore.score(&control, &episode(vec![], &[true]));
        assert_eq!(
            (metric(&m, "diagnosis_f1"), metric(&m, "diagnosed"), metric(&m, "repaired")),
            (1.0, 1.0, 1.0)
        );
        assert_eq!(metric(&m, "healthy_control"), 1.0);
        // A false alarm scores 0.
        let alarm = submit_call(&[d("r1", FaultType::ForwardingOff)]);
        let m = IncidentScore.score(&control, &episode(vec![step(alarm, true)], &[true]));
        assert_eq!((metric(&m, "diagnosis_precision"), metric(&m, "diagnosis_f1")), (0.0, 0.0));
        // A fault task answered with nothing scores 0, and an outcome without health checks
        // is not a repair.
        let faulty = task(&[fault("r2", FaultType::InterfaceDown)]);
        let m = IncidentScore.score(&faulty, &episode(vec![], &[]));
        assert_eq!((metric(&m, "diagnosis_recall"), metric(&m, "repaired")), (0.0, 0.0));
    }

    #[test]
    fn the_diagnosis_check_is_not_a_health_check() {
        let faults = [fault("r2", FaultType::InterfaceDown)];
        let mut ep = episode(vec![], &[true]);
        if let Some(o) = &mut ep.outcome {
            o.checks.push(Check::new(DIAGNOSIS_CHECK, false, ""));
        }
        let m = IncidentScore.score(&task(&faults), &ep);
        assert_eq!(metric(&m, "repaired"), 1.0);
    }
}
