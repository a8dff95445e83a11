//! Google's Online Boutique, the workload of NetPress's third application (seed 003 §D.1):
//! its pods with their real container ports, and one NetworkPolicy per service granting exactly
//! the application's call graph. The files live in `testdata/k8s/online-boutique/` and are
//! compiled in, so the environment runs from any directory.
//!
//! §D.3's prompt also says the frontend talks to payment and email; the application does not
//! (checkout does), and the policies follow the application (see docs/k8s.md).

use k8s_openapi::api::networking::v1::NetworkPolicy;

use crate::model::Workload;
use crate::{K8sError, policy};

/// The namespace the workload runs in.
pub const NAMESPACE: &str = "default";

const WORKLOAD: &str = include_str!("../../../testdata/k8s/online-boutique/workload.yaml");

/// The policy files, by service.
pub const POLICY_FILES: [(&str, &str); 12] = [
    ("adservice", include_str!("../../../testdata/k8s/online-boutique/policies/adservice.yaml")),
    ("cartservice", include_str!("../../../testdata/k8s/online-boutique/policies/cartservice.yaml")),
    ("checkoutservice", include_str!("../../../testdata/k8s/online-boutique/policies/checkoutservice.yaml")),
    ("currencyservice", include_str!("../../../testdata/k8s/online-boutique/policies/currencyservice.yaml")),
    ("emailservice", include_str!("../../../testdata/k8s/online-boutique/policies/emailservice.yaml")),
    ("frontend", include_str!("../../../testdata/k8s/online-boutique/policies/frontend.yaml")),
    ("loadgenerator", include_str!("../../../testdata/k8s/online-boutique/policies/loadgenerator.yaml")),
    ("paymentservice", include_str!("../../../testdata/k8s/online-boutique/policies/paymentservice.yaml")),
    (
        "productcatalogservice",
        include_str!("../../../testdata/k8s/online-boutique/policies/productcatalogservice.yaml"),
    ),
    (
        "recommendationservice",
        include_str!("../../../testdata/k8s/online-boutique/policies/recommendationservice.yaml"),
    ),
    ("redis-cart", include_str!("../../../testdata/k8s/online-boutique/policies/redis-cart.yaml")),
    ("shippingservice", include_str!("../../../testdata/k8s/online-boutique/policies/shippingservice.yaml")),
];

/// Who calls whom in the application (the call graph the policies grant).
pub const CALL_GRAPH: [(&str, &[&str]); 5] = [
    ("loadgenerator", &["frontend"]),
    (
        "frontend",
        &[
            "adservice",
            "cartservice",
            "checkoutservice",
            "currencyservice",
            "productcatalogservice",
            "recommendationservice",
            "shippingservice",
        ],
    ),
    (
        "checkoutservice",
        &[
            "cartservice",
            "currencyservice",
            "emailservice",
            "paymentservice",
            "productcatalogservice",
            "shippingservice",
        ],
    ),
    ("recommendationservice", &["productcatalogservice"]),
    ("cartservice", &["redis-cart"]),
];

/// The workload: 12 pods in `default`.
pub fn workload() -> Result<Workload, K8sError> {
    Workload::from_yaml(WORKLOAD, "testdata/k8s/online-boutique/workload.yaml")
}

/// The correct policies, in file order; each one validated.
pub fn policies() -> Result<Vec<NetworkPolicy>, K8sError> {
    let mut out = Vec::new();
    for (service, text) in POLICY_FILES {
        let origin = format!("testdata/k8s/online-boutique/policies/{service}.yaml");
        for p in policy::parse_yaml(text, &origin).map_err(|e| K8sError::Policy(format!("{origin}: {e}")))? {
            policy::validate(&p).map_err(|e| K8sError::Policy(format!("{origin}: {e}")))?;
            out.push(p);
        }
    }
    Ok(out)
}

/// Whether the application calls `to` from `from`.
pub fn calls(from: &str, to: &str) -> bool {
    CALL_GRAPH.iter().any(|(f, tos)| *f == from && tos.contains(&to))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine;

    #[test]
    fn the_policies_grant_exactly_the_call_graph() {
        let w = workload().expect("workload");
        let ps = policies().expect("policies");
        assert_eq!((w.pods.len(), ps.len()), (12, 12));
        let targets = engine::targets(&w);
        assert_eq!(targets.len(), 11, "every service but the load generator listens on one port");
        let table = engine::truth_table(&ps, &w, &targets);
        for (from, row) in table.allowed.iter().enumerate() {
            for (j, cell) in row.iter().enumerate() {
                let (a, b) = (&w.pods[from].name, &w.pods[targets[j].pod].name);
                if let Some(ok) = cell {
                    assert_eq!(*ok, calls(a, b), "{a} -> {b}");
                }
            }
        }
        assert_eq!(table.count_allowed(), 1 + 7 + 6 + 1 + 1);
    }
}
