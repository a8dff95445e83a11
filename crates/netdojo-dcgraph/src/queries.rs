//! The query generator: NetPress's 12 capacity-planning labels, with ground truth computed by
//! running [`crate::ops`] on a scratch copy of the graph and undoing them afterwards.

use std::sync::{Arc, Mutex};

use petgraph::stable_graph::NodeIndex;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use netdojo_core::task::task_seed;
use netdojo_core::{Task, TaskError, TaskGenerator, TaskKind, ToolCall};

use crate::env::GraphSource;
use crate::model::{CAPACITY_ATTR, EntityKind, Graph, Relation};
use crate::ops::{self, Journal};

/// The 12 labels with their level, in the order `generate` cycles through them.
pub const LABELS: [(&str, u8); 12] = [
    ("update", 1),
    ("add", 1),
    ("count", 1),
    ("remove", 1),
    ("list", 1),
    ("rank", 1),
    ("remove-count", 2),
    ("remove-list", 2),
    ("remove-rank", 2),
    ("add-count", 3),
    ("add-list", 3),
    ("add-rank", 3),
];

/// Port capacities the generator sets.
const CAPACITIES: [u64; 6] =
    [1_000_000_000, 2_000_000_000, 10_000_000_000, 25_000_000_000, 40_000_000_000, 100_000_000_000];

/// Several mutations as one `batch` call, so that the oracle never passes through an unsafe
/// intermediate state (a switch without ports, ports without their switch).
fn batch(calls: Vec<ToolCall>) -> Vec<ToolCall> {
    if calls.len() == 1 {
        return calls;
    }
    let calls: Vec<Value> =
        calls.into_iter().map(|c| json!({"tool": c.name, "arguments": c.arguments})).collect();
    vec![ToolCall::new("batch", json!({"calls": calls}))]
}

/// How a count, list or rank query with no change before it picks the node it is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Targets {
    /// As NetPress draws them (seed 003 §B): counts and ranks about aggregation blocks and
    /// control domains, lists spread over aggregation blocks, control domains, racks and
    /// switches (a kind first, then a node of it). A rank is drawn among the nodes whose
    /// children's capacities are not all equal, so that its order says something (MALT's ports
    /// are all 1 Gb/s but five: a switch's ports rank as one full tie).
    #[default]
    NetPress,
    /// Any node with children, uniformly: most counts and ranks are then about a switch, a
    /// chassis or a control point (answers 1 or 16, ranks of tied ports).
    Uniform,
}

impl Targets {
    pub fn name(self) -> &'static str {
        match self {
            Targets::NetPress => "netpress",
            Targets::Uniform => "uniform",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [Targets::NetPress, Targets::Uniform].into_iter().find(|t| t.name() == name)
    }
}

/// The nodes a [`Targets::NetPress`] draw picks from.
#[derive(Debug, Default)]
struct NetPressTargets {
    /// Aggregation blocks and control domains with children.
    count: Vec<NodeIndex>,
    /// Per kind (aggregation block, control domain, rack, switch), the nodes with RK_CONTAINS
    /// children; kinds with none are left out.
    list: Vec<Vec<NodeIndex>>,
    /// Aggregation blocks and control domains whose children do not all have one capacity
    /// (all of them when none differs).
    rank: Vec<NodeIndex>,
}

/// Makes dcgraph tasks from a base graph. `generate(seed, index)` is pure: task `index`
/// has label `LABELS[index % 12]` and operands drawn from a generator seeded by both.
#[derive(Debug)]
pub struct QueryGenerator {
    base: Arc<Graph>,
    source: GraphSource,
    setup: Value,
    /// Scratch copies of the base graph, one per concurrent caller, restored after each use.
    pool: Mutex<Vec<Graph>>,
    ports: Vec<NodeIndex>,
    switches: Vec<NodeIndex>,
    blocks: Vec<NodeIndex>,
    containers: Vec<NodeIndex>,
    listable: Vec<NodeIndex>,
    targets: Targets,
    netpress: NetPressTargets,
}

/// What the first (mutating) step did, for the query that follows it.
struct Mutation {
    text: String,
    actions: Vec<ToolCall>,
    /// The node the follow-up query is about (the parent of what changed).
    parent: (EntityKind, String),
    /// Whether a switch (not a port) was added or removed.
    switch: bool,
}

