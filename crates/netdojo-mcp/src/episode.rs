//! External MCP agents scored like built-in ones: the runner of netdojo-core drives the
//! episode; its agent is a [`ChannelAgent`] whose turns are the MCP client's tool calls, and
//! its environment an [`McpEnv`] that runs them on the devices. So every call is validated,
//! executed, followed by the state check and recorded in the trajectory, and `done` ends the
//! episode, which is evaluated, scored and appended to the run directory, by the same code as
//! for any other agent.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use netdojo_core::runner::{Budget, RunStats, Runner, Silent};
use netdojo_core::store::RunDir;
use netdojo_core::{
    Agent, AgentError, AgentFactory, AgentTurn, EnvError, Environment, EnvironmentFactory, EpisodeRecord,
    EpisodeStart, Observation, Outcome, Scorer, StateCheck, Task, TaskError, TaskKind, TaskSource, ToolCall,
    ToolSpec,
};
use netdojo_gns3::{Gns3Env, Gns3Factory, Gns3Options};
use netdojo_linux::routing::{RoutingEnv, RoutingFactory, RoutingOptions};
use netdojo_netconf::{NetconfEnv, NetconfFactory};
use serde_json::{Value, json};
use tokio::sync::{Mutex, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::device::{Devices, Flavor, Kinds, Settings};
use crate::error::NetError;
use crate::redact::redact_json;
use crate::tools::{self, Scope};

pub const AGENT: &str = "mcp";
pub const ENV: &str = "netconf-mcp";
/// The routing application's environment behind MCP.
pub const ROUTING_ENV: &str = "routing-mcp";
/// NetConfBench on a GNS3 server behind MCP.
pub const GNS3_ENV: &str = "gns3-mcp";

/// Whether `task` is one of the routing application's (its nodes are Linux devices).
pub fn is_routing(task: &Task) -> bool {
    task.application == netdojo_linux::routing::tasks::APPLICATION
}

/// Whether `task` says what its nodes are made of on a GNS3 server (`setup.gns3`).
pub fn is_gns3(task: &Task) -> bool {
    task.setup.get("gns3").is_some()
}

/// The environment's name in records for `task`.
pub fn env_name(task: &Task) -> &'static str {
    if is_routing(task) {
        ROUTING_ENV
    } else if is_gns3(task) {
        GNS3_ENV
    } else {
        ENV
    }
}

/// The live devices of an episode and the brief of its task, once reset is done.
#[derive(Debug, Clone)]
pub struct Live {
    pub devices: Arc<Devices>,
    pub brief: String,
}

/// One tool call from an MCP client, with where its observation goes.
#[derive(Debug)]
struct Turn {
    call: ToolCall,
    reply: oneshot::Sender<Observation>,
}

/// The runner's agent: each turn is the next call an MCP client made.
#[derive(Debug)]
pub struct ChannelAgent {
    calls: Arc<Mutex<mpsc::Receiver<Turn>>>,
    waiting: Option<oneshot::Sender<Observation>>,
    stop: CancellationToken,
}

#[async_trait]
impl Agent for ChannelAgent {
    async fn start(&mut self, _episode: &EpisodeStart<'_>) -> Result<(), AgentError> {
        Ok(())
    }

    async fn step(&mut self, feedback: &[Observation]) -> Result<AgentTurn, AgentError> {
        if let (Some(reply), Some(obs)) = (self.waiting.take(), feedback.first()) {
            let _ = reply.send(obs.clone());
        }
        let mut calls = self.calls.lock().await;
        let turn = tokio::select! {
            turn = calls.recv() => turn,
            () = self.stop.cancelled() => None,
        };
        // No call: the operator stopped the episode (or every client is gone).
        let Some(Turn { call, reply }) = turn else { return Ok(AgentTurn::default()) };
        self.waiting = Some(reply);
        Ok(AgentTurn { reasoning: String::new(), calls: vec![call], ..AgentTurn::default() })
    }
}

#[derive(Debug)]
struct ChannelAgentFactory {
    calls: Arc<Mutex<mpsc::Receiver<Turn>>>,
    stop: CancellationToken,
}

