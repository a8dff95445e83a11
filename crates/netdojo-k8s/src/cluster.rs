//! The embedded cluster: each pod a network namespace with its IP on one bridge (a one-node
//! cluster's pod network, built by netdojo-linux's [`Network`]), a real TCP listener and a
//! real UDP echo on each of its container ports, and the policies enforced by nftables rules
//! in each pod's namespace (see [`crate::compile`]).
//!
//! Applying a policy set compiles every pod's rules and replaces, with one `nft -f` transaction
//! per pod, the tables that changed. The prober opens real connections from inside each source
//! pod (a TCP connect; a UDP request that the listener answers) to every target, all at once.

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use netdojo_linux::network::Network;
use netdojo_linux::topology::Topology;
use netdojo_linux::{conntrack, netns};
use socket2::{Domain, Socket, Type};
use tokio::task::JoinHandle;

use crate::K8sError;
use crate::compile::{self, PodRules};
use crate::engine::{Matrix, Target};
use crate::model::{POD_SUBNET, Protocol, Workload};

/// What the UDP listeners answer and the prober expects back.
const UDP_PROBE: &[u8] = b"netdojo-probe";

/// The bridge of the pod network (named after the bridge CNI plugin's default).
const BRIDGE: &str = "cni0";

/// How long a probe waits. Denied traffic is rejected at once, so only a broken network waits
/// this long.
#[derive(Debug, Clone, Copy)]
pub struct ProbeOptions {
    pub timeout: Duration,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        Self { timeout: Duration::from_secs(1) }
    }
}

/// What one apply did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// Pods whose table was replaced (the others' rules did not change).
    pub pods_updated: usize,
    pub took: Duration,
}

/// A running embedded cluster. Dropping it stops the listeners and deletes the namespaces.
#[derive(Debug)]
pub struct Cluster {
    workload: Workload,
    /// The namespace of each pod, by pod index.
    pod_ns: Vec<String>,
    /// The rules in force in each pod.
    rules: Vec<PodRules>,
    listeners: Vec<JoinHandle<()>>,
    options: ProbeOptions,
    // Declared last: dropped after the listeners are aborted.
    net: Network,
}

fn cluster_err(what: impl std::fmt::Display) -> K8sError {
    K8sError::Cluster(what.to_string())
}

/// The pod network as a topology: pod `i` is node `pI`, with `eth0` on bridge port `vethI`.
fn topology(workload: &Workload) -> Result<Topology, K8sError> {
    let mut nodes = format!("    {BRIDGE}: {{ kind: bridge }}\n");
    let mut links = String::new();
    for (i, pod) in workload.pods.iter().enumerate() {
        nodes.push_str(&format!(
            "    p{i}: {{ kind: host, interfaces: {{ eth0: {}/{} }} }}\n",
            pod.ip, POD_SUBNET.1
        ));
        links.push_str(&format!("    - endpoints: [\"p{i}:eth0\", \"{BRIDGE}:veth{i}\"]\n"));
    }
    let text = format!("name: k8s-pods\ntopology:\n  nodes:\n{nodes}  links:\n{links}");
    Topology::from_str_named(&text, "embedded cluster").map_err(cluster_err)
}

