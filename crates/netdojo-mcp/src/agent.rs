//! An agent behind an MCP server, as a netdojo [`Agent`]: the `netdojo.agent` protocol
//! (docs/mcp.md, "An agent behind MCP"), its client ([`McpAgent`], [`McpAgentFactory`]) and the
//! types both ends share. [`crate::agent_server`] serves any netdojo agent over it.
//!
//! The protocol mirrors netdojo-core's [`Agent`] trait call for call, so nothing is lost on the
//! way: `netdojo.agent.start` is [`Agent::start`] (the brief, the tools as JSON Schemas, the
//! step budget, the task without its ground truth), `netdojo.agent.step` is [`Agent::step`]
//! (the observations in, an [`AgentTurn`] out, call ids and `malformed` calls included), and
//! `netdojo.agent.end` lets the server forget the episode.
//!
//! Everything the agent server answers is untrusted. A step answer that is not a turn, or a
//! call that is not a call, becomes a [`ToolCall::malformed`] call: the runner counts an
//! invalid step and tells the agent why, as it does for a model's unreadable reply. What makes
//! a turn impossible (the server unreachable or gone, a JSON-RPC error, no answer in time, the
//! agent saying it failed) is an [`AgentError`]: the episode is recorded as errored.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use netdojo_core::{
    Agent, AgentError, AgentFactory, AgentTurn, EpisodeStart, Observation, Task, TaskKind, TokenUsage,
    ToolCall, ToolSpec,
};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

/// Starts an episode: [`StartArgs`] in, [`Started`] out.
pub const START: &str = "netdojo.agent.start";
/// The next turn: [`StepArgs`] in, an [`AgentTurn`] out.
pub const STEP: &str = "netdojo.agent.step";
/// The episode is over (the runner stopped asking): [`EndArgs`] in, `{}` out.
pub const END: &str = "netdojo.agent.end";

/// The agent's name in run directories (`--agent mcp`).
pub const NAME: &str = "mcp";

/// The arguments of `netdojo.agent.start`: [`EpisodeStart`] as data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartArgs {
    /// The task without its ground truth ([`public_task`]). A scripted agent server (the
    /// oracle) looks the full task up by `id` in its own copy of the suite.
    pub task: Task,
    /// The environment's brief.
    pub brief: String,
    /// The tools, `finish` included, with JSON Schemas of their arguments.
    pub tools: Vec<ToolSpec>,
    /// The step budget.
    pub max_steps: usize,
}

/// The answer to `netdojo.agent.start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Started {
    /// The episode's handle, given back with each step (one server may run many episodes).
    pub episode: String,
}

/// The arguments of `netdojo.agent.step`: [`Agent::step`]'s feedback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepArgs {
    pub episode: String,
    /// The observations of the previous turn's calls (empty on the first turn).
    pub feedback: Vec<Observation>,
}

/// The arguments of `netdojo.agent.end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndArgs {
    pub episode: String,
}

/// JSON Schemas of the three tools' arguments, as `tools/list` gives them.
pub fn input_schema(tool: &str) -> Value {
    let any_object = json!({"type": "object"});
    match tool {
        START => json!({
            "type": "object",
            "properties": {
                "task": {"type": "object", "description": "netdojo's task without its ground truth (id, application, level, label, query, kind)"},
                "brief": {"type": "string"},
                "tools": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "parameters": any_object},
                    "required": ["name", "parameters"],
                }},
                "max_steps": {"type": "integer", "minimum": 0},
            },
            "required": ["task", "brief", "tools", "max_steps"],
        }),
        STEP => json!({
            "type": "object",
            "properties": {
                "episode": {"type": "string"},
                "feedback": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "call_id": {"type": "string"}, "tool": {"type": "string"}, "ok": {"type": "boolean"},
                        "content": {"type": "string"}, "data": {},
                    },
                    "required": ["call_id", "tool", "ok", "content"],
                }},
            },
            "required": ["episode", "feedback"],
        }),
        _ => {
            json!({"type": "object", "properties": {"episode": {"type": "string"}}, "required": ["episode"]})
        }
    }
}

