//! A server with a cluster of its own ([`super::ApiServer::bind_local_cluster`]): what the kube
//! driver needs to run whole episodes against the embedded server. Namespaces and pods are
//! created and deleted through the API; the pods run in the embedded cluster
//! ([`crate::cluster::Cluster`], the one way pods are made here: a network namespace per pod
//! on the pod bridge, the IP the server gave it, a listener per container port, the compiled
//! nftables rules); the `ephemeralcontainers` patch is recorded and reported running; and
//! `pods/exec` (feature `kube`) answers the kube driver's probe script with the embedded
//! cluster's probe from that pod, instead of running a shell (docs/k8s.md says why).
//!
//! The pod network is (re)built from every pod at once on the first read of pods after the
//! pods changed: a driver creates all its pods, then waits for them to run, so an episode
//! builds it once. A pod reads `Pending` (no IP) until then, `Running` with its IP after.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use axum::http::{Method, StatusCode};
use axum::response::Response;
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateWaiting, ContainerStatus,
    EphemeralContainer, Namespace, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::{
    Inner, Res, Shared, bad_request, items, namespace_not_found, not_found, object_response, status,
};
use crate::cluster::{Cluster, ProbeOptions};
use crate::model::{POD_SUBNET, pod_ports};

/// What a server with a cluster of its own keeps beside the workload.
#[derive(Debug, Default)]
pub(super) struct Owned {
    /// The created pods' containers and ephemeral containers, by namespace and name.
    pods: BTreeMap<(String, String), Record>,
    /// Bumped by every change of the namespaces or pods.
    generation: u64,
    /// The generation the running cluster was built from.
    built: Option<u64>,
}

#[derive(Debug, Clone)]
struct Record {
    containers: Vec<Container>,
    ephemeral: Vec<EphemeralContainer>,
}

impl Owned {
    fn current(&self) -> bool {
        self.built == Some(self.generation)
    }

    /// A pod as the server shows it: its own containers, `Pending` until the pod network is
    /// built with it, its ephemeral containers running.
    pub(super) fn render(&self, pod: &mut Pod, started: Timestamp) {
        let key = (
            pod.metadata.namespace.clone().unwrap_or_default(),
            pod.metadata.name.clone().unwrap_or_default(),
        );
        let Some(record) = self.pods.get(&key) else { return };
        let running = self.current();
        let state = |name: &str, image: Option<&String>| ContainerStatus {
            name: name.into(),
            ready: running,
            restart_count: 0,
            image: image.cloned().unwrap_or_default(),
            image_id: String::new(),
            started: Some(running),
            state: Some(if running {
                ContainerState {
                    running: Some(ContainerStateRunning { started_at: Some(Time(started)) }),
                    ..Default::default()
                }
            } else {
                ContainerState {
                    waiting: Some(ContainerStateWaiting {
                        reason: Some("ContainerCreating".into()),
                        message: None,
                    }),
                    ..Default::default()
                }
            }),
            ..Default::default()
        };
        if let Some(spec) = pod.spec.as_mut() {
            spec.containers = record.containers.clone();
            spec.ephemeral_containers = (!record.ephemeral.is_empty()).then(|| record.ephemeral.clone());
        }
        if let Some(s) = pod.status.as_mut() {
            s.container_statuses =
                Some(record.containers.iter().map(|c| state(&c.name, c.image.as_ref())).collect());
            s.ephemeral_container_statuses = (!record.ephemeral.is_empty())
                .then(|| record.ephemeral.iter().map(|c| state(&c.name, c.image.as_ref())).collect());
            if !running {
                s.phase = Some("Pending".into());
                s.pod_ip = None;
                s.pod_ips = None;
            }
        }
    }
}

fn already_exists(res: &Res, name: &str) -> Response {
    status(
        StatusCode::CONFLICT,
        "AlreadyExists",
        format!("{} \"{name}\" already exists", res.plural),
        Some(json!({"name": name, "kind": res.plural})),
    )
}

