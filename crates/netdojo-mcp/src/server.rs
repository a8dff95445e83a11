//! The MCP server (rmcp's `ServerHandler`): the `network` capability, the eight tools and
//! `done`, `network:///` resources, prompt templates, roles.
//!
//! Every tool call goes through the episode's runner ([`EpisodeLink::call`]): it is recorded
//! and checked like a built-in agent's. Resources and prompts are reads outside the
//! trajectory.

use std::sync::Arc;
use std::time::Duration;

use netdojo_core::ToolCall;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode, ErrorData,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, InitializeResult, JsonObject,
    ListPromptsResult, ListResourcesResult, ListToolsResult, MetaObject, PaginatedRequestParams, Prompt,
    PromptArgument, PromptMessage, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, Role as MsgRole, ServerCapabilities, Tool,
    ToolAnnotations,
};
// rmcp marks MCP logging deprecated for the unreleased 2026-07-28 protocol (SEP-2577); every
// protocol version served here has it.
#[allow(deprecated)]
use rmcp::model::{
    Extensions, LoggingLevel, LoggingMessageNotificationParam, ResourceUpdatedNotificationParam,
    SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::device::{Changed, Device, Devices, Event, Flavor, Settings};
use crate::episode::{EpisodeLink, Live};
use crate::error::NetError;
use crate::redact::{redact, redact_json};
use crate::tools::{self, DONE, Scope, WRITES};

/// What a session may do (§8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Everything.
    Operator,
    /// Show commands, YANG reads, file pulls and resources; no change, and secrets redacted.
    ReadOnly,
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "operator" => Ok(Self::Operator),
            "read-only" => Ok(Self::ReadOnly),
            other => Err(format!("unknown role `{other}` (roles: operator, read-only)")),
        }
    }
}

/// The protocol versions served: those with an `initialize` handshake, where the `network`
/// capability is advertised.
const VERSIONS: [ProtocolVersion; 4] = [
    ProtocolVersion::V_2024_11_05,
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
];

/// One MCP server: a scope (one device, or the whole network) and a role, in front of an
/// episode.
#[derive(Debug, Clone)]
pub struct NetworkServer {
    link: Arc<EpisodeLink>,
    scope_device: Option<String>,
    /// The role of a session with no authenticated client (stdio; HTTP without a token file).
    role: Role,
    settings: Settings,
    page_size: usize,
    session: Arc<Session>,
}

/// What one MCP session asked for: its resource subscriptions and logging level. A stdio
/// server is one session; on HTTP each session gets its own ([`NetworkServer::for_session`]).
#[derive(Debug)]
struct Session {
    subscriptions: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// The least severe level sent as `notifications/message` (`logging/setLevel`).
    level: std::sync::atomic::AtomicU8,
    forwarding: std::sync::atomic::AtomicBool,
}

impl Default for Session {
    fn default() -> Self {
        Self {
            subscriptions: Default::default(),
            level: std::sync::atomic::AtomicU8::new(severity_of("info")),
            forwarding: Default::default(),
        }
    }
}

/// MCP's logging levels (RFC 5424's severities), least severe first.
const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

fn severity_of(level: &str) -> u8 {
    LEVELS.iter().position(|l| *l == level).map_or(1, |i| i as u8)
}

/// The rmcp value of an MCP logging level (rmcp marks the logging API deprecated for the
/// unreleased SEP-2577; the protocol versions served here all have it).
#[allow(deprecated)]
fn logging_level(severity: u8) -> LoggingLevel {
    match severity {
        0 => LoggingLevel::Debug,
        1 => LoggingLevel::Info,
        2 => LoggingLevel::Notice,
        3 => LoggingLevel::Warning,
        4 => LoggingLevel::Error,
        5 => LoggingLevel::Critical,
        6 => LoggingLevel::Alert,
        _ => LoggingLevel::Emergency,
    }
}

/// The role the HTTP layer authenticated for this request ([`crate::transport`] puts it into
/// the request's extensions), if any.
fn authenticated(extensions: &Extensions) -> Option<Role> {
    extensions.get::<axum::http::request::Parts>().and_then(|p| p.extensions.get::<Role>()).copied()
}

