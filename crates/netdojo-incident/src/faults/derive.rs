//! One function per fault type: the candidates a lab offers, read from its configuration.
//! Each keeps only faults that can break a health check of this lab (a transit link that a
//! check watches, a subnet a flow starts or ends in, a session a check names...).

mod ospf6;

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use netdojo_linux::topology::Cidr;

use super::spf::{self, Graph};
use super::view::{Port, Router, View, ospf_covers};
use crate::catalogue::FaultType;
use crate::fault::{Action, Fault};
use crate::lab::{Check, ServiceKind};

/// A candidate and what it touches: two faults of one task must not touch the same thing.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub fault: Fault,
    pub touches: BTreeSet<String>,
}

fn vtysh(device: &str, lines: &[String]) -> Action {
    Action::Vtysh { device: device.to_string(), lines: lines.to_vec() }
}

fn linux(device: &str, line: impl Into<String>) -> Action {
    Action::Linux { device: device.to_string(), line: line.into() }
}

fn service(device: &str, name: &str, op: impl Into<String>) -> Action {
    Action::Service { device: device.to_string(), service: name.to_string(), op: op.into() }
}

fn cand(t: FaultType, device: &str, detail: String, inject: Vec<Action>, repair: Vec<Action>) -> Candidate {
    Candidate {
        fault: Fault {
            fault_type: t,
            device: device.to_string(),
            detail,
            inject,
            repair,
            symptom: Vec::new(),
        },
        touches: BTreeSet::new(),
    }
}

impl Candidate {
    fn touching(mut self, keys: impl IntoIterator<Item = String>) -> Self {
        self.touches.extend(keys);
        self
    }
}

fn seg_key(view: &View, node: &str, iface: &str) -> Option<String> {
    view.iface(node, iface).and_then(|i| i.segment).map(|s| format!("segment {s}"))
}

fn session_key(a: &str, b: &str) -> String {
    let (x, y) = if a < b { (a, b) } else { (b, a) };
    format!("session {x}-{y}")
}

fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

pub fn derive(view: &View, t: FaultType) -> Vec<Candidate> {
    use FaultType::*;
    let mut out = match t {
        InterfaceDown => interface_down(view),
        WrongAddress => wrong_address(view),
        WrongMask => wrong_mask(view),
        DuplicateAddress => duplicate_address(view),
        MtuMismatch => mtu_mismatch(view),
        OspfAreaMismatch => ospf_area_mismatch(view),
        OspfHelloMismatch => ospf_timer(view, true),
        OspfDeadMismatch => ospf_timer(view, false),
        OspfNetworkTypeMismatch => ospf_network_type(view),
        OspfPassiveInterface => ospf_passive(view),
        OspfAuthMismatch => ospf_auth(view),
        OspfDuplicateRouterId => ospf_duplicate_router_id(view),
        OspfStubMismatch => ospf_stub(view),
        OspfMissingNetwork => ospf_missing_network(view),
        OspfCostSuboptimal => ospf_cost(view),
        Ospf6AreaMismatch => ospf6::area_mismatch(view),
        Ospf6HelloMismatch => ospf6::timer(view, true),
        Ospf6DeadMismatch => ospf6::timer(view, false),
        Ospf6PassiveInterface => ospf6::passive(view),
        Ospf6MissingInterfaceArea => ospf6::missing_area(view),
        Ospf6CostSuboptimal => ospf6::cost(view),
        BgpWrongRemoteAs => bgp_wrong_remote_as(view),
        BgpWrongNeighborAddress => bgp_wrong_neighbor_address(view),
        BgpMissingNextHopSelf => bgp_next_hop_self(view),
        BgpRouteMapDeny => bgp_route_map_deny(view),
        BgpPrefixListDeny => bgp_prefix_list_deny(view),
        BgpMissingNetwork => bgp_missing_network(view),
        BgpMissingRedistribute => bgp_missing_redistribute(view),
        BgpEbgpMultihopMissing => bgp_multihop(view),
        BgpLocalPrefInverted => bgp_local_pref(view),
        BgpAsPathPolicyInverted => bgp_as_path(view),
        BgpMaxPrefixShutdown => bgp_max_prefix(view),
        BgpNeighborShutdown => bgp_shutdown(view),
        BgpDefaultOriginateMissing => bgp_default_originate(view),
        StaticWrongNextHop => static_wrong_next_hop(view),
        StaticBlackhole => static_blackhole(view),
        StaticDistance => static_distance(view),
        StaticMissing => static_missing(view),
        NftForwardDrop => nft_forward_drop(view),
        NftRuleOrder => nft_rule_order(view),
        NftProtocolDrop => nft_protocol_drop(view),
        RpFilterStrict => rp_filter(view),
        HostWrongGateway => host_wrong_gateway(view),
        HostWrongMask => host_wrong_mask(view),
        ForwardingOff => forwarding_off(view),
        DnsRecordWrong => dns_record_wrong(view),
        DnsDown => service_down(view, ServiceKind::Dns),
        HttpDown => service_down(view, ServiceKind::Http),
        ServiceWrongPort => service_wrong_port(view),
    };
    for c in &mut out {
        c.touches.insert(format!("device {}", c.fault.device));
    }
    out
}

// ---------------------------------------------------------------- interfaces

/// The router's interfaces with a link, and whether a check depends on the link: an
/// adjacency or a session over it that a check watches, or a flow from or to a host on it.
fn link_matters(view: &View, router: &str, iface: &str, peers: &[&Port]) -> bool {
    let r = &view.routers[router];
    let checked_peer = peers.iter().any(|p| {
        view.is_router(&p.0) && {
            let adjacency = view.ospf_neighbors(router, iface).contains(p) && view.ospf_checked(router, &p.0);
            let session = peer_session_checked(view, r, p);
            adjacency || session
        }
    });
    let seg = view.iface(router, iface).and_then(|i| i.segment);
    checked_peer || seg.is_some_and(|s| !view.segment_flows(s).is_empty())
}

/// A checked BGP session runs between `r` and the router at `p`, over `p`'s address on the
/// link (or any session between the two routers when it is over the link's addresses).
fn peer_session_checked(view: &View, r: &Router, p: &Port) -> bool {
    let Some(bgp) = &r.bgp else { return false };
    let Some(addr) = view.address_of(p) else { return false };
    bgp.neighbor(&addr.to_string()).is_some() && view.bgp_checked(&r.name, &addr.to_string())
}

fn routed_ifaces<'v>(view: &'v View) -> Vec<(&'v str, &'v str, Vec<&'v Port>)> {
    let mut out = Vec::new();
    for (name, r) in &view.routers {
        for (iface, i) in &r.ifaces {
            if i.segment.is_none() {
                continue;
            }
            let peers = view.peers(name, iface);
            if !peers.is_empty() {
                out.push((name.as_str(), iface.as_str(), peers));
            }
        }
    }
    out
}

fn interface_down(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (r, i, peers) in routed_ifaces(view) {
        if !link_matters(view, r, i, &peers) {
            continue;
        }
        let to: Vec<&str> = peers.iter().map(|p| p.0.as_str()).collect();
        out.push(
            cand(
                FaultType::InterfaceDown,
                r,
                format!("{r} {i} (towards {}) is shut down", to.join(", ")),
                vec![vtysh(r, &[format!("interface {i}"), " shutdown".into()])],
                vec![vtysh(r, &[format!("interface {i}"), " no shutdown".into()])],
            )
            .touching(seg_key(view, r, i)),
        );
    }
    out
}

fn readdress(r: &str, i: &str, old: Cidr, new: Cidr) -> (Vec<Action>, Vec<Action>) {
    (
        vec![linux(r, format!("ip addr del {old} dev {i}")), linux(r, format!("ip addr add {new} dev {i}"))],
        vec![linux(r, format!("ip addr del {new} dev {i}")), linux(r, format!("ip addr add {old} dev {i}"))],
    )
}

fn wrong_address(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (r, i, peers) in routed_ifaces(view) {
        let Some(old) = view.iface(r, i).and_then(|x| x.cidr) else { continue };
        if !link_matters(view, r, i, &peers) {
            continue;
        }
        let lan = peers.iter().any(|p| view.is_host(&p.0));
        // On a LAN the gateway moves to a free address of its subnet; on a router link (a
        // /30 has none free) the address moves to a subnet nobody uses, as a typo would.
        let new = if lan {
            view.free_address_in(old).map(|addr| Cidr { addr, len: old.len })
        } else {
            view.free_subnet_near(old)
        };
        let Some(new) = new else { continue };
        let (inject, repair) = readdress(r, i, old, new);
        out.push(
            cand(FaultType::WrongAddress, r, format!("{r} {i} has {new} instead of {old}"), inject, repair)
                .touching(seg_key(view, r, i)),
        );
    }
    out
}

fn wrong_mask(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (r, i, peers) in routed_ifaces(view) {
        let Some(old) = view.iface(r, i).and_then(|x| x.cidr) else { continue };
        // The shortest narrowing that leaves a neighbour (one a check depends on) outside.
        let matters = |p: &&Port| {
            if view.is_host(&p.0) {
                view.flows.iter().any(|f| f.from == p.0 || f.owner.as_deref() == Some(p.0.as_str()))
            } else {
                let adjacency = view.ospf_neighbors(r, i).contains(p) && view.ospf_checked(r, &p.0);
                adjacency || peer_session_checked(view, &view.routers[r], p)
            }
        };
        let important: Vec<Ipv4Addr> =
            peers.iter().filter(|p| matters(p)).filter_map(|p| view.address_of(p)).collect();
        if important.is_empty() {
            continue;
        }
        let new_len = (old.len + 1..=31)
            .find(|&len| important.iter().any(|a| !Cidr { addr: old.addr, len }.contains(*a)));
        let Some(len) = new_len else { continue };
        let new = Cidr { addr: old.addr, len };
        let (inject, repair) = readdress(r, i, old, new);
        out.push(
            cand(FaultType::WrongMask, r, format!("{r} {i} has {new} instead of {old}"), inject, repair)
                .touching(seg_key(view, r, i)),
        );
    }
    out
}

