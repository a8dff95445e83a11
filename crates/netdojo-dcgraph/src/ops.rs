//! The ground-truth operations ("solid steps"): add, remove, update, count, list, rank.
//!
//! Mutations record what they did in a [`Journal`] so that the query generator can undo them
//! on its scratch graph instead of cloning the graph for every query.

use petgraph::stable_graph::NodeIndex;
use serde_json::Value;

use crate::model::Graph;
use crate::model::{Attrs, CAPACITY_ATTR, EntityKind, GraphError, Node, Relation, RemovedNode};

/// One undoable change.
#[derive(Debug, Clone)]
enum Entry {
    AddedNode(EntityKind, String),
    Removed(RemovedNode),
    SetAttr(EntityKind, String, String, Option<Value>),
}

/// The changes made by operations, oldest first.
#[derive(Debug, Default)]
pub struct Journal {
    entries: Vec<Entry>,
}

impl Journal {
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts the graph back as it was before the journalled operations (same records, hence
    /// the same digest; node indices may differ).
    pub fn undo(self, g: &mut Graph) {
        for entry in self.entries.into_iter().rev() {
            match entry {
                Entry::AddedNode(kind, name) => {
                    if let Some(ix) = g.get(&kind, &name) {
                        g.remove_node(ix);
                    }
                }
                Entry::Removed(RemovedNode { node, edges }) => {
                    let Node { kind, name, attrs } = node;
                    if g.add_node(kind, &name, attrs).is_ok() {
                        for ((ak, an), rel, (zk, zn)) in edges {
                            if let (Some(a), Some(z)) = (g.get(&ak, &an), g.get(&zk, &zn)) {
                                let _ = g.add_edge(a, z, rel);
                            }
                        }
                    }
                }
                Entry::SetAttr(kind, name, key, old) => {
                    if let Some(ix) = g.get(&kind, &name) {
                        g.set_attr(ix, &key, old);
                    }
                }
            }
        }
    }
}

/// Adds `name` of `kind` under `parent` (RK_CONTAINS). A packet switch gets `switch_loc.stage`
/// and one port `<name>.p1` of `port_capacity_bps`; a port gets `physical_capacity_bps`.
pub fn add(
    g: &mut Graph,
    j: &mut Journal,
    parent: NodeIndex,
    kind: EntityKind,
    name: &str,
    stage: u64,
    port_capacity_bps: u64,
) -> Result<NodeIndex, GraphError> {
    let mut attrs = Attrs::new();
    let is_switch = kind == EntityKind::PacketSwitch;
    if is_switch {
        attrs.insert("switch_loc.stage".into(), stage.into());
    } else if kind == EntityKind::Port {
        attrs.insert(CAPACITY_ATTR.into(), port_capacity_bps.into());
    }
    let ix = g.add_node(kind.clone(), name, attrs)?;
    j.entries.push(Entry::AddedNode(kind, name.to_string()));
    g.add_edge(parent, ix, Relation::Contains)?;
    if is_switch {
        let port = format!("{name}.p1");
        let mut pattrs = Attrs::new();
        pattrs.insert(CAPACITY_ATTR.into(), port_capacity_bps.into());
        let p = g.add_node(EntityKind::Port, &port, pattrs)?;
        j.entries.push(Entry::AddedNode(EntityKind::Port, port));
        g.add_edge(ix, p, Relation::Contains)?;
    }
    Ok(ix)
}

/// Removes `ix` and, recursively, every hierarchy descendant left without any hierarchy
/// parent (so a switch takes its ports with it). Returns the removed (kind, name), in order.
pub fn remove(g: &mut Graph, j: &mut Journal, ix: NodeIndex) -> Vec<(EntityKind, String)> {
    let mut removed = Vec::new();
    let mut stack = vec![ix];
    while let Some(n) = stack.pop() {
        let children: Vec<NodeIndex> =
            g.children(n).filter(|(r, _)| r.is_hierarchy()).map(|(_, c)| c).collect();
        let Some(r) = g.remove_node(n) else { continue };
        removed.push((r.node.kind.clone(), r.node.name.clone()));
        j.entries.push(Entry::Removed(r));
        let mut orphans: Vec<NodeIndex> =
            children.into_iter().filter(|c| !g.parents(*c).any(|(rel, _)| rel.is_hierarchy())).collect();
        orphans.dedup();
        // Reverse so that the first child is removed first (a stable, readable order).
        stack.extend(orphans.into_iter().rev());
    }
    removed
}

/// Sets one attribute.
pub fn update(g: &mut Graph, j: &mut Journal, ix: NodeIndex, key: &str, value: Value) {
    let n = g.node(ix);
    let (kind, name) = (n.kind.clone(), n.name.clone());
    let old = g.set_attr(ix, key, Some(value));
    j.entries.push(Entry::SetAttr(kind, name, key.to_string(), old));
}

/// Nodes of `kind` below `ix` in the hierarchy (RK_CONTAINS and RK_CONTROLS).
pub fn count(g: &Graph, ix: NodeIndex, kind: &EntityKind) -> u64 {
    g.count_descendants(ix, kind)
}

/// Names of the direct RK_CONTAINS children of `ix`, sorted.
pub fn list(g: &Graph, ix: NodeIndex) -> Vec<String> {
    let mut names: Vec<String> = g
        .children(ix)
        .filter(|(r, _)| **r == Relation::Contains)
        .map(|(_, c)| g.node(c).name.clone())
        .collect();
    names.sort_unstable();
    names
}

/// Direct RK_CONTAINS children of `ix` with their total capacity, by capacity descending,
/// ties by name ascending.
pub fn rank(g: &Graph, ix: NodeIndex) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = g
        .children(ix)
        .filter(|(r, _)| **r == Relation::Contains)
        .map(|(_, c)| (g.node(c).name.clone(), g.capacity(c)))
        .collect();
    out.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// Up to `max` node records and `max` edge records of `a` that `b` lacks (a node whose
/// attributes differ counts as lacking), in words. Allocates only for what it reports.
pub fn missing_records(a: &Graph, b: &Graph, max: usize) -> (Vec<String>, Vec<String>) {
    let label = |g: &Graph, ix: NodeIndex| {
        let n = g.node(ix);
        format!("{} `{}`", g.kind_label(&n.kind), n.name)
    };
    let mut nodes = Vec::new();
    for ix in a.node_indices() {
        let n = a.node(ix);
        let same = b.get(&n.kind, &n.name).is_some_and(|bx| b.node(bx).attrs == n.attrs);
        if !same && nodes.len() < max {
            let attrs: Vec<String> = n.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            nodes.push(format!("{} {{{}}}", label(a, ix), attrs.join(", ")));
        }
    }
    let mut edges = Vec::new();
    for (x, r, z) in a.edges() {
        let (xn, zn) = (a.node(x), a.node(z));
        let found = match (b.get(&xn.kind, &xn.name), b.get(&zn.kind, &zn.name)) {
            (Some(bx), Some(bz)) => b.find_edge(bx, bz, r).is_some(),
            _ => false,
        };
        if !found && edges.len() < max {
            edges.push(format!("{} {r} {}", label(a, x), label(a, z)));
        }
    }
    (nodes, edges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::FabricParams;

    #[test]
    fn undo_restores_the_exact_graph_and_remove_cascades_to_ports() {
        let mut g = FabricParams::default().generate();
        let (digest, nodes, edges) = (g.digest(), g.node_count(), g.edge_count());
        let mut j = Journal::new();
        let sw = g.get(&EntityKind::PacketSwitch, "ju1.a1.m1.s2c1").expect("switch");
        let removed = remove(&mut g, &mut j, sw);
        assert_eq!(removed.len(), 17, "{removed:?}");
        assert_eq!(removed[0], (EntityKind::PacketSwitch, "ju1.a1.m1.s2c1".to_string()));
        // The chassis and control point keep other parents, so they stay.
        assert!(g.get(&EntityKind::Chassis, "ju1.a1.m1.s2c1").is_some());
        let agg = g.get(&EntityKind::AggBlock, "ju1.a1.m1").expect("agg");
        add(&mut g, &mut j, agg, EntityKind::PacketSwitch, "ju1.a1.m1.s2c99", 2, 5).expect("add");
        assert_eq!(count(&g, agg, &EntityKind::Port), 15 * 16 + 1);
        let port = g.get(&EntityKind::Port, "ju1.a1.m1.s2c2.p1").expect("port");
        update(&mut g, &mut j, port, CAPACITY_ATTR, 7u64.into());
        assert_ne!(g.digest(), digest);
        j.undo(&mut g);
        assert_eq!((g.digest(), g.node_count(), g.edge_count()), (digest, nodes, edges));
        let fresh = FabricParams::default().generate();
        assert_eq!(missing_records(&fresh, &g, 5), (vec![], vec![]));
        assert_eq!(missing_records(&g, &fresh, 5), (vec![], vec![]));
    }

    #[test]
    fn rank_sorts_by_capacity_then_name_and_list_sorts_names() {
        let mut g =
            FabricParams { special_port_capacities_bps: vec![], ..FabricParams::default() }.generate();
        let agg = g.get(&EntityKind::AggBlock, "ju1.a1.m1").expect("agg");
        let port = g.get(&EntityKind::Port, "ju1.a1.m1.s3c8.p1").expect("port");
        let mut j = Journal::new();
        update(&mut g, &mut j, port, CAPACITY_ATTR, 9_000_000_000u64.into());
        let r = rank(&g, agg);
        assert_eq!(r[0], ("ju1.a1.m1.s3c8".to_string(), 15_000_000_000 + 9_000_000_000));
        assert_eq!(r[1], ("ju1.a1.m1.s2c1".to_string(), 16_000_000_000));
        let l = list(&g, agg);
        assert_eq!(l.len(), 16);
        assert!(l.windows(2).all(|w| w[0] <= w[1]));
        // A control domain ranks its control points by the ports of the switches they control.
        let dom = g.get(&EntityKind::ControlDomain, "ju1.s1.dom").expect("dom");
        assert!(rank(&g, dom).iter().all(|(_, c)| *c == 16_000_000_000));
    }
}
