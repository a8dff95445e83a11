//! An agent over any OpenAI-compatible chat-completions endpoint: OpenAI, Azure OpenAI's v1
//! API, vLLM, llama.cpp's server, LM Studio, Ollama's `/v1`. This crate is the wire format
//! only; strategies, prompts and the conversation loop are `netdojo-llm`'s.
//!
//! The API key is read from an environment variable whose *name* is configured; the key itself
//! is never logged, never in an error and never written to a run directory.

use std::time::Duration;

use async_trait::async_trait;
use netdojo_core::{AgentError, TokenUsage, ToolSpec};
use netdojo_llm::{ChatError, ChatModel, Exchange, Message, Reply, ReplyCall, Role, Sampling, Secret, http};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

pub use netdojo_llm::{LlmAgentFactory, Settings, Strategy, ToolMode};

const AGENT: &str = "openai";

/// What the model is told about choosing a tool (`tool_choice`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides (`"auto"`).
    #[default]
    Auto,
    /// The model must call some tool (`"required"`; not every server supports it).
    Required,
    /// The model must not call a tool (`"none"`).
    None,
    /// The model must call this tool.
    Function(String),
}

impl std::str::FromStr for ToolChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(ToolChoice::Auto),
            "required" => Ok(ToolChoice::Required),
            "none" => Ok(ToolChoice::None),
            other => Err(format!("unknown tool choice `{other}` (known: auto, required, none)")),
        }
    }
}

/// Where and how to reach the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenAiConfig {
    /// The API's base URL, up to and including `/v1` (`https://api.openai.com/v1`).
    pub base_url: String,
    pub model: String,
    /// The environment variable holding the API key. `None`: no key is sent (local servers).
    pub api_key_env: Option<String>,
    /// The header the key goes in: `None` for `Authorization: Bearer KEY` (OpenAI, Azure's v1
    /// endpoint, vLLM...), or a header name sent as `NAME: KEY` (`api-key` for Azure OpenAI's
    /// classic deployment endpoints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_header: Option<String>,
    /// Sent as the `api-version` query parameter of every request (Azure OpenAI's classic
    /// endpoints require one, e.g. `2024-10-21`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(flatten)]
    pub sampling: Sampling,
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// The longest a request may take, generation included.
    pub request_timeout_s: u64,
}

impl OpenAiConfig {
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            api_key_header: None,
            api_version: None,
            sampling: Sampling::default(),
            tool_choice: ToolChoice::Auto,
            request_timeout_s: 300,
        }
    }
}

/// The chat-completions wire format over HTTP.
#[derive(Debug, Clone)]
pub struct OpenAiChat {
    config: OpenAiConfig,
    url: String,
    key: Option<Secret>,
    client: reqwest::Client,
}

fn config_error(message: String) -> AgentError {
    AgentError::Config { agent: AGENT.into(), message }
}

impl OpenAiChat {
    /// Reads the key from `config.api_key_env` (an error when that variable is not set).
    pub fn new(config: OpenAiConfig) -> Result<Self, AgentError> {
        let key = match &config.api_key_env {
            None => None,
            Some(var) => match std::env::var(var) {
                Ok(key) if !key.is_empty() => Some(Secret::new(key)),
                _ => {
                    return Err(config_error(format!(
                        "--api-key-env {var}: the environment variable `{var}` is not set"
                    )));
                }
            },
        };
        Self::with_key(config, key)
    }