impl AgentFactory for ChannelAgentFactory {
    fn name(&self) -> &str {
        AGENT
    }
    fn config(&self) -> Value {
        json!({"kind": "external MCP client"})
    }
    fn create(&self, _task: &Task) -> Result<Box<dyn Agent>, AgentError> {
        Ok(Box::new(ChannelAgent { calls: self.calls.clone(), waiting: None, stop: self.stop.clone() }))
    }
}

/// The brief an MCP client reads (the task's intents, the devices, how to work).
pub fn brief_of(task: &Task) -> String {
    let TaskKind::Config(config) = &task.kind else { return String::new() };
    let intents: String = config.intents.iter().map(|i| format!("- {i}\n")).collect();
    format!(
        "Configure the FRRouting routers of this network (vtysh syntax) so that it meets these \
         intents:\n{intents}\nDevices: {}. Links:\n{}\n\nLook with network.cli.exec (show \
         commands), network.yang.get and the network:/// resources; stage changes with \
         network.cli.configure and apply them with network.commit; call `done` when every \
         intent is met.",
        config.topology.nodes.join(", "),
        config.topology.links.iter().map(|l| format!("- {}", l.trim())).collect::<Vec<_>>().join("\n")
    )
}

/// The brief of a NetConfBench task on GNS3 nodes for an MCP client: each device in its own CLI.
pub fn console_brief(task: &Task, devices: &Devices) -> String {
    let TaskKind::Config(config) = &task.kind else { return String::new() };
    let intents: String = config.intents.iter().map(|i| format!("- {i}\n")).collect();
    let kinds: Vec<String> =
        devices.devices.iter().map(|(name, d)| format!("{name} ({})", d.cli_dialect())).collect();
    format!(
        "Configure the devices of this GNS3 network, each in its own CLI (Cisco IOS configuration \
         mode, or VPCS commands such as `ip 10.0.0.1/24 10.0.0.254`), so that it meets these \
         intents:\n{intents}\nDevices with a console: {}. Links:\n{}\n\nLook with \
         network.cli.exec (show commands; ping) and the network:/// resources; stage changes with \
         network.cli.configure and apply them with network.commit; call `done` when every intent \
         is met.",
        kinds.join(", "),
        devices.links.iter().map(|l| format!("- {l}")).collect::<Vec<_>>().join("\n")
    )
}

/// The brief of a routing task for an MCP client: the routing environment's, with the network
/// tools in place of its `exec`.
pub fn routing_brief(devices: &[String], pingall: &str) -> String {
    format!(
        "You need to behave like a network engineer who finds the root cause of network issues \
         and fixes them in a routing application.\n\n\
         There is a network with problems in the router r0, causing the network to be partially \
         disconnected. Some nodes cannot successfully ping other nodes. Fix these issues so that \
         the pingall shows all connections successful, without breaking connections that work.\n\n\
         The devices are Linux nodes (cliDialect linux-iproute2): {}. Look with network.cli.exec \
         (read-only commands such as `ip route`, `ip -j addr show`, `iptables -S`, `tc qdisc show`, \
         `sysctl net.ipv4.ip_forward`) and the network:/// resources; stage changes with \
         network.cli.configure (e.g. `ip route add ...`, one command per item, no shell, no sudo, \
         no vtysh) and run them with network.commit. Every call is a step and answers with the \
         latest pingall. network.commit is all or nothing, `confirmed` commits roll back on their \
         own unless confirmed, and network.rollback undoes a commit. Call `done` when the network \
         is repaired.\n\nLatest pingall:\n{pingall}",
        devices.join(", ")
    )
}

/// The environment behind the network tools.
#[derive(Debug)]
enum Inner {
    /// NetConfBench: FRR routers.
    Netconf(Box<NetconfEnv>),
    /// The routing application: Linux nodes, the pingmesh after every step.
    Routing(Box<RoutingEnv>),
    /// NetConfBench on a GNS3 server: the nodes' consoles.
    Gns3(Box<Gns3Env>),
}