/// The resource paths a change of the device may have changed.
fn changed_paths(event: &Event) -> Vec<&'static str> {
    match event.changed {
        Some(Changed::Running) => {
            let mut paths =
                vec!["file/running-config", "interfaces", "interface/", "routing/ipv4/route-table"];
            if event.data["operation"] == "commit" {
                paths.push("file/candidate-config");
            }
            paths
        }
        Some(Changed::Candidate) => vec!["file/candidate-config"],
        None => vec![],
    }
}

fn to_object(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

fn invalid(message: impl Into<String>) -> ErrorData {
    ErrorData::new(ErrorCode::INVALID_PARAMS, message.into(), None)
}

/// The prompt templates of §6.
fn prompts() -> Vec<Prompt> {
    let arg = |name: &str, description: &str, required: bool| {
        PromptArgument::new(name).with_description(description).with_required(required)
    };
    vec![
        Prompt::new(
            "network.troubleshoot.ping-fail",
            Some("Find why a ping from a device to an address fails"),
            Some(vec![
                arg("device", "the device the ping starts from", true),
                arg("destination", "the address that does not answer", true),
            ]),
        ),
        Prompt::new(
            "network.config.add-vlan",
            Some("Add a VLAN subinterface with an address, safely (confirmed commit)"),
            Some(vec![
                arg("device", "the device", true),
                arg("vlan", "the VLAN id (1-4094)", true),
                arg("interface", "the parent interface", true),
                arg("address", "the address with its prefix length, e.g. 10.0.100.1/24", false),
            ]),
        ),
        Prompt::new(
            "network.security.audit",
            Some("Audit a device's configuration for security problems"),
            Some(vec![arg("device", "the device", true)]),
        ),
    ]
}

/// The prompt `name` for a device of the CLI family `flavor` (FRR's vtysh, iproute2 on a
/// Linux node, a GNS3 node's console).
fn prompt_text(name: &str, args: &JsonObject, flavor: Flavor) -> Result<String, ErrorData> {
    let get = |k: &str| -> Result<String, ErrorData> {
        args.get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| invalid(format!("prompt {name}: missing argument `{k}`")))
    };
    match flavor {
        Flavor::Linux => return linux_prompt_text(name, args, get),
        Flavor::Console => return console_prompt_text(name, args, get),
        Flavor::Frr => {}
    }
    Ok(match name {
        "network.troubleshoot.ping-fail" => {
            let (device, dst) = (get("device")?, get("destination")?);
            format!(
                "A ping from {device} to {dst} fails. Find out why, step by step, with read-only \
                 tools first: network.cli.exec `show ip route {dst}` on {device} (is there a route, \
                 which next hop?), `show interface brief` (are the interfaces up, with the right \
                 addresses?), then follow the next hop to the next device and repeat. Check \
                 routing protocol adjacencies (`show ip ospf neighbor`, `show ip bgp summary`) \
                 and route filters (prefix-lists, route-maps). Say what is wrong before proposing \
                 a change; make changes with network.cli.configure and a confirmed network.commit."
            )
        }
        "network.config.add-vlan" => {
            let (device, vlan, parent) = (get("device")?, get("vlan")?, get("interface")?);
            let address = args.get("address").and_then(Value::as_str).unwrap_or("(none)");
            format!(
                "Add VLAN {vlan} on {device} as subinterface {parent}.{vlan} with address \
                 {address}. First check with network.cli.exec `show interface {parent}.{vlan}` \
                 that the subinterface exists (FRR configures addresses, the kernel owns the \
                 802.1q link). Stage `interface {parent}.{vlan}` and ` ip address {address}` with \
                 network.cli.configure, commit with network.commit confirmed=true, check \
                 reachability, then confirm with another network.commit."
            )
        }
        "network.security.audit" => {
            let device = get("device")?;
            format!(
                "Audit the configuration of {device}. Pull it with network.file.pull \
                 (running-config) and check: passwords in clear text (`password`, no `service \
                 password-encryption`), routing protocol sessions without authentication, route \
                 filters missing on external BGP peers, static routes to unexpected next hops, \
                 interfaces that are up and unused. List each finding with the line and a fix; \
                 change nothing."
            )
        }
        other => return Err(invalid(format!("unknown prompt `{other}`"))),
    })
}

