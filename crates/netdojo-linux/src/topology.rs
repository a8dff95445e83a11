//! A network described the way containerlab describes one (`.clab.yml`): a name, nodes keyed by
//! name with a `kind`, and links whose `endpoints` are `"node:interface"` pairs. Readable from
//! YAML or JSON. netdojo adds what containerlab leaves to per-node config files: interface
//! addresses, routes, and MTU per link.
//!
//! ```yaml
//! name: two-subnets
//! topology:
//!   nodes:
//!     r0: { kind: router, interfaces: { r0-eth1: 192.168.1.1/24, r0-eth2: 192.168.2.1/24 } }
//!     s1: { kind: bridge }
//!     h1: { kind: host, interfaces: { h1-eth0: 192.168.1.100/24 }, routes: [ { dst: default, via: 192.168.1.1 } ] }
//!   links:
//!     - endpoints: ["r0:r0-eth1", "s1:s1-eth1"]
//!     - endpoints: ["h1:h1-eth0", "s1:s1-eth2"]
//!       mtu: 1500
//! ```
//!
//! As in containerlab, the nodes and links sit under `topology:`; a bridge node is a Linux
//! bridge (STP off, forward delay 0) in its own namespace.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {field}: {message}")]
    Invalid { path: String, field: String, message: String },
}

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// An end host (containerlab's `linux`): takes part in the pingmesh.
    #[serde(alias = "linux")]
    Host,
    /// A Linux router: `net.ipv4.ip_forward=1`; takes part in the pingmesh, as in Mininet.
    Router,
    /// A Linux bridge (a switch).
    Bridge,
    /// A router running FRRouting (zebra + `daemons`), configured with `config`.
    Frr,
}

/// A route of a node. `dst` is a prefix or `default`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub dst: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Ipv4Addr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub kind: NodeKind,
    /// Interface name → IPv4 address with prefix length (`192.168.1.1/24`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub interfaces: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    /// Sysctls of the node's namespace, as containerlab's `sysctls` (only `net.*`, which are
    /// per namespace). Routers also get `net.ipv4.ip_forward=1`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctls: BTreeMap<String, String>,
    /// `frr` nodes: FRR daemons to run besides zebra (`staticd`, `ospfd`, `bgpd`, `ripd`...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub daemons: Vec<String>,
    /// `frr` nodes: the startup configuration, as vtysh accepts it in configuration mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

/// Sysctls that turn IPv6 off in a node. netdojo's applications are IPv4: with IPv6 off the
/// agent's `ip addr` shows what matters, and no interface spends time on IPv6 address
/// configuration (link-local addresses, duplicate address detection), which halves the cost of
/// building and deleting a network.
pub const IPV4_ONLY: [(&str, &str); 2] =
    [("net.ipv6.conf.all.disable_ipv6", "1"), ("net.ipv6.conf.default.disable_ipv6", "1")];

impl Node {
    /// [`IPV4_ONLY`] as a node's `sysctls`.
    pub fn ipv4_only_sysctls() -> BTreeMap<String, String> {
        IPV4_ONLY.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// Two `"node:interface"` endpoints.
    pub endpoints: [String; 2],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
}

/// Nodes keep their declaration order: it is the order of the pingmesh rows, as in Mininet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Body {
    pub nodes: indexmap_lite::OrderedMap<Node>,
    #[serde(default)]
    pub links: Vec<Link>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    pub name: String,
    pub topology: Body,
}

