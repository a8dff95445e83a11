//! One node of a plain Linux network (the routing application's router, hosts and switches:
//! iproute2, no FRR) as a network device of draft 002.
//!
//! Every command a client sends goes through netdojo-linux's agent sandbox
//! ([`netdojo_linux::exec`]: an allow-list of tools, no shell, a time limit, an output cap,
//! the node's own namespace), the same path the routing environment's `exec` tool takes.
//! `network.cli.exec` adds [`exec::read_only`]: only show/list forms run. The candidate is
//! command lines the sandbox's parser accepted, not run; `network.commit` runs them in order.
//!
//! There is no rollback: restoring a node's whole kernel state (addresses, routes of every
//! table, rules, links, neighbours, nftables, iptables, qdiscs, sysctls) exactly is not built,
//! so the device says `supportsRollback: false` and confirmed commits, `network.rollback` and
//! `network.file.push` answer -32084 (docs/mcp.md). `running-config` is a read-only report of
//! that state.

use std::sync::{Arc, Weak};
use std::time::Duration;

use netdojo_linux::exec::{self, Policy};
use netdojo_linux::network::Network;
use netdojo_netconf::env::CommandResult;
use serde_json::{Value, json};
use tokio::sync::{Mutex, broadcast};

use crate::device::{Changed, Event, Settings};
use crate::error::NetError;
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

#[derive(Debug, Default)]
struct State {
    candidate: Vec<String>,
    next_id: u64,
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

/// The answer when a feature a Linux device does not have is asked for (§7: the device cannot
/// take this configuration operation).
fn unsupported(device: &str, what: &str) -> NetError {
    NetError::ConfigIncompatible {
        message: format!(
            "device {device}: {what} is not available on this Linux device (supportsRollback: false); \
             stage with network.cli.configure and commit without `confirmed`"
        ),
        details: json!({"available": false, "supportsRollback": false}),
    }
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

    /// Runs the candidate in order. No confirmed commit (there is no rollback): -32084. A
    /// command that fails stops the commit; those before it stay applied, and the answer
    /// (-32084) lists each command's status.
    pub async fn commit(&self, confirmed: bool, comment: &str) -> Result<Value, NetError> {
        if confirmed {
            return Err(unsupported(&self.name, "a confirmed commit (it needs a rollback)"));
        }
        let mut state = self.state.lock().await;
        if state.candidate.is_empty() {
            return Ok(json!({"device": self.name, "committed": false, "message": "nothing to commit"}));
        }
        let commands = std::mem::take(&mut state.candidate);
        let results = self.apply(&commands).await?;
        let applied = results.iter().filter(|r| r.status == "success").count();
        if applied > 0 {
            self.config_changed(
                Changed::Running,
                "commit",
                json!({"commands": commands, "comment": comment}),
            );
        }
        if let Some(first) = results.iter().find(|r| r.status == "error") {
            return Err(NetError::ConfigIncompatible {
                message: format!(
                    "device {}: `{}` failed: {}; the {applied} command(s) before it were applied and stay applied (this device has no rollback), the rest were not run",
                    self.name,
                    redact(&first.command),
                    redact(&first.error)
                ),
                details: json!({"results": results}),
            });
        }
        let id = state.next_id;
        state.next_id += 1;
        Ok(
            json!({"device": self.name, "committed": true, "commit": id, "results": results, "confirmed": null}),
        )
    }

    /// No rollback on this device.
    pub fn rollback(&self) -> Result<Value, NetError> {
        Err(unsupported(&self.name, "network.rollback"))
    }

    /// The state report: each section's command and its output.
    pub async fn running(&self) -> Result<String, NetError> {
        let mut text = format!(
            "# {}: state of Linux node {} (a report, not a script: this device has no file.push)\n",
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
            "running-config" => {
                Err(unsupported(&self.name, "network.file.push running-config (restoring a state report)"))
            }
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

    fn config_changed(&self, changed: Changed, operation: &str, data: Value) {
        let mut data = crate::redact::redact_json(&data);
        data["operation"] = json!(operation);
        data["datastore"] = json!(if changed == Changed::Running { "running" } else { "candidate" });
        data["device"] = json!(self.name);
        let _ = self.events.send(Event {
            device: self.name.clone(),
            event: "netconf-config-change",
            level: "notice",
            changed: Some(changed),
            data,
        });
    }
}

fn result(command: &str, status: &'static str, error: &str) -> CommandResult {
    CommandResult { command: command.into(), status, error: error.into() }
}

/// A Linux device shared by the servers of an episode.
pub type Shared = Arc<LinuxDevice>;