/// The task as an agent under evaluation may see it: its ground truth (actions, answer, goal,
/// faults, repair, ground-truth configurations and reasoning, testcases) and its backend setup
/// are removed. The wire never carries what only the oracle may read.
pub fn public_task(task: &Task) -> Task {
    let kind = match &task.kind {
        TaskKind::Constructive { .. } => TaskKind::Constructive { actions: vec![], answer: None, goal: None },
        TaskKind::Reactive { .. } => TaskKind::Reactive { faults: vec![], repair: vec![] },
        TaskKind::Config(c) => {
            let mut c = c.clone();
            c.ground_truth_configs.clear();
            c.ground_truth_linux.clear();
            c.ground_truth_reasoning.clear();
            c.testcases.clear();
            TaskKind::Config(c)
        }
    };
    Task { setup: Value::Null, kind, ..task.clone() }
}

/// Reads an agent server's answer to `netdojo.agent.step` as a turn. Never fails: what is not
/// a turn becomes one malformed call saying why, and each element of `calls` that is not a
/// call becomes a malformed call of its own. Calls without an id get `mcp-TURN-I`.
pub fn read_turn(answer: &Value, turn: usize) -> AgentTurn {
    let short = |v: &Value| {
        let s = v.to_string();
        match s.char_indices().nth(500) {
            Some((cut, _)) => format!("{}...", &s[..cut]),
            None => s,
        }
    };
    let not_a_turn = |why: String| AgentTurn {
        calls: vec![ToolCall::malformed("", answer.clone(), why)],
        ..AgentTurn::default()
    };
    let Some(object) = answer.as_object() else {
        return not_a_turn(format!(
            "the answer to {STEP} is not a turn (an object with `calls`): {}",
            short(answer)
        ));
    };
    let Some(calls) = object.get("calls").and_then(Value::as_array) else {
        return not_a_turn(format!("the answer to {STEP} has no `calls` array: {}", short(answer)));
    };
    let reasoning = match object.get("reasoning") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let usage = object.get("usage").and_then(|u| serde_json::from_value::<TokenUsage>(u.clone()).ok());
    let transcript = object.get("transcript").and_then(Value::as_array).cloned().unwrap_or_default();
    let calls = calls
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            let mut call = match serde_json::from_value::<ToolCall>(raw.clone()) {
                Ok(call) => call,
                Err(e) => {
                    let name = raw.get("name").and_then(Value::as_str).unwrap_or_default();
                    let arguments = raw.get("arguments").cloned().unwrap_or_else(|| raw.clone());
                    ToolCall::malformed(
                        name,
                        arguments,
                        format!("call {i} of the turn is not a tool call ({e}): {}", short(raw)),
                    )
                }
            };
            if call.id.is_empty() {
                call.id = format!("mcp-{turn}-{i}");
            }
            call
        })
        .collect();
    AgentTurn { reasoning, calls, usage, transcript }
}

/// Where the agent server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A command started for each episode, speaking MCP on its stdio. No shell: the program
    /// and its arguments as a list.
    Stdio { program: String, args: Vec<String> },
    /// A streamable HTTP endpoint (`http://127.0.0.1:PORT/mcp`); one connection per episode.
    Http { url: String },
}

/// `--agent mcp`: one [`McpAgent`] per episode.
#[derive(Debug, Clone)]
pub struct McpAgentFactory {
    pub endpoint: Endpoint,
    /// The longest the agent server may take to connect or to answer one request.
    pub timeout: Duration,
}

impl McpAgentFactory {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

    /// An agent server started as `program args...` for each episode.
    pub fn stdio(program: impl Into<String>, args: Vec<String>) -> Self {
        Self { endpoint: Endpoint::Stdio { program: program.into(), args }, timeout: Self::DEFAULT_TIMEOUT }
    }

    /// An agent server at `url` (plain HTTP: no TLS stack is compiled in; reach a remote one
    /// through an SSH port-forward).
    pub fn http(url: impl Into<String>) -> Result<Self, AgentError> {
        let url = url.into();
        if !url.starts_with("http://") {
            return Err(AgentError::Config {
                agent: NAME.into(),
                message: format!(
                    "agent URL `{url}`: expected http://HOST:PORT/PATH (plain HTTP, e.g. http://127.0.0.1:8090/mcp)"
                ),
            });
        }
        Ok(Self { endpoint: Endpoint::Http { url }, timeout: Self::DEFAULT_TIMEOUT })
    }

    pub fn with_timeout(self, timeout: Duration) -> Self {
        Self { timeout, ..self }
    }
}

