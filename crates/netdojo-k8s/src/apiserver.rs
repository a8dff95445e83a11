//! An embedded Kubernetes API server over the cluster's policy [`Store`], so that the real
//! kubectl (and kube-rs) talk to the embedded cluster as to any cluster.
//!
//! It serves, on a loopback address, with one bearer token per server (per episode):
//! discovery (`/version`, `/api`, `/apis`, their per-version lists, and the aggregated discovery
//! documents `apidiscovery.k8s.io/v2` that kubectl asks for first), OpenAPI v2 and v3 documents
//! for the served kinds (schemas from k8s-openapi's `schemars` impls), `v1` namespaces, pods and
//! services (get, list; services: the embedded cluster has none) and events (an empty list, for
//! `describe`), and `networking.k8s.io/v1` networkpolicies (get, list, create, update, delete,
//! patch in JSON-patch, merge-patch and strategic-merge-patch, `dryRun=All`, `fieldValidation`),
//! answering `meta.k8s.io/v1` Tables when asked (kubectl's `get` prints them). Refusals are
//! `Status` objects with the API server's reasons, codes and wording; an update or patch naming a
//! stale `resourceVersion` is a 409 Conflict. Everything else is a 404 (unknown resource) or a
//! 405 (a verb not served) whose Status says so.
//!
//! Every accepted change is made to the [`Store`] the Rust kubectl subset uses, validated by
//! [`policy::validate`]; the environment then enforces the store's policies as it does after
//! the subset's commands (compiled nftables rules).
//!
//! A server with a cluster of its own ([`ApiServer::bind_local_cluster`], module `owned`) is
//! the kube driver's target: namespaces and pods are created and deleted through the API and
//! run by the embedded cluster, the `ephemeralcontainers` patch is accepted, and `pods/exec`
//! (feature `kube`) answers the driver's probe script, and only it, with the cluster's probe.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStatus, Namespace, NamespaceSpec, NamespaceStatus, Pod,
    PodIP, Service,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::schemars::generate::{SchemaGenerator, SchemaSettings};
use rand::Rng;
use serde_json::{Value, json};

use crate::K8sError;
use crate::kubectl::{self, Store};
use crate::model::Workload;
use crate::policy;

mod owned;

/// The Kubernetes version the server says it is (the API it serves is v1.37's, k8s-openapi's
/// `latest`).
pub const VERSION: (&str, &str) = ("1", "37");

/// The largest request body accepted (as the Rust subset's manifests).
const MAX_BODY: usize = kubectl::MAX_INPUT;

const NP_GROUP: &str = "networking.k8s.io";

/// One served resource.
struct Res {
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    verbs: &'static [&'static str],
    short: &'static [&'static str],
    categories: &'static [&'static str],
    schema: &'static str,
}

const READ: &[&str] = &["get", "list", "watch"];
const RESOURCES: &[Res] = &[
    Res {
        group: "",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        verbs: READ,
        short: &["ns"],
        categories: &[],
        schema: "io.k8s.api.core.v1.Namespace",
    },
    Res {
        group: "",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        verbs: READ,
        short: &["po"],
        categories: &["all"],
        schema: "io.k8s.api.core.v1.Pod",
    },
    Res {
        group: "",
        plural: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        verbs: READ,
        short: &["svc"],
        categories: &["all"],
        schema: "io.k8s.api.core.v1.Service",
    },
    Res {
        group: "",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        verbs: &["list"],
        short: &["ev"],
        categories: &[],
        schema: "io.k8s.api.core.v1.Event",
    },
    Res {
        group: NP_GROUP,
        plural: "networkpolicies",
        singular: "networkpolicy",
        kind: "NetworkPolicy",
        namespaced: true,
        verbs: &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        short: &["netpol"],
        categories: &[],
        schema: "io.k8s.api.networking.v1.NetworkPolicy",
    },
];

fn api_version(group: &str) -> String {
    if group.is_empty() { "v1".into() } else { format!("{group}/v1") }
}

/// The objects behind the server: the policy store (the one the environment enforces), the
/// read-only workload, and the resourceVersion counter.
#[derive(Debug)]
struct Inner {
    store: Store,
    workload: Workload,
    /// The latest resourceVersion given out.
    version: u64,
    /// How many changes were accepted (the environment probes after a command that made one).
    changes: u64,
    /// When the objects were made (their creationTimestamp; AGE in kubectl's tables).
    started: Timestamp,
    /// Every accepted change, for the watches: ADDED, MODIFIED or DELETED and the object.
    events: tokio::sync::broadcast::Sender<(&'static str, NetworkPolicy)>,
    /// A server with a cluster of its own ([`ApiServer::bind_local_cluster`]): namespaces and
    /// pods are created and deleted through the API; `None`: the workload is fixed.
    owned: Option<owned::Owned>,
}

#[derive(Clone)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    token: Arc<str>,
    addr: SocketAddr,
    /// The embedded cluster behind a server with a cluster of its own (its pods' namespaces,
    /// listeners and rules); probes read it while a rebuild or an apply writes it.
    cluster: Arc<tokio::sync::RwLock<Option<crate::cluster::Cluster>>>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running API server. Dropping it stops it.
#[derive(Debug)]
pub struct ApiServer {
    inner: Arc<Mutex<Inner>>,
    token: String,
    addr: SocketAddr,
    /// The server's self-signed certificate (PEM), the kubeconfig's certificate authority.
    certificate: String,
    task: tokio::task::JoinHandle<()>,
    cluster: Arc<tokio::sync::RwLock<Option<crate::cluster::Cluster>>>,
}

/// TLS on a TCP listener, for axum. client-go sends a bearer token only over TLS
/// (kubernetes/kubectl#744), so the server has a certificate of its own, made at start.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                // Out of descriptors, say: wait instead of spinning.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                continue;
            };
            // A client that never finishes its handshake must not hold the others up for long.
            match tokio::time::timeout(std::time::Duration::from_secs(5), self.acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => return (tls, addr),
                _ => continue,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// A self-signed certificate for 127.0.0.1 and localhost, and the TLS acceptor serving it.
fn tls() -> Result<(String, tokio_rustls::TlsAcceptor), K8sError> {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .map_err(|e| server_err(format!("certificate: {e}")))?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(made.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| server_err(format!("TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(vec![made.cert.der().clone()], key)
        .map_err(|e| server_err(format!("TLS: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((made.cert.pem(), tokio_rustls::TlsAcceptor::from(Arc::new(config))))
}

/// Standard base64 (the kubeconfig's `certificate-authority-data`).
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.task.abort();
        // The pods' namespaces go now, not whenever the last exec task lets go of them.
        if let Ok(mut cluster) = self.cluster.try_write()
            && let Some(mut c) = cluster.take()
        {
            c.teardown();
        }
    }
}

fn server_err(what: impl std::fmt::Display) -> K8sError {
    K8sError::Cluster(format!("API server: {what}"))
}

impl ApiServer {
    /// Serves on `listener` (bound by the caller, e.g. inside an episode's namespace; call on a
    /// tokio runtime) the policies of `store` and the workload's namespaces and pods.
    pub fn serve(
        listener: std::net::TcpListener,
        store: Store,
        workload: Workload,
    ) -> Result<Self, K8sError> {
        Self::serve_with(listener, store, workload, None)
    }

    /// Serves on a fresh port of 127.0.0.1 a server with a cluster of its own, empty at first
    /// (the kube driver's target, docs/k8s.md): namespaces and pods are created and deleted
    /// through the API, a created pod runs in the embedded cluster ([`crate::cluster`]: its
    /// network namespace, IP, listeners and rules), the `ephemeralcontainers` patch is accepted
    /// and, with feature `kube`, `pods/exec` answers the kube driver's probe script. Needs
    /// root (network namespaces, nftables).
    pub fn bind_local_cluster() -> Result<Self, K8sError> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(server_err)?;
        Self::serve_with(listener, Store::new(&[]), Workload::default(), Some(owned::Owned::default()))
    }

    fn serve_with(
        listener: std::net::TcpListener,
        store: Store,
        workload: Workload,
        owned: Option<owned::Owned>,
    ) -> Result<Self, K8sError> {
        listener.set_nonblocking(true).map_err(server_err)?;
        let addr = listener.local_addr().map_err(server_err)?;
        let tcp = tokio::net::TcpListener::from_std(listener).map_err(server_err)?;
        let (certificate, acceptor) = tls()?;
        let mut bytes = [0u8; 24];
        rand::rng().fill(&mut bytes[..]);
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut inner = Inner {
            store,
            workload,
            version: 0,
            changes: 0,
            started: now(),
            events: tokio::sync::broadcast::channel(256).0,
            owned,
        };
        let existing: Vec<NetworkPolicy> = inner.store.policies();
        for mut p in existing {
            inner.stamp_new(&mut p);
            inner.store.put(p);
        }
        let inner = Arc::new(Mutex::new(inner));
        let cluster = Arc::new(tokio::sync::RwLock::new(None));
        let shared =
            Shared { inner: inner.clone(), token: token.clone().into(), addr, cluster: cluster.clone() };
        let app = axum::Router::new().fallback(handle).with_state(shared);
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(TlsListener { tcp, acceptor }, app).await {
                tracing::warn!("netdojo API server stopped: {e}");
            }
        });
        Ok(Self { inner, token, addr, certificate, task, cluster })
    }

    /// Serves on a fresh port of 127.0.0.1 in the caller's network namespace.
    pub fn bind_local(store: Store, workload: Workload) -> Result<Self, K8sError> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(server_err)?;
        Self::serve(listener, store, workload)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// The server's certificate (PEM).
    pub fn certificate(&self) -> &str {
        &self.certificate
    }

    /// A kubeconfig for this server (HTTPS on loopback with its certificate as the authority,
    /// the bearer token, namespace `default`).
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: netdojo\n  cluster:\n    server: https://{}\n    \
             certificate-authority-data: {}\n\
             users:\n- name: agent\n  user:\n    token: \"{}\"\ncontexts:\n- name: netdojo\n  context:\n    \
             cluster: netdojo\n    user: agent\n    namespace: default\ncurrent-context: netdojo\n",
            self.addr,
            base64(self.certificate.as_bytes()),
            self.token
        )
    }

    /// Writes [`kubeconfig`](Self::kubeconfig) to `dir/kubeconfig` (mode 0600) and returns its path.
    pub fn write_kubeconfig(&self, dir: &Path) -> Result<PathBuf, K8sError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join("kubeconfig");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| server_err(format!("{}: {e}", path.display())))?;
        f.write_all(self.kubeconfig().as_bytes())
            .map_err(|e| server_err(format!("{}: {e}", path.display())))?;
        Ok(path)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A handler that panicked left consistent data (every change is one insert).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The policies in force (the store, with the metadata the server gave them).
    pub fn store(&self) -> Store {
        self.lock().store.clone()
    }

    /// How many changes the server has accepted so far.
    pub fn changes(&self) -> u64 {
        self.lock().changes
    }
}

