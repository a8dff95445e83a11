//! NetworkPolicy objects (`networking.k8s.io/v1`, k8s-openapi's types): reading and writing the
//! YAML users write, the API server's validation with its wording, label selectors, and the
//! two questions the semantics rest on: which policies select a pod, for which directions.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use k8s_openapi::api::networking::v1::{IPBlock, NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;

use crate::model::{PodInfo, Protocol, Workload};

/// Parses every document of a YAML (or JSON) text as a NetworkPolicy. The message of an error
/// is kubectl's (`error: error parsing STDIN: ...`); `origin` is the file name (`STDIN` for
/// `-f -`).
pub fn parse_yaml(text: &str, origin: &str) -> Result<Vec<NetworkPolicy>, String> {
    let mut out = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let value = serde_yaml_ng::Value::deserialize(doc).map_err(|e| {
            format!("error: error parsing {origin}: error converting YAML to JSON: yaml: {e}")
        })?;
        if value.is_null() {
            continue;
        }
        let api_version = value.get("apiVersion").and_then(|v| v.as_str()).unwrap_or_default();
        let kind = value.get("kind").and_then(|v| v.as_str()).unwrap_or_default();
        if kind.is_empty() || api_version.is_empty() {
            let missing = if api_version.is_empty() { "apiVersion" } else { "kind" };
            return Err(format!(
                "error: error validating \"{origin}\": error validating data: {missing} not set; \
                 if you choose to ignore these errors, turn validation off with --validate=false"
            ));
        }
        if kind != "NetworkPolicy" || api_version != "networking.k8s.io/v1" {
            return Err(format!(
                "error: resource mapping not found for name: {:?} namespace: {:?} from \"{origin}\": \
                 no matches for kind \"{kind}\" in version \"{api_version}\" on this cluster \
                 (only networking.k8s.io/v1 NetworkPolicy objects can be applied here)",
                value.get("metadata").and_then(|m| m.get("name")).and_then(|n| n.as_str()).unwrap_or(""),
                value.get("metadata").and_then(|m| m.get("namespace")).and_then(|n| n.as_str()).unwrap_or(""),
            ));
        }
        let policy: NetworkPolicy = serde_yaml_ng::from_value(value).map_err(|e| {
            format!(
                "error: error validating \"{origin}\": error validating data: {e}; if you choose to \
                 ignore these errors, turn validation off with --validate=false"
            )
        })?;
        out.push(policy);
    }
    Ok(out)
}

/// One policy as YAML, the way `kubectl get -o yaml` prints it.
pub fn to_yaml(policy: &NetworkPolicy) -> String {
    serde_yaml_ng::to_string(policy).unwrap_or_else(|e| format!("# unprintable: {e}\n"))
}

/// The policy's name (empty when it has none, which validation refuses).
pub fn name(policy: &NetworkPolicy) -> &str {
    policy.metadata.name.as_deref().unwrap_or_default()
}

/// The policy's namespace (`default` when unset).
pub fn namespace(policy: &NetworkPolicy) -> &str {
    policy.metadata.namespace.as_deref().unwrap_or("default")
}

/// The directions a policy affects: `policyTypes` when it names any; otherwise (absent, or
/// `policyTypes: []`) Ingress always, and Egress when the policy has at least one egress rule.
/// This is the API server's defaulting (`SetDefaults_NetworkPolicySpec` tests the list's
/// length, so an empty list is defaulted like an absent one); an empty `egress: []` adds no
/// Egress type.
pub fn directions(policy: &NetworkPolicy) -> (bool, bool) {
    let Some(spec) = &policy.spec else { return (true, false) };
    match &spec.policy_types {
        Some(types) if !types.is_empty() => {
            (types.iter().any(|t| t == "Ingress"), types.iter().any(|t| t == "Egress"))
        }
        _ => (true, spec.egress.as_ref().is_some_and(|e| !e.is_empty())),
    }
}

