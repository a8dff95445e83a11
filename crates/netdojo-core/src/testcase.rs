//! The seed's §4.1 testcase shape, `{"name": ..., "expected_result": {...}}`, made runnable: the
//! keys of `expected_result` as checks on one route of a device's routing table, and the device
//! a testcase runs on when it has no `device` field (read from its name). Both are settled when
//! a task loads, so a testcase no backend could run is a task-file error, never a silent fail.

use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A testcase in either of the two shapes the seed shows (§4.1: name + expected_result;
/// §4.3: device + commands + expected_output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Testcase {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    /// A regular expression the output must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_result: Option<Value>,
    /// The CLI the commands are written for: `frr` (vtysh, the default) or `linux` (`ping`,
    /// `nft`, `tc`... run in the device's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<String>,
}

/// The keys `expected_result` may hold; each is one check on the same route.
pub const EXPECTED_RESULT_KEYS: &[&str] = &[
    "protocol",
    "next_hop",
    "prefix",
    "destination",
    "interface",
    "distance",
    "admin_distance",
    "metric",
    "installed",
    "selected",
];

/// Route sources by the names FRR prints in `show ip route json`.
const PROTOCOLS: &[&str] = &[
    "kernel",
    "connected",
    "local",
    "static",
    "rip",
    "ospf",
    "isis",
    "bgp",
    "eigrp",
    "nhrp",
    "table",
    "babel",
    "openfabric",
    "vrrp",
    "pbr",
    "sharp",
];

/// One check of `expected_result`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteCheck {
    /// The route's source, as FRR names it (`static`, `ospf`, `bgp`...).
    Protocol(String),
    /// Some nexthop of the route goes through this address.
    NextHop(IpAddr),
    /// The route's prefix.
    Destination(Destination),
    /// Some nexthop of the route leaves through this interface.
    Interface(String),
    /// Administrative distance.
    Distance(u64),
    Metric(u64),
    /// In the kernel's forwarding table.
    Installed(bool),
    /// Chosen as the best route for its prefix.
    Selected(bool),
}

/// A destination as a task writes it: `2.2.2.0/30`, IOS's `2.2.2.0 255.255.255.252`, or an address
/// alone (`len` none), which matches a route for that network address of any length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Destination {
    pub addr: IpAddr,
    pub len: Option<u8>,
}

impl Destination {
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if let Some((addr, len)) = text.split_once('/') {
            let addr: IpAddr = addr.trim().parse().ok()?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let len: u8 = len.trim().parse().ok().filter(|l| *l <= max)?;
            return Some(Self { addr, len: Some(len) });
        }
        let mut words = text.split_whitespace();
        let addr: IpAddr = words.next()?.parse().ok()?;
        match (words.next(), words.next()) {
            (None, _) => Some(Self { addr, len: None }),
            (Some(mask), None) => {
                let mask: Ipv4Addr = mask.parse().ok()?;
                let bits = u32::from(mask);
                // A mask is ones then zeros; anything else (a wildcard mask) is not a prefix.
                (addr.is_ipv4() && bits.leading_ones() + bits.trailing_zeros() == 32)
                    .then(|| Self { addr, len: Some(bits.leading_ones() as u8) })
            }
            _ => None,
        }
    }

    /// Whether FRR's `A/N` prefix is this destination.
    pub fn matches(&self, prefix: &str) -> bool {
        let Some(Self { addr, len: Some(len) }) = Self::parse(prefix) else { return false };
        addr == self.addr && self.len.is_none_or(|l| l == len)
    }
}

impl RouteCheck {
    /// The key it was written with, for messages.
    pub fn key(&self) -> &'static str {
        match self {
            Self::Protocol(_) => "protocol",
            Self::NextHop(_) => "next_hop",
            Self::Destination(_) => "prefix",
            Self::Interface(_) => "interface",
            Self::Distance(_) => "distance",
            Self::Metric(_) => "metric",
            Self::Installed(_) => "installed",
            Self::Selected(_) => "selected",
        }
    }
}

/// A key of `expected_result` that cannot be checked: the key and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    pub key: String,
    pub message: String,
}

