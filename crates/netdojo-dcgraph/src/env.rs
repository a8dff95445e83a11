//! The environment: a factory holding the base graph, and one episode's copy of it.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use netdojo_core::{
    Check, EnvError, Environment, EnvironmentFactory, Observation, Outcome, StateCheck, Task, TaskKind,
};
use netdojo_core::{ToolCall, ToolSpec};

use crate::fabric::FabricParams;
use crate::malt::{self, MaltError};
use crate::model::{EntityKind, Graph};
use crate::{ops, safety, tools};

/// Where the base graph comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphSource {
    /// A fabric built by [`FabricParams::generate`].
    Generated(FabricParams),
    /// A MALT text-protobuf file.
    Malt(PathBuf),
}

impl GraphSource {
    /// Builds or reads the graph.
    pub fn load(&self) -> Result<Graph, MaltError> {
        match self {
            GraphSource::Generated(p) => Ok(p.generate()),
            GraphSource::Malt(path) => malt::load(path),
        }
    }

    /// The description stored in each task's `setup`.
    pub fn describe(&self) -> Value {
        match self {
            GraphSource::Generated(p) => json!({"graph": "generated", "params": p}),
            GraphSource::Malt(path) => json!({"graph": "malt", "path": path.display().to_string()}),
        }
    }
}

const ENV: &str = "dcgraph";

/// Builds one [`DcGraphEnv`] per episode, each with its own copy of the base graph.
#[derive(Debug, Clone)]
pub struct DcGraphFactory {
    base: Arc<Graph>,
    source: GraphSource,
}

impl DcGraphFactory {
    /// Loads the base graph from `source`.
    pub fn new(source: GraphSource) -> Result<Self, MaltError> {
        Ok(Self { base: Arc::new(source.load()?), source })
    }

    /// Uses an already loaded graph (shared with a [`crate::QueryGenerator`]).
    pub fn from_graph(base: Arc<Graph>, source: GraphSource) -> Self {
        Self { base, source }
    }

    pub fn graph(&self) -> &Arc<Graph> {
        &self.base
    }

    pub fn source(&self) -> &GraphSource {
        &self.source
    }
}

#[async_trait]
impl EnvironmentFactory for DcGraphFactory {
    fn name(&self) -> &str {
        ENV
    }

    fn config(&self) -> Value {
        json!({"source": self.source.describe(), "nodes": self.base.node_count(), "edges": self.base.edge_count(), "digest": self.base.digest_hex()})
    }

    async fn create(&self, task: &Task) -> Result<Box<dyn Environment>, EnvError> {
        check_base(&self.base, &self.source, task)?;
        Ok(Box::new(DcGraphEnv::new(self.base.clone())))
    }
}

/// Refuses a task generated on another base graph than `base`.
pub(crate) fn check_base(base: &Graph, source: &GraphSource, task: &Task) -> Result<(), EnvError> {
    if let Some(want) = task.setup.get("base_digest").and_then(Value::as_str)
        && want != base.digest_hex()
    {
        return Err(EnvError::task(
            ENV,
            task.id.clone(),
            format!(
                "the task was generated on a graph with digest {want}, but this environment's graph ({}) has digest {}",
                source.describe(),
                base.digest_hex()
            ),
        ));
    }
    Ok(())
}

/// One episode: a private copy of the graph that the agent's tools read and mutate.
#[derive(Debug, Clone)]
pub struct DcGraphEnv {
    base: Arc<Graph>,
    /// Shared with `base` until the first mutation (copy on write): most read-only episodes
    /// and every reset cost no copy of the graph.
    graph: Arc<Graph>,
}

/// The answer a label asks for: the part after the last `-` (`remove-count` → `count`).
pub(crate) fn answer_kind(label: &str) -> &str {
    label.rsplit('-').next().unwrap_or(label)
}

/// JSON Schema of the answer for a task label; `None` for pure mutations.
pub fn answer_schema_for(label: &str) -> Option<Value> {
    match answer_kind(label) {
        "count" => Some(json!({"type": "integer", "minimum": 0})),
        "list" => Some(json!({"type": "array", "items": {"type": "string"}})),
        "rank" => Some(json!({
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "capacity_bps": {"type": "integer", "minimum": 0}},
                "required": ["name", "capacity_bps"],
                "additionalProperties": false,
            }
        })),
        _ => None,
    }
}

