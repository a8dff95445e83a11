//! NetConfBench (seed 001) on a GNS3 server: a task's topology built as a GNS3 project, the
//! Agent-Network Interface (§4.2) over the nodes' telnet consoles, the Task Evaluation
//! Interface (§4.3) at the end, scored by the same command score as the FRR backend.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{Mutex, OnceCell};

use netdojo_config::ani;
use netdojo_core::task::parse_link;
use netdojo_core::{
    Check, ConfigTask, EnvError, Environment, EnvironmentFactory, Observation, Outcome, StateCheck, Task,
    TaskKind, Testcase, ToolCall, ToolSpec,
};

use crate::api::{Credentials, Gns3Client, Gns3Error, LinkEnd, Node};
use crate::device::{CommandResult, Device};
use crate::dialect::CliDialect;

pub const ENV: &str = "gns3";

/// How long testcases may take to all pass together after the agent finishes.
pub const CONVERGENCE: Duration = Duration::from_secs(10);

/// What a task's node is made of in GNS3: a template (by name or id) or a built-in node
/// type, with properties, and the CLI dialect of its console.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// A template's name (`VPCS`, `Ethernet switch`, `c7200`...) or id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// A built-in node type (`vpcs`, `ethernet_switch`, `ethernet_hub`...), when no template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_type: Option<String>,
    /// Node properties set at creation (an IOS image, RAM...).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub properties: Value,
    /// `ios` or `vpcs`; by default the node type's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<String>,
}

/// The server and how to build nodes.
#[derive(Debug, Clone)]
pub struct Gns3Options {
    /// The controller, `http://127.0.0.1:3080`.
    pub url: String,
    pub credentials: Credentials,
    /// Node specs by node name, over those of the task (`setup.gns3.nodes`): the mapping file
    /// a user passes to run a suite with their own images.
    pub nodes: BTreeMap<String, NodeSpec>,
    /// How long a console may take to show its first prompt (IOS images boot for minutes).
    pub boot_timeout: Duration,
}

impl Gns3Options {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            credentials: Credentials::default(),
            nodes: BTreeMap::new(),
            boot_timeout: Duration::from_secs(60),
        }
    }

    /// Reads a mapping file: `{"R1": {"template": "c7200"}, ...}`.
    pub fn with_mapping_file(mut self, path: &std::path::Path) -> Result<Self, EnvError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| setup_err(format!("node mapping {}: {e}", path.display())))?;
        let nodes: BTreeMap<String, NodeSpec> = serde_json::from_str(&text)
            .map_err(|e| setup_err(format!("node mapping {}: {e}", path.display())))?;
        self.nodes.extend(nodes);
        Ok(self)
    }
}

fn setup_err(message: String) -> EnvError {
    EnvError::setup(ENV, message)
}

fn runtime_err(message: String) -> EnvError {
    EnvError::runtime(ENV, message)
}

fn task_err(task: &Task, message: String) -> EnvError {
    EnvError::task(ENV, task.id.clone(), message)
}

fn config_of(task: &Task) -> Result<&ConfigTask, EnvError> {
    match &task.kind {
        TaskKind::Config(c) => Ok(c),
        _ => Err(task_err(task, "gns3 runs configuration tasks (seed 001 §4.1)".into())),
    }
}

/// The prefix of every project netdojo creates: `ndj<pid>x<n>-<task>`, so that a later run
/// can delete the projects of a killed one (and only those).
const PROJECT_PREFIX: &str = "ndj";

fn project_name(pid: u32, n: u64, task_id: &str) -> String {
    let task: String = task_id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
        .take(60)
        .collect();
    format!("{PROJECT_PREFIX}{pid}x{n}-{task}")
}

/// The pid in a project name netdojo made, if it is one.
fn project_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PROJECT_PREFIX)?;
    let (pid, rest) = rest.split_once('x')?;
    let (n, _) = rest.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// Builds one GNS3 project per episode. Connects to the server on first use.
