//! A lab read for fault derivation: its routers' FRR configurations as trees (netdojo-config's
//! [`Config`]), what OSPF and BGP run where, the segments that join interfaces (a bridge joins
//! all its ports into one), who neighbours whom, and what the health checks depend on.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use netdojo_config::config::{Config, Dialect, Node as Line};
use netdojo_linux::topology::{Cidr, NodeKind};

use crate::lab::{Check, Lab, ServiceKind};

/// One end of a link: `(node, interface)`.
pub type Port = (String, String);

#[derive(Debug, Clone)]
pub struct Iface {
    pub cidr: Option<Cidr>,
    /// The link's MTU (`mtu:` of the link), 1500 when unset.
    pub mtu: u32,
    /// Index in [`View::segments`]; `None` for FRR-only interfaces (`lo`).
    pub segment: Option<usize>,
}

#[derive(Debug, Clone, Default)]
pub struct OspfIface {
    /// The area, as written (`0`, `0.0.0.1`).
    pub area: String,
    /// `Some(prefix)` when a `network PREFIX area A` statement enables it, `None` when the
    /// interface's own `ip ospf area A` does.
    pub network: Option<String>,
    pub passive: bool,
    pub hello: Option<u32>,
    /// The `ip ospf dead-interval ...` line's arguments, as written.
    pub dead: Option<String>,
    pub network_type: Option<String>,
    pub cost: Option<u32>,
    pub auth: bool,
    pub mtu_ignore: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Ospf {
    /// `router ospf`'s lines, as written (children of the header).
    pub lines: Vec<Line>,
    pub router_id: Option<Ipv4Addr>,
    pub passive_default: bool,
    /// `area A stub [no-summary]` lines, by area.
    pub stub: BTreeMap<String, String>,
    pub redistribute: BTreeSet<String>,
    /// `network PREFIX area A` in order.
    pub networks: Vec<(Cidr, String, String)>,
    pub default_originate: bool,
}

#[derive(Debug, Clone)]
pub struct Neighbor {
    pub addr: String,
    pub remote_as: String,
    /// Every line about this neighbour: `(address-family header or None, line)`.
    pub lines: Vec<(Option<String>, String)>,
}

#[derive(Debug, Clone, Default)]
pub struct Bgp {
    pub asn: String,
    pub header: String,
    pub neighbors: Vec<Neighbor>,
    /// `(address-family header or None, line)` of `network P` statements.
    pub networks: Vec<(Option<String>, String)>,
    /// `(address-family header or None, line)` of `redistribute X` statements.
    pub redistribute: Vec<(Option<String>, String)>,
}

impl Bgp {
    pub fn neighbor(&self, addr: &str) -> Option<&Neighbor> {
        self.neighbors.iter().find(|n| n.addr == addr)
    }
}

#[derive(Debug, Clone)]
pub struct StaticRoute {
    pub line: String,
    pub prefix: Cidr,
    /// The next hop, when it is an address.
    pub via: Option<Ipv4Addr>,
    pub distance: Option<u32>,
}

#[derive(Debug, Clone)]
pub struct Router {
    pub name: String,
    pub config: Config,
    pub ifaces: BTreeMap<String, Iface>,
    pub ospf: Option<Ospf>,
    pub ospf_ifaces: BTreeMap<String, OspfIface>,
    pub bgp: Option<Bgp>,
    pub statics: Vec<StaticRoute>,
    pub router_id: Option<Ipv4Addr>,
    pub sysctls: BTreeMap<String, String>,
}

impl Router {
    /// The interface's section lines (`interface eth1` > ...), empty when absent.
    pub fn iface_lines(&self, iface: &str) -> Vec<String> {
        section(&self.config, &format!("interface {iface}")).map(lines_of).unwrap_or_default()
    }

    /// Every address of the router, FRR's own (loopbacks) included.
    pub fn addresses(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.ifaces.values().filter_map(|i| i.cidr.map(|c| c.addr))
    }