/// An IPv4 interface address, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Option<Self> {
        let (addr, len) = s.split_once('/')?;
        let addr: Ipv4Addr = addr.parse().ok()?;
        let len: u8 = len.parse().ok()?;
        (len <= 32).then_some(Self { addr, len })
    }
    fn mask(self) -> u32 {
        if self.len == 0 { 0 } else { u32::MAX << (32 - self.len) }
    }
    pub fn network(self) -> u32 {
        u32::from(self.addr) & self.mask()
    }
    pub fn contains(self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == self.network()
    }
    fn overlaps(self, other: Cidr) -> bool {
        let len = self.len.min(other.len);
        let shorter = Cidr { addr: self.addr, len };
        shorter.contains(other.addr)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl Topology {
    /// Reads a `.yml`/`.yaml`/`.json` file (JSON is YAML, so any extension parses).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, TopologyError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| TopologyError::Parse { path: name.clone(), message: e.to_string() })?;
        Self::from_str_named(&text, &name)
    }

    /// Parses YAML or JSON text; `origin` names it in errors.
    pub fn from_str_named(text: &str, origin: &str) -> Result<Self, TopologyError> {
        let topology: Topology = serde_yaml_ng::from_str(text)
            .map_err(|e| TopologyError::Parse { path: origin.to_string(), message: e.to_string() })?;
        topology.validate(origin)?;
        Ok(topology)
    }

    pub fn nodes(&self) -> impl Iterator<Item = (&str, &Node)> {
        self.topology.nodes.iter()
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.topology.nodes.get(name)
    }

    /// The nodes that take part in the pingmesh, with the address others ping: hosts and
    /// routers, in declaration order, at their first interface's address (by interface name).
    pub fn mesh_targets(&self) -> Vec<(String, Ipv4Addr)> {
        self.nodes()
            .filter(|(_, n)| n.kind != NodeKind::Bridge)
            .filter_map(|(name, n)| {
                let first = n.interfaces.values().next().and_then(|c| Cidr::parse(c))?;
                Some((name.to_string(), first.addr))
            })
            .collect()
    }

    /// Checks every reference and address; errors name the field at fault.
    pub fn validate(&self, origin: &str) -> Result<(), TopologyError> {
        let invalid = |field: String, message: String| TopologyError::Invalid {
            path: origin.to_string(),
            field,
            message,
        };
        if self.topology.nodes.is_empty() {
            return Err(invalid("topology.nodes".into(), "no nodes".into()));
        }
        for (name, _) in self.nodes() {
            let ok = !name.is_empty()
                && name.len() <= 32
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !ok {
                return Err(invalid(
                    format!("topology.nodes.{name}"),
                    "node names are letters, digits, `-` and `_`, at most 32".into(),
                ));
            }
        }
        let mut used: HashMap<(String, String), usize> = HashMap::new();
        for (i, link) in self.topology.links.iter().enumerate() {
            let field = format!("topology.links[{i}].endpoints");
            for endpoint in &link.endpoints {
                let Some((node, iface)) = endpoint.split_once(':') else {
                    return Err(invalid(field, format!("`{endpoint}` is not `node:interface`")));
                };
                if self.node(node).is_none() {
                    return Err(invalid(field, format!("unknown node `{node}` in `{endpoint}`")));
                }
                if iface.is_empty()
                    || iface.len() > 15
                    || iface == "lo"
                    || !iface.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                {
                    return Err(invalid(
                        field,
                        format!(
                            "`{iface}` in `{endpoint}` is not a usable interface name (1-15 of [A-Za-z0-9-_.], not lo)"
                        ),
                    ));
                }
                if let Some(other) = used.insert((node.to_string(), iface.to_string()), i) {
                    return Err(invalid(
                        field,
                        format!("duplicate interface `{endpoint}`: already used by topology.links[{other}]"),
                    ));
                }
            }
            if let Some(mtu) = link.mtu
                && !(68..=65535).contains(&mtu)
            {
                return Err(invalid(
                    format!("topology.links[{i}].mtu"),
                    format!("{mtu} is outside 68..65535"),
                ));
            }
        }
        let mut addresses: Vec<(String, Cidr)> = Vec::new();
        for (name, node) in self.nodes() {
            for (iface, addr) in &node.interfaces {
                let field = format!("topology.nodes.{name}.interfaces.{iface}");
                if node.kind == NodeKind::Bridge {
                    return Err(invalid(field, "bridge nodes carry no addresses".into()));
                }
                if !used.contains_key(&(name.to_string(), iface.to_string())) {
                    return Err(invalid(field, format!("no link has endpoint `{name}:{iface}`")));
                }
                let Some(cidr) = Cidr::parse(addr) else {
                    return Err(invalid(
                        field,
                        format!("`{addr}` is not an IPv4 address with prefix length"),
                    ));
                };
                for (other_field, other) in &addresses {
                    if other.addr == cidr.addr {
                        return Err(invalid(
                            field,
                            format!("address {} is also on {other_field}", cidr.addr),
                        ));
                    }
                    let same_node = other_field.starts_with(&format!("topology.nodes.{name}.interfaces."));
                    if same_node && other.overlaps(cidr) {
                        return Err(invalid(field, format!("{cidr} overlaps {other} on {other_field}")));
                    }
                }
                addresses.push((field, cidr));
            }
            if node.kind != NodeKind::Frr && (!node.daemons.is_empty() || node.config.is_some()) {
                return Err(invalid(
                    format!("topology.nodes.{name}"),
                    "`daemons` and `config` belong to `frr` nodes".into(),
                ));
            }
            for d in &node.daemons {
                if !crate::frr::DAEMONS.contains(&d.as_str()) {
                    return Err(invalid(
                        format!("topology.nodes.{name}.daemons"),
                        format!("unknown FRR daemon `{d}` (known: {})", crate::frr::DAEMONS.join(", ")),
                    ));
                }
            }
            for key in node.sysctls.keys() {
                let ok = key.starts_with("net.")
                    && !key.contains("..")
                    && key.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
                if !ok {
                    return Err(invalid(
                        format!("topology.nodes.{name}.sysctls.{key}"),
                        "only `net.*` sysctls can be set: the others are shared with the host".into(),
                    ));
                }
            }
            for (i, route) in node.routes.iter().enumerate() {
                let field = format!("topology.nodes.{name}.routes[{i}]");
                if route.dst != "default" && Cidr::parse(&route.dst).is_none() {
                    return Err(invalid(
                        field,
                        format!("dst `{}` is neither `default` nor a prefix", route.dst),
                    ));
                }
                if route.via.is_none() && route.dev.is_none() {
                    return Err(invalid(field, "a route needs `via` or `dev`".into()));
                }
                if let Some(dev) = &route.dev
                    && !used.contains_key(&(name.to_string(), dev.clone()))
                {
                    return Err(invalid(field, format!("dev `{dev}` is not an interface of {name}")));
                }
            }
        }
        Ok(())
    }
}