/// The NetConfBench environment (or the routing application's) with the network tools of
/// draft 002 in place of the ANI (or of `exec`).
#[derive(Debug)]
pub struct McpEnv {
    inner: Inner,
    settings: Settings,
    live: watch::Sender<Option<Live>>,
    devices: Option<Arc<Devices>>,
    names: Vec<String>,
}

impl McpEnv {
    /// Makes `devices` the episode's and tells the MCP front they are up.
    fn publish(&mut self, devices: Devices, brief: String) -> String {
        let devices = Arc::new(devices);
        self.names = devices.names();
        self.devices = Some(devices.clone());
        self.live.send_replace(Some(Live { devices, brief: brief.clone() }));
        brief
    }
}

/// An [`Observation`] of a network tool's answer.
pub fn observation(call: &ToolCall, result: Result<Value, NetError>) -> Observation {
    match result {
        Ok(data) => {
            let text = match (data.get("output"), data.get("content")) {
                (Some(Value::String(s)), _) | (_, Some(Value::String(s))) => s.clone(),
                _ => data.to_string(),
            };
            let mut obs = Observation::ok(call, text, Some(data.clone()));
            obs.ok = data.get("ok").and_then(Value::as_bool).unwrap_or(true);
            obs
        }
        Err(e) => {
            let mut obs = Observation::error(call, e.to_string());
            obs.data = Some(json!({"error": e.to_json()}));
            obs
        }
    }
}

#[async_trait]
impl Environment for McpEnv {
    fn tools(&self) -> Vec<ToolSpec> {
        let flavor = match self.inner {
            Inner::Netconf(_) => Flavor::Frr,
            Inner::Routing(_) => Flavor::Linux,
            Inner::Gns3(_) => Flavor::Console,
        };
        tools::tool_specs_for(&Scope::Network(self.names.clone()), &self.settings, flavor)
    }

    async fn reset(&mut self, task: &Task) -> Result<String, EnvError> {
        let env = env_name(task);
        let setup_err = |e: NetError| EnvError::setup(env, "discovering the devices").with_source(e);
        let (network, kinds) = match &mut self.inner {
            Inner::Netconf(inner) => {
                inner.reset(task).await?;
                (inner.network(), Kinds::Frr)
            }
            Inner::Routing(inner) => {
                inner.reset(task).await?;
                (inner.network(), Kinds::Linux)
            }
            Inner::Gns3(inner) => {
                inner.reset(task).await?;
                let devices = Devices::from_consoles(inner.consoles(), inner.links().to_vec(), self.settings)
                    .await
                    .map_err(setup_err)?;
                let brief = console_brief(task, &devices);
                return Ok(self.publish(devices, brief));
            }
        };
        let net = network
            .and_then(|w| w.upgrade())
            .ok_or_else(|| EnvError::setup(env, "the network is not up after reset"))?;
        let devices = Devices::discover_kinds(&net, self.settings, kinds).await.map_err(setup_err)?;
        drop(net);
        let brief = match &self.inner {
            Inner::Routing(inner) => routing_brief(&devices.names(), &inner.pingall().unwrap_or_default()),
            _ => brief_of(task),
        };
        Ok(self.publish(devices, brief))
    }

    async fn execute(&mut self, call: &ToolCall) -> Result<Observation, EnvError> {
        let Some(devices) = &self.devices else {
            return Err(EnvError::runtime(ENV, "no network: reset first"));
        };
        let result = tools::dispatch(devices, &call.name, &call.arguments).await;
        match &result {
            Ok(_) => tracing::info!(tool = %call.name, args = %redact_json(&call.arguments), "network tool"),
            Err(e) => {
                tracing::info!(tool = %call.name, args = %redact_json(&call.arguments), code = e.code(), "network tool failed: {e}")
            }
        }
        let changed = result.is_ok() && tools::changes_running(&call.name, &call.arguments);
        let mut obs = observation(call, result);
        if let Inner::Routing(inner) = &mut self.inner {
            // The routing environment's step: the pingmesh after every call, which the state
            // check compares with the one before, and which the client reads in the answer.
            let mesh = inner.observe_step(changed).await?;
            let pingall = mesh.render();
            obs.content = format!("{}\n\nLatest pingall:\n{pingall}", obs.content.trim_end());
            let data = obs.data.get_or_insert_with(|| json!({}));
            if data.is_object() {
                data["pingall"] = json!(pingall);
                data["received"] = json!(mesh.received());
                data["sent"] = json!(mesh.sent());
            }
        }
        Ok(obs)
    }

