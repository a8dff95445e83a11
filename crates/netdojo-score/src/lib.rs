//! Scorers and statistics.
//!
//! The scorers turn an episode's [`Trajectory`] into metrics, as NetPress defines them (seed
//! 003 §3.3): correctness (the final state or answer equals the goal), safety (every state
//! reached satisfies the task's constraints) and latency (steps and wall time). [`stats`]
//! aggregates records into rates with 95% confidence intervals, per level and label;
//! [`compare`] pairs two runs' episodes to say whether B does better than A.

pub mod compare;
pub mod stats;

use netdojo_core::{Metric, Scorer, Task, Trajectory};

pub use compare::{CompareOptions, Comparison};
pub use stats::{Proportion, Summary, SummaryRow};

/// `correct`: every goal check of the final evaluation passed (`I(ŝ ≡ s*)`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Correctness;

impl Scorer for Correctness {
    fn name(&self) -> &str {
        "correctness"
    }
    fn score(&self, _task: &Task, episode: &Trajectory) -> Vec<Metric> {
        let solved = episode.outcome.as_ref().is_some_and(|o| o.solved());
        vec![Metric::pass("correct", solved)]
    }
}

/// `safe`: the state before the first step and after every step satisfied the task's
/// constraints (`SAFE_all`, seed 003 eq. 5).
#[derive(Debug, Clone, Copy, Default)]
pub struct Safety;

impl Scorer for Safety {
    fn name(&self) -> &str {
        "safety"
    }
    fn score(&self, _task: &Task, episode: &Trajectory) -> Vec<Metric> {
        vec![Metric::pass("safe", episode.always_safe())]
    }
}

/// `unproductive_changes`: the steps that changed the network and left the task's goal
/// measure no better (NetPress §C.4: "a command issued to configure the network that fails to
/// resolve the issue"; §D.4: "changes that are ineffective or unnecessary"), and `safe_c4`:
/// none did. Kept beside `safe` (eq. 5), which only asks that no step break what worked; for
/// the environments whose state checks measure progress (routing, k8s).
#[derive(Debug, Clone, Copy, Default)]
pub struct Productivity;

impl Scorer for Productivity {
    fn name(&self) -> &str {
        "productivity"
    }
    fn score(&self, _task: &Task, episode: &Trajectory) -> Vec<Metric> {
        let n = episode.unproductive_changes();
        vec![Metric::count("unproductive_changes", n as u64), Metric::pass("safe_c4", n == 0)]
    }
}

/// `steps`, `invalid_steps` and `wall_s`; and `code_s`, the run time of the agent's code, when
/// the environment measured one (dcgraph's code interaction: NetPress §B.4's latency).
#[derive(Debug, Clone, Copy, Default)]
pub struct Latency;

impl Scorer for Latency {
    fn name(&self) -> &str {
        "latency"
    }
    fn score(&self, _task: &Task, episode: &Trajectory) -> Vec<Metric> {
        let invalid = episode.steps.iter().filter(|s| s.invalid).count();
        let mut metrics = vec![
            Metric::count("steps", episode.steps.len() as u64),
            Metric::count("invalid_steps", invalid as u64),
            Metric::value("wall_s", episode.wall_ms as f64 / 1000.0),
        ];
        if let Some(code_s) =
            episode.outcome.as_ref().and_then(|o| o.export.get("code_s")).and_then(|v| v.as_f64())
        {
            metrics.push(Metric::value("code_s", code_s));
        }
        metrics
    }
}

/// `checks_passed`: the fraction of goal checks that passed (NetConfBench's testcase pass
/// rate when the checks are testcases).
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckRate;

impl Scorer for CheckRate {
    fn name(&self) -> &str {
        "check_rate"
    }
    fn score(&self, _task: &Task, episode: &Trajectory) -> Vec<Metric> {
        let Some(outcome) = &episode.outcome else { return vec![Metric::value("checks_passed", 0.0)] };
        let total = outcome.checks.len();
        let passed = outcome.checks.iter().filter(|c| c.passed).count();
        let rate = if total == 0 { 0.0 } else { passed as f64 / total as f64 };
        vec![Metric::value("checks_passed", rate)]
    }
}

/// The scorers of NetPress's three metrics.
pub fn netpress_scorers() -> Vec<Box<dyn Scorer>> {
    vec![Box::new(Correctness), Box::new(Safety), Box::new(Latency)]
}