impl AgentFactory for McpAgentFactory {
    fn name(&self) -> &str {
        NAME
    }

    fn config(&self) -> Value {
        let endpoint = match &self.endpoint {
            Endpoint::Stdio { program, args } => {
                json!({"transport": "stdio", "program": program, "args": args})
            }
            Endpoint::Http { url } => json!({"transport": "http", "url": url}),
        };
        json!({"endpoint": endpoint, "timeout_s": self.timeout.as_secs_f64()})
    }

    fn create(&self, _task: &Task) -> Result<Box<dyn Agent>, AgentError> {
        Ok(Box::new(McpAgent {
            endpoint: self.endpoint.clone(),
            timeout: self.timeout,
            conn: None,
            episode: None,
            turn: 0,
        }))
    }
}

/// The last lines a stdio agent server wrote to its stderr, told when it fails.
type StderrTail = Arc<Mutex<VecDeque<String>>>;
const STDERR_LINES: usize = 20;

#[derive(Debug)]
struct Conn {
    client: RunningService<RoleClient, ()>,
    stderr: Option<StderrTail>,
    /// Cancelled once a stdio server's stderr is closed (it exited): its last words are read.
    stderr_closed: CancellationToken,
}

/// One episode of an agent behind an MCP server.
#[derive(Debug)]
pub struct McpAgent {
    endpoint: Endpoint,
    timeout: Duration,
    conn: Option<Conn>,
    episode: Option<String>,
    turn: usize,
}

fn unreachable(message: String) -> AgentError {
    AgentError::Unreachable { agent: NAME.into(), message }
}

fn protocol(message: String) -> AgentError {
    AgentError::Protocol { agent: NAME.into(), message }
}

impl McpAgent {
    fn describe(&self) -> String {
        match &self.endpoint {
            Endpoint::Stdio { program, args } => {
                format!(
                    "agent server `{}`",
                    std::iter::once(program).chain(args).cloned().collect::<Vec<_>>().join(" ")
                )
            }
            Endpoint::Http { url } => format!("agent server {url}"),
        }
    }

    /// What the server last wrote to its stderr, as a suffix for an error message.
    fn stderr_tail(&self) -> String {
        tail_of(self.conn.as_ref().and_then(|c| c.stderr.as_ref()))
    }

