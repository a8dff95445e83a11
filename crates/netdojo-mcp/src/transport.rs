//! Transports: stdio (newline-delimited JSON-RPC) and streamable HTTP on 127.0.0.1, both
//! putting the `network` object of draft 002 §3 inside `capabilities` of the `initialize`
//! answer. rmcp's typed `ServerCapabilities` has no place for a key of its own (it carries the
//! object under `experimental` and `extensions`, where typed SDKs read it), so the answer is
//! completed on its way out.

use std::collections::HashMap;
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
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Lines};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::episode::EpisodeLink;
use crate::server::NetworkServer;

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
#[derive(Debug)]
pub struct LineTransport<R, W> {
    lines: Lines<BufReader<R>>,
    out: Arc<Mutex<W>>,
    network: Value,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> LineTransport<R, W> {
    pub fn new(read: R, write: W, network: Value) -> Self {
        Self { lines: BufReader::new(read).lines(), out: Arc::new(Mutex::new(write)), network }
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
        async move {
            let mut v = serde_json::to_value(&item).map_err(std::io::Error::other)?;
            inject(&mut v, &network);
            let mut line = serde_json::to_vec(&v).map_err(std::io::Error::other)?;
            line.push(b'\n');
            let mut out = out.lock().await;
            out.write_all(&line).await?;
            out.flush().await
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let line = self.lines.next_line().await.ok()??;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str(&line) {
                Ok(m) => return Some(m),
                Err(e) => tracing::warn!("stdio: a line that is no JSON-RPC message ({e}), skipped"),
            }
        }
    }

    async fn close(&mut self) -> Result<(), std::io::Error> {
        self.out.lock().await.flush().await
    }
}

/// Completes `initialize` answers of an HTTP response (JSON or SSE) with `network`.
async fn complete(res: Response<Body>, network: Value) -> Response<Body> {
    let json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.starts_with("application/json"))
        .unwrap_or(false);
    if !json {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 16 << 20).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let mut v: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => return Response::from_parts(parts, Body::from(bytes)),
    };
    if !inject(&mut v, &network) {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let out = serde_json::to_vec(&v).unwrap_or_else(|_| bytes.to_vec());
    parts.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(out.len()));
    Response::from_parts(parts, Body::from(out))
}

fn service(
    server: NetworkServer,
    cancel: &CancellationToken,
) -> StreamableHttpService<NetworkServer, NeverSessionManager> {
    let mut config = StreamableHttpServerConfig::default();
    // Stateless, JSON answers: the state lives in the episode, not in HTTP sessions.
    config.legacy_session_mode = false;
    config.json_response = true;
    config.sse_keep_alive = None;
    config.cancellation_token = cancel.child_token();
    StreamableHttpService::new(move || Ok(server.clone()), Arc::new(NeverSessionManager::default()), config)
}

/// The HTTP endpoints: `/mcp` for the whole network (tools take `device`), `/mcp/DEVICE` for
/// each device (the seed's one server per device).
pub fn router(
    link: Arc<EpisodeLink>,
    devices: &[String],
    role: crate::server::Role,
    settings: crate::device::Settings,
    cancel: &CancellationToken,
) -> Router {
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
        async move {
            let path = req.uri().path().to_string();
            let res = next.run(req).await;
            match capabilities.get(&path) {
                Some(network) => complete(res, network.clone()).await,
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
