//! The graph as NetPress's code sees it: networkx node-link data, and back.
//!
//! NetPress (`solid_step_helper.getGraphData`) loads MALT into a `networkx.DiGraph` keyed by
//! name: one node per name, whose `type` is the list of the kinds that share it (a chassis, its
//! control point and its packet switch), with `name` and the fields of each kind's `<kind>_attr`
//! message as attributes (`physical_capacity_bps`, `switch_loc: {stage: ..}`), and one edge per
//! ordered pair of names whose `type` is the relation kind (the last one loaded wins when two
//! entities of the same names are related twice). [`Keying::Name`] reproduces that;
//! [`Keying::KindName`] gives each (kind, name) its own node (id `KIND/name`, `type` a list of
//! one kind), so nothing is merged.
//!
//! What a model's code returns is compared in this form ([`Canonical`]): nodes by name, sorted
//! `type` and attributes; edges by their ends' names and kinds and their `type`. For the safety
//! check a returned graph is read back into a [`Graph`] ([`to_graph`]): each name-keyed node
//! becomes one node per kind it lists, and each edge every (kind, kind) pair of its ends that
//! the hierarchy allows (or, when none does, the first kinds, which the check then flags).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::model::{Attrs, EntityKind, Graph, Relation};
use crate::safety;

/// How nodes are keyed in the networkx graph handed to the code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Keying {
    /// NetPress's: one node per name (kinds that share a name are merged).
    #[default]
    Name,
    /// netdojo's: one node per (kind, name), id `KIND/name`.
    KindName,
}

impl Keying {
    pub fn name(self) -> &'static str {
        match self {
            Keying::Name => "name",
            Keying::KindName => "kind-name",
        }
    }
}

impl fmt::Display for Keying {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Keying {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "name" => Ok(Keying::Name),
            "kind-name" => Ok(Keying::KindName),
            other => Err(format!("unknown graph keying `{other}` (known: name, kind-name)")),
        }
    }
}

/// `switch_loc.stage = 2` → `{"switch_loc": {"stage": 2}}`, into `out`.
fn nest(attrs: &Attrs, out: &mut Map<String, Value>) {
    for (path, value) in attrs {
        let mut parts: Vec<&str> = path.split('.').collect();
        let Some(last) = parts.pop() else { continue };
        let mut at = &mut *out;
        for part in parts {
            let slot = at.entry(part.to_string()).or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            let Value::Object(inner) = slot else { unreachable!("made an object above") };
            at = inner;
        }
        at.insert(last.to_string(), value.clone());
    }
}

/// The node-link data of `g` as networkx's `node_link_data` writes it (`links`).
pub fn node_link(g: &Graph, keying: Keying) -> Value {
    let label = |kind: &EntityKind| g.kind_label(kind).to_string();
    let id = |ix| {
        let n = g.node(ix);
        match keying {
            Keying::Name => n.name.clone(),
            Keying::KindName => format!("{}/{}", label(&n.kind), n.name),
        }
    };
    // Nodes in load order; a name seen again adds its kind and attributes to the first node.
    let mut order: Vec<String> = Vec::new();
    let mut nodes: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for ix in g.node_indices() {
        let n = g.node(ix);
        let key = id(ix);
        let node = nodes.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            let mut m = Map::new();
            m.insert("type".into(), Value::Array(vec![]));
            m.insert("name".into(), Value::String(n.name.clone()));
            m
        });
        if let Some(Value::Array(kinds)) = node.get_mut("type") {
            kinds.push(Value::String(label(&n.kind)));
        }
        nest(&n.attrs, node);
    }
    let nodes: Vec<Value> = order
        .into_iter()
        .filter_map(|key| {
            let mut m = nodes.remove(&key)?;
            m.insert("id".into(), Value::String(key));
            Some(Value::Object(m))
        })
        .collect();
    // One edge per ordered pair of ids, the last one loaded winning (networkx's add_edge).
    let mut links: Vec<(String, String, String)> = Vec::new();
    let mut at: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (a, rel, z) in g.edges() {
        let pair = (id(a), id(z));
        match at.get(&pair) {
            Some(&i) => links[i].2 = rel.as_str().to_string(),
            None => {
                at.insert(pair.clone(), links.len());
                links.push((pair.0, pair.1, rel.as_str().to_string()));
            }
        }
    }
    let links: Vec<Value> =
        links.into_iter().map(|(s, t, ty)| json!({"type": ty, "source": s, "target": t})).collect();
    json!({"directed": true, "multigraph": false, "graph": {}, "nodes": nodes, "links": links})
}

