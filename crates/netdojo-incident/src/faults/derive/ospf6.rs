//! OSPFv3 (FRR's ospf6d) faults, read from the `ipv6 ospf6 ...` lines of the routers'
//! interfaces and their `router ospf6` section. Offered only where a health check would see
//! them: an adjacency fault on a link whose OSPFv3 adjacency an `ospf6` check watches, a
//! missing interface area where a `route` check wants the interface's prefix elsewhere, a cost
//! change where a `path` check to an IPv6 address would move.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::super::spf::{self, Edge, Graph};
use super::super::view::{Port, View};
use super::{Candidate, cand, seg_key, vtysh};
use crate::catalogue::FaultType;
use crate::lab::Check;

/// One interface's OSPFv3 settings (`ipv6 ospf6 ...` lines).
#[derive(Debug, Clone, Default)]
struct Iface6 {
    area: Option<String>,
    passive: bool,
    cost: Option<u32>,
    hello: Option<u32>,
    dead: Option<u32>,
    /// `ipv6 address` prefixes, as (network, length).
    prefixes: Vec<(Ipv6Addr, u8)>,
}

/// Every router's OSPFv3 interfaces and router-id.
struct Ospf6<'v> {
    view: &'v View<'v>,
    ifaces: BTreeMap<String, BTreeMap<String, Iface6>>,
    router_id: BTreeMap<String, Ipv4Addr>,
}

fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

fn network(addr: Ipv6Addr, len: u8) -> Ipv6Addr {
    let bits = u128::from(addr);
    let mask = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len.min(128))) };
    Ipv6Addr::from(bits & mask)
}

fn parse_prefix(s: &str) -> Option<(Ipv6Addr, u8)> {
    let (a, l) = s.split_once('/')?;
    let len: u8 = l.parse().ok().filter(|l| *l <= 128)?;
    Some((network(a.parse().ok()?, len), len))
}

impl<'v> Ospf6<'v> {
    fn new(view: &'v View<'v>) -> Self {
        let mut ifaces = BTreeMap::new();
        let mut router_id = BTreeMap::new();
        for (name, r) in &view.routers {
            let mut mine: BTreeMap<String, Iface6> = BTreeMap::new();
            for n in &r.config.nodes {
                if let Some(iface) = n.line.strip_prefix("interface ") {
                    let iface = iface.split_whitespace().next().unwrap_or_default();
                    let mut o = Iface6::default();
                    for c in &n.children {
                        match words(&c.line)[..] {
                            ["ipv6", "ospf6", "area", a] => o.area = Some(a.to_string()),
                            ["ipv6", "ospf6", "passive"] => o.passive = true,
                            ["ipv6", "ospf6", "cost", x] => o.cost = x.parse().ok(),
                            ["ipv6", "ospf6", "hello-interval", x] => o.hello = x.parse().ok(),
                            ["ipv6", "ospf6", "dead-interval", x] => o.dead = x.parse().ok(),
                            ["ipv6", "address", p, ..] => o.prefixes.extend(parse_prefix(p)),
                            _ => {}
                        }
                    }
                    if o.area.is_some() {
                        mine.insert(iface.to_string(), o);
                    }
                } else if n.line == "router ospf6" {
                    for c in &n.children {
                        if let ["ospf6", "router-id", id] | ["router-id", id] = words(&c.line)[..]
                            && let Ok(id) = id.parse()
                        {
                            router_id.insert(name.clone(), id);
                        }
                    }
                }
            }
            if !mine.is_empty() {
                ifaces.insert(name.clone(), mine);
            }
        }
        Ospf6 { view, ifaces, router_id }
    }

    fn iface(&self, router: &str, iface: &str) -> Option<&Iface6> {
        self.ifaces.get(router)?.get(iface)
    }

