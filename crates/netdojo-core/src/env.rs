//! The environment an agent works in: one live network (or graph, or cluster) per episode.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::EnvError;
use crate::task::Task;
use crate::tool::{Observation, ToolCall, ToolSpec};

/// One episode's environment. Built for one task by an [`EnvironmentFactory`], used by one
/// episode, closed at its end. Implementations must also clean up on drop (a panicking or
/// cancelled episode never calls [`Environment::close`]).
#[async_trait]
pub trait Environment: Send {
    /// The tools the agent may call (the runner adds `finish`).
    fn tools(&self) -> Vec<ToolSpec>;

    /// JSON Schema of the answer `finish` carries, for tasks that ask for one.
    fn answer_schema(&self, _task: &Task) -> Option<Value> {
        None
    }

    /// Brings the environment to the task's initial state and returns the brief the agent
    /// reads: the query or symptom and what it can observe, never the ground truth.
    async fn reset(&mut self, task: &Task) -> Result<String, EnvError>;

    /// Runs one tool call. The runner has already checked the arguments against the tool's
    /// schema. Bad input that passes the schema (an unknown node, a refused command) is an
    /// `Ok` observation with `ok: false`; `Err` is kept for failures of the environment itself.
    async fn execute(&mut self, call: &ToolCall) -> Result<Observation, EnvError>;

    /// The state check run after every step, for per-step safety.
    async fn check(&mut self) -> Result<StateCheck, EnvError>;

    /// Exports the final state and runs the task's goal checks (testcases, answer, state).
    async fn evaluate(&mut self, task: &Task, answer: Option<&Value>) -> Result<Outcome, EnvError>;

    /// Releases what the episode holds (namespaces, daemons, projects).
    async fn close(&mut self) -> Result<(), EnvError> {
        Ok(())
    }
}

/// Builds one [`Environment`] per episode.
#[async_trait]
pub trait EnvironmentFactory: Send + Sync {
    /// The name used on the command line (`--env dcgraph`).
    fn name(&self) -> &str;
    /// Factory settings, for the run's configuration.
    fn config(&self) -> Value {
        Value::Null
    }
    async fn create(&self, task: &Task) -> Result<Box<dyn Environment>, EnvError>;

    /// A hint that an episode of `task` will be created soon (the runner's
    /// [`prepare_ahead`](crate::Runner::prepare_ahead)): a factory may start building that
    /// episode's initial state in the background, for its [`Environment::reset`] to take. It
    /// must hold what it prepares to what `reset` would have built (the same task, verified the
    /// same way), and release what is never taken when it is dropped. The default ignores it.
    fn prepare(&self, _task: &Task) {}

    /// Whether the environment prepared for `task`'s next episode ([`prepare`](Self::prepare))
    /// is ready for its [`Environment::reset`] to take at once: `Some(true)` once its building
    /// has ended (well or not), `Some(false)` while it goes on, `None` when nothing is being
    /// prepared for it (reset builds it). The runner starts the upcoming episode that is ready
    /// first, so that one slow to prepare holds up no other. The default says nothing.
    fn prepared(&self, _task: &Task) -> Option<bool> {
        None
    }
}

/// The state check after a step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StateCheck {
    /// Whether the state satisfies the task's safety constraints.
    pub safe: bool,
    /// Each constraint broken, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
    /// A small summary of the state (counts, reachability), when useful to an auditor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Value>,
    /// The step changed the network and the task's goal measure did not improve with it (its
    /// reachability, its policy matrix): what NetPress counts against safety as an ineffective
    /// or unnecessary change (seed 003 §C.4, §D.4). Only environments that measure progress
    /// after each step set it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unproductive: bool,
}

impl StateCheck {
    pub fn safe() -> Self {
        Self { safe: true, ..Self::default() }
    }

    pub fn from_violations(violations: Vec<String>) -> Self {
        Self { safe: violations.is_empty(), violations, ..Self::default() }
    }
}

/// One goal check of the final evaluation (a testcase, the answer, the final state).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Check {
    pub fn new(name: impl Into<String>, passed: bool, detail: impl Into<String>) -> Self {
        Self { name: name.into(), passed, detail: detail.into() }
    }
}

/// What the environment reports at the end of an episode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The goal checks. The task is solved when all pass (and there is at least one).
    pub checks: Vec<Check>,
    /// The exported final state (running configurations, a graph digest...).
    #[serde(default)]
    pub export: Value,
}

impl Outcome {
    pub fn solved(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(|c| c.passed)
    }
}