fn duplicate_address(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (r, i, peers) in routed_ifaces(view) {
        let Some(mine) = view.iface(r, i).and_then(|x| x.cidr) else { continue };
        for p in peers {
            let Some(addr) = view.address_of(p) else { continue };
            // A host whose traffic a check sends out of its subnet: the replies to it now end
            // at the router. A router whose adjacency or session over the link a check watches.
            let matters = if view.is_host(&p.0) {
                view.flows.iter().any(|f| f.from == p.0 && !mine.contains(f.to))
            } else {
                let adjacency = view.ospf_neighbors(r, i).contains(&p) && view.ospf_checked(r, &p.0);
                adjacency || peer_session_checked(view, &view.routers[r], p)
            };
            if !matters {
                continue;
            }
            let dup = Cidr { addr, len: mine.len };
            out.push(
                cand(
                    FaultType::DuplicateAddress,
                    r,
                    format!("{r} {i} also has {addr}, the address of {} {}", p.0, p.1),
                    vec![linux(r, format!("ip addr add {dup} dev {i}"))],
                    vec![linux(r, format!("ip addr del {dup} dev {i}"))],
                )
                .touching(seg_key(view, r, i)),
            );
            break;
        }
    }
    out
}

/// Router interfaces with an OSPF neighbour whose adjacency a check watches.
fn checked_adjacencies<'v>(view: &'v View) -> Vec<(&'v str, &'v str, &'v Port)> {
    let mut out = Vec::new();
    for (name, r) in &view.routers {
        for iface in r.ospf_ifaces.keys() {
            if let Some(p) =
                view.ospf_neighbors(name, iface).into_iter().find(|p| view.ospf_checked(name, &p.0))
            {
                out.push((name.as_str(), iface.as_str(), p));
            }
        }
    }
    out
}

fn mtu_mismatch(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (r, i, p) in checked_adjacencies(view) {
        let ignore = |n: &str, x: &str| view.routers[n].ospf_ifaces.get(x).is_some_and(|o| o.mtu_ignore);
        if ignore(r, i) || ignore(&p.0, &p.1) {
            continue;
        }
        let Some(mtu) = view.iface(r, i).map(|x| x.mtu) else { continue };
        let new = mtu - 100;
        out.push(
            cand(
                FaultType::MtuMismatch,
                r,
                format!("{r} {i} has MTU {new}, {} {} has {mtu}", p.0, p.1),
                vec![linux(r, format!("ip link set dev {i} mtu {new}"))],
                vec![linux(r, format!("ip link set dev {i} mtu {mtu}"))],
            )
            .touching(seg_key(view, r, i)),
        );
    }
    out
}

// ---------------------------------------------------------------- OSPF

fn area_number(a: &str) -> Option<u32> {
    a.parse::<u32>().ok().or_else(|| a.parse::<Ipv4Addr>().ok().map(u32::from))
}

/// An area no router of the lab uses, written the way `like` is (dotted or decimal).
fn unused_area(view: &View, like: &str) -> String {
    let used: BTreeSet<u32> = view
        .routers
        .values()
        .flat_map(|r| r.ospf_ifaces.values().filter_map(|o| area_number(&o.area)))
        .collect();
    let n = (1u32..).find(|n| !used.contains(n)).unwrap_or(99);
    if like.contains('.') { Ipv4Addr::from(n).to_string() } else { n.to_string() }
}

/// How many of the router's interfaces a network statement enables.
fn network_covers(r: &Router, line: &str) -> usize {
    r.ospf_ifaces.values().filter(|o| o.network.as_deref() == Some(line)).count()
}

fn ospf_area_mismatch(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (r, i, p) in checked_adjacencies(view) {
        let router = &view.routers[r];
        let o = &router.ospf_ifaces[i];
        let b = unused_area(view, &o.area);
        let (inject, repair) = match &o.network {
            // FRR refuses a new area on an interface before the old one is removed.
            None => (
                vec![vtysh(
                    r,
                    &[
                        format!("interface {i}"),
                        format!(" no ip ospf area {}", o.area),
                        format!(" ip ospf area {b}"),
                    ],
                )],
                vec![vtysh(
                    r,
                    &[
                        format!("interface {i}"),
                        format!(" no ip ospf area {b}"),
                        format!(" ip ospf area {}", o.area),
                    ],
                )],
            ),
            Some(line) if network_covers(router, line) == 1 => {
                let prefix = words(line).get(1).copied().unwrap_or_default().to_string();
                (
                    vec![vtysh(
                        r,
                        &["router ospf".into(), format!(" no {line}"), format!(" network {prefix} area {b}")],
                    )],
                    vec![vtysh(
                        r,
                        &["router ospf".into(), format!(" no network {prefix} area {b}"), format!(" {line}")],
                    )],
                )
            }
            Some(_) => continue,
        };
        out.push(
            cand(
                FaultType::OspfAreaMismatch,
                r,
                format!("{r} {i} is in OSPF area {b}, {} {} in area {}", p.0, p.1, o.area),
                inject,
                repair,
            )
            .touching(seg_key(view, r, i)),
        );
    }
    out
}

fn ospf_timer(view: &View, hello: bool) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (r, i, p) in checked_adjacencies(view) {
        let o = &view.routers[r].ospf_ifaces[i];
        let (t, key, old, new) = if hello {
            let old = o.hello;
            if o.dead.as_deref().is_some_and(|d| d.starts_with("minimal")) {
                continue;
            }
            let new = old.unwrap_or(10) + 1;
            (FaultType::OspfHelloMismatch, "hello-interval", old.map(|h| h.to_string()), new)
        } else {
            let old: Option<u32> = match &o.dead {
                None => None,
                Some(d) => match d.parse() {
                    Ok(n) => Some(n),
                    Err(_) => continue,
                },
            };
            let new = old.unwrap_or(4 * o.hello.unwrap_or(10)) + 1;
            (FaultType::OspfDeadMismatch, "dead-interval", old.map(|d| d.to_string()), new)
        };
        let restore = match &old {
            Some(v) => format!(" ip ospf {key} {v}"),
            None => format!(" no ip ospf {key}"),
        };
        out.push(
            cand(
                t,
                r,
                format!(
                    "{r} {i} has OSPF {key} {new}, {} {} has {}",
                    p.0,
                    p.1,
                    old.unwrap_or_else(|| "the default".into())
                ),
                vec![vtysh(r, &[format!("interface {i}"), format!(" ip ospf {key} {new}")])],
                vec![vtysh(r, &[format!("interface {i}"), restore])],
            )
            .touching(seg_key(view, r, i)),
        );
    }
    out
}

fn ospf_network_type(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (r, i, p) in checked_adjacencies(view) {
        let o = &view.routers[r].ospf_ifaces[i];
        let theirs = view.routers[&p.0].ospf_ifaces.get(&p.1).and_then(|x| x.network_type.clone());
        let mine = o.network_type.clone();
        let norm = |t: &Option<String>| t.clone().unwrap_or_else(|| "broadcast".into());
        if norm(&mine) != norm(&theirs) {
            continue;
        }
        let new = if norm(&mine) == "point-to-point" { "broadcast" } else { "point-to-point" };
        let restore = match &mine {
            Some(t) => format!(" ip ospf network {t}"),
            None => " no ip ospf network".to_string(),
        };
        out.push(
            cand(
                FaultType::OspfNetworkTypeMismatch,
                r,
                format!("{r} {i} is OSPF {new}, {} {} is {}", p.0, p.1, norm(&theirs)),
                vec![vtysh(r, &[format!("interface {i}"), format!(" ip ospf network {new}")])],
                vec![vtysh(r, &[format!("interface {i}"), restore])],
            )
            .touching(seg_key(view, r, i)),
        );
    }
    out
}

fn ospf_passive(view: &View) -> Vec<Candidate> {
    checked_adjacencies(view)
        .into_iter()
        .map(|(r, i, p)| {
            cand(
                FaultType::OspfPassiveInterface,
                r,
                format!("{r} {i} (towards {}) is passive in OSPF", p.0),
                vec![vtysh(r, &[format!("interface {i}"), " ip ospf passive".into()])],
                vec![vtysh(r, &[format!("interface {i}"), " no ip ospf passive".into()])],
            )
            .touching(seg_key(view, r, i))
        })
        .collect()
}

fn ospf_auth(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (r, i, p) in checked_adjacencies(view) {
        let auth = |n: &str, x: &str| view.routers[n].ospf_ifaces.get(x).is_some_and(|o| o.auth);
        if auth(r, i) || auth(&p.0, &p.1) {
            continue;
        }
        out.push(
            cand(
                FaultType::OspfAuthMismatch,
                r,
                format!("{r} {i} requires OSPF MD5 authentication, {} {} sends none", p.0, p.1),
                vec![vtysh(
                    r,
                    &[
                        format!("interface {i}"),
                        " ip ospf authentication message-digest".into(),
                        " ip ospf message-digest-key 1 md5 netdojo".into(),
                    ],
                )],
                vec![vtysh(
                    r,
                    &[
                        format!("interface {i}"),
                        " no ip ospf message-digest-key 1".into(),
                        " no ip ospf authentication".into(),
                    ],
                )],
            )
            .touching(seg_key(view, r, i)),
        );
    }
    out
}

/// `router ospf` rebuilt with another router-id: FRR applies a new router-id only once the
/// process restarts, which configuration mode can do only by removing and re-adding it.
fn rebuild_ospf(router: &Router, id: Option<&str>) -> Vec<String> {
    let mut lines = vec!["no router ospf".to_string(), "router ospf".to_string()];
    if let Some(id) = id {
        lines.push(format!(" ospf router-id {id}"));
    }
    if let Some(o) = &router.ospf {
        for l in &o.lines {
            if !matches!(words(&l.line)[..], ["ospf", "router-id", _] | ["router-id", _]) {
                lines.push(format!(" {}", l.line));
                for c in &l.children {
                    lines.push(format!("  {}", c.line));
                }
            }
        }
    }
    lines
}

fn ospf_duplicate_router_id(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (r, _i, p) in checked_adjacencies(view) {
        if !seen.insert(r) {
            continue;
        }
        let router = &view.routers[r];
        let (Some(mine), Some(twin)) = (router.router_id, view.routers[&p.0].router_id) else { continue };
        let explicit = router.ospf.as_ref().and_then(|o| o.router_id).map(|a| a.to_string());
        out.push(cand(
            FaultType::OspfDuplicateRouterId,
            r,
            format!("{r} uses OSPF router-id {twin}, {}'s, instead of {mine}", p.0),
            vec![vtysh(r, &rebuild_ospf(router, Some(&twin.to_string())))],
            vec![vtysh(r, &rebuild_ospf(router, explicit.as_deref()))],
        ));
    }
    out
}