/// A returned graph that cannot be read as node-link data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the returned graph is not networkx node-link data: {0}")]
pub struct BadGraph(pub String);

/// One node of node-link data, normalised: its name, kinds (sorted) and other attributes.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    name: String,
    kinds: Vec<String>,
    attrs: Map<String, Value>,
}

/// Integral floats as integers (Python's `1000 == 1000.0`), in nested values too.
fn normalise(v: &Value) -> Value {
    match v {
        Value::Number(n) if n.as_i64().is_none() && n.as_u64().is_none() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => json!(f as i64),
            _ => v.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(normalise).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), normalise(v))).collect()),
        other => other.clone(),
    }
}

/// The value with every object's keys in order, so that its text does not depend on the
/// order the code inserted them in.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let keys: BTreeMap<&String, Value> = m.iter().map(|(k, v)| (k, sorted(v))).collect();
            Value::Object(keys.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// `"EK_PORT"` or `["EK_PORT"]` (or any list of strings) as a list of strings.
fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => {
            items.iter().map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string)).collect()
        }
        Some(other) => vec![other.to_string()],
        None => vec![],
    }
}

/// The id of a node or an end of a link, as text (networkx ids may be any hashable value).
fn id_text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// Reads node-link data: its nodes by id, and its links as (source id, target id, relations).
#[allow(clippy::type_complexity)]
fn read(data: &Value) -> Result<(BTreeMap<String, Entry>, Vec<(String, String, Vec<String>)>), BadGraph> {
    let nodes =
        data.get("nodes").and_then(Value::as_array).ok_or_else(|| BadGraph("no `nodes` list".into()))?;
    let links = data
        .get("links")
        .or_else(|| data.get("edges"))
        .and_then(Value::as_array)
        .ok_or_else(|| BadGraph("no `links` (or `edges`) list".into()))?;
    let mut entries = BTreeMap::new();
    for node in nodes {
        let id = node.get("id").ok_or_else(|| BadGraph(format!("a node without `id`: {node}")))?;
        let id = id_text(id);
        let name = node.get("name").and_then(Value::as_str).map_or_else(|| id.clone(), str::to_string);
        let mut kinds = strings(node.get("type"));
        kinds.sort();
        kinds.dedup();
        let attrs: Map<String, Value> = node
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| !matches!(k.as_str(), "id" | "name" | "type"))
            .map(|(k, v)| (k.clone(), normalise(v)))
            .collect();
        entries.insert(id, Entry { name, kinds, attrs });
    }
    let mut edges = Vec::new();
    for link in links {
        let end = |key: &str| -> Result<String, BadGraph> {
            let v = link.get(key).ok_or_else(|| BadGraph(format!("a link without `{key}`: {link}")))?;
            let id = id_text(v);
            if entries.contains_key(&id) {
                Ok(id)
            } else {
                Err(BadGraph(format!("a link's {key} `{id}` is not a node")))
            }
        };
        edges.push((end("source")?, end("target")?, strings(link.get("type"))));
    }
    Ok((entries, edges))
}

/// A graph in a form that compares as NetPress's check does (node attributes must be equal),
/// but keeping direction and edge types, and ignoring how nodes are numbered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonical {
    nodes: BTreeSet<String>,
    edges: BTreeSet<String>,
}