#[derive(Debug)]
pub struct Gns3Factory {
    options: Gns3Options,
    client: OnceCell<Arc<Gns3Client>>,
    episodes: AtomicU64,
    /// Held while an episode creates, starts and links its nodes: GNS3 picks a link's UDP
    /// port by checking that nothing is bound to it, and a VPCS starting in a parallel
    /// episode binds a port GNS3 does not know of (see [`Gns3Env`]'s build).
    build_lock: Arc<tokio::sync::Mutex<()>>,
}

impl Gns3Factory {
    pub fn new(options: Gns3Options) -> Self {
        Self {
            options,
            client: OnceCell::new(),
            episodes: AtomicU64::new(0),
            build_lock: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// The client, connected (and logged in) the first time; projects left by killed runs of
    /// netdojo on this machine are deleted then.
    pub async fn client(&self) -> Result<Arc<Gns3Client>, EnvError> {
        self.client
            .get_or_try_init(|| async {
                let client = Gns3Client::connect(&self.options.url, self.options.credentials.clone())
                    .await
                    .map_err(|e| setup_err(e.to_string()))?;
                sweep(&client).await.map_err(|e| setup_err(format!("sweeping stale projects: {e}")))?;
                Ok(Arc::new(client))
            })
            .await
            .cloned()
    }
}

impl Gns3Factory {
    /// A new episode's environment, as itself (for a front that serves its consoles too).
    pub async fn create_env(&self) -> Result<Gns3Env, EnvError> {
        let client = self.client().await?;
        let n = self.episodes.fetch_add(1, Ordering::Relaxed);
        Ok(Gns3Env {
            client,
            options: self.options.clone(),
            episode: n,
            build_lock: self.build_lock.clone(),
            project: None,
            nodes: BTreeMap::new(),
            devices: BTreeMap::new(),
            links: vec![],
            initial: BTreeMap::new(),
        })
    }
}

/// Deletes projects named by a netdojo process of this machine that is no longer running.
/// Only for a server on this machine: another machine's pids mean nothing here.
async fn sweep(client: &Gns3Client) -> Result<Vec<String>, Gns3Error> {
    let local = matches!(client.host(), "127.0.0.1" | "localhost" | "::1" | "[::1]");
    if !local {
        return Ok(vec![]);
    }
    let mut deleted = Vec::new();
    for p in client.projects().await? {
        if let Some(pid) = project_pid(&p.name)
            && !std::path::Path::new(&format!("/proc/{pid}")).exists()
        {
            tracing::info!("deleting GNS3 project {} left by a killed run", p.name);
            client.delete_project(&p.project_id).await?;
            deleted.push(p.name);
        }
    }
    Ok(deleted)
}

#[async_trait]
impl EnvironmentFactory for Gns3Factory {
    fn name(&self) -> &str {
        ENV
    }

    fn config(&self) -> Value {
        json!({
            "url": self.options.url,
            "user": self.options.credentials.username,
            "nodes": self.options.nodes,
            "boot_timeout_s": self.options.boot_timeout.as_secs(),
            "dialects": ["ios", "vpcs"],
        })
    }

    async fn create(&self, _task: &Task) -> Result<Box<dyn Environment>, EnvError> {
        Ok(Box::new(self.create_env().await?))
    }
}

/// A project that is deleted when dropped, if `delete` was not awaited: an episode that
/// panics or is cancelled (Ctrl-C) leaves nothing on the server.
#[derive(Debug)]
struct ProjectGuard {
    client: Arc<Gns3Client>,
    options: Gns3Options,
    id: String,
    name: String,
    deleted: bool,
}

impl ProjectGuard {
    /// Deletes the project now; on failure, Drop tries once more from its own thread.
    async fn delete(mut self) -> Result<(), Gns3Error> {
        let result = self.client.delete_project(&self.id).await;
        self.deleted = result.is_ok();
        result
    }
}

impl Drop for ProjectGuard {
    fn drop(&mut self) {
        if self.deleted {
            return;
        }
        // No runtime can be relied on here (the episode's may be shutting down): a thread of
        // its own connects again and deletes the project.
        let (options, id, name) = (self.options.clone(), self.id.clone(), self.name.clone());
        let worker = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
            let Ok(rt) = rt else { return };
            let result = rt.block_on(async {
                let client = Gns3Client::connect(&options.url, options.credentials.clone()).await?;
                client.delete_project(&id).await
            });
            match result {
                Ok(()) => tracing::info!("deleted GNS3 project {name} at drop"),
                Err(e) => tracing::warn!("GNS3 project {name} could not be deleted: {e}"),
            }
        });
        let _ = worker.join();
    }
}

