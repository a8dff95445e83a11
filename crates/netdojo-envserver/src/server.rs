//! The server: tasks, sessions, the run directory, and the HTTP routes.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use netdojo_core::runner::{Budget, Runner};
use netdojo_core::store::RunDir;
use netdojo_core::{EnvironmentFactory, Scorer, Task, ToolCall, ToolSpec};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Mutex, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use crate::episode::{Live, NotStarted, Stepped};
use crate::protocol::{self, Action, ErrorCode, Incoming, ResetRequest, WsError};
use crate::reward::{self, CORRECTNESS_METRIC, Shaping};

/// The largest message a client may send: tool calls are small.
const MAX_MESSAGE: usize = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the server has no task to serve")]
    NoTasks,
    #[error("task id `{0}` appears twice in the served tasks")]
    DuplicateTask(String),
    #[error("listening on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("serving: {0}")]
    Serve(std::io::Error),
    #[error(transparent)]
    Store(#[from] netdojo_core::StoreError),
}

/// How the server runs episodes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Sessions (WebSocket connections) at once; one more is refused with CAPACITY_REACHED.
    pub max_sessions: usize,
    /// A session that sends nothing for this long is closed and its episode ended.
    pub idle_timeout: Duration,
    /// Each episode's limits (steps, time), as `eval`'s.
    pub budget: Budget,
    /// Per-step shaping; `None`: rewards are 0 until the final one.
    pub shaping: Option<Shaping>,
    /// The metric whose value is the final reward.
    pub reward_metric: String,
    /// Record every episode to this run directory (created; it must not hold a run).
    pub record: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_sessions: 64,
            idle_timeout: Duration::from_secs(300),
            budget: Budget::default(),
            shaping: None,
            reward_metric: CORRECTNESS_METRIC.into(),
            record: None,
        }
    }
}

/// An environment served over OpenEnv's protocol.
pub struct EnvServer {
    factory: Arc<dyn EnvironmentFactory>,
    runner: Runner,
    tasks: Vec<Arc<Task>>,
    by_id: HashMap<String, usize>,
    options: Options,
    store: Option<Mutex<RunDir>>,
    next_task: AtomicUsize,
    next_episode: AtomicU64,
    sessions: AtomicUsize,
    /// Episodes started per task id: a task served again is the run's next epoch of it.
    epochs: Mutex<HashMap<String, u32>>,
    /// Turns true when the server stops: every session ends its episode and closes.
    closing: watch::Sender<bool>,
}

impl std::fmt::Debug for EnvServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvServer")
            .field("env", &self.factory.name())
            .field("tasks", &self.tasks.len())
            .field("options", &self.options)
            .finish()
    }
}

impl EnvServer {
    /// A server of `tasks` on environments of `factory`, scored by `scorers`. `config` goes into
    /// the run directory's `config.json` when episodes are recorded.
    pub fn new(
        factory: Arc<dyn EnvironmentFactory>,
        scorers: Vec<Box<dyn Scorer>>,
        tasks: Vec<Task>,
        options: Options,
        config: Value,
    ) -> Result<Self, ServeError> {
        if tasks.is_empty() {
            return Err(ServeError::NoTasks);
        }
        let mut by_id = HashMap::new();
        for (i, task) in tasks.iter().enumerate() {
            if by_id.insert(task.id.clone(), i).is_some() {
                return Err(ServeError::DuplicateTask(task.id.clone()));
            }
        }
        let runner = Runner {
            env: factory.clone(),
            agent: Arc::new(crate::episode::NoAgent),
            scorers: Arc::new(scorers),
            budget: options.budget,
            concurrency: 1,
            prepare_ahead: 0,
        };
        let store = match &options.record {
            Some(dir) => {
                let config = json!({
                    "serve_env": config,
                    "runner": runner.describe(),
                    "shaping": options.shaping,
                    "reward_metric": options.reward_metric,
                    "netdojo_version": env!("CARGO_PKG_VERSION"),
                });
                Some(Mutex::new(RunDir::create(dir, &config)?))
            }
            None => None,
        };
        Ok(Self {
            factory,
            runner,
            tasks: tasks.into_iter().map(Arc::new).collect(),
            by_id,
            options,
            store,
            next_task: AtomicUsize::new(0),
            next_episode: AtomicU64::new(0),
            sessions: AtomicUsize::new(0),
            epochs: Mutex::new(HashMap::new()),
            closing: watch::channel(false).0,
        })
    }

