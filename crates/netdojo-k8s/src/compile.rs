//! Policies compiled into per-pod packet-filter rules, the way a CNI plugin enforces them:
//! selectors are resolved to the addresses of the pods they select, named ports to port
//! numbers, and each pod gets an ingress chain (hook input) and an egress chain (hook output)
//! in its own network namespace. A direction that no policy isolates has no rules.
//!
//! The rules are an intermediate form ([`PodRules`]) rendered to one nftables script per pod
//! ([`PodRules::nft_script`]), applied with `nft -f` as one transaction. The intermediate form
//! can also be evaluated in memory ([`PodRules::admits`]), which is how the compiler is checked
//! against the truth table on thousands of random policy sets without a network.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::Ipv4Addr;

use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::model::{Protocol, Workload};
use crate::policy::{self, Prefix};

/// The name of netdojo's table in each pod's namespace.
pub const TABLE: &str = "netdojo_netpol";

/// The addresses a rule matches on the far side (source for ingress, destination for egress).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Addrs {
    Any,
    /// Pod addresses (a resolved selector). Never empty.
    Ips(BTreeSet<Ipv4Addr>),
    /// An ipBlock: a prefix minus exceptions (IPv4 only: pods have IPv4 addresses).
    Block {
        net: Ipv4Addr,
        len: u8,
        except: Vec<(Ipv4Addr, u8)>,
    },
}

/// The transport part of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum L4 {
    Any,
    Proto(Protocol),
    Ports(Protocol, u16, u16),
}

/// One accept rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rule {
    pub addrs: Addrs,
    pub l4: L4,
}

/// The compiled filter of one pod. `None` for a direction no policy isolates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRules {
    pub ingress: Option<Vec<Rule>>,
    pub egress: Option<Vec<Rule>>,
}

fn in_prefix(ip: Ipv4Addr, net: Ipv4Addr, len: u8) -> bool {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    u32::from(ip) & mask == u32::from(net) & mask
}

impl Addrs {
    fn matches(&self, ip: Ipv4Addr) -> bool {
        match self {
            Addrs::Any => true,
            Addrs::Ips(set) => set.contains(&ip),
            Addrs::Block { net, len, except } => {
                in_prefix(ip, *net, *len) && !except.iter().any(|(n, l)| in_prefix(ip, *n, *l))
            }
        }
    }
}

impl L4 {
    fn matches(&self, protocol: Protocol, port: u16) -> bool {
        match *self {
            L4::Any => true,
            L4::Proto(p) => p == protocol,
            L4::Ports(p, lo, hi) => p == protocol && (lo..=hi).contains(&port),
        }
    }
}

impl PodRules {
    /// Whether the ingress side admits a connection from `src` (true when not isolated).
    pub fn admits_ingress(&self, src: Ipv4Addr, protocol: Protocol, port: u16) -> bool {
        self.ingress
            .as_ref()
            .is_none_or(|rules| rules.iter().any(|r| r.addrs.matches(src) && r.l4.matches(protocol, port)))
    }

    /// Whether the egress side lets a connection to `dst` out (true when not isolated).
    pub fn admits_egress(&self, dst: Ipv4Addr, protocol: Protocol, port: u16) -> bool {
        self.egress
            .as_ref()
            .is_none_or(|rules| rules.iter().any(|r| r.addrs.matches(dst) && r.l4.matches(protocol, port)))
    }