/// The brief an agent reads: the model, the tools' conventions, the answer format, the query.
pub fn brief(g: &Graph, task: &Task) -> String {
    let sb = g.kind_label(&EntityKind::SuperBlock);
    let sp = g.kind_label(&EntityKind::SpineBlock);
    let answer = match answer_kind(&task.label) {
        "count" => "When done, call `finish` with `answer` set to the count, an integer.".to_string(),
        "list" => "When done, call `finish` with `answer` set to the list of the names (strings); order does not matter.".to_string(),
        "rank" => "When done, call `finish` with `answer` set to the ranked list, highest capacity first, each item {\"name\": ..., \"capacity_bps\": ...}; equal capacities may come in any order.".to_string(),
        _ => "This task changes the graph and asks for no answer: when the graph is as requested, call `finish` without an answer.".to_string(),
    };
    format!(
        "You manage a datacenter topology stored as a directed graph ({nodes} nodes, {edges} edges). \
Each node has a kind (EK_*) and a name; a chassis, its control point and its packet switch share one name, \
so give the kind whenever a name is ambiguous. Each edge has a relation: RK_CONTAINS or RK_CONTROLS.

The node kinds form this hierarchy (parent RELATION child):
- EK_JUPITER RK_CONTAINS {sb}, {sp}
- {sb} RK_CONTAINS EK_AGG_BLOCK
- {sp} RK_CONTAINS EK_PACKET_SWITCH (and may contain EK_AGG_BLOCK)
- EK_AGG_BLOCK RK_CONTAINS EK_PACKET_SWITCH
- EK_RACK RK_CONTAINS EK_CHASSIS
- EK_CHASSIS RK_CONTAINS EK_CONTROL_POINT, EK_PACKET_SWITCH
- EK_CONTROL_DOMAIN RK_CONTAINS EK_CONTROL_POINT
- EK_CONTROL_POINT RK_CONTROLS EK_PACKET_SWITCH
- EK_PACKET_SWITCH RK_CONTAINS EK_PORT

Packet switches have the attribute switch_loc.stage; ports have physical_capacity_bps (a positive integer). \
The capacity of a node is the sum of physical_capacity_bps over all EK_PORT nodes below it in the hierarchy \
(following RK_CONTAINS and RK_CONTROLS edges, each port once). \"Children\" of a node are its direct RK_CONTAINS children.

Use the tools to inspect and change the graph. Changes must keep the graph safe: only the kinds and \
relations above, every port with a positive physical_capacity_bps, every packet switch with switch_loc \
and at least one port, no node without edges. The graph is checked after every tool call, so make a \
change that needs several calls (a node and its edges, a switch and its ports) with one `batch` call. \
remove_node removes only the node you name: remove what it contains too when that should go. {answer}

Query: {query}",
        nodes = g.node_count(),
        edges = g.edge_count(),
        query = task.query,
    )
}

impl DcGraphEnv {
    /// An episode on a copy of `base`.
    pub fn new(base: Arc<Graph>) -> Self {
        Self { graph: base.clone(), base }
    }

    /// The episode's current graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Runs one call synchronously (what [`Environment::execute`] does).
    pub fn apply(&mut self, call: &ToolCall) -> Observation {
        let result = match tools::read(&self.graph, &call.name, &call.arguments) {
            Some(r) => r,
            None if call.name == "batch" => {
                let calls =
                    call.arguments.get("calls").and_then(Value::as_array).cloned().unwrap_or_default();
                let before = self.graph.clone();
                match tools::run_batch(Arc::make_mut(&mut self.graph), &calls) {
                    Ok(lines) => {
                        Ok((format!("batch of {} calls applied:\n{}", lines.len(), lines.join("\n")), None))
                    }
                    Err(e) => {
                        self.graph = before;
                        Err(format!("{e}; nothing in the batch was applied"))
                    }
                }
            }
            None => tools::execute(Arc::make_mut(&mut self.graph), &call.name, &call.arguments),
        };
        match result {
            Ok((text, data)) => Observation::ok(call, text, data),
            Err(msg) => Observation::error(call, msg),
        }
    }

    /// The safety check of the current graph.
    pub fn state_check(&self) -> StateCheck {
        let mut c = StateCheck::from_violations(safety::violations(&self.graph));
        c.summary = Some(json!({"nodes": self.graph.node_count(), "edges": self.graph.edge_count()}));
        c
    }

