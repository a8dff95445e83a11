//! One emulated FRRouting router as a network device of draft 002: show commands, a candidate
//! configuration, commits (confirmed ones roll back on their own), rollback, configuration
//! files, and YANG data where FRR's northbound has it.
//!
//! FRR 8.4 has no candidate datastore, no commit and no rollback of its own (see
//! docs/mcp.md), so they are built here on top of it: the candidate is staged command text,
//! checked by vtysh's own parser (`vtysh -C`) as it is staged; a commit applies it with
//! `vtysh -f` and keeps the configuration from before; a rollback hands that configuration to
//! FRR's `frr-reload.py`, which applies only the difference, and then checks that the running
//! configuration is the one asked for.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use netdojo_linux::frr::{Frr, FrrError, VtyshOutput};
use netdojo_linux::network::Network;
use netdojo_linux::vty;
use netdojo_netconf::env::{CommandResult, apply_commands};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{Mutex, broadcast};
use tokio::task::JoinHandle;

use crate::error::NetError;
use crate::gns3::{self, Gns3Device};
use crate::linux::{self, LinuxDevice};
use crate::model::{self, Pending, confirm_within, send_event};
use crate::redact::redact;

// The shared vocabulary, also under this module's name (where it lived first).
pub use crate::model::{Changed, Event, NETCONF_STREAM, SYSLOG_STREAM, Settings};

/// The daemons whose YANG modules a device advertises, and which daemon serves a module.
const YANG_DAEMONS: [&str; 5] = ["zebra", "staticd", "ripd", "ospfd", "bgpd"];

/// The daemon that answers for a YANG path (or a module name), by its modules: the first
/// step's, unless a later step is a protocol daemon's augment
/// (`/frr-interface:lib/interface[name='eth0']/frr-ripd:rip` is ripd's).
pub fn daemon_of(path: &str) -> Option<&'static str> {
    // The steps' module prefixes, predicates (which may hold `:` and `/`) left out.
    let mut depth = 0usize;
    let unpredicated: String = path
        .chars()
        .filter(|c| {
            match c {
                '[' => depth += 1,
                ']' => depth = depth.saturating_sub(1),
                _ => return depth == 0,
            }
            false
        })
        .collect();
    let mut modules = unpredicated
        .trim_start_matches('/')
        .split('/')
        .filter_map(|step| step.split_once(':').map(|(m, _)| m));
    let first = module_daemon(modules.next().unwrap_or(unpredicated.trim_start_matches('/')))?;
    Some(modules.filter_map(module_daemon).rfind(|d| *d != "zebra").unwrap_or(first))
}

fn module_daemon(module: &str) -> Option<&'static str> {
    Some(match module {
        "frr-interface"
        | "frr-zebra"
        | "frr-vrf"
        | "frr-route-map"
        | "frr-filter"
        | "frr-zebra-route-map"
        | "frr-nexthop" => "zebra",
        "frr-staticd" | "frr-routing" => "staticd",
        "frr-ripd" => "ripd",
        "frr-ospfd" => "ospfd",
        "frr-bgp" => "bgpd",
        _ => return None,
    })
}

/// How often an FRR router's daemon logs are read for the syslog stream.
const SYSLOG_POLL: Duration = Duration::from_millis(500);

/// How many events a slow listener may fall behind before it misses some.
const EVENT_BACKLOG: usize = 256;

/// Forwards the new lines of `device`'s daemon logs as [`SYSLOG_STREAM`] events, until the
/// network is gone. A line with an FRR error code (FRR's errors and warnings) is a `warning`,
/// any other `info`.
fn tail_syslog(device: String, net: Weak<Network>, events: broadcast::Sender<Event>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut cursor = netdojo_linux::frr::LogCursor::default();
        let mut tick = tokio::time::interval(SYSLOG_POLL);
        loop {
            tick.tick().await;
            let lines = {
                let Some(net) = net.upgrade() else { return };
                let Some(frr) = net.frr(&device) else { return };
                frr.read_logs(&mut cursor)
            };
            for line in lines {
                let level = if line.error_code.is_some() { "warning" } else { "info" };
                let data = serde_json::to_value(&line).unwrap_or_default();
                send_event(&events, &device, SYSLOG_STREAM, "syslog", level, None, &data);
            }
        }
    })
}

/// One commit of the device's history.
#[derive(Debug, Clone, Serialize)]
pub struct Commit {
    pub id: u64,
    /// Seconds since the epoch.
    pub at: u64,
    pub kind: &'static str,
    pub comment: String,
    pub commands: Vec<String>,
    #[serde(skip)]
    pub before: String,
    #[serde(skip)]
    pub after: String,
}

#[derive(Debug, Default)]
struct State {
    candidate: Vec<String>,
    history: Vec<Commit>,
    next_id: u64,
    pending: Option<Pending>,
    /// Set when a confirmed commit expired and was rolled back; told once, to the next commit.
    expired: Option<String>,
}