fn console_prompt_text(
    name: &str,
    args: &JsonObject,
    get: impl Fn(&str) -> Result<String, ErrorData>,
) -> Result<String, ErrorData> {
    Ok(match name {
        "network.troubleshoot.ping-fail" => {
            let (device, dst) = (get("device")?, get("destination")?);
            format!(
                "A ping from {device} to {dst} fails. Find out why, step by step, with read-only \
                 tools first: on a Cisco IOS device network.cli.exec `show ip route {dst}` and \
                 `show ip interface brief` (a route, an interface up with the right address?); on \
                 a VPCS host `show ip` (its address, mask and gateway). Follow the next hop to the \
                 next device and repeat, then check access lists (`show access-lists`). Say what \
                 is wrong before proposing a change; make changes with network.cli.configure and \
                 a confirmed network.commit, check with `ping {dst}`, then confirm with another \
                 network.commit."
            )
        }
        "network.config.add-vlan" => {
            let (device, vlan, parent) = (get("device")?, get("vlan")?, get("interface")?);
            let address = args.get("address").and_then(Value::as_str).unwrap_or("(none)");
            format!(
                "Add VLAN {vlan} on {device} (Cisco IOS) as subinterface {parent}.{vlan} with \
                 address {address}. Check with network.cli.exec `show ip interface brief` that it \
                 does not exist yet, stage `interface {parent}.{vlan}`, `encapsulation dot1Q \
                 {vlan}` and `ip address ...` (address and netmask) with network.cli.configure, \
                 commit with network.commit confirmed=true, check reachability, then confirm with \
                 another network.commit."
            )
        }
        "network.security.audit" => {
            let device = get("device")?;
            format!(
                "Audit the configuration of {device}. Pull it with network.file.pull \
                 (running-config) and check: passwords in clear text (`password`, no `service \
                 password-encryption`, `enable password` instead of `enable secret`), lines \
                 without `login` or with `transport input telnet`, SNMP communities, routing \
                 protocol sessions without authentication, interfaces that are up and unused. \
                 List each finding with the line and a fix; change nothing."
            )
        }
        other => return Err(invalid(format!("unknown prompt `{other}`"))),
    })
}

fn linux_prompt_text(
    name: &str,
    args: &JsonObject,
    get: impl Fn(&str) -> Result<String, ErrorData>,
) -> Result<String, ErrorData> {
    Ok(match name {
        "network.troubleshoot.ping-fail" => {
            let (device, dst) = (get("device")?, get("destination")?);
            format!(
                "A ping from {device} to {dst} fails. Find out why, step by step, with read-only \
                 tools first: network.cli.exec `ip route get {dst}` on {device} (is there a route, \
                 which next hop and interface?), `ip -br addr` and `ip -br link` (are the \
                 interfaces up, with the right addresses?), then on the next hop `sysctl \
                 net.ipv4.ip_forward`, `ip route`, `iptables -S` and `tc qdisc show` (forwarding \
                 off, a wrong route, a DROP rule or a shaper?). Say what is wrong before proposing \
                 a change; make changes with network.cli.configure and a confirmed network.commit, \
                 check the pingall, then confirm with another network.commit."
            )
        }
        "network.config.add-vlan" => {
            let (device, vlan, parent) = (get("device")?, get("vlan")?, get("interface")?);
            let address = args.get("address").and_then(Value::as_str).unwrap_or("(none)");
            format!(
                "Add VLAN {vlan} on {device} as link {parent}.{vlan} with address {address}. Check \
                 with network.cli.exec `ip -d link show {parent}.{vlan}` that it does not exist \
                 yet, stage `ip link add link {parent} name {parent}.{vlan} type vlan id {vlan}`, \
                 `ip addr add {address} dev {parent}.{vlan}` and `ip link set {parent}.{vlan} up` \
                 with network.cli.configure, commit with network.commit confirmed=true, check \
                 reachability, then confirm with another network.commit."
            )
        }
        "network.security.audit" => {
            let device = get("device")?;
            format!(
                "Audit {device}, a Linux node. Pull its state with network.file.pull \
                 (running-config) and check: IP forwarding on where the node is not a router, \
                 reverse-path filtering off, accept_redirects on, firewall policies that accept \
                 everything (iptables -S, nft list ruleset), listening sockets (ss -ltn), \
                 addresses and routes nobody expects. List each finding with a fix; change nothing."
            )
        }
        other => return Err(invalid(format!("unknown prompt `{other}`"))),
    })
}

