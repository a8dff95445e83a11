//! An agent over Ollama's native `/api/chat`: tools, `options` (num_ctx, temperature, seed,
//! num_predict) and its streaming format (one JSON object a line, the last with `done: true`
//! and the token counts). Strategies, prompts and the loop are `netdojo-llm`'s.

use std::time::Duration;

use async_trait::async_trait;
use netdojo_core::{AgentError, TokenUsage, ToolSpec};
use netdojo_llm::{ChatError, ChatModel, Exchange, Message, Reply, ReplyCall, Role, Sampling, http};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

pub use netdojo_llm::{LlmAgentFactory, Settings, Strategy, ToolMode};

const AGENT: &str = "ollama";

/// Where and how to reach Ollama.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OllamaConfig {
    /// The server, without `/api` (`http://127.0.0.1:11434`).
    pub base_url: String,
    pub model: String,
    /// Stream the reply (Ollama's default) or ask for one JSON object.
    pub stream: bool,
    /// The context window Ollama should load the model with (`options.num_ctx`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_ctx: Option<u32>,
    #[serde(flatten)]
    pub sampling: Sampling,
    pub request_timeout_s: u64,
}

impl OllamaConfig {
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            stream: true,
            num_ctx: None,
            sampling: Sampling::default(),
            request_timeout_s: 300,
        }
    }
}

/// Ollama's `/api/chat` over HTTP.
#[derive(Debug, Clone)]
pub struct OllamaChat {
    config: OllamaConfig,
    url: String,
    client: reqwest::Client,
}

impl OllamaChat {
    pub fn new(config: OllamaConfig) -> Result<Self, AgentError> {
        let error = |message: String| AgentError::Config { agent: AGENT.into(), message };
        let base = config.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(error(format!(
                "--base-url {}: not an http(s) URL (e.g. http://127.0.0.1:11434)",
                config.base_url
            )));
        }
        // A base URL copied from the OpenAI-compatible side (`.../v1`) is a common slip.
        let base = base.strip_suffix("/api").unwrap_or(base);
        let url = format!("{base}/api/chat");
        let client = http::client(Duration::from_secs(config.request_timeout_s))
            .map_err(|e| error(format!("building the HTTP client: {e}")))?;
        Ok(Self { config, url, client })
    }

    fn protocol(&self, message: String) -> ChatError {
        ChatError::Protocol { url: self.url.clone(), message }
    }
}

fn wire_message(m: &Message) -> Value {
    match m.role {
        Role::Tool => json!({"role": "tool", "content": m.content, "tool_name": m.tool_name}),
        Role::Assistant if !m.calls.is_empty() => {
            let calls: Vec<Value> = m
                .calls
                .iter()
                .map(|c| {
                    // Ollama parses the model's arguments itself, so they are always an
                    // object; `{}` only stands in for a reply this agent could not read.
                    let arguments = c.arguments.clone().unwrap_or_else(|_| Value::Object(Map::new()));
                    json!({"function": {"name": c.name, "arguments": arguments}})
                })
                .collect();
            json!({"role": "assistant", "content": m.content, "tool_calls": calls})
        }
        role => json!({"role": role.as_str(), "content": m.content}),
    }
}

/// Adds one response object (the whole reply, or one streamed chunk) to `reply`. True when it
/// is the last (`done`).
fn absorb(reply: &mut Reply, chunk: &Value) -> bool {
    if let Some(message) = chunk.get("message") {
        if let Some(text) = message.get("content").and_then(Value::as_str) {
            reply.content.push_str(text);
        }
        for c in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let name = c.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_string();
            let arguments = match c.pointer("/function/arguments") {
                Some(v @ Value::Object(_)) => Ok(v.clone()),
                None | Some(Value::Null) => Ok(Value::Object(Map::new())),
                Some(Value::String(raw)) => serde_json::from_str::<Value>(raw)
                    .map_err(|e| netdojo_llm::BadArguments { raw: raw.clone(), error: e.to_string() }),
                Some(other) => Err(netdojo_llm::BadArguments {
                    raw: other.to_string(),
                    error: "arguments must be an object".into(),
                }),
            };
            let id = c.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
            reply.calls.push(ReplyCall { id, name, arguments });
        }
    }
    let done = chunk.get("done").and_then(Value::as_bool).unwrap_or(false);
    if done {
        reply.finish_reason = chunk.get("done_reason").and_then(Value::as_str).map(str::to_string);
        if let Some(prompt) = chunk.get("prompt_eval_count").and_then(Value::as_u64) {
            let completion = chunk.get("eval_count").and_then(Value::as_u64).unwrap_or(0);
            reply.usage =
                Some(TokenUsage { prompt_tokens: prompt, completion_tokens: completion, cached_tokens: 0 });
        }
    }
    done
}

#[async_trait]
impl ChatModel for OllamaChat {
    fn agent(&self) -> &str {
        AGENT
    }

