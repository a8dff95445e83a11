//! The driver for real clusters (feature `kube`): the same environment as the embedded cluster,
//! against any Kubernetes cluster that KUBECONFIG names (kind, for one).
//!
//! Per episode it creates namespaces of its own (`netdojo-<pid>-<nonce>-<namespace>`, one per
//! namespace of the workload, labelled `app.kubernetes.io/managed-by=netdojo`), deploys the
//! workload's pods there (one `agnhost serve-hostname` container per container port, the image
//! the upstream network-policy e2e tests use, with the workload's labels and named ports), then
//! the task's policies. Each pod gets one ephemeral debug container (`kubectl debug`'s
//! mechanism), created once and reused for every probe as seed 003 §D.3 describes; a probe
//! execs one shell script in every source pod's debug container that runs `nc` against every
//! target at once and prints one `<index> ok|no` line per target.
//!
//! The agent's kubectl commands are parsed and answered by [`crate::kubectl::Store`] (one
//! parser, one set of messages), over the policies read back from the API server before each
//! command; a command that changes them is sent to the API server (create, replace, delete),
//! whose refusals are shown as kubectl shows them. The agent sees the workload's own namespace
//! names (`default`); the driver maps them to its namespaces both ways, in objects and in
//! `kubernetes.io/metadata.name` namespace selectors.
//!
//! The namespaces are deleted at close, when a start fails, and (best effort, on the running
//! tokio runtime) when the cluster handle is dropped.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Container, ContainerPort as K8sPort, Namespace, Pod, PodSpec};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{AttachParams, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::Status;
use kube::{Api, Client, Config};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::engine::{Matrix, Target};
use crate::model::{Protocol, Workload};
use crate::policy;

/// The image of the workload's pods: the upstream network-policy e2e tests' server.
pub const SERVER_IMAGE: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";
/// The image of the debug containers (it has `nc`, as §D.3's probes use).
pub const DEBUG_IMAGE: &str = "busybox:1.36";
/// The ephemeral container added to every pod.
pub const DEBUG_CONTAINER: &str = "netdojo-probe";
/// The label every namespace of the driver carries.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "netdojo");
const NS_LABEL: &str = "kubernetes.io/metadata.name";

/// How to reach the cluster and what to run there.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// The kubeconfig file; `None`: KUBECONFIG, then `~/.kube/config`, as kubectl does.
    pub kubeconfig: Option<PathBuf>,
    pub server_image: String,
    pub debug_image: String,
    /// How long `nc` waits for one connection (rounded up to whole seconds, as `nc -w` takes).
    pub probe_timeout: Duration,
    /// How long pods and debug containers may take to run (image pulls included).
    pub ready_timeout: Duration,
    /// How long to wait after a policy change before probing: a CNI plugin enforces policies
    /// asynchronously, after the API server accepted them.
    pub settle: Duration,
}

impl Default for KubeOptions {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            server_image: SERVER_IMAGE.into(),
            debug_image: DEBUG_IMAGE.into(),
            probe_timeout: Duration::from_secs(1),
            ready_timeout: Duration::from_secs(180),
            settle: Duration::from_secs(2),
        }
    }
}

/// What goes wrong talking to a real cluster.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error("no Kubernetes cluster reachable: {0}")]
    NoCluster(String),
    #[error("{what}: {message}")]
    Api { what: String, message: String },
    #[error("{0}")]
    Timeout(String),
    #[error("probe from pod {pod}: {message}")]
    Probe { pod: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

/// Maps the workload's namespace names to the driver's own, both ways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceMap {
    /// The prefix of every namespace of this cluster (`netdojo-<pid>-<nonce>`).
    pub base: String,
}

impl NamespaceMap {
    /// A fresh prefix: the process id and a random nonce, so concurrent runs never share one.
    pub fn fresh() -> Self {
        Self::with_nonce(std::process::id(), rand::random::<u32>())
    }

    pub fn with_nonce(pid: u32, nonce: u32) -> Self {
        Self { base: format!("netdojo-{pid}-{nonce:08x}") }
    }

    /// The real namespace of the workload's namespace `logical`.
    pub fn real(&self, logical: &str) -> Result<String, KubeError> {
        let real = format!("{}-{logical}", self.base);
        if real.len() > 63 {
            return Err(KubeError::Invalid(format!(
                "namespace \"{logical}\": \"{real}\" is longer than the 63 characters a namespace name may have"
            )));
        }
        Ok(real)
    }