/// A string-keyed map that keeps insertion order and rejects duplicate keys, without pulling
/// in a map crate for one field.
pub mod indexmap_lite {
    use std::fmt;
    use std::marker::PhantomData;

    use serde::de::{MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct OrderedMap<V>(pub Vec<(String, V)>);

    impl<V> OrderedMap<V> {
        pub fn get(&self, key: &str) -> Option<&V> {
            self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
        }
        pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
            self.0.iter().map(|(k, v)| (k.as_str(), v))
        }
        pub fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }

    impl<V: Serialize> Serialize for OrderedMap<V> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut map = s.serialize_map(Some(self.0.len()))?;
            for (k, v) in &self.0 {
                map.serialize_entry(k, v)?;
            }
            map.end()
        }
    }

    impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<V> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V_<V>(PhantomData<V>);
            impl<'de, V: Deserialize<'de>> Visitor<'de> for V_<V> {
                type Value = OrderedMap<V>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a map of node names to nodes")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                    let mut entries: Vec<(String, V)> = Vec::new();
                    while let Some((k, v)) = access.next_entry::<String, V>()? {
                        if entries.iter().any(|(e, _)| *e == k) {
                            return Err(serde::de::Error::custom(format!("duplicate node `{k}`")));
                        }
                        entries.push((k, v));
                    }
                    Ok(OrderedMap(entries))
                }
            }
            d.deserialize_map(V_(PhantomData))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name: t
