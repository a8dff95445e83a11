//! The §C.2 fault catalogue: five error types, each with several injection methods, all on the
//! router `r0`.
//!
//! Every method is written as the commands an operator would type on `r0` (run as argv, no shell,
//! in `r0`'s namespace), and comes with the inverse commands that bring back the healthy state of
//! [`super::layout`]. Every method breaks the reachability of at least one pair of hosts: a fault
//! that leaves `pingall` clean would make a task whose answer is "do nothing".
//!
//! Where a method needs a second subnet (`j`, the wrong destination of a route, the owner of a
//! duplicated address), it is drawn outside `avoid` too when the layout allows, because a
//! route through an interface that an earlier fault took down or stripped of its address cannot
//! be installed at all.

use std::net::Ipv4Addr;

use netdojo_core::Fault;
use rand::Rng;
use rand::seq::IndexedRandom;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::layout::{Layout, Subnet};

/// The five error types of §C.2, in Table 2's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FaultKind {
    #[serde(rename = "disable_routing")]
    DisableRouting,
    #[serde(rename = "disable_interface")]
    DisableInterface,
    #[serde(rename = "remove_ip")]
    RemoveIp,
    #[serde(rename = "drop_traffic_to_from_subnet")]
    DropTraffic,
    #[serde(rename = "wrong_routing_table")]
    WrongRoutingTable,
}

impl FaultKind {
    pub const ALL: [FaultKind; 5] = [
        FaultKind::DisableRouting,
        FaultKind::DisableInterface,
        FaultKind::RemoveIp,
        FaultKind::DropTraffic,
        FaultKind::WrongRoutingTable,
    ];

    /// The seed's name, as `Fault::kind` records it.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::DisableRouting => "disable_routing",
            FaultKind::DisableInterface => "disable_interface",
            FaultKind::RemoveIp => "remove_ip",
            FaultKind::DropTraffic => "drop_traffic_to_from_subnet",
            FaultKind::WrongRoutingTable => "wrong_routing_table",
        }
    }

    /// Table 2's abbreviation, as the labels combine them (`DR+DI`).
    pub fn abbrev(self) -> &'static str {
        match self {
            FaultKind::DisableRouting => "DR",
            FaultKind::DisableInterface => "DI",
            FaultKind::RemoveIp => "RI",
            FaultKind::DropTraffic => "DT",
            FaultKind::WrongRoutingTable => "WR",
        }
    }

    /// The method names, in the seed's order of its methods 1, 2, 3...
    pub fn methods(self) -> &'static [&'static str] {
        match self {
            FaultKind::DisableRouting => &DR_NAMES,
            FaultKind::DisableInterface => &DI_NAMES,
            FaultKind::RemoveIp => &RI_NAMES,
            FaultKind::DropTraffic => &DT_NAMES,
            FaultKind::WrongRoutingTable => &WR_NAMES,
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Looks a kind up by its abbreviation (`DR`), as labels spell it.
    pub fn from_abbrev(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.abbrev() == s)
    }

    fn method_list(self) -> &'static [Method] {
        match self {
            FaultKind::DisableRouting => &DR_METHODS,
            FaultKind::DisableInterface => &DI_METHODS,
            FaultKind::RemoveIp => &RI_METHODS,
            FaultKind::DropTraffic => &DT_METHODS,
            FaultKind::WrongRoutingTable => &WR_METHODS,
        }
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Every (kind, method) pair of the catalogue, kinds in Table 2's order.
pub fn all_methods() -> impl Iterator<Item = (FaultKind, &'static str)> {
    FaultKind::ALL.into_iter().flat_map(|k| k.methods().iter().map(move |m| (k, *m)))
}

/// Table 2: each label with its complexity level and the kinds it injects, in injection order.
pub const LABELS: [(&str, u8, &[FaultKind]); 15] = {
    use FaultKind::*;
    [
        ("DR", 1, &[DisableRouting]),
        ("DI", 1, &[DisableInterface]),
        ("RI", 1, &[RemoveIp]),
        ("DT", 1, &[DropTraffic]),
        ("WR", 1, &[WrongRoutingTable]),
        ("DR+DI", 2, &[DisableRouting, DisableInterface]),
        ("DR+RI", 2, &[DisableRouting, RemoveIp]),
        ("DR+DT", 2, &[DisableRouting, DropTraffic]),
        ("DR+WR", 2, &[DisableRouting, WrongRoutingTable]),
        ("RI+WR", 2, &[RemoveIp, WrongRoutingTable]),
        ("DT+WR", 3, &[DropTraffic, WrongRoutingTable]),
        ("DI+DT", 3, &[DisableInterface, DropTraffic]),
        ("DI+WR", 3, &[DisableInterface, WrongRoutingTable]),
        ("RI+DT", 3, &[RemoveIp, DropTraffic]),
        ("DI+RI", 3, &[DisableInterface, RemoveIp]),
    ]
};

/// Why a fault could not be drawn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    #[error("{kind} has no method {method:?}; its methods are {known:?}")]
    UnknownMethod { kind: FaultKind, method: String, known: &'static [&'static str] },
    #[error("{kind}/{method} needs at least {needed} subnets, the layout has {have}")]
    TooFewSubnets { kind: FaultKind, method: &'static str, needed: usize, have: usize },
}

/// A fault drawn for one topology: what the task records, and the commands that inject and repair it.
#[derive(Debug, Clone, PartialEq)]
pub struct DrawnFault {
    pub fault: Fault,
    /// Commands for `r0`, in order.
    pub inject: Vec<String>,
    /// Commands for `r0` that restore the healthy state, in the order an operator would run them.
    pub repair: Vec<String>,
}

impl DrawnFault {
    /// The subnet the fault is aimed at, if it has one (the router-wide methods have none).
    pub fn subnet(&self) -> Option<u8> {
        self.param_u8("subnet")
    }