/// Whether a label selector matches a label set. An empty selector matches everything.
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_label =
        selector.match_labels.iter().flatten().all(|(k, v)| labels.get(k).is_some_and(|have| have == v));
    by_label
        && selector.match_expressions.iter().flatten().all(|req| {
            let values = req.values.as_deref().unwrap_or_default();
            let have = labels.get(&req.key);
            match req.operator.as_str() {
                "In" => have.is_some_and(|v| values.contains(v)),
                "NotIn" => have.is_none_or(|v| !values.contains(v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                // Only in a list request's selector (`kubectl -l 'x>1'`): validation refuses
                // them in policies, as Kubernetes does.
                "Gt" | "Lt" => {
                    let (Some(have), Some(bound)) = (
                        have.and_then(|v| v.parse::<i64>().ok()),
                        values.first().and_then(|v| v.parse::<i64>().ok()),
                    ) else {
                        return false;
                    };
                    if req.operator == "Gt" { have > bound } else { have < bound }
                }
                // Refused by validation; an unknown operator selects nothing.
                _ => false,
            }
        })
}

/// Whether `policy` selects `pod` (same namespace, `spec.podSelector` matches; absent = `{}`).
pub fn selects(policy: &NetworkPolicy, pod: &PodInfo) -> bool {
    if namespace(policy) != pod.namespace {
        return false;
    }
    match policy.spec.as_ref().and_then(|s| s.pod_selector.as_ref()) {
        Some(selector) => selector_matches(selector, &pod.labels),
        None => true,
    }
}

/// An IPv4 or IPv6 prefix of an ipBlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// Parses `A.B.C.D/N` (or IPv6). Host bits may be set, as the API server accepts.
    pub fn parse(s: &str) -> Option<Self> {
        let (addr, len) = s.split_once('/')?;
        let addr: IpAddr = addr.parse().ok()?;
        let len: u8 = len.parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (len <= max).then_some(Self { addr, len })
    }

    pub fn contains_v4(&self, ip: Ipv4Addr) -> bool {
        let IpAddr::V4(net) = self.addr else { return false };
        let mask = if self.len == 0 { 0 } else { u32::MAX << (32 - self.len) };
        u32::from(ip) & mask == u32::from(net) & mask
    }

    /// Whether `other` lies inside this prefix and is smaller (ipBlock's `except` rule).
    pub fn strictly_contains(&self, other: &Prefix) -> bool {
        match (self.addr, other.addr) {
            (IpAddr::V4(_), IpAddr::V4(o)) => other.len > self.len && self.contains_v4(o),
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let mask = |l: u8| if l == 0 { 0 } else { u128::MAX << (128 - l) };
                other.len > self.len && u128::from(a) & mask(self.len) == u128::from(b) & mask(self.len)
            }
            _ => false,
        }
    }

    /// The network address with host bits cleared, as nftables wants it.
    pub fn network_v4(&self) -> Option<Ipv4Addr> {
        let IpAddr::V4(net) = self.addr else { return None };
        let mask = if self.len == 0 { 0 } else { u32::MAX << (32 - self.len) };
        Some(Ipv4Addr::from(u32::from(net) & mask))
    }
}

/// Whether an ipBlock matches an address: inside `cidr` and in none of `except`.
pub fn ip_block_matches(block: &IPBlock, ip: Ipv4Addr) -> bool {
    let Some(cidr) = Prefix::parse(&block.cidr) else { return false };
    cidr.contains_v4(ip)
        && !block.except.iter().flatten().filter_map(|e| Prefix::parse(e)).any(|e| e.contains_v4(ip))
}

/// Whether a peer of a policy in namespace `policy_ns` matches `pod` of `workload`.
pub fn peer_matches(peer: &NetworkPolicyPeer, policy_ns: &str, pod: &PodInfo, workload: &Workload) -> bool {
    if let Some(block) = &peer.ip_block {
        return ip_block_matches(block, pod.ip);
    }
    let namespace_ok = match &peer.namespace_selector {
        // Without a namespace selector, a pod selector looks in the policy's own namespace.
        None => pod.namespace == policy_ns,
        Some(selector) => {
            let empty = BTreeMap::new();
            let labels = workload.namespaces.get(&pod.namespace).unwrap_or(&empty);
            selector_matches(selector, labels)
        }
    };
    let pod_ok = peer.pod_selector.as_ref().is_none_or(|s| selector_matches(s, &pod.labels));
    namespace_ok && pod_ok && (peer.namespace_selector.is_some() || peer.pod_selector.is_some())
}

/// Whether a policy port matches traffic to `dst` on `port`/`protocol`. A named port is
/// resolved against the destination pod's container ports.
pub fn port_matches(rule_port: &NetworkPolicyPort, dst: &PodInfo, port: u16, protocol: Protocol) -> bool {
    if Protocol::parse(rule_port.protocol.as_deref()) != Some(protocol) {
        return false;
    }
    match &rule_port.port {
        None => true,
        Some(IntOrString::Int(n)) => match rule_port.end_port {
            Some(end) => i32::from(port) >= *n && i32::from(port) <= end,
            None => i32::from(port) == *n,
        },
        Some(IntOrString::String(name)) => dst.named_port(name, protocol) == Some(port),
    }
}

