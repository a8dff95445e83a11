//! The derivation on the labs of testdata/incident/labs: every type offered somewhere, inject
//! and repair inverse in configuration terms, every action something an agent could type, draws
//! deterministic and conflict-free.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use netdojo_config::config::{Config, Dialect};
use netdojo_linux::topology::NodeKind;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::fault::Action;

fn labs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/incident/labs")
}

fn labs() -> Vec<Lab> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(labs_dir())
        .expect("testdata/incident/labs")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .collect();
    paths.sort();
    paths.iter().map(|p| Lab::load(p).unwrap_or_else(|e| panic!("{e}"))).collect()
}

fn lab(name: &str) -> Lab {
    Lab::load(labs_dir().join(format!("{name}.yml"))).unwrap_or_else(|e| panic!("{e}"))
}

/// A device's state in configuration terms: its FRR configuration tree, and what the Linux
/// commands of the catalogue change (addresses, MTUs, the default route, sysctls, nftables),
/// and its services.
#[derive(Debug, Clone, PartialEq)]
struct State {
    frr: BTreeSet<Vec<String>>,
    addrs: BTreeSet<(String, String)>,
    mtu: BTreeMap<String, String>,
    default: Option<String>,
    sysctls: BTreeMap<String, String>,
    /// Rendered in order: a chain's rule order is what some faults change.
    nft: String,
    services: BTreeMap<String, BTreeMap<String, String>>,
    links_down: BTreeSet<String>,
}

struct Model {
    frr: BTreeMap<String, Config>,
    nft: BTreeMap<String, Config>,
    state: BTreeMap<String, State>,
}

impl Model {
    fn new(lab: &Lab) -> Model {
        let mut frr = BTreeMap::new();
        let mut state = BTreeMap::new();
        for (name, node) in lab.topology.nodes.iter() {
            if node.kind == NodeKind::Bridge {
                continue;
            }
            let config = node
                .config
                .as_deref()
                .map(|c| Config::parse(c, Dialect::Frr).expect("the lab's FRR config parses"))
                .unwrap_or_default();
            frr.insert(name.to_string(), config);
            let mut sysctls = node.sysctls.clone();
            if node.kind == NodeKind::Frr {
                sysctls.insert("net.ipv4.ip_forward".into(), "1".into());
            }
            let mut services = BTreeMap::new();
            for s in lab.services.iter().filter(|s| s.node == name) {
                let mut m: BTreeMap<String, String> =
                    s.records.iter().map(|(k, v)| (format!("record {k}"), v.clone())).collect();
                m.insert("port".into(), s.port().to_string());
                m.insert("running".into(), "yes".into());
                services.insert(s.name.clone(), m);
            }
            state.insert(
                name.to_string(),
                State {
                    frr: BTreeSet::new(),
                    addrs: node.interfaces.iter().map(|(i, a)| (i.clone(), a.clone())).collect(),
                    mtu: BTreeMap::new(),
                    default: node
                        .routes
                        .iter()
                        .find(|r| r.dst == "default")
                        .and_then(|r| r.via)
                        .map(|v| v.to_string()),
                    sysctls,
                    nft: String::new(),
                    services,
                    links_down: BTreeSet::new(),
                },
            );
        }
        let nft = lab.linux.keys().map(|n| (n.clone(), super::view::nft_of(lab, n))).collect();
        Model { frr, nft, state }
    }

    fn snapshot(&self) -> BTreeMap<String, State> {
        let mut out = self.state.clone();
        for (name, s) in &mut out {
            s.frr = self.frr.get(name).map(|c| c.paths().into_iter().collect()).unwrap_or_default();
            // FRR prints every interface, configured or not: an empty section is no change.
            let parents: BTreeSet<String> =
                s.frr.iter().filter(|p| p.len() > 1).map(|p| p[0].clone()).collect();
            s.frr.retain(|p| !(p.len() == 1 && p[0].starts_with("interface ") && !parents.contains(&p[0])));
            s.nft = self.nft.get(name).map(Config::render).unwrap_or_default();
            // A sysctl nobody set reads as the kernel's default in a fresh namespace.
            s.sysctls.retain(|k, v| !(v == "0" && k.ends_with("rp_filter")));
            s.mtu.retain(|_, v| v != "1500");
        }
        out
    }