    /// The second subnet a method involves (the wrong next hop's, the duplicated address's).
    pub fn other_subnet(&self) -> Option<u8> {
        self.param_u8("other_subnet")
    }

    /// Every subnet the fault touches, its own first: what a later fault should `avoid`.
    pub fn subnets(&self) -> Vec<u8> {
        self.subnet().into_iter().chain(self.other_subnet()).collect()
    }

    fn param_u8(&self, key: &str) -> Option<u8> {
        self.fault.params.get(key)?.as_u64().and_then(|v| u8::try_from(v).ok())
    }
}

/// Whether `later`, injected after `earlier` on the same router, would make a command fail or
/// leave the router unhealthy, with each fault's inject run in turn and the repairs run last
/// fault first. A task generator draws its second fault with `avoid` set to
/// `earlier.subnets()`, and draws again while this says yes: that is only needed where the
/// layout leaves no room (two subnets, or a `duplicate_ip` on three), and only with
/// `wrong_routing_table` as one of the two.
///
/// Faults of one kind are reported as conflicting: Table 2 never pairs a kind with itself, and
/// two edits of one object (two tbf qdiscs, two address changes on one interface) rarely compose.
pub fn conflicts(earlier: &DrawnFault, later: &DrawnFault) -> bool {
    let (Some(e), Some(l)) = (Footprint::of(earlier), Footprint::of(later)) else {
        return true;
    };
    if e.kind == l.kind {
        return true;
    }
    let hit = |a: Option<u8>, b: Option<u8>| a.is_some() && a == b;
    if l.kind == FaultKind::WrongRoutingTable {
        // `ip route del` of k's connected route finds nothing; or the metric-0 route `add`
        // (or the repair's) meets another metric-0 route for k's prefix; or r0-ethj is down,
        // which no route through it survives; or the loop's gateway, j's router address, is gone.
        if hit(l.k, e.prefix_gone())
            || hit(l.k, e.rival_prefix())
            || hit(l.j, e.down())
            || (l.method == Method::Loop && hit(l.j, e.router_addr_gone()))
        {
            return true;
        }
    }
    if e.kind == FaultKind::WrongRoutingTable {
        // The later repair brings k's connected route back by itself, so the earlier repair's
        // `ip route add` finds it there; or the later fault downs r0-ethj or strips its last
        // address, and the kernel drops every route through it, so the earlier repair's
        // `ip route del` finds nothing.
        if hit(e.k, l.repair_restores_prefix())
            || hit(e.k, l.down())
            || hit(e.j, l.down())
            || hit(e.j, l.strips_addresses())
        {
            return true;
        }
    }
    false
}

/// What a drawn fault does to r0, as far as another fault's commands care.
#[derive(Debug, Clone, Copy)]
struct Footprint {
    kind: FaultKind,
    method: Method,
    k: Option<u8>,
    j: Option<u8>,
}

impl Footprint {
    fn of(f: &DrawnFault) -> Option<Self> {
        let kind = FaultKind::from_name(&f.fault.kind)?;
        let method = *kind.method_list().iter().find(|m| m.name() == f.fault.method)?;
        Some(Self { kind, method, k: f.subnet(), j: f.other_subnet() })
    }

    /// The interface it takes down.
    fn down(&self) -> Option<u8> {
        only(matches!(self.method, Method::IfconfigDown | Method::IpLinkDown), self.k)
    }

    /// The subnet whose connected route is missing while the fault is in.
    fn prefix_gone(&self) -> Option<u8> {
        let yes =
            matches!(self.kind, FaultKind::RemoveIp | FaultKind::WrongRoutingTable) || self.down().is_some();
        only(yes, self.k)
    }

    /// The subnet whose router address is on no interface while the fault is in (`wrong_mask`
    /// keeps the address, with another mask).
    fn router_addr_gone(&self) -> Option<u8> {
        let yes = matches!(self.method, Method::Flush | Method::RandomIp | Method::DuplicateIp);
        only(yes, self.k)
    }

    /// The interface left, for a moment at least, without any IPv4 address: every remove_ip
    /// method deletes the only one first.
    fn strips_addresses(&self) -> Option<u8> {
        only(self.kind == FaultKind::RemoveIp, self.k)
    }

    /// The subnet whose prefix gets a second metric-0 route, on the wrong interface.
    fn rival_prefix(&self) -> Option<u8> {
        only(self.method == Method::DuplicateIp, self.j)
    }

    /// The subnet whose connected route the repair brings back without naming it.
    fn repair_restores_prefix(&self) -> Option<u8> {
        only(self.kind == FaultKind::RemoveIp || self.down().is_some(), self.k)
    }
}

fn only(yes: bool, subnet: Option<u8>) -> Option<u8> {
    if yes { subnet } else { None }
}

/// The MTU of a healthy router interface (veth's default, which the topology keeps).
pub const HEALTHY_MTU: u32 = 1500;

/// `mtu_too_small` draws from here. 68 is the least MTU that keeps IPv4 on the interface (below,
/// the kernel drops the interface's addresses, a different fault). The top is 79, not 80: veth
/// admits a frame into the interface when it is at most MTU + 18 bytes (Ethernet header plus a
/// VLAN tag), and a default ping's frame is 98 bytes, so at 80 echo requests still get in and only
/// the direction that needs fragmenting with DF set breaks.
pub const MTU_RANGE: std::ops::RangeInclusive<u32> = 68..=79;

/// The seed's masks for `wrong_mask` (§C.2: "e.g., 8, 16, 30, 31, or 32"). It draws from those
/// that break reachability in the drawn layout ([`mask_breaks`]): /8 and /16 still contain the
/// subnet's hosts, and the other interfaces' /24 routes are more specific, so on this topology
/// they break nothing and are not drawn (docs/linux.md lists each departure from the seed).
pub const WRONG_MASKS: [u8; 5] = [8, 16, 30, 31, 32];

