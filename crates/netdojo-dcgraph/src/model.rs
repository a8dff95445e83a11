//! The datacenter model: entity kinds, relation kinds and the graph that holds them.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use petgraph::Direction;
use petgraph::stable_graph::{EdgeIndex, NodeIndex, StableDiGraph};
use petgraph::visit::{EdgeRef, IntoEdgeReferences, VisitMap, Visitable};
use serde_json::Value;

/// The kind of an entity (`EK_*` in MALT).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityKind {
    Jupiter,
    SuperBlock,
    SpineBlock,
    AggBlock,
    Rack,
    Chassis,
    ControlDomain,
    ControlPoint,
    PacketSwitch,
    Port,
    /// A well-formed `EK_*` string the model does not know; kept so that an unsafe mutation
    /// can be represented and then flagged by the safety check.
    Other(String),
}

impl EntityKind {
    /// The ten kinds of the MALT model, from the top of the hierarchy down.
    pub const KNOWN: [EntityKind; 10] = [
        EntityKind::Jupiter,
        EntityKind::SuperBlock,
        EntityKind::SpineBlock,
        EntityKind::AggBlock,
        EntityKind::Rack,
        EntityKind::Chassis,
        EntityKind::ControlDomain,
        EntityKind::ControlPoint,
        EntityKind::PacketSwitch,
        EntityKind::Port,
    ];

    /// Parses `EK_*`, accepting both `EK_SUPERBLOCK` and `EK_SUPER_BLOCK` (and the same for
    /// spine blocks). `None` when the string is not of the form `^EK_[A-Z_]+$`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "EK_JUPITER" => Self::Jupiter,
            "EK_SUPERBLOCK" | "EK_SUPER_BLOCK" => Self::SuperBlock,
            "EK_SPINEBLOCK" | "EK_SPINE_BLOCK" => Self::SpineBlock,
            "EK_AGG_BLOCK" => Self::AggBlock,
            "EK_RACK" => Self::Rack,
            "EK_CHASSIS" => Self::Chassis,
            "EK_CONTROL_DOMAIN" => Self::ControlDomain,
            "EK_CONTROL_POINT" => Self::ControlPoint,
            "EK_PACKET_SWITCH" => Self::PacketSwitch,
            "EK_PORT" => Self::Port,
            other if is_token(other, "EK_") => Self::Other(other.to_string()),
            _ => return None,
        })
    }

    /// The canonical spelling (the MALT file's: `EK_SUPERBLOCK`, `EK_SPINEBLOCK`).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Jupiter => "EK_JUPITER",
            Self::SuperBlock => "EK_SUPERBLOCK",
            Self::SpineBlock => "EK_SPINEBLOCK",
            Self::AggBlock => "EK_AGG_BLOCK",
            Self::Rack => "EK_RACK",
            Self::Chassis => "EK_CHASSIS",
            Self::ControlDomain => "EK_CONTROL_DOMAIN",
            Self::ControlPoint => "EK_CONTROL_POINT",
            Self::PacketSwitch => "EK_PACKET_SWITCH",
            Self::Port => "EK_PORT",
            Self::Other(s) => s,
        }
    }

    /// The attribute message name of this kind in MALT (`port_attr`...).
    pub fn attr_message(&self) -> Option<&'static str> {
        Some(match self {
            Self::Jupiter => "jupiter_attr",
            Self::SuperBlock => "superblock_attr",
            Self::SpineBlock => "spineblock_attr",
            Self::AggBlock => "agg_block_attr",
            Self::Rack => "rack_attr",
            Self::Chassis => "chassis_attr",
            Self::ControlDomain => "control_domain_attr",
            Self::ControlPoint => "control_point_attr",
            Self::PacketSwitch => "packet_switch_attr",
            Self::Port => "port_attr",
            Self::Other(_) => return None,
        })
    }
}

impl fmt::Display for EntityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `^PREFIX[A-Z_]+$`
pub(crate) fn is_token(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
}

