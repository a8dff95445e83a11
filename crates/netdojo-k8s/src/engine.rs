//! The truth table: the verdict of every (from pod, to pod, port, protocol) under a policy set,
//! computed from the policies' semantics alone. It is the ground truth the probed network is
//! compared with; expected connectivity always comes from here, never from a typed table.
//!
//! A connection is allowed when the source's egress allows it and the destination's ingress
//! allows it. A direction of a pod is isolated when any policy selecting the pod affects that
//! direction; an isolated direction allows exactly the union of the rules of the policies that
//! select the pod in that direction. Traffic of a pod to itself is not judged (it never leaves
//! the pod: loopback).

use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use serde::{Deserialize, Serialize};

use crate::model::{Protocol, Workload};
use crate::policy;

/// Something a probe connects to: a pod's container port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Target {
    pub pod: usize,
    pub port: u16,
    pub protocol: Protocol,
}

/// The verdicts of every source pod to every target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Matrix {
    /// Pod names as reports show them.
    pub pods: Vec<String>,
    pub targets: Vec<Target>,
    /// `allowed[from][target]`; `None` where the target is the source pod itself.
    pub allowed: Vec<Vec<Option<bool>>>,
}

/// One pair whose actual verdict differs from the expected one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    pub from: usize,
    pub target: Target,
    pub expected: bool,
    pub actual: bool,
}

/// Every target of a workload: each container port of each pod.
pub fn targets(workload: &Workload) -> Vec<Target> {
    let mut out: Vec<Target> = workload
        .pods
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.ports.iter().map(move |c| Target { pod: i, port: c.port, protocol: c.protocol }))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The policies that select pod `pod` and affect the direction (`ingress` or egress).
fn isolating<'p>(
    policies: &'p [NetworkPolicy],
    workload: &Workload,
    pod: usize,
    ingress: bool,
) -> impl Iterator<Item = &'p NetworkPolicy> {
    let p = &workload.pods[pod];
    policies.iter().filter(move |np| {
        let (i, e) = policy::directions(np);
        (if ingress { i } else { e }) && policy::selects(np, p)
    })
}

/// A connection as one side's rule sees it: the pod at the other end, the destination pod
/// (named ports resolve there), the port and the protocol.
#[derive(Clone, Copy)]
struct Seen {
    peer: usize,
    dst: usize,
    port: u16,
    protocol: Protocol,
}

fn rule_allows(
    peers: Option<&[NetworkPolicyPeer]>,
    ports: Option<&[NetworkPolicyPort]>,
    policy_ns: &str,
    seen: &Seen,
    workload: &Workload,
) -> bool {
    let Seen { peer, dst, port, protocol } = *seen;
    let peer = &workload.pods[peer];
    let dst = &workload.pods[dst];
    // An absent or empty peer list matches every peer; an absent or empty port list every port.
    let peer_ok = match peers {
        None | Some([]) => true,
        Some(list) => list.iter().any(|p| policy::peer_matches(p, policy_ns, peer, workload)),
    };
    let port_ok = match ports {
        None | Some([]) => true,
        Some(list) => list.iter().any(|p| policy::port_matches(p, dst, port, protocol)),
    };
    peer_ok && port_ok
}

/// Whether `from` may open a connection to `to` on `port`/`protocol` under `policies`.
pub fn allowed(
    policies: &[NetworkPolicy],
    workload: &Workload,
    from: usize,
    to: usize,
    port: u16,
    protocol: Protocol,
) -> bool {
    egress_allows(policies, workload, from, to, port, protocol)
        && ingress_allows(policies, workload, from, to, port, protocol)
}

/// The destination's side: is `to` not isolated for ingress, or does a rule admit `from`?
pub fn ingress_allows(
    policies: &[NetworkPolicy],
    workload: &Workload,
    from: usize,
    to: usize,
    port: u16,
    protocol: Protocol,
) -> bool {
    side_allows(policies, workload, to, true, &Seen { peer: from, dst: to, port, protocol })
}

