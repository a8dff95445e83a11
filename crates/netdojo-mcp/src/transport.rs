//! Transports: stdio (newline-delimited JSON-RPC) and streamable HTTP on 127.0.0.1, both
//! putting the `network` object of draft 002 §3 inside `capabilities` of the `initialize`
//! answer. rmcp's typed `ServerCapabilities` has no place for a key of its own (it carries the
//! object under `experimental` and `extensions`, where typed SDKs read it), so the answer is
//! completed on its way out.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, Response, StatusCode, header};
use axum::middleware::Next;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::auth::Tokens;
use crate::episode::EpisodeLink;
use crate::jsonrpc::{self, JsonRpcError, Refusal};
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

/// The JSON-RPC messages of an answer's body: JSON (one message or an array), or the `data:`
/// lines of an SSE stream.
fn messages(content_type: &str, bytes: &[u8]) -> Vec<Value> {
    if content_type.starts_with("application/json") {
        return match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Array(items)) => items,
            Ok(v) => vec![v],
            Err(_) => Vec::new(),
        };
    }
    let Ok(text) = std::str::from_utf8(bytes) else { return Vec::new() };
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .collect()
}

fn content_type(headers: &axum::http::HeaderMap) -> String {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

/// Completes the answer to an `initialize` POST (JSON, or SSE in a session) with `network`;
/// returns it with the protocol version it negotiated. Only that answer is read whole: it ends
/// after one message, unlike a session's GET stream.
async fn complete(res: Response<Body>, network: &Value) -> (Response<Body>, Option<String>) {
    let content_type = content_type(res.headers());
    let (json, sse) =
        (content_type.starts_with("application/json"), content_type.starts_with("text/event-stream"));
    if !json && !sse {
        return (res, None);
    }
    let (mut parts, body) = res.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return (Response::from_parts(parts, Body::empty()), None);
    };
    let version = messages(&content_type, &bytes).iter().find_map(|m| {
        let result = m.get("result")?;
        result.get("serverInfo")?;
        result.get("protocolVersion")?.as_str().map(str::to_string)
    });
    let out = if json {
        serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|mut v| inject(&mut v, network).then(|| v.to_string()))
    } else {
        std::str::from_utf8(&bytes).ok().and_then(|t| inject_sse(t, network))
    };
    let res = match out {
        Some(out) => {
            parts.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(out.len()));
            Response::from_parts(parts, Body::from(out))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    };
    (res, version)
}

/// How long a session may go without a message before it is closed, by default.
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// What the HTTP transport takes besides who may use it.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Browser origins allowed besides the loopback ones (`--allow-origin`).
    pub allowed_origins: Vec<AllowedOrigin>,
    /// A session with no message, either way, for this long is closed; its id then answers
    /// 404 and its client initializes a new one (`--session-idle-timeout`).
    pub session_idle_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self { allowed_origins: Vec::new(), session_idle_timeout: DEFAULT_SESSION_IDLE_TIMEOUT }
    }
}

fn service(
    server: NetworkServer,
    options: &HttpOptions,
    cancel: &CancellationToken,
) -> (StreamableHttpService<NetworkServer, LocalSessionManager>, Arc<LocalSessionManager>) {
    let mut config = StreamableHttpServerConfig::default();
    // MCP sessions: a session's GET stream carries the notifications that belong to no request
    // (a confirmed commit rolled back by its timer, changes made through another session).
    // The episode's state is shared by every session.
    config.legacy_session_mode = true;
    // No keep-alive: a POST answer ends with its message (the `initialize` answer is read
    // whole to complete it), and clients are on 127.0.0.1.
    config.sse_keep_alive = None;
    config.cancellation_token = cancel.child_token();
    // rmcp's session worker ends a session that saw no message for `keep_alive` and drops it
    // from the manager, after which rmcp answers its id with 404.
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(options.session_idle_timeout);
    let sessions = Arc::new(sessions);
    let service = StreamableHttpService::new(move || Ok(server.for_session()), sessions.clone(), config);
    (service, sessions)
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

/// A refusal sent before the request's body was read: the connection is closed after it, or
/// the unread body would be taken for the next request on a kept-alive connection.
fn closing(mut res: Response<Body>) -> Response<Body> {
    res.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    res
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
    *res.status_mut() = StatusCode::UNAUTHORIZED;
    res.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    closing(res)
}

/// A JSON-RPC message as an HTTP answer.
fn json_answer(status: StatusCode, message: &Value) -> Response<Body> {
    let mut res = Response::new(Body::from(message.to_string()));
    *res.status_mut() = status;
    res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}

/// The HTTP status of an error the layer answers for a single message. -32700 and -32600:
/// 400, the body could not be taken as a message. -32602: 200, the request was read and is
/// answered with its JSON-RPC error as a single JSON response, which the streamable HTTP
/// transport allows for any request (rmcp answers its own -32602 with 200 too).
fn status_of(e: &JsonRpcError) -> StatusCode {
    if e.code == jsonrpc::INVALID_PARAMS { StatusCode::OK } else { StatusCode::BAD_REQUEST }
}

/// A browser origin allowed to call the HTTP endpoints: `scheme://host[:port]` (a missing
/// port is the scheme's default, `:*` any port), or `null`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedOrigin {
    Null,
    Tuple { scheme: String, host: String, port: Option<u16> },
}