impl NetworkServer {
    /// A server for `link`'s devices: one of them (`device`) or all (`None`).
    pub fn new(link: Arc<EpisodeLink>, device: Option<String>, role: Role, settings: Settings) -> Self {
        Self { link, scope_device: device, role, settings, page_size: 50, session: Arc::default() }
    }

    /// The same server for a new MCP session: no subscriptions yet.
    pub fn for_session(&self) -> Self {
        Self { session: Arc::default(), ..self.clone() }
    }

    /// The role of the client that sent a request: the one its bearer token gives on HTTP,
    /// the server's own otherwise.
    fn role_of(&self, extensions: &Extensions) -> Role {
        authenticated(extensions).unwrap_or(self.role)
    }

    /// Starts translating device events into this session's notifications (once).
    fn start_events(&self, peer: Peer<RoleServer>) {
        if self.session.forwarding.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move { this.forward(peer).await });
    }

    /// Device events to notifications, until the session or the episode ends: the event itself
    /// as `notifications/message` (logger `network.DEVICE`), then
    /// `notifications/resources/updated` for the subscribed resources it changed.
    #[allow(deprecated)] // rmcp marks MCP logging deprecated for an unreleased protocol version
    async fn forward(self, peer: Peer<RoleServer>) {
        let Ok(live) = self.link.live().await else { return };
        let mut events = live.devices.events();
        // Holding the devices would keep their event channel open after the episode.
        drop(live);
        let mut tick = tokio::time::interval(Duration::from_secs(2));
        loop {
            let event = tokio::select! {
                e = events.recv() => match e {
                    Ok(e) => e,
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!("an MCP session fell {n} device events behind; they are not notified");
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = tick.tick() => {
                    if peer.is_transport_closed() { return }
                    continue;
                }
            };
            if self.scope_device.as_ref().is_some_and(|d| *d != event.device) {
                continue;
            }
            let severity = severity_of(event.level);
            if severity >= self.session.level.load(std::sync::atomic::Ordering::SeqCst) {
                let mut data = json!({"stream": event.stream, "event": event.event});
                if let (Some(out), Some(fields)) = (data.as_object_mut(), event.data.as_object()) {
                    out.extend(fields.clone());
                }
                let message = LoggingMessageNotificationParam::new(logging_level(severity), data)
                    .with_logger(format!("network.{}", event.device));
                if peer.notify_logging_message(message).await.is_err() {
                    return;
                }
            }
            for uri in self.updated(&event) {
                if peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri)).await.is_err() {
                    return;
                }
            }
        }
    }

    /// The subscribed URIs of this session that `event` changed.
    fn updated(&self, event: &Event) -> Vec<String> {
        let paths = changed_paths(event);
        let subscriptions = match self.session.subscriptions.lock() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        subscriptions
            .into_iter()
            .filter(|uri| {
                let Some(rest) = uri.strip_prefix("network://") else { return false };
                let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
                let path = path.split_once('?').map_or(path, |(p, _)| p);
                let device =
                    if authority.is_empty() { self.scope_device.as_deref() } else { Some(authority) };
                device == Some(event.device.as_str())
                    && paths.iter().any(|p| if p.ends_with('/') { path.starts_with(p) } else { path == *p })
            })
            .collect()
    }

    /// How many resources one `resources/list` page holds.
    pub fn with_page_size(mut self, n: usize) -> Self {
        self.page_size = n.max(1);
        self
    }

    fn scope(&self, live: Option<&Live>) -> Scope {
        match &self.scope_device {
            Some(d) => Scope::Device(d.clone()),
            None => Scope::Network(live.map(|l| l.devices.names()).unwrap_or_default()),
        }
    }

    /// The `network` capability object of the devices behind this server.
    pub fn capability(&self) -> Value {
        let live = self.link.live_now();
        tools::capability(&self.devices_in_scope(live.as_ref()), &self.settings)
    }

    /// The devices this server speaks for.
    fn devices_in_scope<'a>(&self, live: Option<&'a Live>) -> Vec<&'a Device> {
        match (live, &self.scope_device) {
            (Some(l), Some(d)) => l.devices.devices.get(d).map(|d| vec![d]).unwrap_or_default(),
            (Some(l), None) => l.devices.devices.values().collect(),
            (None, _) => vec![],
        }
    }

    async fn live(&self) -> Result<Live, ErrorData> {
        self.link.live().await.map_err(|e| NetError::Unreachable(e).into())
    }

    fn tools_list(&self, role: Role, live: Option<&Live>) -> Vec<Tool> {
        let scope = self.scope(live);
        let devices = self.devices_in_scope(live);
        let flavor = devices.first().map_or(Flavor::Frr, |d| d.flavor());
        let mut specs = tools::tool_specs_for(&scope, &self.settings, flavor);
        specs.push(tools::done_spec());
        specs
            .into_iter()
            .map(|spec| {
                let available = spec.name == DONE || tools::available(&spec.name, &devices);
                let mut annotations = ToolAnnotations::new()
                    .read_only(!WRITES.contains(&spec.name.as_str()) && spec.name != DONE)
                    .open_world(false);
                annotations = annotations.destructive(matches!(
                    spec.name.as_str(),
                    "network.commit" | "network.rollback" | "network.file.push"
                ));
                let mut meta = JsonObject::new();
                meta.insert("available".into(), json!(available));
                if !available {
                    let downgrade = if spec.name == tools::YANG_GET { tools::EXEC } else { tools::CONFIGURE };
                    meta.insert("downgrade".into(), json!(downgrade));
                }
                if role == Role::ReadOnly && WRITES.contains(&spec.name.as_str()) {
                    meta.insert("allowed".into(), json!(false));
                }
                Tool::new(spec.name, spec.description, Arc::new(to_object(spec.parameters)))
                    .with_annotations(annotations)
                    .with_meta(MetaObject(meta))
            })
            .collect()
    }

    /// Resource URIs: `network:///...` on a device's server, `network://DEVICE/...` on the
    /// network's.
    fn uri(&self, device: &str, path: &str) -> String {
        match &self.scope_device {
            Some(_) => format!("network:///{path}"),
            None => format!("network://{device}/{path}"),
        }
    }

    fn parse_uri<'a>(
        &self,
        uri: &'a str,
        devices: &Devices,
    ) -> Result<(String, &'a str, &'a str), ErrorData> {
        let rest = uri
            .strip_prefix("network://")
            .ok_or_else(|| invalid(format!("`{uri}` is not a network:// URI")))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let device = match (&self.scope_device, authority) {
            (Some(d), "") => d.clone(),
            (Some(d), a) if a == d => d.clone(),
            (None, a) if !a.is_empty() => a.to_string(),
            _ => {
                return Err(invalid(format!(
                    "`{uri}`: on this server resources are {}",
                    self.uri("DEVICE", "...")
                )));
            }
        };
        devices.get(&device).map_err(ErrorData::from)?;
        Ok((device, path, query))
    }

    async fn all_resources(&self, live: &Live) -> Result<Vec<Resource>, ErrorData> {
        let names: Vec<String> = match &self.scope_device {
            Some(d) => vec![d.clone()],
            None => live.devices.names(),
        };
        let mut out = Vec::new();
        for name in names {
            let device = live.devices.get(&name).map_err(ErrorData::from)?;
            let r = |path: &str, title: &str, mime: &str| {
                Resource::new(self.uri(&name, path), format!("{name} {title}")).with_mime_type(mime)
            };
            let mime = device.interfaces_mime();
            out.push(r("interfaces", "interfaces", mime));
            for iface in device.interfaces().await.map_err(ErrorData::from)? {
                if let Some(i) = iface["name"].as_str() {
                    out.push(r(&format!("interface/{i}"), &format!("interface {i}"), mime));
                }
            }
            out.push(r("routing/ipv4/route-table", "IPv4 route table", "application/json"));
            out.push(r("file/startup-config", "startup configuration", "text/plain"));
            out.push(r("file/running-config", "running configuration", "text/plain"));
            out.push(r("file/candidate-config", "candidate configuration", "text/plain"));
        }
        Ok(out)
    }

    /// What `role` may see of `text`: read-only clients never see a secret; an operator
    /// configures secrets, and reads back what it set (docs/mcp.md, "Secrets").
    fn secrets(role: Role, text: String) -> String {
        if role == Role::ReadOnly { redact(&text) } else { text }
    }

    fn secrets_json(role: Role, v: Value) -> Value {
        if role == Role::ReadOnly { redact_json(&v) } else { v }
    }

    async fn read(&self, role: Role, uri: &str) -> Result<ReadResourceResult, ErrorData> {
        let live = self.live().await?;
        let (name, path, query) = self.parse_uri(uri, &live.devices)?;
        let device = live.devices.get(&name).map_err(ErrorData::from)?;
        let json_contents = |v: &Value, mime: &str| {
            ResourceContents::text(Self::secrets_json(role, v.clone()).to_string(), uri).with_mime_type(mime)
        };
        let contents = match path {
            "interfaces" => {
                let data = device.interfaces_doc().await.map_err(ErrorData::from)?;
                json_contents(&data, device.interfaces_mime())
            }
            "routing/ipv4/route-table" => {
                // Paged: `?cursor=N` starts at route N; the page says where the next starts.
                let start: usize = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("cursor="))
                    .map(|c| c.parse().map_err(|_| invalid(format!("`{uri}`: cursor is a route index"))))
                    .transpose()?
                    .unwrap_or(0);
                let routes = device.routes().await.map_err(ErrorData::from)?;
                let end = (start + self.page_size).min(routes.len());
                let page: Vec<Value> = routes.get(start..end).map(<[Value]>::to_vec).unwrap_or_default();
                let mut v = json!({"routes": page, "total": routes.len()});
                if end < routes.len() {
                    v["nextCursor"] = json!(end.to_string());
                    v["next"] =
                        json!(format!("{}?cursor={end}", self.uri(&name, "routing/ipv4/route-table")));
                }
                json_contents(&v, "application/json")
            }
            p if p.starts_with("interface/") => {
                let iface = &p["interface/".len()..];
                let all = device.interfaces().await.map_err(ErrorData::from)?;
                let one = all.into_iter().find(|i| i["name"] == iface).ok_or_else(|| {
                    ErrorData::resource_not_found(format!("{name} has no interface `{iface}`"), None)
                })?;
                json_contents(&device.interface_doc(one), device.interfaces_mime())
            }
            p if p.starts_with("file/") => {
                let text = device.pull(&p["file/".len()..]).await.map_err(ErrorData::from)?;
                ResourceContents::text(Self::secrets(role, text), uri).with_mime_type("text/plain")
            }
            _ => return Err(ErrorData::resource_not_found(format!("no resource `{uri}`"), None)),
        };
        Ok(ReadResourceResult::new(vec![contents]))
    }

    async fn call(
        &self,
        role: Role,
        name: &str,
        args: Option<JsonObject>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut args = Value::Object(args.unwrap_or_default());
        if name == DONE {
            if role == Role::ReadOnly {
                return Err(NetError::AccessDenied("role read-only may not end the episode".into()).into());
            }
            let finished = self
                .link
                .done()
                .await
                .ok_or_else(|| ErrorData::from(NetError::Unreachable("the episode is gone".into())))?;
            let data =
                json!({"record": finished.record, "error": finished.error, "run_dir": finished.run_dir});
            return Ok(structured(data.to_string(), data, false));
        }
        if !tools::NETWORK_TOOLS.contains(&name) {
            return Err(invalid(format!(
                "unknown tool `{name}` (tools: {}, done)",
                tools::NETWORK_TOOLS.join(", ")
            )));
        }
        if role == Role::ReadOnly && WRITES.contains(&name) {
            tracing::warn!(tool = name, args = %redact_json(&args), "refused to role read-only");
            return Err(NetError::AccessDenied(format!("role read-only may not call {name}")).into());
        }
        if let Some(d) = &self.scope_device {
            if args.get("device").is_some_and(|a| a != d.as_str()) {
                return Err(invalid(format!("this server is device {d}'s; `device` names another")));
            }
            args["device"] = json!(d);
        }
        // Wait for the network: a client may connect while the episode is still building it.
        self.live().await?;
        let call = ToolCall::new(name, args);
        // No answer: the episode ended (done, the step or time budget, the operator's stop);
        // when a budget ran out on this very call, the call ran but its answer is lost.
        let obs = self.link.call(call).await.ok_or_else(|| {
            ErrorData::from(NetError::Unreachable(
                "the episode is over (done, its step or time budget, or stopped): its network is gone; `done` returns its scores".into(),
            ))
        })?;
        if let Some(err) = obs.data.as_ref().and_then(|d| d.get("error")).and_then(NetError::from_json) {
            return Err(err.into());
        }
        let data = obs.data.clone().unwrap_or(Value::Null);
        let text = Self::secrets(role, obs.content.clone());
        Ok(structured(text, Self::secrets_json(role, data), !obs.ok))
    }
}