    /// The workload's namespace of a real one, if it is one of this cluster's.
    pub fn logical<'a>(&self, real: &'a str) -> Option<&'a str> {
        real.strip_prefix(self.base.as_str())?.strip_prefix('-')
    }

    /// Rewrites `kubernetes.io/metadata.name` in a namespace selector; `to_real` picks the way.
    fn selector(&self, sel: &mut LabelSelector, workload: &Workload, to_real: bool) {
        let map = |v: &mut String| {
            if to_real {
                if workload.namespaces.contains_key(v.as_str())
                    && let Ok(r) = self.real(v)
                {
                    *v = r;
                }
            } else if let Some(l) = self.logical(v) {
                *v = l.to_string();
            }
        };
        if let Some(labels) = sel.match_labels.as_mut()
            && let Some(v) = labels.get_mut(NS_LABEL)
        {
            map(v);
        }
        for e in sel.match_expressions.iter_mut().flatten() {
            if e.key == NS_LABEL {
                e.values.iter_mut().flatten().for_each(map);
            }
        }
    }

    /// Replaces the driver's namespace names in a server message with the workload's.
    pub fn unmap_text(&self, text: &str) -> String {
        let mut out = text.to_string();
        while let Some(i) = out.find(&format!("{}-", self.base)) {
            out.replace_range(i..i + self.base.len() + 1, "");
        }
        out
    }
}

fn map_peers(peers: Option<&mut Vec<NetworkPolicyPeer>>, f: &mut impl FnMut(&mut LabelSelector)) {
    for p in peers.into_iter().flatten() {
        if let Some(s) = p.namespace_selector.as_mut() {
            f(s);
        }
    }
}

/// A policy as the driver sends it: in the real namespace, namespace selectors mapped, no
/// server-owned metadata.
pub fn to_cluster(
    p: &NetworkPolicy,
    map: &NamespaceMap,
    workload: &Workload,
) -> Result<NetworkPolicy, KubeError> {
    let mut out = NetworkPolicy {
        metadata: ObjectMeta {
            name: p.metadata.name.clone(),
            namespace: Some(map.real(policy::namespace(p))?),
            labels: p.metadata.labels.clone(),
            annotations: p.metadata.annotations.clone(),
            ..Default::default()
        },
        spec: p.spec.clone(),
    };
    map_selectors(&mut out, &mut |s| map.selector(s, workload, true));
    Ok(out)
}

/// A policy read from the server as the agent sees it: the workload's namespace, and the
/// metadata an apply round-trips (name, namespace, labels, annotations).
pub fn from_cluster(p: &NetworkPolicy, map: &NamespaceMap, workload: &Workload) -> NetworkPolicy {
    let ns = p.metadata.namespace.as_deref().unwrap_or_default();
    let mut out = NetworkPolicy {
        metadata: ObjectMeta {
            name: p.metadata.name.clone(),
            namespace: Some(map.logical(ns).unwrap_or(ns).to_string()),
            labels: p.metadata.labels.clone(),
            annotations: p.metadata.annotations.clone(),
            ..Default::default()
        },
        spec: p.spec.clone(),
    };
    map_selectors(&mut out, &mut |s| map.selector(s, workload, false));
    out
}

fn map_selectors(p: &mut NetworkPolicy, f: &mut impl FnMut(&mut LabelSelector)) {
    if let Some(spec) = p.spec.as_mut() {
        for r in spec.ingress.iter_mut().flatten() {
            map_peers(r.from.as_mut(), f);
        }
        for r in spec.egress.iter_mut().flatten() {
            map_peers(r.to.as_mut(), f);
        }
    }
}

/// A namespace of the driver, with the workload namespace's labels.
pub fn namespace_object(real: &str, labels: &BTreeMap<String, String>) -> Namespace {
    let mut labels: BTreeMap<String, String> =
        labels.iter().filter(|(k, _)| k.as_str() != NS_LABEL).map(|(k, v)| (k.clone(), v.clone())).collect();
    labels.insert(MANAGED_BY.0.into(), MANAGED_BY.1.into());
    Namespace {
        metadata: ObjectMeta { name: Some(real.into()), labels: Some(labels), ..Default::default() },
        ..Default::default()
    }
}