fn ospf_stub(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (r, i, p) in checked_adjacencies(view) {
        let router = &view.routers[r];
        let area = &router.ospf_ifaces[i].area;
        if area_number(area) == Some(0) || !seen.insert((r, area.clone())) {
            continue;
        }
        let stub = router.ospf.as_ref().and_then(|o| o.stub.get(area));
        let (inject, repair, what) = match stub {
            Some(line) => (format!(" no area {area} stub"), format!(" {line}"), "is not stub"),
            None => (format!(" area {area} stub"), format!(" no area {area} stub"), "is stub"),
        };
        out.push(
            cand(
                FaultType::OspfStubMismatch,
                r,
                format!("on {r}, area {area} {what}; not so on {} (and the rest of the area)", p.0),
                vec![vtysh(r, &["router ospf".into(), inject])],
                vec![vtysh(r, &["router ospf".into(), repair])],
            )
            .touching(seg_key(view, r, i)),
        );
    }
    out
}

fn ospf_missing_network(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (name, r) in &view.routers {
        let Some(ospf) = &r.ospf else { continue };
        let redistributes = ospf.redistribute.contains("connected");
        // What an interface's absence from OSPF breaks: an adjacency a check watches, a
        // subnet a flow uses (unless connected subnets are redistributed anyway), a loopback
        // a checked BGP session runs between.
        let matters = |iface: &str| -> bool {
            let adjacency = view.ospf_neighbors(name, iface).iter().any(|p| view.ospf_checked(name, &p.0));
            let seg = r.ifaces.get(iface).and_then(|x| x.segment);
            let lan = !redistributes && seg.is_some_and(|s| !view.segment_flows(s).is_empty());
            let lo = iface == "lo"
                && r.ifaces.get(iface).and_then(|x| x.cidr).is_some_and(|c| {
                    view.routers.values().any(|o| {
                        o.bgp.as_ref().is_some_and(|b| {
                            b.neighbor(&c.addr.to_string()).is_some()
                                && view.bgp_checked(&o.name, &c.addr.to_string())
                        })
                    })
                });
            adjacency || lan || lo
        };
        for (prefix, area, line) in &ospf.networks {
            let covered: Vec<&String> = r
                .ospf_ifaces
                .iter()
                .filter(|(_, o)| o.network.as_deref() == Some(line))
                .map(|(i, _)| i)
                .collect();
            if !covered.iter().any(|i| matters(i)) {
                continue;
            }
            out.push(
                cand(
                    FaultType::OspfMissingNetwork,
                    name,
                    format!(
                        "{name} lacks `network {prefix} area {area}` ({})",
                        covered.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                    vec![vtysh(name, &["router ospf".into(), format!(" no {line}")])],
                    vec![vtysh(name, &["router ospf".into(), format!(" {line}")])],
                )
                .touching(covered.iter().filter_map(|i| seg_key(view, name, i))),
            );
        }
        for (iface, o) in &r.ospf_ifaces {
            if o.network.is_some() || !matters(iface) {
                continue;
            }
            out.push(
                cand(
                    FaultType::OspfMissingNetwork,
                    name,
                    format!("{name} {iface} lacks `ip ospf area {}`", o.area),
                    vec![vtysh(
                        name,
                        &[format!("interface {iface}"), format!(" no ip ospf area {}", o.area)],
                    )],
                    vec![vtysh(name, &[format!("interface {iface}"), format!(" ip ospf area {}", o.area)])],
                )
                .touching(seg_key(view, name, iface)),
            );
        }
    }
    out
}

/// The router a flow enters the routed network at, and the one it leaves it at.
fn flow_ends(view: &View, from: &str, to: Ipv4Addr) -> Option<(String, String)> {
    let src = if view.is_router(from) { from.to_string() } else { view.gateway_router(from)?.0.to_string() };
    let dst = view
        .routers
        .values()
        .find(|r| r.ifaces.values().any(|i| i.cidr.is_some_and(|c| c.contains(to))))?
        .name
        .clone();
    Some((src, dst))
}

/// The routers of the path are OSPF-only: no BGP, no static route can move it.
fn ospf_only(view: &View, routers: &[String]) -> bool {
    // A floating static (distance above OSPF's 110) waits behind OSPF's route.
    routers.iter().all(|r| {
        view.routers
            .get(r)
            .is_some_and(|x| x.bgp.is_none() && x.statics.iter().all(|s| s.distance.is_some_and(|d| d > 110)))
    })
}

/// What a check sees of OSPF's paths: a path check's routers, or a route check's next hop.
enum Watched<'c> {
    Via(&'c [String]),
    NextHop(String),
}

fn ospf_cost(view: &View) -> Vec<Candidate> {
    let graph = Graph::new(view);
    let mut watched: Vec<(String, String, Watched)> = Vec::new();
    for check in &view.lab.checks {
        match check {
            Check::Path { from, to, via } => {
                let Some(to) = to.parse().ok().or(view.node_address(to)) else { continue };
                if let Some((src, dst)) = flow_ends(view, from, to) {
                    watched.push((src, dst, Watched::Via(via)));
                }
            }
            Check::Route { device, prefix, nexthop: Some(nh), .. } => {
                let Some(p) = Cidr::parse(prefix) else { continue };
                let owner = view.routers.values().find(|r| {
                    r.ifaces.values().any(|i| i.cidr.is_some_and(|c| c.len <= p.len && c.contains(p.addr)))
                });
                if let Some(owner) = owner {
                    watched.push((device.clone(), owner.name.clone(), Watched::NextHop(nh.clone())));
                }
            }
            _ => {}
        }
    }
    let sees = |w: &Watched, src: &str, path: &[spf::Edge]| -> bool {
        match w {
            Watched::Via(via) => spf::passes(&spf::routers_of(src, path), via),
            Watched::NextHop(nh) => path.first().is_some_and(|e| {
                view.address_of(&(e.to.clone(), e.to_iface.clone())).is_some_and(|a| a.to_string() == *nh)
            }),
        }
    };
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (src, dst, w) in &watched {
        let Some(path) = graph.unique_path(src, dst, &|e| e.cost) else { continue };
        let routers = spf::routers_of(src, &path);
        if !sees(w, src, &path) || !ospf_only(view, &routers) {
            continue;
        }
        for e in &path {
            let high = 1000;
            let Some(new) = graph.unique_path(src, dst, &|x| if x == e { high } else { x.cost }) else {
                continue;
            };
            if sees(w, src, &new) || !seen.insert((e.from.clone(), e.iface.clone())) {
                continue;
            }
            let old = view.routers[&e.from].ospf_ifaces[&e.iface].cost;
            let restore = match old {
                Some(c) => format!(" ip ospf cost {c}"),
                None => " no ip ospf cost".into(),
            };
            out.push(
                cand(
                    FaultType::OspfCostSuboptimal,
                    &e.from,
                    format!(
                        "{} {} has OSPF cost {high}: {src} reaches {dst} by {} instead of {}",
                        e.from,
                        e.iface,
                        spf::routers_of(src, &new).join(","),
                        routers.join(",")
                    ),
                    vec![vtysh(
                        &e.from,
                        &[format!("interface {}", e.iface), format!(" ip ospf cost {high}")],
                    )],
                    vec![vtysh(&e.from, &[format!("interface {}", e.iface), restore])],
                )
                .touching(seg_key(view, &e.from, &e.iface)),
            );
        }
    }
    out
}

// ---------------------------------------------------------------- BGP

/// Every BGP neighbour with a session a check watches: `(router, neighbour address)`.
fn checked_sessions<'v>(view: &'v View) -> Vec<(&'v Router, &'v super::view::Neighbor)> {
    let mut out = Vec::new();
    for r in view.routers.values() {
        let Some(bgp) = &r.bgp else { continue };
        for n in &bgp.neighbors {
            if view.bgp_checked(&r.name, &n.addr) {
                out.push((r, n));
            }
        }
    }
    out
}

fn session_touch(view: &View, r: &Router, addr: &str) -> String {
    session_key(&r.name, view.owner(addr).unwrap_or(addr))
}

/// `router bgp N` (and its address family when the line sits in one) around `lines`.
fn in_bgp(r: &Router, af: &Option<String>, lines: &[String]) -> Vec<String> {
    let header = r.bgp.as_ref().map(|b| b.header.clone()).unwrap_or_default();
    let mut out = vec![header];
    match af {
        Some(af) => {
            out.push(format!(" {af}"));
            out.extend(lines.iter().map(|l| format!("  {l}")));
        }
        None => out.extend(lines.iter().map(|l| format!(" {l}"))),
    }
    out
}

fn bgp_wrong_remote_as(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (r, n) in checked_sessions(view) {
        let Ok(asn) = n.remote_as.parse::<u32>() else { continue };
        let local = r.bgp.as_ref().map(|b| b.asn.clone()).unwrap_or_default();
        let wrong = (1..).map(|k| asn + k).find(|a| a.to_string() != local).unwrap_or(asn + 1);
        out.push(
            cand(
                FaultType::BgpWrongRemoteAs,
                &r.name,
                format!("{} has neighbor {} remote-as {wrong} instead of {asn}", r.name, n.addr),
                vec![vtysh(&r.name, &in_bgp(r, &None, &[format!("neighbor {} remote-as {wrong}", n.addr)]))],
                vec![vtysh(&r.name, &in_bgp(r, &None, &[format!("neighbor {} remote-as {asn}", n.addr)]))],
            )
            .touching([session_touch(view, r, &n.addr)]),
        );
    }
    out
}

/// A neighbour's configuration, written for another address, as typed lines (top-level ones
/// first, then each address family's).
fn neighbor_lines(r: &Router, n: &super::view::Neighbor, addr: &str) -> Vec<String> {
    let bgp = r.bgp.as_ref().map(|b| b.header.clone()).unwrap_or_default();
    let mut out = vec![bgp];
    let rewrite = |l: &str| l.replacen(&format!("neighbor {} ", n.addr), &format!("neighbor {addr} "), 1);
    for (af, l) in &n.lines {
        if af.is_none() {
            out.push(format!(" {}", rewrite(l)));
        }
    }
    let mut afs: Vec<&String> = n.lines.iter().filter_map(|(af, _)| af.as_ref()).collect();
    afs.dedup();
    for af in afs {
        out.push(format!(" {af}"));
        for (a, l) in &n.lines {
            if a.as_ref() == Some(af) {
                out.push(format!("  {}", rewrite(l)));
            }
        }
        out.push(" exit-address-family".into());
    }
    out
}