/// Builds a `v1` Status (a failure).
fn status(code: StatusCode, reason: &str, message: impl Into<String>, details: Option<Value>) -> Response {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message.into(),
        "reason": reason,
        "code": code.as_u16(),
    });
    if let Some(d) = details {
        body["details"] = d;
    }
    json_response(code, &body)
}

fn json_response(code: StatusCode, body: &Value) -> Response {
    let mut r = Response::new(Body::from(serde_json::to_vec(body).unwrap_or_default()));
    *r.status_mut() = code;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn json_response_bytes(body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn not_found_path() -> Response {
    status(StatusCode::NOT_FOUND, "NotFound", "the server could not find the requested resource", None)
}

/// The answer to a request in a namespace that does not exist.
fn namespace_not_found(ns: &str) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("namespaces \"{ns}\" not found"),
        Some(json!({"name": ns, "kind": "namespaces"})),
    )
}

fn not_found(res: &Res, name: &str) -> Response {
    let qualified =
        if res.group.is_empty() { res.plural.to_string() } else { format!("{}.{}", res.plural, res.group) };
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("{qualified} \"{name}\" not found"),
        // The core group is omitted, as the API server's StatusDetails omits an empty group
        // (the recorded answer in testdata/k8s/recorded).
        Some(if res.group.is_empty() {
            json!({"name": name, "kind": res.plural})
        } else {
            json!({"name": name, "group": res.group, "kind": res.plural})
        }),
    )
}

fn method_not_allowed(what: &str) -> Response {
    status(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!("the server does not allow this method on the requested resource ({what})"),
        None,
    )
}

fn bad_request(message: impl Into<String>) -> Response {
    status(StatusCode::BAD_REQUEST, "BadRequest", message, None)
}

/// The request's query parameters, percent-decoded.
fn query(req: &Request) -> BTreeMap<String, String> {
    req.uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A label selector of a list, watch or collection-delete request, as apimachinery's
/// `labels.Parse` reads it: comma-separated requirements `k=v`, `k==v`, `k!=v`, `k`, `!k`,
/// `k in (a,b)`, `k notin (a,b)` (a set may hold the empty value: `k in ()`, `k in (a,)`), and
/// `k>n`, `k<n` (integers). Read into a [`LabelSelector`] (`Gt` and `Lt` as operators a
/// request may carry and a policy may not), so that one matcher
/// ([`policy::selector_matches`]) decides for selectors in policies and in requests alike:
/// `!=` and `notin` also match objects without the label, as in Kubernetes. Checked against
/// apimachinery's own parser tests (`label_selectors_of_list_requests`).
fn label_filter(selector: Option<&String>) -> Result<LabelSelector, Box<Response>> {
    let Some(text) = selector.filter(|s| !s.trim().is_empty()) else { return Ok(LabelSelector::default()) };
    parse_selector(text).map_err(|e| Box::new(bad_request(format!("unable to parse requirement: {e}"))))
}

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Op(&'static str),
}

fn selector_tokens(text: &str) -> Vec<Token> {
    const OPS: [&str; 10] = ["==", "!=", "=", "!", "(", ")", ",", ">", "<", " "];
    let mut out = Vec::new();
    let mut word = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        match OPS.iter().find(|op| rest.starts_with(**op)) {
            Some(op) => {
                if !word.is_empty() {
                    out.push(Token::Word(std::mem::take(&mut word)));
                }
                if *op != " " {
                    out.push(Token::Op(op));
                }
                rest = &rest[op.len()..];
            }
            None => {
                let c = rest.chars().next().unwrap_or(' ');
                if c.is_whitespace() {
                    if !word.is_empty() {
                        out.push(Token::Word(std::mem::take(&mut word)));
                    }
                } else {
                    word.push(c);
                }
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    if !word.is_empty() {
        out.push(Token::Word(word));
    }
    out
}

fn parse_selector(text: &str) -> Result<LabelSelector, String> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    let tokens = selector_tokens(text);
    let mut at = 0;
    let mut expressions = Vec::new();
    let found = |t: Option<&Token>| match t {
        Some(Token::Word(w)) => format!("found '{w}'"),
        Some(Token::Op(o)) => format!("found '{o}'"),
        None => "found ''".to_string(),
    };
    let requirement = |key: String, operator: &str, values: Option<Vec<String>>| LabelSelectorRequirement {
        key,
        operator: operator.into(),
        values,
    };
    loop {
        let (key, negated) = match tokens.get(at) {
            Some(Token::Op("!")) => match tokens.get(at + 1) {
                Some(Token::Word(k)) => {
                    at += 2;
                    (k.clone(), true)
                }
                other => return Err(format!("{}, expected: identifier", found(other))),
            },
            Some(Token::Word(k)) => {
                at += 1;
                (k.clone(), false)
            }
            other => return Err(format!("{}, expected: identifier", found(other))),
        };
        if negated {
            expressions.push(requirement(key, "DoesNotExist", None));
        } else {
            match tokens.get(at) {
                None | Some(Token::Op(",")) => expressions.push(requirement(key, "Exists", None)),
                Some(Token::Op(op @ ("=" | "==" | "!="))) => {
                    at += 1;
                    let value = match tokens.get(at) {
                        Some(Token::Word(v)) => {
                            at += 1;
                            v.clone()
                        }
                        // `k=` selects the empty value.
                        None | Some(Token::Op(",")) => String::new(),
                        other => return Err(format!("{}, expected: identifier", found(other))),
                    };
                    let operator = if *op == "!=" { "NotIn" } else { "In" };
                    expressions.push(requirement(key, operator, Some(vec![value])));
                }
                Some(Token::Word(w)) if w == "in" || w == "notin" => {
                    let operator = if w == "in" { "In" } else { "NotIn" };
                    at += 1;
                    if tokens.get(at) != Some(&Token::Op("(")) {
                        return Err(format!("{}, expected: '('", found(tokens.get(at))));
                    }
                    at += 1;
                    let mut values = Vec::new();
                    loop {
                        match tokens.get(at) {
                            Some(Token::Word(v)) => {
                                values.push(v.clone());
                                at += 1;
                            }
                            // An empty member: `()`, `(a,)`, `(, a)`.
                            Some(Token::Op("," | ")")) => values.push(String::new()),
                            other => return Err(format!("{}, expected: ',' or ')'", found(other))),
                        }
                        match tokens.get(at) {
                            Some(Token::Op(",")) => at += 1,
                            Some(Token::Op(")")) => {
                                at += 1;
                                break;
                            }
                            other => return Err(format!("{}, expected: ',' or ')'", found(other))),
                        }
                    }
                    values.sort();
                    values.dedup();
                    expressions.push(requirement(key, operator, Some(values)));
                }
                Some(Token::Op(op @ (">" | "<"))) => {
                    at += 1;
                    let value = match tokens.get(at) {
                        Some(Token::Word(v)) if v.parse::<i64>().is_ok() => {
                            at += 1;
                            v.clone()
                        }
                        other => {
                            return Err(format!(
                                "{}, expected: an integer (for 'Gt', 'Lt' operators, the value must be an integer)",
                                found(other)
                            ));
                        }
                    };
                    let operator = if *op == ">" { "Gt" } else { "Lt" };
                    expressions.push(requirement(key, operator, Some(vec![value])));
                }
                other => {
                    return Err(format!("{}, expected: in, notin, =, ==, !=, gt, lt", found(other)));
                }
            }
        }
        match tokens.get(at) {
            None => break,
            Some(Token::Op(",")) => at += 1,
            other => return Err(format!("{}, expected: ','", found(other))),
        }
    }
    Ok(LabelSelector { match_expressions: Some(expressions), match_labels: None })
}

fn labels_match(filter: &LabelSelector, labels: Option<&BTreeMap<String, String>>) -> bool {
    let none = BTreeMap::new();
    policy::selector_matches(filter, labels.unwrap_or(&none))
}

/// Whether the client asked for a `meta.k8s.io/v1` Table (kubectl's `get`).
fn wants_table(req: &Request) -> bool {
    req.headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("as=Table") && v.contains("g=meta.k8s.io"))
}

fn wants_aggregated(req: &Request) -> bool {
    req.headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("g=apidiscovery.k8s.io") && v.contains("v=v2"))
}