/// The kind of a relationship (`RK_*`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Relation {
    Contains,
    Controls,
    /// A well-formed `RK_*` the model does not know (flagged by the safety check).
    Other(String),
}

impl Relation {
    /// Parses `RK_*`; `None` when not of the form `^RK_[A-Z_]+$`. `RK_CONTROL` (the paper's
    /// prompt spelling) is read as `RK_CONTROLS`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "RK_CONTAINS" => Self::Contains,
            "RK_CONTROLS" | "RK_CONTROL" => Self::Controls,
            other if is_token(other, "RK_") => Self::Other(other.to_string()),
            _ => return None,
        })
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Contains => "RK_CONTAINS",
            Self::Controls => "RK_CONTROLS",
            Self::Other(s) => s,
        }
    }

    /// Whether the edge belongs to the hierarchy that capacity and counts descend.
    pub fn is_hierarchy(&self) -> bool {
        matches!(self, Self::Contains | Self::Controls)
    }
}

impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Attribute path (`physical_capacity_bps`, `switch_loc.stage`) → value.
pub type Attrs = BTreeMap<String, Value>;

/// The attribute holding a port's capacity.
pub const CAPACITY_ATTR: &str = "physical_capacity_bps";

/// One entity.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub kind: EntityKind,
    pub name: String,
    pub attrs: Attrs,
}

impl Node {
    /// The port capacity, when this is a port with a numeric capacity.
    pub fn capacity(&self) -> u64 {
        if self.kind != EntityKind::Port {
            return 0;
        }
        self.attrs
            .get(CAPACITY_ATTR)
            .map_or(0, |v| v.as_u64().unwrap_or_else(|| v.as_f64().unwrap_or(0.0) as u64))
    }
}

/// A refused lookup or mutation, in words an agent can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error("no node named `{0}`")]
    NotFound(String),
    #[error("no {kind} named `{name}` (that name is used by: {others})")]
    WrongKind { name: String, kind: String, others: String },
    #[error("the name `{name}` is shared by several nodes ({kinds}); give its kind")]
    Ambiguous { name: String, kinds: String },
    #[error("a {kind} named `{name}` already exists")]
    Duplicate { kind: String, name: String },
    #[error("node names must not be empty")]
    EmptyName,
    #[error("{0}")]
    Edge(String),
}

/// FNV-1a, 64 bits: stable across Rust releases and machines, unlike `DefaultHasher`.
#[derive(Debug, Clone, Copy)]
pub struct Fnv(u64);

impl Fnv {
    pub fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    pub fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    /// Writes a field and a separator, so that ("ab","c") and ("a","bc") differ.
    pub fn field(&mut self, s: &str) {
        self.write(s.as_bytes());
        self.write(&[0]);
    }
    pub fn finish(self) -> u64 {
        self.0
    }
}

impl std::fmt::Write for Fnv {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.write(s.as_bytes());
        Ok(())
    }
}

impl Default for Fnv {
    fn default() -> Self {
        Self::new()
    }
}

fn node_hash(kind: &EntityKind, name: &str, attrs: &Attrs) -> u64 {
    let mut h = Fnv::new();
    h.field("N");
    h.field(kind.as_str());
    h.field(name);
    for (k, v) in attrs {
        h.field(k);
        // Hash the JSON text without building a String (hot in query generation).
        let _ = std::fmt::Write::write_fmt(&mut h, format_args!("{v}"));
        h.write(&[0]);
    }
    h.finish()
}

fn edge_hash(a: &Node, rel: &Relation, z: &Node) -> u64 {
    let mut h = Fnv::new();
    h.field("E");
    h.field(a.kind.as_str());
    h.field(&a.name);
    h.field(rel.as_str());
    h.field(z.kind.as_str());
    h.field(&z.name);
    h.finish()
}

/// The datacenter graph: nodes identified by (kind, name), since in MALT a chassis, its
/// control point and its packet switch share one name. Keeps an order-independent digest
/// (wrapping sum of FNV-1a hashes of node and edge records) up to date on every mutation.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    g: StableDiGraph<Node, Relation>,
    names: HashMap<String, Vec<NodeIndex>>,
    digest: u64,
    /// Whether the source spelled EK_SUPER_BLOCK / EK_SPINE_BLOCK with the underscore.
    underscore_blocks: bool,
}