fn bgp_wrong_neighbor_address(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (r, n) in checked_sessions(view) {
        let Ok(addr) = n.addr.parse::<Ipv4Addr>() else { continue };
        let subnet = r.ifaces.values().filter_map(|i| i.cidr).find(|c| c.contains(addr) && c.len < 32);
        let wrong = subnet.and_then(|c| view.free_address_in(c)).or_else(|| {
            let [a, b, c, d] = addr.octets();
            (1..=250u8)
                .map(|k| Ipv4Addr::new(a, b, c, d.wrapping_add(k)))
                .find(|x| !view.owners.contains_key(x) && x.octets()[3] != 0 && x.octets()[3] != 255)
        });
        let Some(wrong) = wrong else { continue };
        let header = r.bgp.as_ref().map(|b| b.header.clone()).unwrap_or_default();
        let mut inject = vec![header.clone(), format!(" no neighbor {}", n.addr)];
        inject.extend(neighbor_lines(r, n, &wrong.to_string()).into_iter().skip(1));
        let mut repair = vec![header, format!(" no neighbor {wrong}")];
        repair.extend(neighbor_lines(r, n, &n.addr).into_iter().skip(1));
        out.push(
            cand(
                FaultType::BgpWrongNeighborAddress,
                &r.name,
                format!("{} peers with {wrong} instead of {}", r.name, n.addr),
                vec![vtysh(&r.name, &inject)],
                vec![vtysh(&r.name, &repair)],
            )
            .touching([session_touch(view, r, &n.addr)]),
        );
    }
    out
}

/// A neighbour's line that starts with `neighbor ADDR KEYWORD`, with its address family.
fn neighbor_line<'n>(n: &'n super::view::Neighbor, keyword: &str) -> Option<&'n (Option<String>, String)> {
    n.lines.iter().find(|(_, l)| words(l).get(2) == Some(&keyword))
}

/// Removing one line of a neighbour's configuration (and re-adding it to repair).
fn drop_neighbor_line(
    view: &View,
    t: FaultType,
    keyword: &str,
    keep: impl Fn(&Router, &super::view::Neighbor) -> bool,
    detail: impl Fn(&Router, &super::view::Neighbor) -> String,
) -> Vec<Candidate> {
    let mut out = Vec::new();
    for r in view.routers.values() {
        let Some(bgp) = &r.bgp else { continue };
        for n in &bgp.neighbors {
            let Some((af, line)) = neighbor_line(n, keyword) else { continue };
            if !keep(r, n) {
                continue;
            }
            out.push(
                cand(
                    t,
                    &r.name,
                    detail(r, n),
                    vec![vtysh(&r.name, &in_bgp(r, af, &[format!("no {line}")]))],
                    vec![vtysh(&r.name, &in_bgp(r, af, std::slice::from_ref(line)))],
                )
                .touching([session_touch(view, r, &n.addr)]),
            );
        }
    }
    out
}

fn is_ibgp(r: &Router, n: &super::view::Neighbor) -> bool {
    r.bgp.as_ref().is_some_and(|b| b.asn == n.remote_as) || n.remote_as == "internal"
}

fn bgp_next_hop_self(view: &View) -> Vec<Candidate> {
    drop_neighbor_line(
        view,
        FaultType::BgpMissingNextHopSelf,
        "next-hop-self",
        |r, n| {
            // It matters when the router has an eBGP neighbour whose address the IGP does
            // not carry: its routes reach the iBGP peer with that next hop.
            let Some(bgp) = &r.bgp else { return false };
            is_ibgp(r, n)
                && bgp.neighbors.iter().any(|e| {
                    !is_ibgp(r, e)
                        && !is_backup(view, r, e)
                        && e.addr.parse().is_ok_and(|a| !ospf_covers(r, a))
                })
        },
        |r, n| format!("{} does not set next-hop-self towards its iBGP peer {}", r.name, n.addr),
    )
}

fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '-' }).collect()
}

/// Another eBGP session of the AS (on this router or another of its routers) to the same
/// neighbouring AS as `n`: what `n` sends also comes from there (a leaf's two spines, a
/// spine's peer spine), so losing `n`'s routes breaks nothing.
fn redundant(view: &View, r: &Router, n: &super::view::Neighbor) -> bool {
    let Some(asn) = r.bgp.as_ref().map(|b| b.asn.clone()) else { return false };
    !is_ibgp(r, n)
        && view.routers.values().filter(|o| o.bgp.as_ref().is_some_and(|b| b.asn == asn)).any(|o| {
            o.bgp
                .iter()
                .flat_map(|b| b.neighbors.iter())
                .any(|x| x.remote_as == n.remote_as && !(o.name == r.name && x.addr == n.addr))
        })
}

/// The neighbour entry the peer at `n` has for `r` (the session seen from the other side).
fn reverse<'v>(
    view: &'v View,
    r: &Router,
    n: &super::view::Neighbor,
) -> Option<(&'v Router, &'v super::view::Neighbor)> {
    let peer = view.owner(&n.addr).and_then(|p| view.routers.get(p))?;
    let mine: BTreeSet<String> = r.addresses().map(|a| a.to_string()).collect();
    let back = peer.bgp.as_ref()?.neighbors.iter().find(|x| mine.contains(&x.addr))?;
    Some((peer, back))
}

/// A backup neighbour: its routes lose anyway (an eBGP neighbour whose inbound route-map
/// lowers the local preference; an iBGP neighbour whose own exits are all such).
fn is_backup(view: &View, r: &Router, n: &super::view::Neighbor) -> bool {
    let lowered = |r: &Router, n: &super::view::Neighbor| {
        applied_route_maps(r, "in").into_iter().filter(|(x, _)| x.addr == n.addr).any(|(_, rm)| {
            r.route_maps().into_iter().filter(|e| words(&e.line).get(1) == Some(&rm.as_str())).any(|e| {
                e.children.iter().any(|c| match words(&c.line)[..] {
                    ["set", "local-preference", v] => v.parse::<u32>().is_ok_and(|v| v < 100),
                    _ => false,
                })
            })
        })
    };
    if !is_ibgp(r, n) {
        return lowered(r, n);
    }
    let Some(peer) = view.owner(&n.addr).and_then(|p| view.routers.get(p)) else { return false };
    let exits: Vec<&super::view::Neighbor> =
        peer.bgp.iter().flat_map(|b| b.neighbors.iter()).filter(|x| !is_ibgp(peer, x)).collect();
    !exits.is_empty() && exits.iter().all(|x| lowered(peer, x))
}

fn bgp_route_map_deny(view: &View) -> Vec<Candidate> {
    // The operator attaches a route-map that denies everything to the session (in place of
    // the one it had, if any). Attaching takes effect at once, whatever the lab's route-map
    // delay timer (a changed route-map waits for it; with `bgp route-map delay-timer 0`, for
    // ever).
    let mut out = Vec::new();
    for (r, n) in checked_sessions(view) {
        if redundant(view, r, n) || is_backup(view, r, n) {
            continue;
        }
        let existing = n.lines.iter().find_map(|(af, l)| match words(l)[..] {
            [_, _, "route-map", name, "in"] => Some((af.clone(), name.to_string())),
            _ => None,
        });
        let af = existing
            .as_ref()
            .map(|(af, _)| af.clone())
            .unwrap_or_else(|| n.lines.iter().find_map(|(af, _)| af.clone()).or_else(|| default_af(r)));
        let rm = format!("FROM-{}", sanitize(&n.addr));
        let mut inject = vec![format!("route-map {rm} deny 10"), "exit".into()];
        inject.extend(in_bgp(r, &af, &[format!("neighbor {} route-map {rm} in", n.addr)]));
        let restore = match &existing {
            Some((_, old)) => format!("neighbor {} route-map {old} in", n.addr),
            None => format!("no neighbor {} route-map {rm} in", n.addr),
        };
        let mut repair = in_bgp(r, &af, &[restore]);
        repair.push("exit".into());
        repair.push(format!("no route-map {rm} deny 10"));
        let instead = existing.map(|(_, old)| format!(" instead of {old}")).unwrap_or_default();
        out.push(
            cand(
                FaultType::BgpRouteMapDeny,
                &r.name,
                format!(
                    "{} applies route-map {rm}, which denies everything, to routes from {}{instead}",
                    r.name, n.addr
                ),
                vec![vtysh(&r.name, &inject)],
                vec![vtysh(&r.name, &repair)],
            )
            .touching([session_touch(view, r, &n.addr)]),
        );
    }
    out
}

/// The address family a router's neighbours are configured in, when it has one.
fn default_af(r: &Router) -> Option<String> {
    r.bgp
        .as_ref()
        .and_then(|b| b.neighbors.iter().flat_map(|n| n.lines.iter()).find_map(|(af, _)| af.clone()))
}

fn bgp_prefix_list_deny(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (r, n) in checked_sessions(view) {
        if redundant(view, r, n) || is_backup(view, r, n) {
            continue;
        }
        let af = n.lines.iter().find_map(|(af, _)| af.clone()).or_else(|| default_af(r));
        let existing = n.lines.iter().find_map(|(_, l)| match words(l)[..] {
            [_, _, "prefix-list", name, "in"] => Some(name.to_string()),
            _ => None,
        });
        let (inject, repair, detail) = match existing {
            Some(pl) => (
                vec![vtysh(&r.name, &[format!("ip prefix-list {pl} seq 1 deny 0.0.0.0/0 le 32")])],
                vec![vtysh(&r.name, &[format!("no ip prefix-list {pl} seq 1 deny 0.0.0.0/0 le 32")])],
                format!("{}'s prefix-list {pl} (in from {}) starts by denying everything", r.name, n.addr),
            ),
            None => {
                let pl = format!("FROM-{}", sanitize(&n.addr));
                let mut inject = vec![format!("ip prefix-list {pl} seq 5 deny 0.0.0.0/0 le 32")];
                inject.extend(in_bgp(r, &af, &[format!("neighbor {} prefix-list {pl} in", n.addr)]));
                let mut repair = in_bgp(r, &af, &[format!("no neighbor {} prefix-list {pl} in", n.addr)]);
                repair.push("exit".into());
                repair.push(format!("no ip prefix-list {pl} seq 5 deny 0.0.0.0/0 le 32"));
                (
                    vec![vtysh(&r.name, &inject)],
                    vec![vtysh(&r.name, &repair)],
                    format!(
                        "{} filters routes from {} through prefix-list {pl}, which denies them all",
                        r.name, n.addr
                    ),
                )
            }
        };
        out.push(
            cand(FaultType::BgpPrefixListDeny, &r.name, detail, inject, repair)
                .touching([session_touch(view, r, &n.addr)]),
        );
    }
    out
}