async fn handle(State(shared): State<Shared>, req: Request) -> Response {
    let authorized = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| constant_time_eq(t.as_bytes(), shared.token.as_bytes()));
    if !authorized {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized", None);
    }
    // One user, no RBAC: impersonation (`kubectl --as`) is refused as the API server refuses
    // it to a user without the `impersonate` verb.
    if let Some((header, value)) = req.headers().iter().find(|(h, _)| h.as_str().starts_with("impersonate-"))
    {
        let (resource, name) = match header.as_str() {
            "impersonate-group" => ("groups", value.to_str().unwrap_or("")),
            "impersonate-uid" => ("uids", value.to_str().unwrap_or("")),
            h if h.starts_with("impersonate-extra-") => ("userextras", value.to_str().unwrap_or("")),
            _ => ("users", value.to_str().unwrap_or("")),
        };
        return status(
            StatusCode::FORBIDDEN,
            "Forbidden",
            format!(
                "{resource} \"{name}\" is forbidden: User \"agent\" cannot impersonate resource \"{resource}\" in API group \"\" at the cluster scope"
            ),
            Some(json!({"name": name, "kind": resource})),
        );
    }
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let segments: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(decode).collect();
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    #[cfg(feature = "kube")]
    if let ["api", "v1", "namespaces", ns, "pods", pod, "exec"] = segs.as_slice() {
        return owned::exec(&shared, ns, pod, req).await;
    }
    let is_owned = shared.lock().owned.is_some();
    // A created pod runs once the pod network is built with it, on the first read of pods
    // after the pods changed (a driver creates all its pods, then waits for them to run).
    if is_owned
        && method == Method::GET
        && segs.contains(&"pods")
        && let Err(e) = owned::sync(&shared, true).await
    {
        return status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", e, None);
    }
    let q = query(&req);
    let table = wants_table(&req);
    let aggregated = wants_aggregated(&req);
    let content_type =
        req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let body = match axum::body::to_bytes(req.into_body(), MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return status(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                format!("the request body is larger than {MAX_BODY} bytes"),
                None,
            );
        }
    };
    if method != Method::GET && !matches!(segs.first(), Some(&"api") | Some(&"apis")) {
        return method_not_allowed(&format!("{method} {path}"));
    }
    match segs.as_slice() {
        ["version"] => json_response(
            StatusCode::OK,
            &json!({
                "major": VERSION.0, "minor": VERSION.1, "gitVersion": format!("v{}.{}.0-netdojo", VERSION.0, VERSION.1),
                "gitCommit": "", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
                "goVersion": "", "compiler": "netdojo", "platform": "linux/amd64",
            }),
        ),
        ["api"] if aggregated => aggregated_discovery(true),
        ["apis"] if aggregated => aggregated_discovery(false),
        ["api"] => json_response(
            StatusCode::OK,
            &json!({"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": shared.addr.to_string()}]}),
        ),
        ["apis"] => json_response(
            StatusCode::OK,
            &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [api_group()]}),
        ),
        ["apis", NP_GROUP] => json_response(StatusCode::OK, &api_group()),
        ["api", "v1"] => resource_list(""),
        ["apis", NP_GROUP, "v1"] => resource_list(NP_GROUP),
        ["openapi", "v2"] => json_response(StatusCode::OK, cached(&OPENAPI_V2, openapi_v2)),
        ["openapi", "v3"] => json_response(StatusCode::OK, cached(&OPENAPI_V3_ROOT, openapi_v3_root)),
        ["openapi", "v3", "api", "v1"] => {
            json_response(StatusCode::OK, cached(&OPENAPI_V3_CORE, || openapi_v3("")))
        }
        ["openapi", "v3", "apis", NP_GROUP, "v1"] => {
            json_response(StatusCode::OK, cached(&OPENAPI_V3_NETWORKING, || openapi_v3(NP_GROUP)))
        }
        ["api", "v1", rest @ ..] | ["apis", NP_GROUP, "v1", rest @ ..] => {
            let group = if segs[0] == "api" { "" } else { NP_GROUP };
            let r = resource(&shared, &method, group, rest, &q, table, &content_type, &body);
            // Every accepted change is enforced before the answer (a CNI plugin does it
            // after): the policies' rules, or the loss of a deleted pod's namespace.
            if is_owned
                && method != Method::GET
                && r.status().is_success()
                && let Err(e) = owned::sync(&shared, false).await
            {
                return status(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "InternalError",
                    format!("the change was stored but is not enforced: {e}"),
                    None,
                );
            }
            r
        }
        _ => not_found_path(),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn api_group() -> Value {
    json!({
        "kind": "APIGroup", "apiVersion": "v1", "name": NP_GROUP,
        "versions": [{"groupVersion": format!("{NP_GROUP}/v1"), "version": "v1"}],
        "preferredVersion": {"groupVersion": format!("{NP_GROUP}/v1"), "version": "v1"},
    })
}

fn resource_list(group: &str) -> Response {
    let resources: Vec<Value> = RESOURCES
        .iter()
        .filter(|r| r.group == group)
        .map(|r| {
            json!({
                "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
                "verbs": r.verbs, "shortNames": r.short, "categories": r.categories,
            })
        })
        .collect();
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version(group), "resources": resources}),
    )
}

/// `apidiscovery.k8s.io/v2` APIGroupDiscoveryList: the core group (`/api`) or the named groups
/// (`/apis`).
fn aggregated_discovery(core: bool) -> Response {
    let group = if core { "" } else { NP_GROUP };
    let resources: Vec<Value> = RESOURCES
        .iter()
        .filter(|r| r.group == group)
        .map(|r| {
            json!({
                "resource": r.plural,
                "responseKind": {"group": r.group, "version": "v1", "kind": r.kind},
                "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": r.singular,
                "verbs": r.verbs, "shortNames": r.short, "categories": r.categories,
            })
        })
        .collect();
    let mut metadata = json!({"creationTimestamp": null});
    if !core {
        metadata["name"] = json!(NP_GROUP);
    }
    let body = json!({
        "kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
        "items": [{"metadata": metadata, "versions": [{"version": "v1", "resources": resources, "freshness": "Current"}]}],
    });
    let mut r = json_response(StatusCode::OK, &body);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
    );
    r
}

/// The schemas of the served kinds (and everything they refer to), from k8s-openapi's
/// `schemars` impls, with `x-kubernetes-group-version-kind` on each kind as the API server
/// writes it (kubectl finds a kind's schema by it).
fn schemas(settings: SchemaSettings) -> serde_json::Map<String, Value> {
    use k8s_openapi::api::core::v1::Event;
    let mut generator = SchemaGenerator::new(settings);
    generator.subschema_for::<Namespace>();
    generator.subschema_for::<Pod>();
    generator.subschema_for::<Service>();
    generator.subschema_for::<Event>();
    generator.subschema_for::<NetworkPolicy>();
    let mut defs = generator.take_definitions(true);
    for r in RESOURCES {
        if let Some(Value::Object(s)) = defs.get_mut(r.schema) {
            s.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": r.group, "version": "v1", "kind": r.kind}]),
            );
        }
    }
    defs.insert("io.k8s.apimachinery.pkg.apis.meta.v1.Patch".into(), json!({"type": "object"}));
    defs
}

/// The paths of `group`'s resources, with each operation's verb, kind and query parameters:
/// kubectl looks for the PATCH operation of a kind and its `fieldValidation` parameter to
/// decide that the server validates fields (and then sends `fieldValidation=Strict`).
fn paths(group: &str, v3: bool) -> serde_json::Map<String, Value> {
    let base = if group.is_empty() { "/api/v1".to_string() } else { format!("/apis/{group}/v1") };
    let reference = |name: &str| {
        if v3 { format!("#/components/schemas/{name}") } else { format!("#/definitions/{name}") }
    };
    let param = |name: &str| {
        if v3 {
            json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
        } else {
            json!({"name": name, "in": "query", "type": "string", "uniqueItems": true})
        }
    };
    let mut out = serde_json::Map::new();
    for r in RESOURCES.iter().filter(|r| r.group == group) {
        let gvk = json!({"group": r.group, "version": "v1", "kind": r.kind});
        let op = |action: &str, params: &[&str], body: Option<&[&str]>| {
            let mut o = json!({
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": params.iter().map(|p| param(p)).collect::<Vec<_>>(),
            });
            let schema = json!({"$ref": reference(r.schema)});
            if v3 {
                o["responses"] = json!({"200": {"description": "OK", "content": {"application/json": {"schema": schema}}}});
                if let Some(types) = body {
                    let target = if action == "patch" {
                        json!({"$ref": reference("io.k8s.apimachinery.pkg.apis.meta.v1.Patch")})
                    } else {
                        json!({"$ref": reference(r.schema)})
                    };
                    let content: serde_json::Map<String, Value> =
                        types.iter().map(|t| (t.to_string(), json!({"schema": target}))).collect();
                    o["requestBody"] = json!({"content": content, "required": true});
                }
            } else {
                o["responses"] = json!({"200": {"description": "OK", "schema": schema}});
                if let Some(types) = body {
                    o["consumes"] = json!(types);
                }
            }
            o
        };
        let collection = if r.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("{base}/{}", r.plural)
        };
        let mut coll = serde_json::Map::new();
        coll.insert("get".into(), op("list", &["labelSelector", "fieldSelector"], None));
        let mut item = serde_json::Map::new();
        if r.verbs.contains(&"get") {
            item.insert("get".into(), op("get", &[], None));
        }
        if r.verbs.contains(&"create") {
            coll.insert(
                "post".into(),
                op("post", &["dryRun", "fieldManager", "fieldValidation"], Some(&["*/*"])),
            );
            item.insert(
                "put".into(),
                op("put", &["dryRun", "fieldManager", "fieldValidation"], Some(&["*/*"])),
            );
            item.insert(
                "patch".into(),
                op(
                    "patch",
                    &["dryRun", "fieldManager", "fieldValidation", "force"],
                    Some(&[
                        "application/json-patch+json",
                        "application/merge-patch+json",
                        "application/strategic-merge-patch+json",
                    ]),
                ),
            );
            item.insert("delete".into(), op("delete", &["dryRun"], None));
        }
        out.insert(collection.clone(), Value::Object(coll));
        if !item.is_empty() {
            out.insert(format!("{collection}/{{name}}"), Value::Object(item));
        }
    }
    out
}