topology:
  nodes:
    r0: { kind: router, interfaces: { r0-eth1: 192.168.1.1/24 } }
    s1: { kind: bridge }
    h1: { kind: linux, interfaces: { h1-eth0: 192.168.1.100/24 }, routes: [ { dst: default, via: 192.168.1.1 } ] }
  links:
    - endpoints: ["r0:r0-eth1", "s1:s1-eth1"]
    - endpoints: ["h1:h1-eth0", "s1:s1-eth2"]
      mtu: 1400
"#;

    fn err(text: &str) -> String {
        Topology::from_str_named(text, "t.clab.yml").expect_err("should be rejected").to_string()
    }

    #[test]
    fn containerlab_style_yaml_and_json_parse_to_the_same_topology() {
        let yaml = Topology::from_str_named(GOOD, "t.clab.yml").expect("valid");
        let json = serde_json::to_string(&yaml).expect("serialise");
        let back = Topology::from_str_named(&json, "t.json").expect("valid json");
        assert_eq!(yaml, back);
        assert_eq!(yaml.node("h1").map(|n| n.kind), Some(NodeKind::Host));
        let targets: Vec<String> = yaml.mesh_targets().into_iter().map(|(n, a)| format!("{n}={a}")).collect();
        assert_eq!(targets, ["r0=192.168.1.1", "h1=192.168.1.100"]);
    }

    #[test]
    fn errors_name_the_file_and_field() {
        let unknown = GOOD.replace("\"h1:h1-eth0\"", "\"h9:h1-eth0\"");
        assert_eq!(
            err(&unknown),
            "t.clab.yml: topology.links[1].endpoints: unknown node `h9` in `h9:h1-eth0`"
        );
        let dup = GOOD.replace("\"s1:s1-eth2\"", "\"s1:s1-eth1\"");
        assert_eq!(
            err(&dup),
            "t.clab.yml: topology.links[1].endpoints: duplicate interface `s1:s1-eth1`: already used by topology.links[0]"
        );
        let same_ip = GOOD.replace("192.168.1.100/24", "192.168.1.1/24");
        assert_eq!(
            err(&same_ip),
            "t.clab.yml: topology.nodes.h1.interfaces.h1-eth0: address 192.168.1.1 is also on topology.nodes.r0.interfaces.r0-eth1"
        );
        let bad_addr = GOOD.replace("192.168.1.100/24", "192.168.1.300/24");
        assert!(err(&bad_addr).contains("is not an IPv4 address with prefix length"), "{}", err(&bad_addr));
        let bad_key = GOOD.replace("mtu: 1400", "mtu: 1400\n      colour: blue");
        assert!(err(&bad_key).starts_with("t.clab.yml: "), "{}", err(&bad_key));
        assert!(err(&bad_key).contains("colour"), "{}", err(&bad_key));
        let bad_mtu = GOOD.replace("mtu: 1400", "mtu: 20");
        assert_eq!(err(&bad_mtu), "t.clab.yml: topology.links[1].mtu: 20 is outside 68..65535");
    }

    #[test]
    fn overlapping_prefixes_on_one_node_are_rejected() {
        let text = r#"
name: t
topology:
  nodes:
    r0: { kind: router, interfaces: { a: 10.0.0.1/16, b: 10.0.1.1/24 } }
    h1: { kind: host }
  links:
    - endpoints: ["r0:a", "h1:x"]
    - endpoints: ["r0:b", "h1:y"]
"#;
        assert_eq!(
            err(text),
            "t.clab.yml: topology.nodes.r0.interfaces.b: 10.0.1.1/24 overlaps 10.0.0.1/16 on topology.nodes.r0.interfaces.a"
        );
    }
}