impl Cluster {
    /// Builds the pod network, starts the listeners and applies `policies`.
    pub async fn start(
        workload: Workload,
        policies: &[NetworkPolicy],
        options: ProbeOptions,
    ) -> Result<Self, K8sError> {
        let (net, _) = Network::build(topology(&workload)?).await.map_err(cluster_err)?;
        let pod_ns = (0..workload.pods.len())
            .map(|i| {
                net.ns_name(&format!("p{i}"))
                    .map(str::to_string)
                    .ok_or_else(|| cluster_err(format!("pod p{i} has no namespace")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut cluster = Self {
            rules: vec![PodRules::default(); workload.pods.len()],
            workload,
            pod_ns,
            listeners: Vec::new(),
            options,
            net,
        };
        cluster.start_listeners()?;
        cluster.apply(policies).await?;
        Ok(cluster)
    }

    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// The namespace of pod `i` (for an operator's `ip netns exec`).
    pub fn pod_namespace(&self, i: usize) -> Option<&str> {
        self.pod_ns.get(i).map(String::as_str)
    }

    /// The rules in force in pod `i`.
    pub fn rules(&self, i: usize) -> Option<&PodRules> {
        self.rules.get(i)
    }

    fn start_listeners(&mut self) -> Result<(), K8sError> {
        for (i, pod) in self.workload.pods.iter().enumerate() {
            let ports = pod.ports.clone();
            let name = pod.name.clone();
            // Bound on a thread inside the pod's namespace: the sockets belong to it for good.
            let sockets = netns::in_netns(&self.pod_ns[i], move || {
                ports
                    .iter()
                    .filter(|p| p.protocol != Protocol::Sctp)
                    .map(|p| {
                        let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, p.port));
                        let s = match p.protocol {
                            Protocol::Udp => Socket::new(Domain::IPV4, Type::DGRAM, None),
                            _ => Socket::new(Domain::IPV4, Type::STREAM, None),
                        }?;
                        s.set_reuse_address(true)?;
                        s.set_nonblocking(true)?;
                        s.bind(&addr.into())?;
                        if p.protocol == Protocol::Tcp {
                            s.listen(128)?;
                        }
                        Ok((p.protocol, s))
                    })
                    .collect::<std::io::Result<Vec<_>>>()
            })
            .map_err(cluster_err)?
            .map_err(|e| cluster_err(format!("pod {name}: listening: {e}")))?;
            for (protocol, socket) in sockets {
                let task = match protocol {
                    Protocol::Tcp => {
                        let listener = tokio::net::TcpListener::from_std(socket.into())
                            .map_err(|e| cluster_err(format!("pod {name}: {e}")))?;
                        tokio::spawn(async move {
                            // Accepting is the answer: the prober only needs the handshake.
                            while let Ok((conn, _)) = listener.accept().await {
                                drop(conn);
                            }
                        })
                    }
                    _ => {
                        let udp = tokio::net::UdpSocket::from_std(socket.into())
                            .map_err(|e| cluster_err(format!("pod {name}: {e}")))?;
                        tokio::spawn(async move {
                            let mut buf = [0u8; 64];
                            while let Ok((n, from)) = udp.recv_from(&mut buf).await {
                                if buf[..n] == *UDP_PROBE {
                                    let _ = udp.send_to(&buf[..n], from).await;
                                }
                            }
                        })
                    }
                };
                self.listeners.push(task);
            }
        }
        Ok(())
    }

    /// Compiles `policies` and replaces the tables of the pods whose rules changed, each in one
    /// `nft -f` transaction, all pods at once, then flushes those pods' connection tracking, so
    /// that what the new rules deny is denied to every later connection.
    pub async fn apply(&mut self, policies: &[NetworkPolicy]) -> Result<Applied, K8sError> {
        self.apply_with(policies, false).await
    }

    /// As [`Cluster::apply`], rewriting every pod's table even where nothing changed.
    pub async fn apply_all(&mut self, policies: &[NetworkPolicy]) -> Result<Applied, K8sError> {
        self.apply_with(policies, true).await
    }

    async fn apply_with(&mut self, policies: &[NetworkPolicy], all: bool) -> Result<Applied, K8sError> {
        let start = Instant::now();
        let compiled = compile::compile(policies, &self.workload);
        let mut jobs = Vec::new();
        for (i, rules) in compiled.iter().enumerate() {
            if !all && *rules == self.rules[i] {
                continue;
            }
            let ns = self.pod_ns[i].clone();
            let script = rules.nft_script();
            let pod = self.workload.pods[i].name.clone();
            jobs.push(tokio::task::spawn_blocking(move || {
                nft(&ns, &script).map_err(|e| cluster_err(format!("pod {pod}: {e}")))?;
                // Connections the old rules admitted would otherwise stay admitted (the rules
                // accept `ct state established` first) until their entries expire.
                conntrack::flush(&ns).map_err(|e| cluster_err(format!("pod {pod}: {e}")))
            }));
        }
        let pods_updated = jobs.len();
        let mut first_err = None;
        for job in join_all(jobs).await {
            match job {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(e) => {
                    first_err.get_or_insert(cluster_err(format!("nft task: {e}")));
                }
            }
        }
        if let Some(e) = first_err {
            // What is in force is unknown now: force a full rewrite next time.
            self.rules =
                vec![PodRules { ingress: Some(Vec::new()), egress: Some(Vec::new()) }; self.rules.len()];
            return Err(e);
        }
        self.rules = compiled;
        Ok(Applied { pods_updated, took: start.elapsed() })
    }

    /// Probes every target from every other pod with real connections, all at once.
    /// SCTP targets are not probed (no SCTP in this kernel): their cells are `None`.
    pub async fn probe(&self, targets: &[Target]) -> Result<Matrix, K8sError> {
        let n = self.workload.pods.len();
        let runs = (0..n).map(|from| {
            let wanted: Vec<(usize, SocketAddrV4, Protocol)> = targets
                .iter()
                .enumerate()
                .filter(|(_, t)| t.pod != from && t.protocol != Protocol::Sctp)
                .map(|(j, t)| (j, SocketAddrV4::new(self.workload.pods[t.pod].ip, t.port), t.protocol))
                .collect();
            async move {
                let addrs: Vec<(SocketAddrV4, Protocol)> = wanted.iter().map(|(_, a, p)| (*a, *p)).collect();
                let got = self.probe_from(from, &addrs).await;
                (from, wanted, got)
            }
        });
        let mut allowed = vec![vec![None; targets.len()]; n];
        for (from, wanted, got) in join_all(runs).await {
            for ((j, _, _), ok) in wanted.into_iter().zip(got?) {
                allowed[from][j] = Some(ok);
            }
        }
        Ok(Matrix {
            pods: (0..n).map(|i| self.workload.display_name(i)).collect(),
            targets: targets.to_vec(),
            allowed,
        })
    }

    /// Probes `addrs` from pod `from` with real connections, all at once: a TCP connect, or a
    /// UDP request the listener answers. (The embedded API server's `pods/exec` answers the
    /// kube driver's probe script with it.)
    pub async fn probe_from(
        &self,
        from: usize,
        addrs: &[(SocketAddrV4, Protocol)],
    ) -> Result<Vec<bool>, K8sError> {
        let ns = self.pod_ns.get(from).ok_or_else(|| cluster_err(format!("no pod {from}")))?.clone();
        let kinds: Vec<Protocol> = addrs.iter().map(|(_, p)| *p).collect();
        // Sockets are made inside the source pod's namespace, then driven from here.
        let sockets = tokio::task::spawn_blocking(move || {
            netns::in_netns(&ns, move || {
                kinds
                    .iter()
                    .map(|p| {
                        let ty = if *p == Protocol::Udp { Type::DGRAM } else { Type::STREAM };
                        let s = Socket::new(Domain::IPV4, ty, None)?;
                        s.set_nonblocking(true)?;
                        Ok(s)
                    })
                    .collect::<std::io::Result<Vec<Socket>>>()
            })
        })
        .await
        .map_err(|e| cluster_err(format!("probe task: {e}")))?
        .map_err(cluster_err)?
        .map_err(|e| cluster_err(format!("probe sockets: {e}")))?;
        let timeout = self.options.timeout;
        let probes = addrs
            .iter()
            .zip(sockets)
            .map(|((addr, protocol), socket)| probe_one(socket, *protocol, *addr, timeout));
        Ok(join_all(probes).await)
    }

    /// Stops the listeners and deletes every namespace now (also done on drop).
    pub fn teardown(&mut self) {
        for l in self.listeners.drain(..) {
            l.abort();
        }
        self.net.teardown();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for l in self.listeners.drain(..) {
            l.abort();
        }
    }
}

async fn probe_one(socket: Socket, protocol: Protocol, addr: SocketAddrV4, timeout: Duration) -> bool {
    match protocol {
        Protocol::Udp => {
            let Ok(udp) = tokio::net::UdpSocket::from_std(socket.into()) else { return false };
            let exchange = async {
                udp.connect(addr).await?;
                udp.send(UDP_PROBE).await?;
                let mut buf = [0u8; 64];
                let n = udp.recv(&mut buf).await?;
                Ok::<bool, std::io::Error>(buf[..n] == *UDP_PROBE)
            };
            matches!(tokio::time::timeout(timeout, exchange).await, Ok(Ok(true)))
        }
        _ => {
            let stream: std::net::TcpStream = socket.into();
            let tcp = tokio::net::TcpSocket::from_std_stream(stream);
            matches!(tokio::time::timeout(timeout, tcp.connect(addr.into())).await, Ok(Ok(_)))
        }
    }
}

/// Runs `nft -f -` with `script` inside namespace `ns`. The child is forked from a thread that
/// has entered the namespace, so it runs there (namespaces are inherited from the forking
/// thread), without `ip netns exec`.
fn nft(ns: &str, script: &str) -> Result<(), String> {
    let script = script.to_string();
    netns::in_netns(ns, move || {
        let mut child = Command::new("nft")
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("nft: {e} (is nftables installed?)"))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(script.as_bytes()).map_err(|e| format!("nft stdin: {e}"))?;
        }
        let out = child.wait_with_output().map_err(|e| format!("nft: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("nft -f failed: {}\n{script}", String::from_utf8_lossy(&out.stderr).trim()))
        }
    })
    .map_err(|e| e.to_string())?
}