impl Graph {
    pub fn new() -> Self {
        Self::default()
    }

    /// Prints kinds the way the source file spelled them (`EK_SUPER_BLOCK` or `EK_SUPERBLOCK`).
    pub fn set_underscore_spelling(&mut self, yes: bool) {
        self.underscore_blocks = yes;
    }

    /// A kind as this graph's source spells it.
    pub fn kind_label<'a>(&self, kind: &'a EntityKind) -> &'a str {
        match (kind, self.underscore_blocks) {
            (EntityKind::SuperBlock, true) => "EK_SUPER_BLOCK",
            (EntityKind::SpineBlock, true) => "EK_SPINE_BLOCK",
            _ => kind.as_str(),
        }
    }

    pub fn node_count(&self) -> usize {
        self.g.node_count()
    }

    pub fn edge_count(&self) -> usize {
        self.g.edge_count()
    }

    /// The order-independent digest of all node and edge records.
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// The digest as the 16 hex digits tasks store.
    pub fn digest_hex(&self) -> String {
        format!("{:016x}", self.digest)
    }

    pub fn node(&self, ix: NodeIndex) -> &Node {
        &self.g[ix]
    }

    /// All node indices.
    pub fn node_indices(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        self.g.node_indices()
    }

    /// Every edge as (from, relation, to).
    pub fn edges(&self) -> impl Iterator<Item = (NodeIndex, &Relation, NodeIndex)> + '_ {
        (&self.g).edge_references().map(|e| (e.source(), e.weight(), e.target()))
    }

    /// The node with this kind and name, if any.
    pub fn get(&self, kind: &EntityKind, name: &str) -> Option<NodeIndex> {
        self.names.get(name)?.iter().copied().find(|ix| &self.g[*ix].kind == kind)
    }

    /// Looks a node up by name, and kind when given. A name shared by several kinds needs
    /// the kind.
    pub fn find(&self, name: &str, kind: Option<&EntityKind>) -> Result<NodeIndex, GraphError> {
        let ixs = self
            .names
            .get(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| GraphError::NotFound(name.into()))?;
        let kinds = || {
            let mut k: Vec<&str> = ixs.iter().map(|ix| self.kind_label(&self.g[*ix].kind)).collect();
            k.sort_unstable();
            k.join(", ")
        };
        match kind {
            Some(kind) => self.get(kind, name).ok_or_else(|| GraphError::WrongKind {
                name: name.into(),
                kind: self.kind_label(kind).into(),
                others: kinds(),
            }),
            None if ixs.len() == 1 => Ok(ixs[0]),
            None => Err(GraphError::Ambiguous { name: name.into(), kinds: kinds() }),
        }
    }

    /// Adds a node; refuses an empty name or a (kind, name) already present.
    pub fn add_node(&mut self, kind: EntityKind, name: &str, attrs: Attrs) -> Result<NodeIndex, GraphError> {
        if name.is_empty() {
            return Err(GraphError::EmptyName);
        }
        if self.get(&kind, name).is_some() {
            return Err(GraphError::Duplicate { kind: self.kind_label(&kind).into(), name: name.into() });
        }
        self.digest = self.digest.wrapping_add(node_hash(&kind, name, &attrs));
        let ix = self.g.add_node(Node { kind, name: name.to_string(), attrs });
        self.names.entry(name.to_string()).or_default().push(ix);
        Ok(ix)
    }

    /// Adds an edge; refuses a duplicate (same ends, same relation).
    pub fn add_edge(&mut self, a: NodeIndex, z: NodeIndex, rel: Relation) -> Result<EdgeIndex, GraphError> {
        if self.find_edge(a, z, &rel).is_some() {
            return Err(GraphError::Edge(format!(
                "{} `{}` already {} {} `{}`",
                self.kind_label(&self.g[a].kind),
                self.g[a].name,
                rel,
                self.kind_label(&self.g[z].kind),
                self.g[z].name
            )));
        }
        self.digest = self.digest.wrapping_add(edge_hash(&self.g[a], &rel, &self.g[z]));
        Ok(self.g.add_edge(a, z, rel))
    }

    /// The edge a → z of this relation.
    pub fn find_edge(&self, a: NodeIndex, z: NodeIndex, rel: &Relation) -> Option<EdgeIndex> {
        self.g.edges_connecting(a, z).find(|e| e.weight() == rel).map(|e| e.id())
    }

    pub fn remove_edge(&mut self, e: EdgeIndex) -> Option<Relation> {
        let (a, z) = self.g.edge_endpoints(e)?;
        let rel = self.g.remove_edge(e)?;
        self.digest = self.digest.wrapping_sub(edge_hash(&self.g[a], &rel, &self.g[z]));
        Some(rel)
    }

    /// Removes a node and its edges; returns it with the edges it had (from, relation, to).
    pub fn remove_node(&mut self, ix: NodeIndex) -> Option<RemovedNode> {
        let node = self.g.node_weight(ix)?;
        let mut edges = Vec::new();
        for dir in [Direction::Outgoing, Direction::Incoming] {
            for e in self.g.edges_directed(ix, dir) {
                let (a, z) = (&self.g[e.source()], &self.g[e.target()]);
                self.digest = self.digest.wrapping_sub(edge_hash(a, e.weight(), z));
                // A self-loop is seen in both directions; keep it once.
                if dir == Direction::Incoming && e.source() == ix {
                    self.digest = self.digest.wrapping_add(edge_hash(a, e.weight(), z));
                    continue;
                }
                edges.push((
                    (a.kind.clone(), a.name.clone()),
                    e.weight().clone(),
                    (z.kind.clone(), z.name.clone()),
                ));
            }
        }
        self.digest = self.digest.wrapping_sub(node_hash(&node.kind, &node.name, &node.attrs));
        let node = self.g.remove_node(ix)?;
        if let Some(v) = self.names.get_mut(&node.name) {
            v.retain(|i| *i != ix);
            if v.is_empty() {
                self.names.remove(&node.name);
            }
        }
        Some(RemovedNode { node, edges })
    }

    /// Sets (or, with `None`, deletes) an attribute; returns the old value.
    pub fn set_attr(&mut self, ix: NodeIndex, key: &str, value: Option<Value>) -> Option<Value> {
        let node = &mut self.g[ix];
        self.digest = self.digest.wrapping_sub(node_hash(&node.kind, &node.name, &node.attrs));
        let old = match value {
            Some(v) => node.attrs.insert(key.to_string(), v),
            None => node.attrs.remove(key),
        };
        self.digest = self.digest.wrapping_add(node_hash(&node.kind, &node.name, &node.attrs));
        old
    }

    /// Outgoing edges (relation, child).
    pub fn children(&self, ix: NodeIndex) -> impl Iterator<Item = (&Relation, NodeIndex)> + '_ {
        self.g.edges_directed(ix, Direction::Outgoing).map(|e| (e.weight(), e.target()))
    }

    /// Incoming edges (relation, parent).
    pub fn parents(&self, ix: NodeIndex) -> impl Iterator<Item = (&Relation, NodeIndex)> + '_ {
        self.g.edges_directed(ix, Direction::Incoming).map(|e| (e.weight(), e.source()))
    }

    /// Calls `f` on every node strictly below `ix` in the hierarchy (RK_CONTAINS and
    /// RK_CONTROLS edges), each once even when reachable by two paths.
    pub fn for_each_descendant(&self, ix: NodeIndex, mut f: impl FnMut(&Node)) {
        let mut seen = self.g.visit_map();
        seen.visit(ix);
        let mut stack = vec![ix];
        while let Some(n) = stack.pop() {
            for (rel, c) in self.children(n) {
                if rel.is_hierarchy() && seen.visit(c) {
                    f(&self.g[c]);
                    stack.push(c);
                }
            }
        }
    }

    /// The number of nodes of `kind` below `ix` in the hierarchy.
    pub fn count_descendants(&self, ix: NodeIndex, kind: &EntityKind) -> u64 {
        let mut n = 0;
        self.for_each_descendant(ix, |node| n += u64::from(&node.kind == kind));
        n
    }

    /// Total capacity of `ix`: the sum of `physical_capacity_bps` over the ports in its
    /// hierarchy (itself included when it is a port).
    pub fn capacity(&self, ix: NodeIndex) -> u64 {
        let mut total = self.g[ix].capacity();
        self.for_each_descendant(ix, |node| total = total.saturating_add(node.capacity()));
        total
    }

    /// The names as NetPress/networkx saw them: one node per name, one edge per ordered pair
    /// of names. Returns (nodes, edges).
    pub fn merged_view(&self) -> MergedView {
        let mut pairs = std::collections::HashSet::new();
        for (a, _, z) in self.edges() {
            pairs.insert((self.g[a].name.as_str(), self.g[z].name.as_str()));
        }
        MergedView { nodes: self.names.len(), edges: pairs.len() }
    }
}