    pub fn route_maps(&self) -> Vec<&Line> {
        self.config.nodes.iter().filter(|n| n.line.starts_with("route-map ")).collect()
    }
}

#[derive(Debug, Clone)]
pub struct Host {
    pub ifaces: BTreeMap<String, Iface>,
    pub gateway: Option<Ipv4Addr>,
}

/// A segment: the non-bridge ports a link (or a bridge) joins.
#[derive(Debug, Clone)]
pub struct Segment {
    pub ports: Vec<Port>,
}

/// A check that sends traffic: from a node to an address.
#[derive(Debug, Clone)]
pub struct Flow {
    pub from: String,
    pub to: Ipv4Addr,
    /// The node that has `to`, when one has.
    pub owner: Option<String>,
}

#[derive(Debug)]
pub struct View<'a> {
    pub lab: &'a Lab,
    pub routers: BTreeMap<String, Router>,
    pub hosts: BTreeMap<String, Host>,
    pub segments: Vec<Segment>,
    pub flows: Vec<Flow>,
    /// Every address in use, with its owner.
    pub owners: BTreeMap<Ipv4Addr, String>,
}

fn section<'c>(config: &'c Config, header: &str) -> Option<&'c Line> {
    config.nodes.iter().find(|n| n.line == header)
}

fn lines_of(n: &Line) -> Vec<String> {
    n.children.iter().map(|c| c.line.clone()).collect()
}

fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

/// The interface addresses of an FRR config (`interface lo` > `ip address A/32`).
fn frr_addresses(config: &Config) -> Vec<(String, Cidr)> {
    let mut out = Vec::new();
    for n in &config.nodes {
        if let Some(iface) = n.line.strip_prefix("interface ") {
            let iface = iface.split_whitespace().next().unwrap_or_default();
            for c in &n.children {
                if let ["ip", "address", a, ..] = words(&c.line)[..]
                    && let Some(cidr) = Cidr::parse(a)
                {
                    out.push((iface.to_string(), cidr));
                }
            }
        }
    }
    out
}

fn parse_ospf(config: &Config) -> Option<Ospf> {
    let n = config.nodes.iter().find(|n| n.line == "router ospf")?;
    let mut o = Ospf { lines: n.children.clone(), ..Ospf::default() };
    for c in &n.children {
        match words(&c.line)[..] {
            ["ospf", "router-id", id] | ["router-id", id] => o.router_id = id.parse().ok(),
            ["passive-interface", "default"] => o.passive_default = true,
            ["area", a, "stub", ..] => {
                o.stub.insert(a.to_string(), c.line.clone());
            }
            ["redistribute", what, ..] => {
                o.redistribute.insert(what.to_string());
            }
            ["network", p, "area", a] => {
                if let Some(cidr) = Cidr::parse(p) {
                    o.networks.push((cidr, a.to_string(), c.line.clone()));
                }
            }
            ["default-information", "originate", ..] => o.default_originate = true,
            _ => {}
        }
    }
    Some(o)
}

fn parse_bgp(config: &Config) -> Option<Bgp> {
    let n = config.nodes.iter().find(|n| n.line.starts_with("router bgp "))?;
    let asn = words(&n.line).get(2)?.to_string();
    let mut b = Bgp { asn, header: n.line.clone(), ..Bgp::default() };
    let mut visit = |af: Option<String>, line: &str| match words(line)[..] {
        ["neighbor", addr, "remote-as", asn] => {
            b.neighbors.push(Neighbor {
                addr: addr.to_string(),
                remote_as: asn.to_string(),
                lines: vec![(af, line.to_string())],
            });
        }
        ["neighbor", addr, ..] => {
            if let Some(nb) = b.neighbors.iter_mut().find(|nb| nb.addr == addr) {
                nb.lines.push((af, line.to_string()));
            }
        }
        ["network", ..] => b.networks.push((af, line.to_string())),
        ["redistribute", ..] => b.redistribute.push((af, line.to_string())),
        _ => {}
    };
    for c in &n.children {
        if c.line.starts_with("address-family ") {
            for cc in &c.children {
                visit(Some(c.line.clone()), &cc.line);
            }
        } else {
            visit(None, &c.line);
        }
    }
    Some(b)
}

fn parse_statics(config: &Config) -> Vec<StaticRoute> {
    let mut out = Vec::new();
    for n in &config.nodes {
        if let ["ip", "route", p, nh, ref rest @ ..] = words(&n.line)[..]
            && let Some(prefix) = Cidr::parse(p)
        {
            let distance = rest.first().and_then(|d| d.parse().ok());
            out.push(StaticRoute { line: n.line.clone(), prefix, via: nh.parse().ok(), distance });
        }
    }
    out
}