    /// Uses `key` as given (tests, or a key from elsewhere than the environment).
    pub fn with_key(config: OpenAiConfig, key: Option<Secret>) -> Result<Self, AgentError> {
        let base = config.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(config_error(format!(
                "--base-url {}: not an http(s) URL (e.g. http://127.0.0.1:8080/v1)",
                config.base_url
            )));
        }
        if let Some(name) = &config.api_key_header
            && reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err()
        {
            return Err(config_error(format!("--api-key-header {name}: not a valid HTTP header name")));
        }
        if let Some(version) = &config.api_version
            && (version.is_empty()
                || !version.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)))
        {
            return Err(config_error(format!(
                "--api-version {version}: expected a version such as 2024-10-21 or 2025-01-01-preview"
            )));
        }
        if let (Some(key), Some(_)) = (&key, &config.api_key_header)
            && reqwest::header::HeaderValue::from_str(key.expose()).is_err()
        {
            return Err(config_error("the API key holds characters an HTTP header cannot carry".into()));
        }
        let url = with_version(&format!("{base}/chat/completions"), &config);
        let client = netdojo_llm::http::client(Duration::from_secs(config.request_timeout_s))
            .map_err(|e| config_error(format!("building the HTTP client: {e}")))?;
        Ok(Self { config, url, key, client })
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// Asks the server which models it serves (`GET /models`) and fails when the configured
    /// model is not among them. llama.cpp's server answers any model name with its one model,
    /// so a misspelt name would otherwise go unnoticed through a whole run. A server that
    /// does not list its models (404) passes; one that cannot be reached does not.
    pub async fn check_model(&self) -> Result<Vec<String>, AgentError> {
        let base = self.config.base_url.trim_end_matches('/');
        let url = with_version(&format!("{base}/models"), &self.config);
        let request = self.authorize(self.client.get(&url));
        let unreachable =
            |e: ChatError| AgentError::Unreachable { agent: AGENT.into(), message: e.to_string() };
        let response = request.send().await.map_err(|e| unreachable(http::transport(&url, &e)))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| unreachable(http::transport(&url, &e)))?;
        if status.as_u16() == 404 {
            tracing::warn!(
                "{url}: the server does not list its models; --model {} is not checked",
                self.config.model
            );
            return Ok(vec![]);
        }
        if !status.is_success() {
            let message = self.redact(&http::error_message(&bytes));
            return Err(unreachable(ChatError::from_status(&url, status.as_u16(), message, None)));
        }
        let served: Vec<String> = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| {
                v.get("data").and_then(Value::as_array).map(|models| {
                    models
                        .iter()
                        .filter_map(|m| m.get("id").and_then(Value::as_str))
                        .map(str::to_string)
                        .collect()
                })
            })
            .unwrap_or_default();
        if !served.is_empty() && !served.contains(&self.config.model) {
            return Err(config_error(format!(
                "--model {}: {url} does not serve it (it serves: {})",
                self.config.model,
                served.join(", ")
            )));
        }
        Ok(served)
    }

    /// Adds the key (in the configured header) and the `api-version` parameter.
    fn authorize(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match (&self.key, &self.config.api_key_header) {
            (None, _) => request,
            (Some(key), None) => request.bearer_auth(key.expose()),
            (Some(key), Some(header)) => {
                let mut value = reqwest::header::HeaderValue::from_str(key.expose())
                    .unwrap_or_else(|_| reqwest::header::HeaderValue::from_static(""));
                // Kept out of reqwest's and hyper's debug output, as `bearer_auth` does.
                value.set_sensitive(true);
                request.header(header.as_str(), value)
            }
        }
    }

    fn redact(&self, text: &str) -> String {
        match &self.key {
            Some(key) => key.redact(text),
            None => text.to_string(),
        }
    }
}

/// `url` with the `api-version` parameter when one is configured (checked to need no escaping).
fn with_version(url: &str, config: &OpenAiConfig) -> String {
    match &config.api_version {
        Some(v) => format!("{url}?api-version={v}"),
        None => url.to_string(),
    }
}

/// A message as chat completions want it.
fn wire_message(m: &Message) -> Value {
    match m.role {
        Role::Tool => json!({"role": "tool", "tool_call_id": m.call_id, "content": m.content}),
        Role::Assistant if !m.calls.is_empty() => {
            let calls: Vec<Value> = m
                .calls
                .iter()
                .map(|c| {
                    let arguments = match &c.arguments {
                        Ok(v) => v.to_string(),
                        Err(bad) => bad.raw.clone(),
                    };
                    json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments}})
                })
                .collect();
            // Some servers (llama.cpp's) refuse a null content next to tool calls.
            json!({"role": "assistant", "content": m.content, "tool_calls": calls})
        }
        role => json!({"role": role.as_str(), "content": m.content}),
    }
}

