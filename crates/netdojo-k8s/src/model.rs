//! The cluster a policy set is judged on: namespaces with labels, pods with labels, an IP and
//! their container ports. Read from the YAML users write (`v1/Namespace` and `v1/Pod`
//! documents, k8s-openapi types); pod IPs are assigned by the embedded cluster.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde::{Deserialize, Serialize};

use crate::K8sError;

/// The label every namespace carries (set by the API server since Kubernetes 1.21).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A transport protocol of a NetworkPolicy port or a container port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// The protocol as Kubernetes spells it (`TCP`, the default when absent).
    pub fn parse(s: Option<&str>) -> Option<Self> {
        match s {
            None | Some("TCP") => Some(Self::Tcp),
            Some("UDP") => Some(Self::Udp),
            Some("SCTP") => Some(Self::Sctp),
            Some(_) => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tcp => "TCP",
            Self::Udp => "UDP",
            Self::Sctp => "SCTP",
        }
    }

    /// The name nftables gives it (`meta l4proto tcp`).
    pub fn nft(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
            Self::Sctp => "sctp",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One container port of a pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerPort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub port: u16,
    pub protocol: Protocol,
}

/// One pod as the policy engine sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub ip: Ipv4Addr,
    pub ports: Vec<ContainerPort>,
}

impl PodInfo {
    /// The port number of the named container port `name` for `protocol`, if the pod has one.
    pub fn named_port(&self, name: &str, protocol: Protocol) -> Option<u16> {
        self.ports.iter().find(|p| p.name.as_deref() == Some(name) && p.protocol == protocol).map(|p| p.port)
    }
}

/// The namespaces and pods of a cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// Namespace name → labels (the `kubernetes.io/metadata.name` label included).
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub pods: Vec<PodInfo>,
}

/// The pod subnet of the embedded cluster (kind's default pod CIDR, one node).
pub const POD_SUBNET: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 244, 0, 0), 24);

/// The container ports of a pod's spec; Err names the field at fault (`spec.containers[0].ports[1].protocol: ...`).
pub fn pod_ports(pod: &Pod) -> Result<Vec<ContainerPort>, String> {
    let mut ports = Vec::new();
    for (c, container) in pod.spec.iter().flat_map(|s| s.containers.iter()).enumerate() {
        for (p, port) in container.ports.iter().flatten().enumerate() {
            let field = format!("spec.containers[{c}].ports[{p}]");
            let number = u16::try_from(port.container_port)
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{field}.containerPort: must be between 1 and 65535"))?;
            let protocol = Protocol::parse(port.protocol.as_deref())
                .ok_or_else(|| format!("{field}.protocol: supported values: \"SCTP\", \"TCP\", \"UDP\""))?;
            ports.push(ContainerPort { name: port.name.clone(), port: number, protocol });
        }
    }
    Ok(ports)
}

impl Workload {
    /// Adds a namespace (or its labels), with the label the API server sets on every one.
    pub fn add_namespace(&mut self, name: &str, labels: BTreeMap<String, String>) {
        let entry = self.namespaces.entry(name.to_string()).or_default();
        entry.extend(labels);
        entry.insert(NAMESPACE_NAME_LABEL.into(), name.into());
    }

    /// Adds a pod at the next free address of [`POD_SUBNET`] (from .2: .1 is the gateway's).
    pub fn add_pod(
        &mut self,
        namespace: &str,
        name: &str,
        labels: BTreeMap<String, String>,
        ports: Vec<ContainerPort>,
    ) -> Result<(), K8sError> {
        if self.pods.iter().any(|p| p.namespace == namespace && p.name == name) {
            return Err(K8sError::Workload(format!("pod {namespace}/{name} is declared twice")));
        }
        let n = self.pods.len() as u32 + 2;
        if n > 254 {
            return Err(K8sError::Workload("more than 253 pods do not fit the pod subnet".into()));
        }
        if !self.namespaces.contains_key(namespace) {
            self.add_namespace(namespace, BTreeMap::new());
        }
        let ip = Ipv4Addr::from(u32::from(POD_SUBNET.0) + n);
        self.pods.push(PodInfo { namespace: namespace.into(), name: name.into(), labels, ip, ports });
        Ok(())
    }

    /// Reads `v1/Namespace` and `v1/Pod` documents (multi-document YAML). `origin` names the
    /// text in errors.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, K8sError> {
        let mut workload = Workload::default();
        for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            let value = serde_yaml_ng::Value::deserialize(doc)
                .map_err(|e| K8sError::Workload(format!("{origin}: document {}: {e}", i + 1)))?;
            if value.is_null() {
                continue;
            }
            let kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or_default().to_string();
            let bad =
                |e: serde_yaml_ng::Error| K8sError::Workload(format!("{origin}: document {}: {e}", i + 1));
            match kind.as_str() {
                "Namespace" => {
                    let ns: Namespace = serde_yaml_ng::from_value(value).map_err(bad)?;
                    let name = ns.metadata.name.clone().unwrap_or_default();
                    workload.add_namespace(&name, ns.metadata.labels.unwrap_or_default());
                }
                "Pod" => {
                    let pod: Pod = serde_yaml_ng::from_value(value).map_err(bad)?;
                    let name = pod.metadata.name.clone().ok_or_else(|| {
                        K8sError::Workload(format!("{origin}: document {}: metadata.name is missing", i + 1))
                    })?;
                    let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                    let ports = pod_ports(&pod)
                        .map_err(|e| K8sError::Workload(format!("{origin}: pod {name}: {e}")))?;
                    workload.add_pod(&namespace, &name, pod.metadata.labels.unwrap_or_default(), ports)?;
                }
                other => {
                    return Err(K8sError::Workload(format!(
                        "{origin}: document {}: kind `{other}` is not a Namespace or a Pod",
                        i + 1
                    )));
                }
            }
        }
        if workload.pods.is_empty() {
            return Err(K8sError::Workload(format!("{origin}: no pods")));
        }
        Ok(workload)
    }

    /// Index of the pod `namespace/name`.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<usize> {
        self.pods.iter().position(|p| p.namespace == namespace && p.name == name)
    }

    /// How a pod is named in reports: its name when every pod shares one namespace, else
    /// `namespace/name` (as the upstream network-policy tests write it).
    pub fn display_name(&self, pod: usize) -> String {
        let p = &self.pods[pod];
        let one_namespace = self.pods.iter().all(|q| q.namespace == p.namespace);
        if one_namespace { p.name.clone() } else { format!("{}/{}", p.namespace, p.name) }
    }
}