/// Whether the router's address on `subnet` with prefix length `mask` leaves one of the
/// subnet's hosts outside its connected prefix: a mask that can break reachability.
pub fn mask_breaks(subnet: &Subnet, mask: u8) -> bool {
    let prefix = |a: Ipv4Addr| u32::from(a).checked_shr(32 - u32::from(mask)).unwrap_or(0);
    let gateway = prefix(subnet.gateway());
    (0..subnet.hosts.len()).any(|j| prefix(subnet.host_addr(j)) != gateway)
}

/// `random_ip` puts the interface in `10.0.0.X/24` with X drawn here (the seed's §C.2 wording).
pub const RANDOM_IP_HOST: std::ops::RangeInclusive<u8> = 2..=254;

/// The wrong gateway of `wrong_gateway` and `high_metric` is `192.168.j.254`, an address of
/// subnet j that no node holds (hosts are `.100` up). A host of subnet j would break r0's routing
/// as well (hosts do not forward), but r0 sends the senders on subnet j ICMP redirects towards
/// the wrong gateway; a host that resolves it takes the redirect and keeps it for five minutes,
/// so its pings stay broken after the router is repaired. Nobody answers ARP for an absent
/// address, so its redirects never take.
pub const ABSENT_HOST: u8 = 254;

/// `high_metric` demotes the right route to a metric drawn here (the seed draws 5000-20000); the
/// wrong route gets [`WRONG_ROUTE_METRIC`], which must stay below it.
pub const HIGH_METRIC_RANGE: std::ops::RangeInclusive<u32> = 5000..=20000;
pub const WRONG_ROUTE_METRIC: u32 = 10;

/// The `delay` stand-in's shaper. A tbf qdisc drops, at enqueue, every packet longer than its
/// burst: with 64 bytes, a default ping's 98-byte frame never leaves the interface, while ARP's
/// 42-byte frames still do, so the symptom is "no replies", deterministically.
pub const TBF_RATE: &str = "8kbit";
pub const TBF_BURST_BYTES: u32 = 64;
pub const TBF_LIMIT_BYTES: u32 = 64;

/// Draws one fault of `kind` on `layout`. `method`: Some(name) to force a method, None to draw one
/// uniformly. `avoid`: subnet indices already used by an earlier fault of the same task (pass
/// [`DrawnFault::subnets`]); the fault's subnet, and its second subnet if it has one, are drawn
/// outside it when one is left (two faults on the same interface can make the second's commands
/// fail or its repair order matter; [`conflicts`] says when they do).
///
/// The same rng state gives the same fault: the rng is consumed in a fixed order (method, subnet,
/// other subnet, the method's own parameters).
pub fn draw(
    kind: FaultKind,
    method: Option<&str>,
    layout: &Layout,
    avoid: &[u8],
    rng: &mut impl Rng,
) -> Result<DrawnFault, FaultError> {
    let methods = kind.method_list();
    let method = match method {
        Some(name) => *methods.iter().find(|m| m.name() == name).ok_or_else(|| {
            FaultError::UnknownMethod { kind, method: name.to_string(), known: kind.methods() }
        })?,
        // method_list is never empty; the fallback keeps that an invariant rather than a panic.
        None => *methods.choose(rng).unwrap_or(&methods[0]),
    };
    let too_few = |needed| FaultError::TooFewSubnets {
        kind,
        method: method.name(),
        needed,
        have: layout.subnets.len(),
    };
    let k = match method.subnets_needed() {
        0 => None,
        _ => Some(pick(layout.subnets.iter(), avoid, rng).ok_or_else(|| too_few(1))?),
    };
    let j = match (method.subnets_needed(), k) {
        (2, Some(k)) => Some(
            pick(layout.subnets.iter().filter(|s| s.index != k.index), avoid, rng)
                .ok_or_else(|| too_few(2))?,
        ),
        _ => None,
    };
    let built = match (k, j) {
        (None, _) => method.router_wide(),
        (Some(k), None) => method.on_subnet(k, rng),
        (Some(k), Some(j)) => method.on_two_subnets(k, j, rng),
    };
    let mut params = serde_json::Map::new();
    if let Some(k) = k {
        params.insert("subnet".into(), json!(k.index));
        params.insert("interface".into(), json!(k.router_if));
    }
    if let Some(j) = j {
        params.insert("other_subnet".into(), json!(j.index));
    }
    if let Value::Object(extra) = built.params {
        params.extend(extra);
    }
    Ok(DrawnFault {
        fault: Fault {
            kind: kind.name().to_string(),
            method: method.name().to_string(),
            params: params.into(),
        },
        inject: built.inject,
        repair: built.repair,
    })
}

/// A uniform pick among `candidates`, preferring those outside `avoid`.
fn pick<'a>(
    candidates: impl Iterator<Item = &'a Subnet>,
    avoid: &[u8],
    rng: &mut impl Rng,
) -> Option<&'a Subnet> {
    let all: Vec<&Subnet> = candidates.collect();
    let fresh: Vec<&Subnet> = all.iter().copied().filter(|s| !avoid.contains(&s.index)).collect();
    let pool = if fresh.is_empty() { all } else { fresh };
    pool.choose(rng).copied()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    // disable_routing
    Sysctl,
    IptablesPolicy,
    IpRuleProhibit,
    IptablesSubnetDrop,
    // disable_interface
    IfconfigDown,
    IpLinkDown,
    MtuTooSmall,
    // remove_ip
    Flush,
    RandomIp,
    WrongMask,
    DuplicateIp,
    // drop_traffic_to_from_subnet
    IptablesDrop,
    IptablesReject,
    IcmpDrop,
    Delay,
    // wrong_routing_table
    WrongInterface,
    WrongGateway,
    HighMetric,
    Loop,
}

const DR_METHODS: [Method; 4] =
    [Method::Sysctl, Method::IptablesPolicy, Method::IpRuleProhibit, Method::IptablesSubnetDrop];