/// Reads a chat-completions response body.
fn parse_reply(url: &str, body: &Value) -> Result<Reply, ChatError> {
    let protocol = |message: String| ChatError::Protocol { url: url.into(), message };
    let choice = body
        .pointer("/choices/0")
        .ok_or_else(|| protocol(format!("the reply has no `choices[0]`: {}", short(body))))?;
    let message = choice.get("message").ok_or_else(|| protocol("`choices[0]` has no `message`".into()))?;
    let content = message.get("content").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut calls = Vec::new();
    if let Some(list) = message.get("tool_calls").and_then(Value::as_array) {
        for c in list {
            let id = c.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
            let name = c.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_string();
            let arguments = match c.pointer("/function/arguments") {
                Some(Value::String(raw)) if raw.trim().is_empty() => Ok(Value::Object(Map::new())),
                Some(Value::String(raw)) => serde_json::from_str::<Value>(raw)
                    .map_err(|e| netdojo_llm::BadArguments { raw: raw.clone(), error: e.to_string() }),
                // Some servers send the arguments as an object rather than a JSON string.
                Some(v @ Value::Object(_)) => Ok(v.clone()),
                Some(other) => Err(netdojo_llm::BadArguments {
                    raw: other.to_string(),
                    error: "arguments must be a JSON string".into(),
                }),
                None => Ok(Value::Object(Map::new())),
            };
            calls.push(ReplyCall { id, name, arguments });
        }
    }
    let usage = body.get("usage").and_then(|u| {
        Some(TokenUsage {
            prompt_tokens: u.get("prompt_tokens")?.as_u64()?,
            completion_tokens: u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
            cached_tokens: u
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0),
        })
    });
    let finish_reason = choice.get("finish_reason").and_then(Value::as_str).map(str::to_string);
    Ok(Reply { content, calls, usage, finish_reason })
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 300 { format!("{}...", s.chars().take(300).collect::<String>()) } else { s }
}

#[async_trait]
impl ChatModel for OpenAiChat {
    fn agent(&self) -> &str {
        AGENT
    }

    fn request(&self, messages: &[Message], tools: Option<&[ToolSpec]>) -> Value {
        let mut body = json!({
            "model": self.config.model,
            "messages": messages.iter().map(wire_message).collect::<Vec<_>>(),
        });
        if let Some(tools) = tools.filter(|t| !t.is_empty()) {
            body["tools"] = netdojo_llm::function_tools(tools);
            body["tool_choice"] = match &self.config.tool_choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::Required => json!("required"),
                ToolChoice::None => json!("none"),
                ToolChoice::Function(name) => json!({"type": "function", "function": {"name": name}}),
            };
        }
        let s = &self.config.sampling;
        if let Some(t) = s.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(seed) = s.seed {
            body["seed"] = json!(seed);
        }
        if let Some(n) = s.max_tokens {
            body["max_tokens"] = json!(n);
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
        let request = self.authorize(self.client.post(&self.url).header("content-type", "application/json"));
        let response =
            request.body(body.to_string()).send().await.map_err(|e| http::transport(&self.url, &e))?;
        let status = response.status();
        let after = http::retry_after(response.headers());
        let bytes = response.bytes().await.map_err(|e| http::transport(&self.url, &e))?;
        if !status.is_success() {
            let message = self.redact(&http::error_message(&bytes));
            return Err(ChatError::from_status(&self.url, status.as_u16(), message, after));
        }
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| ChatError::Protocol {
            url: self.url.clone(),
            message: format!(
                "the reply is not JSON ({e}); it begins: {:?}",
                self.redact(&String::from_utf8_lossy(&bytes).chars().take(200).collect::<String>())
            ),
        })?;
        let reply = parse_reply(&self.url, &value)?;
        Ok(Exchange { reply, response: value })
    }

    fn config(&self) -> Value {
        serde_json::to_value(&self.config).unwrap_or(Value::Null)
    }
}