/// One FRRouting router.
#[derive(Debug)]
pub struct FrrDevice {
    name: String,
    net: Weak<Network>,
    settings: Settings,
    startup: String,
    yang_modules: Vec<String>,
    state: Mutex<State>,
    events: broadcast::Sender<Event>,
    /// Reads the daemons' logs into the syslog stream; stopped at shutdown.
    syslog: std::sync::Mutex<Option<JoinHandle<()>>>,
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}

fn frr_err(e: FrrError) -> NetError {
    match e {
        FrrError::Timeout { .. } => NetError::Timeout(e.to_string()),
        other => NetError::Internal(other.to_string()),
    }
}

/// vtysh's answer when no daemon of the router listens any more.
fn check_reachable(device: &str, out: &VtyshOutput) -> Result<(), NetError> {
    let text = out.text();
    if text.contains("failed to connect to any daemons")
        || (text.contains("is not running") && !out.success())
    {
        return Err(NetError::Unreachable(format!("device {device}: {}", text.trim())));
    }
    Ok(())
}

/// A configuration as compared after a restore: its blocks (a top-level line with the lines
/// under it), in a stable order, without the banner, comments, `end`, and blocks that hold
/// nothing (frr-reload.py leaves `interface X` / `exit` behind when it removes the last line of
/// an interface). FRR prints blocks in its own order; a backup may have them in any.
pub fn normalize(config: &str) -> Vec<String> {
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    for line in config.lines().map(str::trim_end) {
        if line.is_empty()
            || line == "!"
            || line == "end"
            || line.starts_with("Building configuration")
            || line.starts_with("Current configuration")
        {
            continue;
        }
        match blocks.last_mut() {
            Some(block) if line.starts_with(' ') || line == "exit" => block.push(line),
            _ => blocks.push(vec![line]),
        }
    }
    let mut out: Vec<String> =
        blocks.into_iter().filter(|b| !(b.len() == 2 && b[1] == "exit")).map(|b| b.join("\n")).collect();
    out.sort();
    out
}

/// Words that start a read-only command.
fn read_only(command: &str) -> bool {
    let c = command.trim();
    (c == "show" || c.starts_with("show ")) && !c.contains(['\n', '\r', ';', '|'])
}

/// Lines that frame a configuration session and are not sent.
fn framing(c: &str) -> bool {
    matches!(c.trim(), "configure terminal" | "conf t" | "configure" | "end")
}

