//! A client for the GNS3 controller API: v3 (bearer token from
//! `/v3/access/users/authenticate`, renewed when the server answers 401) and v2 (no
//! authentication), chosen by asking the server its version. The request and response types
//! follow the server's OpenAPI document (`/openapi.json`) for the fields netdojo uses; the
//! rest of each object is kept in `extra`.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Mutex;

/// The API generation a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApiVersion {
    /// GNS3 2.2: `/v2/...`, no authentication.
    V2,
    /// GNS3 3.x: `/v3/...`, bearer tokens.
    V3,
}

impl ApiVersion {
    pub fn prefix(self) -> &'static str {
        match self {
            ApiVersion::V2 => "/v2",
            ApiVersion::V3 => "/v3",
        }
    }
}

/// A v3 user's name and password (GNS3's default is admin / admin).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("username", &self.username).finish_non_exhaustive()
    }
}

impl Default for Credentials {
    fn default() -> Self {
        Self { username: "admin".into(), password: "admin".into() }
    }
}

impl Credentials {
    /// NETDOJO_GNS3_USER and NETDOJO_GNS3_PASSWORD, each defaulting to GNS3's own: never the
    /// command line, which is saved with a run.
    pub fn from_env() -> Self {
        let defaults = Self::default();
        Self {
            username: std::env::var("NETDOJO_GNS3_USER").unwrap_or(defaults.username),
            password: std::env::var("NETDOJO_GNS3_PASSWORD").unwrap_or(defaults.password),
        }
    }
}

/// Everything that can go wrong talking to a GNS3 server, each naming the server, the request
/// and, where the server said something, the server's own message.
#[derive(Debug, thiserror::Error)]
pub enum Gns3Error {
    #[error("GNS3 server {url} cannot be reached: {message}")]
    Unreachable { url: String, message: String },
    #[error("GNS3 server {url}: {what} is not a GNS3 controller: {message}")]
    NotGns3 { url: String, what: String, message: String },
    #[error("GNS3 server {url}: authentication of user `{username}` failed: {message}")]
    Auth { url: String, username: String, message: String },
    #[error("GNS3 {method} {path}: {status}: {message}")]
    Api { method: String, path: String, status: u16, message: String },
    #[error("GNS3 {method} {path}: unexpected answer: {message}")]
    Decode { method: String, path: String, message: String },
}

impl Gns3Error {
    /// The HTTP status of an API error (404 unknown project, 409 conflict, 422 validation...).
    pub fn status(&self) -> Option<u16> {
        match self {
            Gns3Error::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The error for a non-success answer, with the server's own message: GNS3 answers
    /// `{"message": "..."}`; a 422 message carries a server-side traceback after a blank line,
    /// which is cut.
    pub fn from_response(method: &Method, path: &str, status: StatusCode, body: &str) -> Self {
        let message = serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| match v.get("message").or_else(|| v.get("detail")) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => Some(other.to_string()),
                None => None,
            })
            .unwrap_or_else(|| body.trim().chars().take(500).collect());
        let message = match message.split_once("\n\n  File ") {
            Some((head, _)) => head.trim().to_string(),
            None => message.trim().to_string(),
        };
        let reason = status.canonical_reason().unwrap_or("error");
        Gns3Error::Api {
            method: method.to_string(),
            path: path.to_string(),
            status: status.as_u16(),
            message: if message.is_empty() { reason.to_string() } else { format!("{reason}: {message}") },
        }
    }
}

