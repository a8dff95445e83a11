//! Random workloads and policy sets over a small vocabulary (so that selectors often match),
//! for the property tests: the compiled rules and the real network must agree with the truth
//! table on every one. Every policy drawn passes validation.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

use crate::model::{ContainerPort, Protocol, Workload};

/// The random number generator the property tests seed.
pub type R = ChaCha8Rng;

const NAMESPACES: [&str; 3] = ["x", "y", "z"];
const PORTS: [u16; 3] = [80, 81, 8080];
const PORT_NAMES: [&str; 2] = ["serve", "alt"];

fn labels(rng: &mut R, keys: &[(&str, &[&str])]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, values) in keys {
        if rng.random_bool(0.7)
            && let Some(v) = values.choose(rng)
        {
            out.insert(k.to_string(), v.to_string());
        }
    }
    out
}

const POD_KEYS: [(&str, &[&str]); 2] = [("app", &["a", "b", "c"]), ("tier", &["web", "db"])];
const NS_KEYS: [(&str, &[&str]); 1] = [("team", &["red", "blue"])];

/// A workload of 2-3 namespaces and 3-6 pods, each with 1-2 container ports.
pub fn workload(rng: &mut R) -> Workload {
    let mut w = Workload::default();
    let n_ns = rng.random_range(2..=3);
    for ns in &NAMESPACES[..n_ns] {
        w.add_namespace(ns, labels(rng, &NS_KEYS));
    }
    let n_pods = rng.random_range(3..=6);
    for i in 0..n_pods {
        let ns = NAMESPACES[rng.random_range(0..n_ns)];
        let mut ports: Vec<ContainerPort> = Vec::new();
        for _ in 0..rng.random_range(1..=2) {
            let port = *PORTS.choose(rng).unwrap_or(&80);
            let protocol = if rng.random_bool(0.3) { Protocol::Udp } else { Protocol::Tcp };
            if ports.iter().any(|p| p.port == port && p.protocol == protocol) {
                continue;
            }
            let name = PORT_NAMES
                .choose(rng)
                .filter(|n| rng.random_bool(0.6) && !ports.iter().any(|p| p.name.as_deref() == Some(**n)))
                .map(|n| n.to_string());
            ports.push(ContainerPort { name, port, protocol });
        }
        // Names are unique by construction (index suffix).
        let _ = w.add_pod(ns, &format!("p{i}"), labels(rng, &POD_KEYS), ports);
    }
    w
}

fn selector(rng: &mut R, keys: &[(&str, &[&str])]) -> LabelSelector {
    let mut s = LabelSelector::default();
    if rng.random_bool(0.5) {
        s.match_labels = Some(labels(rng, &keys[..1]));
    }
    if rng.random_bool(0.3) {
        let (key, values) = keys[rng.random_range(0..keys.len())];
        let operator = *["In", "NotIn", "Exists", "DoesNotExist"].choose(rng).unwrap_or(&"In");
        let values = matches!(operator, "In" | "NotIn")
            .then(|| {
                values.iter().filter(|_| rng.random_bool(0.6)).map(|v| v.to_string()).collect::<Vec<_>>()
            })
            .filter(|v| !v.is_empty())
            .or_else(|| matches!(operator, "In" | "NotIn").then(|| vec![values[0].to_string()]));
        s.match_expressions =
            Some(vec![LabelSelectorRequirement { key: key.into(), operator: operator.into(), values }]);
    }
    s
}

fn peer(rng: &mut R) -> NetworkPolicyPeer {
    match rng.random_range(0..4) {
        0 => NetworkPolicyPeer { pod_selector: Some(selector(rng, &POD_KEYS)), ..Default::default() },
        1 => NetworkPolicyPeer { namespace_selector: Some(selector(rng, &NS_KEYS)), ..Default::default() },
        2 => NetworkPolicyPeer {
            pod_selector: Some(selector(rng, &POD_KEYS)),
            namespace_selector: Some(selector(rng, &NS_KEYS)),
            ..Default::default()
        },
        _ => {
            // Pods are 10.244.0.2-7: prefixes that cut that range in various places.
            let len = rng.random_range(28..=31);
            let base = rng.random_range(0..8u8) & !((1u8 << (32 - len)) - 1).min(7);
            let cidr = format!("10.244.0.{base}/{len}");
            let except = rng.random_bool(0.5).then(|| {
                let host = base + rng.random_range(0..(1u8 << (32 - len)));
                vec![format!("10.244.0.{host}/32")]
            });
            NetworkPolicyPeer { ip_block: Some(IPBlock { cidr, except }), ..Default::default() }
        }
    }
}

fn port(rng: &mut R) -> NetworkPolicyPort {
    let protocol = match rng.random_range(0..4) {
        0 => None,
        1 => Some("TCP".to_string()),
        2 => Some("UDP".to_string()),
        _ => Some("SCTP".to_string()),
    };
    match rng.random_range(0..4) {
        0 => NetworkPolicyPort { protocol, ..Default::default() },
        1 => NetworkPolicyPort {
            protocol,
            port: Some(IntOrString::String(PORT_NAMES.choose(rng).unwrap_or(&"serve").to_string())),
            ..Default::default()
        },
        2 => {
            let p = i32::from(*PORTS.choose(rng).unwrap_or(&80));
            NetworkPolicyPort {
                protocol,
                port: Some(IntOrString::Int(p)),
                end_port: Some(p + rng.random_range(0..2)),
            }
        }
        _ => NetworkPolicyPort {
            protocol,
            port: Some(IntOrString::Int(i32::from(*PORTS.choose(rng).unwrap_or(&80)))),
            end_port: None,
        },
    }
}

/// Absent, empty, or one or two items: the three cases the semantics tell apart.
fn list<T>(rng: &mut R, mut f: impl FnMut(&mut R) -> T) -> Option<Vec<T>> {
    match rng.random_range(0..4) {
        0 => None,
        1 => Some(Vec::new()),
        n => Some((0..n - 1).map(|_| f(rng)).collect()),
    }
}

/// 1-4 policies over the namespaces of `workload`.
pub fn policies(rng: &mut R, workload: &Workload) -> Vec<NetworkPolicy> {
    let namespaces: Vec<&String> = workload.namespaces.keys().collect();
    (0..rng.random_range(1..=4))
        .map(|i| {
            let ns = namespaces.choose(rng).map(|s| s.to_string()).unwrap_or_else(|| "x".into());
            // Absent and `[]` are both defaulted by the API server; the order of a list is not
            // part of its meaning.
            let policy_types = match rng.random_range(0..6) {
                0 => None,
                1 => Some(Vec::new()),
                2 => Some(vec!["Ingress".to_string()]),
                3 => Some(vec!["Egress".to_string()]),
                4 => Some(vec!["Egress".to_string(), "Ingress".to_string()]),
                _ => Some(vec!["Ingress".to_string(), "Egress".to_string()]),
            };
            let ingress =
                list(rng, |r| NetworkPolicyIngressRule { from: list(r, peer), ports: list(r, port) });
            let egress = list(rng, |r| NetworkPolicyEgressRule { to: list(r, peer), ports: list(r, port) });
            NetworkPolicy {
                metadata: ObjectMeta {
                    name: Some(format!("np{i}")),
                    namespace: Some(ns),
                    ..Default::default()
                },
                spec: Some(NetworkPolicySpec {
                    pod_selector: Some(selector(rng, &POD_KEYS)),
                    policy_types,
                    ingress,
                    egress,
                }),
            }
        })
        .collect()
}
