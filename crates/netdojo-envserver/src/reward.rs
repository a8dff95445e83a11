//! Rewards: the episode's correctness at its end, and optional per-step shaping.
//!
//! The final reward is the scorers' correctness metric of the episode (`correct`: the answer
//! right, the pingmesh healed, the testcases passed...; an environment may name another metric,
//! a diagnosis F1 for instance), 1.0 or 0.0 for a pass, the value itself for a number. An episode
//! that errored (a failure outside the agent's control) gets 0 and says why in `info.error`.
//!
//! Shaping (off unless asked for) adds to each step, from the state check after it and the one
//! before it:
//!
//! - `progress`: the goal measure's gain over the step, as a fraction of the whole: the pairs
//!   that answer a ping (routing: `received / sent` of the check's summary) or the policy
//!   mismatches removed (k8s: `mismatches`, as a fraction of the episode's first count);
//!   0 where the check measures no progress (dcgraph);
//! - `unsafe`: the step broke a constraint (a pair that worked and does not any more);
//! - `unproductive`: the step changed the network and the goal measure did not improve;
//! - `failed`: the call was refused or failed (`ok: false`: unknown tool, bad arguments,
//!   refused command).
//!
//! `shaping = progress_weight · progress − unsafe_penalty · unsafe − unproductive_penalty ·
//! unproductive − failed_penalty · failed`. Every term is in the step's `info.shaping`, so a
//! trainer can recompute the reward with weights of its own.

use netdojo_core::{EpisodeRecord, EpisodeStatus, StateCheck};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The metric whose value is an episode's final reward, unless an environment names another.
pub const CORRECTNESS_METRIC: &str = "correct";

/// Per-step shaping weights (all ≥ 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Shaping {
    pub progress_weight: f64,
    pub unsafe_penalty: f64,
    pub unproductive_penalty: f64,
    pub failed_penalty: f64,
}

impl Default for Shaping {
    /// Small beside the final reward of 1: a whole repair's progress is worth 0.5, a broken pair
    /// costs 0.2, a change that did nothing 0.1, a refused call 0.05.
    fn default() -> Self {
        Self { progress_weight: 0.5, unsafe_penalty: 0.2, unproductive_penalty: 0.1, failed_penalty: 0.05 }
    }
}

/// The goal measure of a state check, where it has one: higher is better.
fn measure(check: &StateCheck) -> Option<f64> {
    let summary = check.summary.as_ref()?;
    if let (Some(received), Some(sent)) =
        (summary.get("received").and_then(Value::as_f64), summary.get("sent").and_then(Value::as_f64))
    {
        return (sent > 0.0).then(|| received / sent);
    }
    summary.get("mismatches").and_then(Value::as_f64).map(|m| -m)
}

/// The scale of a measure whose values are counts (k8s's mismatches): the first check's count.
fn scale(first: &StateCheck) -> f64 {
    match first.summary.as_ref().and_then(|s| s.get("mismatches")).and_then(Value::as_f64) {
        Some(m) if m > 0.0 => m,
        _ => 1.0,
    }
}

impl Shaping {
    /// The terms and value of one step: `before` is the check before it, `first` the
    /// episode's initial check, `after` the check after it, `ok` whether the call succeeded.
    pub fn step(&self, first: &StateCheck, before: &StateCheck, after: &StateCheck, ok: bool) -> Value {
        let progress = match (measure(before), measure(after)) {
            (Some(b), Some(a)) => (a - b) / scale(first),
            _ => 0.0,
        };
        let unsafe_step = !after.safe;
        let value = self.progress_weight * progress
            - self.unsafe_penalty * f64::from(u8::from(unsafe_step))
            - self.unproductive_penalty * f64::from(u8::from(after.unproductive))
            - self.failed_penalty * f64::from(u8::from(!ok));
        json!({
            "progress": progress,
            "unsafe": unsafe_step,
            "unproductive": after.unproductive,
            "failed": !ok,
            "weights": self,
            "value": value,
        })
    }
}

/// The final reward of a finished episode: its `metric` as a number; 0 when it errored or the
/// scorers gave no such metric.
pub fn final_reward(record: &EpisodeRecord, metric: &str) -> f64 {
    if record.status == EpisodeStatus::Errored {
        return 0.0;
    }
    record.metric(metric).map_or(0.0, |v| v.as_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ping(received: u64, sent: u64, safe: bool, unproductive: bool) -> StateCheck {
        StateCheck {
            safe,
            violations: vec![],
            summary: Some(json!({"received": received, "sent": sent})),
            unproductive,
        }
    }

    #[test]
    fn a_repair_step_earns_its_share_of_the_pings() {
        let shaping = Shaping::default();
        let first = ping(10, 20, true, false);
        let terms = shaping.step(&first, &first, &ping(20, 20, true, false), true);
        assert_eq!(terms["progress"], json!(0.5));
        assert_eq!(terms["value"], json!(0.25));
    }

    #[test]
    fn breaking_a_pair_and_doing_nothing_cost() {
        let shaping = Shaping::default();
        let first = ping(10, 20, true, false);
        let broke = shaping.step(&first, &first, &ping(9, 20, false, true), true);
        let expected = 0.5 * (-1.0 / 20.0) - 0.2 - 0.1;
        assert!((broke["value"].as_f64().expect("value") - expected).abs() < 1e-12, "{broke}");
        let refused = shaping.step(&first, &first, &first, false);
        assert_eq!(refused["value"], json!(-0.05));
    }

    #[test]
    fn mismatches_count_against_the_first_check() {
        let shaping = Shaping { progress_weight: 1.0, ..Shaping::default() };
        let at = |m: u64| StateCheck { summary: Some(json!({"mismatches": m})), ..StateCheck::safe() };
        let terms = shaping.step(&at(4), &at(4), &at(1), true);
        assert_eq!(terms["progress"], json!(0.75));
        // No measure (dcgraph's graph digest): no progress term.
        let digest = StateCheck { summary: Some(json!({"nodes": 3})), ..StateCheck::safe() };
        assert_eq!(shaping.step(&digest, &digest, &digest, true)["value"], json!(0.0));
    }
}
