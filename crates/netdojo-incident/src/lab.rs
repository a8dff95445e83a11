//! A lab: a containerlab-style topology of `frr` routers and `host`s (netdojo-linux's
//! [`Topology`] body), the services its hosts run, and the health checks that hold when nothing
//! is broken. One YAML file per lab in `testdata/incident/labs/`:
//!
//! ```yaml
//! name: campus
//! description: Two buildings and a data centre room, OSPF with a stub area.
//! topology:
//!   nodes:
//!     r1: { kind: frr, daemons: [ospfd], interfaces: { eth1: 10.0.12.1/30 }, config: "..." }
//!     h1: { kind: host, interfaces: { eth0: 10.1.1.10/24 }, routes: [ { dst: default, via: 10.1.1.1 } ] }
//!   links:
//!     - endpoints: ["r1:eth1", "r2:eth1"]
//! services:
//!   - { name: web, node: h5, kind: http, port: 80 }
//!   - { name: dns, node: h5, kind: dns, records: { www.campus.lab: 10.5.5.10 } }
//! checks:
//!   - { check: reach, from: h1, to: 10.5.5.10 }
//!   - { check: path, from: h1, to: 10.5.5.10, via: [r1, r3] }
//!   - { check: ospf, device: r1, neighbor: 2.2.2.2 }
//!   - { check: bgp, device: r4, neighbor: 192.0.2.1 }
//!   - { check: route, device: r2, prefix: 10.5.5.0/24, protocol: ospf }
//!   - { check: dns, from: h1, server: 10.5.5.10, name: www.campus.lab, address: 10.5.5.10 }
//!   - { check: http, from: h1, address: 10.5.5.10, port: 80 }
//! ```
//!
//! A check's name ([`Check::name`]) is derived from its fields, so a fault's symptom and a
//! report can name checks without the file naming them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use netdojo_linux::topology::{Body, NodeKind, Topology};
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {field}: {message}")]
    Invalid { path: String, field: String, message: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lab {
    pub name: String,
    /// One sentence for people: what network this is.
    #[serde(default)]
    pub description: String,
    pub topology: Body,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<Service>,
    /// Commands of the `linux` dialect run on a node once the network and FRR are up, in
    /// order (an `nft` ruleset of an edge router, a host's IPv6 address): node → lines. Operator
    /// commands (split without a shell, not held to the agent's allow-list), run contained in
    /// the node's namespace.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub linux: BTreeMap<String, Vec<String>>,
    /// Whether the lab uses IPv6. Without it every node has IPv6 turned off (netdojo-linux's
    /// `IPV4_ONLY`), which makes building and deleting the network cheaper; with it every node
    /// skips duplicate address detection, so addresses work at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ipv6: bool,
    pub checks: Vec<Check>,
}

/// A service a host runs, started by netdojo inside the host's namespace (contained like an FRR
/// daemon) once the network is up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    pub name: String,
    pub node: String,
    pub kind: ServiceKind,
    /// The port it listens on (53 for DNS, 80 for HTTP by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// DNS: name → IPv4 address it answers with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub records: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceKind {
    Dns,
    Http,
}

impl ServiceKind {
    pub fn default_port(self) -> u16 {
        match self {
            ServiceKind::Dns => 53,
            ServiceKind::Http => 80,
        }
    }
}

impl Service {
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(self.kind.default_port())
    }
}

/// What holds in the healthy lab. Every variant is observed from inside the lab's namespaces
/// (a ping or a probe from a node, a vtysh `show` on a router), never from the root namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "check", rename_all = "lowercase", deny_unknown_fields)]
pub enum Check {
    /// `from` (a node) reaches `to` (an address, or a node's first address) by ping.
    Reach { from: String, to: String },
    /// The forward path from `from` to `to` passes through the routers `via`, in this order
    /// (other hops may come between).
    Path { from: String, to: String, via: Vec<String> },
    /// `device` has a full OSPF adjacency with the router whose router-id is `neighbor`.
    Ospf { device: String, neighbor: String },
    /// `device` has a full OSPFv3 adjacency with the router whose router-id is `neighbor`.
    Ospf6 { device: String, neighbor: String },
    /// `device`'s BGP session with `neighbor` (an address) is Established.
    Bgp { device: String, neighbor: String },
    /// `device`'s routing table has `prefix`, learnt by `protocol` when given (FRR's names:
    /// `ospf`, `bgp`, `static`, `connected`, `ospf6`), through `nexthop` when given.
    Route {
        device: String,
        prefix: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        protocol: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nexthop: Option<String>,
    },
    /// A DNS query from `from` to `server` for `name` answers `address`.
    Dns { from: String, server: String, name: String, address: String },
    /// An HTTP GET from `from` to `address:port` answers 200.
    Http { from: String, address: String, port: u16 },
}