/// Some flow starts or ends inside `prefix`.
fn flows_touch(view: &View, prefix: Cidr) -> bool {
    view.flows.iter().any(|f| {
        prefix.contains(f.to)
            || view
                .hosts
                .get(&f.from)
                .is_some_and(|h| h.ifaces.values().any(|i| i.cidr.is_some_and(|c| prefix.contains(c.addr))))
    }) || view.lab.checks.iter().any(|c| match c {
        Check::Route { prefix: p, .. } => Cidr::parse(p).is_some_and(|p| prefix.contains(p.addr)),
        _ => false,
    })
}

fn bgp_missing_network(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for r in view.routers.values() {
        let Some(bgp) = &r.bgp else { continue };
        for (af, line) in &bgp.networks {
            let Some(prefix) = words(line).get(1).and_then(|p| Cidr::parse(p)) else { continue };
            // Another router of the AS announcing it too keeps it announced (iBGP carries it).
            let twin = view.routers.values().any(|o| {
                o.name != r.name
                    && o.bgp.as_ref().is_some_and(|b| {
                        b.asn == bgp.asn
                            && b.networks.iter().any(|(_, l)| words(l).get(1) == words(line).get(1))
                    })
            });
            // A default route the router originates covers the prefix for its neighbours.
            let default = bgp.neighbors.iter().any(|x| neighbor_line(x, "default-originate").is_some());
            if twin || default || !flows_touch(view, prefix) {
                continue;
            }
            out.push(cand(
                FaultType::BgpMissingNetwork,
                &r.name,
                format!("{} no longer announces {prefix} in BGP", r.name),
                vec![vtysh(&r.name, &in_bgp(r, af, &[format!("no {line}")]))],
                vec![vtysh(&r.name, &in_bgp(r, af, std::slice::from_ref(line)))],
            ));
        }
    }
    out
}

fn bgp_missing_redistribute(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for r in view.routers.values() {
        let Some(bgp) = &r.bgp else { continue };
        let announced: Vec<Cidr> =
            bgp.networks.iter().filter_map(|(_, l)| words(l).get(1).and_then(|p| Cidr::parse(p))).collect();
        for (af, line) in &bgp.redistribute {
            // The prefixes it brings in: connected subnets or static prefixes not announced
            // by a network statement; OSPF's are the other routers' subnets.
            let brought: Vec<Cidr> = match words(line).get(1).copied() {
                Some("connected") => r
                    .ifaces
                    .values()
                    .filter_map(|i| i.cidr)
                    .map(|c| Cidr { addr: Ipv4Addr::from(c.network()), len: c.len })
                    .collect(),
                Some("static") => r.statics.iter().map(|s| s.prefix).collect(),
                Some("ospf") => view
                    .routers
                    .values()
                    .filter(|o| o.name != r.name && o.ospf.is_some() && o.bgp.is_none())
                    .flat_map(|o| o.ifaces.values().filter_map(|i| i.cidr))
                    .collect(),
                _ => continue,
            };
            let matters = brought
                .iter()
                .filter(|p| !announced.iter().any(|a| a.len <= p.len && a.contains(p.addr)))
                .any(|p| flows_touch(view, *p));
            if !matters {
                continue;
            }
            out.push(cand(
                FaultType::BgpMissingRedistribute,
                &r.name,
                format!("{} no longer has `{line}` in BGP", r.name),
                vec![vtysh(&r.name, &in_bgp(r, af, &[format!("no {line}")]))],
                vec![vtysh(&r.name, &in_bgp(r, af, std::slice::from_ref(line)))],
            ));
        }
    }
    out
}

fn bgp_multihop(view: &View) -> Vec<Candidate> {
    drop_neighbor_line(
        view,
        FaultType::BgpEbgpMultihopMissing,
        "ebgp-multihop",
        |r, n| !is_ibgp(r, n) && view.bgp_checked(&r.name, &n.addr),
        |r, n| format!("{}'s eBGP session with {} (between loopbacks) lacks ebgp-multihop", r.name, n.addr),
    )
}

fn bgp_default_originate(view: &View) -> Vec<Candidate> {
    drop_neighbor_line(
        view,
        FaultType::BgpDefaultOriginateMissing,
        "default-originate",
        // The receiver must use this default, not hold it as a backup.
        |r, n| !reverse(view, r, n).is_some_and(|(peer, back)| is_backup(view, peer, back)),
        |r, n| format!("{} no longer originates a default route to {}", r.name, n.addr),
    )
}

fn bgp_shutdown(view: &View) -> Vec<Candidate> {
    checked_sessions(view)
        .into_iter()
        .map(|(r, n)| {
            cand(
                FaultType::BgpNeighborShutdown,
                &r.name,
                format!("{}'s BGP neighbour {} is shut down", r.name, n.addr),
                vec![vtysh(&r.name, &in_bgp(r, &None, &[format!("neighbor {} shutdown", n.addr)]))],
                vec![vtysh(&r.name, &in_bgp(r, &None, &[format!("no neighbor {} shutdown", n.addr)]))],
            )
            .touching([session_touch(view, r, &n.addr)])
        })
        .collect()
}

fn bgp_max_prefix(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (r, n) in checked_sessions(view) {
        // The peer must send at least two prefixes for a limit of one to trip: count what the
        // peer announces by network statements and redistribution of its connected subnets.
        let Some(peer) = view.owner(&n.addr).and_then(|p| view.routers.get(p)) else { continue };
        let Some(pbgp) = &peer.bgp else { continue };
        // What it originates: network statements, a default, and what it redistributes
        // without a route-map (its connected subnets, its static routes; OSPF's: many).
        let redistributed: usize = pbgp
            .redistribute
            .iter()
            .map(|(_, l)| match words(l)[..] {
                ["redistribute", "connected"] => peer.ifaces.values().filter(|i| i.cidr.is_some()).count(),
                ["redistribute", "static"] => peer.statics.len(),
                ["redistribute", "ospf"] => 2,
                _ => 0,
            })
            .sum();
        let sends = pbgp.networks.len()
            + redistributed
            + pbgp.neighbors.iter().filter(|x| neighbor_line(x, "default-originate").is_some()).count();
        // An inbound filter on the router may pass fewer than that: only a route-map that
        // permits everything (no match) is known to pass them all.
        let filtered = n.lines.iter().any(|(_, l)| match words(l)[..] {
            [_, _, "prefix-list" | "distribute-list" | "filter-list", _, "in"] => true,
            [_, _, "route-map", rm, "in"] => !r.route_maps().iter().any(|e| {
                words(&e.line).get(1) == Some(&rm)
                    && words(&e.line).get(2) == Some(&"permit")
                    && !e.children.iter().any(|c| c.line.starts_with("match "))
            }),
            _ => false,
        });
        if sends < 2 || filtered {
            continue;
        }
        let af = n.lines.iter().find_map(|(af, _)| af.clone()).or_else(|| default_af(r));
        let existing = neighbor_line(n, "maximum-prefix");
        let (inject, repair) = match existing {
            Some((a, line)) => (
                in_bgp(r, a, &[format!("neighbor {} maximum-prefix 1", n.addr)]),
                in_bgp(r, a, &[format!("no neighbor {} maximum-prefix 1", n.addr), line.clone()]),
            ),
            None => (
                in_bgp(r, &af, &[format!("neighbor {} maximum-prefix 1", n.addr)]),
                in_bgp(r, &af, &[format!("no neighbor {} maximum-prefix 1", n.addr)]),
            ),
        };
        // FRR keeps a session that overflowed down until it is reset: the repair lifts the
        // limit, then shuts the neighbour down and brings it back.
        let mut repair = repair;
        repair.extend(
            in_bgp(
                r,
                &None,
                &[format!("neighbor {} shutdown", n.addr), format!("no neighbor {} shutdown", n.addr)],
            )
            .into_iter()
            .skip(1),
        );
        out.push(
            cand(
                FaultType::BgpMaxPrefixShutdown,
                &r.name,
                format!("{} accepts at most 1 prefix from {}, which sends more", r.name, n.addr),
                vec![vtysh(&r.name, &inject)],
                vec![vtysh(&r.name, &repair)],
            )
            .touching([session_touch(view, r, &n.addr)]),
        );
    }
    out
}

/// Route-maps a router applies to a neighbour in `dir`: `(neighbour, route-map name)`.
fn applied_route_maps<'r>(r: &'r Router, dir: &str) -> Vec<(&'r super::view::Neighbor, String)> {
    let Some(bgp) = &r.bgp else { return Vec::new() };
    let mut out = Vec::new();
    for n in &bgp.neighbors {
        for (_, l) in &n.lines {
            if let [_, _, "route-map", name, d] = words(l)[..]
                && d == dir
            {
                out.push((n, name.to_string()));
            }
        }
    }
    out
}

/// The local preferences that inbound route-maps set on the routers of `r`'s AS.
fn local_prefs(view: &View, r: &Router) -> Vec<u32> {
    let asn = r.bgp.as_ref().map(|b| b.asn.clone());
    let mut out = Vec::new();
    for o in view.routers.values().filter(|o| o.bgp.as_ref().map(|b| b.asn.clone()) == asn) {
        for (_, rm) in applied_route_maps(o, "in") {
            for e in o.route_maps().into_iter().filter(|e| words(&e.line).get(1) == Some(&rm.as_str())) {
                out.extend(e.children.iter().filter_map(|c| match words(&c.line)[..] {
                    ["set", "local-preference", v] => v.parse::<u32>().ok(),
                    _ => None,
                }));
            }
        }
    }
    out
}

/// A policy changed by swapping route-maps: the operator writes `RM-NEW`, a copy of the
/// session's route-map `rm` with `edit` applied to its entries, and attaches it to the session
/// in `dir`. Attaching applies at once (a route-map changed in place waits for the route-map
/// delay timer: with `bgp route-map delay-timer 0`, as the labs have it, for ever, and the
/// repair could not take effect either). The repair attaches `rm` again and deletes the copy.
fn swap_route_map(
    r: &Router,
    n: &super::view::Neighbor,
    rm: &str,
    dir: &str,
    edit: impl Fn(&str, &[String]) -> Vec<String>,
) -> (Vec<String>, Vec<String>) {
    let new = format!("{rm}-NEW");
    let af = n
        .lines
        .iter()
        .find_map(|(af, l)| l.contains(&format!(" route-map {rm} {dir}")).then(|| af.clone()))
        .flatten();
    let mut inject = Vec::new();
    for e in r.route_maps().into_iter().filter(|e| words(&e.line).get(1) == Some(&rm)) {
        let header = e.line.replacen(&format!("route-map {rm} "), &format!("route-map {new} "), 1);
        let children: Vec<String> = e.children.iter().map(|c| c.line.clone()).collect();
        inject.push(header.clone());
        inject.extend(edit(&e.line, &children).into_iter().map(|l| format!(" {l}")));
        inject.push("exit".into());
    }
    inject.extend(in_bgp(r, &af, &[format!("neighbor {} route-map {new} {dir}", n.addr)]));
    let mut repair = in_bgp(r, &af, &[format!("neighbor {} route-map {rm} {dir}", n.addr)]);
    repair.push("exit".into());
    repair.push(format!("no route-map {new}"));
    (inject, repair)
}

