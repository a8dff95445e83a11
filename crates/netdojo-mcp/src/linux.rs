//! One node of a plain Linux network (the routing application's router, hosts and switches:
//! iproute2, no FRR) as a network device of draft 002.
//!
//! Every command a client sends goes through netdojo-linux's agent sandbox
//! ([`netdojo_linux::exec`]: an allow-list of tools, no shell, a time limit, an output cap,
//! the node's own namespace), the same path the routing environment's `exec` tool takes.
//! `network.cli.exec` adds [`exec::read_only`]: only show/list forms run. The candidate is
//! command lines the sandbox's parser accepted, not run; `network.commit` runs them in order.
//!
//! Rollback: before each commit the node's state is read ([`crate::linux_state::Snapshot`]:
//! links, addresses, routes of every table, rules, permanent neighbours, net.* sysctls,
//! iptables, nftables, qdiscs); a rollback, an unconfirmed confirmed commit and a commit with a
//! failing command put it back and then compare the whole state with it (-32085 when a part
//! differs). `running-config` is a read-only report of that state; `network.file.push
//! running-config` answers -32084.

use std::sync::{Arc, Weak};
use std::time::Duration;

use netdojo_linux::exec::{self, Policy};
use netdojo_linux::network::Network;
use netdojo_netconf::env::CommandResult;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{Mutex, broadcast};

use crate::device::{Changed, Event, NETCONF_STREAM, Pending, Settings, confirm_within, send_event};
use crate::error::NetError;
use crate::linux_state::{self, Snapshot};
use crate::redact::redact;

/// The CLI dialect a Linux device speaks (§3 `cliDialect`).
pub const DIALECT: &str = "linux-iproute2";

/// The most output one command keeps, as the routing environment's agent gets.
const OUTPUT_CAP: usize = 64 * 1024;

/// The sections of the state report (`running-config`): what the sandbox lets a client change.
const REPORT: &[&str] = &[
    "ip -d link show",
    "ip addr show",
    "ip rule show",
    "ip route show table all",
    "ip neigh show",
    "sysctl net.ipv4.ip_forward net.ipv4.conf.all.forwarding net.ipv4.conf.all.rp_filter",
    "iptables-save",
    "nft list ruleset",
    "tc qdisc show",
];

/// One commit of the device's history.
#[derive(Debug, Clone, Serialize)]
pub struct LinuxCommit {
    pub id: u64,
    pub kind: &'static str,
    pub comment: String,
    pub commands: Vec<String>,
    /// Why a rollback cannot undo it all (a command changed something outside the snapshot).
    pub outside: Option<String>,
    /// The state before it: what a rollback of it puts back.
    #[serde(skip)]
    pub before: Snapshot,
}

#[derive(Debug, Default)]
struct State {
    candidate: Vec<String>,
    next_id: u64,
    history: Vec<LinuxCommit>,
    pending: Option<Pending>,
    /// A confirmed commit expired and was rolled back; told once, to the next commit.
    expired: Option<String>,
}

/// One Linux node.
#[derive(Debug)]
pub struct LinuxDevice {
    name: String,
    net: Weak<Network>,
    settings: Settings,
    startup: String,
    state: Mutex<State>,
    events: broadcast::Sender<Event>,
}

