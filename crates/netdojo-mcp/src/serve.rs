//! `serve`: one task's environment behind MCP, until the client calls `done`, closes stdio,
//! or the operator stops it; then the episode is scored and recorded in a run directory.

use std::path::PathBuf;
use std::time::Duration;

use netdojo_core::runner::Budget;
use netdojo_core::store::RunDir;
use netdojo_core::{Scorer, StaticSuite, Task, TaskSource};
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use crate::auth::Tokens;
use crate::device::Settings;
use crate::episode::{Episode, Finished, McpFactory, run_config};
use crate::server::{NetworkServer, Role};
use crate::transport;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Task(String),
    #[error("{0}")]
    Setup(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// `Some(port)`: streamable HTTP on 127.0.0.1 (0: any free port). `None`: stdio.
    pub http: Option<u16>,
    /// stdio only: serve this one device (`None`: the whole network, tools take `device`).
    pub device: Option<String>,
    /// The role of a stdio client, and of every HTTP client without `tokens`.
    pub role: Role,
    /// HTTP: each client's role by its bearer token; unknown or missing tokens are refused.
    pub tokens: Option<Tokens>,
    /// HTTP: browser origins allowed besides loopback ones; a request with any other
    /// `Origin` is refused with 403.
    pub allow_origins: Vec<transport::AllowedOrigin>,
    /// HTTP: a session with no message for this long is closed (its id then answers 404).
    pub session_idle_timeout: Duration,
    pub settings: Settings,
    pub budget: Budget,
    /// The run directory to create.
    pub out: PathBuf,
    /// The GNS3 server of a task with `setup.gns3` (its nodes' consoles are the devices).
    pub gns3: Option<netdojo_gns3::Gns3Options>,
}

/// The task `id` of the suite at `suite` (a directory, a `.json` or a `.jsonl`).
pub fn load_task(suite: &std::path::Path, id: &str) -> Result<Task, ServeError> {
    let suite = StaticSuite::load(suite)
        .map_err(|e| ServeError::Task(format!("--suite {}: {e}", suite.display())))?;
    let mut ids = Vec::new();
    for task in suite.tasks() {
        let task = task.map_err(|e| ServeError::Task(e.to_string()))?;
        if task.id == id {
            return Ok(task);
        }
        ids.push(task.id);
    }
    Err(ServeError::Task(format!("--task {id}: no such task in the suite (tasks: {})", ids.join(", "))))
}

/// Serves `task` until its episode ends; `stop` is the operator's stop (Ctrl-C). Returns the
/// scored episode.
pub async fn serve(
    task: Task,
    scorers: Vec<Box<dyn Scorer>>,
    options: ServeOptions,
    stop: CancellationToken,
) -> Result<Finished, ServeError> {
    let store = RunDir::create(&options.out, &run_config(&task, &options.settings, &options.budget))
        .map_err(|e| ServeError::Setup(format!("run directory {}: {e}", options.out.display())))?;
    let factory = match options.gns3.clone() {
        Some(gns3) => McpFactory::gns3(gns3, options.settings),
        None => {
            McpFactory::for_task(&task, options.settings).map_err(|e| ServeError::Setup(e.to_string()))?
        }
    };
    let episode = Episode::start_on(factory, task, scorers, options.budget, store);
    let link = episode.link.clone();
    let live = match link.live().await {
        Ok(live) => live,
        Err(e) => {
            let _ = episode.join().await;
            return Err(ServeError::Setup(format!("the episode did not start: {e}")));
        }
    };
    let names = live.devices.names();
    if let Some(d) = &options.device
        && !names.contains(d)
    {
        episode.stop();
        let _ = episode.join().await;
        return Err(ServeError::Task(format!(
            "--device {d}: no such device (devices: {})",
            names.join(", ")
        )));
    }
    let cancel = CancellationToken::new();
    match options.http {
        Some(port) => {
            let access = match options.tokens {
                Some(tokens) => transport::Access::Tokens(std::sync::Arc::new(tokens)),
                None => transport::Access::Everyone(options.role),
            };
            let http = transport::HttpOptions {
                allowed_origins: options.allow_origins.clone(),
                session_idle_timeout: options.session_idle_timeout,
            };
            let app = transport::router_with(link.clone(), &names, access, options.settings, http, &cancel);
            let (addr, server) = transport::serve_http(app, port, cancel.clone())
                .await
                .map_err(|source| ServeError::Io { what: format!("binding 127.0.0.1:{port}"), source })?;
            let per_device: Vec<String> = names.iter().map(|d| format!("/mcp/{d}")).collect();
            eprintln!("netdojo-mcp: listening on http://{addr}/mcp (one device: {})", per_device.join(" "));
            let ended_by_client = tokio::select! {
                _ = link.finished() => true,
                () = stop.cancelled() => { episode.stop(); false }
            };
            let finished = episode.join().await;
            if ended_by_client {
                // The answer to the call that ended the episode (`done`) is on its way out on
                // its session's stream, which cancelling the sessions would cut.
                tokio::time::sleep(HTTP_GRACE).await;
            }
            cancel.cancel();
            let _ = server.await;
            finished.ok_or_else(|| ServeError::Setup("the episode vanished".into()))
        }
        None => {
            let server =
                NetworkServer::new(link.clone(), options.device.clone(), options.role, options.settings);
            let io = transport::stdio(server.capability());
            eprintln!("netdojo-mcp: serving {} on stdio", options.device.as_deref().unwrap_or("the network"));
            let running = server.serve(io).await.map_err(|e| ServeError::Io {
                what: "stdio handshake".into(),
                source: std::io::Error::other(e.to_string()),
            })?;
            let closed = running.cancellation_token();
            let client_gone = running.waiting();
            tokio::pin!(client_gone);
            let finished = tokio::select! {
                _ = link.finished() => true,
                () = stop.cancelled() => { episode.stop(); false }
                // The client went away: the episode ends as it stands.
                _ = &mut client_gone => { episode.stop(); false }
            };
            if finished {
                // The answer to the call that ended the episode (`done`) may still be on its way
                // out: cancelling the session now would drop it, and the client would wait for it
                // forever. Let the client read it and hang up, within a grace period.
                let _ = tokio::time::timeout(STDIO_GRACE, &mut client_gone).await;
            }
            closed.cancel();
            episode.join().await.ok_or_else(|| ServeError::Setup("the episode vanished".into()))
        }
    }
}