impl QueryGenerator {
    /// A generator over `base` (indices of the base graph pick operands; the ground truth is
    /// computed on scratch copies).
    pub fn new(base: Arc<Graph>, source: GraphSource) -> Self {
        let of = |pred: &dyn Fn(NodeIndex) -> bool| -> Vec<NodeIndex> {
            let mut v: Vec<NodeIndex> = base.node_indices().filter(|ix| pred(*ix)).collect();
            // Sort by record so that operand choice does not depend on load order details.
            v.sort_by(|a, b| {
                (&base.node(*a).name, &base.node(*a).kind).cmp(&(&base.node(*b).name, &base.node(*b).kind))
            });
            v
        };
        let kind = |ix: NodeIndex| &base.node(ix).kind;
        let has_contains = |ix: NodeIndex| base.children(ix).any(|(r, _)| *r == Relation::Contains);
        let ports = of(&|ix| *kind(ix) == EntityKind::Port);
        let switches = of(&|ix| *kind(ix) == EntityKind::PacketSwitch);
        let blocks = of(&|ix| {
            matches!(kind(ix), EntityKind::AggBlock | EntityKind::SpineBlock)
                && base.children(ix).any(|(_, c)| base.node(c).kind == EntityKind::PacketSwitch)
        });
        let containers = of(&|ix| base.children(ix).any(|(r, _)| r.is_hierarchy()));
        let listable = of(&|ix| {
            !matches!(kind(ix), EntityKind::Chassis | EntityKind::ControlPoint | EntityKind::Port)
                && has_contains(ix)
        });
        let of_kinds = |kinds: &[EntityKind], with: &dyn Fn(NodeIndex) -> bool| {
            of(&|ix| kinds.contains(kind(ix)) && with(ix))
        };
        let blocks_and_domains = [EntityKind::AggBlock, EntityKind::ControlDomain];
        let ranked_apart = |ix: NodeIndex| {
            let ranked = ops::rank(&base, ix);
            ranked.first().map(|(_, c)| *c) != ranked.last().map(|(_, c)| *c)
        };
        let mut rank = of_kinds(&blocks_and_domains, &|ix| has_contains(ix) && ranked_apart(ix));
        if rank.is_empty() {
            rank = of_kinds(&blocks_and_domains, &has_contains);
        }
        let netpress = NetPressTargets {
            count: of_kinds(&blocks_and_domains, &|ix| base.children(ix).any(|(r, _)| r.is_hierarchy())),
            list: [
                EntityKind::AggBlock,
                EntityKind::ControlDomain,
                EntityKind::Rack,
                EntityKind::PacketSwitch,
            ]
            .into_iter()
            .map(|k| of_kinds(&[k], &has_contains))
            .filter(|v| !v.is_empty())
            .collect(),
            rank,
        };
        let mut setup = source.describe();
        // The environment refuses a task whose base graph differs from its own.
        if let Some(m) = setup.as_object_mut() {
            m.insert("base_digest".into(), Value::String(base.digest_hex()));
        }
        Self {
            base,
            source,
            setup,
            pool: Mutex::new(Vec::new()),
            ports,
            switches,
            blocks,
            containers,
            listable,
            targets: Targets::default(),
            netpress,
        }
    }

    /// The same generator drawing its targets the other way.
    pub fn with_targets(mut self, targets: Targets) -> Self {
        self.targets = targets;
        self
    }

    /// The base graph.
    pub fn graph(&self) -> &Arc<Graph> {
        &self.base
    }

    fn take_scratch(&self) -> Graph {
        let popped = self.pool.lock().ok().and_then(|mut p| p.pop());
        popped.unwrap_or_else(|| (*self.base).clone())
    }

    fn give_back(&self, g: Graph) {
        if let Ok(mut p) = self.pool.lock() {
            p.push(g);
        }
    }