/// The OpenAPI documents never change: made once per process (kubectl asks for them on every
/// command that validates or applies).
static OPENAPI_V2: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
static OPENAPI_V3_ROOT: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
static OPENAPI_V3_CORE: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
static OPENAPI_V3_NETWORKING: std::sync::OnceLock<Value> = std::sync::OnceLock::new();

fn cached(cell: &'static std::sync::OnceLock<Value>, make: impl FnOnce() -> Value) -> &'static Value {
    cell.get_or_init(make)
}

fn openapi_v2() -> Value {
    let settings = SchemaSettings::draft07().with(|s| s.definitions_path = "#/definitions/".into());
    let mut paths = paths("", false);
    paths.extend(self::paths(NP_GROUP, false));
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": format!("v{}.{}.0", VERSION.0, VERSION.1)},
        "paths": paths,
        "definitions": schemas(settings),
    })
}

fn openapi_v3(group: &str) -> Value {
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v{}.{}.0", VERSION.0, VERSION.1)},
        "paths": paths(group, true),
        "components": {"schemas": schemas(SchemaSettings::openapi3())},
    })
}

fn openapi_v3_root() -> Value {
    let entry = |group: &str, key: &str| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let doc = if group.is_empty() {
            cached(&OPENAPI_V3_CORE, || openapi_v3(""))
        } else {
            cached(&OPENAPI_V3_NETWORKING, || openapi_v3(NP_GROUP))
        };
        doc.to_string().hash(&mut h);
        (key.to_string(), json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={:016X}", h.finish())}))
    };
    let paths: serde_json::Map<String, Value> =
        [entry("", "api/v1"), entry(NP_GROUP, &format!("apis/{NP_GROUP}/v1"))].into_iter().collect();
    json!({"paths": paths})
}

/// Now, to the second (jiff's clock needs its `std` feature, which k8s-openapi leaves off).
fn now() -> Timestamp {
    let secs =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    Timestamp::from_second(i64::try_from(secs).unwrap_or(0)).unwrap_or_default()
}

/// kubectl's AGE (`5m`, `2d3h`: `duration.HumanDuration`, coarsely).
fn age(since: Timestamp) -> String {
    let secs = now().as_second().saturating_sub(since.as_second()).max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{}m{}s", s / 60, s % 60),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 8 * 3600 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

impl Inner {
    fn next_version(&mut self) -> String {
        self.version += 1;
        self.version.to_string()
    }

    /// The metadata the server sets on a new object.
    fn stamp_new(&mut self, p: &mut NetworkPolicy) {
        let mut bytes = [0u8; 16];
        rand::rng().fill(&mut bytes[..]);
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        p.metadata.uid =
            Some(format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..]));
        p.metadata.creation_timestamp = Some(Time(self.started));
        p.metadata.generation = Some(1);
        p.metadata.resource_version = Some(self.next_version());
        p.metadata.managed_fields = None;
        p.metadata.self_link = None;
    }

    fn pods(&self) -> Vec<Pod> {
        self.workload
            .pods
            .iter()
            .map(|p| {
                let mut pod = kubectl::pod_object(p);
                pod.metadata.creation_timestamp = Some(Time(self.started));
                pod.metadata.resource_version = Some("1".into());
                pod.metadata.uid = Some(format!("00000000-0000-4000-8000-{:012x}", u32::from(p.ip)));
                if let Some(spec) = pod.spec.as_mut() {
                    spec.node_name = Some("netdojo".into());
                    for c in &mut spec.containers {
                        c.image = Some("netdojo/listener".into());
                    }
                }
                if let Some(status) = pod.status.as_mut() {
                    status.host_ip = Some("127.0.0.1".into());
                    status.pod_ips = Some(vec![PodIP { ip: p.ip.to_string() }]);
                    status.start_time = Some(Time(self.started));
                    status.container_statuses = Some(vec![ContainerStatus {
                        name: "main".into(),
                        ready: true,
                        restart_count: 0,
                        image: "netdojo/listener".into(),
                        image_id: String::new(),
                        started: Some(true),
                        state: Some(ContainerState {
                            running: Some(ContainerStateRunning { started_at: Some(Time(self.started)) }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]);
                }
                if let Some(owned) = &self.owned {
                    owned.render(&mut pod, self.started);
                }
                pod
            })
            .collect()
    }

    fn namespaces(&self) -> Vec<Namespace> {
        self.workload
            .namespaces
            .iter()
            .map(|(name, labels)| Namespace {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    labels: Some(labels.clone()),
                    creation_timestamp: Some(Time(self.started)),
                    resource_version: Some("1".into()),
                    ..Default::default()
                },
                spec: Some(NamespaceSpec { finalizers: Some(vec!["kubernetes".into()]) }),
                status: Some(NamespaceStatus { phase: Some("Active".into()), ..Default::default() }),
            })
            .collect()
    }
}

/// A served object as JSON with the fields the table printer and the selector need.
struct Item {
    namespace: Option<String>,
    name: String,
    labels: Option<BTreeMap<String, String>>,
    object: Value,
    cells: Vec<Value>,
}

fn columns(kind: &str) -> Value {
    let col = |name: &str, ty: &str, priority: u8| json!({"name": name, "type": ty, "format": if name == "Name" { "name" } else { "" }, "description": "", "priority": priority});
    json!(match kind {
        "Pod" => vec![
            col("Name", "string", 0),
            col("Ready", "string", 0),
            col("Status", "string", 0),
            col("Restarts", "string", 0),
            col("Age", "string", 0),
            col("IP", "string", 1),
            col("Node", "string", 1),
            col("Nominated Node", "string", 1),
            col("Readiness Gates", "string", 1),
        ],
        "Namespace" => vec![col("Name", "string", 0), col("Status", "string", 0), col("Age", "string", 0)],
        "Service" => vec![
            col("Name", "string", 0),
            col("Type", "string", 0),
            col("Cluster-IP", "string", 0),
            col("External-IP", "string", 0),
            col("Port(s)", "string", 0),
            col("Age", "string", 0),
            col("Selector", "string", 1),
        ],
        "Event" => vec![col("Last Seen", "string", 0), col("Type", "string", 0), col("Reason", "string", 0)],
        _ => vec![col("Name", "string", 0), col("Pod-Selector", "string", 0), col("Age", "string", 0)],
    })
}

fn selector_text(p: &NetworkPolicy) -> String {
    let Some(sel) = p.spec.as_ref().and_then(|s| s.pod_selector.as_ref()) else { return "<none>".into() };
    let mut parts: Vec<String> = sel.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            op => format!("{} {op} ({values})", e.key),
        });
    }
    if parts.is_empty() { "<none>".into() } else { parts.join(",") }
}

fn items(inner: &Inner, res: &Res, ns: Option<&str>) -> Vec<Item> {
    let age = age(inner.started);
    match res.kind {
        "NetworkPolicy" => inner
            .store
            .list(ns)
            .into_iter()
            .map(|p| Item {
                namespace: Some(policy::namespace(p).to_string()),
                name: policy::name(p).to_string(),
                labels: p.metadata.labels.clone(),
                object: serde_json::to_value(p).unwrap_or(Value::Null),
                cells: vec![json!(policy::name(p)), json!(selector_text(p)), json!(age)],
            })
            .collect(),
        "Pod" => inner
            .pods()
            .into_iter()
            .filter(|p| ns.is_none_or(|n| p.metadata.namespace.as_deref() == Some(n)))
            .map(|p| {
                let ip = p.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap_or_else(|| "<none>".into());
                let phase = p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
                let ready = if phase == "Running" { "1/1" } else { "0/1" };
                Item {
                    namespace: p.metadata.namespace.clone(),
                    name: p.metadata.name.clone().unwrap_or_default(),
                    labels: p.metadata.labels.clone(),
                    cells: vec![
                        json!(p.metadata.name),
                        json!(ready),
                        json!(phase),
                        json!("0"),
                        json!(age),
                        json!(ip),
                        json!("netdojo"),
                        json!("<none>"),
                        json!("<none>"),
                    ],
                    object: serde_json::to_value(&p).unwrap_or(Value::Null),
                }
            })
            .collect(),
        "Namespace" => inner
            .namespaces()
            .into_iter()
            .map(|n| Item {
                namespace: None,
                name: n.metadata.name.clone().unwrap_or_default(),
                labels: n.metadata.labels.clone(),
                cells: vec![json!(n.metadata.name), json!("Active"), json!(age)],
                object: serde_json::to_value(&n).unwrap_or(Value::Null),
            })
            .collect(),
        // The embedded cluster runs no Services and records no events.
        _ => Vec::new(),
    }
}

