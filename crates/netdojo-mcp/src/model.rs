//! The vocabulary every device kind shares, below all of them: the server's [`Settings`], a
//! device's [`Event`]s and their streams, the confirmed-commit timer ([`confirm_within`]) and
//! the names of the network tools. The modules import one way (docs/mcp.md): `model`, then
//! `datastore`, the device kinds (`linux`, `gns3`; an FRR router in `device`), `device`'s
//! [`crate::Device`], `tools`, `server`, `transport`.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

pub const EXEC: &str = "network.cli.exec";
pub const CONFIGURE: &str = "network.cli.configure";
pub const YANG_GET: &str = "network.yang.get";
pub const YANG_EDIT: &str = "network.yang.edit";
pub const COMMIT: &str = "network.commit";
pub const ROLLBACK: &str = "network.rollback";
pub const PULL: &str = "network.file.pull";
pub const PUSH: &str = "network.file.push";

/// What every device of a server shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// The longest a confirmed commit may wait for its confirmation (§3 `rollbackTimeout`).
    pub rollback_timeout: Duration,
    /// Commands one `network.cli.configure` call may carry (§3 `maxBulkEdit`).
    pub max_bulk_edit: usize,
    /// How long one show command may run.
    pub exec_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            rollback_timeout: Duration::from_secs(300),
            max_bulk_edit: 1000,
            exec_timeout: Duration::from_secs(10),
        }
    }
}

/// What a device event changed, so that a server knows which resources to announce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Changed {
    /// The running configuration (and so, possibly, interfaces and routes); the candidate too
    /// when a commit consumed it.
    Running,
    /// The candidate only.
    Candidate,
}

/// The stream of configuration changes and confirmed-commit events that NETCONF reports in
/// its `NETCONF` stream (RFC 6470 `netconf-config-change`, `netconf-confirmed-commit`),
/// produced here by the device layer that owns commits.
pub const NETCONF_STREAM: &str = "netconf-stream";
/// The stream of what a device's daemons log (an FRR router's; a Linux node's kernel log is
/// the host's, not the node's, so it has none).
pub const SYSLOG_STREAM: &str = "syslog";

/// An event of a device, as the MCP server translates it into notifications (§3
/// `notificationStream`).
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub device: String,
    /// [`NETCONF_STREAM`] or [`SYSLOG_STREAM`].
    pub stream: &'static str,
    /// `netconf-config-change`, `netconf-confirmed-commit` or `syslog`.
    pub event: &'static str,
    /// An MCP logging level: `info`, `notice`, `warning`, `error`.
    pub level: &'static str,
    pub changed: Option<Changed>,
    /// What happened, redacted.
    pub data: Value,
}

/// Tells the listeners (MCP sessions) of an event of `device`, its data redacted; nobody
/// listening is fine.
pub(crate) fn send_event(
    events: &broadcast::Sender<Event>,
    device: &str,
    stream: &'static str,
    event: &'static str,
    level: &'static str,
    changed: Option<Changed>,
    data: &Value,
) {
    let mut data = crate::redact::redact_json(data);
    data["device"] = json!(device);
    let _ = events.send(Event { device: device.to_string(), stream, event, level, changed, data });
}

/// A confirmed commit waiting for its confirmation.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) commit: u64,
    /// Rolls the commit back when it fires; aborted by the confirmation.
    pub(crate) timer: JoinHandle<()>,
}

/// Starts the wait of confirmed commit `id` of `device`: `expire` runs after `wait` unless the
/// returned timer is aborted first. Tells the start (RFC 6470 `netconf-confirmed-commit`) and
/// puts the wait into the commit's `answer`.
pub(crate) fn confirm_within(
    events: &broadcast::Sender<Event>,
    device: &str,
    id: u64,
    wait: Duration,
    expire: impl std::future::Future<Output = ()> + Send + 'static,
    answer: &mut Value,
) -> Pending {
    let timer = tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        expire.await;
    });
    send_event(
        events,
        device,
        NETCONF_STREAM,
        "netconf-confirmed-commit",
        "info",
        None,
        &json!({"confirm-event": "start", "commit": id, "timeout_s": wait.as_secs_f64()}),
    );
    answer["rollback_in_s"] = json!(wait.as_secs_f64());
    answer["message"] = json!(format!(
        "committed; call network.commit again within {:.0} s to confirm, or it rolls back",
        wait.as_secs_f64()
    ));
    Pending { commit: id, timer }
}