/// FRR's choice when nothing sets one: the highest loopback address, else the highest address.
fn implicit_router_id(ifaces: &BTreeMap<String, Iface>) -> Option<Ipv4Addr> {
    let lo = ifaces.get("lo").and_then(|i| i.cidr).map(|c| c.addr);
    lo.or_else(|| ifaces.values().filter_map(|i| i.cidr.map(|c| c.addr)).max())
}

impl<'a> View<'a> {
    pub fn new(lab: &'a Lab) -> View<'a> {
        let topo = &lab.topology;
        // Segments: union the two ends of each link; a bridge's ports all join.
        let mut seg_of: BTreeMap<Port, usize> = BTreeMap::new();
        let mut parent: Vec<usize> = Vec::new();
        fn find(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        let mut bridge_root: BTreeMap<String, usize> = BTreeMap::new();
        for link in &topo.links {
            let i = parent.len();
            parent.push(i);
            for ep in &link.endpoints {
                let Some((node, iface)) = ep.split_once(':') else { continue };
                let is_bridge = topo.nodes.get(node).is_some_and(|n| n.kind == NodeKind::Bridge);
                if is_bridge {
                    match bridge_root.get(node) {
                        Some(&r) => {
                            let (a, b) = (find(&mut parent, r), find(&mut parent, i));
                            parent[a] = b;
                        }
                        None => {
                            bridge_root.insert(node.to_string(), i);
                        }
                    }
                } else {
                    seg_of.insert((node.to_string(), iface.to_string()), i);
                }
            }
        }
        let mut index: BTreeMap<usize, usize> = BTreeMap::new();
        let mut segments: Vec<Segment> = Vec::new();
        let mut port_seg: BTreeMap<Port, usize> = BTreeMap::new();
        let mtu_of: BTreeMap<usize, u32> =
            topo.links.iter().enumerate().filter_map(|(i, l)| l.mtu.map(|m| (i, m))).collect();
        let mut seg_mtu: BTreeMap<usize, u32> = BTreeMap::new();
        for (port, link) in &seg_of {
            let root = find(&mut parent, *link);
            let next = segments.len();
            let s = *index.entry(root).or_insert(next);
            if s == segments.len() {
                segments.push(Segment { ports: Vec::new() });
            }
            segments[s].ports.push(port.clone());
            port_seg.insert(port.clone(), s);
            if let Some(m) = mtu_of.get(link) {
                seg_mtu.insert(s, *m);
            }
        }
        let iface_map = |name: &str, ifaces: &BTreeMap<String, String>| -> BTreeMap<String, Iface> {
            ifaces
                .iter()
                .map(|(i, a)| {
                    let segment = port_seg.get(&(name.to_string(), i.clone())).copied();
                    let mtu = segment.and_then(|s| seg_mtu.get(&s)).copied().unwrap_or(1500);
                    (i.clone(), Iface { cidr: Cidr::parse(a), mtu, segment })
                })
                .collect()
        };
        let mut routers = BTreeMap::new();
        let mut hosts = BTreeMap::new();
        let mut owners = BTreeMap::new();
        for (name, node) in topo.nodes.iter() {
            match node.kind {
                NodeKind::Frr => {
                    let config = node
                        .config
                        .as_deref()
                        .and_then(|c| Config::parse(c, Dialect::Frr).ok())
                        .unwrap_or_default();
                    let mut ifaces = iface_map(name, &node.interfaces);
                    // Ports with a link but no address still exist.
                    for (port, s) in &port_seg {
                        if port.0 == name && !ifaces.contains_key(&port.1) {
                            let mtu = seg_mtu.get(s).copied().unwrap_or(1500);
                            ifaces.insert(port.1.clone(), Iface { cidr: None, mtu, segment: Some(*s) });
                        }
                    }
                    for (iface, cidr) in frr_addresses(&config) {
                        let e = ifaces.entry(iface).or_insert(Iface { cidr: None, mtu: 1500, segment: None });
                        if e.cidr.is_none() {
                            e.cidr = Some(cidr);
                        }
                    }
                    let ospf = parse_ospf(&config);
                    let bgp = parse_bgp(&config);
                    let statics = parse_statics(&config);
                    let zebra_id = config.nodes.iter().find_map(|n| match words(&n.line)[..] {
                        ["router-id", id] => id.parse().ok(),
                        _ => None,
                    });
                    let router_id = ospf
                        .as_ref()
                        .and_then(|o| o.router_id)
                        .or(zebra_id)
                        .or_else(|| implicit_router_id(&ifaces));
                    let mut r = Router {
                        name: name.to_string(),
                        config,
                        ifaces,
                        ospf,
                        ospf_ifaces: BTreeMap::new(),
                        bgp,
                        statics,
                        router_id,
                        sysctls: node.sysctls.clone(),
                    };
                    r.ospf_ifaces = ospf_ifaces(&r);
                    for a in r.addresses() {
                        owners.insert(a, name.to_string());
                    }
                    routers.insert(name.to_string(), r);
                }
                NodeKind::Host | NodeKind::Router => {
                    let ifaces = iface_map(name, &node.interfaces);
                    let gateway = node.routes.iter().find(|r| r.dst == "default").and_then(|r| r.via);
                    for i in ifaces.values() {
                        if let Some(c) = i.cidr {
                            owners.insert(c.addr, name.to_string());
                        }
                    }
                    hosts.insert(name.to_string(), Host { ifaces, gateway });
                }
                NodeKind::Bridge => {}
            }
        }
        let mut view = View { lab, routers, hosts, segments, flows: Vec::new(), owners };
        view.flows = lab.checks.iter().filter_map(|c| view.flow(c)).collect();
        view
    }

    /// The node's first address (by interface name), as a check's `to: NODE` means.
    pub fn node_address(&self, node: &str) -> Option<Ipv4Addr> {
        let ifaces = self.routers.get(node).map(|r| &r.ifaces).or(self.hosts.get(node).map(|h| &h.ifaces))?;
        ifaces.iter().filter(|(n, _)| *n != "lo").find_map(|(_, i)| i.cidr.map(|c| c.addr))
    }

    fn resolve(&self, to: &str) -> Option<Ipv4Addr> {
        to.parse().ok().or_else(|| self.node_address(to))
    }

    fn flow(&self, check: &Check) -> Option<Flow> {
        let (from, to) = match check {
            Check::Reach { from, to } | Check::Path { from, to, .. } => (from, self.resolve(to)?),
            Check::Dns { from, server, .. } => (from, self.resolve(server)?),
            Check::Http { from, address, .. } => (from, self.resolve(address)?),
            _ => return None,
        };
        Some(Flow { from: from.clone(), to, owner: self.owners.get(&to).cloned() })
    }

    /// The other ports on the port's segment.
    pub fn peers(&self, node: &str, iface: &str) -> Vec<&Port> {
        let seg = self.iface(node, iface).and_then(|i| i.segment);
        seg.map(|s| self.segments[s].ports.iter().filter(|p| !(p.0 == node && p.1 == iface)).collect())
            .unwrap_or_default()
    }

    pub fn iface(&self, node: &str, iface: &str) -> Option<&Iface> {
        self.routers
            .get(node)
            .and_then(|r| r.ifaces.get(iface))
            .or_else(|| self.hosts.get(node).and_then(|h| h.ifaces.get(iface)))
    }

    pub fn address_of(&self, port: &Port) -> Option<Ipv4Addr> {
        self.iface(&port.0, &port.1).and_then(|i| i.cidr).map(|c| c.addr)
    }

    pub fn is_router(&self, node: &str) -> bool {
        self.routers.contains_key(node)
    }

    pub fn is_host(&self, node: &str) -> bool {
        self.hosts.contains_key(node)
    }

    /// The OSPF neighbours of `router` over `iface`: routers on the segment with OSPF, not
    /// passive, in some area, on their side too.
    pub fn ospf_neighbors(&self, router: &str, iface: &str) -> Vec<&Port> {
        let Some(mine) = self.routers.get(router).and_then(|r| r.ospf_ifaces.get(iface)) else {
            return Vec::new();
        };
        if mine.passive {
            return Vec::new();
        }
        self.peers(router, iface)
            .into_iter()
            .filter(|p| {
                self.routers.get(&p.0).and_then(|r| r.ospf_ifaces.get(&p.1)).is_some_and(|o| !o.passive)
            })
            .collect()
    }

    /// A health check watches the OSPF adjacency between the two routers (either side).
    pub fn ospf_checked(&self, a: &str, b: &str) -> bool {
        let rid = |r: &str| self.routers.get(r).and_then(|r| r.router_id).map(|i| i.to_string());
        let (ra, rb) = (rid(a), rid(b));
        self.lab.checks.iter().any(|c| match c {
            Check::Ospf { device, neighbor } => {
                (device == a && Some(neighbor) == rb.as_ref())
                    || (device == b && Some(neighbor) == ra.as_ref())
            }
            _ => false,
        })
    }

    /// The router that owns `addr`.
    pub fn owner(&self, addr: &str) -> Option<&str> {
        addr.parse::<Ipv4Addr>().ok().and_then(|a| self.owners.get(&a)).map(String::as_str)
    }

    /// A health check watches the BGP session of `router` with `neighbor` (from either side).
    pub fn bgp_checked(&self, router: &str, neighbor: &str) -> bool {
        let peer = self.owner(neighbor);
        let mine: BTreeSet<String> = self
            .routers
            .get(router)
            .map(|r| r.addresses().map(|a| a.to_string()).collect())
            .unwrap_or_default();
        self.lab.checks.iter().any(|c| match c {
            Check::Bgp { device, neighbor: n } => {
                (device == router && n == neighbor) || (Some(device.as_str()) == peer && mine.contains(n))
            }
            _ => false,
        })
    }

    /// The flows (traffic checks) that start at, or go to, a node on this segment.
    pub fn segment_flows(&self, segment: usize) -> Vec<&Flow> {
        let nodes: BTreeSet<&str> = self.segments[segment].ports.iter().map(|p| p.0.as_str()).collect();
        self.flows
            .iter()
            .filter(|f| {
                let owner_here = f.owner.as_deref().is_some_and(|o| nodes.contains(o) && self.is_host(o));
                let from_here = nodes.contains(f.from.as_str()) && self.is_host(&f.from);
                owner_here || from_here
            })
            .collect()
    }

    /// The router a host sends through: the owner of its default gateway.
    pub fn gateway_router(&self, host: &str) -> Option<(&str, &str)> {
        let gw = self.hosts.get(host)?.gateway?;
        let r = self.owners.get(&gw)?;
        let router = self.routers.get(r)?;
        let iface = router.ifaces.iter().find(|(_, i)| i.cidr.map(|c| c.addr) == Some(gw))?.0;
        Some((router.name.as_str(), iface.as_str()))
    }

    /// The check that covers a service on `node` of `kind`, if any.
    pub fn service_checked(&self, node: &str, kind: ServiceKind, port: u16) -> bool {
        let addrs: BTreeSet<String> = self
            .hosts
            .get(node)
            .map(|h| h.ifaces.values().filter_map(|i| i.cidr.map(|c| c.addr.to_string())).collect())
            .unwrap_or_default();
        self.lab.checks.iter().any(|c| match (c, kind) {
            (Check::Dns { server, .. }, ServiceKind::Dns) => addrs.contains(server) || server == node,
            (Check::Http { address, port: p, .. }, ServiceKind::Http) => {
                (addrs.contains(address) || address == node) && *p == port
            }
            _ => false,
        })
    }

    /// Every prefix the lab uses (interfaces, statics), for picking addresses nobody has.
    pub fn used_prefixes(&self) -> Vec<Cidr> {
        let mut out: Vec<Cidr> = Vec::new();
        for r in self.routers.values() {
            out.extend(r.ifaces.values().filter_map(|i| i.cidr));
            out.extend(r.statics.iter().map(|s| s.prefix));
        }
        for h in self.hosts.values() {
            out.extend(h.ifaces.values().filter_map(|i| i.cidr));
        }
        out
    }

    /// An address no interface has, inside `within` (its host part, network and broadcast
    /// excluded), trying from the top of the range down.
    pub fn free_address_in(&self, within: Cidr) -> Option<Ipv4Addr> {
        if within.len >= 31 {
            return None;
        }
        let net = within.network();
        let size = 1u32 << (32 - within.len);
        (1..size - 1).rev().map(|h| Ipv4Addr::from(net + h)).find(|a| !self.owners.contains_key(a))
    }

    /// A /len subnet that overlaps nothing in the lab, near `near` (its third octet moved).
    pub fn free_subnet_near(&self, near: Cidr) -> Option<Cidr> {
        let used = self.used_prefixes();
        let [a, b, c, d] = near.addr.octets();
        (0..=255u8).map(|k| c.wrapping_add(100).wrapping_add(k)).find_map(|c2| {
            let addr = Ipv4Addr::new(a, b, c2, d);
            let cand = Cidr { addr, len: near.len };
            let clash = used.iter().any(|u| {
                let l = u.len.min(cand.len);
                Cidr { addr: u.addr, len: l }.contains(cand.addr)
            });
            (!clash).then_some(cand)
        })
    }
}

/// A node's nftables ruleset as its lab's `linux` lines build it: `nft add ...` commands, and
/// `nft 'add table F T { chain C { ...; ...; }; }'` scripts, read as the listing they make.
pub fn nft_of(lab: &Lab, node: &str) -> Config {
    let mut config = Config::default();
    for line in lab.linux.get(node).into_iter().flatten() {
        let Some(rest) = line.trim().strip_prefix("nft ") else { continue };
        let script = rest.trim().trim_matches(|c| c == '\'' || c == '"');
        let body = script.strip_prefix("add ").unwrap_or(script);
        if body.starts_with("table ") && body.contains('{') {
            let listing = body.replace(';', ";\n").replace('{', "{\n").replace('}', "}\n");
            if let Ok(parsed) = Config::parse(&listing, Dialect::Linux) {
                config.merge(parsed);
            }
        } else {
            let _ = config.apply(&[format!("nft {script}")], Dialect::Linux);
        }
    }
    config
}

/// How each interface of a router takes part in OSPF.
fn ospf_ifaces(r: &Router) -> BTreeMap<String, OspfIface> {
    let mut out = BTreeMap::new();
    let Some(ospf) = &r.ospf else { return out };
    let passive_named: BTreeSet<&str> = ospf
        .lines
        .iter()
        .filter_map(|l| l.line.strip_prefix("passive-interface "))
        .filter(|i| *i != "default")
        .collect();
    let not_passive: BTreeSet<&str> =
        ospf.lines.iter().filter_map(|l| l.line.strip_prefix("no passive-interface ")).collect();
    for (name, iface) in &r.ifaces {
        let lines = r.iface_lines(name);
        let mut o = OspfIface::default();
        let mut area = None;
        for l in &lines {
            match words(l)[..] {
                ["ip", "ospf", "area", a] => area = Some((a.to_string(), None)),
                ["ip", "ospf", "hello-interval", h] => o.hello = h.parse().ok(),
                ["ip", "ospf", "dead-interval", ref rest @ ..] => o.dead = Some(rest.join(" ")),
                ["ip", "ospf", "network", t] => o.network_type = Some(t.to_string()),
                ["ip", "ospf", "cost", c] => o.cost = c.parse().ok(),
                ["ip", "ospf", "authentication", ..] => o.auth = true,
                ["ip", "ospf", "mtu-ignore"] => o.mtu_ignore = true,
                ["ip", "ospf", "passive", ..] => o.passive = true,
                _ => {}
            }
        }
        if area.is_none()
            && let Some(c) = iface.cidr
        {
            // The most specific network statement that covers the address.
            area = ospf
                .networks
                .iter()
                .filter(|(p, _, _)| p.contains(c.addr))
                .max_by_key(|(p, _, _)| p.len)
                .map(|(_, a, line)| (a.clone(), Some(line.clone())));
        }
        let Some((a, network)) = area else { continue };
        o.area = a;
        o.network = network;
        o.passive |= if ospf.passive_default {
            !not_passive.contains(name.as_str())
        } else {
            passive_named.contains(name.as_str())
        };
        if name == "lo" {
            o.passive = true;
        }
        out.insert(name.clone(), o);
    }
    out
}

/// Is `addr` in an OSPF-enabled subnet of the router (so the IGP carries it)?
pub fn ospf_covers(r: &Router, addr: Ipv4Addr) -> bool {
    r.ospf_ifaces.keys().any(|i| r.ifaces.get(i).and_then(|x| x.cidr).is_some_and(|c| c.contains(addr)))
        || r.ospf.as_ref().is_some_and(|o| o.redistribute.contains("connected"))
}