/// `GET /vN/version`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerVersion {
    pub version: String,
    #[serde(default)]
    pub local: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Project {
    pub project_id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub status: String,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Template {
    pub template_id: String,
    pub name: String,
    pub template_type: String,
    #[serde(default)]
    pub builtin: bool,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Port {
    pub name: String,
    #[serde(default)]
    pub short_name: String,
    pub adapter_number: u32,
    pub port_number: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub node_id: String,
    pub name: String,
    pub node_type: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub console: Option<u16>,
    #[serde(default)]
    pub console_host: Option<String>,
    #[serde(default)]
    pub console_type: Option<String>,
    #[serde(default)]
    pub ports: Vec<Port>,
    #[serde(default)]
    pub properties: Value,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl Node {
    /// The port an interface name designates: its full name (`Ethernet0`, `FastEthernet0/0`)
    /// or short name (`e0`, `f0/0`), case-insensitively.
    pub fn port(&self, interface: &str) -> Option<&Port> {
        self.ports
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(interface) || p.short_name.eq_ignore_ascii_case(interface))
    }

    /// Where its telnet console listens, if it has one.
    pub fn telnet_console(&self, server_host: &str) -> Option<(String, u16)> {
        if self.console_type.as_deref() != Some("telnet") {
            return None;
        }
        let port = self.console?;
        // A server bound to every address reports 0.0.0.0; its consoles are on its own host.
        let host = match self.console_host.as_deref() {
            None | Some("" | "0.0.0.0" | "::") => server_host.to_string(),
            Some(h) => h.to_string(),
        };
        Some((host, port))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkEnd {
    pub node_id: String,
    pub adapter_number: u32,
    pub port_number: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub link_id: String,
    #[serde(default)]
    pub nodes: Vec<LinkEnd>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A GNS3 controller.
#[derive(Debug)]
pub struct Gns3Client {
    http: reqwest::Client,
    base: String,
    host: String,
    api: ApiVersion,
    server: ServerVersion,
    credentials: Credentials,
    token: Mutex<Option<String>>,
}

/// How long one API request may take (starting all nodes of a project is the slowest).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// One endpoint of the v3 controller API, as the server's OpenAPI document names it. Every
/// request the client makes goes through one of [`endpoints::ALL`], so that a test can hold the
/// whole client against the document (`crates/netdojo-gns3/tests/data/openapi-3.0.6.json`).
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub method: Method,
    /// The path under the version prefix, with `{parameters}` named as in the document.
    pub path: &'static str,
    /// Whether the request carries a JSON body (built by [`body`]).
    pub json_body: bool,
    /// The schema of the answer the client decodes (`Node`; for a list, its items'), if any.
    pub response: Option<&'static str>,
}

impl Endpoint {
    /// The path with its parameters filled in order (`/projects/{project_id}` → `/projects/p1`).
    pub fn fill(&self, args: &[&str]) -> String {
        let mut args = args.iter();
        self.path
            .split('/')
            .map(|segment| match segment.starts_with('{') {
                true => args.next().copied().unwrap_or(segment),
                false => segment,
            })
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// The endpoints the client uses.
pub mod endpoints {
    use reqwest::Method;

    use super::Endpoint;

    const fn ep(
        method: Method,
        path: &'static str,
        json_body: bool,
        response: Option<&'static str>,
    ) -> Endpoint {
        Endpoint { method, path, json_body, response }
    }

    pub const VERSION: Endpoint = ep(Method::GET, "/version", false, Some("Version"));
    pub const AUTHENTICATE: Endpoint = ep(Method::POST, "/access/users/authenticate", true, Some("Token"));
    pub const PROJECTS: Endpoint = ep(Method::GET, "/projects", false, Some("Project"));
    pub const CREATE_PROJECT: Endpoint = ep(Method::POST, "/projects", true, Some("Project"));
    pub const DELETE_PROJECT: Endpoint = ep(Method::DELETE, "/projects/{project_id}", false, None);
    pub const TEMPLATES: Endpoint = ep(Method::GET, "/templates", false, Some("Template"));
    pub const CREATE_NODE_FROM_TEMPLATE: Endpoint =
        ep(Method::POST, "/projects/{project_id}/templates/{template_id}", true, Some("Node"));
    pub const CREATE_NODE: Endpoint = ep(Method::POST, "/projects/{project_id}/nodes", true, Some("Node"));
    pub const UPDATE_NODE: Endpoint =
        ep(Method::PUT, "/projects/{project_id}/nodes/{node_id}", true, Some("Node"));
    pub const NODES: Endpoint = ep(Method::GET, "/projects/{project_id}/nodes", false, Some("Node"));
    pub const NODE: Endpoint = ep(Method::GET, "/projects/{project_id}/nodes/{node_id}", false, Some("Node"));
    pub const CREATE_LINK: Endpoint = ep(Method::POST, "/projects/{project_id}/links", true, Some("Link"));
    pub const LINKS: Endpoint = ep(Method::GET, "/projects/{project_id}/links", false, Some("Link"));
    /// The body is the file's raw content, not JSON.
    pub const WRITE_NODE_FILE: Endpoint =
        ep(Method::POST, "/projects/{project_id}/nodes/{node_id}/files/{file_path}", false, None);
    pub const START_NODES: Endpoint = ep(Method::POST, "/projects/{project_id}/nodes/start", false, None);
    pub const STOP_NODES: Endpoint = ep(Method::POST, "/projects/{project_id}/nodes/stop", false, None);
    pub const START_NODE: Endpoint =
        ep(Method::POST, "/projects/{project_id}/nodes/{node_id}/start", true, None);
    pub const STOP_NODE: Endpoint =
        ep(Method::POST, "/projects/{project_id}/nodes/{node_id}/stop", false, None);

    pub const ALL: &[Endpoint] = &[
        VERSION,
        AUTHENTICATE,
        PROJECTS,
        CREATE_PROJECT,
        DELETE_PROJECT,
        TEMPLATES,
        CREATE_NODE_FROM_TEMPLATE,
        CREATE_NODE,
        UPDATE_NODE,
        NODES,
        NODE,
        CREATE_LINK,
        LINKS,
        WRITE_NODE_FILE,
        START_NODES,
        STOP_NODES,
        START_NODE,
        STOP_NODE,
    ];
}

/// The JSON bodies the client sends, one builder per endpoint with a body, so that each can be
/// checked against its schema in the OpenAPI document.
pub mod body {
    use serde_json::{Value, json};

    use super::LinkEnd;

    pub fn authenticate(username: &str, password: &str) -> Value {
        json!({"username": username, "password": password})
    }

    pub fn create_project(name: &str) -> Value {
        json!({"name": name})
    }

    pub fn create_node_from_template(x: i32, y: i32) -> Value {
        json!({"x": x, "y": y, "compute_id": "local"})
    }

    pub fn create_node(name: &str, node_type: &str, properties: &Value) -> Value {
        let mut body = json!({"name": name, "node_type": node_type, "compute_id": "local"});
        if !properties.is_null() {
            body["properties"] = properties.clone();
        }
        body
    }

    pub fn update_node(name: &str, properties: &Value) -> Value {
        let mut body = json!({"name": name});
        if properties.as_object().is_some_and(|m| !m.is_empty()) {
            body["properties"] = properties.clone();
        }
        body
    }

    pub fn create_link(ends: &[LinkEnd; 2]) -> Value {
        json!({"nodes": ends})
    }

    /// Starting one node takes optional start data; none is sent.
    pub fn start_node() -> Value {
        json!({})
    }
}

impl Gns3Client {
    /// Connects to the controller at `url` (`http://127.0.0.1:3080`), finds which API it speaks
    /// and, for v3, logs in.
    pub async fn connect(url: &str, credentials: Credentials) -> Result<Self, Gns3Error> {
        let base = url.trim_end_matches('/').to_string();
        let host = reqwest::Url::parse(&base)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .ok_or_else(|| Gns3Error::Unreachable {
                url: base.clone(),
                message: "not an http:// URL with a host".into(),
            })?;
        // reqwest is built without a default crypto provider (https servers): install ring's.
        // This fails only when one is installed already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .no_proxy()
            .build()
            .map_err(|e| Gns3Error::Unreachable { url: base.clone(), message: e.to_string() })?;
        let mut found = None;
        for api in [ApiVersion::V3, ApiVersion::V2] {
            let path = format!("{}{}", api.prefix(), endpoints::VERSION.path);
            let resp = http
                .get(format!("{base}{path}"))
                .send()
                .await
                .map_err(|e| Gns3Error::Unreachable { url: base.clone(), message: error_chain(&e) })?;
            if resp.status() == StatusCode::NOT_FOUND {
                continue;
            }
            let status = resp.status();
            let body = resp.text().await.unwrap_or_default();
            if !status.is_success() {
                return Err(Gns3Error::from_response(&Method::GET, &path, status, &body));
            }
            let server: ServerVersion = serde_json::from_str(&body).map_err(|e| Gns3Error::NotGns3 {
                url: base.clone(),
                what: format!("GET {path}"),
                message: format!("{e}: {}", body.chars().take(200).collect::<String>()),
            })?;
            found = Some((api, server));
            break;
        }
        let Some((api, server)) = found else {
            return Err(Gns3Error::NotGns3 {
                url: base,
                what: "GET /v3/version and /v2/version".into(),
                message: "both answered 404".into(),
            });
        };
        let client = Self { http, base, host, api, server, credentials, token: Mutex::new(None) };
        if api == ApiVersion::V3 {
            client.authenticate().await?;
        }
        Ok(client)
    }

    pub fn api(&self) -> ApiVersion {
        self.api
    }

    pub fn server(&self) -> &ServerVersion {
        &self.server
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    /// The host the server runs on, where its consoles listen.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Logs in (v3) and keeps the token.
    pub async fn authenticate(&self) -> Result<(), Gns3Error> {
        let path = format!("/v3{}", endpoints::AUTHENTICATE.path);
        let path = path.as_str();
        let body = body::authenticate(&self.credentials.username, &self.credentials.password);
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .map_err(|e| Gns3Error::Unreachable { url: self.base.clone(), message: error_chain(&e) })?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            let message = match Gns3Error::from_response(&Method::POST, path, status, &text) {
                Gns3Error::Api { message, .. } => message,
                other => other.to_string(),
            };
            return Err(Gns3Error::Auth {
                url: self.base.clone(),
                username: self.credentials.username.clone(),
                message,
            });
        }
        let token = parse_token(&text).map_err(|message| Gns3Error::Decode {
            method: "POST".into(),
            path: path.into(),
            message,
        })?;
        *self.token.lock().await = Some(token);
        Ok(())
    }

    /// One API call to `endpoint` with its path parameters `args`. A v3 call answered 401 logs
    /// in again once (the token expired) and is retried.
    pub async fn call<T: DeserializeOwned>(
        &self,
        endpoint: &Endpoint,
        args: &[&str],
        body: Option<&Value>,
    ) -> Result<T, Gns3Error> {
        let method = endpoint.method.clone();
        let full = format!("{}{}", self.api.prefix(), endpoint.fill(args));
        let mut retried = false;
        loop {
            let mut req = self.http.request(method.clone(), format!("{}{full}", self.base));
            if let Some(token) = self.token.lock().await.as_ref() {
                req = req.bearer_auth(token);
            }
            if let Some(body) = body {
                req = req.json(body);
            }
            let resp = req.send().await.map_err(|e| Gns3Error::Unreachable {
                url: self.base.clone(),
                message: format!("{method} {full}: {}", error_chain(&e)),
            })?;
            let status = resp.status();
            let text = resp.text().await.map_err(|e| Gns3Error::Decode {
                method: method.to_string(),
                path: full.clone(),
                message: e.to_string(),
            })?;
            if status == StatusCode::UNAUTHORIZED && self.api == ApiVersion::V3 && !retried {
                tracing::debug!("{method} {full}: 401, logging in again");
                retried = true;
                self.authenticate().await?;
                continue;
            }
            if !status.is_success() {
                return Err(Gns3Error::from_response(&method, &full, status, &text));
            }
            let text = if text.trim().is_empty() { "null" } else { text.as_str() };
            return serde_json::from_str(text).map_err(|e| Gns3Error::Decode {
                method: method.to_string(),
                path: full.clone(),
                message: format!("{e}: {}", text.chars().take(300).collect::<String>()),
            });
        }
    }

    pub async fn projects(&self) -> Result<Vec<Project>, Gns3Error> {
        self.call(&endpoints::PROJECTS, &[], None).await
    }

    pub async fn create_project(&self, name: &str) -> Result<Project, Gns3Error> {
        self.call(&endpoints::CREATE_PROJECT, &[], Some(&body::create_project(name))).await
    }

    /// Deletes a project with its nodes and files (its nodes are stopped first by the server).
    pub async fn delete_project(&self, project_id: &str) -> Result<(), Gns3Error> {
        self.call::<Value>(&endpoints::DELETE_PROJECT, &[project_id], None).await.map(|_| ())
    }

    pub async fn templates(&self) -> Result<Vec<Template>, Gns3Error> {
        self.call(&endpoints::TEMPLATES, &[], None).await
    }

    /// Adds a node made from a template, at (x, y).
    pub async fn create_node_from_template(
        &self,
        project_id: &str,
        template_id: &str,
        x: i32,
        y: i32,
    ) -> Result<Node, Gns3Error> {
        let body = body::create_node_from_template(x, y);
        self.call(&endpoints::CREATE_NODE_FROM_TEMPLATE, &[project_id, template_id], Some(&body)).await
    }

    /// Adds a node of a built-in type (`vpcs`, `ethernet_switch`...) with its properties.
    pub async fn create_node(
        &self,
        project_id: &str,
        name: &str,
        node_type: &str,
        properties: &Value,
    ) -> Result<Node, Gns3Error> {
        let body = body::create_node(name, node_type, properties);
        self.call(&endpoints::CREATE_NODE, &[project_id], Some(&body)).await
    }

    /// Renames a node and sets its properties (none when `properties` is null or empty).
    pub async fn update_node(
        &self,
        project_id: &str,
        node_id: &str,
        name: &str,
        properties: &Value,
    ) -> Result<Node, Gns3Error> {
        let body = body::update_node(name, properties);
        self.call(&endpoints::UPDATE_NODE, &[project_id, node_id], Some(&body)).await
    }

    pub async fn nodes(&self, project_id: &str) -> Result<Vec<Node>, Gns3Error> {
        self.call(&endpoints::NODES, &[project_id], None).await
    }

    pub async fn node(&self, project_id: &str, node_id: &str) -> Result<Node, Gns3Error> {
        self.call(&endpoints::NODE, &[project_id, node_id], None).await
    }

    pub async fn create_link(&self, project_id: &str, ends: [LinkEnd; 2]) -> Result<Link, Gns3Error> {
        self.call(&endpoints::CREATE_LINK, &[project_id], Some(&body::create_link(&ends))).await
    }

    pub async fn links(&self, project_id: &str) -> Result<Vec<Link>, Gns3Error> {
        self.call(&endpoints::LINKS, &[project_id], None).await
    }

    /// Writes a file in a node's directory (VPCS reads `startup.vpc` when it starts).
    pub async fn write_node_file(
        &self,
        project_id: &str,
        node_id: &str,
        path: &str,
        content: &str,
    ) -> Result<(), Gns3Error> {
        let full =
            format!("{}{}", self.api.prefix(), endpoints::WRITE_NODE_FILE.fill(&[project_id, node_id, path]));
        let send = |token: Option<String>| {
            let mut req = self.http.post(format!("{}{full}", self.base)).body(content.to_string());
            if let Some(token) = token {
                req = req.bearer_auth(token);
            }
            req.send()
        };
        let unreachable = |e: reqwest::Error| Gns3Error::Unreachable {
            url: self.base.clone(),
            message: format!("POST {full}: {}", error_chain(&e)),
        };
        let mut resp = send(self.token.lock().await.clone()).await.map_err(unreachable)?;
        if resp.status() == StatusCode::UNAUTHORIZED && self.api == ApiVersion::V3 {
            self.authenticate().await?;
            resp = send(self.token.lock().await.clone()).await.map_err(unreachable)?;
        }
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let text = resp.text().await.unwrap_or_default();
        Err(Gns3Error::from_response(&Method::POST, &full, status, &text))
    }

    /// Starts every node of the project.
    pub async fn start_nodes(&self, project_id: &str) -> Result<(), Gns3Error> {
        self.call::<Value>(&endpoints::START_NODES, &[project_id], None).await.map(|_| ())
    }

    pub async fn stop_nodes(&self, project_id: &str) -> Result<(), Gns3Error> {
        self.call::<Value>(&endpoints::STOP_NODES, &[project_id], None).await.map(|_| ())
    }

    pub async fn start_node(&self, project_id: &str, node_id: &str) -> Result<(), Gns3Error> {
        self.call::<Value>(&endpoints::START_NODE, &[project_id, node_id], Some(&body::start_node()))
            .await
            .map(|_| ())
    }

    pub async fn stop_node(&self, project_id: &str, node_id: &str) -> Result<(), Gns3Error> {
        self.call::<Value>(&endpoints::STOP_NODE, &[project_id, node_id], None).await.map(|_| ())
    }
}

fn parse_token(body: &str) -> Result<String, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("{e}: {body}"))?;
    v.get("access_token")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("no access_token in {body}"))
}

/// An error with its causes ("error sending request: connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