/// A node's console, shared by the environment and whoever serves the device too
/// (netdojo-mcp): one command at a time.
pub type Console = Arc<Mutex<Device>>;

/// One episode's project.
#[derive(Debug)]
pub struct Gns3Env {
    client: Arc<Gns3Client>,
    options: Gns3Options,
    episode: u64,
    build_lock: Arc<tokio::sync::Mutex<()>>,
    project: Option<ProjectGuard>,
    /// The GNS3 nodes by task node name.
    nodes: BTreeMap<String, Node>,
    /// The consoles of the nodes that have a CLI, shared with whoever serves them too
    /// (netdojo-mcp): one command at a time on each.
    devices: BTreeMap<String, Console>,
    links: Vec<String>,
    /// Each device's running configuration right after reset.
    initial: BTreeMap<String, String>,
}

impl Gns3Env {
    /// The GNS3 project, while the episode runs.
    pub fn project_id(&self) -> Option<&str> {
        self.project.as_ref().map(|p| p.id.as_str())
    }

    /// The consoles of the nodes that have a CLI, by node name, while the episode runs; they
    /// are gone (the weak references dead) once it is closed.
    pub fn consoles(&self) -> BTreeMap<String, Weak<Mutex<Device>>> {
        self.devices.iter().map(|(name, d)| (name.clone(), Arc::downgrade(d))).collect()
    }

    /// The links as built, `A e0 <-> B e0`.
    pub fn links(&self) -> &[String] {
        &self.links
    }