    /// The served tasks, in order (`reset` by `index` picks from these).
    pub fn tasks(&self) -> &[Arc<Task>] {
        &self.tasks
    }

    /// Ends every session (their episodes evaluated, recorded and their environments closed)
    /// and waits until they are gone. New sessions are refused from here on.
    pub async fn drain(&self) {
        self.closing.send_replace(true);
        while self.active_sessions() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The sessions open now.
    pub fn active_sessions(&self) -> usize {
        self.sessions.load(Ordering::Relaxed)
    }

    fn pick(&self, request: &ResetRequest) -> Result<Arc<Task>, WsError> {
        let n = self.tasks.len();
        let index = if let Some(id) = &request.task_id {
            *self.by_id.get(id).ok_or_else(|| {
                WsError::validation(format!("reset: no task `{id}` in the {n} served tasks"))
            })?
        } else if let Some(index) = request.index {
            let index = usize::try_from(index).unwrap_or(usize::MAX);
            if index >= n {
                return Err(WsError::validation(format!(
                    "reset: `index` {index} is past the {n} served tasks"
                )));
            }
            index
        } else if let Some(seed) = request.seed {
            // A seed picks a task reproducibly: the same seed, the same task.
            (seed % n as u64) as usize
        } else {
            self.next_task.fetch_add(1, Ordering::Relaxed) % n
        };
        Ok(self.tasks[index].clone())
    }

    async fn epoch_of(&self, task: &Task) -> u32 {
        let mut epochs = self.epochs.lock().await;
        let slot = epochs.entry(task.id.clone()).or_insert(0);
        let epoch = *slot;
        *slot += 1;
        epoch
    }

    async fn record(&self, record: &netdojo_core::EpisodeRecord, trajectory: &netdojo_core::Trajectory) {
        if let Some(store) = &self.store
            && let Err(e) = store.lock().await.append(record, trajectory)
        {
            tracing::error!(task = %record.task_id, "recording a served episode failed: {e}");
        }
    }
}

/// The routes: `GET /ws` (the OpenEnv session), `GET /health`, `GET /metadata`, `GET /schema`.
pub fn router(server: Arc<EnvServer>) -> Router {
    Router::new()
        .route("/ws", get(upgrade))
        .route("/health", get(health))
        .route("/metadata", get(metadata))
        .route("/schema", get(schema))
        .with_state(server)
}

/// Serves on `listener` (bind it to 127.0.0.1) until `shutdown` resolves. Sessions in flight
/// are ended and recorded when their connections close.
pub async fn serve(
    server: Arc<EnvServer>,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let served = axum::serve(listener, router(server.clone())).with_graceful_shutdown(shutdown).await;
    // Upgraded connections outlive axum's shutdown: end their episodes, so that every
    // environment is closed (its namespaces deleted) before the process exits.
    server.drain().await;
    served.map_err(ServeError::Serve)
}

/// Binds `addr`; refuses any address but a loopback one (servers bind to 127.0.0.1).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    if !addr.ip().is_loopback() {
        return Err(ServeError::Bind {
            addr,
            source: std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "netdojo serves on loopback only",
            ),
        });
    }
    TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    response
}

async fn health(State(server): State<Arc<EnvServer>>) -> Response {
    let _ = server;
    json_response(StatusCode::OK, &json!({"status": "healthy"}))
}

async fn metadata(State(server): State<Arc<EnvServer>>) -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "name": format!("netdojo-{}", server.factory.name()),
            "description": "a netdojo environment: one live network per episode, tool calls as actions",
            "version": env!("CARGO_PKG_VERSION"),
            "tasks": server.tasks.len(),
            "active_sessions": server.active_sessions(),
            "max_sessions": server.options.max_sessions,
        }),
    )
}

