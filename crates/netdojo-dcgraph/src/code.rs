//! NetPress's own protocol (seed 003 §B.3, §B.4): the agent writes a Python function
//! `process_graph(graph_data)` over the networkx graph, netdojo runs it in the kernel's jail,
//! compares what it returned with the ground truth, checks the graph it returned, and measures
//! latency as the code's run time.
//!
//! The environment ([`CodeEnv`]) offers one tool, `run_code` (the Python source), besides
//! `finish`. The code runs in `netdojo-jail` (profile `code`: an empty network namespace of its
//! own, a read-only root but a private `/tmp`, no capabilities, no new processes, CPU-time and
//! address-space limits, and a wall-clock limit that kills the jail's process group) under the
//! interpreter of a venv that holds networkx ([`Python`]; `cargo xtask setup python` makes it).
//! The runner is `python/run_code.py`, passed to the interpreter with `-c`; the graph goes in
//! on stdin as node-link data ([`crate::netpress`]).
//!
//! Whatever the code does is the agent's: an exception, a wrong return value, a timeout are a
//! failed step with the traceback, and a failed episode. Only the jail or the interpreter
//! failing before the code ran is the environment's failure.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use netdojo_core::{
    Agent, AgentError, AgentFactory, AgentTurn, Check, EnvError, Environment, EnvironmentFactory,
    EpisodeStart, Observation, Outcome, StateCheck, Task, TaskKind, ToolCall, ToolSpec,
};

use crate::env::{GraphSource, answer_kind, check_base, compare_answer};
use crate::model::Graph;
use crate::netpress::{self, Canonical, Keying};
use crate::{safety, tools};

const ENV: &str = "dcgraph";

/// The one tool of the code interaction.
pub const RUN_CODE: &str = "run_code";

/// What `cargo xtask setup python` installs into the venv (pinned).
pub const REQUIREMENTS: &[&str] = &["networkx==3.4.2"];

/// The variable naming the venv, ahead of the default.
pub const VENV_ENV: &str = "NETDOJO_PYTHON_VENV";

const RUNNER: &str = include_str!("../python/run_code.py");

/// What the runner prints on stderr once the graph is loaded, before the code runs: without it,
/// a failure is the environment's (no networkx, a broken interpreter), not the agent's.
const READY: &str = "netdojo-code: ready";

/// The venv: `$NETDOJO_PYTHON_VENV`, else `~/.cache/netdojo/python`.
pub fn default_venv() -> PathBuf {
    if let Some(dir) = std::env::var_os(VENV_ENV) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache/netdojo/python")
}

/// The environment could not run code at all.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CodeError {
    #[error(
        "no Python venv with networkx at {venv}: run `cargo xtask setup python` (or set ${VENV_ENV}) ({why})"
    )]
    NoVenv { venv: String, why: String },
    #[error("the code runner could not start: {0}")]
    Runner(String),
}

/// An interpreter of the venv, and what the jail must show it read-only.
#[derive(Debug, Clone)]
pub struct Python {
    pub interpreter: PathBuf,
    pub readable: Vec<PathBuf>,
}