impl Canonical {
    /// Of node-link data.
    pub fn of(data: &Value) -> Result<Self, BadGraph> {
        let (entries, links) = read(data)?;
        let who = |e: &Entry| format!("{} {}", e.kinds.join("+"), e.name);
        let nodes = entries
            .values()
            .map(|e| format!("{} {}", who(e), sorted(&Value::Object(e.attrs.clone()))))
            .collect();
        let edges = links
            .iter()
            .filter_map(|(s, t, rel)| {
                Some(format!("{} -{}-> {}", who(entries.get(s)?), rel.join("+"), who(entries.get(t)?)))
            })
            .collect();
        Ok(Self { nodes, edges })
    }

    /// Of a graph, keyed as the code saw it.
    pub fn of_graph(g: &Graph, keying: Keying) -> Self {
        // Node-link data this module wrote is always readable.
        Self::of(&node_link(g, keying)).unwrap_or(Self { nodes: BTreeSet::new(), edges: BTreeSet::new() })
    }

    /// `None` when equal, else what differs (a few records of each side).
    pub fn diff(&self, expected: &Self) -> Option<String> {
        if self == expected {
            return None;
        }
        let mut parts = Vec::new();
        let list = |items: Vec<&String>| items.into_iter().take(4).cloned().collect::<Vec<_>>().join("; ");
        for (what, a, b) in [("nodes", &expected.nodes, &self.nodes), ("edges", &expected.edges, &self.edges)]
        {
            let missing: Vec<&String> = a.difference(b).collect();
            let extra: Vec<&String> = b.difference(a).collect();
            if !missing.is_empty() {
                parts.push(format!("{} expected {what} missing: {}", missing.len(), list(missing)));
            }
            if !extra.is_empty() {
                parts.push(format!("{} unexpected {what}: {}", extra.len(), list(extra)));
            }
        }
        Some(parts.join(". "))
    }
}

/// Attributes of node-link data as netdojo's paths (`switch_loc.stage`).
fn flatten(prefix: &str, attrs: &Map<String, Value>, out: &mut Attrs) {
    for (k, v) in attrs {
        let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            Value::Object(inner) if !inner.is_empty() => flatten(&path, inner, out),
            other => {
                out.insert(path, other.clone());
            }
        }
    }
}

fn kind_of(s: &str) -> EntityKind {
    EntityKind::parse(s).unwrap_or_else(|| EntityKind::Other(s.to_string()))
}

fn relation_of(rel: &[String]) -> Relation {
    match rel {
        [one] => Relation::parse(one).unwrap_or_else(|| Relation::Other(one.clone())),
        [] => Relation::Other("(no type)".into()),
        many => Relation::Other(many.join("+")),
    }
}