/// OpenEnv's `SchemaResponse`: the action is its `CallToolAction` (the title is how generic
/// clients, verifiers' OpenEnv taskset among them, recognise a tool-calling environment).
async fn schema() -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "action": {
                "title": "CallToolAction",
                "description": "Call one tool (list them with {\"type\": \"list_tools\"}).",
                "type": "object",
                "properties": {
                    "type": {"const": "call_tool", "default": "call_tool", "type": "string"},
                    "tool_name": {"type": "string", "description": "Name of the tool to call"},
                    "arguments": {"type": "object", "description": "Arguments to pass to the tool"},
                },
                "required": ["tool_name"],
            },
            "observation": {
                "title": "CallToolObservation",
                "type": "object",
                "properties": {
                    "tool_name": {"type": "string"},
                    "result": {},
                    "error": {},
                    "metadata": {"type": "object"},
                    "done": {"type": "boolean"},
                    "reward": {"type": ["number", "null"]},
                },
            },
            "state": {
                "title": "State",
                "type": "object",
                "properties": {"episode_id": {"type": ["string", "null"]}, "step_count": {"type": "integer"}},
            },
        }),
    )
}

fn header_is(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.trim().eq_ignore_ascii_case(token))
}

/// The WebSocket handshake (RFC 6455 §4.2.2) on hyper's upgrade, then the session.
async fn upgrade(State(server): State<Arc<EnvServer>>, mut request: Request) -> Response {
    let headers = request.headers();
    let key = headers.get(header::SEC_WEBSOCKET_KEY).map(|k| derive_accept_key(k.as_bytes()));
    let version_ok = headers.get(header::SEC_WEBSOCKET_VERSION).is_some_and(|v| v.as_bytes() == b"13");
    let (Some(accept), true, true, true) = (
        key,
        version_ok,
        header_is(headers, header::UPGRADE, "websocket"),
        header_is(headers, header::CONNECTION, "upgrade"),
    ) else {
        return json_response(
            StatusCode::BAD_REQUEST,
            &json!({"error": "GET /ws is OpenEnv's WebSocket: send Upgrade: websocket, Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key"}),
        );
    };
    let on_upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let config = WebSocketConfig::default()
                    .max_message_size(Some(MAX_MESSAGE))
                    .max_frame_size(Some(MAX_MESSAGE));
                let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config))
                    .await;
                session(server, ws).await;
            }
            Err(e) => tracing::warn!("WebSocket upgrade failed: {e}"),
        }
    });
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, header::HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, header::HeaderValue::from_static("websocket"));
    if let Ok(accept) = header::HeaderValue::from_str(&accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}

