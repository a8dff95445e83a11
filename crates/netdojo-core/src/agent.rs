//! The agent under evaluation (or a scripted one).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::AgentError;
use crate::task::Task;
use crate::tool::{Observation, ToolCall, ToolSpec};

/// What an agent is told when an episode starts.
#[derive(Debug, Clone, Copy)]
pub struct EpisodeStart<'a> {
    /// The whole task. Only scripted agents (the oracle) may read its ground truth; an agent
    /// under evaluation works from `brief` and `tools`.
    pub task: &'a Task,
    /// The environment's brief: query, symptom, what can be observed.
    pub brief: &'a str,
    /// The tools, `finish` included.
    pub tools: &'a [ToolSpec],
    /// The step budget: tool calls the runner accepts before it ends the episode. A prompt
    /// should say it (the seeds' agents are told their budget).
    pub max_steps: usize,
}

/// One turn of an agent: its reasoning and the calls it makes. An empty `calls` means the agent
/// stopped without calling `finish`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentTurn {
    pub reasoning: String,
    pub calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// The messages exchanged with a model in this turn, verbatim, for audit and replay.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transcript: Vec<Value>,
}

/// Tokens a model call (or a sum of them) used, as the API reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The part of `prompt_tokens` the server read from its prompt cache, where the API reports
    /// it (OpenAI's `usage.prompt_tokens_details.cached_tokens`); 0 where it does not.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TokenUsage {
    /// Prompt and completion tokens (cached tokens are a part of the prompt's).
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }

    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

impl std::ops::AddAssign for TokenUsage {
    fn add_assign(&mut self, other: Self) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens += other.cached_tokens;
    }
}

impl std::iter::Sum for TokenUsage {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::default(), |mut a, u| {
            a += u;
            a
        })
    }
}

#[async_trait]
pub trait Agent: Send {
    async fn start(&mut self, episode: &EpisodeStart<'_>) -> Result<(), AgentError>;

    /// The next turn. `feedback` holds the observations of the previous turn's calls (empty on
    /// the first turn).
    async fn step(&mut self, feedback: &[Observation]) -> Result<AgentTurn, AgentError>;
}

/// Builds one [`Agent`] per episode.
pub trait AgentFactory: Send + Sync {
    /// The name used on the command line (`--agent oracle`).
    fn name(&self) -> &str;
    /// Settings for the run's configuration. Never secrets (API keys stay out of run dirs).
    fn config(&self) -> Value {
        Value::Null
    }
    fn create(&self, task: &Task) -> Result<Box<dyn Agent>, AgentError>;
    /// The agent for attempt `epoch` at a task (`eval --epochs`, epoch 0 first). An agent
    /// with randomness of its own draws it anew for each epoch, so that its attempts differ;
    /// by default the agent of [`AgentFactory::create`].
    fn create_for_epoch(&self, task: &Task, epoch: u32) -> Result<Box<dyn Agent>, AgentError> {
        let _ = epoch;
        self.create(task)
    }
}