    fn pick<'a>(
        &self,
        rng: &mut ChaCha8Rng,
        from: &'a [NodeIndex],
        what: &str,
    ) -> Result<&'a NodeIndex, TaskError> {
        from.choose(rng).ok_or_else(|| TaskError::Generate {
            generator: "dcgraph".into(),
            message: format!("the graph has no {what}"),
        })
    }

    fn key(&self, ix: NodeIndex) -> (EntityKind, String) {
        let n = self.base.node(ix);
        (n.kind.clone(), n.name.clone())
    }

    /// The change before a query. `forced`: the node a `remove` removes, when the query
    /// chose it.
    fn mutate(
        &self,
        g: &mut Graph,
        j: &mut Journal,
        rng: &mut ChaCha8Rng,
        op: &str,
        forced: Option<(EntityKind, String)>,
    ) -> Result<Mutation, TaskError> {
        let gen_err = |m: String| TaskError::Generate { generator: "dcgraph".into(), message: m };
        let find = |g: &Graph, k: &(EntityKind, String)| {
            g.get(&k.0, &k.1).ok_or_else(|| gen_err(format!("{} `{}` missing from scratch graph", k.0, k.1)))
        };
        let label = |k: &EntityKind| self.base.kind_label(k).to_string();
        match op {
            "update" => {
                let port = self.key(*self.pick(rng, &self.ports, "port")?);
                let ix = find(g, &port)?;
                let cur = g.node(ix).capacity();
                let choices: Vec<u64> = CAPACITIES.iter().copied().filter(|c| *c != cur).collect();
                let cap = *choices.choose(rng).unwrap_or(&CAPACITIES[0]);
                ops::update(g, j, ix, CAPACITY_ATTR, cap.into());
                Ok(Mutation {
                    text: format!("Update the {CAPACITY_ATTR} of EK_PORT `{}` to {cap}.", port.1),
                    actions: vec![ToolCall::new(
                        "update_node",
                        json!({"name": port.1, "kind": "EK_PORT", "attribute": CAPACITY_ATTR, "value": cap}),
                    )],
                    parent: port,
                    switch: false,
                })
            }
            "add" => {
                let cap = *CAPACITIES.choose(rng).unwrap_or(&CAPACITIES[0]);
                if rng.random_bool(0.5) {
                    let parent = self.key(*self.pick(rng, &self.blocks, "agg or spine block")?);
                    let pix = find(g, &parent)?;
                    let stages: [u64; 2] = if parent.0 == EntityKind::SpineBlock { [1, 2] } else { [2, 3] };
                    let stage = stages[rng.random_range(0..2)];
                    let mut c = rng.random_range(9..100u32);
                    let name = loop {
                        let n = format!("{}.s{stage}c{c}", parent.1);
                        if g.get(&EntityKind::PacketSwitch, &n).is_none()
                            && g.get(&EntityKind::Port, &format!("{n}.p1")).is_none()
                        {
                            break n;
                        }
                        c += 1;
                    };
                    ops::add(g, j, pix, EntityKind::PacketSwitch, &name, stage, cap)
                        .map_err(|e| gen_err(e.to_string()))?;
                    let pk = label(&parent.0);
                    let port = format!("{name}.p1");
                    Ok(Mutation {
                        text: format!(
                            "Add a new EK_PACKET_SWITCH `{name}` (switch_loc.stage {stage}) to {pk} `{}`, which RK_CONTAINS it; \
give it one EK_PORT `{port}` with {CAPACITY_ATTR} {cap}, contained by the new switch.",
                            parent.1
                        ),
                        actions: batch(vec![
                            ToolCall::new(
                                "add_node",
                                json!({"name": name, "kind": "EK_PACKET_SWITCH", "attributes": {"switch_loc.stage": stage}}),
                            ),
                            ToolCall::new(
                                "add_edge",
                                json!({"from": parent.1, "from_kind": pk, "to": name, "to_kind": "EK_PACKET_SWITCH", "relation": "RK_CONTAINS"}),
                            ),
                            ToolCall::new(
                                "add_node",
                                json!({"name": port, "kind": "EK_PORT", "attributes": {CAPACITY_ATTR: cap}}),
                            ),
                            ToolCall::new(
                                "add_edge",
                                json!({"from": name, "from_kind": "EK_PACKET_SWITCH", "to": port, "to_kind": "EK_PORT", "relation": "RK_CONTAINS"}),
                            ),
                        ]),
                        parent,
                        switch: true,
                    })
                } else {
                    let parent = self.key(*self.pick(rng, &self.switches, "packet switch")?);
                    let pix = find(g, &parent)?;
                    let mut p = g.children(pix).filter(|(r, _)| **r == Relation::Contains).count() + 1;
                    let name = loop {
                        let n = format!("{}.p{p}", parent.1);
                        if g.get(&EntityKind::Port, &n).is_none() {
                            break n;
                        }
                        p += 1;
                    };
                    ops::add(g, j, pix, EntityKind::Port, &name, 0, cap)
                        .map_err(|e| gen_err(e.to_string()))?;
                    Ok(Mutation {
                        text: format!(
                            "Add a new EK_PORT `{name}` with {CAPACITY_ATTR} {cap} to EK_PACKET_SWITCH `{}`, which RK_CONTAINS it.",
                            parent.1
                        ),
                        actions: batch(vec![
                            ToolCall::new(
                                "add_node",
                                json!({"name": name, "kind": "EK_PORT", "attributes": {CAPACITY_ATTR: cap}}),
                            ),
                            ToolCall::new(
                                "add_edge",
                                json!({"from": parent.1, "from_kind": "EK_PACKET_SWITCH", "to": name, "to_kind": "EK_PORT", "relation": "RK_CONTAINS"}),
                            ),
                        ]),
                        parent,
                        switch: false,
                    })
                }
            }
            _ => {
                // remove
                let (switch, target) = match forced {
                    Some(t) => (t.0 == EntityKind::PacketSwitch, t),
                    None if rng.random_bool(0.6) => {
                        (true, self.key(*self.pick(rng, &self.switches, "packet switch")?))
                    }
                    None => (false, self.key(*self.pick(rng, &self.ports, "port")?)),
                };
                let tix = find(g, &target)?;
                let want = if switch {
                    [EntityKind::AggBlock, EntityKind::SpineBlock]
                } else {
                    [EntityKind::PacketSwitch, EntityKind::PacketSwitch]
                };
                let parent = g
                    .parents(tix)
                    .filter(|(r, p)| **r == Relation::Contains && want.contains(&g.node(*p).kind))
                    .map(|(_, p)| (g.node(p).kind.clone(), g.node(p).name.clone()))
                    .min()
                    .ok_or_else(|| gen_err(format!("`{}` has no parent block", target.1)))?;
                let removed = ops::remove(g, j, tix);
                let actions = batch(
                    removed
                        .iter()
                        .map(|(k, n)| ToolCall::new("remove_node", json!({"name": n, "kind": label(k)})))
                        .collect(),
                );
                let text = if switch {
                    format!(
                        "Remove EK_PACKET_SWITCH `{}` together with the EK_PORT nodes it contains.",
                        target.1
                    )
                } else {
                    format!("Remove EK_PORT `{}`.", target.1)
                };
                Ok(Mutation { text, actions, parent, switch })
            }
        }
    }

    fn build(
        &self,
        g: &mut Graph,
        j: &mut Journal,
        rng: &mut ChaCha8Rng,
        label: &str,
    ) -> Result<(String, Vec<ToolCall>, Option<Value>), TaskError> {
        let (first, query) = match label.split_once('-') {
            Some((m, q)) => (Some(m), q),
            None if matches!(label, "update" | "add" | "remove") => (Some(label), ""),
            None => (None, label),
        };
        let mut text = String::new();
        let mut actions = Vec::new();
        let mut target = None;
        let mut switch = false;
        // NetPress's draw for remove-rank: the rank is about a block or domain whose children
        // differ, and the port removed lies below it (the parent of a removed port is its
        // switch, whose other ports all tie).
        let ranked = match (self.targets, first, query) {
            (Targets::NetPress, Some("remove"), "rank") => {
                let t = *self.pick(rng, &self.netpress.rank, "block with children")?;
                let mut ports = Vec::new();
                self.base.for_each_descendant(t, |n| {
                    if n.kind == EntityKind::Port {
                        ports.push(n.name.clone());
                    }
                });
                ports.sort();
                let port = ports.choose(rng).cloned().ok_or_else(|| TaskError::Generate {
                    generator: "dcgraph".into(),
                    message: format!("`{}` has no port below it", self.base.node(t).name),
                })?;
                Some((self.key(t), (EntityKind::Port, port)))
            }
            _ => None,
        };
        if let Some(op) = first {
            let m = self.mutate(g, j, rng, op, ranked.as_ref().map(|(_, port)| port.clone()))?;
            text = m.text;
            actions = m.actions;
            target = Some(ranked.map_or(m.parent, |(t, _)| t));
            switch = m.switch;
        }
        if query.is_empty() {
            return Ok((text, actions, None));
        }
        let target = match target {
            Some(t) => t,
            None => {
                let np = &self.netpress;
                let from: &[NodeIndex] = match (self.targets, query) {
                    (Targets::Uniform, "count") => &self.containers,
                    (Targets::Uniform, _) => &self.listable,
                    (Targets::NetPress, "count") => &np.count,
                    (Targets::NetPress, "list") => np.list.choose(rng).map_or(&[][..], Vec::as_slice),
                    (Targets::NetPress, _) => &np.rank,
                };
                self.key(*self.pick(rng, from, "node with children")?)
            }
        };
        let ix = g.get(&target.0, &target.1).ok_or_else(|| TaskError::Generate {
            generator: "dcgraph".into(),
            message: format!("`{}` missing from the scratch graph", target.1),
        })?;
        let pk = g.kind_label(&target.0).to_string();
        let sep = if text.is_empty() { "" } else { " Then, in the updated graph: " };
        let args = json!({"name": target.1, "kind": pk});
        let answer = match query {
            "count" => {
                let kind = if first.is_some() {
                    if switch && rng.random_bool(0.5) { EntityKind::PacketSwitch } else { EntityKind::Port }
                } else {
                    let mut counts = std::collections::BTreeMap::new();
                    g.for_each_descendant(ix, |n| *counts.entry(n.kind.clone()).or_insert(0u64) += 1);
                    let kinds: Vec<&EntityKind> = counts.keys().collect();
                    (*kinds.choose(rng).unwrap_or(&&EntityKind::Port)).clone()
                };
                let dk = g.kind_label(&kind).to_string();
                text.push_str(&format!(
                    "{sep}Count the {dk} nodes below {pk} `{}` (at every level, following RK_CONTAINS and RK_CONTROLS edges, each node once).",
                    target.1
                ));
                actions.push(ToolCall::new(
                    "count_descendants",
                    json!({"name": target.1, "kind": pk, "descendant_kind": dk}),
                ));
                json!(ops::count(g, ix, &kind))
            }
            "list" => {
                text.push_str(&format!(
                    "{sep}List the names of the direct children (RK_CONTAINS) of {pk} `{}`.",
                    target.1
                ));
                actions.push(ToolCall::new("list_children", args));
                json!(ops::list(g, ix))
            }
            _ => {
                text.push_str(&format!(
                    "{sep}Rank the direct children (RK_CONTAINS) of {pk} `{}` by total capacity, highest first.",
                    target.1
                ));
                actions.push(ToolCall::new("list_children", args));
                let ranked: Vec<Value> = ops::rank(g, ix)
                    .into_iter()
                    .map(|(n, c)| json!({"name": n, "capacity_bps": c}))
                    .collect();
                Value::Array(ranked)
            }
        };
        Ok((text, actions, Some(answer)))
    }
}