/// Counts a session while it lives.
struct Seat(Arc<EnvServer>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.sessions.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn session<S>(server: Arc<EnvServer>, mut ws: WebSocketStream<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let seats = server.sessions.fetch_add(1, Ordering::Relaxed) + 1;
    let _seat = Seat(server.clone());
    let mut closing = server.closing.subscribe();
    if *closing.borrow() {
        let error = WsError::execution("the server is stopping");
        let _ = ws.send(Message::text(error.to_json().to_string())).await;
        let _ = ws.close(None).await;
        return;
    }
    if seats > server.options.max_sessions {
        let max = server.options.max_sessions;
        let error = WsError::new(
            ErrorCode::CapacityReached,
            format!("the server is at its limit of {max} sessions (--max-sessions)"),
        );
        let _ = ws.send(Message::text(error.to_json().to_string())).await;
        let _ = ws.close(None).await;
        return;
    }
    let mut session = Session { server: server.clone(), episode: None };
    loop {
        let next = tokio::select! {
            next = tokio::time::timeout(server.options.idle_timeout, ws.next()) => next,
            _ = closing.wait_for(|c| *c) => break,
        };
        let message = match next {
            Err(_) => {
                tracing::info!("closing a session idle for {:?}", server.options.idle_timeout);
                break;
            }
            Ok(None) | Ok(Some(Err(_))) => break,
            Ok(Some(Ok(message))) => message,
        };
        let text = match message {
            Message::Text(text) => text,
            Message::Close(_) => break,
            Message::Binary(_) => {
                let error = WsError::validation("messages are JSON text frames");
                if ws.send(Message::text(error.to_json().to_string())).await.is_err() {
                    break;
                }
                continue;
            }
            // Pings are answered by tungstenite itself.
            _ => continue,
        };
        let answer = match protocol::parse(text.as_str()) {
            Ok(Incoming::Close) => break,
            Ok(incoming) => session.handle(incoming).await.unwrap_or_else(|e| e.to_json()),
            Err(e) => e.to_json(),
        };
        if ws.send(Message::text(answer.to_string())).await.is_err() {
            break;
        }
    }
    session.end().await;
    let _ = ws.close(None).await;
}

/// A served episode, with what its rewards need.
#[derive(Debug)]
struct Episode {
    id: String,
    live: Live,
    /// The state check before the next step.
    previous: netdojo_core::StateCheck,
    steps: usize,
    /// The rewards returned so far (their sum is the episode's return).
    returned: f64,
    /// Set once the episode is over.
    ended: Option<Value>,
}

struct Session {
    server: Arc<EnvServer>,
    episode: Option<Episode>,
}

impl Session {
    async fn handle(&mut self, incoming: Incoming) -> Result<Value, WsError> {
        match incoming {
            Incoming::Reset(request) => self.reset(request).await,
            Incoming::Step(Action::ListTools) => self.list_tools(),
            Incoming::Step(Action::CallTool { tool_name, arguments }) => {
                self.call(tool_name, arguments).await
            }
            Incoming::State => Ok(protocol::state(self.state())),
            Incoming::Close => Ok(Value::Null),
        }
    }

    /// Ends the episode in flight, if any, and records it.
    async fn end(&mut self) {
        if let Some(mut episode) = self.episode.take()
            && episode.ended.is_none()
        {
            let (record, trajectory) = episode.live.finish().await;
            self.server.record(&record, &trajectory).await;
        }
    }

    async fn reset(&mut self, request: ResetRequest) -> Result<Value, WsError> {
        let task = self.server.pick(&request)?;
        self.end().await;
        let epoch = self.server.epoch_of(&task).await;
        let n = self.server.next_episode.fetch_add(1, Ordering::Relaxed);
        let id = request.episode_id.clone().unwrap_or_else(|| format!("{}~{epoch}#{n}", task.id));
        let live =
            match Live::start(&self.server.runner, self.server.factory.clone(), task.clone(), epoch).await {
                Ok(live) => live,
                Err(NotStarted(done)) => {
                    let (record, trajectory) = *done;
                    self.server.record(&record, &trajectory).await;
                    let why = record.error.unwrap_or_else(|| "the environment did not start".into());
                    return Err(WsError::new(ErrorCode::FactoryError, format!("task `{}`: {why}", task.id)));
                }
            };
        let tools = tool_list(&live.tools);
        let metadata = json!({
            "episode_id": id,
            "task_id": task.id,
            "application": task.application,
            "level": task.level,
            "label": task.label,
            "epoch": epoch,
            "brief": live.brief,
            "tools": tools,
            "max_steps": self.server.options.budget.max_steps,
            "check": live.initial_check,
        });
        let previous = live.initial_check.clone();
        self.episode = Some(Episode { id, live, previous, steps: 0, returned: 0.0, ended: None });
        Ok(protocol::observation(json!({"metadata": metadata}), None, false))
    }

    fn list_tools(&self) -> Result<Value, WsError> {
        let episode = self.episode.as_ref().ok_or_else(no_episode)?;
        Ok(protocol::observation(
            json!({"tools": tool_list(&episode.live.tools)}),
            None,
            episode.ended.is_some(),
        ))
    }

    async fn call(&mut self, tool_name: String, arguments: Value) -> Result<Value, WsError> {
        let shaping = self.server.options.shaping;
        let episode = self.episode.as_mut().ok_or_else(no_episode)?;
        if episode.ended.is_some() {
            return Err(WsError::execution("the episode is over (done): reset to start another"));
        }
        let index = episode.steps;
        let call = ToolCall { id: format!("call-{index}"), ..ToolCall::new(tool_name.clone(), arguments) };
        match episode.live.call(call).await {
            Stepped::Continues(continued) => {
                let (observation, check) = *continued;
                episode.steps += 1;
                let shaped = shaping
                    .map(|s| s.step(&episode.live.initial_check, &episode.previous, &check, observation.ok));
                let reward = shaped.as_ref().and_then(|s| s["value"].as_f64()).unwrap_or(0.0);
                episode.returned += reward;
                let info = json!({
                    "episode_id": episode.id,
                    "step": index,
                    "ok": observation.ok,
                    "check": check,
                    "shaping": shaped,
                    "truncated": false,
                });
                episode.previous = check;
                Ok(protocol::observation(
                    tool_observation(&tool_name, &observation, info),
                    Some(reward),
                    false,
                ))
            }
            Stepped::Ended(done) => {
                let (record, trajectory) = *done;
                self.server.record(&record, &trajectory).await;
                // The call ran when the trajectory has a step for it (`finish` makes none).
                let step = trajectory.steps.get(index).filter(|_| trajectory.steps.len() > index);
                let shaped = match (shaping, step) {
                    (Some(s), Some(step)) => Some(s.step(
                        &episode.live.initial_check,
                        &episode.previous,
                        &step.check,
                        step.observation.ok,
                    )),
                    _ => None,
                };
                let correctness = reward::final_reward(&record, &self.server.options.reward_metric);
                let reward = correctness + shaped.as_ref().and_then(|s| s["value"].as_f64()).unwrap_or(0.0);
                episode.returned += reward;
                if step.is_some() {
                    episode.steps += 1;
                }
                let truncated = matches!(
                    record.end,
                    netdojo_core::EndReason::StepBudget | netdojo_core::EndReason::TimeBudget
                );
                let metrics: serde_json::Map<String, Value> =
                    record.metrics.iter().map(|m| (m.name.clone(), json!(m.value.as_f64()))).collect();
                let info = json!({
                    "episode_id": episode.id,
                    "step": index,
                    "ok": step.is_none_or(|s| s.observation.ok),
                    "check": step.map(|s| &s.check),
                    "shaping": shaped,
                    "truncated": truncated,
                    "end": record.end,
                    "class": record.class(),
                    "correctness": correctness,
                    "reward_metric": self.server.options.reward_metric,
                    "metrics": metrics,
                    "outcome": trajectory.outcome.as_ref().map(|o| &o.checks),
                    "error": record.error,
                    "return": episode.returned,
                });
                let observation = match step {
                    Some(step) => step.observation.clone(),
                    None => netdojo_core::Observation::ok(
                        &ToolCall::new(tool_name.clone(), Value::Null),
                        format!("episode over ({}): reward {correctness}", end_name(&record)),
                        None,
                    ),
                };
                episode.ended = Some(info.clone());
                Ok(protocol::observation(
                    tool_observation(&tool_name, &observation, info),
                    Some(reward),
                    true,
                ))
            }
        }
    }

    fn state(&self) -> Value {
        match &self.episode {
            None => json!({"episode_id": null, "step_count": 0}),
            Some(episode) => json!({
                "episode_id": episode.id,
                "step_count": episode.steps,
                "task_id": episode.live.task.id,
                "done": episode.ended.is_some(),
                "return": episode.returned,
                "final": episode.ended,
            }),
        }
    }
}

fn end_name(record: &netdojo_core::EpisodeRecord) -> String {
    serde_json::to_value(record.end).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

fn no_episode() -> WsError {
    WsError::execution("no episode: send reset first")
}

/// Tools as OpenEnv's `Tool`: name, description, input_schema.
fn tool_list(tools: &[ToolSpec]) -> Vec<Value> {
    tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
        .collect()
}

/// A `CallToolObservation`: the result as FastMCP's `CallToolResult` serialises (text content,
/// structured content, `data`, `is_error`), so `MCPToolClient.call_tool` returns `data`, the
/// text the agent reads. A refused call is a result with `is_error`, never a transport error.
fn tool_observation(tool: &str, observation: &netdojo_core::Observation, info: Value) -> Value {
    json!({
        "tool_name": tool,
        "result": {
            "content": [{"type": "text", "text": observation.content}],
            "structured_content": observation.data,
            "data": observation.content,
            "is_error": !observation.ok,
        },
        "error": null,
        "metadata": info,
    })
}
