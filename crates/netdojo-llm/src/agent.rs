//! The conversation loop: one [`LlmAgent`] per episode, over any [`ChatModel`].

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use netdojo_core::{
    Agent, AgentError, AgentFactory, AgentTurn, EpisodeStart, Observation, Task, ToolCall, ToolSpec,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::chat::{ChatError, ChatModel, Exchange, Message, ReplyCall, RetryPolicy, Role};
use crate::prompt::{self, Strategy, ToolMode};
use crate::text;

/// How an LLM agent prompts and behaves, whatever the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub strategy: Strategy,
    pub tools: ToolMode,
    /// Few-shot examples per episode (strategy `few-shot`).
    pub shots: usize,
    /// Observations longer than this are cut before the model sees them (the trajectory keeps
    /// them whole): small context windows fill fast with command output.
    pub max_observation_chars: usize,
    pub retry: RetryPolicy,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            strategy: Strategy::React,
            tools: ToolMode::Native,
            shots: 3,
            max_observation_chars: 4000,
            retry: RetryPolicy::default(),
        }
    }
}

/// Builds one [`LlmAgent`] per episode. `pool` holds the tasks few-shot examples are drawn
/// from: tasks of the same source generated with another seed than the evaluated ones.
#[derive(Debug, Clone)]
pub struct LlmAgentFactory {
    model: Arc<dyn ChatModel>,
    settings: Settings,
    pool: Arc<Vec<Task>>,
    pool_source: Value,
}

impl LlmAgentFactory {
    pub fn new(model: Arc<dyn ChatModel>, settings: Settings) -> Self {
        Self { model, settings, pool: Arc::new(vec![]), pool_source: Value::Null }
    }

    /// The tasks few-shot examples come from, and a description of where they came from (for
    /// the run's configuration).
    pub fn with_examples(mut self, pool: Vec<Task>, source: Value) -> Self {
        self.pool = Arc::new(pool);
        self.pool_source = source;
        self
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }
}

impl AgentFactory for LlmAgentFactory {
    fn name(&self) -> &str {
        self.model.agent()
    }

    fn config(&self) -> Value {
        json!({
            "model": self.model.config(),
            "settings": self.settings,
            "few_shot_pool": self.pool_source,
        })
    }

    fn create(&self, task: &Task) -> Result<Box<dyn Agent>, AgentError> {
        let examples = match self.settings.strategy {
            Strategy::FewShot => {
                let picked = prompt::examples_for(task, &self.pool, self.settings.shots);
                if picked.is_empty() && self.settings.shots > 0 {
                    return Err(AgentError::Config {
                        agent: self.name().into(),
                        message: "strategy few-shot: no example tasks to draw from".into(),
                    });
                }
                prompt::render_examples(&picked)
            }
            _ => String::new(),
        };
        Ok(Box::new(LlmAgent {
            model: self.model.clone(),
            settings: self.settings.clone(),
            examples,
            tools: vec![],
            messages: vec![],
            recorded: 0,
            turn: 0,
            answered: false,
        }))
    }
}

/// One episode's conversation.
#[derive(Debug)]
pub struct LlmAgent {
    model: Arc<dyn ChatModel>,
    settings: Settings,
    /// The rendered few-shot examples (empty for other strategies).
    examples: String,
    tools: Vec<ToolSpec>,
    messages: Vec<Message>,
    /// Messages already written to the transcript.
    recorded: usize,
    turn: usize,
    /// A single-turn agent has given its one reply.
    answered: bool,
}

impl LlmAgent {
    fn error(&self, e: &ChatError) -> AgentError {
        let agent = self.model.agent().to_string();
        match e {
            ChatError::Transport { .. } | ChatError::Status { .. } => {
                AgentError::Unreachable { agent, message: e.to_string() }
            }
            ChatError::ContextFull { .. } | ChatError::Protocol { .. } => {
                AgentError::Protocol { agent, message: e.to_string() }
            }
        }
    }

    /// Appends the observations of the last turn: tool messages (native) or one user message
    /// (text protocol).
    fn push_feedback(&mut self, feedback: &[Observation]) {
        let cap = self.settings.max_observation_chars;
        match self.settings.tools {
            ToolMode::Native => {
                for o in feedback {
                    self.messages.push(Message::tool(&o.call_id, &o.tool, cut(&o.content, cap)));
                }
            }
            ToolMode::Text => {
                let results = feedback
                    .iter()
                    .map(|o| {
                        let status = if o.ok { "ok" } else { "failed" };
                        format!("[{} {}]\n{}", o.tool, status, cut(&o.content, cap))
                    })
                    .collect::<Vec<_>>()
                    .join("\n\n");
                self.messages.push(Message::new(Role::User, prompt::render_results(&results)));
            }
        }
    }