impl FrrDevice {
    /// Reads what the device is (its YANG modules, the configuration it booted with).
    pub async fn discover(
        name: &str,
        net: Weak<Network>,
        settings: Settings,
        events: broadcast::Sender<Event>,
    ) -> Result<Self, NetError> {
        let mut device = Self {
            name: name.into(),
            net,
            settings,
            startup: String::new(),
            yang_modules: vec![],
            state: Mutex::new(State { next_id: 1, ..State::default() }),
            events: events.clone(),
            syslog: std::sync::Mutex::new(None),
        };
        device.startup = device.running().await?;
        let daemons = device.vtysh(&["-c", "show daemons"], settings.exec_timeout).await?.stdout;
        let mut modules = std::collections::BTreeSet::new();
        for daemon in daemons.split_whitespace().filter(|d| YANG_DAEMONS.contains(d)) {
            let out =
                device.vtysh(&["-c", &format!("show yang module {daemon}")], settings.exec_timeout).await?;
            // ` frr-interface   1.1   2020-02-05   I   http://...`: implemented modules only.
            for line in out.stdout.lines() {
                let words: Vec<&str> = line.split_whitespace().collect();
                // Advertised only where network.yang.get can read it: a module a daemon
                // lists but none serves by its prefix (ietf-yang-schema-mount, ...) is not.
                if words.len() >= 4 && words.contains(&"I") && daemon_of(words[0]).is_some() {
                    modules.insert(words[0].to_string());
                }
            }
        }
        device.yang_modules = modules.into_iter().collect();
        device.syslog =
            std::sync::Mutex::new(Some(tail_syslog(device.name.clone(), device.net.clone(), events)));
        Ok(device)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Tells the listeners (MCP sessions) of an event of the NETCONF stream.
    fn emit(&self, event: &'static str, level: &'static str, changed: Option<Changed>, data: Value) {
        send_event(&self.events, &self.name, NETCONF_STREAM, event, level, changed, &data);
    }

    /// A configuration change (RFC 6470 `netconf-config-change`).
    fn config_changed(&self, changed: Changed, operation: &str, data: Value) {
        let mut data = data;
        data["operation"] = json!(operation);
        data["datastore"] = json!(if changed == Changed::Running { "running" } else { "candidate" });
        self.emit("netconf-config-change", "notice", Some(changed), data);
    }

    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// The device's network namespace, while the episode lives.
    pub fn namespace(&self) -> Option<String> {
        self.net.upgrade()?.ns_name(&self.name).map(str::to_string)
    }

    /// The YANG modules the device's daemons implement.
    pub fn yang_modules(&self) -> &[String] {
        &self.yang_modules
    }

    /// The network, while the episode lives.
    fn network(&self) -> Result<Arc<Network>, NetError> {
        self.net.upgrade().ok_or_else(|| {
            NetError::Unreachable(format!(
                "device {}: the emulated network is gone (the episode ended)",
                self.name
            ))
        })
    }

    async fn with_frr<T, F>(&self, f: F) -> Result<T, NetError>
    where
        F: AsyncFnOnce(&Frr) -> Result<T, FrrError>,
    {
        let net = self.network()?;
        let frr = net
            .frr(&self.name)
            .ok_or_else(|| NetError::Unreachable(format!("device {} runs no FRR", self.name)))?;
        f(frr).await.map_err(frr_err)
    }

    async fn vtysh(&self, args: &[&str], timeout: Duration) -> Result<VtyshOutput, NetError> {
        let out = self.with_frr(async |frr| frr.vtysh(args, timeout).await).await?;
        check_reachable(&self.name, &out)?;
        Ok(out)
    }

    /// `show running-config`.
    pub async fn running(&self) -> Result<String, NetError> {
        let out = self.vtysh(&["-c", "show running-config"], self.settings.exec_timeout).await?;
        Ok(out.stdout)
    }

    /// The configuration the device booted with.
    pub fn startup(&self) -> &str {
        &self.startup
    }

    /// A read-only show command. Anything else is refused before it reaches the device.
    pub async fn exec(&self, command: &str, timeout: Option<Duration>) -> Result<String, NetError> {
        // Checked before vtysh is spawned: a NUL byte or a huge line is the client's invalid
        // input (-32602), not a broken server (-32603).
        let checked = vty::check_show_command(command).map_err(|refusal| {
            NetError::InvalidParams(format!(
                "device {}: {}; network.cli.exec runs read-only `show` commands, use network.cli.configure",
                self.name,
                redact(&refusal.to_string())
            ))
        })?;
        if !read_only(checked) {
            return Err(NetError::InvalidParams(format!(
                "device {}: refused: `{}`: network.cli.exec runs one read-only `show` command, without `;` or `|`",
                self.name,
                redact(checked)
            )));
        }
        let timeout = timeout.unwrap_or(self.settings.exec_timeout).min(self.settings.exec_timeout);
        let out = self.vtysh(&["-c", checked], timeout).await?;
        if !out.success() {
            return Err(NetError::InvalidParams(format!("device {}: {}", self.name, out.text().trim())));
        }
        Ok(out.stdout)
    }

    /// Stages `commands` into the candidate (`target: candidate`, vtysh checks each one first
    /// and only those it accepts are staged), or applies them to the running configuration
    /// at once (`target: running`). Answers each command.
    pub async fn configure(
        &self,
        commands: &[String],
        running: bool,
    ) -> Result<Vec<CommandResult>, NetError> {
        crate::datastore::check_bulk(&self.settings, commands.len())?;
        let mut state = self.state.lock().await;
        if running {
            let results = self.with_frr(async |frr| apply_commands(frr, commands, false).await).await?;
            if results.iter().any(|r| r.status == "success" && !framing(&r.command)) {
                self.config_changed(Changed::Running, "configure", json!({"commands": commands}));
            }
            return Ok(results);
        }
        // Checked in the context of what is already staged (`network 10.0.0.0/24 area 0` is a
        // command only under `router ospf`).
        let mut all: Vec<String> = state.candidate.clone();
        all.extend(commands.iter().cloned());
        let results = self.with_frr(async |frr| apply_commands(frr, &all, true).await).await?;
        let new = results[state.candidate.len()..].to_vec();
        let staged = state.candidate.len();
        for r in &new {
            if r.status == "success" && !framing(&r.command) {
                state.candidate.push(r.command.clone());
            }
        }
        if state.candidate.len() > staged {
            let added = state.candidate[staged..].to_vec();
            self.config_changed(Changed::Candidate, "configure", json!({"commands": added}));
        }
        Ok(new)
    }

    /// The staged candidate.
    pub async fn candidate(&self) -> Vec<String> {
        self.state.lock().await.candidate.clone()
    }

    /// Commits the candidate. A confirmed commit rolls back on its own unless a later commit
    /// confirms it within `timeout` (at most `rollbackTimeout`). A candidate the device
    /// refuses is not applied at all: what got through is undone and the answer says which
    /// command failed (-32084).
    pub async fn commit(
        self: &Arc<Self>,
        confirmed: bool,
        timeout: Option<Duration>,
        comment: &str,
    ) -> Result<Value, NetError> {
        let mut state = self.state.lock().await;
        if let Some(message) = state.expired.take() {
            return Err(NetError::ConfirmedCommitTimeout(message));
        }
        let mut confirmed_now = None;
        if let Some(pending) = state.pending.take() {
            pending.timer.abort();
            confirmed_now = Some(pending.commit);
        }
        if let Some(id) = confirmed_now {
            self.emit(
                "netconf-confirmed-commit",
                "info",
                None,
                json!({"confirm-event": "complete", "commit": id}),
            );
        }
        if state.candidate.is_empty() {
            return Ok(json!({"device": self.name, "committed": false, "confirmed": confirmed_now,
                "message": if confirmed_now.is_some() { "confirmed" } else { "nothing to commit" }}));
        }
        let before = self.running().await?;
        let commands = state.candidate.clone();
        let results = self.with_frr(async |frr| apply_commands(frr, &commands, false).await).await?;
        let failed: Vec<&CommandResult> = results.iter().filter(|r| r.status != "success").collect();
        if !failed.is_empty() {
            let details = json!({"results": results});
            self.restore(&before).await.map_err(|e| {
                NetError::RollbackFailed(format!("the commit failed and undoing it failed too: {e}"))
            })?;
            return Err(NetError::ConfigIncompatible {
                message: format!(
                    "device {} refused the candidate ({} command(s) failed, first `{}`: {}); nothing was committed",
                    self.name,
                    failed.len(),
                    redact(&failed[0].command),
                    failed[0].error
                ),
                details,
            });
        }
        let after = self.running().await?;
        let id = state.next_id;
        state.next_id += 1;
        state.history.push(Commit {
            id,
            at: now(),
            kind: if confirmed { "commit-confirmed" } else { "commit" },
            comment: comment.into(),
            commands,
            before,
            after,
        });
        state.candidate.clear();
        self.config_changed(
            Changed::Running,
            "commit",
            json!({"commit": id, "confirmed": confirmed, "comment": comment}),
        );
        let mut answer = json!({"device": self.name, "committed": true, "commit": id, "results": results,
            "confirmed": confirmed_now});
        if confirmed {
            let wait = timeout.unwrap_or(self.settings.rollback_timeout).min(self.settings.rollback_timeout);
            let device = Arc::clone(self);
            let expire = async move { device.expire(id, wait).await };
            state.pending = Some(confirm_within(&self.events, &self.name, id, wait, expire, &mut answer));
        }
        Ok(answer)
    }

    /// The confirmed commit `id` was not confirmed in time: back to what was before it.
    async fn expire(&self, id: u64, waited: Duration) {
        let mut state = self.state.lock().await;
        if state.pending.as_ref().map(|p| p.commit) != Some(id) {
            return;
        }
        state.pending = None;
        let Some(commit) = state.history.iter().find(|c| c.id == id).cloned() else { return };
        let restored = self.restore(&commit.before).await;
        let message = match &restored {
            Ok(()) => {
                self.record(
                    &mut state,
                    "rollback-unconfirmed",
                    &format!("commit {id} not confirmed"),
                    &commit.after,
                    &commit.before,
                );
                format!(
                    "commit {id} was not confirmed within {:.0} s and was rolled back",
                    waited.as_secs_f64()
                )
            }
            Err(e) => format!(
                "commit {id} was not confirmed within {:.0} s; rolling it back failed: {e}",
                waited.as_secs_f64()
            ),
        };
        tracing::warn!(device = %self.name, "{message}");
        // The rollback attempt may have changed the running configuration either way.
        self.emit(
            "netconf-confirmed-commit",
            if restored.is_ok() { "warning" } else { "error" },
            Some(Changed::Running),
            json!({"confirm-event": "timeout", "commit": id, "rolled_back": restored.is_ok(), "message": message}),
        );
        state.expired = Some(message);
    }

    fn record(&self, state: &mut State, kind: &'static str, comment: &str, before: &str, after: &str) {
        let id = state.next_id;
        state.next_id += 1;
        state.history.push(Commit {
            id,
            at: now(),
            kind,
            comment: comment.into(),
            commands: vec![],
            before: before.into(),
            after: after.into(),
        });
    }

    /// Makes `config` the running configuration with frr-reload.py, then checks it is.
    async fn restore(&self, config: &str) -> Result<(), NetError> {
        let out = self.with_frr(async |frr| frr.reload(config).await).await?;
        let running = self.running().await?;
        let (want, have) = (normalize(config), normalize(&running));
        if want != have {
            let missing: Vec<&String> = want.iter().filter(|l| !have.contains(l)).collect();
            let extra: Vec<&String> = have.iter().filter(|l| !want.contains(l)).collect();
            return Err(NetError::RollbackFailed(format!(
                "device {}: the running configuration differs from the one restored (missing {:?}, extra {:?}); frr-reload.py said: {}",
                self.name,
                missing.iter().map(|l| redact(l)).collect::<Vec<_>>(),
                extra.iter().map(|l| redact(l)).collect::<Vec<_>>(),
                redact(out.text().lines().rev().take(5).collect::<Vec<_>>().join(" / ").trim())
            )));
        }
        Ok(())
    }

    /// Undoes commit `id` and every one after it (default: the last one).
    pub async fn rollback(&self, id: Option<u64>) -> Result<Value, NetError> {
        let mut state = self.state.lock().await;
        let target = match id {
            Some(id) => state.history.iter().find(|c| c.id == id).cloned(),
            None => state.history.last().cloned(),
        };
        let Some(target) = target else {
            let ids: Vec<u64> = state.history.iter().map(|c| c.id).collect();
            return Err(NetError::RollbackFailed(match id {
                Some(id) => {
                    format!("device {}: no commit {id} to roll back to (commits: {ids:?})", self.name)
                }
                None => format!("device {}: no commit to roll back", self.name),
            }));
        };
        if let Some(pending) = state.pending.take() {
            pending.timer.abort();
        }
        let current = self.running().await?;
        let restored = self.restore(&target.before).await;
        self.config_changed(
            Changed::Running,
            "rollback",
            json!({"rolled_back_to_before": target.id, "ok": restored.is_ok()}),
        );
        restored?;
        self.record(
            &mut state,
            "rollback",
            &format!("rollback of commit {}", target.id),
            &current,
            &target.before,
        );
        Ok(json!({"device": self.name, "rolled_back_to_before": target.id, "commit": state.next_id - 1}))
    }

    /// The commit history.
    pub async fn history(&self) -> Vec<Commit> {
        self.state.lock().await.history.clone()
    }

    /// A configuration file: `running-config`, `startup-config` or `candidate-config`.
    pub async fn pull(&self, file: &str) -> Result<String, NetError> {
        match file {
            "running-config" => self.running().await,
            "startup-config" => Ok(self.startup.clone()),
            "candidate-config" => Ok(self.candidate().await.join("\n") + "\n"),
            other => Err(NetError::InvalidParams(format!(
                "unknown file `{other}` (files: running-config, startup-config, candidate-config)"
            ))),
        }
    }

    /// Restores a configuration file: `running-config` replaces the running configuration
    /// (recorded as a commit, so it can be rolled back), `candidate-config` the candidate.
    /// Content vtysh does not accept is refused whole (-32084) before anything changes.
    pub async fn push(&self, file: &str, content: &str) -> Result<Value, NetError> {
        if !matches!(file, "running-config" | "candidate-config") {
            return Err(NetError::InvalidParams(format!(
                "cannot push `{file}` (files: running-config, candidate-config)"
            )));
        }
        let lines: Vec<String> = content
            .lines()
            .filter(|l| {
                !l.starts_with("Building configuration")
                    && !l.starts_with("Current configuration")
                    && !l.trim().is_empty()
            })
            .map(str::to_string)
            .collect();
        let results = self.with_frr(async |frr| apply_commands(frr, &lines, true).await).await?;
        let failed: Vec<&CommandResult> = results.iter().filter(|r| r.status != "success").collect();
        if let Some(first) = failed.first() {
            return Err(NetError::ConfigIncompatible {
                message: format!(
                    "device {}: {} line(s) of {file} are not configuration this device accepts, first `{}`: {}; nothing changed",
                    self.name,
                    failed.len(),
                    redact(&first.command),
                    first.error
                ),
                details: json!({"results": results}),
            });
        }
        let mut state = self.state.lock().await;
        if file == "candidate-config" {
            state.candidate = lines.into_iter().filter(|l| !framing(l)).collect();
            self.config_changed(Changed::Candidate, "push", json!({"lines": state.candidate.len()}));
            return Ok(json!({"device": self.name, "file": file, "lines": state.candidate.len()}));
        }
        if let Some(pending) = state.pending.take() {
            pending.timer.abort();
        }
        let before = self.running().await?;
        let restored = self.restore(content).await;
        self.config_changed(Changed::Running, "push", json!({"ok": restored.is_ok()}));
        restored?;
        let after = self.running().await?;
        self.record(&mut state, "push", "network.file.push running-config", &before, &after);
        Ok(json!({"device": self.name, "file": file, "commit": state.next_id - 1}))
    }

    /// YANG data from FRR's northbound: `operational` state of a path, or the `running`
    /// configuration of the daemon that owns it, as JSON.
    pub async fn yang_get(&self, path: &str, datastore: &str) -> Result<Value, NetError> {
        let daemon = daemon_of(path).ok_or_else(|| {
            NetError::InvalidParams(format!(
                "no daemon of this device serves `{path}` (modules: {})",
                self.yang_modules.join(", ")
            ))
        })?;
        if path.contains(['\n', '\r', '"', '\0'])
            || path.len() > vty::MAX_LINE
            || path.split_whitespace().count() != 1
        {
            return Err(NetError::InvalidParams(format!("`{path}` is not one XPath")));
        }
        let command = match datastore {
            "operational" => format!("show yang operational-data {path} {daemon}"),
            "running" => format!("show configuration running json {daemon}"),
            other => {
                return Err(NetError::InvalidParams(format!(
                    "datastore `{other}`: network.yang.get reads `running` or `operational`"
                )));
            }
        };
        let out = self.vtysh(&["-c", &command], self.settings.exec_timeout).await?;
        let text = out.stdout.trim();
        if text.is_empty() {
            return Ok(json!({}));
        }
        let data: Value = serde_json::from_str(text)
            .map_err(|_| NetError::InvalidParams(format!("device {}: {}", self.name, out.text().trim())))?;
        // FRR answers `running` with the daemon's whole configuration: the path selects in it,
        // as FRR itself does for `operational`.
        if datastore == "running" {
            return crate::yang_path::select(&data, path);
        }
        Ok(data)
    }

    /// The IPv4 route table (`show ip route json`), as routes in prefix order.
    pub async fn routes(&self) -> Result<Vec<Value>, NetError> {
        let out = self.exec("show ip route json", None).await?;
        let table: BTreeMap<String, Value> = serde_json::from_str(out.trim()).unwrap_or_default();
        Ok(table.into_values().flat_map(|v| v.as_array().cloned().unwrap_or_default()).collect())
    }

    /// The interfaces, as FRR's `frr-interface` YANG data.
    pub async fn interfaces(&self) -> Result<Vec<Value>, NetError> {
        let data = self.yang_get("/frr-interface:lib", "operational").await?;
        Ok(data["frr-interface:lib"]["interface"].as_array().cloned().unwrap_or_default())
    }

    /// Stops a pending confirmation timer (the episode is over).
    pub async fn shutdown(&self) {
        if let Some(p) = self.state.lock().await.pending.take() {
            p.timer.abort();
        }
        let tailer = match self.syslog.lock() {
            Ok(mut t) => t.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(t) = tailer {
            t.abort();
        }
    }
}

/// One device of a network: an FRRouting router, a plain Linux node (iproute2), or a GNS3
/// node behind its console (Cisco IOS, VPCS). The server, the tools and the episode handle
/// them all through this; what a kind does not offer it says in its capability and answers
/// with the seed's error.
#[derive(Debug, Clone)]
pub enum Device {
    Frr(Arc<FrrDevice>),
    Linux(Arc<LinuxDevice>),
    Gns3(Arc<Gns3Device>),
}

impl Device {
    pub fn name(&self) -> &str {
        match self {
            Self::Frr(d) => d.name(),
            Self::Linux(d) => d.name(),
            Self::Gns3(d) => d.name(),
        }
    }

    /// The device's network namespace, while the episode lives (a GNS3 node has none of
    /// netdojo's).
    pub fn namespace(&self) -> Option<String> {
        match self {
            Self::Frr(d) => d.namespace(),
            Self::Linux(d) => d.namespace(),
            Self::Gns3(_) => None,
        }
    }

    /// The YANG modules the device implements (none on Linux or on a console).
    pub fn yang_modules(&self) -> &[String] {
        match self {
            Self::Frr(d) => d.yang_modules(),
            Self::Linux(_) | Self::Gns3(_) => &[],
        }
    }

    /// §3 `cliDialect`.
    pub fn cli_dialect(&self) -> &'static str {
        match self {
            Self::Frr(_) => "frr-vtysh",
            Self::Linux(_) => linux::DIALECT,
            Self::Gns3(d) => gns3::dialect_name(d.dialect()),
        }
    }

    /// The family of the device's CLI, which picks the texts of tools and prompts.
    pub fn flavor(&self) -> Flavor {
        match self {
            Self::Frr(_) => Flavor::Frr,
            Self::Linux(_) => Flavor::Linux,
            Self::Gns3(_) => Flavor::Console,
        }
    }

    /// §3 `configDatastore`: a Linux or GNS3 device has a candidate (staged commands) and its
    /// running configuration, and no operational datastore (no YANG).
    pub fn datastores(&self) -> &'static [&'static str] {
        match self {
            Self::Frr(_) => &["running", "candidate", "operational"],
            Self::Linux(_) | Self::Gns3(_) => &["running", "candidate"],
        }
    }

