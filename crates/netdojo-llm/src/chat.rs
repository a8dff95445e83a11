//! What a wire format implements: the neutral conversation, one request, one reply.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use netdojo_core::{TokenUsage, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// A tool call as the model made it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyCall {
    /// The server's id for the call; empty when the server gives none (Ollama).
    pub id: String,
    pub name: String,
    /// The arguments, or why they could not be read (with the text the model sent).
    pub arguments: Result<Value, BadArguments>,
}

/// Arguments a model sent that are not a JSON value.
#[derive(Debug, Clone, PartialEq)]
pub struct BadArguments {
    pub raw: String,
    pub error: String,
}

/// One message of the conversation, in no wire format.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: String,
    /// An assistant message's tool calls (native tool calling).
    pub calls: Vec<ReplyCall>,
    /// A tool message: the call it answers, and the tool's name (Ollama wants the name).
    pub call_id: String,
    pub tool_name: String,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            calls: vec![],
            call_id: String::new(),
            tool_name: String::new(),
        }
    }

    pub fn tool(call_id: &str, tool_name: &str, content: impl Into<String>) -> Self {
        Self { call_id: call_id.into(), tool_name: tool_name.into(), ..Self::new(Role::Tool, content) }
    }
}

/// What a model answered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reply {
    pub content: String,
    pub calls: Vec<ReplyCall>,
    pub usage: Option<TokenUsage>,
    /// The server's reason for stopping (`stop`, `tool_calls`, `length`...).
    pub finish_reason: Option<String>,
}

/// A reply with what came over the wire, verbatim, for the transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    pub reply: Reply,
    /// The response body (a streamed reply: the array of its chunks).
    pub response: Value,
}

/// Why a request produced no reply.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChatError {
    /// The server could not be reached or did not answer in time. Retried.
    #[error("{url}: {message}")]
    Transport { url: String, message: String },
    /// The server answered with an error status. Retried on 429 and 5xx.
    #[error("{url}: HTTP {status}: {message}")]
    Status { url: String, status: u16, message: String, retry_after: Option<Duration> },
    /// The conversation no longer fits the model's context window. Not retried: the agent stops.
    #[error("{url}: the conversation no longer fits the model's context window: {message}")]
    ContextFull { url: String, message: String },
    /// The server answered something that is not the protocol (not JSON, wrong shape).
    #[error("{url}: {message}")]
    Protocol { url: String, message: String },
}

impl ChatError {
    pub fn retryable(&self) -> bool {
        match self {
            ChatError::Transport { .. } => true,
            ChatError::Status { status, .. } => *status == 429 || *status >= 500,
            ChatError::ContextFull { .. } | ChatError::Protocol { .. } => false,
        }
    }

    /// The same error, saying it is the last of `attempts`.
    pub fn gave_up(self, attempts: u32) -> Self {
        let note = |m: String| format!("{m} (gave up after {attempts} attempts)");
        match self {
            ChatError::Transport { url, message } => ChatError::Transport { url, message: note(message) },
            ChatError::Status { url, status, message, retry_after } => {
                ChatError::Status { url, status, message: note(message), retry_after }
            }
            other => other,
        }
    }

    /// Classifies an error status: a 400 that says the context is exceeded is [`ChatError::ContextFull`]
    /// (OpenAI's `context_length_exceeded`, vLLM's "maximum context length", llama.cpp's
    /// "exceed context window").
    pub fn from_status(url: &str, status: u16, message: String, retry_after: Option<Duration>) -> Self {
        let lower = message.to_ascii_lowercase();
        if (status == 400 || status == 413)
            && (lower.contains("context_length_exceeded")
                || (lower.contains("context") && (lower.contains("exceed") || lower.contains("maximum"))))
        {
            return ChatError::ContextFull { url: url.into(), message };
        }
        ChatError::Status { url: url.into(), status, message, retry_after }
    }
}

/// Sampling parameters every server takes in some form.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

/// Retries with exponential backoff on transport errors, 429 and 5xx, up to a hard cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so `max_retries + 1` requests at most).
    pub max_retries: u32,
    #[serde(with = "millis")]
    pub initial_backoff: Duration,
    #[serde(with = "millis")]
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry `n` (0-based): the server's Retry-After when it gave one (capped),
    /// else `initial * 2^n`, capped.
    pub fn backoff(&self, n: u32, error: &ChatError) -> Duration {
        if let ChatError::Status { retry_after: Some(after), .. } = error {
            return (*after).min(self.max_backoff);
        }
        self.initial_backoff.saturating_mul(2u32.saturating_pow(n)).min(self.max_backoff)
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

/// An API key. Its `Debug` never shows it (and it has no `Display`), so it cannot reach a log or a record
/// by accident; [`Secret::expose`] is the one way to read it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced, for error messages that quote what a
    /// server sent back.
    pub fn redact(&self, text: &str) -> String {
        if self.0.is_empty() { text.to_string() } else { text.replace(&self.0, "[redacted]") }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// A chat API in one wire format. The agent builds the body once (so the transcript holds
/// exactly what was sent) and sends it, retrying as its [`RetryPolicy`] says.
#[async_trait]
pub trait ChatModel: Send + Sync + fmt::Debug {
    /// The agent's name on the command line and in records (`openai`, `ollama`).
    fn agent(&self) -> &str;
    /// The request body for this conversation; `tools` is `None` in text mode.
    fn request(&self, messages: &[Message], tools: Option<&[ToolSpec]>) -> Value;
    /// Sends one request, once.
    async fn send(&self, body: &Value) -> Result<Exchange, ChatError>;
    /// Settings for the run's configuration (never a key).
    fn config(&self) -> Value;
    /// This model for attempt `epoch` at a task (`eval --epochs`): with its sampling seed
    /// replaced by [`netdojo_core::task::epoch_seed`]'s, so that a server honouring seeds does
    /// not repeat its attempts. `None` when nothing changes (no seed sent: the default).
    fn for_epoch(&self, epoch: u32) -> Option<std::sync::Arc<dyn ChatModel>> {
        let _ = epoch;
        None
    }
}

/// `tools` as chat APIs of the OpenAI family (OpenAI, Azure, llama.cpp, vLLM, Ollama) take them:
/// `{"type": "function", "function": {name, description, parameters}}` each.
pub fn function_tools(tools: &[ToolSpec]) -> Value {
    Value::Array(
        tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters
                }})
            })
            .collect(),
    )
}
