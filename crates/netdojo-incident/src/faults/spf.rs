//! OSPF's shortest paths over the lab's routers, from the costs their configurations give, to
//! tell which cost change moves a path (and where routing is asymmetric, for strict
//! reverse-path filtering). Used only where a flow's routers all run OSPF alone.

use std::collections::{BTreeMap, BTreeSet};

use super::view::View;

/// FRR's cost of an interface without `ip ospf cost`, as FRR 8.4 gives a veth (measured:
/// `show ip ospf interface` says `Cost: 10`).
pub const DEFAULT_COST: u32 = 10;

/// A directed OSPF edge: `from` sends over `iface` to `to`, which receives on `to_iface`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    pub from: String,
    pub iface: String,
    pub to: String,
    pub to_iface: String,
    pub cost: u32,
}

pub struct Graph {
    pub edges: Vec<Edge>,
}

impl Graph {
    pub fn new(view: &View) -> Graph {
        let mut edges = Vec::new();
        for (name, r) in &view.routers {
            for (iface, o) in &r.ospf_ifaces {
                for p in view.ospf_neighbors(name, iface) {
                    edges.push(Edge {
                        from: name.clone(),
                        iface: iface.clone(),
                        to: p.0.clone(),
                        to_iface: p.1.clone(),
                        cost: o.cost.unwrap_or(DEFAULT_COST),
                    });
                }
            }
        }
        Graph { edges }
    }

    /// The shortest path from `src` to `dst` as its edges, when it is the only shortest one
    /// (`None` with equal-cost paths, or none at all). `cost` overrides an edge's cost.
    pub fn unique_path(&self, src: &str, dst: &str, cost: &dyn Fn(&Edge) -> u32) -> Option<Vec<Edge>> {
        let mut dist: BTreeMap<&str, u64> = BTreeMap::new();
        let mut ways: BTreeMap<&str, u32> = BTreeMap::new();
        let mut prev: BTreeMap<&str, &Edge> = BTreeMap::new();
        let mut done: BTreeSet<&str> = BTreeSet::new();
        dist.insert(src, 0);
        ways.insert(src, 1);
        while let Some((&u, &du)) = dist.iter().filter(|(n, _)| !done.contains(*n)).min_by_key(|(_, d)| **d) {
            done.insert(u);
            for e in self.edges.iter().filter(|e| e.from == u) {
                let nd = du + u64::from(cost(e));
                let w = ways.get(u).copied().unwrap_or(0);
                match dist.get(e.to.as_str()) {
                    Some(&d) if nd > d => {}
                    Some(&d) if nd == d => {
                        *ways.entry(e.to.as_str()).or_insert(0) += w;
                    }
                    _ => {
                        dist.insert(&e.to, nd);
                        ways.insert(&e.to, w);
                        prev.insert(&e.to, e);
                    }
                }
            }
        }
        if ways.get(dst).copied() != Some(1) {
            return None;
        }
        let mut path = Vec::new();
        let mut at = dst;
        while at != src {
            let e = prev.get(at)?;
            path.push((*e).clone());
            at = &e.from;
        }
        path.reverse();
        Some(path)
    }
}

/// The routers a path visits, in order.
pub fn routers_of(src: &str, path: &[Edge]) -> Vec<String> {
    std::iter::once(src.to_string()).chain(path.iter().map(|e| e.to.clone())).collect()
}

/// `via` appears in `routers` in this order (others may come between).
pub fn passes(routers: &[String], via: &[String]) -> bool {
    let mut it = routers.iter();
    via.iter().all(|v| it.any(|r| r == v))
}