    /// §3 `notificationStream`: what the device's events can be.
    pub fn notification_streams(&self) -> &'static [&'static str] {
        match self {
            Self::Frr(_) => &[NETCONF_STREAM, SYSLOG_STREAM],
            Self::Linux(_) | Self::Gns3(_) => &[NETCONF_STREAM],
        }
    }

    /// §3 `supportsRollback`: every kind (a Linux node's by snapshot and restore, a GNS3
    /// node's by the commands that take its configuration back).
    pub fn supports_rollback(&self) -> bool {
        true
    }

    /// Whether the device backs `tool` (`_meta.available` in tools/list).
    pub fn offers(&self, tool: &str) -> bool {
        match self {
            Self::Frr(_) => tool != model::YANG_EDIT,
            Self::Linux(_) | Self::Gns3(_) => ![model::YANG_GET, model::YANG_EDIT].contains(&tool),
        }
    }

    /// A read-only command. `timeout` bounds it on FRR and Linux; a console command is bounded
    /// by the console's own limit.
    pub async fn exec(&self, command: &str, timeout: Option<Duration>) -> Result<String, NetError> {
        match self {
            Self::Frr(d) => d.exec(command, timeout).await,
            Self::Linux(d) => d.exec(command, timeout).await,
            Self::Gns3(d) => d.exec(command).await,
        }
    }

    pub async fn configure(
        &self,
        commands: &[String],
        running: bool,
    ) -> Result<Vec<CommandResult>, NetError> {
        match self {
            Self::Frr(d) => d.configure(commands, running).await,
            Self::Linux(d) => d.configure(commands, running).await,
            Self::Gns3(d) => d.configure(commands, running).await,
        }
    }

    pub async fn commit(
        &self,
        confirmed: bool,
        timeout: Option<Duration>,
        comment: &str,
    ) -> Result<Value, NetError> {
        match self {
            Self::Frr(d) => d.commit(confirmed, timeout, comment).await,
            Self::Linux(d) => d.commit(confirmed, timeout, comment).await,
            Self::Gns3(d) => d.commit(confirmed, timeout, comment).await,
        }
    }

    pub async fn rollback(&self, id: Option<u64>) -> Result<Value, NetError> {
        match self {
            Self::Frr(d) => d.rollback(id).await,
            Self::Linux(d) => d.rollback(id).await,
            Self::Gns3(d) => d.rollback(id).await,
        }
    }

    pub async fn pull(&self, file: &str) -> Result<String, NetError> {
        match self {
            Self::Frr(d) => d.pull(file).await,
            Self::Linux(d) => d.pull(file).await,
            Self::Gns3(d) => d.pull(file).await,
        }
    }

    pub async fn push(&self, file: &str, content: &str) -> Result<Value, NetError> {
        match self {
            Self::Frr(d) => d.push(file, content).await,
            Self::Linux(d) => d.push(file, content).await,
            Self::Gns3(d) => d.push(file, content).await,
        }
    }

    /// YANG data; a Linux or GNS3 device has none (-32084, the seed's downgrade to the CLI).
    pub async fn yang_get(&self, path: &str, datastore: &str) -> Result<Value, NetError> {
        let what = match self {
            Self::Frr(d) => return d.yang_get(path, datastore).await,
            Self::Linux(_) => "a Linux node",
            Self::Gns3(_) => "a GNS3 node's console",
        };
        Err(NetError::ConfigIncompatible {
            message: format!(
                "device {}: network.yang.get is not available ({what} has no YANG datastore); use network.cli.exec",
                self.name()
            ),
            details: json!({"available": false, "use": model::EXEC}),
        })
    }

    /// The IPv4 route table, as routes.
    pub async fn routes(&self) -> Result<Vec<Value>, NetError> {
        match self {
            Self::Frr(d) => d.routes().await,
            Self::Linux(d) => d.routes().await,
            Self::Gns3(d) => d.routes().await,
        }
    }

    /// The interfaces, each with a `name`.
    pub async fn interfaces(&self) -> Result<Vec<Value>, NetError> {
        match self {
            Self::Frr(d) => d.interfaces().await,
            Self::Linux(d) => d.interfaces().await,
            Self::Gns3(d) => d.interfaces().await,
        }
    }

    /// The MIME type of the interface resources.
    pub fn interfaces_mime(&self) -> &'static str {
        match self {
            Self::Frr(_) => "application/yang-data+json",
            Self::Linux(_) | Self::Gns3(_) => "application/json",
        }
    }

    /// The `interfaces` resource: FRR's `/frr-interface:lib` operational data, or a Linux
    /// node's `ip -j addr show` (a GNS3 node's interfaces) as `{"interfaces": [...]}`.
    pub async fn interfaces_doc(&self) -> Result<Value, NetError> {
        match self {
            Self::Frr(d) => d.yang_get("/frr-interface:lib", "operational").await,
            _ => Ok(json!({"interfaces": self.interfaces().await?})),
        }
    }

    /// The `interface/NAME` resource, from one entry of [`Device::interfaces`].
    pub fn interface_doc(&self, one: Value) -> Value {
        match self {
            Self::Frr(_) => json!({"frr-interface:lib": {"interface": [one]}}),
            Self::Linux(_) | Self::Gns3(_) => json!({"interfaces": [one]}),
        }
    }

    /// Stops a pending confirmation timer (the episode is over).
    pub async fn shutdown(&self) {
        match self {
            Self::Frr(d) => d.shutdown().await,
            Self::Linux(d) => d.shutdown().await,
            Self::Gns3(d) => d.shutdown().await,
        }
    }
}