const DI_METHODS: [Method; 3] = [Method::IfconfigDown, Method::IpLinkDown, Method::MtuTooSmall];
const RI_METHODS: [Method; 4] = [Method::Flush, Method::RandomIp, Method::WrongMask, Method::DuplicateIp];
const DT_METHODS: [Method; 4] =
    [Method::IptablesDrop, Method::IptablesReject, Method::IcmpDrop, Method::Delay];
const WR_METHODS: [Method; 4] =
    [Method::WrongInterface, Method::WrongGateway, Method::HighMetric, Method::Loop];

const DR_NAMES: [&str; 4] = names(DR_METHODS);
const DI_NAMES: [&str; 3] = names(DI_METHODS);
const RI_NAMES: [&str; 4] = names(RI_METHODS);
const DT_NAMES: [&str; 4] = names(DT_METHODS);
const WR_NAMES: [&str; 4] = names(WR_METHODS);

const fn names<const N: usize>(methods: [Method; N]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = methods[i].name();
        i += 1;
    }
    out
}

/// What one method contributes: its commands and its own parameters.
struct Built {
    inject: Vec<String>,
    repair: Vec<String>,
    params: Value,
}

fn built(inject: Vec<String>, repair: Vec<String>, params: Value) -> Built {
    Built { inject, repair, params }
}