    fn apply(&mut self, action: &Action) {
        match action {
            Action::Vtysh { device, lines } => {
                self.frr
                    .get_mut(device)
                    .expect("a router")
                    .apply(lines, Dialect::Frr)
                    .expect("vtysh lines read");
            }
            Action::Linux { device, line } => {
                let s = self.state.get_mut(device).expect("a node");
                let w: Vec<&str> = line.split_whitespace().collect();
                match w[..] {
                    ["ip", "addr", "add", a, "dev", i] => {
                        assert!(s.addrs.insert((i.into(), a.into())), "{line}: twice")
                    }
                    ["ip", "addr", "del", a, "dev", i] => {
                        assert!(s.addrs.remove(&(i.into(), a.into())), "{line}: absent")
                    }
                    ["ip", "link", "set", "dev", i, "mtu", m] => {
                        s.mtu.insert(i.into(), m.into());
                    }
                    ["ip", "route", "replace", "default", "via", g] => s.default = Some(g.into()),
                    ["sysctl", "-w", kv] => {
                        let (k, v) = kv.split_once('=').expect("KEY=VALUE");
                        s.sysctls.insert(k.into(), v.into());
                    }
                    // netdojo-config leaves `flush` out; here it empties a chain of its rules.
                    ["nft", "flush", "chain", family, table, chain] => {
                        let nft = self.nft.entry(device.clone()).or_default();
                        let t = nft
                            .nodes
                            .iter_mut()
                            .find(|n| n.line == format!("table {family} {table}"))
                            .expect("table");
                        let c = t
                            .children
                            .iter_mut()
                            .find(|n| n.line == format!("chain {chain}"))
                            .expect("chain");
                        c.children.retain(|l| l.line.starts_with("type ") || l.line.starts_with("policy "));
                    }
                    ["nft", ..] => {
                        self.nft
                            .entry(device.clone())
                            .or_default()
                            .apply(&[line], Dialect::Linux)
                            .expect("nft reads");
                    }
                    _ => panic!("the model does not know `{line}`"),
                }
            }
            Action::Service { device, service, op } => {
                let s =
                    self.state.get_mut(device).expect("a node").services.get_mut(service).expect("a service");
                match op.split_whitespace().collect::<Vec<_>>()[..] {
                    ["stop"] => s.insert("running".into(), "no".into()),
                    ["start"] => s.insert("running".into(), "yes".into()),
                    ["set", "port", p] => s.insert("port".into(), p.into()),
                    ["set", "record", n, a] => s.insert(format!("record {n}"), a.into()),
                    _ => panic!("unknown service op {op}"),
                };
            }
        }
    }
}

#[test]
fn every_fault_type_has_a_candidate_on_some_lab() {
    let labs = labs();
    let mut offered_by: BTreeMap<FaultType, Vec<String>> = BTreeMap::new();
    for lab in &labs {
        for t in offered(lab) {
            offered_by.entry(t).or_default().push(lab.name.clone());
        }
    }
    for t in FaultType::ALL {
        println!("{:32} {}", t.id(), offered_by.get(t).map(|l| l.join(", ")).unwrap_or_default());
    }
    let missing: Vec<&str> =
        FaultType::ALL.iter().filter(|t| !offered_by.contains_key(t)).map(|t| t.id()).collect();
    assert!(missing.is_empty(), "no lab offers {missing:?}");
}

#[test]
fn inject_changes_the_configuration_and_repair_restores_it() {
    for lab in labs() {
        for c in all_candidates(&lab) {
            let f = &c.fault;
            let mut m = Model::new(&lab);
            let healthy = m.snapshot();
            for a in &f.inject {
                m.apply(a);
            }
            let broken = m.snapshot();
            assert_ne!(broken, healthy, "{} {}: inject changes nothing: {f:#?}", lab.name, f.fault_type);
            for a in &f.repair {
                m.apply(a);
            }
            let repaired = m.snapshot();
            for (node, want) in &healthy {
                assert_eq!(
                    &repaired[node], want,
                    "{} {} on {node}: repair is not inverse: {f:#?}",
                    lab.name, f.fault_type
                );
            }
        }
    }
}