    /// The nftables script that replaces the pod's table in one transaction: declaring the
    /// table first makes the `delete` valid whether or not it existed.
    pub fn nft_script(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "table inet {TABLE}\ndelete table inet {TABLE}\ntable inet {TABLE} {{");
        for (chain, hook, dir, rules) in
            [("ingress", "input", "saddr", &self.ingress), ("egress", "output", "daddr", &self.egress)]
        {
            let Some(rules) = rules else { continue };
            let _ = writeln!(
                s,
                "  chain {chain} {{\n    type filter hook {hook} priority filter; policy accept;"
            );
            // Replies (and ICMP errors) of connections already admitted, and the pod's own loopback.
            let lo = if hook == "input" { "iif" } else { "oif" };
            let _ = writeln!(s, "    ct state established,related accept\n    {lo} \"lo\" accept");
            for rule in rules {
                let mut line = String::from("    ");
                match &rule.addrs {
                    Addrs::Any => {}
                    Addrs::Ips(set) => {
                        let list: Vec<String> = set.iter().map(Ipv4Addr::to_string).collect();
                        let _ = write!(line, "ip {dir} {{ {} }} ", list.join(", "));
                    }
                    Addrs::Block { net, len, except } => {
                        let _ = write!(line, "ip {dir} {net}/{len} ");
                        if !except.is_empty() {
                            let list: Vec<String> = except.iter().map(|(n, l)| format!("{n}/{l}")).collect();
                            let _ = write!(line, "ip {dir} != {{ {} }} ", list.join(", "));
                        }
                    }
                }
                match rule.l4 {
                    L4::Any => {}
                    L4::Proto(p) => {
                        let _ = write!(line, "meta l4proto {} ", p.nft());
                    }
                    L4::Ports(p, lo, hi) if lo == hi => {
                        let _ = write!(line, "meta l4proto {} th dport {lo} ", p.nft());
                    }
                    L4::Ports(p, lo, hi) => {
                        let _ = write!(line, "meta l4proto {} th dport {lo}-{hi} ", p.nft());
                    }
                }
                line.push_str("accept");
                let _ = writeln!(s, "{line}");
            }
            // Rejected rather than dropped: the verdict is the same (no connection), and a
            // prober learns it at once instead of waiting out a timeout.
            let _ = writeln!(s, "    reject with icmpx admin-prohibited\n  }}");
        }
        s.push_str("}\n");
        s
    }
}

/// The addresses a peer stands for. `None` when it matches no address at all.
fn peer_addrs(peer: &NetworkPolicyPeer, policy_ns: &str, workload: &Workload) -> Option<Addrs> {
    if let Some(block) = &peer.ip_block {
        let cidr = Prefix::parse(&block.cidr)?;
        let net = cidr.network_v4()?;
        let except = block
            .except
            .iter()
            .flatten()
            .filter_map(|e| Prefix::parse(e))
            .filter_map(|e| Some((e.network_v4()?, e.len)))
            .collect();
        return Some(Addrs::Block { net, len: cidr.len, except });
    }
    let ips: BTreeSet<Ipv4Addr> = workload
        .pods
        .iter()
        .filter(|p| policy::peer_matches(peer, policy_ns, p, workload))
        .map(|p| p.ip)
        .collect();
    (!ips.is_empty()).then_some(Addrs::Ips(ips))
}

/// The transport matches of a policy port, resolved for destination pod `dst` (a named port
/// means the destination's container port of that name). Empty when it matches nothing.
fn port_l4(port: &NetworkPolicyPort, dst: &crate::model::PodInfo) -> Option<L4> {
    let protocol = Protocol::parse(port.protocol.as_deref())?;
    match &port.port {
        None => Some(L4::Proto(protocol)),
        Some(IntOrString::Int(n)) => {
            let lo = u16::try_from(*n).ok()?;
            let hi = match port.end_port {
                Some(e) => u16::try_from(e).ok()?,
                None => lo,
            };
            Some(L4::Ports(protocol, lo, hi))
        }
        Some(IntOrString::String(name)) => dst.named_port(name, protocol).map(|n| L4::Ports(protocol, n, n)),
    }
}

fn narrow(addrs: &Addrs, ip: Ipv4Addr) -> Option<Addrs> {
    addrs.matches(ip).then(|| Addrs::Ips([ip].into()))
}

