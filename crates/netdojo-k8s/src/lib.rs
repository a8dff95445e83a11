//! netdojo-k8s: Kubernetes NetworkPolicy semantics, enforced on real kernel packet filtering,
//! and NetPress's microservice policy-troubleshooting application (seed 003 §D, Table 3).
//!
//! - [`model`]: namespaces and pods (labels, IPs, container ports), read from `v1` YAML.
//! - [`policy`]: `networking.k8s.io/v1` NetworkPolicy objects (k8s-openapi), YAML in and out,
//!   the API server's validation and its messages, selectors, peers and ports.
//! - [`engine`]: the truth table (expected verdict of every pair) and its `.`/`X` matrix.
//! - [`compile`]: policies compiled to per-pod nftables rules, as a CNI plugin enforces them.
//! - [`cluster`]: the embedded cluster: pods as namespaces on a bridge, real TCP/UDP listeners,
//!   atomic rule updates, and a prober that makes real connections from inside each pod.
//! - [`apiserver`]: an embedded Kubernetes API server over the policy store, for the real
//!   kubectl and kube-rs.
//! - `kube_driver` (feature `kube`): the same environment on a real cluster from KUBECONFIG.

pub mod apiserver;
pub mod boutique;
pub mod cluster;
pub mod compile;
pub mod engine;
pub mod env;
pub mod faults;
#[cfg(feature = "kube")]
pub mod kube_driver;
pub mod kubectl;
pub mod model;
pub mod policy;
pub mod random;
pub mod tasks;

pub use engine::{Matrix, Mismatch, Target};
pub use model::{ContainerPort, PodInfo, Protocol, Workload};

/// What goes wrong outside an agent's commands (those get kubectl's messages as text).
#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    #[error("workload: {0}")]
    Workload(String),
    #[error("policies: {0}")]
    Policy(String),
    #[error("cluster: {0}")]
    Cluster(String),
}

pub use env::{K8sEnv, K8sFactory};
pub use tasks::K8sGenerator;