impl Python {
    /// The venv at `venv` (made by `python3 -m venv`): its interpreter, the venv itself and, when
    /// the base interpreter lives outside `/usr` (pyenv), the base installation.
    pub fn from_venv(venv: &Path) -> Result<Self, CodeError> {
        let no = |why: String| CodeError::NoVenv { venv: venv.display().to_string(), why };
        let interpreter = venv.join("bin/python3");
        if !interpreter.exists() {
            return Err(no(format!("{} is missing", interpreter.display())));
        }
        let venv = std::fs::canonicalize(venv).map_err(|e| no(e.to_string()))?;
        let cfg =
            std::fs::read_to_string(venv.join("pyvenv.cfg")).map_err(|e| no(format!("pyvenv.cfg: {e}")))?;
        let marker = venv.join(".netdojo-requirements");
        let installed = std::fs::read_to_string(&marker).unwrap_or_default();
        if installed.trim() != REQUIREMENTS.join(" ") {
            return Err(no(format!("it does not hold {}", REQUIREMENTS.join(" "))));
        }
        let mut readable = vec![venv.clone()];
        // `home = /usr/bin` for Debian's Python; a pyenv or /opt interpreter's prefix is bound too.
        let home = cfg.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == "home").then(|| PathBuf::from(v.trim()))
        });
        if let Some(home) = home.and_then(|h| std::fs::canonicalize(h).ok())
            && !home.starts_with("/usr")
            && let Some(prefix) = home.parent()
        {
            readable.push(prefix.to_path_buf());
        }
        let interpreter = venv.join("bin/python3");
        Ok(Self { interpreter, readable })
    }

    /// The venv marker `cargo xtask setup python` writes once the requirements are installed.
    pub fn marker(venv: &Path) -> PathBuf {
        venv.join(".netdojo-requirements")
    }
}

/// Limits of one run of the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub wall: Duration,
    pub cpu_seconds: u64,
    pub memory_mib: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { wall: Duration::from_secs(30), cpu_seconds: 20, memory_mib: 2048 }
    }
}

/// What a run of the code gave.
#[derive(Debug, Clone, PartialEq)]
pub enum CodeRun {
    /// `process_graph` returned a dict with `type` and `data`.
    Returned { latency_s: f64, kind: Value, data: Value, updated_graph: Option<Value>, printed: String },
    /// The code failed: its traceback, or why it was stopped.
    Failed { latency_s: Option<f64>, error: String, printed: String },
}

impl CodeRun {
    fn latency_s(&self) -> Option<f64> {
        match self {
            CodeRun::Returned { latency_s, .. } => Some(*latency_s),
            CodeRun::Failed { latency_s, .. } => *latency_s,
        }
    }
}

/// Runs `code` on `graph` (node-link data, serialised) in the jail. Blocking.
pub fn run_code(python: &Python, graph: &str, code: &str, limits: Limits) -> Result<CodeRun, CodeError> {
    let mut spec = netdojo_jail::Spec::isolated(netdojo_jail::Profile::Code);
    spec.readable = python.readable.clone();
    spec.cpu_seconds = limits.cpu_seconds;
    spec.memory_mib = limits.memory_mib;
    let request = format!("{{\"code\": {}, \"graph\": {graph}}}", Value::String(code.to_string()));
    let ran = netdojo_jail::run::run(
        &spec,
        &python.interpreter,
        &["-I", "-c", &runner_script(RUNNER)],
        &[
            ("PATH", "/usr/bin:/bin"),
            ("LC_ALL", "C.UTF-8"),
            ("PYTHONDONTWRITEBYTECODE", "1"),
            ("HOME", "/tmp"),
        ],
        request.as_bytes(),
        limits.wall,
        64 * 1024 * 1024,
    )
    .map_err(|e| CodeError::Runner(e.to_string()))?;
    if let Some(why) = netdojo_jail::setup_failure(ran.status, &ran.stderr) {
        return Err(CodeError::Runner(format!("the jail could not be set up: {why}")));
    }
    let stderr = String::from_utf8_lossy(&ran.stderr);
    let ready = stderr.contains(READY);
    let stderr = stderr.replace(READY, "");
    if !ready {
        if ran.timed_out {
            return Err(CodeError::Runner(format!(
                "the runner did not load the graph within {:?}",
                limits.wall
            )));
        }
        return Err(CodeError::Runner(format!(
            "the runner failed before the code ran (exit {:?}): {}",
            ran.status,
            tail(&stderr, 1500)
        )));
    }
    if ran.timed_out {
        return Ok(CodeRun::Failed {
            latency_s: None,
            error: format!("the code was killed: it ran past the time limit of {} s", limits.wall.as_secs()),
            printed: String::new(),
        });
    }
    let stdout = String::from_utf8_lossy(&ran.stdout);
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    let Ok(result) = serde_json::from_str::<Value>(last) else {
        // The jail exits with 128 + the signal that killed the program (SIGXCPU, then SIGKILL,
        // past the CPU time).
        let why = match ran.status {
            Some(0) => "it printed no result".to_string(),
            Some(code) if code > 128 => format!(
                "the interpreter was killed by signal {} (its limits: {} s of CPU time, {} MiB of memory)",
                code - 128,
                limits.cpu_seconds,
                limits.memory_mib
            ),
            Some(code) => format!("the interpreter exited with status {code}"),
            None => "the interpreter was killed".to_string(),
        };
        return Ok(CodeRun::Failed {
            latency_s: None,
            error: format!("the code did not finish: {why}\n{}", tail(&stderr, 1500)),
            printed: String::new(),
        });
    };
    let printed = result.get("printed").and_then(Value::as_str).unwrap_or_default().to_string();
    let latency_s = result.get("latency_s").and_then(Value::as_f64);
    if let Some(error) = result.get("error").and_then(Value::as_str) {
        return Ok(CodeRun::Failed { latency_s, error: error.to_string(), printed });
    }
    Ok(CodeRun::Returned {
        latency_s: latency_s.unwrap_or(0.0),
        kind: result.get("type").cloned().unwrap_or(Value::Null),
        data: result.get("data").cloned().unwrap_or(Value::Null),
        updated_graph: result.get("updated_graph").filter(|g| !g.is_null()).cloned(),
        printed,
    })
}