#[derive(Debug, thiserror::Error)]
#[error("--allow-origin {0}: an origin is scheme://host[:port] (or :* for any port), or null")]
pub struct OriginError(String);

/// An `Origin` value as (scheme, host, port), the port the scheme's default when omitted
/// (RFC 6454 §4). `None`: no origin of that form (or `null`).
fn origin_tuple(value: &str) -> Option<(String, String, Option<u16>)> {
    let uri = axum::http::Uri::try_from(value.trim()).ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let authority = uri.authority()?;
    if authority.as_str().contains('@') || !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return None;
    }
    let port = authority.port_u16().or(match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    });
    Some((scheme, authority.host().to_ascii_lowercase(), port))
}

impl std::str::FromStr for AllowedOrigin {
    type Err = OriginError;

    fn from_str(s: &str) -> Result<Self, OriginError> {
        if s.trim().eq_ignore_ascii_case("null") {
            return Ok(Self::Null);
        }
        let (base, any_port) = match s.trim().strip_suffix(":*") {
            Some(base) => (base, true),
            None => (s.trim(), false),
        };
        let (scheme, host, port) = origin_tuple(base).ok_or_else(|| OriginError(s.to_string()))?;
        if any_port && base.rsplit_once(':').is_some_and(|(_, p)| p.chars().all(|c| c.is_ascii_digit())) {
            return Err(OriginError(s.to_string()));
        }
        Ok(Self::Tuple { scheme, host, port: if any_port { None } else { port } })
    }
}

/// Loopback origins (any port, http or https) and the allowed ones.
#[derive(Debug)]
struct Origins(Vec<AllowedOrigin>);

impl Origins {
    /// DNS rebinding: a page of any site can resolve its own name to 127.0.0.1 and reach
    /// these endpoints from a browser, which then sends that site's Origin.
    fn allows(&self, origin: &HeaderValue) -> bool {
        let Ok(origin) = origin.to_str() else { return false };
        if origin.trim().eq_ignore_ascii_case("null") {
            return self.0.contains(&AllowedOrigin::Null);
        }
        let Some((scheme, host, port)) = origin_tuple(origin) else { return false };
        if matches!(scheme.as_str(), "http" | "https")
            && matches!(host.as_str(), "127.0.0.1" | "localhost" | "[::1]")
        {
            return true;
        }
        self.0.iter().any(|allowed| match allowed {
            AllowedOrigin::Null => false,
            AllowedOrigin::Tuple { scheme: s, host: h, port: p } => {
                *s == scheme && *h == host && (p.is_none() || *p == port)
            }
        })
    }
}

fn forbidden_origin(origin: &HeaderValue) -> Response<Body> {
    let shown = origin.to_str().unwrap_or("(not text)");
    let error = JsonRpcError::invalid_request(
        Value::Null,
        format!("Origin {shown} is not allowed (loopback origins and the server's --allow-origin only)"),
    );
    closing(json_answer(StatusCode::FORBIDDEN, &error.to_message()))
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
    router_with(link, devices, Access::Everyone(role), settings, HttpOptions::default(), cancel)
}

/// What the layer in front of rmcp keeps per endpoint and per session.
struct Gate {
    access: Access,
    origins: Origins,
    /// Each endpoint's `network` capability and sessions.
    endpoints: HashMap<String, (Value, Arc<LocalSessionManager>)>,
    /// The protocol version each session negotiated, read from its `initialize` answer.
    versions: std::sync::Mutex<HashMap<String, String>>,
}