impl LinuxDevice {
    /// Reads the state the device starts the episode with.
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
            state: Mutex::new(State { next_id: 1, ..State::default() }),
            events,
        };
        device.startup = device.running().await?;
        Ok(device)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn settings(&self) -> Settings {
        self.settings
    }

    fn ns(&self) -> Result<String, NetError> {
        let net = self.net.upgrade().ok_or_else(|| {
            NetError::Unreachable(format!(
                "device {}: the emulated network is gone (the episode ended)",
                self.name
            ))
        })?;
        net.ns_name(&self.name)
            .map(str::to_string)
            .ok_or_else(|| NetError::Unreachable(format!("device {} has no namespace", self.name)))
    }

    /// The namespace of the node, while the episode lives.
    pub fn namespace(&self) -> Option<String> {
        self.ns().ok()
    }

    fn policy(&self, timeout: Option<Duration>) -> Policy {
        Policy {
            timeout: timeout.unwrap_or(self.settings.exec_timeout).min(self.settings.exec_timeout),
            output_cap: OUTPUT_CAP,
        }
    }

    /// Runs one command that passed the sandbox's parser, in the node's namespace.
    async fn run(
        &self,
        command: &exec::Command,
        timeout: Option<Duration>,
    ) -> Result<exec::Output, NetError> {
        let ns = self.ns()?;
        let policy = self.policy(timeout);
        let out = exec::run(&ns, command, &policy).await.map_err(|e| NetError::Internal(e.to_string()))?;
        if out.timed_out {
            return Err(NetError::Timeout(format!(
                "device {}: `{command}` did not finish within {:?}",
                self.name, policy.timeout
            )));
        }
        Ok(out)
    }

    fn parse(&self, line: &str) -> Result<exec::Command, NetError> {
        exec::parse(line)
            .map_err(|refusal| NetError::InvalidParams(format!("device {}: {refusal}", self.name)))
    }

    /// A read-only command (show and list forms only), through the sandbox.
    pub async fn exec(&self, line: &str, timeout: Option<Duration>) -> Result<String, NetError> {
        let command = self.parse(line)?;
        exec::read_only(&command).map_err(|why| {
            NetError::InvalidParams(format!(
                "device {}: refused: {}; network.cli.exec runs read-only commands, use network.cli.configure",
                self.name,
                redact(&why)
            ))
        })?;
        let out = self.run(&command, timeout).await?;
        if out.status != Some(0) {
            return Err(NetError::InvalidParams(format!(
                "device {}: `{command}` failed (exit status {:?}): {}",
                self.name,
                out.status,
                out.text.trim()
            )));
        }
        Ok(out.text)
    }

    /// Stages `commands` (each checked by the sandbox's parser, only accepted ones staged), or
    /// runs them at once in order (`target: running`), stopping at the first that fails.
    pub async fn configure(
        &self,
        commands: &[String],
        running: bool,
    ) -> Result<Vec<CommandResult>, NetError> {
        if commands.len() > self.settings.max_bulk_edit {
            return Err(NetError::InvalidParams(format!(
                "{} commands in one call; this device takes at most {} (maxBulkEdit): send them in chunks",
                commands.len(),
                self.settings.max_bulk_edit
            )));
        }
        if running {
            let results = self.apply(commands).await?;
            if results.iter().any(|r| r.status == "success") {
                self.config_changed(Changed::Running, "configure", json!({"commands": commands}));
            }
            return Ok(results);
        }
        let mut state = self.state.lock().await;
        let mut results = Vec::new();
        let mut added = Vec::new();
        for line in commands {
            let line = line.trim();
            match exec::parse(line) {
                Ok(_) => {
                    state.candidate.push(line.to_string());
                    added.push(line.to_string());
                    results.push(result(line, "success", ""));
                }
                Err(refusal) => results.push(result(line, "error", &refusal.to_string())),
            }
        }
        if !added.is_empty() {
            self.config_changed(Changed::Candidate, "configure", json!({"commands": added}));
        }
        Ok(results)
    }

    /// Runs `commands` in order through the sandbox; the first that is refused or fails stops
    /// the rest (`skipped`).
    async fn apply(&self, commands: &[String]) -> Result<Vec<CommandResult>, NetError> {
        let mut results = Vec::new();
        let mut failed = false;
        for line in commands {
            if failed {
                results.push(result(line, "skipped", "an earlier command failed"));
                continue;
            }
            let command = match exec::parse(line) {
                Ok(c) => c,
                Err(refusal) => {
                    failed = true;
                    results.push(result(line, "error", &refusal.to_string()));
                    continue;
                }
            };
            let out = self.run(&command, None).await?;
            if out.status == Some(0) {
                results.push(result(line, "success", ""));
            } else {
                failed = true;
                results.push(result(line, "error", out.text.trim()));
            }
        }
        Ok(results)
    }

    /// The staged candidate.
    pub async fn candidate(&self) -> Vec<String> {
        self.state.lock().await.candidate.clone()
    }

    /// The node's state now, for a rollback.
    async fn snapshot(&self) -> Result<Snapshot, NetError> {
        linux_state::snapshot(&self.ns()?, self.settings.exec_timeout).await
    }

    async fn restore(&self, to: &Snapshot) -> Result<Vec<String>, NetError> {
        linux_state::restore(&self.ns()?, to, self.settings.exec_timeout).await.map_err(|e| match e {
            NetError::RollbackFailed(m) => NetError::RollbackFailed(format!("device {}: {m}", self.name)),
            other => other,
        })
    }

    fn emit(&self, event: &'static str, level: &'static str, changed: Option<Changed>, data: Value) {
        send_event(&self.events, &self.name, NETCONF_STREAM, event, level, changed, &data);
    }

    fn record(
        state: &mut State,
        kind: &'static str,
        comment: String,
        commands: Vec<String>,
        before: Snapshot,
        outside: Option<String>,
    ) -> u64 {
        let id = state.next_id;
        state.next_id += 1;
        state.history.push(LinuxCommit { id, kind, comment, commands, before, outside });
        id
    }

    /// Runs the candidate in order, all or nothing: when a command fails, the state from before
    /// the commit is put back and the answer (-32084) gives each command's status. A confirmed
    /// commit rolls back on its own unless a later commit confirms it within `timeout` (at
    /// most `rollbackTimeout`).
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
            self.emit(
                "netconf-confirmed-commit",
                "info",
                None,
                json!({"confirm-event": "complete", "commit": pending.commit}),
            );
        }
        if state.candidate.is_empty() {
            return Ok(json!({"device": self.name, "committed": false, "confirmed": confirmed_now,
                "message": if confirmed_now.is_some() { "confirmed" } else { "nothing to commit" }}));
        }
        // A change a rollback cannot put back makes a confirmed commit impossible.
        let outside = state.candidate.iter().find_map(|c| linux_state::covered(c).err());
        if confirmed && let Some(why) = &outside {
            return Err(NetError::ConfigIncompatible {
                message: format!("device {}: no confirmed commit: {}", self.name, redact(why)),
                details: json!({"rollback": false}),
            });
        }
        let before = self.snapshot().await?;
        let commands = std::mem::take(&mut state.candidate);
        let results = self.apply(&commands).await?;
        if let Some(first) = results.iter().find(|r| r.status == "error") {
            let undone = self.restore(&before).await.map_err(|e| {
                NetError::RollbackFailed(format!(
                    "the commit failed at `{}` and undoing it failed too: {e}",
                    redact(&first.command)
                ))
            })?;
            // What ran and lies outside the snapshot is still in effect.
            let stuck = results
                .iter()
                .filter(|r| r.status == "success")
                .find_map(|r| linux_state::covered(&r.command).err());
            if let Some(why) = stuck {
                return Err(NetError::RollbackFailed(format!(
                    "device {}: `{}` failed; the commit was undone except: {}",
                    self.name,
                    redact(&first.command),
                    redact(&why)
                )));
            }
            return Err(NetError::ConfigIncompatible {
                message: format!(
                    "device {}: `{}` failed: {}; nothing was committed (the state from before the commit is back)",
                    self.name,
                    redact(&first.command),
                    redact(&first.error)
                ),
                details: json!({"results": results, "undone_with": undone}),
            });
        }
        let kind = if confirmed { "commit-confirmed" } else { "commit" };
        let id = Self::record(&mut state, kind, comment.into(), commands, before, outside);
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

    /// The confirmed commit `id` was not confirmed in time: back to the state before it.
    async fn expire(&self, id: u64, waited: Duration) {
        let mut state = self.state.lock().await;
        if state.pending.as_ref().map(|p| p.commit) != Some(id) {
            return;
        }
        state.pending = None;
        let Some(commit) = state.history.iter().find(|c| c.id == id).cloned() else { return };
        let current = self.snapshot().await;
        let restored = self.restore(&commit.before).await;
        let message = match &restored {
            Ok(_) => {
                if let Ok(current) = current {
                    Self::record(
                        &mut state,
                        "rollback-unconfirmed",
                        format!("commit {id} not confirmed"),
                        vec![],
                        current,
                        None,
                    );
                }
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
        self.emit(
            "netconf-confirmed-commit",
            if restored.is_ok() { "warning" } else { "error" },
            Some(Changed::Running),
            json!({"confirm-event": "timeout", "commit": id, "rolled_back": restored.is_ok(), "message": message}),
        );
        state.expired = Some(message);
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
        // Refused before anything changes: a commit from the target on changed what a restore
        // cannot put back.
        if let Some(c) = state.history.iter().find(|c| c.id >= target.id && c.outside.is_some()) {
            return Err(NetError::RollbackFailed(format!(
                "device {}: cannot roll back to before commit {}: commit {} ran {}",
                self.name,
                target.id,
                c.id,
                redact(c.outside.as_deref().unwrap_or_default())
            )));
        }
        if let Some(pending) = state.pending.take() {
            pending.timer.abort();
        }
        let current = self.snapshot().await?;
        let restored = self.restore(&target.before).await;
        self.config_changed(
            Changed::Running,
            "rollback",
            json!({"rolled_back_to_before": target.id, "ok": restored.is_ok()}),
        );
        let ran = restored?;
        let id = Self::record(
            &mut state,
            "rollback",
            format!("rollback of commit {}", target.id),
            vec![],
            current,
            None,
        );
        Ok(json!({"device": self.name, "rolled_back_to_before": target.id, "commit": id, "ran": ran}))
    }

    /// Stops a pending confirmation timer (the episode is over).
    pub async fn shutdown(&self) {
        if let Some(p) = self.state.lock().await.pending.take() {
            p.timer.abort();
        }
    }

    /// The state report: each section's command and its output.
    pub async fn running(&self) -> Result<String, NetError> {
        let mut text = format!(
            "# {}: state of Linux node {} (a report, not a script: it cannot be pushed)\n",
            DIALECT, self.name
        );
        for line in REPORT {
            text.push_str(&format!("\n### {line}\n"));
            match exec::parse(line) {
                Ok(command) => {
                    let out = self.run(&command, None).await?;
                    text.push_str(out.text.trim_end());
                    text.push('\n');
                }
                // A tool this machine lacks (nft, iptables): said, not hidden.
                Err(refusal) => text.push_str(&format!("# {refusal}\n")),
            }
        }
        Ok(text)
    }

    pub fn startup(&self) -> &str {
        &self.startup
    }

    /// `running-config` (the state now), `startup-config` (at the episode's start, after the
    /// task's faults), `candidate-config` (the staged commands, one a line).
    pub async fn pull(&self, file: &str) -> Result<String, NetError> {
        match file {
            "running-config" => self.running().await,
            "startup-config" => Ok(self.startup.clone()),
            "candidate-config" => {
                let c = self.candidate().await;
                Ok(if c.is_empty() { String::new() } else { c.join("\n") + "\n" })
            }
            other => Err(NetError::InvalidParams(format!(
                "unknown file `{other}` (files: running-config, startup-config, candidate-config)"
            ))),
        }
    }

    /// `candidate-config` replaces the staged commands (each checked like configure's);
    /// `running-config` cannot be restored here.
    pub async fn push(&self, file: &str, content: &str) -> Result<Value, NetError> {
        match file {
            "candidate-config" => {
                let lines: Vec<String> = content
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(str::to_string)
                    .collect();
                if let Some((line, refusal)) = lines.iter().find_map(|l| exec::parse(l).err().map(|r| (l, r)))
                {
                    return Err(NetError::ConfigIncompatible {
                        message: format!(
                            "device {}: `{}` of candidate-config: {refusal}; nothing changed",
                            self.name,
                            redact(line)
                        ),
                        details: json!({}),
                    });
                }
                let mut state = self.state.lock().await;
                state.candidate = lines;
                self.config_changed(Changed::Candidate, "push", json!({"lines": state.candidate.len()}));
                Ok(json!({"device": self.name, "file": file, "lines": state.candidate.len()}))
            }
            "running-config" => Err(NetError::ConfigIncompatible {
                message: format!(
                    "device {}: running-config is a report of the node's state, not a script: it cannot be pushed; use network.cli.configure, network.commit and network.rollback",
                    self.name
                ),
                details: json!({"available": false}),
            }),
            other => Err(NetError::InvalidParams(format!(
                "cannot push `{other}` (files: running-config, candidate-config)"
            ))),
        }
    }

    /// The interfaces with their addresses (`ip -j addr show`), each with a `name`.
    pub async fn interfaces(&self) -> Result<Vec<Value>, NetError> {
        let list = self.json("ip -j addr show").await?;
        Ok(list
            .into_iter()
            .map(|mut i| {
                if let Some(name) = i.get("ifname").cloned() {
                    i["name"] = name;
                }
                i
            })
            .collect())
    }

    /// The IPv4 routes of the main table (`ip -j -4 route show`).
    pub async fn routes(&self) -> Result<Vec<Value>, NetError> {
        self.json("ip -j -4 route show").await
    }

    async fn json(&self, line: &str) -> Result<Vec<Value>, NetError> {
        let command = self.parse(line)?;
        let out = self.run(&command, None).await?;
        if out.status != Some(0) || out.truncated {
            return Err(NetError::Internal(format!("device {}: `{line}`: {}", self.name, out.text.trim())));
        }
        serde_json::from_str(out.text.trim()).map_err(|e| {
            NetError::Internal(format!("device {}: `{line}` did not print JSON: {e}", self.name))
        })
    }

    /// A configuration change (RFC 6470 `netconf-config-change`).
    fn config_changed(&self, changed: Changed, operation: &str, data: Value) {
        let mut data = data;
        data["operation"] = json!(operation);
        data["datastore"] = json!(if changed == Changed::Running { "running" } else { "candidate" });
        self.emit("netconf-config-change", "notice", Some(changed), data);
    }
}

fn result(command: &str, status: &'static str, error: &str) -> CommandResult {
    CommandResult { command: command.into(), status, error: error.into() }
}

/// A Linux device shared by the servers of an episode.
pub type Shared = Arc<LinuxDevice>;