fn list_response(inner: &Inner, res: &Res, items: Vec<Item>, table: bool) -> Response {
    let rv = inner.version.max(1).to_string();
    if table {
        let rows: Vec<Value> =
            items.into_iter().map(|i| json!({"cells": i.cells, "object": i.object})).collect();
        return json_response(
            StatusCode::OK,
            &json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
                    "columnDefinitions": columns(res.kind), "rows": rows}),
        );
    }
    let objects: Vec<Value> = items.into_iter().map(|i| i.object).collect();
    json_response(
        StatusCode::OK,
        &json!({"kind": format!("{}List", res.kind), "apiVersion": api_version(res.group),
                "metadata": {"resourceVersion": rv}, "items": objects}),
    )
}

fn object_response(code: StatusCode, res: &Res, item: Item, table: bool) -> Response {
    if table {
        return json_response(
            code,
            &json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
                    "columnDefinitions": columns(res.kind), "rows": [{"cells": item.cells, "object": item.object}]}),
        );
    }
    json_response(code, &item.object)
}

fn policy_item(p: &NetworkPolicy, started: Timestamp) -> Item {
    Item {
        namespace: Some(policy::namespace(p).to_string()),
        name: policy::name(p).to_string(),
        labels: p.metadata.labels.clone(),
        object: serde_json::to_value(p).unwrap_or(Value::Null),
        cells: vec![json!(policy::name(p)), json!(selector_text(p)), json!(age(started))],
    }
}

#[allow(clippy::too_many_arguments)]
fn resource(
    shared: &Shared,
    method: &Method,
    group: &str,
    rest: &[&str],
    q: &BTreeMap<String, String>,
    table: bool,
    content_type: &str,
    body: &[u8],
) -> Response {
    // /namespaces/NS/PLURAL[/NAME[/SUB]] or /PLURAL[/NAME] (cluster-wide lists, namespaces).
    let (ns, plural, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if !group.is_empty() || *plural != "status" && *plural != "finalize" =>
        {
            (Some(*ns), *plural, tail.first().copied(), tail.get(1).copied())
        }
        [plural, tail @ ..] => (None, *plural, tail.first().copied(), tail.get(1).copied()),
        [] => return not_found_path(),
    };
    let Some(res) = RESOURCES.iter().find(|r| r.group == group && r.plural == plural) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!(
                "the server could not find the requested resource: netdojo's API server serves namespaces, pods, services and events (v1) and networkpolicies ({NP_GROUP}/v1), not {plural:?}"
            ),
            None,
        );
    };
    if matches!(res.plural, "namespaces" | "pods") && *method != Method::GET {
        let mut inner = shared.lock();
        if inner.owned.is_some() {
            return owned::change(&mut inner, res, method, ns, name, sub, body);
        }
    }
    if let Some(sub) = sub {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!(
                "the server could not find the requested resource: netdojo's API server serves no subresource ({}/{sub})",
                res.plural
            ),
            None,
        );
    }
    if !res.namespaced && ns.is_some() && res.plural != "namespaces" {
        return not_found_path();
    }
    let mut inner = shared.inner.lock().unwrap_or_else(|e| e.into_inner());
    if q.get("watch").is_some_and(|w| w == "true" || w == "1") && method == Method::GET {
        return watch(&inner, res, ns, name, q, table);
    }
    let verb = match (method.as_str(), name) {
        ("GET", None) => "list",
        ("GET", Some(_)) => "get",
        ("POST", None) => "create",
        ("PUT", Some(_)) => "update",
        ("PATCH", Some(_)) => "patch",
        ("DELETE", Some(_)) => "delete",
        ("DELETE", None) => "deletecollection",
        _ => "",
    };
    if !res.verbs.contains(&verb) {
        let why = if res.group.is_empty() {
            format!(
                "{} are read-only here: the workload is fixed; only NetworkPolicies can be changed",
                res.plural
            )
        } else {
            format!("{verb:?} is not served for {}.{}", res.plural, res.group)
        };
        return method_not_allowed(&why);
    }
    match verb {
        "list" => {
            let filter = match label_filter(q.get("labelSelector")) {
                Ok(f) => f,
                Err(r) => return *r,
            };
            if q.get("fieldSelector").is_some_and(|f| !f.is_empty()) && res.kind != "Event" {
                // Only `describe`'s event query sends one; events are always empty here.
                let name_only: Option<String> =
                    q.get("fieldSelector").and_then(|f| f.strip_prefix("metadata.name=")).map(str::to_string);
                let all = items(&inner, res, ns);
                let Some(n) = name_only else {
                    return bad_request(
                        "netdojo's API server supports only the field selector metadata.name=NAME",
                    );
                };
                let kept = all
                    .into_iter()
                    .filter(|i| i.name == n && labels_match(&filter, i.labels.as_ref()))
                    .collect();
                return list_response(&inner, res, kept, table);
            }
            let all = items(&inner, res, ns);
            let kept = all.into_iter().filter(|i| labels_match(&filter, i.labels.as_ref())).collect();
            list_response(&inner, res, kept, table)
        }
        "get" => {
            let name = name.unwrap_or_default();
            let found = items(&inner, res, if res.namespaced { ns } else { None })
                .into_iter()
                .find(|i| i.name == name && (!res.namespaced || i.namespace.as_deref() == ns));
            match found {
                Some(i) => object_response(StatusCode::OK, res, i, table),
                None => not_found(res, name),
            }
        }
        _ => {
            let Some(ns) = ns else {
                return method_not_allowed(
                    "networkpolicies are changed in a namespace: /apis/networking.k8s.io/v1/namespaces/NS/networkpolicies",
                );
            };
            if !inner.workload.namespaces.contains_key(ns) {
                return namespace_not_found(ns);
            }
            // A delete may carry its options in a `DeleteOptions` body (kube-rs does) rather
            // than the query; the API server reads both.
            let body_dry_run = matches!(verb, "delete" | "deletecollection")
                && serde_json::from_slice::<Value>(body)
                    .ok()
                    .is_some_and(|o| o["dryRun"].as_array().is_some_and(|d| d.iter().any(|v| v == "All")));
            let dry_run = q.get("dryRun").is_some_and(|d| d == "All") || body_dry_run;
            if verb == "deletecollection" {
                return delete_collection(&mut inner, res, ns, q, dry_run);
            }
            let strict = q.get("fieldValidation").map(String::as_str);
            change(&mut inner, res, verb, ns, name, content_type, body, dry_run, strict, table)
        }
    }
}

/// The longest a watch stays open when the client sets no `timeoutSeconds`.
const WATCH_LIMIT: std::time::Duration = std::time::Duration::from_secs(1800);

/// A watch (`?watch=true`): with no `resourceVersion` (or `0`), ADDED for every object now,
/// then every accepted change, as JSON lines, until `timeoutSeconds`. From a `resourceVersion`
/// older than the latest, the one event is an ERROR with a 410 Expired Status ("too old resource
/// version": the server keeps no history), on which clients list again. Pods, namespaces and services never change here: their watches
/// only wait.
fn watch(
    inner: &Inner,
    res: &'static Res,
    ns: Option<&str>,
    name: Option<&str>,
    q: &BTreeMap<String, String>,
    table: bool,
) -> Response {
    let filter = match label_filter(q.get("labelSelector")) {
        Ok(f) => f,
        Err(r) => return *r,
    };
    let name = name.map(str::to_string).or_else(|| {
        q.get("fieldSelector").and_then(|f| f.strip_prefix("metadata.name=")).map(str::to_string)
    });
    let from = q.get("resourceVersion").filter(|v| !v.is_empty() && *v != "0");
    if let Some(v) = from
        && v.parse::<u64>().ok() != Some(inner.version.max(1))
        && v.parse::<u64>().ok() != Some(inner.version)
    {
        // As the API server does: the watch opens, and its one event is the 410.
        let gone = json!({"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("too old resource version: {v} ({})", inner.version),
            "reason": "Expired", "code": 410,
        }});
        let mut line = serde_json::to_vec(&gone).unwrap_or_default();
        line.push(b'\n');
        return json_response_bytes(line);
    }
    let keep = {
        let name = name.clone();
        let ns = ns.map(str::to_string);
        move |i: &Item| {
            name.as_deref().is_none_or(|n| n == i.name)
                && (ns.is_none() || i.namespace == ns)
                && labels_match(&filter, i.labels.as_ref())
        }
    };
    let columns = columns(res.kind);
    let event = move |kind: &str, item: Item| -> axum::body::Bytes {
        let object = if table {
            json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
                   "columnDefinitions": columns, "rows": [{"cells": item.cells, "object": item.object}]})
        } else {
            item.object
        };
        let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
        line.push(b'\n');
        line.into()
    };
    let initial: std::collections::VecDeque<axum::body::Bytes> = if from.is_none() {
        items(inner, res, ns).into_iter().filter(|i| keep(i)).map(|i| event("ADDED", i)).collect()
    } else {
        Default::default()
    };
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(std::time::Duration::from_secs)
        .unwrap_or(WATCH_LIMIT)
        .min(WATCH_LIMIT);
    let deadline = tokio::time::Instant::now() + timeout;
    let changes = (res.kind == "NetworkPolicy").then(|| inner.events.subscribe());
    let started = inner.started;
    let stream = futures::stream::unfold((initial, changes), move |(mut queue, mut changes)| {
        let keep = keep.clone();
        let event = event.clone();
        async move {
            loop {
                if let Some(line) = queue.pop_front() {
                    return Some((Ok::<_, std::convert::Infallible>(line), (queue, changes)));
                }
                let next = async {
                    match changes.as_mut() {
                        Some(rx) => rx.recv().await.ok(),
                        None => std::future::pending().await,
                    }
                };
                match tokio::time::timeout_at(deadline, next).await {
                    Ok(Some((kind, p))) => {
                        let item = policy_item(&p, started);
                        if keep(&item) {
                            queue.push_back(event(kind, item));
                        }
                    }
                    // The deadline, or the server went away (or this watcher fell behind).
                    _ => return None,
                }
            }
        }
    });
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn kind_of(v: &Value) -> (&str, &str) {
    (
        v.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
        v.get("kind").and_then(Value::as_str).unwrap_or(""),
    )
}