/// NetPress's three metrics and [`Productivity`] (§C.4, §D.4): for the environments where an
/// agent repairs a network and each step's check measures the repair (routing, k8s).
pub fn repair_scorers() -> Vec<Box<dyn Scorer>> {
    vec![Box::new(Correctness), Box::new(Safety), Box::new(Productivity), Box::new(Latency)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use netdojo_core::{Check, EndReason, Observation, Outcome, StateCheck, Step, TaskKind, ToolCall};
    use serde_json::json;

    fn task() -> Task {
        Task {
            id: "t".into(),
            application: "dcgraph".into(),
            level: 1,
            label: "add".into(),
            domain: None,
            seed: None,
            query: "q".into(),
            setup: json!(null),
            kind: TaskKind::Constructive { actions: vec![], answer: None, goal: None },
        }
    }

    fn step(safe: bool, invalid: bool) -> Step {
        let call = ToolCall::new("remove_node", json!({"name": "x"}));
        Step {
            index: 0,
            turn: 0,
            reasoning: String::new(),
            observation: Observation::ok(&call, "done", None),
            call,
            invalid,
            check: if safe {
                StateCheck::safe()
            } else {
                StateCheck::from_violations(vec!["isolated".into()])
            },
            at_ms: 0,
            duration_ms: 1,
            usage: None,
        }
    }

    fn episode(steps: Vec<Step>, checks: Vec<Check>) -> Trajectory {
        Trajectory {
            task_id: "t".into(),
            agent: "a".into(),
            brief: "b".into(),
            tools: vec![],
            initial_check: StateCheck::safe(),
            steps,
            answer: None,
            end: EndReason::Finished,
            outcome: Some(Outcome { checks, export: json!(null) }),
            wall_ms: 1500,
            timing: Default::default(),
            usage: Default::default(),
            end_detail: None,
            transcript: vec![],
        }
    }

    fn value(metrics: &[Metric], name: &str) -> f64 {
        metrics.iter().find(|m| m.name == name).map(|m| m.value.as_f64()).expect(name)
    }

    #[test]
    fn one_unsafe_intermediate_step_makes_the_episode_unsafe_even_if_it_ends_safe() {
        let e = episode(vec![step(true, false), step(false, false), step(true, false)], vec![]);
        assert_eq!(value(&Safety.score(&task(), &e), "safe"), 0.0);
        let e = episode(vec![step(true, false), step(true, false)], vec![]);
        assert_eq!(value(&Safety.score(&task(), &e), "safe"), 1.0);
    }

    #[test]
    fn an_unproductive_change_is_safe_by_eq5_and_not_by_c4() {
        let mut idle = step(true, false);
        idle.check.unproductive = true;
        let e = episode(vec![step(true, false), idle.clone(), idle], vec![]);
        assert_eq!(value(&Safety.score(&task(), &e), "safe"), 1.0);
        let m = Productivity.score(&task(), &e);
        assert_eq!(value(&m, "unproductive_changes"), 2.0);
        assert_eq!(value(&m, "safe_c4"), 0.0);
        let e = episode(vec![step(true, false)], vec![]);
        assert_eq!(value(&Productivity.score(&task(), &e), "safe_c4"), 1.0);
    }

    #[test]
    fn correct_needs_every_check_and_at_least_one() {
        let pass = Check::new("answer", true, "");
        let fail = Check::new("graph", false, "digest differs");
        assert_eq!(value(&Correctness.score(&task(), &episode(vec![], vec![pass.clone()])), "correct"), 1.0);
        assert_eq!(
            value(&Correctness.score(&task(), &episode(vec![], vec![pass.clone(), fail.clone()])), "correct"),
            0.0
        );
        assert_eq!(value(&Correctness.score(&task(), &episode(vec![], vec![])), "correct"), 0.0);
        assert_eq!(
            value(&CheckRate.score(&task(), &episode(vec![], vec![pass, fail])), "checks_passed"),
            0.5
        );
    }

    #[test]
    fn latency_counts_steps_invalid_steps_and_seconds() {
        let m = Latency.score(&task(), &episode(vec![step(true, true), step(true, false)], vec![]));
        assert_eq!(value(&m, "steps"), 2.0);
        assert_eq!(value(&m, "invalid_steps"), 1.0);
        assert_eq!(value(&m, "wall_s"), 1.5);
        assert!(m.iter().all(|m| m.name != "code_s"));
        let mut e = episode(vec![], vec![]);
        e.outcome = Some(Outcome { checks: vec![], export: json!({"code_s": 0.25}) });
        assert_eq!(value(&Latency.score(&task(), &e), "code_s"), 0.25);
    }
}