/// `expected_result` as checks, one per key. Every check must hold for one and the same route.
pub fn route_checks(expected: &Value) -> Result<Vec<RouteCheck>, KeyError> {
    let err = |key: &str, message: String| KeyError { key: key.to_string(), message };
    let Some(object) = expected.as_object() else {
        return Err(err(
            "",
            format!("must be an object of route checks (keys: {})", EXPECTED_RESULT_KEYS.join(", ")),
        ));
    };
    if object.is_empty() {
        return Err(err("", format!("checks nothing (keys: {})", EXPECTED_RESULT_KEYS.join(", "))));
    }
    let mut checks = Vec::new();
    for (key, value) in object {
        let text = || value.as_str().map(str::trim).filter(|s| !s.is_empty());
        let number = || value.as_u64().or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()));
        let check = match key.as_str() {
            "protocol" => {
                let given = text().ok_or_else(|| err(key, "must be a protocol name".into()))?;
                RouteCheck::Protocol(protocol(given).ok_or_else(|| {
                    err(
                        key,
                        format!(
                            "unknown protocol `{given}` (protocols: {}, or IOS codes C L S R O B D i)",
                            PROTOCOLS.join(", ")
                        ),
                    )
                })?)
            }
            "next_hop" => RouteCheck::NextHop(
                text()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| err(key, format!("`{value}` is not an IP address")))?,
            ),
            "prefix" | "destination" => {
                RouteCheck::Destination(text().and_then(Destination::parse).ok_or_else(|| {
                    err(key, format!("`{value}` is not a prefix (`2.2.2.0/30`, `2.2.2.0 255.255.255.252`)"))
                })?)
            }
            "interface" => RouteCheck::Interface(
                text().ok_or_else(|| err(key, "must be an interface name".into()))?.to_string(),
            ),
            "distance" | "admin_distance" => {
                RouteCheck::Distance(number().ok_or_else(|| err(key, format!("`{value}` is not a number")))?)
            }
            "metric" => {
                RouteCheck::Metric(number().ok_or_else(|| err(key, format!("`{value}` is not a number")))?)
            }
            "installed" | "selected" => {
                let b = value.as_bool().ok_or_else(|| err(key, format!("`{value}` is not true or false")))?;
                if key == "installed" { RouteCheck::Installed(b) } else { RouteCheck::Selected(b) }
            }
            _ => return Err(err(key, format!("unknown key (keys: {})", EXPECTED_RESULT_KEYS.join(", ")))),
        };
        checks.push(check);
    }
    Ok(checks)
}

/// FRR's name for a route source: its own names, and the codes IOS prints in `show ip route`.
fn protocol(given: &str) -> Option<String> {
    let lower = given.to_ascii_lowercase();
    if PROTOCOLS.contains(&lower.as_str()) {
        return Some(lower);
    }
    let name = match given {
        "C" => "connected",
        "L" => "local",
        "S" => "static",
        "R" => "rip",
        "O" => "ospf",
        "B" => "bgp",
        "D" => "eigrp",
        "i" => "isis",
        _ => return None,
    };
    Some(name.to_string())
}

/// The device a testcase runs on: its `device` field, or else the device its name names.
///
/// In the name, a node counts where it stands as a word (`R1` is not in `R10`, the longest node
/// wins where two start at the same place). One node named: that one. Several: the first one
/// written after `from`, `on` or `at` (`Static Route from NewYork to Washington`: NewYork, the
/// source, whose routing table holds the route); else the first of `A to B` (`NewYork to
/// Washington`); else the name is ambiguous. `Err` says why, for the task file's author.
pub fn testcase_device(tc: &Testcase, nodes: &[String]) -> Result<String, String> {
    if let Some(device) = &tc.device {
        return Ok(device.clone());
    }
    let Some(name) = tc.name.as_deref() else {
        return Err("the testcase has no `device` and no name to find one in".into());
    };
    let mentions = mentions(name, nodes);
    let mut distinct: Vec<&str> = Vec::new();
    for (_, node) in &mentions {
        if !distinct.contains(node) {
            distinct.push(node);
        }
    }
    let word_before = |at: usize| name[..at].split_whitespace().next_back().map(str::to_ascii_lowercase);
    match distinct.as_slice() {
        [] => Err(format!(
            "no `device`, and the name names no device (devices: {}); add a `device` field",
            nodes.join(", ")
        )),
        [one] => Ok(one.to_string()),
        several => {
            if let Some((_, node)) = mentions
                .iter()
                .find(|(at, _)| matches!(word_before(*at).as_deref(), Some("from" | "on" | "at")))
            {
                return Ok(node.to_string());
            }
            if let [(a_at, a), (b_at, _), ..] = mentions.as_slice() {
                let between = name[a_at + a.len()..*b_at].trim();
                if between.eq_ignore_ascii_case("to") || between == "->" {
                    return Ok(a.to_string());
                }
            }
            Err(format!(
                "no `device`, and the name names several devices ({}) without saying which one the \
                 check runs on; add a `device` field, or write `from {}` or `on {}`",
                several.join(", "),
                several[0],
                several[0]
            ))
        }
    }
}