/// Every device of one network.
#[derive(Debug)]
pub struct Devices {
    pub devices: BTreeMap<String, Device>,
    pub links: Vec<String>,
    /// The events of every device.
    events: broadcast::Sender<Event>,
}

/// The family of a device's CLI: which texts its tools and prompts carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// FRRouting's vtysh.
    Frr,
    /// iproute2 and friends on a Linux node.
    Linux,
    /// A GNS3 node's console (Cisco IOS, VPCS).
    Console,
}

/// Which nodes of a network are devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kinds {
    /// The FRR routers only (NetConfBench: its other nodes are the testcases' hosts).
    Frr,
    /// Every node as a Linux device (the routing application: router, hosts, switches).
    Linux,
}

impl Devices {
    /// The FRR routers of `net`.
    pub async fn discover(net: &Arc<Network>, settings: Settings) -> Result<Self, NetError> {
        Self::discover_kinds(net, settings, Kinds::Frr).await
    }

    /// The devices of `net`, of the `kinds` asked for.
    pub async fn discover_kinds(
        net: &Arc<Network>,
        settings: Settings,
        kinds: Kinds,
    ) -> Result<Self, NetError> {
        let mut devices = BTreeMap::new();
        let (events, _) = broadcast::channel(EVENT_BACKLOG);
        for (name, _) in net.topology().nodes() {
            let device = match kinds {
                Kinds::Frr if net.frr(name).is_some() => Device::Frr(Arc::new(
                    FrrDevice::discover(name, Arc::downgrade(net), settings, events.clone()).await?,
                )),
                Kinds::Linux if net.ns_name(name).is_some() => Device::Linux(Arc::new(
                    LinuxDevice::discover(name, Arc::downgrade(net), settings, events.clone()).await?,
                )),
                _ => continue,
            };
            devices.insert(name.to_string(), device);
        }
        let links = net
            .topology()
            .topology
            .links
            .iter()
            .map(|l| {
                format!(
                    "{} <-> {}",
                    l.endpoints[0].replacen(':', " ", 1),
                    l.endpoints[1].replacen(':', " ", 1)
                )
            })
            .collect();
        Ok(Self { devices, links, events })
    }