/// Validates a policy as the API server does, returning kubectl's message for the first
/// failures (`The NetworkPolicy "x" is invalid: spec.ingress[0]...`).
pub fn validate(policy: &NetworkPolicy) -> Result<(), String> {
    let name = name(policy);
    if name.is_empty() {
        return Err("error: resource name may not be empty".into());
    }
    let mut errors: Vec<String> = Vec::new();
    if !is_dns_subdomain(name) {
        errors.push(format!(
            "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case \
             alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        ));
    }
    if let Some(spec) = &policy.spec {
        if let Some(selector) = &spec.pod_selector {
            check_selector(selector, "spec.podSelector", &mut errors);
        }
        for (i, t) in spec.policy_types.iter().flatten().enumerate() {
            if t != "Ingress" && t != "Egress" {
                errors.push(format!(
                    "spec.policyTypes[{i}]: Unsupported value: {t:?}: supported values: \"Egress\", \"Ingress\""
                ));
            }
        }
        for (i, rule) in spec.ingress.iter().flatten().enumerate() {
            let field = format!("spec.ingress[{i}]");
            check_ports(rule.ports.as_deref().unwrap_or_default(), &field, &mut errors);
            check_peers(rule.from.as_deref().unwrap_or_default(), &format!("{field}.from"), &mut errors);
        }
        for (i, rule) in spec.egress.iter().flatten().enumerate() {
            let field = format!("spec.egress[{i}]");
            check_ports(rule.ports.as_deref().unwrap_or_default(), &field, &mut errors);
            check_peers(rule.to.as_deref().unwrap_or_default(), &format!("{field}.to"), &mut errors);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("The NetworkPolicy {name:?} is invalid: \n* {}", errors.join("\n* ")))
    }
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn check_selector(selector: &LabelSelector, field: &str, errors: &mut Vec<String>) {
    for (i, req) in selector.match_expressions.iter().flatten().enumerate() {
        let f = format!("{field}.matchExpressions[{i}]");
        let n = req.values.as_ref().map_or(0, Vec::len);
        match req.operator.as_str() {
            "In" | "NotIn" if n == 0 => errors.push(format!(
                "{f}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
            )),
            "Exists" | "DoesNotExist" if n > 0 => errors.push(format!(
                "{f}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => {
                errors.push(format!("{f}.operator: Invalid value: {other:?}: not a valid selector operator"))
            }
        }
    }
}

fn check_ports(ports: &[NetworkPolicyPort], field: &str, errors: &mut Vec<String>) {
    for (i, p) in ports.iter().enumerate() {
        let f = format!("{field}.ports[{i}]");
        if let Some(proto) = &p.protocol
            && Protocol::parse(Some(proto)).is_none()
        {
            errors.push(format!(
                "{f}.protocol: Unsupported value: {proto:?}: supported values: \"SCTP\", \"TCP\", \"UDP\""
            ));
        }
        match (&p.port, p.end_port) {
            (Some(IntOrString::Int(n)), end) => {
                if !(1..=65535).contains(n) {
                    errors.push(format!(
                        "{f}.port: Invalid value: {n}: must be between 1 and 65535, inclusive"
                    ));
                }
                if let Some(end) = end {
                    if end < *n {
                        errors.push(format!(
                            "{f}.endPort: Invalid value: {end}: must be greater than or equal to `port`"
                        ));
                    } else if end > 65535 {
                        errors.push(format!(
                            "{f}.endPort: Invalid value: {end}: must be between 1 and 65535, inclusive"
                        ));
                    }
                }
            }
            (Some(IntOrString::String(s)), end) => {
                if !is_port_name(s) {
                    errors.push(format!(
                        "{f}.port: Invalid value: {s:?}: must be no more than 15 characters, contain only \
                         lowercase alphanumeric characters and '-', and contain at least one letter (a-z)"
                    ));
                }
                if end.is_some() {
                    errors.push(format!(
                        "{f}.endPort: Invalid value: {}: may not be specified when `port` is non-numeric",
                        end.unwrap_or_default()
                    ));
                }
            }
            (None, Some(end)) => errors.push(format!(
                "{f}.endPort: Invalid value: {end}: may not be specified when `port` is not specified"
            )),
            (None, None) => {}
        }
    }
}

fn is_port_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().any(|b| b.is_ascii_lowercase())
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

fn check_peers(peers: &[NetworkPolicyPeer], field: &str, errors: &mut Vec<String>) {
    for (i, peer) in peers.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let selectors = peer.pod_selector.is_some() || peer.namespace_selector.is_some();
        match &peer.ip_block {
            Some(_) if selectors => {
                errors.push(format!("{f}: Forbidden: may not specify both ipBlock and another peer"))
            }
            None if !selectors => errors.push(format!("{f}: Required value: must specify a peer")),
            _ => {}
        }
        if let Some(s) = &peer.pod_selector {
            check_selector(s, &format!("{f}.podSelector"), errors);
        }
        if let Some(s) = &peer.namespace_selector {
            check_selector(s, &format!("{f}.namespaceSelector"), errors);
        }
        if let Some(block) = &peer.ip_block {
            match Prefix::parse(&block.cidr) {
                None => errors.push(format!(
                    "{f}.ipBlock.cidr: Invalid value: {:?}: must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
                    block.cidr
                )),
                Some(cidr) => {
                    for (j, e) in block.except.iter().flatten().enumerate() {
                        match Prefix::parse(e) {
                            None => errors.push(format!(
                                "{f}.ipBlock.except[{j}]: Invalid value: {e:?}: must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
                            )),
                            Some(ex) if !cidr.strictly_contains(&ex) => errors.push(format!(
                                "{f}.ipBlock.except[{j}]: Invalid value: {e:?}: must be a strict subset of `cidr`"
                            )),
                            Some(_) => {}
                        }
                    }
                }
            }
        }
    }
}