    /// The routers on the segment that would form an OSPFv3 adjacency with `router` over
    /// `iface` (OSPFv3 on both ends, neither passive).
    fn neighbors(&self, router: &str, iface: &str) -> Vec<&'v Port> {
        match self.iface(router, iface) {
            Some(o) if !o.passive => self
                .view
                .peers(router, iface)
                .into_iter()
                .filter(|p| self.iface(&p.0, &p.1).is_some_and(|o| !o.passive))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// An `ospf6` check watches the adjacency between the two routers (either side).
    fn checked(&self, a: &str, b: &str) -> bool {
        let rid = |r: &str| self.router_id.get(r).map(|i| i.to_string());
        let (ra, rb) = (rid(a), rid(b));
        self.view.lab.checks.iter().any(|c| match c {
            Check::Ospf6 { device, neighbor } => {
                (device == a && Some(neighbor) == rb.as_ref())
                    || (device == b && Some(neighbor) == ra.as_ref())
            }
            _ => false,
        })
    }

    /// `(router, interface, neighbour)` for every OSPFv3 adjacency a check watches, from both
    /// ends.
    fn checked_adjacencies(&self) -> Vec<(&str, &str, &'v Port)> {
        let mut out = Vec::new();
        for (r, ifaces) in &self.ifaces {
            for i in ifaces.keys() {
                if let Some(p) = self.neighbors(r, i).into_iter().find(|p| self.checked(r, &p.0)) {
                    out.push((r.as_str(), i.as_str(), p));
                }
            }
        }
        out
    }

    fn graph(&self) -> Graph {
        let mut edges = Vec::new();
        for (r, ifaces) in &self.ifaces {
            for (i, o) in ifaces {
                for p in self.neighbors(r, i) {
                    edges.push(Edge {
                        from: r.clone(),
                        iface: i.clone(),
                        to: p.0.clone(),
                        to_iface: p.1.clone(),
                        cost: o.cost.unwrap_or(spf::DEFAULT_COST),
                    });
                }
            }
        }
        Graph { edges }
    }

    /// The router whose OSPFv3 interface holds the IPv6 address `to`.
    fn owner(&self, to: Ipv6Addr) -> Option<&str> {
        self.ifaces.iter().find_map(|(r, ifaces)| {
            ifaces
                .values()
                .any(|o| o.prefixes.iter().any(|(net, len)| network(to, *len) == *net))
                .then_some(r.as_str())
        })
    }
}

fn interface_lines(i: &str, lines: &[&str]) -> Vec<String> {
    std::iter::once(format!("interface {i}")).chain(lines.iter().map(|l| format!(" {l}"))).collect()
}

/// An adjacency fault: `set` on the interface breaks it, `restore` puts it back.
fn adjacency(
    view: &View,
    t: FaultType,
    r: &str,
    i: &str,
    detail: String,
    set: &[&str],
    restore: &[&str],
) -> Candidate {
    cand(t, r, detail, vec![vtysh(r, &interface_lines(i, set))], vec![vtysh(r, &interface_lines(i, restore))])
        .touching(seg_key(view, r, i))
}

/// An area number no OSPFv3 interface of the lab uses.
fn unused_area(o6: &Ospf6) -> String {
    let used: Vec<String> =
        o6.ifaces.values().flat_map(|m| m.values().filter_map(|o| o.area.clone())).collect();
    (1u32..).map(|n| n.to_string()).find(|n| !used.contains(n)).unwrap_or_else(|| "99".into())
}

pub fn area_mismatch(view: &View) -> Vec<Candidate> {
    let o6 = Ospf6::new(view);
    let b = unused_area(&o6);
    o6.checked_adjacencies()
        .into_iter()
        .filter_map(|(r, i, p)| {
            let a = o6.iface(r, i)?.area.clone()?;
            Some(adjacency(
                view,
                FaultType::Ospf6AreaMismatch,
                r,
                i,
                format!("{r} {i} is in OSPFv3 area {b}, {} {} in area {a}", p.0, p.1),
                // FRR refuses a new area on an interface before the old one is removed.
                &[&format!("no ipv6 ospf6 area {a}"), &format!("ipv6 ospf6 area {b}")],
                &[&format!("no ipv6 ospf6 area {b}"), &format!("ipv6 ospf6 area {a}")],
            ))
        })
        .collect()
}

pub fn timer(view: &View, hello: bool) -> Vec<Candidate> {
    let o6 = Ospf6::new(view);
    o6.checked_adjacencies()
        .into_iter()
        .filter_map(|(r, i, p)| {
            let o = o6.iface(r, i)?;
            // FRR's defaults: hello 10 s, dead 40 s.
            let (t, key, old, default) = if hello {
                (FaultType::Ospf6HelloMismatch, "hello-interval", o.hello, 10)
            } else {
                (FaultType::Ospf6DeadMismatch, "dead-interval", o.dead, 40)
            };
            let new = old.unwrap_or(default) + 1;
            // A hello interval must stay below the dead interval for the fault to be a mismatch
            // and not a flapping adjacency on this router alone.
            if hello && new >= o.dead.unwrap_or(40) {
                return None;
            }
            let restore = match old {
                Some(v) => format!("ipv6 ospf6 {key} {v}"),
                None => format!("no ipv6 ospf6 {key}"),
            };
            let was = old.map(|v| v.to_string()).unwrap_or_else(|| "the default".into());
            Some(adjacency(
                view,
                t,
                r,
                i,
                format!("{r} {i} has OSPFv3 {key} {new}, {} {} has {was}", p.0, p.1),
                &[&format!("ipv6 ospf6 {key} {new}")],
                &[&restore],
            ))
        })
        .collect()
}

pub fn passive(view: &View) -> Vec<Candidate> {
    let o6 = Ospf6::new(view);
    o6.checked_adjacencies()
        .into_iter()
        .map(|(r, i, p)| {
            adjacency(
                view,
                FaultType::Ospf6PassiveInterface,
                r,
                i,
                format!("{r} {i} (towards {}) is passive in OSPFv3", p.0),
                &["ipv6 ospf6 passive"],
                &["no ipv6 ospf6 passive"],
            )
        })
        .collect()
}

/// `no ipv6 ospf6 area` on an interface: on a watched adjacency's link the adjacency drops; on
/// an interface whose prefix a `route` check wants on another router, the prefix is no longer
/// announced.
pub fn missing_area(view: &View) -> Vec<Candidate> {
    let o6 = Ospf6::new(view);
    let mut out = Vec::new();
    let wanted: Vec<(String, Ipv6Addr, u8)> = view
        .lab
        .checks
        .iter()
        .filter_map(|c| match c {
            Check::Route { device, prefix, protocol, .. }
                if protocol.as_deref().is_none_or(|p| p == "ospf6") =>
            {
                parse_prefix(prefix).map(|(n, l)| (device.clone(), n, l))
            }
            _ => None,
        })
        .collect();
    for (r, ifaces) in &o6.ifaces {
        for (i, o) in ifaces {
            let Some(a) = &o.area else { continue };
            let adjacency = o6.neighbors(r, i).into_iter().find(|p| o6.checked(r, &p.0));
            let announced = wanted.iter().find(|(device, net, len)| {
                device != r && o.prefixes.iter().any(|(n, l)| n == net && l == len)
            });
            let detail = match (adjacency, announced) {
                (Some(p), _) => format!("{r} {i} has no OSPFv3 area: no adjacency with {}", p.0),
                (None, Some((device, net, len))) => {
                    format!("{r} {i} has no OSPFv3 area: {net}/{len} is not announced (wanted on {device})")
                }
                (None, None) => continue,
            };
            let mut c = cand(
                FaultType::Ospf6MissingInterfaceArea,
                r,
                detail,
                vec![vtysh(r, &interface_lines(i, &[&format!("no ipv6 ospf6 area {a}")]))],
                vec![vtysh(r, &interface_lines(i, &[&format!("ipv6 ospf6 area {a}")]))],
            );
            if let Some(seg) = seg_key(view, r, i) {
                c = c.touching([seg]);
            }
            out.push(c.touching([format!("ospf6 prefix {r} {i}")]));
        }
    }
    out
}

/// A cost of 1000 on an interface of a watched IPv6 path whose OSPFv3 routers have another way:
/// the path check sees traffic take it.
pub fn cost(view: &View) -> Vec<Candidate> {
    let o6 = Ospf6::new(view);
    let graph = o6.graph();
    let high = 1000;
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for check in &view.lab.checks {
        let Check::Path { from, to, via } = check else { continue };
        let Ok(to) = to.parse::<Ipv6Addr>() else { continue };
        let Some(dst) = o6.owner(to) else { continue };
        // The first router of the path: the first `via` that runs OSPFv3 (the host's gateway).
        let Some(src) = via.iter().find(|v| o6.ifaces.contains_key(*v)) else { continue };
        let Some(path) = graph.unique_path(src, dst, &|e| e.cost) else { continue };
        let routers = spf::routers_of(src, &path);
        if !spf::passes(&routers, via) {
            continue;
        }
        for e in &path {
            let Some(new) = graph.unique_path(src, dst, &|x| if x == e { high } else { x.cost }) else {
                continue;
            };
            let moved = spf::routers_of(src, &new);
            if spf::passes(&moved, via) || !seen.insert((e.from.clone(), e.iface.clone())) {
                continue;
            }
            let old = o6.iface(&e.from, &e.iface).and_then(|o| o.cost);
            let restore = match old {
                Some(c) => format!("ipv6 ospf6 cost {c}"),
                None => "no ipv6 ospf6 cost".into(),
            };
            out.push(adjacency(
                view,
                FaultType::Ospf6CostSuboptimal,
                &e.from,
                &e.iface,
                format!(
                    "{} {} has OSPFv3 cost {high}: {from} reaches {to} by {} instead of {}",
                    e.from,
                    e.iface,
                    moved.join(","),
                    routers.join(",")
                ),
                &[&format!("ipv6 ospf6 cost {high}")],
                &[&restore],
            ));
        }
    }
    out
}