/// The paths of `input` that a NetworkPolicy does not have: what deserializing dropped
/// (`spec.ingres`), found by comparing the input with the object read back out.
fn unknown_fields(input: &Value, known: &Value, prefix: &str, out: &mut Vec<String>) {
    match (input, known) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                match b.get(k) {
                    Some(kv) => unknown_fields(v, kv, &path, out),
                    None if v.is_null() => {}
                    None if matches!(v, Value::Array(x) if x.is_empty()) => {}
                    None if matches!(v, Value::Object(x) if x.is_empty()) => {}
                    // Status and managedFields are the server's: dropped, not unknown.
                    None if matches!(
                        path.as_str(),
                        "status" | "metadata.managedFields" | "metadata.creationTimestamp"
                    ) => {}
                    None => out.push(path),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                unknown_fields(x, y, &format!("{prefix}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Reads a NetworkPolicy from JSON the client sent (or a patch produced), with the field
/// validation it asked for: `Strict` refuses unknown fields, `Warn` (the default) reports them
/// in a `Warning` header, `Ignore` drops them silently.
fn decode_policy(
    value: Value,
    field_validation: Option<&str>,
) -> Result<(NetworkPolicy, Vec<String>), Box<Response>> {
    let (api, kind) = kind_of(&value);
    if (api, kind) != ("networking.k8s.io/v1", "NetworkPolicy") {
        return Err(Box::new(bad_request(format!(
            "the API version in the data ({api}) and the kind ({kind}) do not match the expected networking.k8s.io/v1, Kind=NetworkPolicy"
        ))));
    }
    let p: NetworkPolicy = serde_json::from_value(value.clone())
        .map_err(|e| Box::new(bad_request(format!("the body is not a valid NetworkPolicy: {e}"))))?;
    let mut unknown = Vec::new();
    unknown_fields(&value, &serde_json::to_value(&p).unwrap_or(Value::Null), "", &mut unknown);
    match field_validation.unwrap_or("Warn") {
        "Strict" if !unknown.is_empty() => {
            let list =
                unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect::<Vec<_>>().join(", ");
            Err(Box::new(bad_request(format!(
                "NetworkPolicy in version \"v1\" cannot be handled as a NetworkPolicy: strict decoding error: {list}"
            ))))
        }
        "Strict" | "Warn" => Ok((p, unknown)),
        "Ignore" => Ok((p, Vec::new())),
        other => Err(Box::new(bad_request(format!(
            "fieldValidation {other:?} is not one of Ignore, Warn, Strict"
        )))),
    }
}

/// A 422 from [`policy::validate`]'s message, with one cause per field as the API server
/// sends them (kubectl prints `The NetworkPolicy "x" is invalid: FIELD: MESSAGE`).
fn invalid(name: &str, message: &str) -> Response {
    let list = message.split_once("is invalid: ").map(|(_, rest)| rest).unwrap_or(message);
    let causes: Vec<Value> = list
        .split("\n* ")
        .map(|c| c.trim().trim_start_matches("* "))
        .filter(|c| !c.is_empty())
        .map(|c| {
            let (field, msg) = c.split_once(": ").unwrap_or(("", c));
            let reason = if msg.starts_with("Unsupported value") {
                "FieldValueNotSupported"
            } else if msg.starts_with("Required value") {
                "FieldValueRequired"
            } else if msg.starts_with("Forbidden") {
                "FieldValueForbidden"
            } else {
                "FieldValueInvalid"
            };
            json!({"reason": reason, "message": msg, "field": field})
        })
        .collect();
    let summary: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c["field"].as_str().unwrap_or(""), c["message"].as_str().unwrap_or("")))
        .collect();
    status(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        // apimachinery's aggregate: one error bare, several in brackets.
        if summary.len() == 1 {
            format!("NetworkPolicy.{NP_GROUP} \"{name}\" is invalid: {}", summary[0])
        } else {
            format!("NetworkPolicy.{NP_GROUP} \"{name}\" is invalid: [{}]", summary.join(", "))
        },
        Some(json!({"name": name, "group": NP_GROUP, "kind": "NetworkPolicy", "causes": causes})),
    )
}

fn conflict(name: &str) -> Response {
    status(
        StatusCode::CONFLICT,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on networkpolicies.{NP_GROUP} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        ),
        Some(json!({"name": name, "group": NP_GROUP, "kind": "networkpolicies"})),
    )
}

/// Applies a strategic merge patch to a NetworkPolicy. Its lists carry no merge key (only
/// ObjectMeta's ownerReferences do, which no object here has), so they are replaced as in a
/// JSON merge patch; the directives `$patch: replace|delete` on maps are honoured and the
/// bookkeeping keys (`$setElementOrder/...`, `$retainKeys`, `$deleteFromPrimitiveList/...`)
/// have nothing to order or retain.
fn strategic_merge(target: &mut Value, patch: &Value) -> Result<(), String> {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut rest = p.clone();
            rest.remove("$patch");
            *target = Value::Object(rest);
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Null;
            return Ok(());
        }
        Some(other) => return Err(format!("unknown patch type: {other:?}")),
        None => {}
    }
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Value::Object(t) = target else { return Ok(()) };
    for (k, v) in p {
        if k.starts_with('$') {
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        let slot = t.entry(k.clone()).or_insert(Value::Null);
        strategic_merge(slot, v)?;
        if slot.is_null() {
            t.remove(k);
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn change(
    inner: &mut Inner,
    res: &Res,
    verb: &str,
    ns: &str,
    name: Option<&str>,
    content_type: &str,
    body: &[u8],
    dry_run: bool,
    field_validation: Option<&str>,
    table: bool,
) -> Response {
    let started = inner.started;
    if verb == "delete" {
        let name = name.unwrap_or_default();
        let Some(old) = inner.store.policy(ns, name).cloned() else { return not_found(res, name) };
        if !dry_run {
            inner.store.remove(ns, name);
            // No watcher is fine: the send only fails when nobody listens.
            let _ = inner.events.send(("DELETED", old.clone()));
            inner.version += 1;
            inner.changes += 1;
        }
        return object_response(StatusCode::OK, res, policy_item(&old, started), table);
    }
    let media = content_type.split(';').next().unwrap_or("").trim();
    let parse = |bytes: &[u8]| -> Result<Value, Box<Response>> {
        serde_json::from_slice(bytes)
            .or_else(|_| serde_yaml_ng::from_slice(bytes))
            .map_err(|e| Box::new(bad_request(format!("the request body is not JSON: {e}"))))
    };
    let (incoming, current) = match verb {
        "create" | "update" => {
            let v = match parse(body) {
                Ok(v) => v,
                Err(r) => return *r,
            };
            let current = name.and_then(|n| inner.store.policy(ns, n).cloned());
            (v, current)
        }
        _ => {
            // patch
            let name = name.unwrap_or_default();
            let Some(current) = inner.store.policy(ns, name).cloned() else { return not_found(res, name) };
            let mut doc = serde_json::to_value(&current).unwrap_or(Value::Null);
            let patch = match parse(body) {
                Ok(v) => v,
                Err(r) => return *r,
            };
            let applied = match media {
                "application/json-patch+json" => kubectl::json_patch(&mut doc, &patch),
                "application/merge-patch+json" => {
                    kubectl::merge_patch(&mut doc, &patch);
                    Ok(())
                }
                "application/strategic-merge-patch+json" => strategic_merge(&mut doc, &patch),
                "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                    return status(
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        "UnsupportedMediaType",
                        "server-side apply is not supported by netdojo's API server: use client-side `kubectl apply`, `kubectl patch` or an update",
                        None,
                    );
                }
                other => {
                    return status(
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        "UnsupportedMediaType",
                        format!(
                            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {other:?})"
                        ),
                        None,
                    );
                }
            };
            if let Err(e) = applied {
                return status(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    e.trim_start_matches("error: ").to_string(),
                    None,
                );
            }
            (doc, Some(current))
        }
    };
    let (mut p, unknown) = match decode_policy(incoming, field_validation) {
        Ok(x) => x,
        Err(r) => return *r,
    };
    match &p.metadata.namespace {
        Some(n) if n != ns => {
            return bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            );
        }
        _ => p.metadata.namespace = Some(ns.to_string()),
    }
    if verb == "create"
        && p.metadata.name.as_deref().unwrap_or("").is_empty()
        && let Some(prefix) = p.metadata.generate_name.clone().filter(|g| !g.is_empty())
    {
        {
            let suffix: String = (0..5)
                .map(|_| char::from(b"bcdfghjklmnpqrstvwxz2456789"[rand::rng().random_range(0..27)]))
                .collect();
            p.metadata.name = Some(format!("{prefix}{suffix}"));
        }
    }
    if let Some(url_name) = name
        && policy::name(&p) != url_name
    {
        return bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({url_name})",
            policy::name(&p)
        ));
    }
    let pname = policy::name(&p).to_string();
    if let Err(message) = policy::validate(&p) {
        if pname.is_empty() {
            return invalid("", "metadata.name: Required value: name or generateName is required");
        }
        return invalid(&pname, &message);
    }
    let code = match (verb, &current) {
        ("create", _) if inner.store.policy(ns, &pname).is_some() => {
            return status(
                StatusCode::CONFLICT,
                "AlreadyExists",
                format!("networkpolicies.{NP_GROUP} \"{pname}\" already exists"),
                Some(json!({"name": pname, "group": NP_GROUP, "kind": "networkpolicies"})),
            );
        }
        ("create", _) => {
            inner.stamp_new(&mut p);
            StatusCode::CREATED
        }
        (_, None) => return not_found(res, &pname),
        (_, Some(old)) => {
            // A resourceVersion that the object no longer has: someone changed it since it
            // was read. None: an unconditional update (NetworkPolicy allows them).
            if let Some(rv) = p.metadata.resource_version.as_deref().filter(|rv| !rv.is_empty())
                && Some(rv) != old.metadata.resource_version.as_deref()
            {
                return conflict(&pname);
            }
            p.metadata.uid = old.metadata.uid.clone();
            p.metadata.creation_timestamp = old.metadata.creation_timestamp.clone();
            p.metadata.managed_fields = None;
            p.metadata.generation = old.metadata.generation;
            p.metadata.resource_version = old.metadata.resource_version.clone();
            let same = serde_json::to_value(&p).ok() == serde_json::to_value(old).ok();
            if !same {
                if p.spec != old.spec {
                    p.metadata.generation = Some(old.metadata.generation.unwrap_or(1) + 1);
                }
                if !dry_run {
                    p.metadata.resource_version = Some(inner.next_version());
                }
            } else {
                // A no-op: nothing changes, not even the resourceVersion.
                return with_warnings(
                    object_response(StatusCode::OK, res, policy_item(old, started), table),
                    &unknown,
                );
            }
            StatusCode::OK
        }
    };
    if !dry_run {
        inner.store.put(p.clone());
        let _ =
            inner.events.send((if code == StatusCode::CREATED { "ADDED" } else { "MODIFIED" }, p.clone()));
        inner.changes += 1;
    }
    with_warnings(object_response(code, res, policy_item(&p, started), table), &unknown)
}

