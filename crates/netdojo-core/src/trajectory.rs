//! The record of an episode: every step, the state check after it, and the outcome.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::TokenUsage;
use crate::env::{Outcome, StateCheck};
use crate::metric::Metric;
use crate::tool::{Observation, ToolCall};

/// One tool call and what followed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub index: usize,
    /// The agent turn this call belongs to (a turn may make several calls).
    pub turn: usize,
    /// The turn's reasoning, on the first step of each turn.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    pub call: ToolCall,
    pub observation: Observation,
    /// The call was malformed (unknown tool, schema violation) and reached no environment.
    pub invalid: bool,
    /// The state check after this step.
    pub check: StateCheck,
    /// Milliseconds from the episode's start to the step's start, and the step's duration.
    pub at_ms: u64,
    pub duration_ms: u64,
    /// Token usage of the turn, on its first step, when the agent reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
}

/// Why the agent's loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The agent called `finish`.
    Finished,
    /// The agent ended a turn with no call.
    AgentStopped,
    StepBudget,
    TimeBudget,
    /// The episode could not run to its end (see the record's `error`).
    Error,
}

/// Everything about one episode; stored as CBOR in the run directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    pub task_id: String,
    pub agent: String,
    pub brief: String,
    /// The state check before the first step.
    pub initial_check: StateCheck,
    pub steps: Vec<Step>,
    /// The answer given with `finish`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Value>,
    pub end: EndReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    pub wall_ms: u64,
    /// The model conversation, verbatim, when the agent keeps one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transcript: Vec<Value>,
}

impl Trajectory {
    /// The trajectory of an episode that has not started yet.
    pub fn new(task_id: &str, agent: &str) -> Self {
        Self {
            task_id: task_id.to_string(),
            agent: agent.to_string(),
            brief: String::new(),
            initial_check: StateCheck::default(),
            steps: vec![],
            answer: None,
            end: EndReason::Error,
            outcome: None,
            wall_ms: 0,
            transcript: vec![],
        }
    }

    /// True when every state check, before and after each step, was safe.
    pub fn always_safe(&self) -> bool {
        self.initial_check.safe && self.steps.iter().all(|s| s.check.safe)
    }

    /// The steps that changed the network without bringing it closer to the goal
    /// ([`StateCheck::unproductive`](crate::StateCheck::unproductive)).
    pub fn unproductive_changes(&self) -> usize {
        self.steps.iter().filter(|s| s.check.unproductive).count()
    }

    pub fn tokens(&self) -> TokenUsage {
        self.steps.iter().filter_map(|s| s.usage).fold(TokenUsage::default(), |a, u| TokenUsage {
            prompt_tokens: a.prompt_tokens + u.prompt_tokens,
            completion_tokens: a.completion_tokens + u.completion_tokens,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeStatus {
    /// Ran to the end and was scored (whether the agent succeeded or not).
    Completed,
    /// Could not be run or scored (environment failure, model unreachable). A resumed run
    /// retries it.
    Errored,
}

/// Whose failure made an episode errored: says whether a retry can help and whom to tell.
/// An agent's bad input is never one of these: it is a failed step (`ok: false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCause {
    /// The machine or a backend failed (namespaces, daemons, a server, a timeout of the
    /// evaluation, a panic): `--resume` retries it.
    Infrastructure,
    /// The task file is wrong or asks for what the environment cannot do: a retry gives the
    /// same error; fix the task.
    Task,
    /// The agent could not produce a turn (model unreachable, protocol or configuration error).
    Agent,
}

/// One line of a run's `episodes.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    pub task_id: String,
    /// Which attempt at the task this is (`eval --epochs K`: 0 to K-1). An episode is a
    /// (task, epoch); records written before epochs existed are epoch 0.
    #[serde(default)]
    pub epoch: u32,
    pub application: String,
    pub level: u8,
    pub label: String,
    /// The task's domain, if it has one. Absent in records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    pub agent: String,
    pub status: EpisodeStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `error`: whose failure it was. Absent in records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<ErrorCause>,
    pub end: EndReason,
    pub steps: usize,
    pub invalid_steps: usize,
    pub wall_ms: u64,
    #[serde(default)]
    pub tokens: TokenUsage,
    pub metrics: Vec<Metric>,
}

impl EpisodeRecord {
    pub fn metric(&self, name: &str) -> Option<crate::MetricValue> {
        self.metrics.iter().find(|m| m.name == name).map(|m| m.value)
    }
}