/// Sizes of the name-keyed view of a graph (see [`Graph::merged_view`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergedView {
    pub nodes: usize,
    pub edges: usize,
}

/// A node taken out of a graph, with its edges, so it can be put back.
#[derive(Debug, Clone)]
pub struct RemovedNode {
    pub node: Node,
    /// (from (kind, name), relation, to (kind, name)).
    pub edges: Vec<EdgeRecord>,
}

/// An edge by the (kind, name) of its ends.
pub type EdgeRecord = ((EntityKind, String), Relation, (EntityKind, String));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_both_spellings_and_keep_the_sources() {
        assert_eq!(EntityKind::parse("EK_SUPER_BLOCK"), Some(EntityKind::SuperBlock));
        assert_eq!(EntityKind::parse("EK_SPINEBLOCK"), Some(EntityKind::SpineBlock));
        assert_eq!(EntityKind::parse("EK_TOASTER"), Some(EntityKind::Other("EK_TOASTER".into())));
        assert_eq!(EntityKind::parse("EK_"), None);
        assert_eq!(EntityKind::parse("ek_port"), None);
        assert_eq!(Relation::parse("RK_CONTROL"), Some(Relation::Controls));
        assert_eq!(Relation::parse("contains"), None);
        let mut g = Graph::new();
        assert_eq!(g.kind_label(&EntityKind::SuperBlock), "EK_SUPERBLOCK");
        g.set_underscore_spelling(true);
        assert_eq!(g.kind_label(&EntityKind::SuperBlock), "EK_SUPER_BLOCK");
    }

    #[test]
    fn digest_is_order_independent_and_tracks_every_change() {
        let build = |order: &[usize]| {
            let mut g = Graph::new();
            let names = ["a", "b", "c"];
            for &i in order {
                g.add_node(EntityKind::Rack, names[i], Attrs::new()).expect("add");
            }
            let (a, b) = (g.find("a", None).expect("a"), g.find("b", None).expect("b"));
            g.add_edge(a, b, Relation::Contains).expect("edge");
            g
        };
        let g1 = build(&[0, 1, 2]);
        let mut g2 = build(&[2, 1, 0]);
        assert_eq!(g1.digest(), g2.digest());
        let c = g2.find("c", None).expect("c");
        g2.set_attr(c, "x", Some(1.into()));
        assert_ne!(g1.digest(), g2.digest());
        g2.set_attr(c, "x", None);
        assert_eq!(g1.digest(), g2.digest());
        let b = g2.find("b", None).expect("b");
        let removed = g2.remove_node(b).expect("b");
        assert_eq!(removed.edges.len(), 1);
        assert_ne!(g1.digest(), g2.digest());
        assert!(matches!(
            g2.add_node(EntityKind::Rack, "a", Attrs::new()),
            Err(GraphError::Duplicate { .. })
        ));
        assert!(matches!(g2.add_node(EntityKind::Rack, "", Attrs::new()), Err(GraphError::EmptyName)));
    }
}