impl Check {
    /// A stable, readable name: `reach h1 -> 10.5.5.10`, `ospf r1 ~ 2.2.2.2`...
    pub fn name(&self) -> String {
        match self {
            Check::Reach { from, to } => format!("reach {from} -> {to}"),
            Check::Path { from, to, via } => format!("path {from} -> {to} via {}", via.join(",")),
            Check::Ospf { device, neighbor } => format!("ospf {device} ~ {neighbor}"),
            Check::Ospf6 { device, neighbor } => format!("ospf6 {device} ~ {neighbor}"),
            Check::Bgp { device, neighbor } => format!("bgp {device} ~ {neighbor}"),
            Check::Route { device, prefix, protocol, nexthop } => {
                let mut s = format!("route {device} {prefix}");
                if let Some(p) = protocol {
                    s.push_str(&format!(" by {p}"));
                }
                if let Some(n) = nexthop {
                    s.push_str(&format!(" via {n}"));
                }
                s
            }
            Check::Dns { from, server, name, address } => format!("dns {from} @{server} {name} = {address}"),
            Check::Http { from, address, port } => format!("http {from} -> {address}:{port}"),
        }
    }

    /// The nodes the check names.
    pub fn nodes(&self) -> Vec<&str> {
        match self {
            Check::Reach { from, .. } | Check::Dns { from, .. } | Check::Http { from, .. } => vec![from],
            Check::Path { from, via, .. } => {
                std::iter::once(from.as_str()).chain(via.iter().map(String::as_str)).collect()
            }
            Check::Ospf { device, .. }
            | Check::Ospf6 { device, .. }
            | Check::Bgp { device, .. }
            | Check::Route { device, .. } => vec![device],
        }
    }
}