/// One workload pod: an `agnhost serve-hostname` container per container port (TCP, UDP or
/// SCTP, answering with the pod's name), or `agnhost pause` for a pod without ports.
pub fn pod_object(pod: &crate::model::PodInfo, real_ns: &str, image: &str) -> Pod {
    let containers: Vec<Container> = if pod.ports.is_empty() {
        vec![Container {
            name: "pause".into(),
            image: Some(image.into()),
            args: Some(vec!["pause".into()]),
            ..Default::default()
        }]
    } else {
        pod.ports
            .iter()
            .map(|c| {
                let proto = c.protocol.as_str().to_ascii_lowercase();
                Container {
                    name: format!("serve-{}-{proto}", c.port),
                    image: Some(image.into()),
                    args: Some(vec![
                        "serve-hostname".into(),
                        format!("--{proto}"),
                        "--http=false".into(),
                        "--port".into(),
                        c.port.to_string(),
                    ]),
                    ports: Some(vec![K8sPort {
                        container_port: i32::from(c.port),
                        name: c.name.clone(),
                        protocol: Some(c.protocol.as_str().into()),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }
            })
            .collect()
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(pod.name.clone()),
            namespace: Some(real_ns.into()),
            labels: Some(pod.labels.clone()),
            ..Default::default()
        },
        spec: Some(PodSpec { containers, termination_grace_period_seconds: Some(0), ..Default::default() }),
        status: None,
    }
}

/// The strategic-merge patch of the `ephemeralcontainers` subresource that adds the debug
/// container (what `kubectl debug POD --image IMAGE` sends), idle until probes exec into it.
pub fn debug_container_patch(image: &str) -> Value {
    json!({
        "spec": {
            "ephemeralContainers": [{
                "name": DEBUG_CONTAINER,
                "image": image,
                "command": ["sleep", "2147483647"],
                "stdin": false,
                "tty": false,
            }]
        }
    })
}

/// One probe a source pod runs: its index in the matrix's targets, and where it connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeTarget {
    pub index: usize,
    pub ip: Ipv4Addr,
    pub port: u16,
    pub protocol: Protocol,
}

/// The script a debug container runs: every target at once with `nc` (`-z` for TCP; for UDP a
/// datagram the server must answer), one `<index> ok|no` line each.
pub fn probe_script(targets: &[ProbeTarget], timeout: Duration) -> String {
    let secs = timeout.as_millis().div_ceil(1000).max(1);
    let mut s = format!(
        "t() {{ if [ \"$3\" = udp ]; then r=$(echo probe | nc -u -w {secs} \"$1\" \"$2\" 2>/dev/null); \
         [ -n \"$r\" ] && echo \"$4 ok\" || echo \"$4 no\"; \
         else nc -z -w {secs} \"$1\" \"$2\" </dev/null >/dev/null 2>&1 && echo \"$4 ok\" || echo \"$4 no\"; fi; }}\n"
    );
    for t in targets {
        let proto = if t.protocol == Protocol::Udp { "udp" } else { "tcp" };
        let _ = writeln!(s, "t {} {} {proto} {} &", t.ip, t.port, t.index);
    }
    s.push_str("wait\n");
    s
}

/// Reads a probe script's output: every expected index exactly once, `ok` or `no`.
pub fn parse_probe_output(output: &str, expected: &[usize]) -> Result<BTreeMap<usize, bool>, String> {
    let mut out = BTreeMap::new();
    for line in output.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (index, verdict) =
            line.split_once(' ').ok_or_else(|| format!("unexpected line {line:?} in the probe's output"))?;
        let index: usize =
            index.parse().map_err(|_| format!("unexpected line {line:?} in the probe's output"))?;
        let ok = match verdict {
            "ok" => true,
            "no" => false,
            _ => return Err(format!("unexpected line {line:?} in the probe's output")),
        };
        if !expected.contains(&index) {
            return Err(format!("the probe's output names target {index}, which was not probed"));
        }
        if out.insert(index, ok).is_some() {
            return Err(format!("the probe's output names target {index} twice"));
        }
    }
    if let Some(missing) = expected.iter().find(|i| !out.contains_key(i)) {
        return Err(format!(
            "the probe's output has no line for target {missing} (is `nc` in the debug image?); output: {:?}",
            output.chars().take(400).collect::<String>()
        ));
    }
    Ok(out)
}