/// The source's side: is `from` not isolated for egress, or does a rule let it reach `to`?
pub fn egress_allows(
    policies: &[NetworkPolicy],
    workload: &Workload,
    from: usize,
    to: usize,
    port: u16,
    protocol: Protocol,
) -> bool {
    side_allows(policies, workload, from, false, &Seen { peer: to, dst: to, port, protocol })
}

/// One side of a connection: `pod` is not isolated in that direction by any policy, or one of
/// the rules of a policy that isolates it admits `seen`.
fn side_allows(
    policies: &[NetworkPolicy],
    workload: &Workload,
    pod: usize,
    ingress: bool,
    seen: &Seen,
) -> bool {
    let mut isolated = false;
    for np in isolating(policies, workload, pod, ingress) {
        isolated = true;
        let ns = policy::namespace(np);
        let spec = np.spec.as_ref();
        let admitted = if ingress {
            let rules = spec.and_then(|s| s.ingress.as_deref()).unwrap_or_default();
            rules.iter().any(|r| rule_allows(r.from.as_deref(), r.ports.as_deref(), ns, seen, workload))
        } else {
            let rules = spec.and_then(|s| s.egress.as_deref()).unwrap_or_default();
            rules.iter().any(|r| rule_allows(r.to.as_deref(), r.ports.as_deref(), ns, seen, workload))
        };
        if admitted {
            return true;
        }
    }
    !isolated
}

/// The truth table of a workload under a policy set, over `targets`.
pub fn truth_table(policies: &[NetworkPolicy], workload: &Workload, targets: &[Target]) -> Matrix {
    let allowed = (0..workload.pods.len())
        .map(|from| {
            targets
                .iter()
                .map(|t| {
                    (t.pod != from).then(|| allowed(policies, workload, from, t.pod, t.port, t.protocol))
                })
                .collect()
        })
        .collect();
    Matrix {
        pods: (0..workload.pods.len()).map(|i| workload.display_name(i)).collect(),
        targets: targets.to_vec(),
        allowed,
    }
}

impl Matrix {
    /// How a target is written: `adservice:9555`, with `/UDP` or `/SCTP` when not TCP.
    pub fn target_name(&self, t: &Target) -> String {
        let proto = if t.protocol == Protocol::Tcp { String::new() } else { format!("/{}", t.protocol) };
        format!("{}:{}{proto}", self.pods[t.pod], t.port)
    }

    /// The pairs where `self` (actual) differs from `expected`.
    pub fn mismatches(&self, expected: &Matrix) -> Vec<Mismatch> {
        let mut out = Vec::new();
        for (from, row) in self.allowed.iter().enumerate() {
            for (j, actual) in row.iter().enumerate() {
                let want = expected.allowed.get(from).and_then(|r| r.get(j)).copied().flatten();
                if let (Some(actual), Some(expected_v)) = (*actual, want)
                    && actual != expected_v
                {
                    out.push(Mismatch { from, target: self.targets[j], expected: expected_v, actual });
                }
            }
        }
        out
    }

    /// The mismatch report in NetPress's wording (seed 003 §D.3).
    pub fn mismatch_report(&self, expected: &Matrix) -> String {
        let mismatches = self.mismatches(expected);
        if mismatches.is_empty() {
            return "Mismatch Summary:\nNo mismatches: every connection matches the expected connectivity.\n"
                .into();
        }
        let mut out = String::from("Mismatch Summary:\n");
        for m in &mismatches {
            out.push_str(&format!(
                "{} → {} (Expected: {}, Actual: {})\n",
                self.pods[m.from],
                self.target_name(&m.target),
                if m.expected { "True" } else { "False" },
                if m.actual { "True" } else { "False" },
            ));
        }
        out
    }