/// Reads node-link data back into a [`Graph`] for the safety check (see the module docs).
pub fn to_graph(data: &Value) -> Result<Graph, BadGraph> {
    let (entries, links) = read(data)?;
    let mut g = Graph::new();
    let mut kinds_of: BTreeMap<&str, Vec<EntityKind>> = BTreeMap::new();
    for (id, e) in &entries {
        let mut attrs = Attrs::new();
        flatten("", &e.attrs, &mut attrs);
        let kinds: Vec<EntityKind> = if e.kinds.is_empty() {
            vec![EntityKind::Other("(no type)".into())]
        } else {
            e.kinds.iter().map(|k| kind_of(k)).collect()
        };
        for kind in &kinds {
            // Two ids with one name and kind: the second is one node with the first.
            if g.get(kind, &e.name).is_none() {
                g.add_node(kind.clone(), &e.name, attrs.clone())
                    .map_err(|err| BadGraph(format!("node `{id}`: {err}")))?;
            }
        }
        kinds_of.insert(id.as_str(), kinds);
    }
    for (s, t, rel) in &links {
        let (Some(ks), Some(kt)) = (kinds_of.get(s.as_str()), kinds_of.get(t.as_str())) else { continue };
        let (Some(es), Some(et)) = (entries.get(s), entries.get(t)) else { continue };
        let rel = relation_of(rel);
        let mut pairs: Vec<(&EntityKind, &EntityKind)> = ks
            .iter()
            .flat_map(|a| kt.iter().map(move |z| (a, z)))
            .filter(|(a, z)| safety::allowed(&rel, a, z) && !(s == t && a == z))
            .collect();
        if pairs.is_empty() {
            pairs.push((&ks[0], &kt[0]));
        }
        for (a, z) in pairs {
            if let (Some(ai), Some(zi)) = (g.get(a, &es.name), g.get(z, &et.name)) {
                // A duplicate (two ids of one name) is the same edge.
                let _ = g.add_edge(ai, zi, rel.clone());
            }
        }
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::FabricParams;

    #[test]
    fn name_keying_merges_like_netpress_and_reads_back_safe() {
        let g = FabricParams::default().generate();
        let data = node_link(&g, Keying::Name);
        let merged = g.merged_view();
        assert_eq!(data["nodes"].as_array().map(Vec::len), Some(merged.nodes));
        assert_eq!(data["links"].as_array().map(Vec::len), Some(merged.edges));
        let back = to_graph(&data).expect("reads");
        assert_eq!(safety::violations(&back), Vec::<String>::new());
        // A switch shares its name with its chassis and control point, and keeps its stage.
        let node = data["nodes"]
            .as_array()
            .and_then(|n| n.iter().find(|n| n["name"] == "ju1.a1.m1.s2c1"))
            .expect("switch node");
        assert_eq!(node["type"].as_array().map(Vec::len), Some(3), "{node}");
        assert!(node["switch_loc"]["stage"].is_number(), "{node}");
        assert_eq!(Canonical::of(&data), Ok(Canonical::of_graph(&g, Keying::Name)));
    }

    #[test]
    fn kind_name_keying_round_trips_exactly() {
        let g = FabricParams::default().generate();
        let data = node_link(&g, Keying::KindName);
        assert_eq!(data["nodes"].as_array().map(Vec::len), Some(g.node_count()));
        assert_eq!(data["links"].as_array().map(Vec::len), Some(g.edge_count()));
        let back = to_graph(&data).expect("reads");
        assert_eq!(back.digest(), g.digest());
    }

    #[test]
    fn representation_details_do_not_matter_but_content_does() {
        let a = json!({"nodes": [{"id": "p", "name": "p", "type": ["EK_PORT"], "physical_capacity_bps": 1000},
                                 {"id": "s", "name": "s", "type": ["EK_PACKET_SWITCH"], "switch_loc": {"stage": 2, "slot": 1}}],
                       "links": [{"source": "s", "target": "p", "type": "RK_CONTAINS"}]});
        let b = json!({"nodes": [{"id": 7, "name": "s", "switch_loc": {"slot": 1, "stage": 2.0}, "type": "EK_PACKET_SWITCH"},
                                 {"id": "p", "type": "EK_PORT", "physical_capacity_bps": 1000.0}],
                       "edges": [{"source": 7, "target": "p", "type": ["RK_CONTAINS"]}]});
        assert_eq!(Canonical::of(&a), Canonical::of(&b));
        let c =
            json!({"nodes": a["nodes"], "links": [{"source": "p", "target": "s", "type": "RK_CONTAINS"}]});
        let diff = Canonical::of(&c).expect("c").diff(&Canonical::of(&a).expect("a")).expect("differs");
        assert!(diff.contains("1 expected edges missing") && diff.contains("1 unexpected edges"), "{diff}");
        assert!(!safety::violations(&to_graph(&c).expect("c")).is_empty());
        assert_eq!(
            Canonical::of(&json!({"nodes": [], "links": [{"source": "x", "target": "y"}]})),
            Err(BadGraph("a link's source `x` is not a node".into()))
        );
        assert_eq!(Canonical::of(&json!([1])), Err(BadGraph("no `nodes` list".into())));
    }
}