    async fn connect(&self) -> Result<Conn, AgentError> {
        let what = self.describe();
        match &self.endpoint {
            Endpoint::Stdio { program, args } => {
                let mut command = tokio::process::Command::new(program);
                command.args(args);
                let (child, stderr) = TokioChildProcess::builder(command)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| unreachable(format!("{what}: cannot start it: {e}")))?;
                let stderr_closed = CancellationToken::new();
                let tail: Option<StderrTail> = stderr.map(|stderr| {
                    let tail: StderrTail = Arc::default();
                    let keep = tail.clone();
                    let closed = stderr_closed.clone();
                    tokio::spawn(async move {
                        let _closed = closed.drop_guard();
                        let mut lines = tokio::io::BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            tracing::debug!(target: "netdojo_mcp::agent", "agent server: {line}");
                            if let Ok(mut t) = keep.lock() {
                                if t.len() == STDERR_LINES {
                                    t.pop_front();
                                }
                                t.push_back(line);
                            }
                        }
                    });
                    tail
                });
                let client = match tokio::time::timeout(self.timeout, ().serve(child)).await {
                    Ok(Ok(client)) => client,
                    Ok(Err(e)) => {
                        let _ = tokio::time::timeout(Duration::from_secs(1), stderr_closed.cancelled()).await;
                        let conn_tail = tail_of(tail.as_ref());
                        return Err(unreachable(format!("{what}: MCP handshake failed: {e}{conn_tail}")));
                    }
                    Err(_) => {
                        return Err(unreachable(format!(
                            "{what}: no answer to `initialize` in {} s",
                            self.timeout.as_secs_f64()
                        )));
                    }
                };
                Ok(Conn { client, stderr: tail, stderr_closed })
            }
            Endpoint::Http { url } => {
                crate::client::install_crypto_provider();
                let transport = StreamableHttpClientTransport::from_uri(url.clone());
                let client = match tokio::time::timeout(self.timeout, ().serve(transport)).await {
                    Ok(Ok(client)) => client,
                    Ok(Err(e)) => return Err(unreachable(format!("{what}: connecting: {e}"))),
                    Err(_) => {
                        return Err(unreachable(format!(
                            "{what}: no answer to `initialize` in {} s",
                            self.timeout.as_secs_f64()
                        )));
                    }
                };
                Ok(Conn { client, stderr: None, stderr_closed: CancellationToken::new() })
            }
        }
    }

    /// Calls `tool` and returns its result as JSON (the structured content, or the text parsed
    /// as JSON, or the text as a JSON string when it is not JSON).
    async fn call(&self, tool: &str, arguments: Value) -> Result<Value, AgentError> {
        let what = self.describe();
        let Some(conn) = &self.conn else {
            return Err(protocol(format!("{what}: {tool} before {START}")));
        };
        let Value::Object(arguments) = arguments else {
            return Err(protocol(format!("{tool}: arguments are not an object")));
        };
        let request = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let result: CallToolResult = match tokio::time::timeout(self.timeout, conn.client.call_tool(request))
            .await
        {
            Err(_) => {
                return Err(unreachable(format!(
                    "{what}: no answer to {tool} in {} s{}",
                    self.timeout.as_secs_f64(),
                    self.stderr_tail()
                )));
            }
            Ok(Err(ServiceError::McpError(e))) => {
                return Err(protocol(format!("{what}: {tool} refused: {} (code {})", e.message, e.code.0)));
            }
            Ok(Err(
                ServiceError::TransportClosed
                | ServiceError::TransportSend(_)
                | ServiceError::Cancelled { .. },
            )) => {
                let exited = match &self.endpoint {
                    Endpoint::Stdio { .. } => {
                        let _ = tokio::time::timeout(Duration::from_secs(1), conn.stderr_closed.cancelled())
                            .await;
                        "it exited or closed its stdout"
                    }
                    Endpoint::Http { .. } => "the connection failed",
                };
                return Err(unreachable(format!("{what}: {tool}: {exited}{}", self.stderr_tail())));
            }
            Ok(Err(e)) => return Err(protocol(format!("{what}: {tool}: {e}{}", self.stderr_tail()))),
            Ok(Ok(result)) => result,
        };
        let text: String =
            result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
        if result.is_error == Some(true) {
            // The agent could not make a turn (its model unreachable...): an errored episode,
            // which a resumed run retries.
            return Err(unreachable(format!("{what}: {tool} failed: {text}")));
        }
        Ok(match result.structured_content {
            Some(v) if !v.is_null() => v,
            _ => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        })
    }
}

fn tail_of(tail: Option<&StderrTail>) -> String {
    let lines: Vec<String> =
        tail.and_then(|t| t.lock().ok().map(|t| t.iter().cloned().collect())).unwrap_or_default();
    if lines.is_empty() { String::new() } else { format!("; its stderr ends with:\n{}", lines.join("\n")) }
}

#[async_trait]
impl Agent for McpAgent {
    async fn start(&mut self, episode: &EpisodeStart<'_>) -> Result<(), AgentError> {
        let conn = self.connect().await?;
        let what = self.describe();
        let tools = match tokio::time::timeout(self.timeout, conn.client.list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => return Err(protocol(format!("{what}: tools/list: {e}"))),
            Err(_) => return Err(unreachable(format!("{what}: no answer to tools/list"))),
        };
        self.conn = Some(conn);
        let names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
        if let Some(missing) = [START, STEP].into_iter().find(|t| !names.contains(t)) {
            return Err(protocol(format!(
                "{what} is not a netdojo agent server: it has no tool `{missing}` (tools: {})",
                names.join(", ")
            )));
        }
        let args = StartArgs {
            task: public_task(episode.task),
            brief: episode.brief.to_string(),
            tools: episode.tools.to_vec(),
            max_steps: episode.max_steps,
        };
        let args = serde_json::to_value(&args).map_err(|e| protocol(format!("{START}: {e}")))?;
        let answer = self.call(START, args).await?;
        let started: Started = serde_json::from_value(answer.clone()).map_err(|e| {
            protocol(format!("{what}: the answer to {START} is not {{\"episode\": ID}} ({e}): {answer}"))
        })?;
        self.episode = Some(started.episode);
        Ok(())
    }