    /// The matrix as the upstream Kubernetes network-policy tests print one: a row per source
    /// pod, a column per target, `.` for connected, `X` for blocked, `-` for the pod itself.
    /// Columns are numbered; a legend names them.
    pub fn render(&self) -> String {
        let width = self.pods.iter().map(String::len).max().unwrap_or(0).max("from\\to".len());
        let mut out = String::new();
        for (j, t) in self.targets.iter().enumerate() {
            out.push_str(&format!("{:>2} = {}\n", j, self.target_name(t)));
        }
        out.push_str(&format!("{:width$}", "from\\to"));
        for j in 0..self.targets.len() {
            out.push_str(&format!(" {j:>2}"));
        }
        out.push('\n');
        for (i, row) in self.allowed.iter().enumerate() {
            out.push_str(&format!("{:width$}", self.pods[i]));
            for cell in row {
                let c = match cell {
                    Some(true) => '.',
                    Some(false) => 'X',
                    None => '-',
                };
                out.push_str(&format!("  {c}"));
            }
            out.push('\n');
        }
        out
    }

    /// The (from, target) pairs allowed.
    pub fn count_allowed(&self) -> usize {
        self.allowed.iter().flatten().filter(|c| **c == Some(true)).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{parse_yaml, validate};

    /// Namespaces x (team=a) and y (team=b); pods a, b, c in each with label pod=<name>; a
    /// listens on 80/TCP (named http) and 81/UDP (named dns), b on 80/TCP and 8080/TCP (named
    /// http), c on 9000/SCTP.
    fn workload() -> Workload {
        let text = r#"
apiVersion: v1
kind: Namespace
metadata: { name: x, labels: { team: a } }
---
apiVersion: v1
kind: Namespace
metadata: { name: y, labels: { team: b } }
"#;
        let mut docs = String::from(text);
        for ns in ["x", "y"] {
            docs.push_str(&format!(
                r#"---
apiVersion: v1
kind: Pod
metadata: {{ name: a, namespace: {ns}, labels: {{ pod: a, tier: web }} }}
spec:
  containers:
  - name: c
    ports: [ {{ containerPort: 80, name: http }}, {{ containerPort: 81, protocol: UDP, name: dns }} ]
---
apiVersion: v1
kind: Pod
metadata: {{ name: b, namespace: {ns}, labels: {{ pod: b, tier: db }} }}
spec:
  containers:
  - name: c
    ports: [ {{ containerPort: 80 }}, {{ containerPort: 8080, name: http }} ]
---
apiVersion: v1
kind: Pod
metadata: {{ name: c, namespace: {ns}, labels: {{ pod: c }} }}
spec:
  containers:
  - name: c
    ports: [ {{ containerPort: 9000, protocol: SCTP }} ]
"#
            ));
        }
        Workload::from_yaml(&docs, "test").expect("workload")
    }

    fn policies(yaml: &str) -> Vec<NetworkPolicy> {
        let ps = parse_yaml(yaml, "test").expect("yaml");
        for p in &ps {
            validate(p).expect("valid");
        }
        ps
    }

    /// The verdict of `from` (`ns/pod`) to `to` on port/protocol.
    fn v(ps: &[NetworkPolicy], w: &Workload, from: &str, to: &str, port: u16, proto: Protocol) -> bool {
        let idx = |s: &str| {
            let (ns, pod) = s.split_once('/').expect("ns/pod");
            w.pod(ns, pod).expect("pod")
        };
        let verdict = allowed(ps, w, idx(from), idx(to), port, proto);
        // The compiled rules must agree on every case checked here.
        let rules = crate::compile::compile(ps, w);
        assert_eq!(
            crate::compile::admits(&rules, w, idx(from), idx(to), port, proto),
            verdict,
            "{from} -> {to}:{port}"
        );
        verdict
    }

    const TCP: Protocol = Protocol::Tcp;
    const UDP: Protocol = Protocol::Udp;

    #[test]
    fn no_policy_allows_everything() {
        let w = workload();
        assert!(v(&[], &w, "x/a", "y/b", 80, TCP));
        assert!(v(&[], &w, "y/c", "x/a", 81, UDP));
    }

    #[test]
    fn isolation_starts_when_a_policy_selects_the_pod_and_rules_are_a_union() {
        let w = workload();
        let deny = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: b}}\n";
        let ps = policies(deny);
        assert!(!v(&ps, &w, "x/a", "x/b", 80, TCP));
        assert!(v(&ps, &w, "x/a", "x/c", 9000, Protocol::Sctp), "c is not selected");
        assert!(v(&ps, &w, "x/b", "x/a", 80, TCP), "egress of b is not isolated");
        let allow = format!(
            "{deny}---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: allow-a, namespace: x}}\nspec:\n  podSelector: {{matchLabels: {{pod: b}}}}\n  ingress:\n  - from: [{{podSelector: {{matchLabels: {{pod: a}}}}}}]\n"
        );
        let ps = policies(&allow);
        assert!(v(&ps, &w, "x/a", "x/b", 80, TCP), "the union: allow-a admits a");
        assert!(!v(&ps, &w, "x/c", "x/b", 80, TCP));
        assert!(!v(&ps, &w, "y/a", "x/b", 80, TCP), "a pod selector alone stays in the policy's namespace");
    }

    #[test]
    fn policy_types_default_from_the_rules_present() {
        let w = workload();
        // An egress section makes the policy an egress policy too (and ingress, always).
        let ps = policies(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  egress:\n  - to: [{podSelector: {matchLabels: {pod: b}}}]\n",
        );
        assert!(v(&ps, &w, "x/a", "x/b", 80, TCP));
        assert!(!v(&ps, &w, "x/a", "x/c", 9000, Protocol::Sctp));
        assert!(!v(&ps, &w, "x/b", "x/a", 80, TCP), "ingress isolated although no ingress section");
        // An empty egress list adds no Egress type: only ingress is isolated.
        let ps = policies(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  egress: []\n",
        );
        assert!(v(&ps, &w, "x/a", "x/c", 9000, Protocol::Sctp));
        assert!(!v(&ps, &w, "x/b", "x/a", 80, TCP));
        // Explicit Egress only: ingress stays open, egress is denied (no rules).
        let ps = policies(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  policyTypes: [Egress]\n  ingress: []\n",
        );
        assert!(v(&ps, &w, "x/b", "x/a", 80, TCP));
        assert!(!v(&ps, &w, "x/a", "x/b", 80, TCP));
        // `policyTypes: []` is defaulted like an absent list: Ingress, and Egress for the egress rule.
        let ps = policies(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  policyTypes: []\n  egress:\n  - to: [{podSelector: {matchLabels: {pod: b}}}]\n",
        );
        assert!(!v(&ps, &w, "x/b", "x/a", 80, TCP), "ingress isolated under policyTypes: []");
        assert!(!v(&ps, &w, "x/a", "x/c", 9000, Protocol::Sctp), "egress isolated under policyTypes: []");
        assert!(v(&ps, &w, "x/a", "x/b", 80, TCP));
    }

    #[test]
    fn empty_rules_lists_and_peers_differ_from_absent_ones() {
        let w = workload();
        // `ingress: [{}]`: one rule matching everything.
        let ps = policies(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {}\n  ingress: [{}]\n",
        );
        assert!(v(&ps, &w, "y/c", "x/b", 8080, TCP));
        // `ingress: []`: no rule, everything denied.
        let ps = policies(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {}\n  ingress: []\n",
        );
        assert!(!v(&ps, &w, "y/c", "x/b", 8080, TCP));
        // `from: []` and ports only: every source, those ports only.
        let ps = policies(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {}\n  ingress:\n  - from: []\n    ports: [{port: 80}]\n",
        );
        assert!(v(&ps, &w, "y/c", "x/b", 80, TCP));
        assert!(!v(&ps, &w, "y/c", "x/b", 8080, TCP));
    }

    #[test]
    fn namespace_selectors_alone_and_with_pod_selectors() {
        let w = workload();
        let alone = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: b}}\n  ingress:\n  - from: [{namespaceSelector: {matchLabels: {team: b}}}]\n";
        let ps = policies(alone);
        assert!(v(&ps, &w, "y/a", "x/b", 80, TCP));
        assert!(v(&ps, &w, "y/c", "x/b", 80, TCP));
        assert!(!v(&ps, &w, "x/a", "x/b", 80, TCP), "own namespace is not team=b");
        // Both in one peer: pods labelled pod=a in namespaces team=b (an AND).
        let both = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: b}}\n  ingress:\n  - from: [{namespaceSelector: {matchLabels: {team: b}}, podSelector: {matchLabels: {pod: a}}}]\n";
        let ps = policies(both);
        assert!(v(&ps, &w, "y/a", "x/b", 80, TCP));
        assert!(!v(&ps, &w, "y/c", "x/b", 80, TCP));
        assert!(!v(&ps, &w, "x/a", "x/b", 80, TCP));
        // Two peers: an OR.
        let either = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: b}}\n  ingress:\n  - from: [{namespaceSelector: {matchLabels: {team: b}}}, {podSelector: {matchLabels: {pod: a}}}]\n";
        let ps = policies(either);
        assert!(v(&ps, &w, "y/c", "x/b", 80, TCP));
        assert!(v(&ps, &w, "x/a", "x/b", 80, TCP));
        assert!(!v(&ps, &w, "x/c", "x/b", 80, TCP));
        // The automatic namespace-name label.
        let by_name = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: b}}\n  ingress:\n  - from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: y}}}]\n";
        let ps = policies(by_name);
        assert!(v(&ps, &w, "y/c", "x/b", 80, TCP));
        assert!(!v(&ps, &w, "x/c", "x/b", 80, TCP));
    }

    #[test]
    fn match_expressions_in_notin_exists_doesnotexist() {
        let w = workload();
        let mk = |expr: &str| {
            policies(&format!(
                "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: p, namespace: x}}\nspec:\n  podSelector: {{matchLabels: {{pod: b}}}}\n  ingress:\n  - from: [{{podSelector: {{matchExpressions: [{expr}]}}}}]\n"
            ))
        };
        let ps = mk("{key: pod, operator: In, values: [a, c]}");
        assert!(v(&ps, &w, "x/a", "x/b", 80, TCP) && v(&ps, &w, "x/c", "x/b", 80, TCP));
        let ps = mk("{key: tier, operator: NotIn, values: [web]}");
        assert!(!v(&ps, &w, "x/a", "x/b", 80, TCP));
        assert!(v(&ps, &w, "x/c", "x/b", 80, TCP), "NotIn matches a pod without the key");
        let ps = mk("{key: tier, operator: Exists}");
        assert!(v(&ps, &w, "x/a", "x/b", 80, TCP) && !v(&ps, &w, "x/c", "x/b", 80, TCP));
        let ps = mk("{key: tier, operator: DoesNotExist}");
        assert!(!v(&ps, &w, "x/a", "x/b", 80, TCP) && v(&ps, &w, "x/c", "x/b", 80, TCP));
        // matchLabels and matchExpressions together: both must hold.
        let ps = policies(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector:\n    matchLabels: {pod: b}\n    matchExpressions: [{key: tier, operator: In, values: [db]}]\n  ingress: []\n",
        );
        assert!(!v(&ps, &w, "x/a", "x/b", 80, TCP));
    }

    #[test]
    fn ip_blocks_with_except() {
        let w = workload();
        // Pods get 10.244.0.2.. in declaration order: x/a .2, x/b .3, x/c .4, y/a .5, y/b .6, y/c .7.
        let ps = policies(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: b}}\n  ingress:\n  - from: [{ipBlock: {cidr: 10.244.0.0/29, except: [10.244.0.4/30]}}]\n",
        );
        assert!(v(&ps, &w, "x/a", "x/b", 80, TCP), ".2 in /29, outside .4/30");
        assert!(!v(&ps, &w, "x/c", "x/b", 80, TCP), ".4 excepted");
        assert!(!v(&ps, &w, "y/b", "x/b", 80, TCP), ".6 excepted");
        assert!(!v(&ps, &w, "y/c", "x/b", 80, TCP), ".7 excepted");
        let ps = policies(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  policyTypes: [Egress]\n  egress:\n  - to: [{ipBlock: {cidr: 10.244.0.5/32}}]\n",
        );
        assert!(v(&ps, &w, "x/a", "y/a", 80, TCP));
        assert!(!v(&ps, &w, "x/a", "y/b", 80, TCP));
    }

    #[test]
    fn ports_by_number_name_range_and_protocol() {
        let w = workload();
        let mk = |ports: &str| {
            policies(&format!(
                "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: p, namespace: x}}\nspec:\n  podSelector: {{}}\n  ingress:\n  - ports: {ports}\n"
            ))
        };
        // A named port resolves per destination: `http` is 80 on a, 8080 on b.
        let ps = mk("[{port: http}]");
        assert!(v(&ps, &w, "y/a", "x/a", 80, TCP));
        assert!(!v(&ps, &w, "y/a", "x/b", 80, TCP));
        assert!(v(&ps, &w, "y/a", "x/b", 8080, TCP));
        // A named port's protocol must match too: `dns` is UDP on a.
        let ps = mk("[{port: dns}]");
        assert!(!v(&ps, &w, "y/a", "x/a", 81, UDP), "the rule's protocol defaults to TCP");
        let ps = mk("[{port: dns, protocol: UDP}]");
        assert!(v(&ps, &w, "y/a", "x/a", 81, UDP));
        // endPort ranges.
        let ps = mk("[{port: 79, endPort: 80}]");
        assert!(v(&ps, &w, "y/a", "x/b", 80, TCP) && !v(&ps, &w, "y/a", "x/b", 8080, TCP));
        // Protocol only: every port of it.
        let ps = mk("[{protocol: UDP}]");
        assert!(v(&ps, &w, "y/a", "x/a", 81, UDP) && !v(&ps, &w, "y/a", "x/a", 80, TCP));
        let ps = mk("[{protocol: SCTP, port: 9000}]");
        assert!(v(&ps, &w, "y/a", "x/c", 9000, Protocol::Sctp));
        assert!(!v(&ps, &w, "y/a", "x/b", 80, TCP));
        // Egress named port: resolved on the destination.
        let ps = policies(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: c}}\n  policyTypes: [Egress]\n  egress:\n  - ports: [{port: http}]\n",
        );
        assert!(v(&ps, &w, "x/c", "y/a", 80, TCP));
        assert!(v(&ps, &w, "x/c", "y/b", 8080, TCP));
        assert!(!v(&ps, &w, "x/c", "y/b", 80, TCP));
    }

    #[test]
    fn both_directions_must_allow() {
        let w = workload();
        let ps = policies(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: out, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  policyTypes: [Egress]\n  egress: [{to: [{podSelector: {matchLabels: {pod: b}}}]}]\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: in, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: b}}\n  ingress: [{from: [{podSelector: {matchLabels: {pod: c}}}]}]\n",
        );
        assert!(!v(&ps, &w, "x/a", "x/b", 80, TCP), "egress allows, ingress does not");
        assert!(v(&ps, &w, "x/c", "x/b", 80, TCP));
        assert!(!v(&ps, &w, "x/a", "x/c", 9000, Protocol::Sctp), "ingress open, egress does not allow");
    }

    #[test]
    fn the_matrix_renders_like_upstream_and_the_report_like_the_seed() {
        let w = workload();
        let ps = policies(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  ingress: []\n",
        );
        let t: Vec<Target> = targets(&w).into_iter().filter(|t| t.protocol == TCP).collect();
        let expected = truth_table(&[], &w, &t);
        let actual = truth_table(&ps, &w, &t);
        insta::assert_snapshot!(actual.render());
        let report = actual.mismatch_report(&expected);
        assert!(report.starts_with("Mismatch Summary:\n"), "{report}");
        assert!(report.contains("y/a → x/a:80 (Expected: True, Actual: False)"), "{report}");
        assert_eq!(actual.mismatches(&expected).len(), 5);
    }
}