fn bgp_local_pref(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    let has_path_checks = view
        .lab
        .checks
        .iter()
        .any(|c| matches!(c, Check::Path { .. } | Check::Route { nexthop: Some(_), .. }));
    if !has_path_checks {
        return out;
    }
    for r in view.routers.values() {
        for (n, rm) in applied_route_maps(r, "in") {
            for entry in r.route_maps().into_iter().filter(|e| words(&e.line).get(1) == Some(&rm.as_str())) {
                let Some(lp) = entry.children.iter().find_map(|c| match words(&c.line)[..] {
                    ["set", "local-preference", v] => v.parse::<u32>().ok(),
                    _ => None,
                }) else {
                    continue;
                };
                if lp == 100 {
                    continue;
                }
                // Strictly past every other preference of the AS (a tie would leave the
                // choice to later steps, which may keep the path).
                let others: Vec<u32> =
                    local_prefs(view, r).into_iter().filter(|v| *v != lp).chain([100]).collect();
                let new = if lp > 100 {
                    others.iter().min().copied().unwrap_or(100).saturating_sub(10).max(1)
                } else {
                    others.iter().max().copied().unwrap_or(100) + 10
                };
                let (inject, repair) = swap_route_map(r, n, &rm, "in", |header, lines| {
                    lines
                        .iter()
                        .map(|l| {
                            if header == entry.line && l.starts_with("set local-preference ") {
                                format!("set local-preference {new}")
                            } else {
                                l.clone()
                            }
                        })
                        .collect()
                });
                out.push(cand(
                    FaultType::BgpLocalPrefInverted,
                    &r.name,
                    format!(
                        "{} takes routes from {} through route-map {rm}-NEW, which sets local-preference {new} where {rm} sets {lp}",
                        r.name, n.addr
                    ),
                    vec![vtysh(&r.name, &inject)],
                    vec![vtysh(&r.name, &repair)],
                ));
            }
        }
    }
    out
}