#[test]
fn every_action_is_one_an_agent_could_type() {
    for lab in labs() {
        for c in all_candidates(&lab) {
            let f = &c.fault;
            assert!(lab.topology.nodes.get(&f.device).is_some(), "{}: {f:?}", lab.name);
            assert!(!f.detail.is_empty());
            for a in f.inject.iter().chain(&f.repair) {
                match a {
                    Action::Vtysh { lines, .. } => {
                        for l in lines {
                            netdojo_linux::vty::check_config_line(l)
                                .unwrap_or_else(|e| panic!("{} {}: `{l}`: {e}", lab.name, f.fault_type));
                        }
                    }
                    Action::Linux { line, .. } => {
                        netdojo_linux::exec::parse(line)
                            .unwrap_or_else(|e| panic!("{} {}: `{line}`: {e}", lab.name, f.fault_type));
                    }
                    Action::Service { device, service, .. } => {
                        assert!(
                            lab.services.iter().any(|s| &s.node == device && &s.name == service),
                            "{a:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_ring_offers_what_needs_another_or_an_asymmetric_path() {
    let ring = lab("faults-ring");
    let of = |t| candidates(&ring, t);
    // h1 -> h3 goes r1, r2, r3: making either hop expensive moves it to r4.
    let cost: Vec<String> = of(FaultType::OspfCostSuboptimal).iter().map(|f| f.device.clone()).collect();
    assert_eq!(cost, ["r1", "r2", "r3", "r4"]);
    // Forward by r2, back by r4: r3 (and r1 for the way back) see traffic on the other side.
    let rp: Vec<String> = of(FaultType::RpFilterStrict).iter().map(|f| f.device.clone()).collect();
    assert_eq!(rp, ["r3", "r1"]);
    // The floating static wins once its distance drops; it is no candidate for a missing route.
    let distance = of(FaultType::StaticDistance);
    assert_eq!(distance.len(), 1);
    assert!(distance[0].inject.iter().any(|a| matches!(a, Action::Vtysh { lines, .. } if lines.contains(&"ip route 10.3.3.0/24 10.0.14.2".to_string()))));
    assert!(of(FaultType::StaticMissing).is_empty());
    // The hosts' LANs have no OSPF neighbour: passive there breaks nothing.
    assert!(of(FaultType::OspfPassiveInterface).iter().all(|f| !f.detail.contains("eth3")));
    // No BGP, no services here.
    assert!(of(FaultType::BgpNeighborShutdown).is_empty() && of(FaultType::HttpDown).is_empty());
}

#[test]
fn isp_access_offers_ebgp_multihop_on_both_ends_of_its_two_hop_session() {
    // ce and pe peer between loopbacks across agg: without ebgp-multihop either end sends with
    // a TTL of 1, which agg does not forward (on enterprise the loopbacks are one hop apart).
    let lab = lab("isp-access");
    let multihop = candidates(&lab, FaultType::BgpEbgpMultihopMissing);
    let on: Vec<(&str, &str)> = multihop.iter().map(|f| (f.device.as_str(), f.detail.as_str())).collect();
    assert_eq!(
        on,
        [
            ("ce", "ce's eBGP session with 172.16.255.1 (between loopbacks) lacks ebgp-multihop"),
            ("pe", "pe's eBGP session with 10.40.255.1 (between loopbacks) lacks ebgp-multihop"),
        ]
    );
    let pe = &multihop[1];
    assert!(pe.inject.iter().any(|a| matches!(a, Action::Vtysh { lines, .. } if lines.iter().any(|l| l.trim() == "no neighbor 10.40.255.1 ebgp-multihop 2"))));
    // The customer's loopback reaches pe over iBGP from agg, not OSPF.
    assert!(candidates(&lab, FaultType::BgpMissingRedistribute).iter().any(|f| f.device == "agg"));
}

#[test]
fn draws_are_deterministic_on_different_devices_and_disjoint() {
    for lab in labs() {
        let types = offered(&lab);
        for seed in 0..20u64 {
            for k in 1..=3 {
                let a = draw(&lab, &types, k, &mut ChaCha8Rng::seed_from_u64(seed));
                let b = draw(&lab, &types, k, &mut ChaCha8Rng::seed_from_u64(seed));
                assert_eq!(a, b);
                let Ok(faults) = a else { continue };
                assert_eq!(faults.len(), k);
                let devices: BTreeSet<&str> = faults.iter().map(|f| f.device.as_str()).collect();
                assert_eq!(devices.len(), k, "{}: {faults:?}", lab.name);
            }
        }
        // One type only: every draw is of that type.
        if let Some(t) = types.first() {
            let f = draw(&lab, &[*t], 1, &mut ChaCha8Rng::seed_from_u64(7)).expect("offered");
            assert_eq!(f[0].fault_type, *t);
        }
    }
    let ring = lab("faults-ring");
    let err =
        draw(&ring, &[FaultType::HttpDown], 1, &mut ChaCha8Rng::seed_from_u64(1)).expect_err("no web server");
    assert!(err.to_string().contains("faults-ring") && err.to_string().contains("http_down"), "{err}");
}

#[test]
fn the_dual_stack_lab_offers_ospfv3_faults_on_its_watched_links_and_paths() {
    let l = lab("dual-stack");
    let details = |t: FaultType| -> Vec<String> {
        candidates(&l, t).into_iter().map(|f| format!("{} {}", f.device, f.detail)).collect()
    };
    // Four watched adjacencies (ams~lon, ams~fra, par~lon, par~fra), from both ends.
    for t in [
        FaultType::Ospf6AreaMismatch,
        FaultType::Ospf6HelloMismatch,
        FaultType::Ospf6DeadMismatch,
        FaultType::Ospf6PassiveInterface,
    ] {
        assert_eq!(candidates(&l, t).len(), 8, "{t}: {:?}", details(t));
    }
    // The path lon,ams,fra moves to par when lon's or ams's link on it costs 1000.
    let cost = details(FaultType::Ospf6CostSuboptimal);
    assert_eq!(cost.len(), 2, "{cost:?}");
    assert!(cost.iter().all(|d| d.contains("by lon,par,fra")), "{cost:?}");
    // Missing areas: the 8 transit ends, and the prefixes route checks want (lon's and fra's
    // LANs, ams's loopback).
    let missing = details(FaultType::Ospf6MissingInterfaceArea);
    assert_eq!(missing.len(), 11, "{missing:?}");
    assert!(missing.iter().any(|d| d.starts_with("ams ams lo has no OSPFv3 area")), "{missing:?}");
    // IPv4-only labs offer none.
    assert!(candidates(&lab("campus"), FaultType::Ospf6PassiveInterface).is_empty());
}