/// The runner with the ready marker written once the graph is loaded (before `exec`).
fn runner_script(runner: &str) -> String {
    runner.replacen(
        "    stdout = sys.stdout\n",
        &format!(
            "    sys.stderr.write({READY:?} + \"\\n\")\n    sys.stderr.flush()\n    stdout = sys.stdout\n"
        ),
        1,
    )
}

fn tail(s: &str, max: usize) -> String {
    let s = s.trim();
    match s.char_indices().rev().nth(max) {
        Some((at, _)) => format!("...{}", &s[at..]),
        None => s.to_string(),
    }
}

/// The NetPress prompt (§B.3, with the output format of NetPress's code) for this graph.
pub fn brief(g: &Graph, task: &Task, keying: Keying) -> String {
    let sb = g.kind_label(&crate::EntityKind::SuperBlock);
    let sp = g.kind_label(&crate::EntityKind::SpineBlock);
    let keyed = match keying {
        Keying::Name => {
            "Nodes are keyed by name. A chassis, its control point and its packet switch share one name, so one node stands for all of them: its `type` list holds each of their kinds. To remove one of them, remove only its kind from `type`, its attributes (switch_loc belongs to the packet switch), and the edges the hierarchy no longer allows; the node stays for the other kinds."
        }
        Keying::KindName => {
            "Each node stands for one entity and is keyed by `KIND/name` (a chassis, its control point and its packet switch share a name but are three nodes); its `type` list holds its one kind. Key the nodes you add the same way."
        }
    };
    let answer = match answer_kind(&task.label) {
        "count" => "Answer with 'type': 'text' and the count as 'data'.",
        "list" => "Answer with 'type': 'list' and the names as 'data'.",
        "rank" => {
            "Answer with 'type': 'table' and, as 'data', a list of [name, total capacity] rows, highest capacity first."
        }
        _ => "Answer with 'type': 'graph' and the updated graph as 'data'.",
    };
    format!(
        "Generate the Python code needed to process the network graph to answer the user question or request. The network graph data is stored as a networkx graph object. The Python code you generate should be in the form of a function named process_graph that takes a single input argument graph_data and returns a single object return_object. The input argument graph_data will be a networkx graph object with nodes and edges.

The graph is directed, and each node has a name attribute to represent itself. Each node has a type attribute, a list of kinds in the format of EK_TYPE. Each node can have other attributes depending on its type. Each directed edge also has a type attribute, which can include RK_CONTAINS or RK_CONTROLS. You should check the relationships based on edges and check the name based on node attributes. {keyed}

The node types have the following hierarchy:
- EK_JUPITER contains {sb}, {sp}
- {sb} contains EK_AGG_BLOCK
- {sp} contains EK_AGG_BLOCK, EK_PACKET_SWITCH
- EK_AGG_BLOCK contains EK_PACKET_SWITCH
- EK_RACK contains EK_CHASSIS
- EK_CHASSIS contains EK_CONTROL_POINT, EK_PACKET_SWITCH
- EK_CONTROL_DOMAIN contains EK_CONTROL_POINT
- EK_CONTROL_POINT controls EK_PACKET_SWITCH (edge type RK_CONTROLS)
- EK_PACKET_SWITCH contains EK_PORT

Adding new nodes requires considering the attributes of the new node. You should also consider adding edges based on their relationships with existing nodes. The name to add on each layer can be inferred from the new node's name string. When adding new nodes, you should also add edges based on their relationship with existing nodes.

Packet switch nodes have a switch location attribute switch_loc in the node. PORT nodes have an attribute physical_capacity_bps. When calculating the capacity of a node, you need to sum the physical_capacity_bps on the PORT nodes within the hierarchy that contains this node.

Do not modify graph_data itself: work on a copy (copy.deepcopy(graph_data)). The return_object must be a dict with three keys: 'type' (one of 'text', 'list', 'table', 'graph'), 'data' (the answer) and 'updated_graph' (always the graph after your changes, as nx.readwrite.json_graph.node_link_data(graph_copy)). {answer} The modules nx (networkx), json and copy are already imported.

Reply with the function in a ```python code block.

Question: {query}",
        query = task.query,
    )
}

/// Builds one [`CodeEnv`] per episode.
#[derive(Debug, Clone)]
pub struct CodeFactory {
    base: Arc<Graph>,
    source: GraphSource,
    keying: Keying,
    python: Arc<Python>,
    limits: Limits,
    /// The base graph as node-link data, serialised once.
    graph_json: Arc<String>,
    /// The base graph in the form the code sees it, for comparisons.
    base_canonical: Arc<Canonical>,
}

impl CodeFactory {
    pub fn new(
        base: Arc<Graph>,
        source: GraphSource,
        keying: Keying,
        python: Python,
        limits: Limits,
    ) -> Self {
        let data = netpress::node_link(&base, keying);
        let base_canonical = Canonical::of_graph(&base, keying);
        Self {
            base,
            source,
            keying,
            python: Arc::new(python),
            limits,
            graph_json: Arc::new(data.to_string()),
            base_canonical: Arc::new(base_canonical),
        }
    }
}

#[async_trait]
impl EnvironmentFactory for CodeFactory {
    fn name(&self) -> &str {
        ENV
    }

    fn config(&self) -> Value {
        json!({
            "interaction": "code",
            "source": self.source.describe(),
            "keying": self.keying,
            "nodes": self.base.node_count(),
            "edges": self.base.edge_count(),
            "digest": self.base.digest_hex(),
            "python": self.python.interpreter.display().to_string(),
            "requirements": REQUIREMENTS,
            "limits": {"wall_s": self.limits.wall.as_secs(), "cpu_s": self.limits.cpu_seconds, "memory_mib": self.limits.memory_mib},
        })
    }

    async fn create(&self, task: &Task) -> Result<Box<dyn Environment>, EnvError> {
        check_base(&self.base, &self.source, task)?;
        Ok(Box::new(CodeEnv { factory: self.clone(), last: None }))
    }
}

/// One episode of the code interaction.
#[derive(Debug)]
pub struct CodeEnv {
    factory: CodeFactory,
    /// The last run of the agent's code.
    last: Option<CodeRun>,
}

fn run_code_spec() -> ToolSpec {
    ToolSpec::new(
        RUN_CODE,
        "Run your Python code: it must define process_graph(graph_data) returning {'type', 'data', 'updated_graph'}. \
         The last run is the one scored.",
        json!({
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python source defining process_graph(graph_data)"}},
            "required": ["code"],
            "additionalProperties": false,
        }),
    )
}

/// An answer in NetPress's shapes, read as netdojo's: a count from text, a rank from rows.
fn answer_of(kind: &str, data: &Value) -> Value {
    match kind {
        "count" => match data {
            Value::String(s) => s.trim().parse::<u64>().map_or_else(|_| data.clone(), |n| json!(n)),
            Value::Number(n) if n.as_u64().is_none() => n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map_or_else(|| data.clone(), |f| json!(f as u64)),
            _ => data.clone(),
        },
        "rank" => match data.as_array() {
            Some(rows) => Value::Array(
                rows.iter()
                    .map(|row| match row {
                        Value::Array(pair) if pair.len() == 2 => {
                            let cap = pair[1]
                                .as_f64()
                                .filter(|f| f.fract() == 0.0)
                                .map_or_else(|| pair[1].clone(), |f| json!(f as u64));
                            json!({"name": pair[0], "capacity_bps": cap})
                        }
                        other => other.clone(),
                    })
                    .collect(),
            ),
            None => data.clone(),
        },
        _ => data.clone(),
    }
}

impl CodeEnv {
    fn outcome(&self, task: &Task) -> Result<Outcome, EnvError> {
        let TaskKind::Constructive { actions, answer: expected, .. } = &task.kind else {
            return Err(EnvError::task(ENV, task.id.clone(), "dcgraph runs constructive tasks only"));
        };
        let mut export = json!({"keying": self.factory.keying});
        let mut checks = Vec::new();
        match &self.last {
            None => checks.push(Check::new("code", false, "no code was run")),
            Some(CodeRun::Failed { error, .. }) => checks.push(Check::new("code", false, tail(error, 2000))),
            Some(CodeRun::Returned { kind, data, updated_graph, .. }) => {
                export["type"] = kind.clone();
                match expected {
                    // NetPress compares the answer alone when the query asks for one.
                    Some(expected) => {
                        let label = answer_kind(&task.label);
                        let (passed, detail) = compare_answer(label, expected, &answer_of(label, data));
                        checks.push(Check::new("answer", passed, detail));
                    }
                    None => {
                        let (passed, detail) = match updated_graph {
                            None => (false, "the code returned no graph".to_string()),
                            Some(graph) => match Canonical::of(graph) {
                                Err(e) => (false, e.to_string()),
                                Ok(got) => {
                                    let want = self.expected(actions);
                                    match got.diff(&want) {
                                        None => (true, String::new()),
                                        Some(diff) => (false, diff),
                                    }
                                }
                            },
                        };
                        checks.push(Check::new("graph", passed, detail));
                    }
                }
            }
        }
        if let Some(latency) = self.last.as_ref().and_then(CodeRun::latency_s) {
            export["code_s"] = json!(latency);
        }
        Ok(Outcome { checks, export })
    }

    /// The graph the ground truth leaves, in the form the code sees.
    fn expected(&self, actions: &[ToolCall]) -> Canonical {
        let calls = tools::flatten(actions);
        let mutating: Vec<(&str, &Value)> = calls
            .iter()
            .filter_map(|c| Some((c.get("tool")?.as_str()?, c.get("arguments")?)))
            .filter(|(tool, _)| tools::is_mutating(tool))
            .collect();
        if mutating.is_empty() {
            return (*self.factory.base_canonical).clone();
        }
        let mut g = (*self.factory.base).clone();
        for (tool, arguments) in mutating {
            let _ = tools::execute(&mut g, tool, arguments);
        }
        Canonical::of_graph(&g, self.factory.keying)
    }
}

#[async_trait]
impl Environment for CodeEnv {
    fn tools(&self) -> Vec<ToolSpec> {
        vec![run_code_spec()]
    }

    async fn reset(&mut self, task: &Task) -> Result<String, EnvError> {
        self.last = None;
        Ok(brief(&self.factory.base, task, self.factory.keying))
    }

    async fn execute(&mut self, call: &ToolCall) -> Result<Observation, EnvError> {
        if call.name != RUN_CODE {
            return Ok(Observation::error(call, format!("unknown tool `{}` (tools: {RUN_CODE})", call.name)));
        }
        let code = call.arguments.get("code").and_then(Value::as_str).unwrap_or_default().to_string();
        let (python, graph, limits) =
            (self.factory.python.clone(), self.factory.graph_json.clone(), self.factory.limits);
        let run = tokio::task::spawn_blocking(move || run_code(&python, &graph, &code, limits))
            .await
            .map_err(|e| EnvError::runtime(ENV, "the code runner's thread").with_source(e))?
            .map_err(|e| EnvError::runtime(ENV, "running the code").with_source(e))?;
        let observation = match &run {
            CodeRun::Returned { latency_s, kind, data, updated_graph, printed } => {
                let mut text = format!("process_graph ran in {latency_s:.3} s and returned type {kind}");
                if kind.as_str() != Some("graph") {
                    text.push_str(&format!("; data: {}", tail_start(&data.to_string(), 1500)));
                }
                if updated_graph.is_none() {
                    text.push_str("; no updated_graph");
                }
                if !printed.is_empty() {
                    text.push_str(&format!("\nprinted:\n{}", tail(printed, 1000)));
                }
                Observation::ok(call, text, Some(json!({"latency_s": latency_s, "type": kind})))
            }
            CodeRun::Failed { error, printed, .. } => {
                let mut text = tail(error, 3000);
                if !printed.is_empty() {
                    text.push_str(&format!("\nprinted:\n{}", tail(printed, 1000)));
                }
                Observation::error(call, text)
            }
        };
        self.last = Some(run);
        Ok(observation)
    }

    async fn check(&mut self) -> Result<StateCheck, EnvError> {
        // NetPress (malt_env.py): the safety checker runs on the graph the code returned; code
        // that failed, or returned no graph, fails it.
        Ok(match &self.last {
            None => StateCheck::safe(),
            Some(CodeRun::Failed { .. }) => {
                StateCheck::from_violations(vec!["the code failed, so there is no graph to check".into()])
            }
            Some(CodeRun::Returned { updated_graph: None, .. }) => {
                StateCheck::from_violations(vec!["the code returned no updated_graph to check".into()])
            }
            Some(CodeRun::Returned { updated_graph: Some(graph), .. }) => match netpress::to_graph(graph) {
                Err(e) => StateCheck::from_violations(vec![e.to_string()]),
                Ok(g) => {
                    let mut c = StateCheck::from_violations(safety::violations(&g));
                    c.summary = Some(json!({"nodes": g.node_count(), "edges": g.edge_count()}));
                    c
                }
            },
        })
    }

    async fn evaluate(&mut self, task: &Task, _answer: Option<&Value>) -> Result<Outcome, EnvError> {
        self.outcome(task)
    }
}

fn tail_start(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_string(),
    }
}

/// The ground-truth Python of each label (`testdata/netpress-code`): `common.py` and one
/// `LABEL.py` per label, run with the task's operands as `PARAMS`.
#[derive(Debug, Clone)]
pub struct CodeOracleFactory {
    common: Arc<String>,
    labels: Arc<std::collections::BTreeMap<String, String>>,
    keying: Keying,
}

impl CodeOracleFactory {
    /// Reads `dir/common.py` and `dir/LABEL.py` for each of the 12 labels.
    pub fn load(dir: &Path, keying: Keying) -> Result<Self, String> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
        };
        let common = read("common.py")?;
        let mut labels = std::collections::BTreeMap::new();
        for (label, _) in crate::LABELS {
            labels.insert(label.to_string(), read(&format!("{label}.py"))?);
        }
        Ok(Self { common: Arc::new(common), labels: Arc::new(labels), keying })
    }

    /// The default directory: the repository's `testdata/netpress-code`.
    pub fn default_dir() -> PathBuf {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/netpress-code"))
    }

    /// The oracle's code for `task`.
    pub fn code(&self, task: &Task) -> Result<String, String> {
        let TaskKind::Constructive { actions, .. } = &task.kind else {
            return Err(format!("task {}: not a constructive task", task.id));
        };
        let body = self
            .labels
            .get(&task.label)
            .ok_or_else(|| format!("no ground-truth code for label `{}`", task.label))?;
        let params = json!({"keying": self.keying, "actions": tools::flatten(actions)});
        Ok(format!(
            "PARAMS = json.loads({})\n\n{}\n\n{}\n",
            Value::String(params.to_string()),
            self.common.trim_end(),
            body.trim_end()
        ))
    }
}

impl AgentFactory for CodeOracleFactory {
    fn name(&self) -> &str {
        "oracle"
    }

    fn config(&self) -> Value {
        json!({"interaction": "code", "ground_truth": "testdata/netpress-code", "keying": self.keying})
    }

    fn create(&self, task: &Task) -> Result<Box<dyn Agent>, AgentError> {
        let code =
            self.code(task).map_err(|message| AgentError::Config { agent: "oracle".into(), message })?;
        Ok(Box::new(CodeOracle {
            plan: vec![ToolCall::finish(None), ToolCall::new(RUN_CODE, json!({"code": code}))],
        }))
    }
}

/// Plays the ground-truth code, then finishes.
#[derive(Debug)]
pub struct CodeOracle {
    /// The calls still to make, last first.
    plan: Vec<ToolCall>,
}

#[async_trait]
impl Agent for CodeOracle {
    async fn start(&mut self, _episode: &EpisodeStart<'_>) -> Result<(), AgentError> {
        Ok(())
    }

    async fn step(&mut self, _feedback: &[Observation]) -> Result<AgentTurn, AgentError> {
        Ok(AgentTurn {
            reasoning: "ground-truth code".into(),
            calls: self.plan.pop().into_iter().collect(),
            ..AgentTurn::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::FabricParams;

    #[test]
    fn netpress_answer_shapes_are_read_as_netdojos() {
        assert_eq!(answer_of("count", &json!("17")), json!(17));
        assert_eq!(answer_of("count", &json!(17.0)), json!(17));
        assert_eq!(answer_of("count", &json!("many")), json!("many"));
        assert_eq!(
            answer_of("rank", &json!([["a", 2.0e9], ["b", 1000000000]])),
            json!([{"name": "a", "capacity_bps": 2000000000u64}, {"name": "b", "capacity_bps": 1000000000u64}])
        );
        assert_eq!(answer_of("list", &json!(["a"])), json!(["a"]));
    }

    #[test]
    fn the_brief_is_the_papers_prompt_with_the_query() {
        let g = FabricParams::default().generate();
        let task = Task {
            id: "t".into(),
            application: "dcgraph".into(),
            level: 1,
            label: "rank".into(),
            domain: None,
            seed: None,
            query: "Rank the children of X.".into(),
            setup: Value::Null,
            kind: TaskKind::Constructive { actions: vec![], answer: None, goal: None },
        };
        for keying in [Keying::Name, Keying::KindName] {
            let b = brief(&g, &task, keying);
            assert!(b.starts_with("Generate the Python code needed to process the network graph"), "{b}");
            assert!(b.contains("'type': 'table'") && b.ends_with("Question: Rank the children of X."), "{b}");
        }
    }

    #[test]
    fn a_venv_without_the_requirements_is_refused_with_the_fix() {
        let dir = std::env::temp_dir().join(format!("ndj-venv-test-{}", std::process::id()));
        let _ = std::fs::create_dir_all(dir.join("bin"));
        let err = Python::from_venv(&dir).expect_err("no interpreter");
        assert!(err.to_string().contains("cargo xtask setup python"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_runner_prints_its_marker_before_the_code_runs() {
        let script = runner_script(RUNNER);
        let ready = script.find(READY).expect("marker");
        assert!(ready < script.find("exec(compile(").expect("exec"), "{script}");
    }
}