/// How long a SIGTERM'd server may go on evaluating its episode before it tears the network
/// down unevaluated: less than the MCP SDKs wait between SIGTERM and SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_millis(1500);

/// Cancels `stop` on Ctrl-C or SIGTERM, for a server that runs [`serve`] (in a tokio runtime).
///
/// Ctrl-C: the episode is evaluated as it stands; a second Ctrl-C ends it now, unevaluated.
/// SIGTERM: what an MCP client sends a stdio server that has not exited after it closed stdin,
/// a short while before SIGKILL (2 s in the official SDKs), and what service managers send: the
/// evaluation gets [`TERM_GRACE`], then the process tears its network down unevaluated
/// ([`netdojo_linux::netns::release_own`]) and exits 143, so that a SIGKILL finds nothing of the
/// episode left on the host.
pub fn stop_on_signals(stop: CancellationToken) -> Result<(), ServeError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())
        .map_err(|source| ServeError::Io { what: "SIGTERM handler".into(), source })?;
    tokio::spawn(async move {
        let terminated = tokio::select! {
            r = tokio::signal::ctrl_c() => { if r.is_err() { return } false }
            s = term.recv() => { if s.is_none() { return } true }
        };
        eprintln!("stopping: the episode is evaluated as it stands");
        stop.cancel();
        let grace = async {
            if terminated {
                tokio::time::sleep(TERM_GRACE).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = grace => {}
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        // Still evaluating: end now, leaving nothing on the host (the run directory keeps what
        // was recorded; this episode has no record).
        let released = netdojo_linux::netns::release_own();
        eprintln!("stopped before the episode was evaluated; its network is torn down ({released:?})");
        std::process::exit(if terminated { 143 } else { 130 });
    });
    Ok(())
}

/// How long HTTP sessions stay after the episode ended, for the last answer to get out.
const HTTP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a stdio client has to read the last answer and close after its episode ended.
const STDIO_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// The default run directory of a served task.
pub fn default_out(task_id: &str) -> PathBuf {
    let stamp =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    PathBuf::from("runs").join(format!("mcp-{}-{stamp}", netdojo_core::store::file_stem(task_id)))
}

/// The suite a task is looked up in when none is given: NetConfBench's, or its GNS3 tasks'.
pub fn default_suite(gns3: bool) -> &'static str {
    if gns3 { "testdata/gns3" } else { "testdata/netconf" }
}

/// Budget defaults for an external agent: more steps and time than a scripted one needs.
pub fn default_budget() -> Budget {
    Budget { max_steps: 200, episode_timeout: Duration::from_secs(3600), ..Budget::default() }
}

/// What `serve` printed at the end, as one JSON line.
pub fn summary(finished: &Finished) -> serde_json::Value {
    serde_json::json!({"run_dir": finished.run_dir, "error": finished.error, "record": finished.record})
}

/// The routing application's task `index` of `seed` (`cargo xtask eval --env routing` draws
/// the same one).
pub fn routing_task(seed: u64, index: u64) -> Result<Task, ServeError> {
    use netdojo_core::TaskGenerator;
    netdojo_linux::routing::RoutingGenerator
        .generate(seed, index)
        .map_err(|e| ServeError::Task(format!("--seed {seed} --index {index}: {e}")))
}

/// The scorers `eval` uses for `task`'s environment, without a model: NetPress's
/// (correctness, safety, latency) for a routing task, [`scorers`] for a NetConfBench one.
pub fn scorers_for(task: &Task) -> Vec<Box<dyn Scorer>> {
    if crate::episode::is_routing(task) { netdojo_score::repair_scorers() } else { scorers() }
}

/// NetConfBench's scorers that need no model: correctness, testcase pass rate, the command
/// score, latency (`cargo xtask mcp serve` adds the reasoning score).
pub fn scorers() -> Vec<Box<dyn Scorer>> {
    vec![
        Box::new(netdojo_score::Correctness),
        Box::new(netdojo_score::CheckRate),
        Box::new(netdojo_config::CommandScore),
        Box::new(netdojo_score::Latency),
    ]
}