/// `DELETE .../namespaces/NS/networkpolicies[?labelSelector=...]`: deletes every policy of the
/// namespace that the selector matches, and answers with the list of what it deleted (as the
/// API server's generic registry does), one DELETED event each for the watches.
fn delete_collection(
    inner: &mut Inner,
    res: &Res,
    ns: &str,
    q: &BTreeMap<String, String>,
    dry_run: bool,
) -> Response {
    let filter = match label_filter(q.get("labelSelector")) {
        Ok(f) => f,
        Err(r) => return *r,
    };
    if q.get("fieldSelector").is_some_and(|f| !f.is_empty()) {
        return bad_request("netdojo's API server takes no field selector on a collection delete");
    }
    let doomed: Vec<NetworkPolicy> = inner
        .store
        .list(Some(ns))
        .into_iter()
        .filter(|p| labels_match(&filter, p.metadata.labels.as_ref()))
        .cloned()
        .collect();
    if !dry_run && !doomed.is_empty() {
        for p in &doomed {
            inner.store.remove(ns, policy::name(p));
            let _ = inner.events.send(("DELETED", p.clone()));
        }
        inner.version += 1;
        inner.changes += 1;
    }
    let started = inner.started;
    let items = doomed.iter().map(|p| policy_item(p, started)).collect();
    list_response(inner, res, items, false)
}

fn with_warnings(mut r: Response, unknown: &[String]) -> Response {
    for f in unknown {
        if let Ok(v) = HeaderValue::from_str(&format!("299 - \"unknown field \\\"{f}\\\"\"")) {
            r.headers_mut().append("Warning", v);
        }
    }
    r
}

/// How long one kubectl command may run (the jail kills it after).
pub const KUBECTL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);
/// The output kept of each of kubectl's streams.
const KUBECTL_OUTPUT_CAP: usize = 256 * 1024;

/// An episode's API server in a network namespace of its own, with the real kubectl to run
/// against it. The namespace holds nothing but a loopback and the server's listening socket
/// (bound from a thread inside it), so kubectl, jailed in that namespace, reaches the API server
/// and nothing else: no pod, no host service, no network.
#[derive(Debug)]
pub struct AgentKubectl {
    server: ApiServer,
    netns: netdojo_linux::netns::Episode,
    ns_name: String,
    dir: PathBuf,
    kubeconfig: PathBuf,
    kubectl: PathBuf,
}

/// What one kubectl command printed.
#[derive(Debug, Clone)]
pub struct KubectlRun {
    pub ok: bool,
    pub text: String,
    /// Whether the API server accepted a change during the command.
    pub changed: bool,
}

impl AgentKubectl {
    /// Starts the server over `store` and `workload` in a fresh namespace of this process's
    /// episodes, and writes its kubeconfig. Needs root (a network namespace).
    pub fn start(kubectl: &Path, store: Store, workload: Workload) -> Result<Self, K8sError> {
        let mut netns = netdojo_linux::netns::Episode::new().map_err(server_err)?;
        let (ns_name, listener) = netns
            .create_with("kubeapi", || -> std::io::Result<std::net::TcpListener> {
                // Forked from this thread, `ip` runs in the new namespace.
                let up = std::process::Command::new("ip").args(["link", "set", "lo", "up"]).status()?;
                if !up.success() {
                    return Err(std::io::Error::other(format!("ip link set lo up: {up}")));
                }
                std::net::TcpListener::bind(("127.0.0.1", 0))
            })
            .map_err(server_err)?;
        let listener = listener.map_err(|e| server_err(format!("listening in {ns_name}: {e}")))?;
        let server = ApiServer::serve(listener, store, workload)?;
        let dir = std::env::temp_dir().join(format!("{ns_name}-kubeconfig"));
        std::fs::create_dir_all(&dir).map_err(|e| server_err(format!("{}: {e}", dir.display())))?;
        let kubeconfig = server.write_kubeconfig(&dir)?;
        Ok(Self { server, netns, ns_name, dir, kubeconfig, kubectl: kubectl.to_path_buf() })
    }

    pub fn server(&self) -> &ApiServer {
        &self.server
    }

    pub fn namespace(&self) -> &str {
        &self.ns_name
    }

    /// Runs one command line of the agent (`get netpol`, with or without `kubectl`) with `input`
    /// on stdin (what `-f -` reads). The line is split as a shell would split it, but no shell
    /// runs: kubectl is executed directly, in the jail (profile `agent`: no new processes, so
    /// no editor, no plugin, no credential helper), in the server's namespace, with the
    /// episode's kubeconfig and an empty HOME. `Err`: the jail could not run it.
    pub async fn run(&self, line: &str, input: Option<&str>) -> Result<KubectlRun, K8sError> {
        let Some(mut words) = shlex::split(line) else {
            return Ok(KubectlRun {
                ok: false,
                text: "error: the command line has an unterminated quote".into(),
                changed: false,
            });
        };
        if words.first().is_some_and(|w| w == "kubectl") {
            words.remove(0);
        }
        // No program can receive a NUL in an argument, nor an argument over the kernel's 128 KiB
        // (E2BIG): refused here, they are the agent's failed step, not errors of the jail
        // (both found by the hostile corpus). The command line gets the manifest's limit.
        if words.iter().any(|w| w.contains('\0')) || input.is_some_and(|i| i.contains('\0')) {
            return Ok(KubectlRun {
                ok: false,
                text: "error: the command line or the manifest contains a NUL byte".into(),
                changed: false,
            });
        }
        if line.len() > kubectl::MAX_INPUT {
            return Ok(KubectlRun {
                ok: false,
                text: format!("error: the command line is longer than {} bytes", kubectl::MAX_INPUT),
                changed: false,
            });
        }
        if words.first().is_some_and(|w| w == "edit") {
            return Ok(KubectlRun {
                ok: false,
                text:
                    "error: `kubectl edit` needs an interactive editor; use `kubectl get ... -o yaml`, then \
                       `kubectl apply -f -` with the edited manifest, or `kubectl patch`"
                        .into(),
                changed: false,
            });
        }
        if input.is_some_and(|i| i.len() > kubectl::MAX_INPUT) {
            return Ok(KubectlRun {
                ok: false,
                text: format!("error: the manifest is larger than {} bytes", kubectl::MAX_INPUT),
                changed: false,
            });
        }
        let before = self.server.changes();
        let mut spec = netdojo_jail::Spec::new(
            netdojo_jail::Profile::Agent,
            netdojo_linux::netns::ns_path(&self.ns_name),
        );
        spec.readable = vec![self.dir.clone()];
        if let Some(bin_dir) = self.kubectl.parent() {
            spec.readable.push(bin_dir.to_path_buf());
        }
        spec.cpu_seconds = KUBECTL_TIMEOUT.as_secs() + 1;
        let kubectl = self.kubectl.clone();
        let kubeconfig = self.kubeconfig.display().to_string();
        let input = input.unwrap_or("").as_bytes().to_vec();
        let ran = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = words.iter().map(String::as_str).collect();
            netdojo_jail::run::run(
                &spec,
                &kubectl,
                &args,
                &[("KUBECONFIG", &kubeconfig), ("HOME", "/tmp"), ("PATH", "/nonexistent"), ("LC_ALL", "C")],
                &input,
                KUBECTL_TIMEOUT,
                KUBECTL_OUTPUT_CAP,
            )
        })
        .await
        .map_err(server_err)?
        .map_err(server_err)?;
        if let Some(message) = netdojo_jail::setup_failure(ran.status, &ran.stderr) {
            return Err(server_err(format!("kubectl in the jail: {message}")));
        }
        let mut text = String::from_utf8_lossy(&ran.stdout).into_owned();
        let err = String::from_utf8_lossy(&ran.stderr);
        if !err.is_empty() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&err);
        }
        if ran.timed_out {
            text.push_str(&format!("\n(kubectl was stopped after {} s)", KUBECTL_TIMEOUT.as_secs()));
        }
        if ran.dropped > 0 {
            text.push_str(&format!("\n({} bytes of output dropped)", ran.dropped));
        }
        Ok(KubectlRun { ok: ran.status == Some(0), text, changed: self.server.changes() != before })
    }

    /// Stops the server and deletes the namespace and the kubeconfig (also done on drop).
    pub fn teardown(&mut self) {
        self.server.task.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
        self.netns.teardown();
    }
}