/// Where nodes stand in `name` as words, in order: a longer node wins over one it contains.
fn mentions<'a>(name: &str, nodes: &'a [String]) -> Vec<(usize, &'a str)> {
    let word_char = |c: char| c.is_alphanumeric() || c == '_';
    let mut found: Vec<(usize, &str)> = Vec::new();
    for node in nodes.iter().filter(|n| !n.is_empty()) {
        for (at, _) in name.match_indices(node.as_str()) {
            let before = name[..at].chars().next_back();
            let after = name[at + node.len()..].chars().next();
            if !before.is_some_and(word_char) && !after.is_some_and(word_char) {
                found.push((at, node));
            }
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.len().cmp(&a.1.len())));
    let mut kept: Vec<(usize, &str)> = Vec::new();
    for (at, node) in found {
        if kept.last().is_none_or(|(k_at, k)| at >= k_at + k.len()) {
            kept.push((at, node));
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tc(name: &str) -> Testcase {
        serde_json::from_value(json!({"name": name, "expected_result": {"protocol": "static"}}))
            .expect("testcase")
    }

    fn nodes(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn the_device_is_the_field_or_the_node_the_name_names() {
        let ny = nodes(&["NewYork", "Washington"]);
        let device = |name: &str, nodes: &[String]| testcase_device(&tc(name), nodes);
        assert_eq!(device("Static Route from NewYork to Washington", &ny), Ok("NewYork".into()));
        assert_eq!(device("Static Route to Washington from NewYork", &ny), Ok("NewYork".into()));
        assert_eq!(device("NewYork to Washington, backup route", &ny), Ok("NewYork".into()));
        assert_eq!(device("Backup route on Washington.", &ny), Ok("Washington".into()));
        assert_eq!(device("Route to the loopback of Washington", &ny), Ok("Washington".into()));
        let mut with_field = tc("Static Route from NewYork to Washington");
        with_field.device = Some("Washington".into());
        assert_eq!(testcase_device(&with_field, &ny), Ok("Washington".into()));

        let r = nodes(&["R1", "R10", "R1-core"]);
        assert_eq!(device("R10 has a route", &r), Ok("R10".into()));
        assert_eq!(device("R1-core has a route", &r), Ok("R1-core".into()));
        assert_eq!(device("(R1) has a route", &r), Ok("R1".into()));

        let none = device("Static Route", &ny).expect_err("no device");
        assert!(none.contains("names no device") && none.contains("NewYork, Washington"), "{none}");
        assert!(device("the NewYorker route", &ny).is_err(), "a node counts as a word only");
        let both = device("Routes of NewYork and Washington", &ny).expect_err("ambiguous");
        assert!(
            both.contains("several devices (NewYork, Washington)") && both.contains("`device`"),
            "{both}"
        );
        let unnamed: Testcase =
            serde_json::from_value(json!({"expected_result": {"protocol": "static"}})).expect("tc");
        assert!(testcase_device(&unnamed, &ny).expect_err("no name").contains("no name"));
    }

    #[test]
    fn expected_result_keys_become_route_checks() {
        let checks = route_checks(&json!({
            "protocol": "S", "next_hop": "192.168.1.2", "prefix": "2.2.2.0/30",
            "destination": "2.2.2.0 255.255.255.252", "interface": "eth0", "admin_distance": 100,
            "metric": "0", "installed": true, "selected": false
        }))
        .expect("valid");
        let d = Destination { addr: "2.2.2.0".parse().expect("ip"), len: Some(30) };
        assert_eq!(
            checks,
            [
                RouteCheck::Protocol("static".into()),
                RouteCheck::NextHop("192.168.1.2".parse().expect("ip")),
                RouteCheck::Destination(d),
                RouteCheck::Destination(d),
                RouteCheck::Interface("eth0".into()),
                RouteCheck::Distance(100),
                RouteCheck::Metric(0),
                RouteCheck::Installed(true),
                RouteCheck::Selected(false),
            ]
        );
        let bad = |v: Value| route_checks(&v).expect_err("invalid");
        let unknown = bad(json!({"protocol": "static", "nexthop": "192.168.1.2"}));
        assert_eq!(unknown.key, "nexthop");
        assert!(unknown.message.starts_with("unknown key (keys: protocol, next_hop,"), "{}", unknown.message);
        assert_eq!(bad(json!({"next_hop": "192.168.1"})).key, "next_hop");
        assert_eq!(bad(json!({"prefix": "2.2.2.0 0.0.0.3"})).key, "prefix", "a wildcard is no mask");
        assert_eq!(bad(json!({"protocol": "carrier-pigeon"})).key, "protocol");
        assert_eq!(bad(json!({"installed": "yes"})).key, "installed");
        assert_eq!(bad(json!({"metric": -1})).key, "metric");
        assert_eq!(bad(json!({})).key, "");
        assert_eq!(bad(json!("static")).key, "");
    }

    #[test]
    fn destinations_read_cidr_ios_masks_and_bare_addresses() {
        let d = |s: &str| Destination::parse(s);
        assert!(d("2.2.2.0/30").is_some_and(|d| d.matches("2.2.2.0/30") && !d.matches("2.2.2.0/24")));
        assert!(d("2.2.2.0 255.255.255.252").is_some_and(|d| d.matches("2.2.2.0/30")));
        assert!(d("2.2.2.0").is_some_and(|d| d.matches("2.2.2.0/30") && d.matches("2.2.2.0/24")));
        assert!(d("2001:db8::/64").is_some_and(|d| d.matches("2001:db8::/64")));
        for bad in ["2.2.2.0/33", "2.2.2.0 255.0.255.0", "R1", "2.2.2.0 255.255.255.0 x", ""] {
            assert_eq!(d(bad), None, "{bad}");
        }
    }
}