    fn spec_for(&self, task: &Task, node: &str) -> Result<NodeSpec, EnvError> {
        if let Some(spec) = self.options.nodes.get(node) {
            return Ok(spec.clone());
        }
        match task.setup.pointer(&format!("/gns3/nodes/{node}")) {
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| task_err(task, format!("field `setup.gns3.nodes.{node}`: {e}"))),
            None => Err(task_err(
                task,
                format!(
                    "node `{node}` has no GNS3 template: give `setup.gns3.nodes.{node}` in the task or map it in a node mapping file"
                ),
            )),
        }
    }

    async fn build(&mut self, task: &Task, config: &ConfigTask) -> Result<(), EnvError> {
        let client = self.client.clone();
        let build_lock = self.build_lock.clone();
        let building = build_lock.lock().await;
        let name = project_name(std::process::id(), self.episode, &task.id);
        let project = client.create_project(&name).await.map_err(|e| setup_err(e.to_string()))?;
        let pid = project.project_id.clone();
        self.project = Some(ProjectGuard {
            client: client.clone(),
            options: self.options.clone(),
            id: pid.clone(),
            name: name.clone(),
            deleted: false,
        });
        let templates = OnceCell::new();
        for (i, node) in config.topology.nodes.iter().enumerate() {
            let spec = self.spec_for(task, node)?;
            let x = (i as i32 % 5) * 150;
            let y = (i as i32 / 5) * 150;
            let mut properties = spec.properties.clone();
            let created = match (&spec.template, &spec.node_type) {
                (Some(template), _) => {
                    let all = templates
                        .get_or_try_init(|| client.templates())
                        .await
                        .map_err(|e| setup_err(e.to_string()))?;
                    let t = all
                        .iter()
                        .find(|t| &t.name == template || &t.template_id == template)
                        .ok_or_else(|| {
                            task_err(
                                task,
                                format!(
                                    "node `{node}`: the server has no template `{template}` (it has: {})",
                                    all.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")
                                ),
                            )
                        })?;
                    let n = client
                        .create_node_from_template(&pid, &t.template_id, x, y)
                        .await
                        .map_err(|e| setup_err(format!("node `{node}`: {e}")))?;
                    self.startup_property(&t.template_type, config, node, &mut properties);
                    // A node made from a template takes its startup script from its node
                    // directory: GNS3's update does not pass `startup_script` on.
                    let script = match properties.get_mut("startup_script").map(Value::take) {
                        Some(Value::String(s)) => Some(s),
                        _ => None,
                    };
                    if let Some(map) = properties.as_object_mut() {
                        map.remove("startup_script");
                    }
                    let n = client
                        .update_node(&pid, &n.node_id, node, &properties)
                        .await
                        .map_err(|e| setup_err(format!("node `{node}`: {e}")))?;
                    if let Some(script) = script {
                        client
                            .write_node_file(&pid, &n.node_id, "startup.vpc", &script)
                            .await
                            .map_err(|e| setup_err(format!("node `{node}`: startup script: {e}")))?;
                    }
                    n
                }
                (None, Some(node_type)) => {
                    self.startup_property(node_type, config, node, &mut properties);
                    client
                        .create_node(&pid, node, node_type, &properties)
                        .await
                        .map_err(|e| setup_err(format!("node `{node}`: {e}")))?
                }
                (None, None) => {
                    return Err(task_err(task, format!("node `{node}`: give a `template` or a `node_type`")));
                }
            };
            self.nodes.insert(node.clone(), created);
        }
        // Nodes start one at a time and before any link exists. GNS3 gives each new UDP
        // port after checking that nothing is bound to it, and VPCS 0.5b2 binds one port more
        // than GNS3 knows of (its relay, local port + 9) when it starts: with every node
        // started first, that port is taken before a link could be given it.
        for (name, node) in &self.nodes {
            client
                .start_node(&pid, &node.node_id)
                .await
                .map_err(|e| setup_err(format!("starting node `{name}`: {e}")))?;
        }
        for (i, link) in config.topology.links.iter().enumerate() {
            let ((a, ai), (b, bi)) = parse_link(link).ok_or_else(|| {
                task_err(task, format!("field `topology.links[{i}]`: `{link}` is not `A e0 <-> B e0`"))
            })?;
            let end = |node: &str, iface: &str| -> Result<LinkEnd, EnvError> {
                let n =
                    self.nodes.get(node).ok_or_else(|| task_err(task, format!("unknown node `{node}`")))?;
                let p = n.port(iface).ok_or_else(|| {
                    task_err(
                        task,
                        format!(
                            "field `topology.links[{i}]`: node `{node}` has no port `{iface}` (it has: {})",
                            n.ports
                                .iter()
                                .map(|p| format!("{}/{}", p.name, p.short_name))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )
                })?;
                Ok(LinkEnd {
                    node_id: n.node_id.clone(),
                    adapter_number: p.adapter_number,
                    port_number: p.port_number,
                })
            };
            let ends = [end(&a, &ai)?, end(&b, &bi)?];
            client.create_link(&pid, ends).await.map_err(|e| setup_err(format!("link `{link}`: {e}")))?;
            self.links.push(format!("{a} {ai} <-> {b} {bi}"));
        }
        drop(building);
        // Consoles, opened together: each waits for its own device to boot.
        let nodes = client.nodes(&pid).await.map_err(|e| setup_err(e.to_string()))?;
        let mut opening = Vec::new();
        for n in nodes {
            let Some(task_name) =
                self.nodes.iter().find(|(_, m)| m.node_id == n.node_id).map(|(k, _)| k.clone())
            else {
                continue;
            };
            let spec = self.spec_for(task, &task_name)?;
            let dialect = match spec.dialect.as_deref() {
                Some(d) => Some(CliDialect::parse(d).ok_or_else(|| {
                    task_err(task, format!("node `{task_name}`: unknown dialect `{d}` (ios, vpcs)"))
                })?),
                None => CliDialect::for_node_type(&n.node_type),
            };
            if let (Some(dialect), Some((host, port))) = (dialect, n.telnet_console(client.host())) {
                let boot = self.options.boot_timeout;
                opening.push(tokio::spawn(async move {
                    let device = Device::open(&task_name, dialect, &host, port, boot).await;
                    (task_name, device)
                }));
            }
            self.nodes.insert(n.name.clone(), n);
        }
        for handle in opening {
            let (name, device) = handle.await.map_err(|e| runtime_err(format!("console task: {e}")))?;
            let device = device.map_err(|e| setup_err(format!("node `{name}`: {e}")))?;
            self.devices.insert(name, Arc::new(Mutex::new(device)));
        }
        Ok(())
    }

    /// A task's startup configuration goes in the property each node type boots from.
    fn startup_property(&self, node_type: &str, config: &ConfigTask, node: &str, properties: &mut Value) {
        let Some(startup) = config.startup_configs.get(node) else { return };
        let key = match node_type {
            "vpcs" => "startup_script",
            "dynamips" | "iou" => "startup_config_content",
            _ => return,
        };
        if properties.is_null() {
            *properties = json!({});
        }
        let mut text = startup.replace("\r\n", "\n");
        // GNS3's own VPCS script names the host; a task's script keeps that name.
        if node_type == "vpcs" && !text.lines().any(|l| l.trim_start().starts_with("set pcname")) {
            text = format!("set pcname {node}\n{text}");
        }
        properties[key] = Value::String(text);
    }

    fn device_names(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    /// `device`'s running configuration as its episode starts: for a VPCS host whose startup
    /// script sets an address, read until the address shows (every 100 ms, at most the boot
    /// timeout). Read once, such a host showed none now and then (CI on a fresh machine: the
    /// reset's copy of PC2 had no address, and its own startup line then counted as an agent's
    /// edit in the command score), though it had one by the first tool call.
    async fn booted_config(&mut self, device: &str, config: &ConfigTask) -> Result<Option<String>, EnvError> {
        let dialect = match self.devices.get(device) {
            Some(d) => Some(d.lock().await.dialect()),
            None => None,
        };
        let sets_address = dialect == Some(CliDialect::Vpcs)
            && config.startup_configs.get(device).is_some_and(|s| s.lines().any(sets_static_address));
        let deadline = Instant::now() + self.options.boot_timeout;
        loop {
            let running = self.running_config(device).await?;
            if !sets_address || running.as_deref().is_some_and(|r| !r.is_empty()) {
                return Ok(running);
            }
            if Instant::now() >= deadline {
                return Err(setup_err(format!(
                    "node `{device}`: its startup script sets an address, and none showed within {:?}",
                    self.options.boot_timeout
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn running_config(&mut self, device: &str) -> Result<Option<String>, EnvError> {
        let Some(d) = self.devices.get(device) else { return Ok(None) };
        d.lock()
            .await
            .running_config()
            .await
            .map(Some)
            .map_err(|e| runtime_err(format!("node `{device}`: {e}")))
    }

    async fn run_testcase(&mut self, tc: &Testcase, nodes: &[String]) -> Result<(bool, String), String> {
        // The device as the FRR backend finds it: `device`, else the node its name names.
        let device = netdojo_core::testcase::testcase_device(tc, nodes)?;
        let device = device.as_str();
        if tc.expected_result.is_some() {
            return Err("expected_result (§4.1) is checked against FRR routers' routing tables; on GNS3 a \
                 testcase runs `commands` and matches `expected_output` (§4.3)"
                .into());
        }
        if tc.commands.is_empty() {
            return Err("the testcase has no commands".into());
        }
        let expected = tc.expected_output.as_deref().ok_or("the testcase has no expected_output")?;
        let re = regex::Regex::new(expected)
            .map_err(|e| format!("expected_output is not a regular expression: {e}"))?;
        let d = self.devices.get(device).ok_or_else(|| format!("device `{device}` has no console"))?;
        let mut d = d.lock().await;
        let mut output = String::new();
        for c in &tc.commands {
            let (out, _) = d.run(c).await.map_err(|e| e.to_string())?;
            output.push_str(&out);
            output.push('\n');
        }
        Ok((re.is_match(&output), output))
    }

    fn command_score(
        &self,
        task: &ConfigTask,
        finals: &BTreeMap<String, String>,
    ) -> Result<netdojo_config::score::ScoreReport, EnvError> {
        use netdojo_config::config::{Config, Dialect};
        let mut devices = Vec::new();
        for (device, final_text) in finals {
            let initial_text = self.initial.get(device).cloned().unwrap_or_default();
            let parse =
                |t: &str| Config::parse(t, Dialect::Ios).map_err(|e| runtime_err(format!("{device}: {e}")));
            let initial = parse(&initial_text)?;
            let final_config = parse(final_text)?;
            let mut expected = initial.clone();
            if let Some(commands) = task.ground_truth_configs.get(device) {
                expected
                    .apply(commands, Dialect::Ios)
                    .map_err(|e| runtime_err(format!("ground truth of {device}: {e}")))?;
            }
            devices.push(netdojo_config::score::DeviceEdits::new(device, &initial, &final_config, &expected));
        }
        Ok(netdojo_config::score::score(&devices))
    }

    async fn teardown(&mut self) -> Result<(), EnvError> {
        self.devices.clear();
        if let Some(project) = self.project.take() {
            project.delete().await.map_err(|e| runtime_err(format!("deleting the project: {e}")))?;
        }
        Ok(())
    }
}

/// What this backend's ANI tools say of its devices.
const GNS3_ANI: ani::Texts<'static> = ani::Texts {
    link_example: "A e0 <-> B e0",
    update_cfg: "Apply configuration commands to one device, in order, in the device's own CLI \
         (Cisco IOS configuration mode, or VPCS commands such as `ip 10.0.0.1/24 10.0.0.254`). \
         Answers each command with `success` or the device's error; commands after a \
         failing one are still applied.",
    execute_cmd: "Run one read-only command (`show ...`, `ping ...`) on one device and return its output.",
    dialects: &[],
};

#[async_trait]
impl Environment for Gns3Env {
    fn tools(&self) -> Vec<ToolSpec> {
        // Once reset, `device` lists the nodes with a console (a model reads them in the schema).
        let devices: Vec<&String> = self.devices.keys().collect();
        ani::tool_specs(&GNS3_ANI).into_iter().map(|t| t.with_choices("device", &devices)).collect()
    }

    async fn reset(&mut self, task: &Task) -> Result<String, EnvError> {
        let config = config_of(task)?.clone();
        self.teardown().await?;
        self.nodes.clear();
        self.links.clear();
        self.initial.clear();
        if let Err(e) = self.build(task, &config).await {
            // Nothing stays on the server when the build fails half-way.
            self.devices.clear();
            if let Some(project) = self.project.take()
                && let Err(d) = project.delete().await
            {
                tracing::warn!("{d}");
            }
            return Err(e);
        }
        for device in self.devices.keys().cloned().collect::<Vec<_>>() {
            if let Some(running) = self.booted_config(&device, &config).await? {
                self.initial.insert(device, running);
            }
        }
        let intents: String = config.intents.iter().map(|i| format!("- {i}\n")).collect();
        let mut dialects = BTreeMap::new();
        for (name, d) in &self.devices {
            dialects.insert(name.clone(), d.lock().await.dialect());
        }
        let kinds: Vec<String> = self
            .nodes
            .iter()
            .map(|(name, n)| match dialects.get(name) {
                Some(d) => format!("{name} ({}, {} CLI)", n.node_type, d.name()),
                None => format!("{name} ({}, no CLI)", n.node_type),
            })
            .collect();
        Ok(format!(
            "You are a network engineer. Configure the devices of this GNS3 network, each in its own \
             CLI, so that it meets these intents:\n{intents}\nDevices: {}. Links:\n{}\n\nUse \
             get-topology, get-running-cfg and execute-cmd (read-only commands) to look, update-cfg \
             to change a device's configuration, and call `finish` when every intent is met.",
            kinds.join(", "),
            self.links.iter().map(|l| format!("- {l}")).collect::<Vec<_>>().join("\n")
        ))
    }

    async fn execute(&mut self, call: &ToolCall) -> Result<Observation, EnvError> {
        let args = &call.arguments;
        let device = args.get("device").and_then(Value::as_str).unwrap_or_default().to_string();
        let known = self.device_names();
        let no_cli = |device: &str| {
            if known.iter().any(|d| d == device) {
                Observation::error(call, format!("device `{device}` has no console (a switch or hub)"))
            } else {
                Observation::error(call, format!("unknown device `{device}`; devices: {}", known.join(", ")))
            }
        };
        match call.name.as_str() {
            ani::GET_TOPOLOGY => {
                let wanted: Vec<String> = args
                    .get("devices")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                    .unwrap_or_default();
                let nodes: Vec<String> =
                    known.iter().filter(|d| wanted.is_empty() || wanted.contains(d)).cloned().collect();
                let links: Vec<&String> = self
                    .links
                    .iter()
                    .filter(|l| {
                        parse_link(l).is_some_and(|((a, _), (b, _))| nodes.contains(&a) || nodes.contains(&b))
                    })
                    .collect();
                let topology = json!({"topology": {"nodes": nodes, "links": links}});
                Ok(Observation::ok(call, topology.to_string(), Some(topology)))
            }
            ani::GET_RUNNING_CFG => match self.running_config(&device).await? {
                Some(running) => {
                    Ok(Observation::ok(call, running.clone(), Some(json!({"running_config": running}))))
                }
                None => Ok(no_cli(&device)),
            },
            ani::UPDATE_CFG => {
                let commands: Vec<String> = args
                    .get("commands")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                    .unwrap_or_default();
                let Some(d) = self.devices.get(&device) else { return Ok(no_cli(&device)) };
                let results: Vec<CommandResult> = d
                    .lock()
                    .await
                    .configure(&commands)
                    .await
                    .map_err(|e| runtime_err(format!("node `{device}`: {e}")))?;
                let all_ok = results.iter().all(|r| r.status == "success");
                let data = json!({"results": results});
                let mut obs = Observation::ok(call, data.to_string(), Some(data));
                obs.ok = all_ok;
                Ok(obs)
            }
            ani::EXECUTE_CMD => {
                let command =
                    args.get("command").and_then(Value::as_str).unwrap_or_default().trim().to_string();
                let Some(d) = self.devices.get(&device) else { return Ok(no_cli(&device)) };
                let mut d = d.lock().await;
                if let Some(why) = d.dialect().refuse_exec(&command) {
                    return Ok(Observation::error(call, format!("`{command}` refused: {why}")));
                }
                let (out, _) =
                    d.run(&command).await.map_err(|e| runtime_err(format!("node `{device}`: {e}")))?;
                let mut obs = Observation::ok(call, out.clone(), Some(json!({"output": out})));
                obs.ok = d.dialect().error_in(&out).is_none() || command.starts_with("ping");
                Ok(obs)
            }
            other => Ok(Observation::error(call, format!("unknown tool `{other}`"))),
        }
    }

    async fn check(&mut self) -> Result<StateCheck, EnvError> {
        Ok(StateCheck::safe())
    }

    async fn evaluate(&mut self, task: &Task, _answer: Option<&Value>) -> Result<Outcome, EnvError> {
        let config = config_of(task)?.clone();
        // export-final-cfg
        let mut finals = BTreeMap::new();
        for device in self.devices.keys().cloned().collect::<Vec<_>>() {
            if let Some(running) = self.running_config(&device).await? {
                finals.insert(device, running);
            }
        }
        // run-testcases: rounds until one passes them all or the network had time to
        // converge; the last round is the verdict (as on the FRR backend).
        let start = Instant::now();
        let mut results: Vec<Result<(bool, String), String>>;
        loop {
            results = Vec::with_capacity(config.testcases.len());
            for tc in &config.testcases {
                results.push(self.run_testcase(tc, &config.topology.nodes).await);
            }
            // A testcase that cannot run fails alone: the rounds go on for the others.
            let all_pass = results.iter().all(|r| r.as_ref().is_ok_and(|(p, _)| *p));
            if all_pass || start.elapsed() >= CONVERGENCE {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let command_score = self.command_score(&config, &finals)?;
        let mut checks = Vec::new();
        let mut testcase_results = Vec::new();
        for (i, (tc, r)) in config.testcases.iter().zip(results).enumerate() {
            let name = tc.name.clone().unwrap_or_else(|| format!("testcase {}", i + 1));
            let (passed, detail) = match r {
                Ok(r) => r,
                Err(e) => (false, e),
            };
            testcase_results.push(
                json!({"name": name, "status": if passed { "pass" } else { "fail" }, "output": detail}),
            );
            checks.push(Check::new(name, passed, detail));
        }
        Ok(Outcome {
            checks,
            export: json!({
                "configs": finals,
                "initial_configs": self.initial,
                "testcases": testcase_results,
                "command_score": command_score,
                "gns3": {"project": self.project.as_ref().map(|p| p.name.clone()), "server": self.client.url()},
            }),
        })
    }

    async fn close(&mut self) -> Result<(), EnvError> {
        self.teardown().await
    }
}

/// A VPCS startup line that sets a static address (`ip 10.0.0.2/24 [GATEWAY]`), not `ip dhcp`.
fn sets_static_address(line: &str) -> bool {
    let mut words = line.split_whitespace();
    words.next() == Some("ip")
        && words
            .next()
            .and_then(|a| a.split('/').next())
            .is_some_and(|a| a.parse::<std::net::Ipv4Addr>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vpcs_startup_line_sets_a_static_address_or_not() {
        assert!(sets_static_address("ip 10.0.0.2/24"));
        assert!(sets_static_address("  ip 10.0.0.2/24 10.0.0.1"));
        assert!(sets_static_address("ip 10.0.0.2 255.255.255.0 10.0.0.1"));
        assert!(!sets_static_address("ip dhcp"));
        assert!(!sets_static_address("set pcname PC1"));
        assert!(!sets_static_address("ipx 10.0.0.2/24"));
    }

    #[test]
    fn the_ani_tools_name_ios_and_vpcs() {
        insta::assert_json_snapshot!(ani::tool_specs(&GNS3_ANI));
    }

    #[test]
    fn project_names_carry_the_pid_for_the_sweep() {
        let name = project_name(4242, 7, "vpcs/two hosts");
        assert_eq!(name, "ndj4242x7-vpcs_two_hosts");
        assert_eq!(project_pid(&name), Some(4242));
        assert_eq!(project_pid("ndjango-project"), None);
        assert_eq!(project_pid("my lab"), None);
    }

    #[test]
    fn node_specs_reject_unknown_fields() {
        let ok: NodeSpec = serde_json::from_value(json!({"template": "VPCS"})).expect("spec");
        assert_eq!(ok.template.as_deref(), Some("VPCS"));
        let err = serde_json::from_value::<NodeSpec>(json!({"templat": "VPCS"})).expect_err("typo");
        assert!(err.to_string().contains("unknown field `templat`"), "{err}");
    }
}