    async fn check(&mut self) -> Result<StateCheck, EnvError> {
        match &mut self.inner {
            Inner::Netconf(inner) => inner.check().await,
            Inner::Routing(inner) => inner.check().await,
            Inner::Gns3(inner) => inner.check().await,
        }
    }

    async fn evaluate(&mut self, task: &Task, answer: Option<&Value>) -> Result<Outcome, EnvError> {
        // A confirmed commit still waiting is not the agent's final word: evaluated as it
        // stands, and its timer stops (the network goes away next).
        if let Some(devices) = &self.devices {
            devices.shutdown().await;
        }
        match &mut self.inner {
            Inner::Netconf(inner) => inner.evaluate(task, answer).await,
            Inner::Routing(inner) => inner.evaluate(task, answer).await,
            Inner::Gns3(inner) => inner.evaluate(task, answer).await,
        }
    }

    async fn close(&mut self) -> Result<(), EnvError> {
        if let Some(devices) = &self.devices {
            devices.shutdown().await;
        }
        match &mut self.inner {
            Inner::Netconf(inner) => inner.close().await,
            Inner::Routing(inner) => inner.close().await,
            Inner::Gns3(inner) => inner.close().await,
        }
    }
}

/// Which environment an [`McpFactory`] puts behind the network tools.
#[derive(Debug)]
enum Backend {
    /// NetConfBench tasks on FRR routers.
    Netconf,
    /// Routing tasks: every node a Linux device.
    Routing(RoutingOptions),
    /// NetConfBench tasks on a GNS3 server: every node with a console a device.
    Gns3(Gns3Factory),
}

/// Builds [`McpEnv`]s and publishes each one's live devices.
#[derive(Debug)]
pub struct McpFactory {
    settings: Settings,
    live: watch::Sender<Option<Live>>,
    backend: Backend,
}

impl McpFactory {
    /// For NetConfBench tasks; needs what NetconfFactory needs (root, FRR).
    pub fn new(settings: Settings) -> Result<(Self, watch::Receiver<Option<Live>>), EnvError> {
        NetconfFactory::new()?;
        Ok(Self::with(settings, Backend::Netconf))
    }

    /// For NetConfBench tasks on the GNS3 server of `options` (`setup.gns3` of each task
    /// says what its nodes are made of). Connects at the first episode.
    pub fn gns3(options: Gns3Options, settings: Settings) -> (Self, watch::Receiver<Option<Live>>) {
        Self::with(settings, Backend::Gns3(Gns3Factory::new(options)))
    }

    fn with(settings: Settings, backend: Backend) -> (Self, watch::Receiver<Option<Live>>) {
        let (live, rx) = watch::channel(None);
        (Self { settings, live, backend }, rx)
    }

    /// For `task`'s kind: a routing task's Linux nodes (needs root, like RoutingFactory, whose
    /// start-up sweep of the namespaces of killed runs it runs), or a NetConfBench task's FRR
    /// routers. A GNS3 task needs its server: [`McpFactory::gns3`].
    pub fn for_task(
        task: &Task,
        settings: Settings,
    ) -> Result<(Self, watch::Receiver<Option<Live>>), EnvError> {
        if is_gns3(task) {
            return Err(EnvError::setup(
                GNS3_ENV,
                format!(
                    "task {} runs on a GNS3 server (it has `setup.gns3`): give the server's URL (--gns3-url)",
                    task.id
                ),
            ));
        }
        if !is_routing(task) {
            return Self::new(settings);
        }
        Self::routing(RoutingOptions::default(), settings)
    }