impl Drop for AgentKubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_and_percent_decoding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"-----BEGIN"), "LS0tLS1CRUdJTg==");
        assert_eq!(decode("app%3Dfrontend%2Cx"), "app=frontend,x");
        assert_eq!(decode("a+b%"), "a b%");
        assert_eq!(decode("%zz"), "%zz");
    }

    #[test]
    fn label_selectors_of_list_requests() {
        let f = label_filter(Some(&"app=frontend,tier!=db,!old,team".to_string())).expect("selector");
        let labels: BTreeMap<String, String> = [("app", "frontend"), ("team", "x")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert!(labels_match(&f, Some(&labels)));
        let f = label_filter(Some(&"app==cart".to_string())).expect("selector");
        assert!(!labels_match(&f, Some(&labels)));
        assert!(label_filter(None).expect("none").match_expressions.is_none());
        let sel = |s: &str| label_filter(Some(&s.to_string()));
        let cart: BTreeMap<String, String> = [("app".to_string(), "cart".to_string())].into();
        assert!(labels_match(
            &sel("app in (frontend, cart),tier notin (db),!old").expect("set"),
            Some(&cart)
        ));
        assert!(labels_match(&sel("tier notin (db)").expect("notin"), None), "no label: notin matches");
        // apimachinery's own parser tests (kubernetes/kubernetes,
        // staging/src/k8s.io/apimachinery/pkg/labels/selector_test.go: TestSelectorParse,
        // TestSetSelectorParser, TestSelectorMatches, TestRequirementSelectorMatching): the
        // strings it accepts and refuses, and what they match.
        for good in [
            "x=a,y=b,z=c",
            "x!=a,y=b",
            "x=",
            "x= ",
            "x=,z= ",
            "x= ,z= ",
            "!x",
            "x>1",
            "x>1,z<5",
            "\rx",
            "this-is-a-dns.domain.com/key-with-dash",
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
            "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
            "foo  in\t (abc)",
            "x notin\n (abc)",
            "x  notin\t\t\t(abc,def)",
            "x in (abc,def)",
            "x in (abc,)",
            "x in ()",
            "x notin (abc,def),bar,z in (),w",
            "x,y in (a)",
            "x=a",
            "x<7",
            "x=a,y!=b,z in (h,i,j)",
            "x notin ( )",
            "x notin (, a)",
            "a ",
            "a in (x,y,notin, z,in)",
        ] {
            assert!(sel(good).is_ok(), "{good:?} refused");
        }
        let values = |s: &str| {
            sel(s).expect("parsed").match_expressions.expect("requirements")[0]
                .values
                .clone()
                .unwrap_or_default()
        };
        assert_eq!(values("x in (abc,)"), ["", "abc"]);
        assert_eq!(values("x in ()"), [""]);
        assert_eq!(values("a in (x,y,notin, z,in)"), ["in", "notin", "x", "y", "z"]);
        for bad in [
            "x=a||y=b",
            "x==a==b",
            "!x=a",
            "x<a",
            ",x,y",
            "x nott in (y)",
            "a in (xyz),",
            "a in (xyz)b notin ()",
            "a in (xyz abc)",
            "a notin(",
            "a (",
            "(",
        ] {
            match sel(bad) {
                Ok(f) => panic!("{bad:?} parsed: {f:?}"),
                Err(r) => assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{bad}"),
            }
        }
        let set = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let matches =
            |s: &str, labels: &BTreeMap<String, String>| labels_match(&sel(s).expect("parsed"), Some(labels));
        for (s, labels, want) in [
            ("x=y", set(&[("x", "y")]), true),
            ("x=y,z=w", set(&[("x", "y"), ("z", "w")]), true),
            ("x!=y,z!=w", set(&[("x", "z"), ("z", "a")]), true),
            ("notin=in", set(&[("notin", "in")]), true),
            ("x", set(&[("x", "z")]), true),
            ("!x", set(&[("y", "z")]), true),
            ("x>1", set(&[("x", "2")]), true),
            ("x<1", set(&[("x", "0")]), true),
            ("x=z", set(&[]), false),
            ("x=y", set(&[("x", "z")]), false),
            ("x=y,z=w", set(&[("x", "w"), ("z", "w")]), false),
            ("x!=y,z!=w", set(&[("x", "z"), ("z", "w")]), false),
            ("x", set(&[("y", "z")]), false),
            ("!x", set(&[("x", "z")]), false),
            ("x>1", set(&[("x", "0")]), false),
            ("x<1", set(&[("x", "2")]), false),
            ("foo=bar,foobar=bar,baz=blah", set(&[("foo", "bar"), ("baz", "blah")]), false),
            ("x in (foo),y notin (alpha)", set(&[("x", "foo"), ("y", "baz")]), true),
            ("x in (foo),y in (alpha)", set(&[("x", "foo"), ("y", "baz")]), false),
            ("x notin (),y", set(&[("y", "")]), true),
            ("!x,y", set(&[("y", "")]), true),
            ("x notin (),!y", set(&[("y", "")]), false),
            ("x in ()", set(&[("y", "baz")]), false),
            ("z>1", set(&[("z", "2")]), true),
            ("z>1", set(&[("z", "v2")]), false),
        ] {
            assert_eq!(matches(s, &labels), want, "{s:?} on {labels:?}");
        }
    }

    #[test]
    fn unknown_fields_are_the_ones_a_policy_drops() {
        let input = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "x", "managedFields": [{}]}, "status": {},
            "spec": {"podSelector": {}, "ingres": [{}], "ingress": [{"form": [], "ports": [{"port": 80, "prot": 1}]}]}});
        let (p, unknown) = decode_policy(input.clone(), Some("Warn")).map_err(|_| "refused").expect("warn");
        assert_eq!(unknown, ["spec.ingres", "spec.ingress[0].ports[0].prot"]);
        assert_eq!(policy::name(&p), "x");
        assert!(decode_policy(input.clone(), Some("Strict")).is_err());
        assert!(decode_policy(input.clone(), Some("Ignore")).is_ok_and(|(_, u)| u.is_empty()));
        assert!(decode_policy(input, Some("Loose")).is_err());
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}});
        assert!(decode_policy(pod, None).is_err());
    }

    #[test]
    fn strategic_merge_replaces_lists_and_honours_directives() {
        let mut doc = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"ingress": [{"ports": [{"port": 1}]}, {}]}});
        let patch = json!({"metadata": {"labels": {"b": null, "c": "3"}}, "spec": {"ingress": [{}],
            "$setElementOrder/ingress": [{}]}});
        strategic_merge(&mut doc, &patch).expect("merge");
        assert_eq!(doc, json!({"metadata": {"labels": {"a": "1", "c": "3"}}, "spec": {"ingress": [{}]}}));
        strategic_merge(&mut doc, &json!({"metadata": {"labels": {"$patch": "replace", "z": "9"}}}))
            .expect("replace");
        assert_eq!(doc["metadata"]["labels"], json!({"z": "9"}));
        strategic_merge(&mut doc, &json!({"metadata": {"labels": {"$patch": "delete"}}})).expect("delete");
        assert_eq!(doc["metadata"], json!({}));
        assert!(strategic_merge(&mut doc, &json!({"spec": {"$patch": "merge-ish"}})).is_err());
    }

    #[test]
    fn the_openapi_documents_carry_the_kinds_and_the_patch_parameters() {
        let v3 = openapi_v3(NP_GROUP);
        let np = &v3["components"]["schemas"]["io.k8s.api.networking.v1.NetworkPolicy"];
        assert_eq!(np["x-kubernetes-group-version-kind"][0]["kind"], "NetworkPolicy");
        // A reference with a description beside it, wrapped as the API server's v3 documents do.
        let spec = &np["properties"]["spec"]["allOf"][0]["$ref"];
        assert_eq!(spec, "#/components/schemas/io.k8s.api.networking.v1.NetworkPolicySpec");
        let patch =
            &v3["paths"]["/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies/{name}"]["patch"];
        assert!(
            patch["parameters"].as_array().is_some_and(|p| p.iter().any(|p| p["name"] == "fieldValidation"))
        );
        let v2 = openapi_v2();
        assert!(v2["definitions"]["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"].is_array());
        assert!(v2.to_string().contains("#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        let root = openapi_v3_root();
        assert!(root["paths"]["apis/networking.k8s.io/v1"]["serverRelativeURL"].as_str().is_some());
    }
}