impl TaskGenerator for QueryGenerator {
    fn name(&self) -> &str {
        "dcgraph"
    }

    fn params(&self) -> Value {
        json!({"source": self.source.describe(), "labels": LABELS.iter().map(|l| l.0).collect::<Vec<_>>(), "targets": self.targets.name()})
    }

    fn generate(&self, seed: u64, index: u64) -> Result<Task, TaskError> {
        let mut rng = ChaCha8Rng::seed_from_u64(task_seed(seed, index));
        let (label, level) = LABELS[(index % LABELS.len() as u64) as usize];
        let mut g = self.take_scratch();
        let mut j = Journal::new();
        let built = self.build(&mut g, &mut j, &mut rng, label);
        let goal = json!({"digest": g.digest_hex(), "nodes": g.node_count(), "edges": g.edge_count()});
        j.undo(&mut g);
        if g.digest() == self.base.digest() && g.node_count() == self.base.node_count() {
            self.give_back(g);
        }
        let (query, actions, answer) = built?;
        Ok(Task {
            id: format!("dcgraph-s{seed}-{index:07}"),
            application: "dcgraph".into(),
            level,
            label: label.into(),
            domain: None,
            seed: Some(seed),
            query,
            setup: self.setup.clone(),
            kind: TaskKind::Constructive { actions, answer, goal: Some(goal) },
        })
    }
}