    /// The goal checks (and export) for `task` given the agent's `answer`.
    pub fn outcome(&self, task: &Task, answer: Option<&Value>) -> Result<Outcome, EnvError> {
        let TaskKind::Constructive { actions, answer: expected, goal } = &task.kind else {
            return Err(EnvError::task(ENV, task.id.clone(), "dcgraph runs constructive tasks only"));
        };
        let mut checks = Vec::new();
        if let Some(expected) = expected {
            let (passed, detail) = match answer {
                None => (false, "no answer given".to_string()),
                Some(given) => compare_answer(answer_kind(&task.label), expected, given),
            };
            checks.push(Check::new("answer", passed, detail));
        }
        if let Some(goal) = goal {
            let want = goal.get("digest").and_then(Value::as_str).unwrap_or("");
            let got = self.graph.digest_hex();
            if want == got {
                checks.push(Check::new("graph", true, ""));
            } else {
                checks.push(Check::new("graph", false, self.diff_from_goal(actions)));
            }
        }
        let export = json!({"digest": self.graph.digest_hex(), "nodes": self.graph.node_count(), "edges": self.graph.edge_count()});
        Ok(Outcome { checks, export })
    }

    /// Replays the ground truth on a fresh copy and says which records differ.
    fn diff_from_goal(&self, actions: &[ToolCall]) -> String {
        let mut expected = (*self.base).clone();
        for a in actions {
            let _ = tools::execute(&mut expected, &a.name, &a.arguments);
        }
        let mut parts = Vec::new();
        let (missing_n, missing_e) = ops::missing_records(&expected, &self.graph, 5);
        let (extra_n, extra_e) = ops::missing_records(&self.graph, &expected, 5);
        for (what, items) in [
            ("missing nodes", missing_n),
            ("unexpected nodes", extra_n),
            ("missing edges", missing_e),
            ("unexpected edges", extra_e),
        ] {
            if !items.is_empty() {
                parts.push(format!("{what}: {}", items.join("; ")));
            }
        }
        if parts.is_empty() { "the graph differs from the goal".into() } else { parts.join(". ") }
    }
}

/// Compares an answer with the expected one: count by equality, list as a multiset, rank by
/// names and capacities with ties in any order.
pub fn compare_answer(kind: &str, expected: &Value, given: &Value) -> (bool, String) {
    match kind {
        "count" => {
            let ok = given.as_u64().is_some() && given.as_u64() == expected.as_u64();
            (ok, if ok { String::new() } else { format!("expected {expected}, got {given}") })
        }
        "list" => {
            let norm = |v: &Value| -> Option<Vec<String>> {
                let mut names: Vec<String> =
                    v.as_array()?.iter().map(|x| x.as_str().map(str::to_string)).collect::<Option<_>>()?;
                names.sort_unstable();
                Some(names)
            };
            match (norm(expected), norm(given)) {
                (Some(e), Some(g)) if e == g => (true, String::new()),
                (Some(e), Some(g)) => (
                    false,
                    format!(
                        "expected {} names, got {}; first expected: {:?}",
                        e.len(),
                        g.len(),
                        e.iter().take(5).collect::<Vec<_>>()
                    ),
                ),
                _ => (false, format!("expected a list of names, got {given}")),
            }
        }
        "rank" => {
            let items = |v: &Value| -> Option<Vec<(String, u64)>> {
                v.as_array()?
                    .iter()
                    .map(|x| Some((x.get("name")?.as_str()?.to_string(), x.get("capacity_bps")?.as_u64()?)))
                    .collect()
            };
            let (Some(exp), Some(got)) = (items(expected), items(given)) else {
                return (false, format!("expected a list of {{name, capacity_bps}}, got {given}"));
            };
            let mut en: Vec<&(String, u64)> = exp.iter().collect();
            let mut gn: Vec<&(String, u64)> = got.iter().collect();
            en.sort_unstable();
            gn.sort_unstable();
            if en != gn {
                return (false, format!("names or capacities differ: expected {expected}"));
            }
            if got.windows(2).any(|w| w[0].1 < w[1].1) {
                return (false, "not ranked by capacity, highest first".into());
            }
            (true, String::new())
        }
        _ => (given == expected, String::new()),
    }
}

#[async_trait]
impl Environment for DcGraphEnv {
    fn tools(&self) -> Vec<ToolSpec> {
        tools::tool_specs()
    }

    fn answer_schema(&self, task: &Task) -> Option<Value> {
        answer_schema_for(&task.label)
    }

    async fn reset(&mut self, task: &Task) -> Result<String, EnvError> {
        self.graph = self.base.clone();
        Ok(brief(&self.graph, task))
    }

    async fn execute(&mut self, call: &ToolCall) -> Result<Observation, EnvError> {
        Ok(self.apply(call))
    }

    async fn check(&mut self) -> Result<StateCheck, EnvError> {
        Ok(self.state_check())
    }

    async fn evaluate(&mut self, task: &Task, answer: Option<&Value>) -> Result<Outcome, EnvError> {
        self.outcome(task, answer)
    }
}
