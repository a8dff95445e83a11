//! Any netdojo agent served over the `netdojo.agent` protocol ([`crate::agent`]): the tools
//! `netdojo.agent.start`, `netdojo.agent.step` and `netdojo.agent.end`, on stdio or on
//! streamable HTTP bound to 127.0.0.1. `cargo xtask mcp serve-agent` and `netdojo-mcp
//! serve-agent` run it; [`crate::agent::McpAgent`] is its client.
//!
//! One server runs any number of episodes at once, each under the handle `start` returned.
//! The task `start` receives has no ground truth; a server given a suite ([`AgentServer::
//! with_tasks`]) hands its agent the suite's full task of the same id instead, which is how the
//! oracle, which plays the ground truth, is served.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use netdojo_core::{Agent, AgentFactory, EpisodeStart, Task};
use rmcp::ServiceExt;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode, ErrorData,
    Implementation, InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::agent::{END, EndArgs, START, STEP, StartArgs, Started, StepArgs, input_schema};

type Episodes = std::sync::Mutex<HashMap<String, Arc<Mutex<Box<dyn Agent>>>>>;

/// A netdojo agent as an MCP server.
#[derive(Clone)]
pub struct AgentServer {
    factory: Arc<dyn AgentFactory>,
    /// Full tasks by id, for agents that read ground truth.
    tasks: Option<Arc<HashMap<String, Task>>>,
    episodes: Arc<Episodes>,
    next: Arc<AtomicU64>,
}

impl std::fmt::Debug for AgentServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentServer")
            .field("agent", &self.factory.name())
            .field("tasks", &self.tasks.as_ref().map(|t| t.len()))
            .finish()
    }
}

fn invalid(message: impl Into<String>) -> ErrorData {
    ErrorData::new(ErrorCode::INVALID_PARAMS, message.into(), None)
}

fn answer(value: &impl serde::Serialize) -> Result<CallToolResult, ErrorData> {
    let value = serde_json::to_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    Ok(result)
}

fn parse<T: serde::de::DeserializeOwned>(tool: &str, arguments: Option<JsonObject>) -> Result<T, ErrorData> {
    let arguments = Value::Object(arguments.unwrap_or_default());
    serde_json::from_value(arguments).map_err(|e| invalid(format!("{tool}: {e}")))
}

impl AgentServer {
    pub fn new(factory: Arc<dyn AgentFactory>) -> Self {
        Self { factory, tasks: None, episodes: Arc::default(), next: Arc::default() }
    }

    /// Episodes of a task in `tasks` get the full task (ground truth included); a task not in
    /// them is refused, so a misconfigured oracle errs instead of scoring zero.
    pub fn with_tasks(self, tasks: impl IntoIterator<Item = Task>) -> Self {
        let tasks = tasks.into_iter().map(|t| (t.id.clone(), t)).collect();
        Self { tasks: Some(Arc::new(tasks)), ..self }
    }

    /// Episodes under way.
    pub fn episodes(&self) -> usize {
        self.episodes.lock().map(|e| e.len()).unwrap_or(0)
    }

    fn agent(&self, episode: &str) -> Result<Arc<Mutex<Box<dyn Agent>>>, ErrorData> {
        let episodes = self.episodes.lock().map_err(|_| ErrorData::internal_error("episodes lock", None))?;
        episodes
            .get(episode)
            .cloned()
            .ok_or_else(|| invalid(format!("no episode `{episode}` (ended, or never started)")))
    }

    async fn start(&self, args: StartArgs) -> Result<CallToolResult, ErrorData> {
        let task = match &self.tasks {
            None => args.task,
            Some(tasks) => tasks.get(&args.task.id).cloned().ok_or_else(|| {
                invalid(format!(
                    "task `{}` is not in this agent server's suite ({} tasks)",
                    args.task.id,
                    tasks.len()
                ))
            })?,
        };
        let mut agent = match self.factory.create(&task) {
            Ok(agent) => agent,
            Err(e) => return Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())])),
        };
        let start =
            EpisodeStart { task: &task, brief: &args.brief, tools: &args.tools, max_steps: args.max_steps };
        if let Err(e) = agent.start(&start).await {
            return Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())]));
        }
        let episode = format!("{}-{}", self.factory.name(), self.next.fetch_add(1, Ordering::Relaxed));
        self.episodes
            .lock()
            .map_err(|_| ErrorData::internal_error("episodes lock", None))?
            .insert(episode.clone(), Arc::new(Mutex::new(agent)));
        tracing::debug!(task = %task.id, %episode, "agent episode started");
        answer(&Started { episode })
    }

    async fn step(&self, args: StepArgs) -> Result<CallToolResult, ErrorData> {
        let agent = self.agent(&args.episode)?;
        let mut agent = agent.lock().await;
        match agent.step(&args.feedback).await {
            Ok(turn) => answer(&turn),
            // The agent could not make a turn: a tool error (isError), which the client
            // records as an errored episode.
            Err(e) => Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())])),
        }
    }

    fn end(&self, args: EndArgs) -> Result<CallToolResult, ErrorData> {
        let removed = self
            .episodes
            .lock()
            .map_err(|_| ErrorData::internal_error("episodes lock", None))?
            .remove(&args.episode)
            .is_some();
        answer(&json!({"ended": removed}))
    }
}