fn bgp_as_path(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    // A backup link: an outbound route-map that prepends. Its primaries: the other eBGP
    // neighbours of routers in the same AS, which do not prepend.
    for r in view.routers.values() {
        let Some(bgp) = &r.bgp else { continue };
        for (b, rm) in applied_route_maps(r, "out") {
            let prepend =
                r.route_maps().into_iter().filter(|e| words(&e.line).get(1) == Some(&rm.as_str())).find_map(
                    |e| {
                        e.children
                            .iter()
                            .find(|c| c.line.starts_with("set as-path prepend "))
                            .map(|c| c.line.clone())
                    },
                );
            let Some(prepend) = prepend else { continue };
            let count = words(&prepend).len() - 3;
            let path = std::iter::repeat_n(bgp.asn.as_str(), count + 2).collect::<Vec<_>>().join(" ");
            for r2 in view.routers.values() {
                let Some(b2) = &r2.bgp else { continue };
                if b2.asn != bgp.asn {
                    continue;
                }
                for n in &b2.neighbors {
                    if is_ibgp(r2, n) || (r2.name == r.name && n.addr == b.addr) {
                        continue;
                    }
                    let af = n.lines.iter().find_map(|(af, _)| af.clone()).or_else(|| default_af(r2));
                    let out_rm = applied_route_maps(r2, "out")
                        .into_iter()
                        .find(|(x, _)| x.addr == n.addr)
                        .map(|(_, m)| m);
                    let (inject, repair) = match out_rm {
                        Some(m) => {
                            let Some(first) = r2.route_maps().into_iter().find(|e| {
                                words(&e.line).get(1) == Some(&m.as_str())
                                    && words(&e.line).get(2) == Some(&"permit")
                            }) else {
                                continue;
                            };
                            if first.children.iter().any(|c| c.line.starts_with("set as-path prepend")) {
                                continue;
                            }
                            swap_route_map(r2, n, &m, "out", |header, lines| {
                                let mut lines = lines.to_vec();
                                if header == first.line {
                                    lines.push(format!("set as-path prepend {path}"));
                                }
                                lines
                            })
                        }
                        None => {
                            let m = format!("TO-{}", sanitize(&n.addr));
                            let mut inject = vec![
                                format!("route-map {m} permit 10"),
                                format!(" set as-path prepend {path}"),
                                "exit".into(),
                            ];
                            inject.extend(in_bgp(
                                r2,
                                &af,
                                &[format!("neighbor {} route-map {m} out", n.addr)],
                            ));
                            let mut repair =
                                in_bgp(r2, &af, &[format!("no neighbor {} route-map {m} out", n.addr)]);
                            repair.push("exit".into());
                            repair.push(format!("no route-map {m} permit 10"));
                            (inject, repair)
                        }
                    };
                    out.push(
                        cand(
                            FaultType::BgpAsPathPolicyInverted,
                            &r2.name,
                            format!("{} prepends {path} towards its primary neighbour {}, longer than the backup's prepend towards {}", r2.name, n.addr, b.addr),
                            vec![vtysh(&r2.name, &inject)],
                            vec![vtysh(&r2.name, &repair)],
                        )
                        .touching([session_touch(view, r2, &n.addr)]),
                    );
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------- static routes

fn static_line(prefix: Cidr, via: &str, distance: Option<u32>) -> String {
    match distance {
        Some(d) => format!("ip route {prefix} {via} {d}"),
        None => format!("ip route {prefix} {via}"),
    }
}

fn static_matters(view: &View, prefix: Cidr) -> bool {
    if prefix.len == 0 {
        return !view.flows.is_empty();
    }
    flows_touch(view, prefix)
}

/// The far ends of the flows of the hosts behind `r` (where they send to, and where flows to
/// them come from).
fn far_ends(view: &View, r: &str) -> Vec<Ipv4Addr> {
    let behind = |h: &str| view.gateway_router(h).is_some_and(|(g, _)| g == r);
    view.flows
        .iter()
        .filter_map(|f| {
            if behind(&f.from) {
                Some(f.to)
            } else if f.owner.as_deref().is_some_and(behind) {
                view.node_address(&f.from)
            } else {
                None
            }
        })
        .collect()
}

/// OSPF's metric for the static routes a router redistributes (20 when unset), if it does.
fn redistributed_metric(r: &Router) -> Option<u32> {
    let o = r.ospf.as_ref()?;
    o.lines.iter().find_map(|l| match words(&l.line)[..] {
        ["redistribute", "static"] => Some(20),
        ["redistribute", "static", "metric", m, ..] => m.parse().ok(),
        ["redistribute", "static", ..] => Some(20),
        _ => None,
    })
}

/// Some flow's traffic follows this static route: from hosts behind the router, or from
/// elsewhere when the router redistributes it and no other router offers the prefix cheaper.
fn static_used(view: &View, r: &Router, s: &super::view::StaticRoute) -> bool {
    if !static_matters(view, s.prefix) {
        return false;
    }
    let local = far_ends(view, &r.name)
        .iter()
        .any(|a| s.prefix.contains(*a) && !connected(r, Cidr { addr: *a, len: 32 }));
    let bgp =
        r.bgp.as_ref().is_some_and(|b| b.redistribute.iter().any(|(_, l)| l.contains("redistribute static")));
    let transit = bgp
        || redistributed_metric(r).is_some_and(|m| {
            !view.routers.values().any(|o| {
                o.name != r.name
                    && o.statics.iter().any(|x| x.prefix == s.prefix)
                    && redistributed_metric(o).is_some_and(|m2| m2 < m)
            })
        });
    local || transit
}

/// Another route to the prefix the router could use: one of its own statics, or a dynamic one
/// (another OSPF router with the subnet, its static redistributed, or a default originated).
fn alternative_distance(view: &View, r: &Router, s: &super::view::StaticRoute) -> Option<u32> {
    let own = r
        .statics
        .iter()
        .filter(|x| x.prefix == s.prefix && x.line != s.line)
        .map(|x| x.distance.unwrap_or(1))
        .min();
    let dynamic = r.ospf.is_some()
        && view.routers.values().any(|o| {
            o.name != r.name
                && o.ospf.as_ref().is_some_and(|ospf| {
                    (s.prefix.len == 0 && ospf.default_originate)
                        || (s.prefix.len > 0
                            && o.ospf_ifaces.keys().any(|i| {
                                o.ifaces
                                    .get(i)
                                    .and_then(|x| x.cidr)
                                    .is_some_and(|c| c.len <= s.prefix.len && c.contains(s.prefix.addr))
                            }))
                        || (redistributed_metric(o).is_some()
                            && o.statics.iter().any(|x| x.prefix == s.prefix))
                })
        });
    match (own, dynamic) {
        (Some(d), true) => Some(d.min(110)),
        (Some(d), false) => Some(d),
        (None, true) => Some(110),
        (None, false) => None,
    }
}

fn static_wrong_next_hop(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for r in view.routers.values() {
        for s in &r.statics {
            let Some(via) = s.via else { continue };
            if s.distance.is_some_and(|d| d > 20) || !static_used(view, r, s) {
                continue;
            }
            let Some(link) = r.ifaces.iter().find(|(_, i)| i.cidr.is_some_and(|c| c.contains(via))) else {
                continue;
            };
            // A free address of the next hop's subnet (traffic goes nowhere), else another
            // router on another link (traffic goes the wrong way).
            let wrong = link.1.cidr.and_then(|c| view.free_address_in(c)).or_else(|| {
                r.ifaces
                    .iter()
                    .filter(|(n, _)| n != &link.0)
                    .flat_map(|(n, _)| view.peers(&r.name, n))
                    .filter(|p| view.is_router(&p.0))
                    .find_map(|p| view.address_of(p))
            });
            let Some(wrong) = wrong else { continue };
            let new = static_line(s.prefix, &wrong.to_string(), s.distance);
            out.push(cand(
                FaultType::StaticWrongNextHop,
                &r.name,
                format!("{}'s static route to {} points at {wrong} instead of {via}", r.name, s.prefix),
                vec![vtysh(&r.name, &[format!("no {}", s.line), new.clone()])],
                vec![vtysh(&r.name, &[format!("no {new}"), s.line.clone()])],
            ));
        }
    }
    out
}

fn connected(r: &Router, prefix: Cidr) -> bool {
    r.ifaces.values().any(|i| i.cidr.is_some_and(|c| c.len <= prefix.len && c.contains(prefix.addr)))
}

fn static_blackhole(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for f in &view.flows {
        let Some((src, _)) = flow_ends(view, &f.from, f.to) else { continue };
        let Some(owner) = f.owner.as_deref() else { continue };
        let Some(dest) = view
            .hosts
            .get(owner)
            .and_then(|h| h.ifaces.values().find_map(|i| i.cidr.filter(|c| c.addr == f.to)))
        else {
            continue;
        };
        let prefix = Cidr { addr: Ipv4Addr::from(dest.network()), len: dest.len };
        let r = &view.routers[&src];
        if connected(r, prefix)
            || r.statics.iter().any(|s| s.prefix == prefix)
            || !seen.insert((src.clone(), prefix.to_string()))
        {
            continue;
        }
        out.push(cand(
            FaultType::StaticBlackhole,
            &src,
            format!("{src} has a static blackhole route for {prefix}"),
            vec![vtysh(&src, &[format!("ip route {prefix} blackhole")])],
            vec![vtysh(&src, &[format!("no ip route {prefix} blackhole")])],
        ));
    }
    out
}

fn static_distance(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for r in view.routers.values() {
        for s in &r.statics {
            let Some(via) = s.via else { continue };
            let Some(alt) = alternative_distance(view, r, s) else { continue };
            let d = s.distance.unwrap_or(1);
            // A floating static (a backup behind another route) made to win; a primary one
            // made to lose to the alternative. A tie would split traffic between the two.
            let new = if d > alt {
                if alt <= 1 {
                    continue;
                }
                1
            } else {
                let new = (alt + 5).min(255);
                if new <= alt {
                    continue;
                }
                new
            };
            let used = if d > alt { static_matters(view, s.prefix) } else { static_used(view, r, s) };
            if !used {
                continue;
            }
            let new_line = static_line(s.prefix, &via.to_string(), (new != 1).then_some(new));
            out.push(cand(
                FaultType::StaticDistance,
                &r.name,
                format!(
                    "{}'s static route to {} via {via} has distance {new} instead of {d}",
                    r.name, s.prefix
                ),
                vec![vtysh(&r.name, &[format!("no {}", s.line), new_line.clone()])],
                vec![vtysh(&r.name, &[format!("no {new_line}"), s.line.clone()])],
            ));
        }
    }
    out
}

fn static_missing(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for r in view.routers.values() {
        for s in &r.statics {
            // A floating static is a backup: its absence shows only when the primary fails.
            if s.distance.is_some_and(|d| d > 20) || !static_used(view, r, s) {
                continue;
            }
            out.push(cand(
                FaultType::StaticMissing,
                &r.name,
                format!("{} lacks its static route `{}`", r.name, s.line),
                vec![vtysh(&r.name, &[format!("no {}", s.line)])],
                vec![vtysh(&r.name, std::slice::from_ref(&s.line))],
            ));
        }
    }
    out
}

// ---------------------------------------------------------------- filtering

/// The nftables table an injected filter lives in, with one base chain at `hook`.
fn nft_table(device: &str, table: &str, hook: &str, rules: &[String]) -> (Vec<Action>, Vec<Action>) {
    let mut inject = vec![
        linux(device, format!("nft add table ip {table}")),
        linux(
            device,
            format!(
                "nft add chain ip {table} {hook} {{ type filter hook {hook} priority 0 ; policy accept ; }}"
            ),
        ),
    ];
    inject.extend(rules.iter().map(|r| linux(device, format!("nft add rule ip {table} {hook} {r}"))));
    (inject, vec![linux(device, format!("nft delete table ip {table}"))])
}

/// Flows forwarded by their first router: `(router, destination subnet, flow)`.
fn forwarded(view: &View) -> Vec<(String, Cidr)> {
    let mut out = Vec::new();
    for f in &view.flows {
        if !view.is_host(&f.from) {
            continue;
        }
        let Some((gw, _)) = view.gateway_router(&f.from) else { continue };
        let dest = f
            .owner
            .as_deref()
            .and_then(|o| view.hosts.get(o).map(|h| &h.ifaces).or(view.routers.get(o).map(|r| &r.ifaces)))
            .and_then(|ifs| ifs.values().find_map(|i| i.cidr.filter(|c| c.addr == f.to)))
            .map(|c| Cidr { addr: Ipv4Addr::from(c.network()), len: c.len })
            .unwrap_or(Cidr { addr: f.to, len: 32 });
        // Traffic to the router itself is not forwarded.
        if view.routers[gw].addresses().any(|a| a == f.to) {
            continue;
        }
        if !out.iter().any(|(g, d): &(String, Cidr)| g == gw && *d == dest) {
            out.push((gw.to_string(), dest));
        }
    }
    out
}

fn nft_forward_drop(view: &View) -> Vec<Candidate> {
    forwarded(view)
        .into_iter()
        .map(|(gw, dest)| {
            let (inject, repair) = nft_table(&gw, "blocklist", "forward", &[format!("ip daddr {dest} drop")]);
            cand(
                FaultType::NftForwardDrop,
                &gw,
                format!("{gw} drops forwarded traffic to {dest} (nftables table ip blocklist)"),
                inject,
                repair,
            )
            .touching([format!("nft {gw}")])
        })
        .collect()
}

/// A lab's own forward chains (from its `linux` lines): `(node, family, table, chain, rules)`.
fn forward_chains(view: &View) -> Vec<(String, String, String, String, Vec<String>)> {
    let mut out = Vec::new();
    for node in view.lab.linux.keys() {
        let nft = super::view::nft_of(view.lab, node);
        for table in &nft.nodes {
            let ["table", family, name] = words(&table.line)[..] else { continue };
            for chain in &table.children {
                let ["chain", c] = words(&chain.line)[..] else { continue };
                if !chain.children.iter().any(|l| l.line.starts_with("type filter hook forward")) {
                    continue;
                }
                let rules: Vec<String> = chain
                    .children
                    .iter()
                    .map(|l| l.line.clone())
                    .filter(|l| !l.starts_with("type ") && !l.starts_with("policy "))
                    .collect();
                out.push((node.clone(), family.to_string(), name.to_string(), c.to_string(), rules));
            }
        }
    }
    out
}

fn nft_rule_order(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    // A lab's own filter: a drop for what an accept rule lets through, inserted (at the head)
    // where it should have been added after the accept. The repair writes the chain again in
    // its order (a rule is deleted only by a handle, which the lab does not fix).
    for (node, family, table, chain, rules) in forward_chains(view) {
        for rule in &rules {
            let w = words(rule);
            let Some(pos) = w.iter().position(|x| *x == "daddr") else { continue };
            let Some(dst) = w
                .get(pos + 1)
                .and_then(|d| Cidr::parse(d).or_else(|| d.parse().ok().map(|a| Cidr { addr: a, len: 32 })))
            else {
                continue;
            };
            if w.last() != Some(&"accept") || !view.flows.iter().any(|f| dst.contains(f.to)) {
                continue;
            }
            let target = if dst.len == 32 { dst.addr.to_string() } else { dst.to_string() };
            let mut repair = vec![linux(&node, format!("nft flush chain {family} {table} {chain}"))];
            repair.extend(
                rules.iter().map(|r| linux(&node, format!("nft add rule {family} {table} {chain} {r}"))),
            );
            out.push(
                cand(
                    FaultType::NftRuleOrder,
                    &node,
                    format!("{node}'s chain {family} {table} {chain} drops traffic to {target} before its rule `{rule}`"),
                    vec![linux(&node, format!("nft insert rule {family} {table} {chain} ip daddr {target} drop"))],
                    repair,
                )
                .touching([format!("nft {node}")]),
            );
        }
    }
    // Without a filter of its own, the lab gets one written in the wrong order: the operator
    // meant to allow one service and drop the rest of the traffic to its host, and added the
    // drop first.
    for s in &view.lab.services {
        let Some(addr) = view.hosts.get(&s.node).and_then(|h| h.ifaces.values().find_map(|i| i.cidr)) else {
            continue;
        };
        if !view.service_checked(&s.node, s.kind, s.port()) {
            continue;
        }
        let proto = match s.kind {
            ServiceKind::Dns => "udp",
            ServiceKind::Http => "tcp",
        };
        for (gw, dest) in forwarded(view) {
            if !dest.contains(addr.addr) {
                continue;
            }
            let rules = [
                format!("ip daddr {} drop", addr.addr),
                format!("ip daddr {} {proto} dport {} accept", addr.addr, s.port()),
            ];
            let (inject, repair) = nft_table(&gw, "edge", "forward", &rules);
            out.push(
                cand(
                    FaultType::NftRuleOrder,
                    &gw,
                    format!(
                        "{gw}'s table ip edge drops traffic to {} before the rule that accepts {} {proto}/{}",
                        addr.addr,
                        s.name,
                        s.port()
                    ),
                    inject,
                    repair,
                )
                .touching([format!("nft {gw}")]),
            );
        }
    }
    out
}

fn nft_protocol_drop(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (r, _, p) in checked_adjacencies(view) {
        if !seen.insert((r, "ospf")) {
            continue;
        }
        let (inject, repair) = nft_table(r, "guard", "input", &["ip protocol 89 drop".into()]);
        out.push(
            cand(
                FaultType::NftProtocolDrop,
                r,
                format!("{r} drops incoming OSPF (its adjacency with {} goes down)", p.0),
                inject,
                repair,
            )
            .touching([format!("nft {r}")]),
        );
    }
    for (r, n) in checked_sessions(view) {
        if !seen.insert((&r.name, "bgp")) {
            continue;
        }
        let rules = ["tcp dport 179 drop".to_string(), "tcp sport 179 drop".to_string()];
        let (inject, repair) = nft_table(&r.name, "guard", "input", &rules);
        out.push(
            cand(
                FaultType::NftProtocolDrop,
                &r.name,
                format!("{} drops incoming BGP (TCP 179; its session with {} goes down)", r.name, n.addr),
                inject,
                repair,
            )
            .touching([format!("nft {}", r.name), session_touch(view, r, &n.addr)]),
        );
    }
    out
}

/// The interface a router sends back to `src` by, when its configuration alone decides it:
/// a connected subnet, else (on a router without a routing protocol) its best static route.
fn route_back(r: &Router, src: Ipv4Addr) -> Option<String> {
    let on = |a: Ipv4Addr| {
        r.ifaces
            .iter()
            .find(|(_, i)| i.cidr.is_some_and(|c| c.len < 32 && c.contains(a)))
            .map(|(n, _)| n.clone())
    };
    if let Some(i) = on(src) {
        return Some(i);
    }
    if r.ospf.is_some() || r.bgp.is_some() {
        return None;
    }
    let best = r
        .statics
        .iter()
        .filter(|s| s.prefix.contains(src))
        .max_by_key(|s| (s.prefix.len, std::cmp::Reverse(s.distance.unwrap_or(1))))?;
    on(best.via?)
}

fn rp_candidate(view: &View, r: &str, from: &str, to: Ipv4Addr, arrives: &str, back: &str) -> Candidate {
    let sysctl = |key: &str| view.routers[r].sysctls.get(key).cloned().unwrap_or_else(|| "0".into());
    let all = "net.ipv4.conf.all.rp_filter";
    let iface = format!("net.ipv4.conf.{arrives}.rp_filter");
    cand(
        FaultType::RpFilterStrict,
        r,
        format!("{r} filters strictly by reverse path: {from} -> {to} arrives on {arrives}, the way back leaves by {back}"),
        vec![linux(r, format!("sysctl -w {all}=1")), linux(r, format!("sysctl -w {iface}=1"))],
        vec![
            linux(r, format!("sysctl -w {iface}={}", sysctl(&iface))),
            linux(r, format!("sysctl -w {all}={}", sysctl(all))),
        ],
    )
    .touching([format!("sysctl {r}")])
}

fn rp_filter(view: &View) -> Vec<Candidate> {
    // Strict reverse-path filtering drops a packet that arrives on an interface other than
    // the one the router would use to send back to its source: find where a flow's forward
    // path enters a router on such an interface, from OSPF's shortest paths, or from a path
    // check's consecutive routers where the receiving router's own routes decide the way back.
    let graph = Graph::new(view);
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for f in &view.flows {
        if !view.is_host(&f.from) {
            continue;
        }
        let Some((src, dst)) = flow_ends(view, &f.from, f.to) else { continue };
        let Some(path) = graph.unique_path(&src, &dst, &|e| e.cost) else { continue };
        let routers = spf::routers_of(&src, &path);
        if !ospf_only(view, &routers) {
            continue;
        }
        for e in &path {
            let Some(back) = graph.unique_path(&e.to, &src, &|x| x.cost) else { continue };
            let Some(first) = back.first() else { continue };
            if first.iface == e.to_iface || !seen.insert(e.to.clone()) {
                continue;
            }
            out.push(rp_candidate(view, &e.to, &f.from, f.to, &e.to_iface, &first.iface));
        }
    }
    for check in &view.lab.checks {
        let Check::Path { from, to, via } = check else { continue };
        let (Some(src), Some(dst)) = (view.node_address(from), to.parse().ok().or(view.node_address(to)))
        else {
            continue;
        };
        for pair in via.windows(2) {
            let (x, y) = (&pair[0], &pair[1]);
            let Some(ry) = view.routers.get(y) else { continue };
            let arrives = ry.ifaces.keys().find(|i| view.peers(y, i).iter().any(|p| &p.0 == x));
            let Some(arrives) = arrives else { continue };
            let Some(back) = route_back(ry, src) else { continue };
            if &back == arrives || !seen.insert(y.clone()) {
                continue;
            }
            out.push(rp_candidate(view, y, from, dst, arrives, &back));
        }
    }
    out
}

// ---------------------------------------------------------------- hosts

/// Flows that leave a host's subnet (from it, or to it from elsewhere).
fn host_flows<'v>(view: &'v View, host: &str) -> Vec<&'v super::view::Flow> {
    let Some(h) = view.hosts.get(host) else { return Vec::new() };
    let local = |a: Ipv4Addr| h.ifaces.values().any(|i| i.cidr.is_some_and(|c| c.contains(a)));
    view.flows
        .iter()
        .filter(|f| {
            (f.from == host && !local(f.to))
                || (f.owner.as_deref() == Some(host) && view.node_address(&f.from).is_some_and(|a| !local(a)))
        })
        .collect()
}

fn host_wrong_gateway(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (name, h) in &view.hosts {
        let Some(gw) = h.gateway else { continue };
        if host_flows(view, name).is_empty() {
            continue;
        }
        let Some(c) = h.ifaces.values().find_map(|i| i.cidr.filter(|c| c.contains(gw))) else { continue };
        let Some(wrong) = view.free_address_in(c) else { continue };
        out.push(
            cand(
                FaultType::HostWrongGateway,
                name,
                format!("{name}'s default gateway is {wrong} instead of {gw}"),
                vec![linux(name, format!("ip route replace default via {wrong}"))],
                vec![linux(name, format!("ip route replace default via {gw}"))],
            )
            .touching([format!("host {name}")]),
        );
    }
    out
}

fn host_wrong_mask(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (name, h) in &view.hosts {
        let Some(gw) = h.gateway else { continue };
        let Some((iface, c)) =
            h.ifaces.iter().find_map(|(n, i)| i.cidr.filter(|c| c.contains(gw)).map(|c| (n, c)))
        else {
            continue;
        };
        let flows = host_flows(view, name);
        if flows.is_empty() {
            continue;
        }
        // Far ends: where its flows go, and where flows to it come from.
        let far: Vec<Ipv4Addr> = flows
            .iter()
            .filter_map(|f| if f.from == *name { Some(f.to) } else { view.node_address(&f.from) })
            .collect();
        // Too wide: a far end looks on-link. Else too narrow: the gateway falls outside.
        let wide = (8..c.len).rev().find(|&len| far.iter().any(|a| Cidr { addr: c.addr, len }.contains(*a)));
        let len = wide.or_else(|| (c.len + 1..=30).find(|&len| !Cidr { addr: c.addr, len }.contains(gw)));
        let Some(len) = len else { continue };
        let new = Cidr { addr: c.addr, len };
        let mut inject = vec![
            linux(name, format!("ip addr del {c} dev {iface}")),
            linux(name, format!("ip addr add {new} dev {iface}")),
        ];
        if wide.is_some() {
            inject.push(linux(name, format!("ip route replace default via {gw}")));
        }
        let repair = vec![
            linux(name, format!("ip addr del {new} dev {iface}")),
            linux(name, format!("ip addr add {c} dev {iface}")),
            linux(name, format!("ip route replace default via {gw}")),
        ];
        out.push(
            cand(
                FaultType::HostWrongMask,
                name,
                format!("{name} {iface} has {new} instead of {c}"),
                inject,
                repair,
            )
            .touching([format!("host {name}")]),
        );
    }
    out
}

fn forwarding_off(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    let gws: BTreeSet<String> = forwarded(view).into_iter().map(|(g, _)| g).collect();
    for gw in gws {
        out.push(
            cand(
                FaultType::ForwardingOff,
                &gw,
                format!("{gw} has IPv4 forwarding off"),
                vec![linux(&gw, "sysctl -w net.ipv4.ip_forward=0")],
                vec![linux(&gw, "sysctl -w net.ipv4.ip_forward=1")],
            )
            .touching([format!("sysctl {gw}")]),
        );
    }
    out
}

// ---------------------------------------------------------------- services

fn dns_record_wrong(view: &View) -> Vec<Candidate> {
    let mut out = Vec::new();
    for s in view.lab.services.iter().filter(|s| s.kind == ServiceKind::Dns) {
        for (name, addr) in &s.records {
            let checked =
                view.lab.checks.iter().any(|c| matches!(c, Check::Dns { name: n, .. } if n == name))
                    && view.service_checked(&s.node, ServiceKind::Dns, s.port());
            let Ok(a) = addr.parse::<Ipv4Addr>() else { continue };
            if !checked {
                continue;
            }
            let subnet = view.used_prefixes().into_iter().find(|c| c.contains(a) && c.len < 31);
            let Some(wrong) = subnet.and_then(|c| view.free_address_in(c)) else { continue };
            out.push(
                cand(
                    FaultType::DnsRecordWrong,
                    &s.node,
                    format!("{}'s DNS record {name} answers {wrong} instead of {addr}", s.node),
                    vec![service(&s.node, &s.name, format!("set record {name} {wrong}"))],
                    vec![service(&s.node, &s.name, format!("set record {name} {addr}"))],
                )
                .touching([format!("service {} {}", s.node, s.name)]),
            );
        }
    }
    out
}

fn service_down(view: &View, kind: ServiceKind) -> Vec<Candidate> {
    let t = match kind {
        ServiceKind::Dns => FaultType::DnsDown,
        ServiceKind::Http => FaultType::HttpDown,
    };
    view.lab
        .services
        .iter()
        .filter(|s| s.kind == kind && view.service_checked(&s.node, kind, s.port()))
        .map(|s| {
            cand(
                t,
                &s.node,
                format!(
                    "{}'s {} server ({}) is stopped",
                    s.node,
                    if kind == ServiceKind::Dns { "DNS" } else { "web" },
                    s.name
                ),
                vec![service(&s.node, &s.name, "stop")],
                vec![service(&s.node, &s.name, "start")],
            )
            .touching([format!("service {} {}", s.node, s.name)])
        })
        .collect()
}

fn service_wrong_port(view: &View) -> Vec<Candidate> {
    view.lab
        .services
        .iter()
        .filter(|s| view.service_checked(&s.node, s.kind, s.port()))
        .map(|s| {
            let wrong = match s.kind {
                ServiceKind::Dns => 5353,
                ServiceKind::Http => 8080,
            };
            let wrong = if wrong == s.port() { wrong + 1 } else { wrong };
            cand(
                FaultType::ServiceWrongPort,
                &s.node,
                format!("{}'s {} listens on port {wrong} instead of {}", s.node, s.name, s.port()),
                vec![service(&s.node, &s.name, format!("set port {wrong}"))],
                vec![service(&s.node, &s.name, format!("set port {}", s.port()))],
            )
            .touching([format!("service {} {}", s.node, s.name)])
        })
        .collect()
}
