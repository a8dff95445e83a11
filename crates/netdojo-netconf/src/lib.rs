//! netdojo-netconf: NetConfBench (seed 001) on FRRouting routers.
//!
//! - [`env`]: the environment: routers from a task's topology and startup configurations, the
//!   Agent-Network Interface (§4.2) as tools, the Task Evaluation Interface (§4.3).
//! - [`cmdscore`]: the command score: configuration paths, hierarchical diff, wildcards, F1.
//! - [`generate`]: a seeded generator of static-routing and OSPF tasks in the seed's schema.

pub mod cmdscore;
pub mod env;
pub mod generate;

pub use env::{NetconfEnv, NetconfFactory};
pub use generate::NetconfGenerator;

use netdojo_core::{Metric, Scorer, Task, Trajectory};

/// NetConfBench's command score: `command_precision`, `command_recall` and `command_f1` of
/// the agent's effective edits against the ground truth's ([`cmdscore`]), as `evaluate`
/// exported them. The testcase score is `netdojo_score::CheckRate` (`checks_passed`).
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