impl Method {
    const fn name(self) -> &'static str {
        match self {
            Method::Sysctl => "sysctl",
            Method::IptablesPolicy => "iptables_policy",
            Method::IpRuleProhibit => "ip_rule_prohibit",
            Method::IptablesSubnetDrop => "iptables_subnet_drop",
            Method::IfconfigDown => "ifconfig_down",
            Method::IpLinkDown => "ip_link_down",
            Method::MtuTooSmall => "mtu_too_small",
            Method::Flush => "flush",
            Method::RandomIp => "random_ip",
            Method::WrongMask => "wrong_mask",
            Method::DuplicateIp => "duplicate_ip",
            Method::IptablesDrop => "iptables_drop",
            Method::IptablesReject => "iptables_reject",
            Method::IcmpDrop => "icmp_drop",
            Method::Delay => "delay",
            Method::WrongInterface => "wrong_interface",
            Method::WrongGateway => "wrong_gateway",
            Method::HighMetric => "high_metric",
            Method::Loop => "loop",
        }
    }

    fn subnets_needed(self) -> usize {
        match self {
            Method::Sysctl | Method::IptablesPolicy => 0,
            Method::DuplicateIp
            | Method::WrongInterface
            | Method::WrongGateway
            | Method::HighMetric
            | Method::Loop => 2,
            _ => 1,
        }
    }

    fn router_wide(self) -> Built {
        match self {
            // Writing ip_forward also rewrites every interface's `forwarding`, so 1 restores them all.
            Method::Sysctl => built(
                vec!["sysctl -w net.ipv4.ip_forward=0".into()],
                vec!["sysctl -w net.ipv4.ip_forward=1".into()],
                json!({"sysctl": "net.ipv4.ip_forward", "value": 0}),
            ),
            Method::IptablesPolicy => built(
                vec!["iptables -P FORWARD DROP".into()],
                vec!["iptables -P FORWARD ACCEPT".into()],
                json!({"chain": "FORWARD", "policy": "DROP"}),
            ),
            // Only reachable through a bug in subnets_needed; an empty fault is a visible failure.
            _ => built(Vec::new(), Vec::new(), Value::Null),
        }
    }

    fn on_subnet(self, k: &Subnet, rng: &mut impl Rng) -> Built {
        let ifc = &k.router_if;
        let cidr = k.cidr();
        let addr = router_addr(k);
        match self {
            // The rule sits after the `local` rule (the kernel gives it the preference just below
            // `main`'s), so r0 still answers pings to its own addresses: only forwarding stops.
            Method::IpRuleProhibit => built(
                vec![format!("ip rule add iif {ifc} prohibit")],
                vec![format!("ip rule del iif {ifc} prohibit")],
                json!({}),
            ),
            Method::IptablesSubnetDrop => built(
                vec![format!("iptables -A FORWARD -s {cidr} -j DROP")],
                vec![format!("iptables -D FORWARD -s {cidr} -j DROP")],
                json!({"cidr": cidr, "chain": "FORWARD", "target": "DROP"}),
            ),
            // `up` brings the connected route back by itself: the address stays on a downed link.
            Method::IfconfigDown => {
                built(vec![format!("ifconfig {ifc} down")], vec![format!("ifconfig {ifc} up")], json!({}))
            }
            Method::IpLinkDown => built(
                vec![format!("ip link set {ifc} down")],
                vec![format!("ip link set {ifc} up")],
                json!({}),
            ),
            Method::MtuTooSmall => {
                let mtu = rng.random_range(MTU_RANGE);
                built(
                    vec![format!("ip link set {ifc} mtu {mtu}")],
                    vec![format!("ip link set {ifc} mtu {HEALTHY_MTU}")],
                    json!({"mtu": mtu, "healthy_mtu": HEALTHY_MTU}),
                )
            }
            // Flushing also takes the connected and local routes; adding the address back
            // recreates both.
            Method::Flush => built(
                vec![format!("ip addr flush dev {ifc}")],
                vec![add_router_addr(k)],
                json!({"address": addr}),
            ),
            Method::RandomIp => {
                let wrong = format!("10.0.0.{}/24", rng.random_range(RANDOM_IP_HOST));
                built(
                    vec![format!("ip addr del {addr} dev {ifc}"), format!("ip addr add {wrong} dev {ifc}")],
                    // The right address goes back before the wrong one leaves (an interface holds
                    // both at once), so no step of the repair cuts pairs that still worked.
                    vec![add_router_addr(k), format!("ip addr del {wrong} dev {ifc}")],
                    json!({"address": addr, "wrong_address": wrong}),
                )
            }
            Method::WrongMask => {
                let masks: Vec<u8> = WRONG_MASKS.into_iter().filter(|m| mask_breaks(k, *m)).collect();
                let mask = *masks.choose(rng).unwrap_or(&32);
                let wrong = format!("{}/{mask}", k.gateway());
                built(
                    vec![format!("ip addr del {addr} dev {ifc}"), format!("ip addr add {wrong} dev {ifc}")],
                    // The right address goes back before the wrong one leaves: the kernel keeps
                    // both (they differ in prefix length), so the router's address never
                    // disappears, and pairs that still reached it stay reachable.
                    vec![add_router_addr(k), format!("ip addr del {wrong} dev {ifc}")],
                    json!({"address": addr, "wrong_address": wrong, "mask": mask}),
                )
            }
            Method::IptablesDrop | Method::IptablesReject | Method::IcmpDrop => {
                let (target, proto) = match self {
                    Method::IptablesReject => ("REJECT", ""),
                    Method::IcmpDrop => ("DROP", "-p icmp "),
                    _ => ("DROP", ""),
                };
                // FORWARD both ways cuts the subnet off from the others; INPUT also stops it
                // reaching the router itself (its gateway ping), as the seed's INPUT rule did.
                let rules = [
                    format!("FORWARD {proto}-s {cidr} -j {target}"),
                    format!("FORWARD {proto}-d {cidr} -j {target}"),
                    format!("INPUT {proto}-s {cidr} -j {target}"),
                ];
                built(
                    rules.iter().map(|r| format!("iptables -A {r}")).collect(),
                    rules.iter().map(|r| format!("iptables -D {r}")).collect(),
                    json!({
                        "cidr": cidr,
                        "target": target,
                        "protocol": if proto.is_empty() { "all" } else { "icmp" },
                    }),
                )
            }
            // The seed adds `tc netem delay`, but this kernel has no netem, and netem's loss would
            // make scores depend on luck anyway. The tbf stand-in drops every echo frame leaving
            // the interface (see TBF_BURST_BYTES) and never anything at random.
            Method::Delay => built(
                vec![format!(
                    "tc qdisc add dev {ifc} root tbf rate {TBF_RATE} burst {TBF_BURST_BYTES} limit {TBF_LIMIT_BYTES}"
                )],
                vec![format!("tc qdisc del dev {ifc} root")],
                json!({
                    "stand_in_for": "netem delay",
                    "qdisc": "tbf",
                    "rate": TBF_RATE,
                    "burst_bytes": TBF_BURST_BYTES,
                    "limit_bytes": TBF_LIMIT_BYTES,
                }),
            ),
            _ => built(Vec::new(), Vec::new(), Value::Null),
        }
    }

    fn on_two_subnets(self, k: &Subnet, j: &Subnet, rng: &mut impl Rng) -> Built {
        let ifc = &k.router_if;
        let cidr = k.cidr();
        let wrong_if = &j.router_if;
        let o = j.network().octets();
        let host = Ipv4Addr::new(o[0], o[1], o[2], ABSENT_HOST);
        let del_kernel_route = format!("ip route del {cidr} dev {ifc}");
        match self {
            // Another subnet's router address on this interface: subnet k loses its gateway,
            // and r0 now has two interfaces claiming subnet j (the older route keeps winning).
            Method::DuplicateIp => {
                let addr = router_addr(k);
                let wrong = router_addr(j);
                built(
                    vec![format!("ip addr del {addr} dev {ifc}"), format!("ip addr add {wrong} dev {ifc}")],
                    // The right address goes back before the wrong one leaves (an interface holds
                    // both at once), so no step of the repair cuts pairs that still worked.
                    vec![add_router_addr(k), format!("ip addr del {wrong} dev {ifc}")],
                    json!({"address": addr, "wrong_address": wrong}),
                )
            }
            // r0 then ARPs for subnet k's hosts on subnet j's wire, where nobody answers.
            // (The redirects it sends to subnet j's senders name hosts they cannot resolve on
            // their link, so, unlike a resolvable gateway's, those do not stick.)
            Method::WrongInterface => built(
                vec![del_kernel_route, format!("ip route add {cidr} dev {wrong_if}")],
                vec![format!("ip route del {cidr} dev {wrong_if}"), add_kernel_route(k)],
                json!({"cidr": cidr, "wrong_interface": wrong_if}),
            ),
            // `onlink` lets the route in even when subnet j's address is gone (a remove_ip fault
            // earlier in the task), which would otherwise refuse it as an unreachable gateway.
            Method::WrongGateway => built(
                vec![del_kernel_route, format!("ip route add {cidr} via {host} dev {wrong_if} onlink")],
                vec![format!("ip route del {cidr} via {host} dev {wrong_if}"), add_kernel_route(k)],
                json!({"cidr": cidr, "gateway": host.to_string(), "wrong_interface": wrong_if}),
            ),
            // The high metric alone breaks nothing; it matters because a wrong route now beats it.
            Method::HighMetric => {
                let metric = rng.random_range(HIGH_METRIC_RANGE);
                built(
                    vec![
                        del_kernel_route,
                        format!("ip route add {cidr} dev {ifc} metric {metric}"),
                        format!(
                            "ip route add {cidr} via {host} dev {wrong_if} onlink metric {WRONG_ROUTE_METRIC}"
                        ),
                    ],
                    // The right route goes back first: at metric 0 it wins at once, so no
                    // step of the repair leaves subnet k with no route (deleting the wrong
                    // route first would let the demoted one carry traffic, and deleting that
                    // next would cut it again: an unsafe step).
                    vec![
                        add_kernel_route(k),
                        format!("ip route del {cidr} via {host} dev {wrong_if} metric {WRONG_ROUTE_METRIC}"),
                        format!("ip route del {cidr} dev {ifc} metric {metric}"),
                    ],
                    json!({
                        "cidr": cidr,
                        "metric": metric,
                        "gateway": host.to_string(),
                        "wrong_interface": wrong_if,
                        "wrong_metric": WRONG_ROUTE_METRIC,
                    }),
                )
            }
            // The seed's "loop": subnet k routed via the router's own address on subnet j. With a
            // single router no multi-hop loop can form. Linux accepts its own address as the
            // gateway and sends subnet k's packets straight out r0-ethj: it ARPs for them on
            // subnet j's wire (nobody answers, so they are dropped) and sends ICMP redirects to
            // senders on subnet j, which point at an address that is not on their link.
            Method::Loop => {
                let gateway = j.gateway();
                built(
                    vec![del_kernel_route, format!("ip route add {cidr} via {gateway}")],
                    vec![format!("ip route del {cidr} via {gateway}"), add_kernel_route(k)],
                    json!({"cidr": cidr, "gateway": gateway.to_string(), "gateway_is_router": true}),
                )
            }
            _ => built(Vec::new(), Vec::new(), Value::Null),
        }
    }
}