/// An API error as kubectl prints it (`Error from server (NotFound): ...`; a 422 prints the
/// server's `The NetworkPolicy "x" is invalid: ...` alone), the driver's namespace names
/// replaced with the workload's.
pub fn status_text(s: &Status, map: &NamespaceMap) -> String {
    let message = map.unmap_text(&s.message);
    if s.code == 422 {
        return message;
    }
    let reason = if s.reason.is_empty() {
        match s.code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            410 => "Gone",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            _ => "Unknown",
        }
        .to_string()
    } else {
        s.reason.clone()
    };
    format!("Error from server ({reason}): {message}")
}

/// Any error of a request, in words; `what` says which request.
pub fn request_error(what: &str, e: &kube::Error, map: &NamespaceMap) -> KubeError {
    let message = match e {
        kube::Error::Api(s) => status_text(s, map),
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            format!("the API server cannot be reached: {e}")
        }
        other => other.to_string(),
    };
    KubeError::Api { what: what.into(), message }
}

/// Connects to the cluster KUBECONFIG (or `options.kubeconfig`) names and checks it answers.
pub async fn connect(options: &KubeOptions) -> Result<Client, KubeError> {
    let (config, source) = match &options.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| KubeError::NoCluster(format!("kubeconfig {}: {e}", path.display())))?;
            let c = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| KubeError::NoCluster(format!("kubeconfig {}: {e}", path.display())))?;
            (c, path.display().to_string())
        }
        None => {
            let source = std::env::var("KUBECONFIG").unwrap_or_else(|_| "~/.kube/config".into());
            let c = Config::from_kubeconfig(&KubeConfigOptions::default())
                .await
                .map_err(|e| KubeError::NoCluster(format!("kubeconfig {source}: {e}")))?;
            (c, source)
        }
    };
    let url = config.cluster_url.to_string();
    let client =
        Client::try_from(config).map_err(|e| KubeError::NoCluster(format!("{url} (from {source}): {e}")))?;
    match tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(e)) => Err(KubeError::NoCluster(format!("{url} (from {source}): {e}"))),
        Err(_) => Err(KubeError::NoCluster(format!("{url} (from {source}): no answer in 10 s"))),
    }
}

/// One episode's workload on a real cluster.
pub struct KubeCluster {
    client: Client,
    map: NamespaceMap,
    /// The workload, with the pods' real IPs.
    workload: Workload,
    options: KubeOptions,
    /// The namespaces created so far (deleted at teardown).
    created: Vec<String>,
}

impl std::fmt::Debug for KubeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeCluster").field("base", &self.map.base).field("created", &self.created).finish()
    }
}

impl KubeCluster {
    /// Deploys the workload and the policies into fresh namespaces and readies the debug
    /// containers. On any error the namespaces made so far are deleted.
    pub async fn start(
        client: Client,
        workload: Workload,
        policies: &[NetworkPolicy],
        options: KubeOptions,
    ) -> Result<Self, KubeError> {
        let mut c = Self { client, map: NamespaceMap::fresh(), workload, options, created: Vec::new() };
        match c.deploy(policies).await {
            Ok(()) => Ok(c),
            Err(e) => {
                c.teardown().await;
                Err(e)
            }
        }
    }

    /// The driver over a workload already deployed in the namespaces `map` names (the tests
    /// of the embedded API server with a fixed workload use it: its pods cannot be created,
    /// only read). Teardown
    /// deletes nothing: the driver created nothing.
    pub fn attach(client: Client, workload: Workload, map: NamespaceMap, options: KubeOptions) -> Self {
        Self { client, map, workload, options, created: Vec::new() }
    }