    async fn step(&mut self, feedback: &[Observation]) -> Result<AgentTurn, AgentError> {
        let Some(episode) = self.episode.clone() else {
            return Err(protocol(format!("{}: step before start", self.describe())));
        };
        let args = serde_json::to_value(StepArgs { episode, feedback: feedback.to_vec() })
            .map_err(|e| protocol(format!("{STEP}: {e}")))?;
        let answer = self.call(STEP, args).await?;
        let turn = read_turn(&answer, self.turn);
        self.turn += 1;
        Ok(turn)
    }
}

impl Drop for McpAgent {
    /// Tells the server the episode is over (best effort, in the background), then hangs up;
    /// a stdio server's process is ended with its connection.
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let episode = self.episode.take();
        match (tokio::runtime::Handle::try_current(), episode) {
            (Ok(handle), Some(episode)) => {
                let mut arguments = JsonObject::new();
                arguments.insert("episode".into(), Value::String(episode));
                handle.spawn(async move {
                    let request = CallToolRequestParams::new(END).with_arguments(arguments);
                    let _ =
                        tokio::time::timeout(Duration::from_secs(5), conn.client.call_tool(request)).await;
                    conn.client.cancellation_token().cancel();
                });
            }
            _ => conn.client.cancellation_token().cancel(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_read_with_ids_reasoning_and_usage() {
        let answer = json!({
            "reasoning": "look first",
            "calls": [
                {"id": "c1", "name": "get-nodes", "arguments": {"type": "switch"}},
                {"name": "finish", "arguments": {}},
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4},
        });
        let turn = read_turn(&answer, 2);
        assert_eq!(turn.reasoning, "look first");
        assert_eq!(turn.calls[0].id, "c1");
        assert_eq!(turn.calls[1].id, "mcp-2-1", "a call without id gets one");
        assert_eq!(turn.calls[1].name, "finish");
        assert!(turn.calls.iter().all(|c| c.malformed.is_none()));
        assert_eq!(turn.usage, Some(TokenUsage { prompt_tokens: 3, completion_tokens: 4, cached_tokens: 0 }));
    }

    #[test]
    fn what_is_not_a_turn_becomes_malformed_calls() {
        let text = read_turn(&json!("I would configure R1"), 0);
        assert_eq!(text.calls.len(), 1);
        let why = text.calls[0].malformed.as_deref().expect("malformed");
        assert!(why.contains("not a turn") && why.contains("I would configure R1"), "{why}");

        let no_calls = read_turn(&json!({"reasoning": "x", "actions": []}), 0);
        assert!(no_calls.calls[0].malformed.as_deref().expect("malformed").contains("no `calls` array"));

        let bad = read_turn(&json!({"calls": [{"nam": "x"}, 5, {"name": "ok", "arguments": {}}]}), 0);
        assert_eq!(bad.calls.len(), 3);
        assert!(bad.calls[0].malformed.as_deref().expect("malformed").contains("call 0"));
        assert!(bad.calls[1].malformed.as_deref().expect("malformed").contains("call 1"));
        assert!(bad.calls[2].malformed.is_none());
        // A call the agent itself marked malformed keeps its message.
        let marked = read_turn(&json!({"calls": [{"name": "x", "malformed": "not JSON"}]}), 0);
        assert_eq!(marked.calls[0].malformed.as_deref(), Some("not JSON"));
    }

    #[test]
    fn the_public_task_has_no_ground_truth() {
        let task: Task = serde_json::from_value(json!({
            "id": "t", "application": "dcgraph", "level": 1, "label": "add", "query": "q",
            "setup": {"graph": "secret"}, "kind": "constructive",
            "actions": [{"name": "add-node", "arguments": {}}], "answer": 3, "goal": {"d": 1},
        }))
        .expect("task");
        let public = serde_json::to_value(public_task(&task)).expect("json");
        assert_eq!(public["actions"], json!([]));
        assert!(public.get("answer").is_none() && public.get("goal").is_none());
        assert_eq!(public["setup"], Value::Null);
        assert_eq!(public["query"], "q");
    }

    #[test]
    fn only_plain_http_urls_are_taken() {
        assert!(McpAgentFactory::http("http://127.0.0.1:9/mcp").is_ok());
        let e = McpAgentFactory::http("127.0.0.1:9").expect_err("no scheme");
        assert!(e.to_string().contains("http://"), "{e}");
    }
}
