//! The record of an episode: every step, the state check after it, and the outcome.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::TokenUsage;
use crate::env::{Outcome, StateCheck};
use crate::metric::Metric;
use crate::tool::{Observation, ToolCall, ToolSpec};

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
    /// The agent's part of the episode ran past its time limit.
    TimeBudget,
    /// The turns' tokens (prompt + completion) passed the episode's limit.
    TokenBudget,
    /// The turns' cost, priced from the user's table, passed the episode's limit.
    CostBudget,
    /// The agent answered something that is not a turn (broke its protocol): the episode
    /// ends there and is scored like any other.
    UnusableOutput,
    /// The episode could not run to its end (see the record's `error`).
    Error,
}

/// Where an episode's wall time went, in microseconds. `wall_ms` minus their sum is the
/// runner's own work (schema validation, records).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Timing {
    /// Building the environment and resetting it to the task (`create` + `reset`).
    pub setup_us: u64,
    /// The agent: creating it, starting it, and its turns (model calls, retries included).
    pub agent_us: u64,
    /// Tool calls executed by the environment.
    pub tools_us: u64,
    /// State checks: the initial one and the one after each step.
    pub checks_us: u64,
    /// The final evaluation (export and goal checks).
    pub evaluate_us: u64,
    /// Closing the environment (tearing down what setup built).
    pub close_us: u64,
}

impl Timing {
    pub fn sum_us(&self) -> u64 {
        self.setup_us + self.agent_us + self.tools_us + self.checks_us + self.evaluate_us + self.close_us
    }
}

/// Everything about one episode; stored as CBOR in the run directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    pub task_id: String,
    pub agent: String,
    pub brief: String,
    /// The tools the agent was given (`finish` included), for the exports that show them
    /// (`export --format chat`). Absent in trajectories written before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
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
    /// Where the wall time went. Zero in trajectories written before it existed.
    #[serde(default)]
    pub timing: Timing,
    /// The tokens of every turn the agent reported, a turn without steps (one whose only call
    /// is `finish`, or one a budget cut) included. Absent in trajectories written before it
    /// existed: [`Trajectory::tokens`] then sums the steps'.
    #[serde(default, skip_serializing_if = "TokenUsage::is_zero")]
    pub usage: TokenUsage,
    /// Why the agent's loop ended, in words, where `end` alone does not say (the agent's
    /// unusable answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_detail: Option<String>,
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
            tools: vec![],
            initial_check: StateCheck::default(),
            steps: vec![],
            answer: None,
            end: EndReason::Error,
            outcome: None,
            wall_ms: 0,
            timing: Timing::default(),
            usage: TokenUsage::default(),
            end_detail: None,
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

    /// The tokens of every turn. A trajectory written before `usage` existed has them on its
    /// steps only (a turn whose only call was `finish` is missing there).
    pub fn tokens(&self) -> TokenUsage {
        if self.usage.is_zero() { self.steps.iter().filter_map(|s| s.usage).sum() } else { self.usage }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeStatus {
    /// Ran to the end and was scored (whether the agent succeeded or not).
    Completed,
    /// Could not be run or scored (environment failure, model API failure, a wrong task or
    /// agent configuration). Not in the rates; a resumed run retries it.
    Errored,
}

// Whose failure made an episode errored: defined with the errors it classifies, and found here
// too, beside the records that carry it.
pub use crate::error::ErrorCause;

/// The one class each episode ends in (docs/results.md, "Outcome classes"). The first four
/// groups enter the rates; the errored classes do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeClass {
    /// Completed and its `correct` metric passed.
    Solved,
    /// Completed, not solved, and none of the classes below.
    Failed,
    /// Not solved: the step budget ended it.
    StepBudget,
    /// Not solved: the time limit ended it.
    TimeBudget,
    /// Not solved: the token limit ended it.
    TokenBudget,
    /// Not solved: the cost limit ended it.
    CostBudget,
    /// Not solved, and nothing the agent sent could be used: it broke its protocol, or it
    /// ended (stopping, or at the step budget) without a valid `finish` and every call it made
    /// was invalid.
    UnusableOutput,
    /// Errored: the model's API failed. Infrastructure: not in the rates, `--resume` retries it.
    ModelApiFailure,
    /// Errored: the environment or the machine failed. Infrastructure: not in the rates,
    /// `--resume` retries it.
    EnvironmentFailure,
    /// Errored: the task file or the agent's configuration is wrong. Not in the rates; a retry
    /// gives the same error until it is fixed.
    InvalidSetup,
}