/// `192.168.k.1/24`.
fn router_addr(k: &Subnet) -> String {
    format!("{}/24", k.gateway())
}

/// The broadcast address is spelled out because the topology's addresses have one (rtnetlink sets
/// it); without it the address would come back without `brd` and the local table without the
/// broadcast route, a state that differs from the healthy one although it routes the same.
fn add_router_addr(k: &Subnet) -> String {
    let o = k.network().octets();
    format!("ip addr add {} brd {} dev {}", router_addr(k), Ipv4Addr::new(o[0], o[1], o[2], 255), k.router_if)
}

/// The connected route exactly as the kernel makes it for the interface's address.
fn add_kernel_route(k: &Subnet) -> String {
    format!("ip route add {} dev {} proto kernel scope link src {}", k.cidr(), k.router_if, k.gateway())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    fn rng(seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed)
    }

    #[test]
    fn kinds_round_trip_through_names_abbrevs_and_serde() {
        for kind in FaultKind::ALL {
            assert_eq!(FaultKind::from_name(kind.name()), Some(kind));
            assert_eq!(FaultKind::from_abbrev(kind.abbrev()), Some(kind));
            assert_eq!(serde_json::to_value(kind).ok(), Some(json!(kind.name())));
        }
        assert_eq!(FaultKind::from_name("disable_everything"), None);
    }

    /// The seed's masks, less those that break nothing on this topology (/8 and /16 still hold
    /// the hosts): every draw is one of /30, /31, /32, and over many draws each of them.
    #[test]
    fn wrong_mask_draws_the_seeds_masks_that_break_reachability() {
        let layout = Layout::new(4, 4);
        let subnet = &layout.subnets[0];
        assert!(!mask_breaks(subnet, 8) && !mask_breaks(subnet, 16));
        assert!([30, 31, 32].iter().all(|m| mask_breaks(subnet, *m)));
        let mut drawn = HashSet::new();
        for seed in 0..200 {
            let d =
                draw(FaultKind::RemoveIp, Some("wrong_mask"), &layout, &[], &mut rng(seed)).expect("draw");
            drawn.insert(d.fault.params["mask"].as_u64().expect("mask"));
        }
        assert_eq!(drawn, HashSet::from([30, 31, 32]));
    }

    #[test]
    fn labels_follow_table_2() {
        let mut seen = HashSet::new();
        for (label, level, kinds) in LABELS {
            let spelled: Vec<&str> = kinds.iter().map(|k| k.abbrev()).collect();
            assert_eq!(spelled.join("+"), label);
            assert_eq!(usize::from(level > 1) + 1, kinds.len(), "{label}");
            assert!(seen.insert(label), "{label} twice");
        }
        for level in 1..=3 {
            assert_eq!(LABELS.iter().filter(|l| l.1 == level).count(), 5);
        }
    }

    #[test]
    fn every_method_can_be_forced_on_every_layout() {
        assert_eq!(all_methods().count(), 19);
        for subnets in 2..=4 {
            let layout = Layout::new(subnets, 2);
            for (kind, method) in all_methods() {
                for seed in 0..20 {
                    let f = draw(kind, Some(method), &layout, &[], &mut rng(seed))
                        .unwrap_or_else(|e| panic!("{kind}/{method}: {e}"));
                    assert_eq!(f.fault.kind, kind.name());
                    assert_eq!(f.fault.method, method);
                    assert!(!f.inject.is_empty() && f.inject.len() <= 3, "{kind}/{method}: {:?}", f.inject);
                    assert!(!f.repair.is_empty() && f.repair.len() <= 3, "{kind}/{method}: {:?}", f.repair);
                    if let Some(k) = f.subnet() {
                        assert!((1..=subnets).contains(&k));
                        assert_eq!(f.fault.params["interface"], json!(format!("r0-eth{k}")));
                    }
                    if let Some(j) = f.other_subnet() {
                        assert_ne!(Some(j), f.subnet());
                    }
                }
            }
        }
    }

    #[test]
    fn unknown_method_and_small_layouts_are_errors() {
        let layout = Layout::new(2, 2);
        let err = draw(FaultKind::RemoveIp, Some("sysctl"), &layout, &[], &mut rng(0));
        assert!(matches!(err, Err(FaultError::UnknownMethod { kind: FaultKind::RemoveIp, .. })));
        let one = Layout::new(1, 2);
        let err = draw(FaultKind::WrongRoutingTable, Some("loop"), &one, &[], &mut rng(0));
        assert!(matches!(err, Err(FaultError::TooFewSubnets { needed: 2, have: 1, .. })));
        assert!(draw(FaultKind::DisableInterface, None, &one, &[], &mut rng(0)).is_ok());
        let none = Layout::new(0, 2);
        assert!(draw(FaultKind::DisableRouting, Some("sysctl"), &none, &[], &mut rng(0)).is_ok());
        let err = draw(FaultKind::DropTraffic, Some("delay"), &none, &[], &mut rng(0));
        assert!(matches!(err, Err(FaultError::TooFewSubnets { needed: 1, have: 0, .. })));
    }

    #[test]
    fn unforced_draws_cover_every_method() {
        let layout = Layout::new(3, 2);
        let mut r = rng(7);
        for kind in FaultKind::ALL {
            let seen: HashSet<String> = (0..200)
                .filter_map(|_| draw(kind, None, &layout, &[], &mut r).ok())
                .map(|f| f.fault.method)
                .collect();
            assert_eq!(seen.len(), kind.methods().len(), "{kind}: {seen:?}");
        }
    }

    #[test]
    fn avoid_is_honoured_when_a_subnet_is_left() {
        for subnets in 2..=4u8 {
            let layout = Layout::new(subnets, 3);
            for (kind, method) in all_methods() {
                for seed in 0..30 {
                    let avoid = [1 + (seed as u8 % subnets)];
                    let Ok(f) = draw(kind, Some(method), &layout, &avoid, &mut rng(seed)) else {
                        panic!("{kind}/{method}")
                    };
                    let Some(k) = f.subnet() else { continue };
                    assert!(!avoid.contains(&k), "{kind}/{method} drew avoided subnet {k}");
                    // The second subnet only has room to avoid it from three subnets on.
                    if let (Some(j), true) = (f.other_subnet(), subnets > 2) {
                        assert!(!avoid.contains(&j), "{kind}/{method} drew avoided other subnet {j}");
                    }
                }
            }
        }
        // Nothing left to avoid: the draw still succeeds, on an avoided subnet.
        let layout = Layout::new(2, 2);
        let f = draw(FaultKind::DisableInterface, None, &layout, &[1, 2], &mut rng(3));
        assert!(matches!(f.map(|f| f.subnet()), Ok(Some(1 | 2))));
    }

    #[test]
    fn a_pair_lands_on_different_subnets() {
        for subnets in 2..=4 {
            let layout = Layout::new(subnets, 2);
            for (_, _, kinds) in LABELS.iter().filter(|l| l.2.len() == 2) {
                for seed in 0..30 {
                    let mut r = rng(seed);
                    let mut avoid = Vec::new();
                    let mut drawn = Vec::new();
                    for &kind in kinds.iter() {
                        let f = draw(kind, None, &layout, &avoid, &mut r).unwrap_or_else(|e| panic!("{e}"));
                        avoid.extend(f.subnet());
                        drawn.push(f);
                    }
                    if let (Some(a), Some(b)) = (drawn[0].subnet(), drawn[1].subnet()) {
                        assert_ne!(a, b, "{kinds:?} seed {seed}");
                    }
                }
            }
        }
    }

    #[test]
    fn same_seed_same_fault() {
        let layout = Layout::new(4, 3);
        for kind in FaultKind::ALL {
            for seed in 0..20 {
                let a = draw(kind, None, &layout, &[2], &mut rng(seed));
                let b = draw(kind, None, &layout, &[2], &mut rng(seed));
                assert_eq!(a, b);
            }
        }
        // And different seeds do not all agree, or the rng would not be used at all.
        let distinct: HashSet<String> = (0..20)
            .filter_map(|s| draw(FaultKind::RemoveIp, None, &layout, &[], &mut rng(s)).ok())
            .map(|f| f.inject.join(";"))
            .collect();
        assert!(distinct.len() > 5, "{distinct:?}");
    }

    type Forced = (FaultKind, &'static str);

    /// Two forced faults on a two-subnet layout: the first on subnet 1, the second's subnet away
    /// from it (so on 2, with subnet 1 as its second subnet where it has one).
    fn pair(first: Forced, second: Forced) -> (DrawnFault, DrawnFault) {
        let layout = Layout::new(2, 2);
        let get = |(kind, method): (FaultKind, &str), avoid: &[u8]| {
            draw(kind, Some(method), &layout, avoid, &mut rng(1)).unwrap_or_else(|e| panic!("{e}"))
        };
        let e = get(first, &[2]);
        assert_eq!(e.subnet().unwrap_or(1), 1);
        let l = get(second, &e.subnets());
        (e, l)
    }

    /// Each case was first seen on a real kernel (inject both, repair last first, compare r0).
    #[test]
    fn conflicts_follow_what_the_kernel_refuses() {
        use FaultKind::*;
        let cases: [(Forced, Forced, bool); 14] = [
            // Routes through a downed interface cannot be added.
            ((DisableInterface, "ip_link_down"), (WrongRoutingTable, "wrong_interface"), true),
            ((DisableInterface, "ifconfig_down"), (WrongRoutingTable, "wrong_gateway"), true),
            ((DisableInterface, "mtu_too_small"), (WrongRoutingTable, "wrong_gateway"), false),
            // onlink lets a gateway route through an interface without its address...
            ((RemoveIp, "flush"), (WrongRoutingTable, "wrong_gateway"), false),
            ((RemoveIp, "random_ip"), (WrongRoutingTable, "high_metric"), false),
            // ...but the loop's gateway is the missing address itself.
            ((RemoveIp, "flush"), (WrongRoutingTable, "loop"), true),
            ((RemoveIp, "wrong_mask"), (WrongRoutingTable, "loop"), false),
            // The duplicated prefix is the one the routing fault would rewrite.
            ((RemoveIp, "duplicate_ip"), (WrongRoutingTable, "wrong_interface"), true),
            ((DropTraffic, "delay"), (WrongRoutingTable, "loop"), false),
            ((DisableRouting, "ip_rule_prohibit"), (WrongRoutingTable, "wrong_interface"), false),
            // A routing fault first: removing the address of its interface drops its routes.
            ((WrongRoutingTable, "wrong_interface"), (RemoveIp, "flush"), true),
            ((WrongRoutingTable, "loop"), (DisableInterface, "ip_link_down"), true),
            ((DisableInterface, "ip_link_down"), (RemoveIp, "duplicate_ip"), false),
            ((RemoveIp, "flush"), (RemoveIp, "flush"), true),
        ];
        for (first, second, expected) in cases {
            let (e, l) = pair(first, second);
            assert_eq!(conflicts(&e, &l), expected, "{first:?} then {second:?}: {e:?} {l:?}");
        }
    }

    /// The generator's recipe (avoid the first fault's subnets, redraw on conflict) always finds a
    /// pair quickly, even on two subnets.
    #[test]
    fn every_label_has_conflict_free_pairs_on_every_layout() {
        for subnets in 2..=4 {
            let layout = Layout::new(subnets, 2);
            for (label, _, kinds) in LABELS.iter().filter(|l| l.2.len() == 2) {
                for seed in 0..20 {
                    let mut r = rng(seed);
                    let found = (0..50).any(|_| {
                        let e = draw(kinds[0], None, &layout, &[], &mut r);
                        let Ok(e) = e else { return false };
                        let l = draw(kinds[1], None, &layout, &e.subnets(), &mut r);
                        l.is_ok_and(|l| !conflicts(&e, &l))
                    });
                    assert!(found, "{label} on {subnets} subnets, seed {seed}");
                }
            }
        }
    }

    const BINARIES: [&str; 9] =
        ["ip", "ifconfig", "route", "iptables", "nft", "sysctl", "tc", "arp", "ethtool"];

    /// The sandbox's rules for one command, as the brief states them.
    fn check_command(cmd: &str) -> Result<(), String> {
        let tokens: Vec<&str> = cmd.split(' ').collect();
        if tokens.iter().any(|t| t.is_empty()) {
            return Err("empty token (double or edge space)".into());
        }
        if !BINARIES.contains(&tokens[0]) {
            return Err(format!("binary {} not allowed", tokens[0]));
        }
        for t in &tokens {
            if let Some(c) = t.chars().find(|c| !(c.is_ascii_alphanumeric() || "-_.=/:".contains(*c))) {
                return Err(format!("character {c:?} in {t:?}"));
            }
            if t.contains('/') {
                let (addr, len) = t.split_once('/').ok_or("unreachable")?;
                let ok = addr.parse::<Ipv4Addr>().is_ok() && len.parse::<u8>().is_ok_and(|l| l <= 32);
                if !ok {
                    return Err(format!("'/' outside an address prefix in {t:?}"));
                }
            }
        }
        if tokens[0] == "sysctl" {
            let keys: Vec<&&str> = tokens[1..].iter().filter(|t| !t.starts_with('-')).collect();
            if keys.is_empty() || keys.iter().any(|t| !t.starts_with("net.")) {
                return Err("sysctl outside net.*".into());
            }
        }
        Ok(())
    }

    #[test]
    fn every_command_obeys_the_sandbox_rules() {
        assert!(check_command("ip route add 192.168.1.0/24 dev r0-eth1").is_ok());
        for bad in [
            "sh -c true",
            "ip addr; reboot",
            "sysctl -w kernel.panic=1",
            "ip route add a/b dev x",
            "ip  link",
        ] {
            assert!(check_command(bad).is_err(), "{bad}");
        }
        for subnets in 2..=4 {
            let layout = Layout::new(subnets, 4);
            for (kind, method) in all_methods() {
                for seed in 0..20 {
                    let f = draw(kind, Some(method), &layout, &[], &mut rng(seed))
                        .unwrap_or_else(|e| panic!("{e}"));
                    for cmd in f.inject.iter().chain(&f.repair) {
                        if let Err(why) = check_command(cmd) {
                            panic!("{kind}/{method}: {cmd:?}: {why}");
                        }
                    }
                }
            }
        }
    }

    /// Golden commands for one layout: what the lead's integration test and a reader check against.
    #[test]
    fn commands_read_as_an_operator_would_type_them() {
        let layout = Layout::new(3, 2);
        let get = |kind, method, avoid: &[u8], seed| {
            draw(kind, Some(method), &layout, avoid, &mut rng(seed)).unwrap_or_else(|e| panic!("{e}"))
        };
        let f = get(FaultKind::RemoveIp, "flush", &[1, 3], 0);
        assert_eq!(f.inject, ["ip addr flush dev r0-eth2"]);
        assert_eq!(f.repair, ["ip addr add 192.168.2.1/24 brd 192.168.2.255 dev r0-eth2"]);
        assert_eq!(f.fault.params, json!({"subnet": 2, "interface": "r0-eth2", "address": "192.168.2.1/24"}));

        let f = get(FaultKind::WrongRoutingTable, "wrong_gateway", &[1, 3], 0);
        let j = f.other_subnet().unwrap_or(0);
        assert_eq!(
            f.inject,
            [
                "ip route del 192.168.2.0/24 dev r0-eth2".to_string(),
                format!("ip route add 192.168.2.0/24 via 192.168.{j}.254 dev r0-eth{j} onlink"),
            ]
        );
        assert_eq!(
            f.repair,
            [
                format!("ip route del 192.168.2.0/24 via 192.168.{j}.254 dev r0-eth{j}"),
                "ip route add 192.168.2.0/24 dev r0-eth2 proto kernel scope link src 192.168.2.1".to_string(),
            ]
        );

        let f = get(FaultKind::DropTraffic, "delay", &[2, 3], 0);
        assert_eq!(f.inject, ["tc qdisc add dev r0-eth1 root tbf rate 8kbit burst 64 limit 64"]);
        assert_eq!(f.repair, ["tc qdisc del dev r0-eth1 root"]);
        assert_eq!(f.fault.params["stand_in_for"], json!("netem delay"));

        let f = get(FaultKind::DisableRouting, "sysctl", &[], 0);
        assert_eq!(f.subnet(), None);
        assert_eq!(f.repair, ["sysctl -w net.ipv4.ip_forward=1"]);

        let f = get(FaultKind::DisableInterface, "mtu_too_small", &[], 0);
        let mtu = f.fault.params["mtu"].as_u64().map(|m| m as u32);
        assert!(mtu.is_some_and(|m| MTU_RANGE.contains(&m)), "{mtu:?}");
    }
}