impl Gate {
    fn versions(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        // A map of strings: whatever panicked while holding it left it whole.
        self.versions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Remembers the version of a new session, and forgets those of closed ones.
    async fn negotiated(&self, session: String, version: String) {
        let mut live = std::collections::HashSet::new();
        for (_, sessions) in self.endpoints.values() {
            live.extend(sessions.sessions.read().await.keys().map(|id| id.to_string()));
        }
        let mut versions = self.versions();
        versions.retain(|id, _| live.contains(id));
        versions.insert(session, version);
    }

    async fn handle(self: Arc<Self>, req: Request, next: Next) -> Response<Body> {
        let (mut parts, body) = req.into_parts();
        // Before the token: a page a browser was lured to must learn nothing, not even
        // whether a token is needed.
        if let Some(origin) = parts.headers.get(header::ORIGIN)
            && !self.origins.allows(origin)
        {
            tracing::warn!(path = parts.uri.path(), "HTTP request refused: Origin {:?} not allowed", origin);
            return forbidden_origin(origin);
        }
        let role = match &self.access {
            Access::Everyone(role) => *role,
            Access::Tokens(tokens) => {
                let presented = parts.headers.get(header::AUTHORIZATION);
                match tokens.authorize(presented.and_then(|v| v.to_str().ok())) {
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
        let endpoint = self.endpoints.get(parts.uri.path()).cloned();
        let Some((network, sessions)) = endpoint.filter(|_| parts.method == Method::POST) else {
            return next.run(Request::from_parts(parts, body)).await;
        };
        let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
            let mut res = Response::new(Body::from("request body too large"));
            *res.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
            return closing(res);
        };
        let message = match jsonrpc::parse(&bytes) {
            Ok(Value::Array(items)) => return self.batch(parts, items, &sessions, next).await,
            Ok(message) => message,
            Err(e) => return json_answer(StatusCode::BAD_REQUEST, &e.to_message()),
        };
        let initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
        match jsonrpc::admit(message) {
            Ok(_) => {}
            Err(Refusal::Answer(e)) => return json_answer(status_of(&e), &e.to_message()),
            // A notification or response rmcp cannot read: the transport spec's answer to one
            // a server does not accept is an HTTP error, here with a JSON-RPC body.
            Err(Refusal::Drop(why)) => {
                let e = JsonRpcError::invalid_request(Value::Null, why);
                return json_answer(StatusCode::BAD_REQUEST, &e.to_message());
            }
        }
        let res = next.run(Request::from_parts(parts, Body::from(bytes))).await;
        if !initialize {
            return res;
        }
        let (res, version) = complete(res, &network).await;
        let session = res.headers().get(HEADER_SESSION_ID).and_then(|v| v.to_str().ok()).map(str::to_string);
        if let (Some(session), Some(version)) = (session, version) {
            self.negotiated(session, version).await;
        }
        res
    }

    /// A JSON-RPC batch: split for rmcp, one POST each, in the session's protocol version if it
    /// has batches; the answers gathered into one JSON array.
    async fn batch(
        &self,
        parts: axum::http::request::Parts,
        items: Vec<Value>,
        sessions: &LocalSessionManager,
        next: Next,
    ) -> Response<Body> {
        let session = parts.headers.get(HEADER_SESSION_ID).and_then(|v| v.to_str().ok()).map(str::to_string);
        let version = match &session {
            None => None,
            Some(id) => {
                if !sessions.has_session(&SessionId::from(id.as_str())).await.unwrap_or(false) {
                    let e =
                        JsonRpcError::invalid_request(Value::Null, "session not found: initialize a new one");
                    return json_answer(StatusCode::NOT_FOUND, &e.to_message());
                }
                let known = self.versions().get(id).cloned();
                // A session this layer did not see initialize (none yet): the version header,
                // which clients send on every request from 2025-06-18 on; without it the
                // transport spec has servers assume 2025-03-26.
                known.or_else(|| {
                    Some(
                        parts
                            .headers
                            .get("mcp-protocol-version")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("2025-03-26")
                            .to_string(),
                    )
                })
            }
        };
        if let Some(e) = jsonrpc::refuse_batch(&items, version.as_deref()) {
            return json_answer(StatusCode::BAD_REQUEST, &e.to_message());
        }
        let role = parts.extensions.get::<Role>().copied();
        let mut answers = Vec::new();
        let mut calls = tokio::task::JoinSet::new();
        for item in items {
            let body = item.to_string();
            match jsonrpc::admit_in_batch(item) {
                Ok(m) => {
                    let id = jsonrpc::request_id(&m);
                    let mut req = Request::new(Body::from(body));
                    *req.method_mut() = Method::POST;
                    *req.uri_mut() = parts.uri.clone();
                    *req.version_mut() = parts.version;
                    *req.headers_mut() = parts.headers.clone();
                    req.headers_mut().remove(header::CONTENT_LENGTH);
                    if let Some(role) = role {
                        req.extensions_mut().insert(role);
                    }
                    let next = next.clone();
                    calls.spawn(async move { answer_of(next.run(req).await, id).await });
                }
                Err(Refusal::Answer(e)) => answers.push(e.to_message()),
                Err(Refusal::Drop(why)) => tracing::warn!("HTTP: a batch's message dropped: {why}"),
            }
        }
        while let Some(answer) = calls.join_next().await {
            match answer {
                Ok(Some(answer)) => answers.push(answer),
                Ok(None) => {}
                Err(e) => tracing::warn!("HTTP: a batch's message was lost: {e}"),
            }
        }
        if answers.is_empty() {
            // Only notifications and responses: accepted, as one of them alone would be.
            let mut res = Response::new(Body::empty());
            *res.status_mut() = StatusCode::ACCEPTED;
            return res;
        }
        json_answer(StatusCode::OK, &Value::Array(answers))
    }
}

/// The answer rmcp gave to one message of a batch: the response to request `id` (from its
/// JSON or SSE body), nothing for a notification or response it accepted, an error for an
/// HTTP refusal.
async fn answer_of(res: Response<Body>, id: Option<Value>) -> Option<Value> {
    let status = res.status();
    let content_type = content_type(res.headers());
    let bytes = axum::body::to_bytes(res.into_body(), MAX_BODY).await.unwrap_or_default();
    let detail = String::from_utf8_lossy(&bytes);
    let Some(id) = id else {
        // A notification or response has no answer, not even when rmcp refused it.
        if !status.is_success() {
            tracing::warn!("HTTP: a batch's notification or response refused with {status}: {detail}");
        }
        return None;
    };
    if status.is_success()
        && let Some(answer) = messages(&content_type, &bytes)
            .into_iter()
            .find(|m| m.get("id") == Some(&id) && (m.get("result").is_some() || m.get("error").is_some()))
    {
        return Some(answer);
    }
    tracing::warn!("HTTP: a batch's request answered {status} without its response: {detail}");
    let error = json!({"code": rmcp::model::ErrorCode::INTERNAL_ERROR.0, "message": format!("HTTP {status}: {detail}")});
    Some(json!({"jsonrpc": "2.0", "id": id, "error": error}))
}

/// The HTTP endpoints with the given access and options.
pub fn router_with(
    link: Arc<EpisodeLink>,
    devices: &[String],
    access: Access,
    settings: crate::device::Settings,
    options: HttpOptions,
    cancel: &CancellationToken,
) -> Router {
    // With tokens, a request whose role the layer below did not set would get the least.
    let role = match &access {
        Access::Everyone(role) => *role,
        Access::Tokens(_) => Role::ReadOnly,
    };
    let mut endpoints = HashMap::new();
    let network = NetworkServer::new(link.clone(), None, role, settings);
    let capability = network.capability();
    let (whole, sessions) = service(network, &options, cancel);
    endpoints.insert("/mcp".to_string(), (capability, sessions));
    let mut app = Router::new().route_service("/mcp", whole);
    for d in devices {
        let server = NetworkServer::new(link.clone(), Some(d.clone()), role, settings);
        let path = format!("/mcp/{d}");
        let capability = server.capability();
        let (one, sessions) = service(server, &options, cancel);
        endpoints.insert(path.clone(), (capability, sessions));
        app = app.route_service(&path, one);
    }
    let gate = Arc::new(Gate {
        access,
        origins: Origins(options.allowed_origins),
        endpoints,
        versions: Default::default(),
    });
    app.layer(axum::middleware::from_fn(move |req: Request, next: Next| gate.clone().handle(req, next)))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(origins: &Origins, origin: &str) -> bool {
        origins.allows(&HeaderValue::from_str(origin).expect("header"))
    }

    #[test]
    fn loopback_origins_pass_and_others_only_when_allowed() {
        let none = Origins(Vec::new());
        for o in ["http://127.0.0.1", "http://localhost:5173", "https://[::1]:8443", "HTTP://LOCALHOST"] {
            assert!(allows(&none, o), "{o}");
        }
        for o in [
            "http://evil.example",
            "http://127.0.0.2",
            "null",
            "file://",
            "http://localhost.evil.example",
            "ws://localhost",
        ] {
            assert!(!allows(&none, o), "{o}");
        }
        let some = Origins(
            ["https://ide.example", "http://app.example:*", "http://pinned.example:8080", "null"]
                .iter()
                .map(|o| o.parse().expect("origin"))
                .collect(),
        );
        for o in [
            "https://ide.example",
            "https://ide.example:443",
            "http://app.example:1",
            "http://pinned.example:8080",
            "null",
        ] {
            assert!(allows(&some, o), "{o}");
        }
        for o in ["https://ide.example:8443", "http://ide.example", "http://pinned.example"] {
            assert!(!allows(&some, o), "{o}");
        }
        for bad in [
            "ide.example",
            "https://ide.example/path",
            "https://ide.example:8080:*",
            "https://user@ide.example",
        ] {
            assert!(bad.parse::<AllowedOrigin>().is_err(), "{bad}");
        }
    }
}