impl EpisodeClass {
    pub const ALL: [EpisodeClass; 10] = [
        EpisodeClass::Solved,
        EpisodeClass::Failed,
        EpisodeClass::StepBudget,
        EpisodeClass::TimeBudget,
        EpisodeClass::TokenBudget,
        EpisodeClass::CostBudget,
        EpisodeClass::UnusableOutput,
        EpisodeClass::ModelApiFailure,
        EpisodeClass::EnvironmentFailure,
        EpisodeClass::InvalidSetup,
    ];

    /// True for the classes of completed episodes, the ones the rates count.
    pub fn in_rates(self) -> bool {
        !matches!(
            self,
            EpisodeClass::ModelApiFailure | EpisodeClass::EnvironmentFailure | EpisodeClass::InvalidSetup
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EpisodeClass::Solved => "solved",
            EpisodeClass::Failed => "failed",
            EpisodeClass::StepBudget => "step_budget",
            EpisodeClass::TimeBudget => "time_budget",
            EpisodeClass::TokenBudget => "token_budget",
            EpisodeClass::CostBudget => "cost_budget",
            EpisodeClass::UnusableOutput => "unusable_output",
            EpisodeClass::ModelApiFailure => "model_api_failure",
            EpisodeClass::EnvironmentFailure => "environment_failure",
            EpisodeClass::InvalidSetup => "invalid_setup",
        }
    }
}

impl std::fmt::Display for EpisodeClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
    /// Where the wall time went. Zero in records written before it existed.
    #[serde(default)]
    pub timing: Timing,
    #[serde(default)]
    pub tokens: TokenUsage,
    /// The class the episode ended in. Absent in records written before it existed:
    /// [`EpisodeRecord::class`] derives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<EpisodeClass>,
    pub metrics: Vec<Metric>,
}

impl EpisodeRecord {
    pub fn metric(&self, name: &str) -> Option<crate::MetricValue> {
        self.metrics.iter().find(|m| m.name == name).map(|m| m.value)
    }

    /// The class the episode ended in: the recorded one, else derived from the record.
    pub fn class(&self) -> EpisodeClass {
        self.class.unwrap_or_else(|| self.derive_class())
    }

    /// The class from status, cause, end reason, steps and `correct` (see [`EpisodeClass`]).
    pub fn derive_class(&self) -> EpisodeClass {
        if self.status == EpisodeStatus::Errored {
            return match self.cause {
                Some(ErrorCause::ModelApi) => EpisodeClass::ModelApiFailure,
                Some(ErrorCause::Task | ErrorCause::Agent) => EpisodeClass::InvalidSetup,
                Some(ErrorCause::Infrastructure) | None => EpisodeClass::EnvironmentFailure,
            };
        }
        if self.metric("correct") == Some(crate::MetricValue::Pass(true)) {
            return EpisodeClass::Solved;
        }
        // Calls were made and none could be used. An agent that stops without a call (the
        // no-op baseline, a model that says it is done) chose to: that is a failure.
        let nothing_usable = self.steps > 0 && self.invalid_steps == self.steps;
        match self.end {
            EndReason::TimeBudget => EpisodeClass::TimeBudget,
            EndReason::TokenBudget => EpisodeClass::TokenBudget,
            EndReason::CostBudget => EpisodeClass::CostBudget,
            EndReason::UnusableOutput => EpisodeClass::UnusableOutput,
            EndReason::AgentStopped | EndReason::StepBudget if nothing_usable => EpisodeClass::UnusableOutput,
            EndReason::StepBudget => EpisodeClass::StepBudget,
            EndReason::Finished | EndReason::AgentStopped | EndReason::Error => EpisodeClass::Failed,
        }
    }
}
