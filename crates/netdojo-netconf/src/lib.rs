//! netdojo-netconf: NetConfBench (seed 001) on FRRouting routers.
//!
//! - [`env`]: the environment: routers from a task's topology and startup configurations, the
//!   Agent-Network Interface (§4.2) as tools, the Task Evaluation Interface (§4.3).
//! - Configurations as trees, their diff and the command score live in netdojo-config, which
//!   every backend that runs NetConfBench tasks shares.
//! - [`routes`]: the seed's §4.1 testcases (`expected_result`) against FRR's routing table.
//! - [`ios`]: tasks written in Cisco IOS style, translated by netdojo-ios (interface names,
//!   startup configurations, ground truth, the agent's commands, show commands and testcases).
//! - [`generate`]: a seeded generator of static-routing and OSPF tasks in the seed's schema.

pub mod env;
pub mod generate;
pub mod ios;
pub mod routes;

pub use env::{NetconfEnv, NetconfFactory};
pub use generate::NetconfGenerator;

use std::sync::Arc;

use netdojo_core::{Metric, Scorer, Task, TaskKind, Trajectory};
use netdojo_embed::Embedder;

/// NetConfBench's reasoning score: the cosine similarity of the sentence embeddings
/// (all-MiniLM-L6-v2) of the agent's reasoning and the task's ground-truth reasoning. The seed
/// condenses a multi-turn trace with an auxiliary LLM first; with none configured the turns'
/// reasoning is concatenated, and the metric says so by its name: `reasoning_concat`.
#[derive(Debug, Clone)]
pub struct ReasoningScore {
    embedder: Arc<Embedder>,
}

impl ReasoningScore {
    pub fn new(embedder: Arc<Embedder>) -> Self {
        Self { embedder }
    }
}

impl Scorer for ReasoningScore {
    fn name(&self) -> &str {
        "reasoning_score"
    }
    fn score(&self, task: &Task, episode: &Trajectory) -> Vec<Metric> {
        let TaskKind::Config(config) = &task.kind else { return vec![] };
        let reasoning: Vec<&str> =
            episode.steps.iter().map(|s| s.reasoning.trim()).filter(|r| !r.is_empty()).collect();
        let similarity = if reasoning.is_empty() || config.ground_truth_reasoning.trim().is_empty() {
            0.0
        } else {
            match self.embedder.similarity(&reasoning.join("\n"), &config.ground_truth_reasoning) {
                Ok(s) => f64::from(s).clamp(0.0, 1.0),
                Err(e) => {
                    tracing::warn!("task {}: reasoning score: {e}", task.id);
                    0.0
                }
            }
        };
        vec![Metric::value("reasoning_concat", similarity)]
    }
}