impl Lab {
    pub fn load(path: impl AsRef<Path>) -> Result<Self, LabError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| LabError::Parse { path: name.clone(), message: e.to_string() })?;
        Self::from_str_named(&text, &name)
    }

    pub fn from_str_named(text: &str, origin: &str) -> Result<Self, LabError> {
        let lab: Lab = serde_yaml_ng::from_str(text)
            .map_err(|e| LabError::Parse { path: origin.to_string(), message: e.to_string() })?;
        lab.validate(origin)?;
        Ok(lab)
    }

    /// The topology netdojo-linux builds.
    pub fn topology(&self) -> Topology {
        Topology { name: self.name.clone(), topology: self.topology.clone() }
    }

    /// Every name a check or a service uses must be a node of the topology, of the right kind.
    pub fn validate(&self, origin: &str) -> Result<(), LabError> {
        let invalid =
            |field: String, message: String| LabError::Invalid { path: origin.to_string(), field, message };
        let topology = self.topology();
        topology.validate(origin).map_err(|e| LabError::Invalid {
            path: origin.to_string(),
            field: "topology".into(),
            message: e.to_string(),
        })?;
        for (i, service) in self.services.iter().enumerate() {
            match topology.node(&service.node) {
                Some(n) if n.kind == NodeKind::Host => {}
                Some(_) => {
                    return Err(invalid(
                        format!("services[{i}].node"),
                        format!("{} is not a host", service.node),
                    ));
                }
                None => {
                    return Err(invalid(format!("services[{i}].node"), format!("no node {}", service.node)));
                }
            }
        }
        for (node, lines) in &self.linux {
            if topology.node(node).is_none() {
                return Err(invalid(format!("linux.{node}"), format!("no node {node}")));
            }
            for (i, line) in lines.iter().enumerate() {
                if let Err(e) = netdojo_linux::exec::trusted(line) {
                    return Err(invalid(format!("linux.{node}[{i}]"), e.to_string()));
                }
            }
        }
        if self.checks.is_empty() {
            return Err(invalid("checks".into(), "a lab needs at least one health check".into()));
        }
        for (i, check) in self.checks.iter().enumerate() {
            for node in check.nodes() {
                if topology.node(node).is_none() {
                    return Err(invalid(format!("checks[{i}]"), format!("{}: no node {node}", check.name())));
                }
            }
            // It is read with `show bgp neighbors NEIGHBOR json`: a word more would be another
            // command.
            if let Check::Bgp { neighbor, .. } = check
                && neighbor.parse::<std::net::IpAddr>().is_err()
            {
                return Err(invalid(
                    format!("checks[{i}].neighbor"),
                    format!("{}: `{neighbor}` is not an address", check.name()),
                ));
            }
        }
        Ok(())
    }

    /// The routers (`frr` nodes), in declaration order.
    pub fn routers(&self) -> Vec<&str> {
        self.topology.nodes.iter().filter(|(_, n)| n.kind == NodeKind::Frr).map(|(k, _)| k).collect()
    }

    /// The hosts, in declaration order.
    pub fn hosts(&self) -> Vec<&str> {
        self.topology.nodes.iter().filter(|(_, n)| n.kind == NodeKind::Host).map(|(k, _)| k).collect()
    }

    /// How long an OSPF adjacency over an MD5-authenticated interface can take to come back
    /// when a change resets that interface (its network type, its area): the dead interval and
    /// five hellos, the longest over the lab's such interfaces; `None` without MD5.
    ///
    /// FRR 8.4's ospfd numbers a cryptographic packet with the time in seconds or, when it
    /// sends more than one a second, one more than the last; so an interface's numbers run
    /// ahead of the clock by the packets of the initial exchange (and the hellos kicked as the
    /// lab starts, `LiveLab::kick_hellos`) and, with one hello a second, stay ahead. A reset
    /// interface starts again from the clock, and its neighbour drops every packet numbered
    /// below the last it accepted (`ospf_check_md5 bad sequence` in ospfd's log) until its dead
    /// interval ends the adjacency; then the adjacency forms again over a few hellos. Measured
    /// on isp-core (1 s hellos, dead after 3 s), repairing a network-type mismatch on p1 (task
    /// `incident-s1-0171` started with its fault): the adjacency was still down when a 4 s wait
    /// ended in 4 of 4 episodes, and every check passed again 6.0-6.1 s after the change; five
    /// hellos rather than three leave room for a loaded machine.
    pub fn md5_recovery(&self) -> Option<Duration> {
        let mut longest: Option<Duration> = None;
        for (_, node) in self.topology.nodes.iter() {
            let Some(config) = node.config.as_deref() else { continue };
            let mut block: Option<(bool, Option<u64>, Option<u64>)> = None;
            let mut close = |block: &mut Option<(bool, Option<u64>, Option<u64>)>| {
                if let Some((true, hello, dead)) = block.take() {
                    let hello = hello.unwrap_or(10);
                    let wait = Duration::from_secs(dead.unwrap_or(4 * hello) + 5 * hello);
                    longest = Some(longest.map_or(wait, |l| l.max(wait)));
                }
            };
            for line in config.lines() {
                let words: Vec<&str> = line.split_whitespace().collect();
                if !line.starts_with(' ') {
                    close(&mut block);
                    if words.first() == Some(&"interface") {
                        block = Some((false, None, None));
                    }
                    continue;
                }
                let Some((md5, hello, dead)) = block.as_mut() else { continue };
                let number = |i: usize| words.get(i).and_then(|w| w.parse::<u64>().ok());
                match words.as_slice() {
                    ["ip", "ospf", "message-digest-key", ..]
                    | ["ip", "ospf", "authentication", "message-digest", ..] => *md5 = true,
                    ["ip", "ospf", "hello-interval", ..] => *hello = number(3),
                    ["ip", "ospf", "dead-interval", ..] => *dead = number(3),
                    _ => {}
                }
            }
            close(&mut block);
        }
        longest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAB: &str = r#"
name: two
topology:
  nodes:
    r1: { kind: frr, daemons: [ospfd], interfaces: { eth1: 10.0.12.1/30, eth2: 10.1.1.1/24 } }
    r2: { kind: frr, daemons: [ospfd], interfaces: { eth1: 10.0.12.2/30, eth2: 10.2.2.1/24 } }
    h1: { kind: host, interfaces: { eth0: 10.1.1.10/24 }, routes: [ { dst: default, via: 10.1.1.1 } ] }
    h2: { kind: host, interfaces: { eth0: 10.2.2.10/24 }, routes: [ { dst: default, via: 10.2.2.1 } ] }
  links:
    - endpoints: ["r1:eth1", "r2:eth1"]
    - endpoints: ["r1:eth2", "h1:eth0"]
    - endpoints: ["r2:eth2", "h2:eth0"]
services:
  - { name: web, node: h2, kind: http }
checks:
  - { check: reach, from: h1, to: 10.2.2.10 }
  - { check: ospf, device: r1, neighbor: 2.2.2.2 }
  - { check: http, from: h1, address: 10.2.2.10, port: 80 }
"#;

    #[test]
    fn a_lab_parses_and_names_its_checks() {
        let lab = Lab::from_str_named(LAB, "two.yml").expect("parses");
        assert_eq!(lab.routers(), ["r1", "r2"]);
        assert_eq!(lab.md5_recovery(), None);
        assert_eq!(lab.hosts(), ["h1", "h2"]);
        assert_eq!(lab.services[0].port(), 80);
        let names: Vec<String> = lab.checks.iter().map(Check::name).collect();
        assert_eq!(names, ["reach h1 -> 10.2.2.10", "ospf r1 ~ 2.2.2.2", "http h1 -> 10.2.2.10:80"]);
    }

    #[test]
    fn a_check_on_an_unknown_node_names_the_check() {
        let bad = LAB.replace("from: h1, to: 10.2.2.10", "from: h9, to: 10.2.2.10");
        let err = Lab::from_str_named(&bad, "two.yml").expect_err("h9 is not a node").to_string();
        assert!(err.contains("two.yml") && err.contains("checks[0]") && err.contains("h9"), "{err}");
    }

    #[test]
    fn a_bgp_check_names_its_neighbour_by_address() {
        let good = LAB.replace(
            "check: ospf, device: r1, neighbor: 2.2.2.2",
            "check: bgp, device: r1, neighbor: 10.0.12.2",
        );
        Lab::from_str_named(&good, "two.yml").expect("an address");
        let bad =
            LAB.replace("check: ospf, device: r1, neighbor: 2.2.2.2", "check: bgp, device: r1, neighbor: r2");
        let err = Lab::from_str_named(&bad, "two.yml").expect_err("r2 is not an address").to_string();
        assert!(
            err.contains("two.yml") && err.contains("checks[1].neighbor") && err.contains("`r2`"),
            "{err}"
        );
    }

    #[test]
    fn a_service_on_a_router_is_refused() {
        let bad = LAB.replace("node: h2, kind: http", "node: r2, kind: http");
        let err = Lab::from_str_named(&bad, "two.yml").expect_err("r2 is a router").to_string();
        assert!(err.contains("services[0].node") && err.contains("not a host"), "{err}");
    }

    #[test]
    fn md5_authenticated_ospf_waits_out_its_dead_interval_and_five_hellos() {
        let labs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/incident/labs");
        let isp_core = Lab::load(labs.join("isp-core.yml")).expect("isp-core");
        assert_eq!(isp_core.md5_recovery(), Some(Duration::from_secs(8)));
        let campus = Lab::load(labs.join("campus.yml")).expect("campus");
        assert_eq!(campus.md5_recovery(), None);
        // FRR's defaults: hellos every 10 s, dead after four of them.
        let text = LAB.replace(
            "r1: { kind: frr, daemons: [ospfd],",
            "r1: { kind: frr, daemons: [ospfd], config: \"interface eth1\\n ip ospf authentication message-digest\\n\",",
        );
        let lab = Lab::from_str_named(&text, "t").expect("lab");
        assert_eq!(lab.md5_recovery(), Some(Duration::from_secs(90)));
    }
}