fn structured(text: String, data: Value, is_error: bool) -> CallToolResult {
    let content = vec![ContentBlock::text(text)];
    let mut result = if is_error { CallToolResult::error(content) } else { CallToolResult::success(content) };
    if data.is_object() {
        result.structured_content = Some(data);
    }
    result
}

impl ServerHandler for NetworkServer {
    #[allow(deprecated)] // `enable_logging`: see the `use` of LoggingLevel
    fn get_info(&self) -> InitializeResult {
        let network = to_object(self.capability());
        let mut experimental = std::collections::BTreeMap::new();
        experimental.insert("network".to_string(), network.clone());
        let mut extensions = std::collections::BTreeMap::new();
        extensions.insert("network".to_string(), network);
        let capabilities = ServerCapabilities::builder()
            .enable_experimental_with(experimental)
            .enable_extensions_with(extensions)
            .enable_logging()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_tools()
            .build();
        let instructions = self.link.live_now().map(|l| l.brief).unwrap_or_default();
        let name = match &self.scope_device {
            Some(d) => format!("netdojo device {d}"),
            None => "netdojo network".to_string(),
        };
        InitializeResult::new(capabilities)
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_server_info(Implementation::new(name, env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Owned(VERSIONS.to_vec())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let live =
            tokio::time::timeout(Duration::from_secs(60), self.link.live()).await.ok().and_then(Result::ok);
        Ok(ListToolsResult::with_all_items(self.tools_list(self.role_of(&context.extensions), live.as_ref())))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(self.role_of(&context.extensions), &request.name, request.arguments).await.map(Into::into)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let live = self.live().await?;
        let all = self.all_resources(&live).await?;
        let start: usize = match request.and_then(|r| r.cursor) {
            Some(c) => c.parse().map_err(|_| invalid(format!("bad cursor `{c}`")))?,
            None => 0,
        };
        let end = (start + self.page_size).min(all.len());
        let mut result =
            ListResourcesResult::with_all_items(all.get(start..end).map(<[_]>::to_vec).unwrap_or_default());
        if end < all.len() {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.read(self.role_of(&context.extensions), &request.uri).await.map(Into::into)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let live = self.live().await?;
        let (_, path, _) = self.parse_uri(&request.uri, &live.devices)?;
        let known = ["interfaces", "routing/ipv4/route-table"].contains(&path)
            || path.starts_with("interface/")
            || path
                .strip_prefix("file/")
                .is_some_and(|f| ["startup-config", "running-config", "candidate-config"].contains(&f));
        if !known {
            return Err(invalid(format!("`{}`: no such resource", request.uri)));
        }
        match self.session.subscriptions.lock() {
            Ok(mut s) => s.insert(request.uri),
            Err(poisoned) => poisoned.into_inner().insert(request.uri),
        };
        // A client that subscribes before `notifications/initialized` still hears of changes.
        self.start_events(context.peer);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        match self.session.subscriptions.lock() {
            Ok(mut s) => s.remove(&request.uri),
            Err(poisoned) => poisoned.into_inner().remove(&request.uri),
        };
        Ok(())
    }

    #[allow(deprecated)] // see the `use` of LoggingLevel
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let level = serde_json::to_value(request.level).ok();
        let level = level.as_ref().and_then(Value::as_str).unwrap_or("info");
        self.session.level.store(severity_of(level), std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.start_events(context.peer);
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(prompts()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        // The device named (or this server's own) decides the dialect of the prompt.
        let device =
            args.get("device").and_then(Value::as_str).map(str::to_string).or(self.scope_device.clone());
        let flavor = match (self.link.live_now(), device) {
            (Some(live), Some(d)) => live.devices.get(&d).map_or(Flavor::Frr, |d| d.flavor()),
            _ => Flavor::Frr,
        };
        // A prompt quotes its arguments: no secret goes back in one.
        let text = redact(&prompt_text(&request.name, &args, flavor)?);
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(MsgRole::User, text)]).into())
    }
}