    /// For routing tasks, with the sandbox's limits and the pingmesh's deadline of `options`
    /// (needs root, like RoutingFactory, whose start-up sweep it runs).
    pub fn routing(
        options: RoutingOptions,
        settings: Settings,
    ) -> Result<(Self, watch::Receiver<Option<Live>>), EnvError> {
        RoutingFactory::new(options.clone())?;
        Ok(Self::with(settings, Backend::Routing(options)))
    }
}

#[async_trait]
impl EnvironmentFactory for McpFactory {
    fn name(&self) -> &str {
        match self.backend {
            Backend::Netconf => ENV,
            Backend::Routing(_) => ROUTING_ENV,
            Backend::Gns3(_) => GNS3_ENV,
        }
    }
    fn config(&self) -> Value {
        let inner = match &self.backend {
            Backend::Routing(o) => {
                json!({"routing": {"exec": {"timeout_ms": o.exec.timeout.as_millis() as u64,
                "output_cap": o.exec.output_cap}, "pingmesh": {"deadline_ms": o.mesh.deadline.as_millis() as u64}}})
            }
            Backend::Netconf => json!({"netconf": NetconfFactory::default().config()}),
            Backend::Gns3(f) => json!({"gns3": f.config()}),
        };
        let mut config = json!({"front": "mcp (draft 002)", "rollback_timeout_s": self.settings.rollback_timeout.as_secs_f64(),
            "max_bulk_edit": self.settings.max_bulk_edit});
        if let (Some(c), Some(i)) = (config.as_object_mut(), inner.as_object()) {
            c.extend(i.clone());
        }
        config
    }
    async fn create(&self, task: &Task) -> Result<Box<dyn Environment>, EnvError> {
        let inner = match &self.backend {
            Backend::Routing(options) if is_routing(task) => {
                Inner::Routing(Box::new(RoutingEnv::new(options.clone())))
            }
            Backend::Netconf if !is_routing(task) && !is_gns3(task) => Inner::Netconf(Box::default()),
            Backend::Gns3(factory) if is_gns3(task) => Inner::Gns3(Box::new(factory.create_env().await?)),
            _ => {
                return Err(EnvError::setup(
                    self.name(),
                    format!("task {} is not of this environment's kind", task.id),
                ));
            }
        };
        Ok(Box::new(McpEnv {
            inner,
            settings: self.settings,
            live: self.live.clone(),
            devices: None,
            names: vec![],
        }))
    }
}

/// One task as a task source.
#[derive(Debug)]
struct OneTask(Task);

impl TaskSource for OneTask {
    fn describe(&self) -> Value {
        json!({"kind": "mcp-serve", "task": self.0.id})
    }
    fn len_hint(&self) -> Option<usize> {
        Some(1)
    }
    fn tasks(&self) -> Box<dyn Iterator<Item = Result<Task, TaskError>> + Send + '_> {
        Box::new(std::iter::once(Ok(self.0.clone())))
    }
}

/// What an episode ended with.
#[derive(Debug, Clone)]
pub struct Finished {
    pub record: Option<EpisodeRecord>,
    pub error: Option<String>,
    pub run_dir: std::path::PathBuf,
}

/// The side of an episode the MCP server talks to.
#[derive(Debug)]
pub struct EpisodeLink {
    calls: mpsc::Sender<Turn>,
    live: watch::Receiver<Option<Live>>,
    finished: watch::Receiver<Option<Finished>>,
}

impl EpisodeLink {
    /// The live devices, once the episode's network is up (or the episode failed first).
    pub async fn live(&self) -> Result<Live, String> {
        let mut live = self.live.clone();
        let mut finished = self.finished.clone();
        loop {
            if let Some(l) = live.borrow().clone() {
                return Ok(l);
            }
            if let Some(f) = finished.borrow().clone() {
                return Err(f.error.unwrap_or_else(|| "the episode ended before its network was up".into()));
            }
            tokio::select! {
                r = live.changed() => if r.is_err() { return Err("the episode is gone".into()) },
                r = finished.changed() => if r.is_err() { return Err("the episode is gone".into()) },
            }
        }
    }

    pub fn live_now(&self) -> Option<Live> {
        self.live.borrow().clone()
    }