    async fn deploy(&mut self, policies: &[NetworkPolicy]) -> Result<(), KubeError> {
        let pp = PostParams::default();
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        for (logical, labels) in self.workload.namespaces.clone() {
            let real = self.map.real(&logical)?;
            namespaces
                .create(&pp, &namespace_object(&real, &labels))
                .await
                .map_err(|e| request_error(&format!("creating namespace {real}"), &e, &self.map))?;
            self.created.push(real);
        }
        for p in &self.workload.pods {
            let real = self.map.real(&p.namespace)?;
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &real);
            api.create(&pp, &pod_object(p, &real, &self.options.server_image)).await.map_err(|e| {
                request_error(&format!("creating pod {}/{}", p.namespace, p.name), &e, &self.map)
            })?;
        }
        // Running pods, their IPs; then the debug containers.
        let ips = self
            .wait_pods(|pod| {
                let status = pod.status.as_ref()?;
                (status.phase.as_deref() == Some("Running")).then_some(())?;
                status.pod_ip.as_deref()?.parse::<Ipv4Addr>().ok()
            })
            .await?;
        for (p, ip) in self.workload.pods.iter_mut().zip(ips) {
            p.ip = ip;
        }
        let patch = Patch::Strategic(debug_container_patch(&self.options.debug_image));
        for p in &self.workload.pods {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.map.real(&p.namespace)?);
            api.patch_ephemeral_containers(&p.name, &PatchParams::default(), &patch).await.map_err(|e| {
                request_error(&format!("adding the debug container to pod {}", p.name), &e, &self.map)
            })?;
        }
        self.wait_pods(|pod| {
            pod.status
                .as_ref()?
                .ephemeral_container_statuses
                .iter()
                .flatten()
                .find(|s| s.name == DEBUG_CONTAINER)?
                .state
                .as_ref()?
                .running
                .as_ref()
                .map(|_| ())
        })
        .await?;
        self.sync(policies)
            .await
            .map_err(|message| KubeError::Api { what: "applying the policies".into(), message })
    }

    /// Polls every pod until `ready` gives a value for each, within the ready timeout.
    async fn wait_pods<T>(&self, ready: impl Fn(&Pod) -> Option<T>) -> Result<Vec<T>, KubeError> {
        let deadline = tokio::time::Instant::now() + self.options.ready_timeout;
        loop {
            let mut got = Vec::new();
            let mut waiting = None;
            for p in &self.workload.pods {
                let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.map.real(&p.namespace)?);
                let pod = api
                    .get(&p.name)
                    .await
                    .map_err(|e| request_error(&format!("reading pod {}", p.name), &e, &self.map))?;
                match ready(&pod) {
                    Some(v) => got.push(v),
                    None => {
                        waiting = Some(p.name.clone());
                        break;
                    }
                }
            }
            let Some(pod) = waiting else { return Ok(got) };
            if tokio::time::Instant::now() >= deadline {
                return Err(KubeError::Timeout(format!(
                    "pod {pod} (or its debug container) is not running after {:?}; check `kubectl -n {} describe pod {pod}` (image pulls of {} and {})",
                    self.options.ready_timeout,
                    self.created.first().map(String::as_str).unwrap_or_default(),
                    self.options.server_image,
                    self.options.debug_image
                )));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The workload, with the pods' real IPs.
    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// The namespace map of this cluster.
    pub fn namespaces(&self) -> &NamespaceMap {
        &self.map
    }

    /// The policies in the cluster's namespaces as the agent sees them, with each one's
    /// resourceVersion.
    async fn listed(&self) -> Result<Vec<(NetworkPolicy, Option<String>)>, KubeError> {
        let mut out = Vec::new();
        for logical in self.workload.namespaces.keys() {
            let api: Api<NetworkPolicy> = Api::namespaced(self.client.clone(), &self.map.real(logical)?);
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| request_error("listing networkpolicies", &e, &self.map))?;
            for p in list.items {
                let rv = p.metadata.resource_version.clone();
                out.push((from_cluster(&p, &self.map, &self.workload), rv));
            }
        }
        Ok(out)
    }

    /// The policies in force, as the agent sees them.
    pub async fn policies(&self) -> Result<Vec<NetworkPolicy>, KubeError> {
        Ok(self.listed().await?.into_iter().map(|(p, _)| p).collect())
    }

    /// Makes the cluster's policies `wanted`: creates, replaces (at the resourceVersion read)
    /// and deletes what differs. Err: the API server's refusal, as kubectl prints it.
    /// Waits `settle` after any change (the CNI plugin's turn), refused or not.
    pub async fn sync(&self, wanted: &[NetworkPolicy]) -> Result<(), String> {
        let mut changed = false;
        let result = self.sync_inner(wanted, &mut changed).await;
        if changed {
            tokio::time::sleep(self.options.settle).await;
        }
        result
    }

    async fn sync_inner(&self, wanted: &[NetworkPolicy], changed: &mut bool) -> Result<(), String> {
        let current = self.listed().await.map_err(|e| e.to_string())?;
        let pp = PostParams::default();
        for p in wanted {
            let ns = policy::namespace(p);
            if !self.workload.namespaces.contains_key(ns) {
                return Err(format!("Error from server (NotFound): namespaces \"{ns}\" not found"));
            }
            let mut object = to_cluster(p, &self.map, &self.workload).map_err(|e| e.to_string())?;
            let api: Api<NetworkPolicy> =
                Api::namespaced(self.client.clone(), &self.map.real(ns).map_err(|e| e.to_string())?);
            let existing = current
                .iter()
                .find(|(c, _)| policy::namespace(c) == ns && policy::name(c) == policy::name(p));
            let result = match existing {
                None => api.create(&pp, &object).await.map(|_| *changed = true),
                Some((c, _)) if c.spec == p.spec && c.metadata.labels == p.metadata.labels => Ok(()),
                Some((_, rv)) => {
                    *changed = true;
                    object.metadata.resource_version = rv.clone();
                    api.replace(policy::name(p), &pp, &object).await.map(|_| ())
                }
            };
            result.map_err(|e| match &e {
                kube::Error::Api(s) => status_text(s, &self.map),
                other => format!("error: {other}"),
            })?;
        }
        for (c, _) in &current {
            let ns = policy::namespace(c);
            if wanted.iter().any(|p| policy::namespace(p) == ns && policy::name(p) == policy::name(c)) {
                continue;
            }
            let api: Api<NetworkPolicy> =
                Api::namespaced(self.client.clone(), &self.map.real(ns).map_err(|e| e.to_string())?);
            api.delete(policy::name(c), &DeleteParams::default()).await.map_err(|e| match &e {
                kube::Error::Api(s) => status_text(s, &self.map),
                other => format!("error: {other}"),
            })?;
            *changed = true;
        }
        Ok(())
    }

    /// Probes every target from every other pod through the debug containers, all pods at
    /// once. SCTP targets are not probed (busybox's `nc` has no SCTP): their cells are `None`.
    pub async fn probe(&self, targets: &[Target]) -> Result<Matrix, KubeError> {
        let n = self.workload.pods.len();
        let runs = (0..n).map(|from| {
            let wanted: Vec<ProbeTarget> = targets
                .iter()
                .enumerate()
                .filter(|(_, t)| t.pod != from && t.protocol != Protocol::Sctp)
                .map(|(index, t)| ProbeTarget {
                    index,
                    ip: self.workload.pods[t.pod].ip,
                    port: t.port,
                    protocol: t.protocol,
                })
                .collect();
            async move {
                let result = self.probe_from(from, &wanted).await;
                (from, result)
            }
        });
        let mut allowed = vec![vec![None; targets.len()]; n];
        for (from, result) in join_all(runs).await {
            for (index, ok) in result? {
                allowed[from][index] = Some(ok);
            }
        }
        Ok(Matrix {
            pods: (0..n).map(|i| self.workload.display_name(i)).collect(),
            targets: targets.to_vec(),
            allowed,
        })
    }

    async fn probe_from(
        &self,
        from: usize,
        targets: &[ProbeTarget],
    ) -> Result<BTreeMap<usize, bool>, KubeError> {
        let pod = &self.workload.pods[from];
        let probe_err = |message: String| KubeError::Probe { pod: pod.name.clone(), message };
        if targets.is_empty() {
            return Ok(BTreeMap::new());
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.map.real(&pod.namespace)?);
        let script = probe_script(targets, self.options.probe_timeout);
        let ap = AttachParams::default().container(DEBUG_CONTAINER).stdin(false).stdout(true).stderr(false);
        let mut process = api
            .exec(&pod.name, ["sh", "-c", script.as_str()], &ap)
            .await
            .map_err(|e| probe_err(request_error("exec", &e, &self.map).to_string()))?;
        let mut output = String::new();
        if let Some(mut stdout) = process.stdout() {
            stdout
                .read_to_string(&mut output)
                .await
                .map_err(|e| probe_err(format!("reading the output: {e}")))?;
        }
        process.join().await.map_err(|e| probe_err(format!("exec: {e}")))?;
        let expected: Vec<usize> = targets.iter().map(|t| t.index).collect();
        parse_probe_output(&output, &expected).map_err(probe_err)
    }

    /// Deletes the namespaces (and with them everything deployed); waits for nothing.
    pub async fn teardown(&mut self) {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        for ns in self.created.drain(..) {
            if let Err(e) = namespaces.delete(&ns, &DeleteParams::background()).await {
                tracing::warn!(namespace = %ns, error = %e, "could not delete the namespace");
            }
        }
    }
}