impl ServerHandler for AgentServer {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(format!("netdojo agent {}", self.factory.name()), env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "A netdojo agent ({}). Call {START} with the episode, then {STEP} with the observations of each turn's calls until a turn calls `finish` or no tool, then {END}.",
                self.factory.name()
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tool = |name: &str, description: &str| {
            let schema = match input_schema(name) {
                Value::Object(schema) => schema,
                _ => JsonObject::new(),
            };
            Tool::new(name.to_string(), description.to_string(), Arc::new(schema))
        };
        Ok(ListToolsResult::with_all_items(vec![
            tool(
                START,
                "Start an episode: the task (without ground truth), the environment's brief, its tools as JSON Schemas and the step budget. Returns {\"episode\": ID}.",
            ),
            tool(
                STEP,
                "The agent's next turn, given the observations of its previous calls: {\"reasoning\", \"calls\": [{\"id\", \"name\", \"arguments\"}], \"usage\"?, \"transcript\"?}. A `finish` call, or no call, ends the episode.",
            ),
            tool(END, "Forget an episode."),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name: &str = &request.name;
        let result = match name {
            START => self.start(parse(START, request.arguments)?).await,
            STEP => self.step(parse(STEP, request.arguments)?).await,
            END => self.end(parse(END, request.arguments)?),
            other => Err(invalid(format!("unknown tool `{other}` (tools: {START}, {STEP}, {END})"))),
        };
        result.map(Into::into)
    }
}

/// Serves `server` on stdin and stdout until the client closes them.
pub async fn serve_stdio(server: AgentServer) -> std::io::Result<()> {
    let running = server
        .serve((tokio::io::stdin(), tokio::io::stdout()))
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    running.waiting().await.map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(())
}

/// The HTTP endpoint `/mcp`: stateless (episodes are named in the arguments), JSON answers.
pub fn router(server: AgentServer, cancel: &CancellationToken) -> Router {
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.json_response = true;
    config.sse_keep_alive = None;
    config.cancellation_token = cancel.child_token();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new().route_service("/mcp", service)
}

/// Serves `server` on http://127.0.0.1:`port`/mcp (0: any free port) until `cancel`.
pub async fn serve_http(
    server: AgentServer,
    port: u16,
    cancel: CancellationToken,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    crate::transport::serve_http(router(server, &cancel), port, cancel).await
}

/// Serves `server` on stdio (`http: None`) until the client hangs up, or on
/// http://127.0.0.1:PORT/mcp until `stop`; says where on stderr.
pub async fn serve(server: AgentServer, http: Option<u16>, stop: CancellationToken) -> std::io::Result<()> {
    let name = server.factory.name().to_string();
    match http {
        None => {
            eprintln!("netdojo-mcp: agent `{name}` on stdio");
            tokio::select! {
                served = serve_stdio(server) => served,
                () = stop.cancelled() => Ok(()),
            }
        }
        Some(port) => {
            let (addr, handle) = serve_http(server, port, stop.clone()).await?;
            eprintln!("netdojo-mcp: agent `{name}` on http://{addr}/mcp");
            stop.cancelled().await;
            handle.await.map_err(std::io::Error::other)?
        }
    }
}

/// The tasks of a suite (a directory, a `.json` or a `.jsonl`), for [`AgentServer::with_tasks`].
/// [`serve`] on a runtime of its own until the client hangs up (stdio) or Ctrl-C: what the
/// `serve-agent` commands run.
pub fn serve_until_ctrl_c(server: AgentServer, http: Option<u16>) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let served = runtime.block_on(async {
        let stop = CancellationToken::new();
        let on_signal = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                on_signal.cancel();
            }
        });
        serve(server, http, stop).await
    });
    // stdin is read on a blocking thread that only a new line or EOF ends: do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    served
}

pub fn suite_tasks(path: &std::path::Path) -> Result<Vec<Task>, netdojo_core::TaskError> {
    use netdojo_core::TaskSource;
    netdojo_core::StaticSuite::load(path)?.tasks().collect()
}