    /// The nodes of a GNS3 project that have a console, each a device; `links` as built.
    pub async fn from_consoles(
        consoles: BTreeMap<String, Weak<tokio::sync::Mutex<netdojo_gns3::device::Device>>>,
        links: Vec<String>,
        settings: Settings,
    ) -> Result<Self, NetError> {
        let (events, _) = broadcast::channel(EVENT_BACKLOG);
        let mut devices = BTreeMap::new();
        for (name, console) in consoles {
            let device = Gns3Device::discover(&name, console, settings, events.clone()).await?;
            devices.insert(name, Device::Gns3(Arc::new(device)));
        }
        Ok(Self { devices, links, events })
    }

    /// The events of every device from now on.
    pub fn events(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    pub fn get(&self, name: &str) -> Result<&Device, NetError> {
        self.devices.get(name).ok_or_else(|| {
            NetError::InvalidParams(format!(
                "unknown device `{name}`; devices: {}",
                self.devices.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }

    pub fn names(&self) -> Vec<String> {
        self.devices.keys().cloned().collect()
    }

    pub async fn shutdown(&self) {
        for d in self.devices.values() {
            d.shutdown().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_show_commands_are_read_only() {
        assert!(read_only("show ip route"));
        assert!(read_only("  show running-config "));
        for refused in
            ["configure terminal", "write memory", "showx", "show ip route\nconf t", "clear ip route *"]
        {
            assert!(!read_only(refused), "{refused:?}");
        }
    }

    #[test]
    fn normalize_drops_the_banner_and_empty_stanzas() {
        let a = "Building configuration...\n\nCurrent configuration:\n!\nhostname R1\n!\ninterface eth0\nexit\n!\nip route 1.0.0.0/8 lo\nend\n";
        let b = "!\nip route 1.0.0.0/8 lo\nhostname R1\n!\nend\n";
        assert_eq!(normalize(a), normalize(b));
        let c = "interface eth0\n ip address 10.0.0.1/24\nexit\n";
        assert_eq!(normalize(c), ["interface eth0\n ip address 10.0.0.1/24\nexit"]);
        let d = "interface eth0\n ip address 10.0.0.2/24\nexit\n";
        assert_ne!(normalize(c), normalize(d));
    }

    #[test]
    fn yang_paths_map_to_their_daemon() {
        assert_eq!(daemon_of("/frr-interface:lib"), Some("zebra"));
        assert_eq!(daemon_of("/frr-interface:lib/interface[name='eth0']"), Some("zebra"));
        assert_eq!(daemon_of("/frr-ripd:ripd"), Some("ripd"));
        assert_eq!(daemon_of("/ietf-interfaces:interfaces"), None);
        assert_eq!(daemon_of("frr-ripd"), Some("ripd"));
        assert_eq!(daemon_of("ietf-yang-schema-mount"), None);
        assert_eq!(daemon_of("/frr-interface:lib/interface[name='eth0']/frr-ripd:rip"), Some("ripd"));
        assert_eq!(daemon_of("/frr-interface:lib/interface[name='a:b/c']/state"), Some("zebra"));
    }
}
