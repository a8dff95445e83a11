//! netdojo-netconf: NetConfBench (seed 001) on FRRouting routers.
//!
//! - [`env`]: the environment: routers from a task's topology and startup configurations, the
//!   Agent-Network Interface (§4.2) as tools, the Task Evaluation Interface (§4.3).
//! - Configurations as trees, their diff and the command score live in netdojo-config, which
//!   every backend that runs NetConfBench tasks shares.
//! - [`routes`]: the seed's §4.1 testcases (`expected_result`) against FRR's routing table.
//! - [`ios`]: tasks written in Cisco IOS style, translated by netdojo-ios (interface names,
//!   startup configurations, ground truth, the agent's commands, show commands and testcases).
//! - [`quiet`]: the early verdict: a failing episode's testcases are not rerun until the
//!   convergence time is up once the network is provably quiescent (docs/netconf.md).
//! - [`generate`]: a seeded generator of static-routing and OSPF tasks in the seed's schema.

pub mod env;
pub mod generate;
pub mod ios;
pub mod quiet;
pub mod routes;

pub use env::{NetconfEnv, NetconfFactory, Phases};
pub use generate::NetconfGenerator;

use std::sync::Arc;

use netdojo_core::{Metric, Scorer, Task, TaskKind, Trajectory};
use netdojo_embed::Embedder;

/// The auxiliary LLM of the seed's reasoning score (§3.1): it condenses an agent's multi-turn
/// trace into one explanation before the embedding. Implemented at the edge (xtask's judge over
/// any OpenAI-compatible endpoint), so this crate needs no HTTP client.
pub trait Condenser: Send + Sync + std::fmt::Debug {
    /// The trace condensed, and the tokens the call used.
    fn condense(&self, trace: &str) -> Result<Condensed, String>;
}

/// A condensed trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Condensed {
    pub text: String,
    /// Prompt and completion tokens of the judge's call(s).
    pub tokens: u64,
}

/// What the judge reads of an episode: each turn's reasoning and the calls it made.
pub fn trace_of(episode: &Trajectory) -> String {
    let mut out = String::new();
    for (i, s) in episode.steps.iter().enumerate() {
        let reasoning = s.reasoning.trim();
        if !reasoning.is_empty() {
            out.push_str(&format!("Step {}: {reasoning}\n", i + 1));
        }
        out.push_str(&format!("Step {} action: {} {}\n", i + 1, s.call.name, s.call.arguments));
    }
    out
}

/// NetConfBench's reasoning score: the cosine similarity of the sentence embeddings
/// (all-MiniLM-L6-v2) of the agent's reasoning and the task's ground-truth reasoning. The seed
/// condenses a multi-turn trace with an auxiliary LLM first: with a [`Condenser`] the metric is
/// `reasoning` (with `judge_calls` and `judge_tokens`); without one, or when the judge fails
/// (`judge_errors`), the turns' reasoning is concatenated and the metric says so by its name,
/// `reasoning_concat`.
#[derive(Debug, Clone)]
pub struct ReasoningScore {
    embedder: Arc<Embedder>,
    judge: Option<Arc<dyn Condenser>>,
}

impl ReasoningScore {
    pub fn new(embedder: Arc<Embedder>) -> Self {
        Self { embedder, judge: None }
    }

    /// With the seed's auxiliary LLM.
    pub fn with_judge(mut self, judge: Arc<dyn Condenser>) -> Self {
        self.judge = Some(judge);
        self
    }

    fn similarity(&self, task: &Task, text: &str, truth: &str) -> f64 {
        if text.trim().is_empty() || truth.trim().is_empty() {
            return 0.0;
        }
        match self.embedder.similarity(text, truth) {
            Ok(s) => f64::from(s).clamp(0.0, 1.0),
            Err(e) => {
                tracing::warn!("task {}: reasoning score: {e}", task.id);
                0.0
            }
        }
    }
}

impl Scorer for ReasoningScore {
    fn name(&self) -> &str {
        "reasoning_score"
    }
    fn score(&self, task: &Task, episode: &Trajectory) -> Vec<Metric> {
        let TaskKind::Config(config) = &task.kind else { return vec![] };
        let truth = &config.ground_truth_reasoning;
        if let Some(judge) = &self.judge {
            match judge.condense(&trace_of(episode)) {
                Ok(c) => {
                    return vec![
                        Metric::value("reasoning", self.similarity(task, &c.text, truth)),
                        Metric::count("judge_calls", 1),
                        Metric::count("judge_tokens", c.tokens),
                    ];
                }
                Err(e) => tracing::warn!(
                    "task {}: the reasoning judge failed ({e}); scoring the turns concatenated",
                    task.id
                ),
            }
        }
        let reasoning: Vec<&str> =
            episode.steps.iter().map(|s| s.reasoning.trim()).filter(|r| !r.is_empty()).collect();
        let mut metrics =
            vec![Metric::value("reasoning_concat", self.similarity(task, &reasoning.join("\n"), truth))];
        if self.judge.is_some() {
            metrics.push(Metric::count("judge_errors", 1));
        }
        metrics
    }
}
