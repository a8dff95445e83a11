//! Transports: stdio (newline-delimited JSON-RPC) and streamable HTTP on 127.0.0.1, both
//! putting the `network` object of draft 002 §3 inside `capabilities` of the `initialize`
//! answer. rmcp's typed `ServerCapabilities` has no place for a key of its own (it carries the
//! object under `experimental` and `extensions`, where typed SDKs read it), so the answer is
//! completed on its way out.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Response, header};
use axum::middleware::Next;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::auth::Tokens;
use crate::episode::EpisodeLink;
use crate::jsonrpc::{self, Refusal};
use crate::server::{NetworkServer, Role};

/// Puts `network` into the capabilities of an `initialize` result (a JSON-RPC response whose
/// result has `serverInfo` and `capabilities`). Other messages pass unchanged.
pub fn inject(message: &mut Value, network: &Value) -> bool {
    let Some(result) = message.get_mut("result") else { return false };
    if result.get("serverInfo").is_none() {
        return false;
    }
    match result.get_mut("capabilities").and_then(Value::as_object_mut) {
        Some(caps) => {
            caps.insert("network".into(), network.clone());
            true
        }
        None => false,
    }
}

/// A newline-delimited JSON-RPC transport (MCP's stdio framing) over any reader and writer.
///
/// Each line is read here first ([`jsonrpc`]): what rmcp could not read is answered with
/// its JSON-RPC error on the output and the session goes on, and a batch is split for rmcp and
/// its answers gathered back into one line.
#[derive(Debug)]
pub struct LineTransport<R, W> {
    read: BufReader<R>,
    /// The line being read.
    pending: Vec<u8>,
    out: Arc<Mutex<W>>,
    network: Value,
    /// Shared with `send`, whose futures outlive `&mut self`.
    state: Arc<std::sync::Mutex<LineState>>,
    /// The messages of a batch not yet handed to rmcp.
    queue: VecDeque<ClientJsonRpcMessage>,
}

/// What `send` learns that `receive` needs, and the reverse.
#[derive(Debug, Default)]
struct LineState {
    /// The protocol version of the `initialize` answer: whether batches are allowed.
    version: Option<String>,
    batches: Vec<Batch>,
}

/// A batch whose answers are being gathered.
#[derive(Debug)]
struct Batch {
    /// The ids of its requests rmcp has not answered yet.
    waiting: Vec<Value>,
    answers: Vec<Value>,
}

impl LineState {
    /// Files `message` with the batch that waits for its id. `None`: it belongs to no batch.
    /// `Some(Some(line))`: it completed its batch, whose answer is `line`.
    fn file(&mut self, message: &Value) -> Option<Option<Value>> {
        if message.get("result").is_none() && message.get("error").is_none() {
            return None;
        }
        let id = message.get("id")?;
        let at = self.batches.iter().position(|b| b.waiting.contains(id))?;
        let batch = &mut self.batches[at];
        batch.waiting.retain(|w| w != id);
        batch.answers.push(message.clone());
        Some(self.complete(at))
    }

    /// A request rmcp will not answer (cancelled): its batch stops waiting for it.
    fn forget(&mut self, id: &Value) -> Option<Value> {
        let at = self.batches.iter().position(|b| b.waiting.contains(id))?;
        self.batches[at].waiting.retain(|w| w != id);
        self.complete(at)
    }

    fn complete(&mut self, at: usize) -> Option<Value> {
        if !self.batches[at].waiting.is_empty() {
            return None;
        }
        let batch = self.batches.remove(at);
        // A batch of cancelled requests only has no answer left to give.
        (!batch.answers.is_empty()).then_some(Value::Array(batch.answers))
    }
}