fn invalid(kind: &str, name: &str, field: &str, message: &str) -> Response {
    status(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        format!("{kind} \"{name}\" is invalid: {field}: {message}"),
        Some(
            json!({"name": name, "kind": kind, "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}]}),
        ),
    )
}

/// The object `name` of `res` as the server shows it.
fn shown(inner: &Inner, res: &Res, ns: Option<&str>, name: &str, code: StatusCode) -> Response {
    match items(inner, res, ns).into_iter().find(|i| i.name == name) {
        Some(i) => object_response(code, res, i, false),
        None => not_found(res, name),
    }
}

/// The request body as a `T`, or the 400 saying why not.
fn parse<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, Box<Response>> {
    serde_json::from_slice(body)
        .map_err(|e| Box::new(bad_request(format!("the request body is not a {what}: {e}"))))
}

/// Create and delete of namespaces and pods, and the `ephemeralcontainers` patch.
pub(super) fn change(
    inner: &mut Inner,
    res: &Res,
    method: &Method,
    ns: Option<&str>,
    name: Option<&str>,
    sub: Option<&str>,
    body: &[u8],
) -> Response {
    match (res.plural, method.as_str(), ns, name, sub) {
        ("namespaces", "POST", None, None, None) => {
            let n: Namespace = match parse(body, "Namespace") {
                Ok(n) => n,
                Err(r) => return *r,
            };
            let Some(name) = n.metadata.name.clone().filter(|n| !n.is_empty()) else {
                return invalid(
                    "Namespace",
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                );
            };
            if inner.workload.namespaces.contains_key(&name) {
                return already_exists(res, &name);
            }
            inner.workload.add_namespace(&name, n.metadata.labels.unwrap_or_default());
            bump(inner);
            shown(inner, res, None, &name, StatusCode::CREATED)
        }
        ("namespaces", "DELETE", None, Some(name), None) => {
            if !inner.workload.namespaces.contains_key(name) {
                return not_found(res, name);
            }
            let mut gone = items(inner, res, None).into_iter().find(|i| i.name == name).map(|i| i.object);
            if let Some(g) = gone.as_mut() {
                g["status"]["phase"] = json!("Terminating");
            }
            // Everything in it goes at once (a real namespace drains through Terminating).
            inner.workload.namespaces.remove(name);
            inner.workload.pods.retain(|p| p.namespace != name);
            let policies: Vec<String> =
                inner.store.list(Some(name)).iter().map(|p| crate::policy::name(p).to_string()).collect();
            for p in policies {
                if let Some(old) = inner.store.remove(name, &p) {
                    let _ = inner.events.send(("DELETED", old));
                }
            }
            if let Some(o) = inner.owned.as_mut() {
                o.pods.retain(|(n, _), _| n != name);
            }
            bump(inner);
            super::json_response(StatusCode::OK, &gone.unwrap_or(Value::Null))
        }
        ("pods", "POST", Some(ns), None, None) => {
            let pod: Pod = match parse(body, "Pod") {
                Ok(p) => p,
                Err(r) => return *r,
            };
            let Some(name) = pod.metadata.name.clone().filter(|n| !n.is_empty()) else {
                return invalid(
                    "Pod",
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                );
            };
            if !inner.workload.namespaces.contains_key(ns) {
                return namespace_not_found(ns);
            }
            if inner.workload.pod(ns, &name).is_some() {
                return already_exists(res, &name);
            }
            let ports = match pod_ports(&pod) {
                Ok(p) => p,
                Err(e) => {
                    let (field, message) = e.split_once(": ").unwrap_or(("spec.containers", e.as_str()));
                    return invalid("Pod", &name, field, message);
                }
            };
            let containers = pod.spec.map(|s| s.containers).unwrap_or_default();
            if containers.is_empty() {
                return invalid("Pod", &name, "spec.containers", "Required value");
            }
            let Some(ip) = free_ip(inner) else {
                return status(
                    StatusCode::FORBIDDEN,
                    "Forbidden",
                    format!(
                        "pods \"{name}\" is forbidden: the pod subnet {}/{} is full",
                        POD_SUBNET.0, POD_SUBNET.1
                    ),
                    None,
                );
            };
            if let Err(e) = inner.workload.add_pod(ns, &name, pod.metadata.labels.unwrap_or_default(), ports)
            {
                return bad_request(e.to_string());
            }
            if let Some(p) = inner.workload.pods.last_mut() {
                p.ip = ip;
            }
            if let Some(o) = inner.owned.as_mut() {
                o.pods.insert((ns.to_string(), name.clone()), Record { containers, ephemeral: Vec::new() });
            }
            bump(inner);
            shown(inner, res, Some(ns), &name, StatusCode::CREATED)
        }
        ("pods", "DELETE", Some(ns), Some(name), None) => {
            let Some(i) = inner.workload.pod(ns, name) else { return not_found(res, name) };
            let gone = items(inner, res, Some(ns)).into_iter().find(|it| it.name == name).map(|it| it.object);
            inner.workload.pods.remove(i);
            if let Some(o) = inner.owned.as_mut() {
                o.pods.remove(&(ns.to_string(), name.to_string()));
            }
            bump(inner);
            super::json_response(StatusCode::OK, &gone.unwrap_or(Value::Null))
        }
        ("pods", "PATCH", Some(ns), Some(name), Some("ephemeralcontainers")) => {
            if inner.workload.pod(ns, name).is_none() {
                return not_found(res, name);
            }
            let patch: Value = match parse(body, "patch") {
                Ok(v) => v,
                Err(r) => return *r,
            };
            // A strategic-merge or merge patch of `spec.ephemeralContainers`, as `kubectl
            // debug` and kube-rs's `patch_ephemeral_containers` send it.
            let Some(list) = patch.pointer("/spec/ephemeralContainers").and_then(Value::as_array) else {
                return bad_request(
                    "netdojo's API server accepts an ephemeralcontainers patch of spec.ephemeralContainers only",
                );
            };
            let mut added = Vec::new();
            for (i, c) in list.iter().enumerate() {
                match serde_json::from_value::<EphemeralContainer>(c.clone()) {
                    Ok(c) if !c.name.is_empty() => added.push(c),
                    Ok(_) => {
                        return invalid(
                            "Pod",
                            name,
                            &format!("spec.ephemeralContainers[{i}].name"),
                            "Required value",
                        );
                    }
                    Err(e) => return bad_request(format!("spec.ephemeralContainers[{i}]: {e}")),
                }
            }
            let Some(record) =
                inner.owned.as_mut().and_then(|o| o.pods.get_mut(&(ns.to_string(), name.to_string())))
            else {
                return not_found(res, name);
            };
            for c in added {
                // Ephemeral containers cannot be changed or removed once added (the API
                // server refuses that); adding one of the same name again changes nothing.
                if !record.ephemeral.iter().any(|e| e.name == c.name) {
                    record.ephemeral.push(c);
                }
            }
            inner.version += 1;
            shown(inner, res, Some(ns), name, StatusCode::OK)
        }
        (_, _, _, _, Some(sub)) => status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!(
                "the server could not find the requested resource: netdojo's API server serves no subresource ({}/{sub}) but pods/ephemeralcontainers and pods/exec",
                res.plural
            ),
            None,
        ),
        _ => super::method_not_allowed(&format!("{method} of {} is not served", res.plural)),
    }
}

/// The first address of the pod subnet no pod has (from .2: .1 is the gateway's).
fn free_ip(inner: &Inner) -> Option<Ipv4Addr> {
    (2..255u32)
        .map(|n| Ipv4Addr::from(u32::from(POD_SUBNET.0) + n))
        .find(|ip| inner.workload.pods.iter().all(|p| p.ip != *ip))
}

fn bump(inner: &mut Inner) {
    inner.version += 1;
    if let Some(o) = inner.owned.as_mut() {
        o.generation += 1;
    }
}

/// Brings the embedded cluster in line with the server's objects: the policies applied to it
/// (only the pods whose rules changed are rewritten), or, when the pods changed, the old pod
/// network torn down and (`build`) a new one built from every pod.
pub(super) async fn sync(shared: &Shared, build: bool) -> Result<(), String> {
    let mut cluster = shared.cluster.write().await;
    let (workload, policies, current, generation) = {
        let inner = shared.lock();
        let Some(o) = &inner.owned else { return Ok(()) };
        (inner.workload.clone(), inner.store.policies(), o.current(), o.generation)
    };
    if current {
        if let Some(c) = cluster.as_mut() {
            c.apply(&policies).await.map_err(|e| e.to_string())?;
        }
        return Ok(());
    }
    if let Some(mut old) = cluster.take() {
        old.teardown();
    }
    if !build && !workload.pods.is_empty() {
        return Ok(());
    }
    if !workload.pods.is_empty() {
        let c =
            Cluster::start(workload, &policies, ProbeOptions::default()).await.map_err(|e| e.to_string())?;
        *cluster = Some(c);
    }
    if let Some(o) = shared.lock().owned.as_mut() {
        o.built = Some(generation);
    }
    // Policies changed while it was built: the next change's sync applies them (it waits for
    // this one), and this sync applied the ones it read.
    Ok(())
}

#[cfg(feature = "kube")]
pub(super) use exec::exec;

#[cfg(feature = "kube")]
mod exec {
    //! `pods/exec` over WebSocket, as kube-rs's `ws` feature speaks it: the subprotocols
    //! `v5.channel.k8s.io` and `v4.channel.k8s.io`, binary frames whose first byte is the
    //! channel (1 stdout, 2 stderr, 3 the error channel, which ends the stream with a `Status`).
    //! No command runs: the one command answered is the kube driver's probe script, parsed and
    //! checked to be exactly what [`probe_script`] writes, answered with the embedded cluster's
    //! probe from that pod, in the script's output format.

    use std::net::SocketAddrV4;
    use std::time::Duration;

    use axum::body::Body;
    use axum::extract::Request;
    use axum::http::{HeaderValue, StatusCode, header};
    use axum::response::Response;
    use futures::SinkExt;
    use hyper_util::rt::TokioIo;
    use serde_json::json;
    use tokio_tungstenite::WebSocketStream;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
    use tokio_tungstenite::tungstenite::protocol::Role;

    use super::super::{Shared, bad_request, decode, not_found, status};
    use super::sync;
    use crate::kube_driver::{ProbeTarget, probe_script};
    use crate::model::Protocol;

    const STDOUT: u8 = 1;
    const ERROR: u8 = 3;
    /// The most targets one script may name (the Online Boutique has 11 per source pod).
    const MAX_TARGETS: usize = 4096;

    /// The targets of a script that is exactly what [`probe_script`] writes for them, else `None`.
    pub(crate) fn parse_probe_script(script: &str) -> Option<Vec<ProbeTarget>> {
        let mut lines = script.lines();
        let first = lines.next()?;
        let secs: u64 =
            first.split("nc -z -w ").nth(1)?.split(' ').next()?.parse().ok().filter(|s| *s <= 60)?;
        let mut targets = Vec::new();
        for line in lines {
            if line == "wait" {
                break;
            }
            let words: Vec<&str> = line.split(' ').collect();
            let ["t", ip, port, proto, index, "&"] = words.as_slice() else { return None };
            let protocol = match *proto {
                "tcp" => Protocol::Tcp,
                "udp" => Protocol::Udp,
                _ => return None,
            };
            targets.push(ProbeTarget {
                index: index.parse().ok()?,
                ip: ip.parse().ok()?,
                port: port.parse().ok()?,
                protocol,
            });
            if targets.len() > MAX_TARGETS {
                return None;
            }
        }
        (probe_script(&targets, Duration::from_secs(secs)) == script).then_some(targets)
    }

    fn res(plural: &str) -> &'static super::super::Res {
        // Both are in RESOURCES: the table is the server's own.
        super::super::RESOURCES
            .iter()
            .find(|r| r.group.is_empty() && r.plural == plural)
            .unwrap_or(&super::super::RESOURCES[0])
    }

    fn refuse(message: impl Into<String>) -> Response {
        status(StatusCode::BAD_REQUEST, "BadRequest", message, None)
    }

    pub(crate) async fn exec(shared: &Shared, ns: &str, pod: &str, mut req: Request) -> Response {
        let pods = res("pods");
        let mut command = Vec::new();
        let mut container = None;
        let mut flags = Vec::new();
        for kv in req.uri().query().unwrap_or("").split('&').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            match decode(k).as_str() {
                "command" => command.push(decode(v)),
                "container" => container = Some(decode(v)),
                k @ ("stdin" | "tty") if decode(v) == "true" => flags.push(k.to_string()),
                _ => {}
            }
        }
        {
            let inner = shared.lock();
            let Some(owned) = &inner.owned else {
                return status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    "the server could not find the requested resource: netdojo's API server serves no subresource (pods/exec)",
                    None,
                );
            };
            let Some(record) = owned.pods.get(&(ns.to_string(), pod.to_string())) else {
                return not_found(pods, pod);
            };
            let names: Vec<&str> = record
                .containers
                .iter()
                .map(|c| c.name.as_str())
                .chain(record.ephemeral.iter().map(|c| c.name.as_str()))
                .collect();
            let container = container.as_deref().unwrap_or(names.first().copied().unwrap_or_default());
            if !names.contains(&container) {
                return refuse(format!("container {container} is not valid for pod {pod}"));
            }
        }
        if !flags.is_empty() {
            return refuse(format!("netdojo's API server's exec has no {}", flags.join(" or ")));
        }
        let targets = match command.as_slice() {
            [sh, c, script] if sh == "sh" && c == "-c" => parse_probe_script(script),
            _ => None,
        };
        let Some(targets) = targets else {
            return refuse(
                "netdojo's API server runs no commands: pods/exec answers only the kube driver's probe script (`sh -c` with kube_driver::probe_script's text), from the embedded cluster's probe (docs/k8s.md)",
            );
        };
        let headers = req.headers();
        let upgrade = headers
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
        let key = headers.get(header::SEC_WEBSOCKET_KEY).map(|k| derive_accept_key(k.as_bytes()));
        let offered: Vec<String> = headers
            .get_all(header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(',').map(|p| p.trim().to_string()))
            .collect();
        let Some(protocol) =
            ["v5.channel.k8s.io", "v4.channel.k8s.io"].into_iter().find(|p| offered.iter().any(|o| o == p))
        else {
            return refuse(
                "exec needs a WebSocket upgrade with the subprotocol v5.channel.k8s.io or v4.channel.k8s.io",
            );
        };
        let (true, Some(accept)) = (upgrade, key) else {
            return refuse("exec needs a WebSocket upgrade (Upgrade: websocket, Sec-WebSocket-Key)");
        };
        // The pods run before anything is probed from one.
        if let Err(e) = sync(shared, true).await {
            return status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", e, None);
        }
        let on_upgrade = hyper::upgrade::on(&mut req);
        let shared = shared.clone();
        let (ns, pod) = (ns.to_string(), pod.to_string());
        tokio::spawn(async move {
            let Ok(upgraded) = on_upgrade.await else { return };
            let mut ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
            let (output, outcome) = match probe(&shared, &ns, &pod, &targets).await {
                Ok(out) => (out, json!({"metadata": {}, "status": "Success"})),
                Err(e) => (
                    String::new(),
                    json!({"metadata": {}, "status": "Failure", "message": e, "reason": "InternalError", "code": 500}),
                ),
            };
            let frame = |channel: u8, bytes: &[u8]| {
                let mut v = Vec::with_capacity(bytes.len() + 1);
                v.push(channel);
                v.extend_from_slice(bytes);
                Message::binary(v)
            };
            if !output.is_empty() {
                let _ = ws.send(frame(STDOUT, output.as_bytes())).await;
            }
            let _ = ws.send(frame(ERROR, &serde_json::to_vec(&outcome).unwrap_or_default())).await;
            let _ = ws.close(None).await;
        });
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let h = r.headers_mut();
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(protocol));
        match HeaderValue::from_str(&accept) {
            Ok(v) => {
                h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
                r
            }
            Err(_) => bad_request("Sec-WebSocket-Key"),
        }
    }

    /// The embedded cluster's probe from `ns/pod`, as the probe script prints it.
    async fn probe(shared: &Shared, ns: &str, pod: &str, targets: &[ProbeTarget]) -> Result<String, String> {
        let cluster = shared.cluster.read().await;
        let c = cluster.as_ref().ok_or("the pod network is not running")?;
        let from = c.workload().pod(ns, pod).ok_or_else(|| format!("pod {ns}/{pod} is not running"))?;
        let addrs: Vec<(SocketAddrV4, Protocol)> =
            targets.iter().map(|t| (SocketAddrV4::new(t.ip, t.port), t.protocol)).collect();
        let got = c.probe_from(from, &addrs).await.map_err(|e| e.to_string())?;
        Ok(targets
            .iter()
            .zip(got)
            .map(|(t, ok)| format!("{} {}\n", t.index, if ok { "ok" } else { "no" }))
            .collect())
    }

    #[cfg(test)]
    mod tests {
        use std::net::Ipv4Addr;

        use super::*;

        #[test]
        fn only_the_drivers_probe_script_is_answered() {
            let targets = vec![
                ProbeTarget {
                    index: 0,
                    ip: Ipv4Addr::new(10, 244, 0, 5),
                    port: 9555,
                    protocol: Protocol::Tcp,
                },
                ProbeTarget { index: 3, ip: Ipv4Addr::new(10, 244, 0, 7), port: 53, protocol: Protocol::Udp },
            ];
            let script = probe_script(&targets, Duration::from_secs(1));
            assert_eq!(parse_probe_script(&script), Some(targets.clone()));
            assert_eq!(parse_probe_script(&probe_script(&[], Duration::from_secs(2))), Some(vec![]));
            // Anything else is refused: another command, an appended one, a changed function.
            for bad in [
                "id".to_string(),
                format!("{script}rm -rf /\n"),
                script.replace("wait\n", "wait; reboot\n"),
                script.replace("nc -z", "nc -e /bin/sh -z"),
                script.replace("t 10.244.0.5 9555 tcp 0 &", "t 10.244.0.5 9555 tcp 0; id &"),
                script.replace("9555", "$(id)"),
                script.replace("-w 1", "-w 100000"),
            ] {
                assert_eq!(parse_probe_script(&bad), None, "{bad}");
            }
        }
    }
}
