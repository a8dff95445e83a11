//! The fault catalogue of seed 003 §D.2, applied to policies as edits of their YAML objects,
//! and Table 3's fifteen labels with their levels.

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rand::Rng;
use rand::seq::IndexedRandom;

use crate::model::Workload;
use crate::policy;

/// One basic policy error of §D.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultKind {
    RemoveIngress,
    AddIngress,
    ChangePort,
    ChangeProtocol,
    AddEgress,
}

impl FaultKind {
    /// The name of Table 3's "Error Details" column.
    pub fn name(self) -> &'static str {
        match self {
            Self::RemoveIngress => "remove_ingress",
            Self::AddIngress => "add_ingress",
            Self::ChangePort => "change_port",
            Self::ChangeProtocol => "change_protocol",
            Self::AddEgress => "add_egress",
        }
    }

    /// The abbreviation of Table 3's "Error Label" column.
    pub fn abbrev(self) -> &'static str {
        match self {
            Self::RemoveIngress => "RI",
            Self::AddIngress => "AI",
            Self::ChangePort => "CP",
            Self::ChangeProtocol => "CPR",
            Self::AddEgress => "AE",
        }
    }
}

/// Table 3: label, level, faults (two faults go to two different policies, §D.2).
pub const LABELS: [(&str, u8, &[FaultKind]); 15] = {
    use FaultKind::*;
    [
        ("RI", 1, &[RemoveIngress]),
        ("AI", 1, &[AddIngress]),
        ("CP", 1, &[ChangePort]),
        ("CPR", 1, &[ChangeProtocol]),
        ("AE", 1, &[AddEgress]),
        ("RI+AI", 2, &[RemoveIngress, AddIngress]),
        ("RI+CP", 2, &[RemoveIngress, ChangePort]),
        ("RI+CPR", 2, &[RemoveIngress, ChangeProtocol]),
        ("AI+CP", 2, &[AddIngress, ChangePort]),
        ("AI+CPR", 2, &[AddIngress, ChangeProtocol]),
        ("CP+CPR", 3, &[ChangePort, ChangeProtocol]),
        ("CP+AE", 3, &[ChangePort, AddEgress]),
        ("CPR+AE", 3, &[ChangeProtocol, AddEgress]),
        ("RI+AE", 3, &[RemoveIngress, AddEgress]),
        ("AI+AE", 3, &[AddIngress, AddEgress]),
    ]
};

/// Ports a changed port is drawn from: ports of the application and common ones.
const OTHER_PORTS: [i32; 10] = [80, 443, 3550, 5050, 6379, 7000, 7070, 8080, 9555, 50051];

fn app_selector(app: &str) -> LabelSelector {
    LabelSelector { match_labels: Some([("app".to_string(), app.to_string())].into()), ..Default::default() }
}

/// Every port entry of a policy: (is_ingress, rule, port).
fn port_entries(p: &NetworkPolicy) -> Vec<(bool, usize, usize)> {
    let mut out = Vec::new();
    if let Some(spec) = &p.spec {
        for (r, rule) in spec.ingress.iter().flatten().enumerate() {
            out.extend((0..rule.ports.as_ref().map_or(0, Vec::len)).map(|i| (true, r, i)));
        }
        for (r, rule) in spec.egress.iter().flatten().enumerate() {
            out.extend((0..rule.ports.as_ref().map_or(0, Vec::len)).map(|i| (false, r, i)));
        }
    }
    out
}

fn port_mut(p: &mut NetworkPolicy, (ingress, r, i): (bool, usize, usize)) -> Option<&mut NetworkPolicyPort> {
    let spec = p.spec.as_mut()?;
    if ingress {
        spec.ingress.as_mut()?.get_mut(r)?.ports.as_mut()?.get_mut(i)
    } else {
        spec.egress.as_mut()?.get_mut(r)?.ports.as_mut()?.get_mut(i)
    }
}

/// Applies one fault of `kind` to `policy` with drawn parameters; returns what it did in words,
/// or `None` when the policy offers nothing for this fault (no ingress rule to remove...).
pub fn apply(
    kind: FaultKind,
    policy: &mut NetworkPolicy,
    workload: &Workload,
    rng: &mut impl Rng,
) -> Option<String> {
    let name = policy::name(policy).to_string();
    let apps: Vec<String> = workload.pods.iter().filter_map(|p| p.labels.get("app").cloned()).collect();
    match kind {
        FaultKind::RemoveIngress => {
            let rules = policy.spec.as_mut()?.ingress.as_mut().filter(|r| !r.is_empty())?;
            let i = rng.random_range(0..rules.len());
            rules.remove(i);
            Some(format!("{name}: removed spec.ingress[{i}]"))
        }
        FaultKind::AddIngress => {
            let source = apps.choose(rng)?.clone();
            let spec = policy.spec.as_mut()?;
            // §D.2's example: a new `from` rule with a pod selector, no ports.
            spec.ingress.get_or_insert_with(Vec::new).push(NetworkPolicyIngressRule {
                from: Some(vec![NetworkPolicyPeer {
                    pod_selector: Some(app_selector(&source)),
                    ..Default::default()
                }]),
                ports: None,
            });
            Some(format!("{name}: added an ingress rule from app={source}"))
        }
        FaultKind::AddEgress => {
            let dest = apps.choose(rng)?.clone();
            let spec = policy.spec.as_mut()?;
            spec.egress.get_or_insert_with(Vec::new).push(NetworkPolicyEgressRule {
                to: Some(vec![NetworkPolicyPeer {
                    pod_selector: Some(app_selector(&dest)),
                    ..Default::default()
                }]),
                ports: None,
            });
            Some(format!("{name}: added an egress rule to app={dest}"))
        }
        FaultKind::ChangePort => {
            let entries: Vec<_> = port_entries(policy)
                .into_iter()
                .filter(|e| {
                    let p = port_mut(&mut policy.clone(), *e).and_then(|p| p.port.clone());
                    matches!(p, Some(IntOrString::Int(_)))
                })
                .collect();
            let entry = *entries.choose(rng)?;
            let port = port_mut(policy, entry)?;
            let Some(IntOrString::Int(old)) = port.port.clone() else { return None };
            let new = *OTHER_PORTS.iter().filter(|p| **p != old).collect::<Vec<_>>().choose(rng)?;
            port.port = Some(IntOrString::Int(*new));
            port.end_port = None;
            let (dir, r, i) = entry;
            let dir = if dir { "ingress" } else { "egress" };
            Some(format!("{name}: spec.{dir}[{r}].ports[{i}].port {old} -> {new}"))
        }
        FaultKind::ChangeProtocol => {
            let entry = *port_entries(policy).choose(rng)?;
            let port = port_mut(policy, entry)?;
            let old = port.protocol.clone().unwrap_or_else(|| "TCP".into());
            let new = if old == "TCP" { "UDP" } else { "TCP" };
            port.protocol = Some(new.into());
            let (dir, r, i) = entry;
            let dir = if dir { "ingress" } else { "egress" };
            Some(format!("{name}: spec.{dir}[{r}].ports[{i}].protocol {old} -> {new}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_3_has_five_labels_per_level_spelled_from_their_faults() {
        let mut seen = std::collections::HashSet::new();
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
}