fn lock(state: &std::sync::Mutex<LineState>) -> std::sync::MutexGuard<'_, LineState> {
    // The state stays consistent whatever panicked while holding it: each change is one step.
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn write_line<W: AsyncWrite + Unpin>(out: &Mutex<W>, message: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut out = out.lock().await;
    out.write_all(&line).await?;
    out.flush().await
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> LineTransport<R, W> {
    pub fn new(read: R, write: W, network: Value) -> Self {
        Self {
            read: BufReader::new(read),
            pending: Vec::new(),
            out: Arc::new(Mutex::new(write)),
            network,
            state: Arc::default(),
            queue: VecDeque::new(),
        }
    }
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin + Send + 'static> LineTransport<R, W> {
    /// Writes an answer of the transport's own. On a task of its own: rmcp drops a `receive`
    /// that loses its select, and a write cut there would leave half a line on the output.
    fn answer(&self, message: Value) {
        let out = self.out.clone();
        tokio::spawn(async move {
            if let Err(e) = write_line(&out, &message).await {
                tracing::warn!("stdio: an answer could not be written ({e})");
            }
        });
    }

    /// One line the client sent: the message for rmcp, if any; the transport's own answers
    /// are written.
    fn take(&mut self, line: &[u8]) -> Option<ClientJsonRpcMessage> {
        match jsonrpc::parse(line) {
            Err(e) => self.answer(e.to_message()),
            Ok(Value::Array(items)) => self.batch(items),
            Ok(v) => match jsonrpc::admit(v) {
                Ok(m) => {
                    if let Some(id) = jsonrpc::cancelled_id(&m) {
                        self.forget(&id);
                    }
                    return Some(m);
                }
                Err(Refusal::Answer(e)) => self.answer(e.to_message()),
                Err(Refusal::Drop(why)) => tracing::warn!("stdio: a message dropped: {why}"),
            },
        }
        None
    }

    /// Splits a batch: its messages queued for rmcp, its refusals kept for its answer.
    fn batch(&mut self, items: Vec<Value>) {
        let version = lock(&self.state).version.clone();
        if let Some(e) = jsonrpc::refuse_batch(&items, version.as_deref()) {
            return self.answer(e.to_message());
        }
        let (mut waiting, mut answers, mut cancelled) = (Vec::new(), Vec::new(), Vec::new());
        for item in items {
            match jsonrpc::admit_in_batch(item) {
                Ok(m) => {
                    waiting.extend(jsonrpc::request_id(&m));
                    cancelled.extend(jsonrpc::cancelled_id(&m));
                    self.queue.push_back(m);
                }
                Err(Refusal::Answer(e)) => answers.push(e.to_message()),
                Err(Refusal::Drop(why)) => tracing::warn!("stdio: a batch's message dropped: {why}"),
            }
        }
        if waiting.is_empty() {
            // Only notifications and responses (and refusals): nothing of rmcp's to wait for.
            if !answers.is_empty() {
                self.answer(Value::Array(answers));
            }
        } else {
            // Filed before rmcp sees any of them, so that no answer can come first.
            lock(&self.state).batches.push(Batch { waiting, answers });
        }
        for id in cancelled {
            self.forget(&id);
        }
    }

    /// A cancelled request rmcp will not answer: its batch, if complete without it, is written.
    fn forget(&mut self, id: &Value) {
        let done = lock(&self.state).forget(id);
        if let Some(answer) = done {
            self.answer(answer);
        }
    }
}

/// stdin and stdout.
pub fn stdio(network: Value) -> LineTransport<tokio::io::Stdin, tokio::io::Stdout> {
    LineTransport::new(tokio::io::stdin(), tokio::io::stdout(), network)
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), std::io::Error>> + Send + 'static {
        let out = self.out.clone();
        let network = self.network.clone();
        let state = self.state.clone();
        async move {
            let mut v = serde_json::to_value(&item).map_err(std::io::Error::other)?;
            let line = {
                let mut state = lock(&state);
                if inject(&mut v, &network)
                    && let Some(version) = v["result"]["protocolVersion"].as_str()
                {
                    state.version = Some(version.to_string());
                }
                match state.file(&v) {
                    None => Some(v),
                    Some(batch) => batch,
                }
            };
            match line {
                Some(line) => write_line(&out, &line).await,
                None => Ok(()),
            }
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if let Some(m) = self.queue.pop_front() {
                return Some(m);
            }
            // Bytes, not a String: a line of invalid UTF-8 is the client's error to hear of,
            // not the end of the session. `read_until` appends to `pending` as it reads, so a
            // receive rmcp's select drops part-way loses nothing: the next one goes on with it.
            match self.read.read_until(b'\n', &mut self.pending).await {
                Ok(0) if self.pending.is_empty() => return None,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!("stdio: reading failed ({e}); the session ends");
                    return None;
                }
            }
            let line = std::mem::take(&mut self.pending);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Some(m) = self.take(&line) {
                return Some(m);
            }
        }
    }

    async fn close(&mut self) -> Result<(), std::io::Error> {
        self.out.lock().await.flush().await
    }
}