    /// Runs `call` as the agent's next step and waits for its observation. `None` when the
    /// episode is over.
    pub async fn call(&self, call: ToolCall) -> Option<Observation> {
        let (reply, rx) = oneshot::channel();
        self.calls.send(Turn { call, reply }).await.ok()?;
        rx.await.ok()
    }

    /// Waits for the scored record.
    pub async fn finished(&self) -> Option<Finished> {
        let mut finished = self.finished.clone();
        loop {
            if let Some(f) = finished.borrow().clone() {
                return Some(f);
            }
            finished.changed().await.ok()?;
        }
    }

    /// Ends the episode with the runner's `finish` and waits for its scores.
    pub async fn done(&self) -> Option<Finished> {
        let (reply, _rx) = oneshot::channel();
        let _ = self.calls.send(Turn { call: ToolCall::finish(None), reply }).await;
        self.finished().await
    }
}

/// An episode in progress: the runner on its own task, an MCP front on its devices.
#[derive(Debug)]
pub struct Episode {
    pub link: Arc<EpisodeLink>,
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<()>,
}

impl Episode {
    /// Starts `task` (a NetConfBench or a routing task) with `scorers`; the record goes to `store`.
    pub fn start(
        task: Task,
        settings: Settings,
        scorers: Vec<Box<dyn Scorer>>,
        budget: Budget,
        store: RunDir,
    ) -> Result<Self, EnvError> {
        let factory = McpFactory::for_task(&task, settings)?;
        Ok(Self::start_on(factory, task, scorers, budget, store))
    }

    /// Starts `task` on the environments of `factory` (from [`McpFactory`]'s constructors).
    pub fn start_on(
        factory: (McpFactory, watch::Receiver<Option<Live>>),
        task: Task,
        scorers: Vec<Box<dyn Scorer>>,
        budget: Budget,
        mut store: RunDir,
    ) -> Self {
        let (factory, live) = factory;
        let (calls_tx, calls_rx) = mpsc::channel(1);
        let stop = CancellationToken::new();
        let runner = Runner {
            env: Arc::new(factory),
            agent: Arc::new(ChannelAgentFactory {
                calls: Arc::new(Mutex::new(calls_rx)),
                stop: stop.clone(),
            }),
            scorers: Arc::new(scorers),
            budget,
            concurrency: 1,
            prepare_ahead: 0,
        };
        let (finished_tx, finished) = watch::channel(None);
        let task_id = task.id.clone();
        let handle = tokio::spawn(async move {
            let (_never, stop_rx) = watch::channel(false);
            let result: Result<RunStats, _> = runner.run(&OneTask(task), &mut store, &Silent, stop_rx).await;
            let latest: BTreeMap<String, EpisodeRecord> = store.latest().unwrap_or_default();
            let record = latest.get(&task_id).cloned();
            let error = match result {
                Err(e) => Some(e.to_string()),
                Ok(_) => record.as_ref().and_then(|r| r.error.clone()),
            };
            finished_tx.send_replace(Some(Finished { record, error, run_dir: store.path().to_path_buf() }));
        });
        Self { link: Arc::new(EpisodeLink { calls: calls_tx, live, finished }), stop, handle }
    }

    /// Ends the episode as it stands (the operator's stop): evaluated and scored all the same.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Waits for the episode to be recorded.
    pub async fn join(self) -> Option<Finished> {
        let f = self.link.finished().await;
        let _ = self.handle.await;
        f
    }
}

/// Settings of the run directory's configuration for an MCP episode.
pub fn run_config(task: &Task, settings: &Settings, budget: &Budget) -> Value {
    json!({
        "env": {"name": env_name(task), "config": {"rollback_timeout_s": settings.rollback_timeout.as_secs_f64(), "max_bulk_edit": settings.max_bulk_edit}},
        "agent": {"name": AGENT},
        "source": {"kind": "mcp-serve", "task": task.id},
        "budget": {"max_steps": budget.max_steps, "episode_timeout_s": budget.episode_timeout.as_secs_f64()},
    })
}