    fn request(&self, messages: &[Message], tools: Option<&[ToolSpec]>) -> Value {
        let mut body = json!({
            "model": self.config.model,
            "messages": messages.iter().map(wire_message).collect::<Vec<_>>(),
            "stream": self.config.stream,
        });
        if let Some(tools) = tools.filter(|t| !t.is_empty()) {
            body["tools"] = netdojo_llm::function_tools(tools);
        }
        let mut options = Map::new();
        let s = &self.config.sampling;
        if let Some(n) = self.config.num_ctx {
            options.insert("num_ctx".into(), json!(n));
        }
        if let Some(t) = s.temperature {
            options.insert("temperature".into(), json!(t));
        }
        if let Some(seed) = s.seed {
            options.insert("seed".into(), json!(seed));
        }
        if let Some(n) = s.max_tokens {
            options.insert("num_predict".into(), json!(n));
        }
        if !options.is_empty() {
            body["options"] = Value::Object(options);
        }
        body
    }

    fn for_epoch(&self, epoch: u32) -> Option<std::sync::Arc<dyn ChatModel>> {
        let seed = self.config.sampling.seed?;
        let mut model = self.clone();
        model.config.sampling.seed = Some(netdojo_core::task::epoch_seed(seed, epoch));
        Some(std::sync::Arc::new(model))
    }

    async fn send(&self, body: &Value) -> Result<Exchange, ChatError> {
        let url = &self.url;
        let mut response = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| http::transport(url, &e))?;
        let status = response.status();
        if !status.is_success() {
            let after = http::retry_after(response.headers());
            let bytes = response.bytes().await.map_err(|e| http::transport(url, &e))?;
            return Err(ChatError::from_status(url, status.as_u16(), http::error_message(&bytes), after));
        }
        let mut reply = Reply::default();
        if !self.config.stream {
            let bytes = response.bytes().await.map_err(|e| http::transport(url, &e))?;
            let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
                self.protocol(format!(
                    "the reply is not JSON ({e}); it begins: {:?}",
                    String::from_utf8_lossy(&bytes).chars().take(200).collect::<String>()
                ))
            })?;
            if let Some(error) = value.get("error") {
                return Err(self.protocol(format!("the server answered an error: {error}")));
            }
            if !absorb(&mut reply, &value) {
                return Err(self.protocol("a reply without `done: true` although `stream` was false".into()));
            }
            return Ok(Exchange { reply, response: value });
        }

        // Streamed: one JSON object a line; a line may arrive in pieces.
        let mut chunks = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        let mut done = false;
        while !done {
            let Some(bytes) = response.chunk().await.map_err(|e| http::transport(url, &e))? else {
                break;
            };
            pending.extend_from_slice(&bytes);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let chunk: Value = serde_json::from_str(line).map_err(|e| {
                    self.protocol(format!(
                        "a streamed line is not JSON ({e}): {:?}",
                        line.chars().take(200).collect::<String>()
                    ))
                })?;
                if let Some(error) = chunk.get("error") {
                    // Ollama reports a failure after the stream started as a line of its own.
                    return Err(ChatError::Transport {
                        url: url.clone(),
                        message: format!("the server failed mid-stream: {error}"),
                    });
                }
                done = absorb(&mut reply, &chunk);
                chunks.push(chunk);
                if done {
                    break;
                }
            }
        }
        if !done {
            return Err(ChatError::Transport {
                url: url.clone(),
                message: format!("the stream ended after {} chunks without `done: true`", chunks.len()),
            });
        }
        Ok(Exchange { reply, response: Value::Array(chunks) })
    }

    fn config(&self) -> Value {
        serde_json::to_value(&self.config).unwrap_or(Value::Null)
    }
}

/// The agent factory: Ollama's wire format under `netdojo-llm`'s loop.
pub fn factory(config: OllamaConfig, settings: Settings) -> Result<LlmAgentFactory, AgentError> {
    Ok(LlmAgentFactory::new(std::sync::Arc::new(OllamaChat::new(config)?), settings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_epoch_after_the_first_samples_with_its_own_seed() {
        let mut config = OllamaConfig::new("http://127.0.0.1:9", "m");
        config.sampling.seed = Some(5);
        let chat = OllamaChat::new(config.clone()).expect("chat");
        let seed = |m: &dyn ChatModel| m.request(&[], None)["options"]["seed"].clone();
        assert_eq!(seed(chat.for_epoch(0).expect("seeded").as_ref()), json!(5));
        let (one, two) = (chat.for_epoch(1).expect("seeded"), chat.for_epoch(2).expect("seeded"));
        assert!(seed(one.as_ref()).is_u64() && seed(one.as_ref()) != json!(5));
        assert_ne!(seed(one.as_ref()), seed(two.as_ref()));
        config.sampling.seed = None;
        assert!(OllamaChat::new(config).expect("chat").for_epoch(1).is_none());
    }
}