/// The largest request body the HTTP layer reads to see whether it is an `initialize`.
const MAX_BODY: usize = 16 << 20;

/// `data:` lines of an SSE body completed with `network` where they carry an `initialize`
/// answer.
fn inject_sse(text: &str, network: &Value) -> Option<String> {
    let mut changed = false;
    let mut out = String::with_capacity(text.len() + 512);
    for line in text.split_inclusive('\n') {
        let (content, newline) = match line.strip_suffix('\n') {
            Some(c) => (c.strip_suffix('\r').unwrap_or(c), &line[c.len()..]),
            None => (line, ""),
        };
        if let Some(data) = content.strip_prefix("data:")
            && let Ok(mut v) = serde_json::from_str::<Value>(data.trim_start())
            && inject(&mut v, network)
        {
            out.push_str("data: ");
            out.push_str(&v.to_string());
            out.push_str(newline);
            changed = true;
            continue;
        }
        out.push_str(line);
    }
    changed.then_some(out)
}

/// Completes the answer to an `initialize` POST (JSON, or SSE in a session) with `network`.
/// Only that answer is read whole: it ends after one message, unlike a session's GET stream.
async fn complete(res: Response<Body>, network: &Value) -> Response<Body> {
    let content_type =
        res.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let (json, sse) =
        (content_type.starts_with("application/json"), content_type.starts_with("text/event-stream"));
    if !json && !sse {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let out = if json {
        serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|mut v| inject(&mut v, network).then(|| v.to_string()))
    } else {
        std::str::from_utf8(&bytes).ok().and_then(|t| inject_sse(t, network))
    };
    match out {
        Some(out) => {
            parts.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(out.len()));
            Response::from_parts(parts, Body::from(out))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

fn service(
    server: NetworkServer,
    cancel: &CancellationToken,
) -> StreamableHttpService<NetworkServer, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default();
    // MCP sessions: a session's GET stream carries the notifications that belong to no request
    // (a confirmed commit rolled back by its timer, changes made through another session).
    // The episode's state is shared by every session.
    config.legacy_session_mode = true;
    // No keep-alive: a POST answer ends with its message (the `initialize` answer is read
    // whole to complete it), and clients are on 127.0.0.1.
    config.sse_keep_alive = None;
    config.cancellation_token = cancel.child_token();
    StreamableHttpService::new(
        move || Ok(server.for_session()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// Who may use the HTTP endpoints.
#[derive(Debug, Clone)]
pub enum Access {
    /// Every client has this role (no token file: the endpoints are on 127.0.0.1).
    Everyone(Role),
    /// A client's bearer token gives its role; a request without a known token is refused
    /// with 401.
    Tokens(Arc<Tokens>),
}

/// 401 with a Bearer challenge (RFC 6750, as MCP's authorization spec answers an HTTP request
/// without a valid token). The body says why, never with the token.
fn unauthorized(presented: bool) -> Response<Body> {
    let challenge = if presented {
        r#"Bearer realm="netdojo-mcp", error="invalid_token", error_description="unknown token""#
    } else {
        r#"Bearer realm="netdojo-mcp""#
    };
    let mut res = Response::new(Body::from(if presented {
        "Unauthorized: unknown bearer token"
    } else {
        "Unauthorized: send Authorization: Bearer TOKEN (a token of the server's --tokens file)"
    }));
    *res.status_mut() = axum::http::StatusCode::UNAUTHORIZED;
    res.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    res
}

/// The HTTP endpoints: `/mcp` for the whole network (tools take `device`), `/mcp/DEVICE` for
/// each device (the seed's one server per device), everyone with `role`.
pub fn router(
    link: Arc<EpisodeLink>,
    devices: &[String],
    role: Role,
    settings: crate::device::Settings,
    cancel: &CancellationToken,
) -> Router {
    router_with(link, devices, Access::Everyone(role), settings, cancel)
}

/// The HTTP endpoints with the given access.
pub fn router_with(
    link: Arc<EpisodeLink>,
    devices: &[String],
    access: Access,
    settings: crate::device::Settings,
    cancel: &CancellationToken,
) -> Router {
    // With tokens, a request whose role the layer below did not set would get the least.
    let role = match &access {
        Access::Everyone(role) => *role,
        Access::Tokens(_) => Role::ReadOnly,
    };
    let mut capabilities: HashMap<String, Value> = HashMap::new();
    let network = NetworkServer::new(link.clone(), None, role, settings);
    capabilities.insert("/mcp".into(), network.capability());
    let mut app = Router::new().route_service("/mcp", service(network, cancel));
    for d in devices {
        let server = NetworkServer::new(link.clone(), Some(d.clone()), role, settings);
        let path = format!("/mcp/{d}");
        capabilities.insert(path.clone(), server.capability());
        app = app.route_service(&path, service(server, cancel));
    }
    let capabilities = Arc::new(capabilities);
    app.layer(axum::middleware::from_fn(move |req: Request, next: Next| {
        let capabilities = capabilities.clone();
        let access = access.clone();
        async move {
            let (mut parts, body) = req.into_parts();
            let role = match &access {
                Access::Everyone(role) => *role,
                Access::Tokens(tokens) => {
                    let presented = parts.headers.get(header::AUTHORIZATION);
                    let role = tokens.authorize(presented.and_then(|v| v.to_str().ok()));
                    match role {
                        Some(role) => role,
                        None => {
                            tracing::warn!(
                                path = parts.uri.path(),
                                "HTTP request refused: {}",
                                if presented.is_some() { "unknown bearer token" } else { "no bearer token" }
                            );
                            return unauthorized(presented.is_some());
                        }
                    }
                }
            };
            // The token stops here: nothing below (rmcp, the handlers, their logs) sees it.
            parts.headers.remove(header::AUTHORIZATION);
            parts.extensions.insert(role);
            let network = capabilities.get(parts.uri.path()).cloned();
            let initialize = network.is_some() && parts.method == axum::http::Method::POST;
            let req = if initialize {
                let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
                    Ok(b) => b,
                    Err(_) => {
                        let mut res = Response::new(Body::from("request body too large"));
                        *res.status_mut() = axum::http::StatusCode::PAYLOAD_TOO_LARGE;
                        return res;
                    }
                };
                let is_init = serde_json::from_slice::<Value>(&bytes)
                    .ok()
                    .is_some_and(|v| v.get("method").and_then(Value::as_str) == Some("initialize"));
                let req = Request::from_parts(parts, Body::from(bytes));
                if !is_init {
                    return next.run(req).await;
                }
                req
            } else {
                return next.run(Request::from_parts(parts, body)).await;
            };
            let res = next.run(req).await;
            match network {
                Some(network) => complete(res, &network).await,
                None => res,
            }
        }
    }))
}

/// Serves `router` on 127.0.0.1:`port` (0: any free port) until `cancel`. Returns the bound
/// address once listening.
pub async fn serve_http(
    app: Router,
    port: u16,
    cancel: CancellationToken,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let handle = tokio::spawn(async move {
        axum::serve(listener, app).with_graceful_shutdown(async move { cancel.cancelled().await }).await
    });
    Ok((addr, handle))
}