/// The agent factory: the OpenAI wire format under `netdojo-llm`'s loop.
pub fn factory(config: OpenAiConfig, settings: Settings) -> Result<LlmAgentFactory, AgentError> {
    Ok(LlmAgentFactory::new(std::sync::Arc::new(OpenAiChat::new(config)?), settings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_epoch_after_the_first_samples_with_its_own_seed() {
        let mut config = OpenAiConfig::new("http://127.0.0.1:9/v1", "m");
        config.sampling.seed = Some(5);
        let chat = OpenAiChat::with_key(config.clone(), None).expect("chat");
        let seed = |m: &dyn ChatModel| m.request(&[], None)["seed"].clone();
        assert_eq!(seed(&chat), json!(5));
        assert_eq!(seed(chat.for_epoch(0).expect("seeded").as_ref()), json!(5), "epoch 0 as without epochs");
        let (one, two) = (chat.for_epoch(1).expect("seeded"), chat.for_epoch(2).expect("seeded"));
        assert_ne!(seed(one.as_ref()), json!(5));
        assert_ne!(seed(one.as_ref()), seed(two.as_ref()));
        assert_eq!(seed(one.as_ref()), seed(chat.for_epoch(1).expect("seeded").as_ref()), "reproducible");
        config.sampling.seed = None;
        assert!(
            OpenAiChat::with_key(config, None).expect("chat").for_epoch(1).is_none(),
            "no seed, no change"
        );
    }

    #[test]
    fn replies_with_calls_bad_arguments_and_usage_are_read() {
        let body = json!({"choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "exec", "arguments": "{\"machine\": \"r0\"}"}},
                {"id": "b", "type": "function", "function": {"name": "exec", "arguments": "{\"machine\": "}}
            ]}}], "usage": {"prompt_tokens": 10, "completion_tokens": 3}});
        let reply = parse_reply("u", &body).expect("reply");
        assert_eq!(reply.content, "");
        assert_eq!(reply.calls[0].arguments, Ok(json!({"machine": "r0"})));
        assert!(reply.calls[1].arguments.as_ref().is_err_and(|b| b.raw == "{\"machine\": "));
        assert_eq!(
            reply.usage,
            Some(TokenUsage { prompt_tokens: 10, completion_tokens: 3, cached_tokens: 0 })
        );
        assert!(parse_reply("u", &json!({"id": 1})).is_err());
        // OpenAI reports the prompt's cached part in `prompt_tokens_details`.
        let cached = json!({"choices": [{"message": {"role": "assistant", "content": "hi"}}],
            "usage": {"prompt_tokens": 2006, "completion_tokens": 300,
                      "prompt_tokens_details": {"cached_tokens": 1920}}});
        let usage = parse_reply("u", &cached).expect("reply").usage;
        assert_eq!(
            usage,
            Some(TokenUsage { prompt_tokens: 2006, completion_tokens: 300, cached_tokens: 1920 })
        );
    }

    #[test]
    fn error_bodies_give_their_message_and_context_overflow_is_told_apart() {
        assert_eq!(
            http::error_message(br#"{"error": {"message": "no such model", "type": "x"}}"#),
            "no such model"
        );
        assert_eq!(http::error_message(b"<html>bad gateway</html>"), "<html>bad gateway</html>");
        let e = ChatError::from_status(
            "u",
            400,
            "Requested tokens (5000) exceed context window of 4096".into(),
            None,
        );
        assert!(matches!(e, ChatError::ContextFull { .. }));
        assert!(ChatError::from_status("u", 503, "busy".into(), None).retryable());
        assert!(!ChatError::from_status("u", 404, "no model".into(), None).retryable());
    }

    #[test]
    fn the_key_is_in_no_debug_output_and_no_config() {
        let chat = OpenAiChat::with_key(
            OpenAiConfig { api_key_env: Some("K".into()), ..OpenAiConfig::new("http://127.0.0.1:1/v1", "m") },
            Some(Secret::new("sk-test-1234")),
        )
        .expect("client");
        assert!(!format!("{chat:?}").contains("sk-test-1234"));
        assert!(!ChatModel::config(&chat).to_string().contains("sk-test-1234"));
        assert_eq!(chat.redact("bad key sk-test-1234!"), "bad key [redacted]!");
    }
}