impl Drop for KubeCluster {
    /// Best effort when the episode did not close: deletes the namespaces on the running tokio
    /// runtime (a drop cannot wait for the API server).
    fn drop(&mut self) {
        if self.created.is_empty() {
            return;
        }
        let created = std::mem::take(&mut self.created);
        let client = self.client.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let namespaces: Api<Namespace> = Api::all(client);
                for ns in created {
                    let _ = namespaces.delete(&ns, &DeleteParams::background()).await;
                }
            });
        } else {
            tracing::warn!(namespaces = ?created, "no tokio runtime to delete the namespaces on: delete them with kubectl");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boutique;

    fn map() -> NamespaceMap {
        NamespaceMap::with_nonce(4242, 0xabcdef01)
    }

    #[test]
    fn namespaces_map_both_ways_and_refuse_long_names() {
        let m = map();
        assert_eq!(m.real("default").expect("short"), "netdojo-4242-abcdef01-default");
        assert_eq!(m.logical("netdojo-4242-abcdef01-default"), Some("default"));
        assert_eq!(m.logical("kube-system"), None);
        assert_eq!(m.logical("netdojo-4242-abcdef02-default"), None, "another run's namespace");
        let long = "x".repeat(50);
        assert!(m.real(&long).expect_err("too long").to_string().contains("63 characters"));
        assert_eq!(
            m.unmap_text("networkpolicies.networking.k8s.io \"x\" is forbidden in namespace \"netdojo-4242-abcdef01-default\""),
            "networkpolicies.networking.k8s.io \"x\" is forbidden in namespace \"default\""
        );
    }

    #[test]
    fn the_objects_sent_for_the_boutique() {
        let m = map();
        let w = boutique::workload().expect("workload");
        let ns: Vec<Namespace> =
            w.namespaces.iter().map(|(n, l)| namespace_object(&m.real(n).expect("name"), l)).collect();
        insta::assert_json_snapshot!("namespaces", ns);
        let frontend = &w.pods[w.pod("default", "frontend").expect("frontend")];
        let load = &w.pods[w.pod("default", "loadgenerator").expect("loadgenerator")];
        insta::assert_json_snapshot!(
            "pods",
            [
                pod_object(frontend, "netdojo-4242-abcdef01-default", SERVER_IMAGE),
                pod_object(load, "netdojo-4242-abcdef01-default", SERVER_IMAGE)
            ]
        );
        insta::assert_json_snapshot!("debug_container_patch", debug_container_patch(DEBUG_IMAGE));
    }

    #[test]
    fn policies_go_to_the_driver_namespace_and_come_back_unchanged() {
        let m = map();
        let mut w = boutique::workload().expect("workload");
        w.add_namespace("other", BTreeMap::new());
        let yaml = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: x, namespace: default}\nspec:\n  podSelector: {matchLabels: {app: frontend}}\n  ingress:\n  - from:\n    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: other}}\n    - namespaceSelector:\n        matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [default, kube-system]}]\n  egress:\n  - to:\n    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}\n";
        let p = policy::parse_yaml(yaml, "test").expect("yaml").remove(0);
        let sent = to_cluster(&p, &m, &w).expect("mapped");
        insta::assert_json_snapshot!("policy_sent", sent);
        // What the server returns carries its own metadata; the agent sees none of it.
        let mut returned = sent.clone();
        returned.metadata.resource_version = Some("123".into());
        returned.metadata.uid = Some("u".into());
        returned.metadata.generation = Some(1);
        assert_eq!(from_cluster(&returned, &m, &w), p);
        for p in boutique::policies().expect("policies") {
            assert_eq!(
                from_cluster(&to_cluster(&p, &m, &w).expect("mapped"), &m, &w),
                p,
                "{}",
                policy::name(&p)
            );
        }
    }

    #[test]
    fn the_probe_script_and_its_output() {
        let targets = [
            ProbeTarget { index: 0, ip: Ipv4Addr::new(10, 244, 1, 5), port: 9555, protocol: Protocol::Tcp },
            ProbeTarget { index: 3, ip: Ipv4Addr::new(10, 244, 1, 7), port: 53, protocol: Protocol::Udp },
        ];
        insta::assert_snapshot!("probe_script", probe_script(&targets, Duration::from_millis(1500)));
        let got = parse_probe_output("3 no\n0 ok\n", &[0, 3]).expect("parsed");
        assert_eq!(got, BTreeMap::from([(0, true), (3, false)]));
        let e = parse_probe_output("0 ok\n", &[0, 3]).expect_err("missing");
        assert!(e.contains("no line for target 3"), "{e}");
        assert!(parse_probe_output("0 ok\n0 no\n3 ok\n", &[0, 3]).expect_err("twice").contains("twice"));
        assert!(parse_probe_output("0 ok\n7 ok\n3 ok\n", &[0, 3]).expect_err("extra").contains("not probed"));
        let e = parse_probe_output("sh: nc: not found\n", &[0]).expect_err("no nc");
        assert!(e.contains("unexpected line \"sh: nc: not found\""), "{e}");
    }

    fn status(body: &str) -> Status {
        serde_json::from_str(body).expect("a Status body")
    }

    #[test]
    fn api_errors_read_as_kubectl_prints_them() {
        let m = map();
        let not_found = status(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"networkpolicies.networking.k8s.io \"nope\" not found","reason":"NotFound","details":{"name":"nope","group":"networking.k8s.io","kind":"networkpolicies"},"code":404}"#,
        );
        assert_eq!(
            status_text(&not_found, &m),
            "Error from server (NotFound): networkpolicies.networking.k8s.io \"nope\" not found"
        );
        let conflict = status(
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Operation cannot be fulfilled on networkpolicies.networking.k8s.io \"adservice\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","code":409}"#,
        );
        assert!(
            status_text(&conflict, &m)
                .starts_with("Error from server (Conflict): Operation cannot be fulfilled")
        );
        let invalid = status(
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"NetworkPolicy.networking.k8s.io \"x\" is invalid: spec.ingress[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"","reason":"Invalid","details":{"name":"x","group":"networking.k8s.io","kind":"NetworkPolicy","causes":[{"reason":"FieldValueNotSupported","message":"Unsupported value: \"ICMP\"","field":"spec.ingress[0].ports[0].protocol"}]},"code":422}"#,
        );
        assert_eq!(
            status_text(&invalid, &m),
            "NetworkPolicy.networking.k8s.io \"x\" is invalid: spec.ingress[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\""
        );
        let forbidden = status(
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"networkpolicies.networking.k8s.io is forbidden: User \"dev\" cannot create resource \"networkpolicies\" in API group \"networking.k8s.io\" in the namespace \"netdojo-4242-abcdef01-default\"","reason":"Forbidden","code":403}"#,
        );
        assert_eq!(
            status_text(&forbidden, &m),
            "Error from server (Forbidden): networkpolicies.networking.k8s.io is forbidden: User \"dev\" cannot create resource \"networkpolicies\" in API group \"networking.k8s.io\" in the namespace \"default\""
        );
        // A Status without a reason still names one, from its code.
        let bare = status(r#"{"status":"Failure","message":"already there","code":409}"#);
        assert_eq!(status_text(&bare, &m), "Error from server (Conflict): already there");
        let e = request_error("creating namespace x", &kube::Error::Api(Box::new(forbidden)), &m);
        assert!(e.to_string().starts_with("creating namespace x: Error from server (Forbidden)"), "{e}");
    }

    #[tokio::test]
    async fn a_missing_or_unreachable_cluster_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("netdojo-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let missing = dir.join("nope");
        let Err(e) = connect(&KubeOptions { kubeconfig: Some(missing.clone()), ..Default::default() }).await
        else {
            panic!("connected without a kubeconfig file");
        };
        assert!(e.to_string().starts_with("no Kubernetes cluster reachable: kubeconfig"), "{e}");
        assert!(e.to_string().contains(&missing.display().to_string()), "{e}");
        // A cluster at a port nothing listens on (bound, then closed).
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let path = dir.join("config");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\nusers:\n- name: u\n  user: {{token: t}}\n"
            ),
        )
        .expect("write");
        let Err(e) = connect(&KubeOptions { kubeconfig: Some(path.clone()), ..Default::default() }).await
        else {
            panic!("connected to a port nothing listens on");
        };
        let text = e.to_string();
        assert!(text.contains(&format!("http://127.0.0.1:{port}/")) && text.contains("config"), "{text}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