/// Compiles the rules of pod `pod`.
pub fn compile_pod(policies: &[NetworkPolicy], workload: &Workload, pod: usize) -> PodRules {
    let me = &workload.pods[pod];
    let mut out = PodRules::default();
    for np in policies.iter().filter(|np| policy::selects(np, me)) {
        let (ingress, egress) = policy::directions(np);
        let ns = policy::namespace(np);
        let spec = np.spec.as_ref();
        if ingress {
            let rules = out.ingress.get_or_insert_with(Vec::new);
            for r in spec.and_then(|s| s.ingress.as_deref()).unwrap_or_default() {
                let peers: Vec<Addrs> = match r.from.as_deref() {
                    None | Some([]) => vec![Addrs::Any],
                    Some(list) => list.iter().filter_map(|p| peer_addrs(p, ns, workload)).collect(),
                };
                let l4s: Vec<L4> = match r.ports.as_deref() {
                    None | Some([]) => vec![L4::Any],
                    // Named ports of ingress rules are this pod's own.
                    Some(list) => list.iter().filter_map(|p| port_l4(p, me)).collect(),
                };
                for a in &peers {
                    for l4 in &l4s {
                        rules.push(Rule { addrs: a.clone(), l4: *l4 });
                    }
                }
            }
        }
        if egress {
            let rules = out.egress.get_or_insert_with(Vec::new);
            for r in spec.and_then(|s| s.egress.as_deref()).unwrap_or_default() {
                let peers: Vec<Addrs> = match r.to.as_deref() {
                    None | Some([]) => vec![Addrs::Any],
                    Some(list) => list.iter().filter_map(|p| peer_addrs(p, ns, workload)).collect(),
                };
                for a in &peers {
                    for p in r.ports.as_deref().unwrap_or_default() {
                        if let Some(IntOrString::String(_)) = &p.port {
                            // A named port means a different number on each destination: one
                            // rule per pod that has the name, narrowed to that pod's address.
                            for dst in &workload.pods {
                                if let (Some(l4), Some(addrs)) = (port_l4(p, dst), narrow(a, dst.ip)) {
                                    rules.push(Rule { addrs, l4 });
                                }
                            }
                        } else if let Some(l4) = port_l4(p, me) {
                            rules.push(Rule { addrs: a.clone(), l4 });
                        }
                    }
                    if r.ports.as_deref().unwrap_or_default().is_empty() {
                        rules.push(Rule { addrs: a.clone(), l4: L4::Any });
                    }
                }
            }
        }
    }
    for rules in [&mut out.ingress, &mut out.egress].into_iter().flatten() {
        rules.sort();
        rules.dedup();
    }
    out
}

/// Compiles the rules of every pod of a workload.
pub fn compile(policies: &[NetworkPolicy], workload: &Workload) -> Vec<PodRules> {
    (0..workload.pods.len()).map(|i| compile_pod(policies, workload, i)).collect()
}

/// The verdict the compiled rules give a connection (both ends' chains), evaluated in memory.
pub fn admits(
    rules: &[PodRules],
    workload: &Workload,
    from: usize,
    to: usize,
    port: u16,
    protocol: Protocol,
) -> bool {
    let src = &workload.pods[from];
    let dst = &workload.pods[to];
    rules[from].admits_egress(dst.ip, protocol, port) && rules[to].admits_ingress(src.ip, protocol, port)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::{engine, random};

    /// The compiled rules, evaluated in memory, give the truth table's verdict on every pair
    /// and port (listened on or not) of thousands of random workloads and policy sets.
    #[test]
    fn compiled_rules_agree_with_the_truth_table_on_random_sets() {
        let (mut checked, mut allowed) = (0usize, 0usize);
        for seed in 0..3000u64 {
            let mut rng = random::R::seed_from_u64(seed);
            let w = random::workload(&mut rng);
            let ps = random::policies(&mut rng, &w);
            for p in &ps {
                crate::policy::validate(p).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            }
            let rules = compile(&ps, &w);
            for from in 0..w.pods.len() {
                for to in 0..w.pods.len() {
                    for port in [79, 80, 81, 8080, 8081] {
                        for proto in [Protocol::Tcp, Protocol::Udp, Protocol::Sctp] {
                            let want = engine::allowed(&ps, &w, from, to, port, proto);
                            let got = admits(&rules, &w, from, to, port, proto);
                            assert_eq!(got, want, "seed {seed}: {from} -> {to}:{port}/{proto}");
                            checked += 1;
                            allowed += usize::from(want);
                        }
                    }
                }
            }
        }
        assert!(checked > 500_000, "{checked}");
        // Both verdicts are common, so the agreement says something.
        let share = allowed as f64 / checked as f64;
        assert!((0.15..0.85).contains(&share), "allowed share {share}");
    }

    #[test]
    fn a_script_replaces_the_table_in_one_transaction() {
        let rules = PodRules {
            ingress: Some(vec![Rule {
                addrs: Addrs::Block {
                    net: Ipv4Addr::new(10, 244, 0, 0),
                    len: 24,
                    except: vec![(Ipv4Addr::new(10, 244, 0, 8), 29)],
                },
                l4: L4::Ports(Protocol::Tcp, 80, 81),
            }]),
            egress: None,
        };
        let s = rules.nft_script();
        assert!(s.starts_with(&format!("table inet {TABLE}\ndelete table inet {TABLE}\n")), "{s}");
        assert!(
            s.contains(
                "ip saddr 10.244.0.0/24 ip saddr != { 10.244.0.8/29 } meta l4proto tcp th dport 80-81 accept"
            ),
            "{s}"
        );
        assert!(!s.contains("chain egress"), "egress not isolated: no chain\n{s}");
    }
}
