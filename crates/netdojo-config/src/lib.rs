//! netdojo-config: device configurations as data, whatever runs the device.
//!
//! - [`ani`]: the four tools of seed 001's Agent-Network Interface, shared by every backend.
//! - [`config`]: configurations as trees: FRR and IOS-style running configs, nftables and tc
//!   state; parsed from `show running-config` output or built by applying commands.
//! - [`diff`]: their hierarchical diff, with ordered lists (ACL entries, route-map sequences).
//! - [`score`]: NetConfBench's command score (seed 001 §4.3): the agent's effective edits
//!   against the ground truth's, with consistent wildcard renaming of non-essential names.
//! - [`shapes`]: large generated inputs for the benchmark (`cargo xtask bench config`) and the
//!   tests that they read and diff in linear time.
//!
//! Backends (FRR on namespaces, GNS3, MCP devices) export configurations; this crate judges
//! them, so no backend needs another to be scored the same way.

pub mod ani;
pub mod config;
pub mod diff;
pub mod score;
pub mod shapes;

use netdojo_core::{Metric, Scorer, Task, Trajectory};

/// NetConfBench's command score: `command_precision`, `command_recall` and `command_f1` of
/// the agent's effective edits against the ground truth's ([`score`]), as the environment's
/// `evaluate` exported them (`export.command_score`). The testcase score is
/// `netdojo_score::CheckRate` (`checks_passed`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CommandScore;

impl Scorer for CommandScore {
    fn name(&self) -> &str {
        "command_score"
    }
    fn score(&self, _task: &Task, episode: &Trajectory) -> Vec<Metric> {
        let score = episode.outcome.as_ref().map(|o| &o.export["command_score"]);
        let value = |k: &str| score.and_then(|s| s[k].as_f64()).unwrap_or(0.0);
        vec![
            Metric::value("command_precision", value("precision")),
            Metric::value("command_recall", value("recall")),
            Metric::value("command_f1", value("f1")),
        ]
    }
}