    /// Sends `body`, retrying as the policy says; every failed attempt goes to `transcript`.
    async fn send(&self, body: &Value, transcript: &mut Vec<Value>) -> Result<Exchange, ChatError> {
        let policy = self.settings.retry;
        let mut attempt = 0;
        loop {
            let started = Instant::now();
            match self.model.send(body).await {
                Ok(exchange) => return Ok(exchange),
                Err(e) if e.retryable() && attempt < policy.max_retries => {
                    let wait = policy.backoff(attempt, &e);
                    tracing::warn!(agent = self.model.agent(), attempt, "{e}; retrying in {wait:?}");
                    transcript.push(json!({
                        "error": e.to_string(),
                        "attempt": attempt,
                        "elapsed_ms": started.elapsed().as_millis() as u64,
                        "retry_in_ms": wait.as_millis() as u64,
                    }));
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(e) => {
                    let e = if attempt > 0 { e.gave_up(attempt + 1) } else { e };
                    transcript.push(json!({ "error": e.to_string(), "attempt": attempt }));
                    return Err(e);
                }
            }
        }
    }

    /// The calls of a native reply, with ids for those the server left without one.
    fn native_calls(&self, calls: &[ReplyCall]) -> Vec<ToolCall> {
        calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut call = match &c.arguments {
                    Ok(arguments) => ToolCall::new(&c.name, arguments.clone()),
                    Err(bad) => ToolCall::malformed(
                        &c.name,
                        Value::String(bad.raw.clone()),
                        format!("the arguments of `{}` are not valid JSON: {}", c.name, bad.error),
                    ),
                };
                call.id = if c.id.is_empty() { self.call_id(i) } else { c.id.clone() };
                call
            })
            .collect()
    }

    fn call_id(&self, i: usize) -> String {
        format!("call_{}_{i}", self.turn)
    }
}

/// `text` cut to at most `cap` characters, saying how much was cut.
fn cut(text: &str, cap: usize) -> String {
    match text.char_indices().nth(cap) {
        None => text.to_string(),
        Some((at, _)) => {
            let rest = text[at..].chars().count();
            format!("{}\n[... {rest} more characters not shown]", &text[..at])
        }
    }
}

#[async_trait]
impl Agent for LlmAgent {
    async fn start(&mut self, episode: &EpisodeStart<'_>) -> Result<(), AgentError> {
        self.tools = episode.tools.to_vec();
        let system = prompt::system_prompt(
            self.settings.strategy,
            self.settings.tools,
            episode.tools,
            episode.max_steps,
            &self.examples,
        );
        self.messages = vec![Message::new(Role::System, system), Message::new(Role::User, episode.brief)];
        Ok(())
    }

    async fn step(&mut self, feedback: &[Observation]) -> Result<AgentTurn, AgentError> {
        if self.answered {
            // Single-turn: the one reply has been played; the episode ends here.
            return Ok(AgentTurn {
                reasoning: "single-turn: no further reply".into(),
                ..AgentTurn::default()
            });
        }
        if !feedback.is_empty() {
            self.push_feedback(feedback);
        }
        let tools = (self.settings.tools == ToolMode::Native).then_some(self.tools.as_slice());
        let body = self.model.request(&self.messages, tools);
        // The transcript holds the request as sent, with only the messages it has not recorded
        // yet (`messages_from` says where they start): replaying the entries in order gives
        // back every request whole.
        let mut sent = body.clone();
        if let Some(Value::Array(all)) = sent.get_mut("messages") {
            all.drain(..self.recorded.min(all.len()));
        }
        let mut transcript =
            vec![json!({ "turn": self.turn, "messages_from": self.recorded, "request": sent })];
        self.recorded = self.messages.len();

        let exchange = match self.send(&body, &mut transcript).await {
            Ok(exchange) => exchange,
            Err(e @ ChatError::ContextFull { .. }) => {
                // Not an outage: the model has no room left, as a person runs out of time.
                self.turn += 1;
                return Ok(AgentTurn {
                    reasoning: format!("stopped: {e}"),
                    transcript,
                    ..AgentTurn::default()
                });
            }
            Err(e) => return Err(self.error(&e)),
        };
        transcript.push(json!({ "turn": self.turn, "response": exchange.response }));
        let reply = exchange.reply;

        let (reasoning, mut calls) = match self.settings.tools {
            ToolMode::Native => (reply.content.trim().to_string(), self.native_calls(&reply.calls)),
            ToolMode::Text => {
                let (reasoning, mut calls) = text::parse_reply(&reply.content);
                for (i, call) in calls.iter_mut().enumerate() {
                    call.id = self.call_id(i);
                }
                (reasoning, calls)
            }
        };
        if self.settings.strategy == Strategy::React {
            for extra in calls.iter_mut().skip(1) {
                extra.malformed = Some("one action per turn: this call was not run".into());
            }
        }
        if self.settings.strategy == Strategy::SingleTurn {
            self.answered = true;
        }

        let mut message = Message::new(Role::Assistant, reply.content);
        if self.settings.tools == ToolMode::Native {
            message.calls = reply
                .calls
                .into_iter()
                .zip(&calls)
                .map(|(c, call)| ReplyCall { id: call.id.clone(), ..c })
                .collect();
        }
        self.messages.push(message);
        self.turn += 1;
        Ok(AgentTurn { reasoning, calls, usage: reply.usage, transcript })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_counts_characters_not_bytes() {
        assert_eq!(cut("héllo", 10), "héllo");
        assert_eq!(cut("héllo", 2), "hé\n[... 3 more characters not shown]");
    }
}
