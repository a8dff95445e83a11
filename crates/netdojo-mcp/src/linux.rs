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
use serde_json::{Value, json};
use tokio::sync::{Mutex, broadcast};

use crate::datastore::{self, Backend, Datastore, result};
use crate::error::NetError;
use crate::linux_state::{self, Snapshot};
use crate::model::{Event, Settings};
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

/// One Linux node.
#[derive(Debug)]
pub struct LinuxDevice {
    name: String,
    net: Weak<Network>,
    settings: Settings,
    startup: String,
    store: Mutex<Datastore<Snapshot>>,
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
            store: Mutex::new(Datastore::default()),
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
        datastore::configure(self, commands, running).await
    }

    /// Runs `commands` in order through the sandbox; the first that is refused or fails stops
    /// the rest (`skipped`).
    async fn run_all(&self, commands: &[String]) -> Result<Vec<CommandResult>, NetError> {
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

    /// Runs the candidate in order, all or nothing (see [`datastore::commit`]); a change the
    /// snapshot does not cover (`linux_state::covered`) is refused a confirmed commit.
    pub async fn commit(
        self: &Arc<Self>,
        confirmed: bool,
        timeout: Option<Duration>,
        comment: &str,
    ) -> Result<Value, NetError> {
        datastore::commit(self, confirmed, timeout, comment).await
    }

    /// Undoes commit `id` and every one after it (default: the last one).
    pub async fn rollback(&self, id: Option<u64>) -> Result<Value, NetError> {
        datastore::rollback(self, id).await
    }

    /// Stops a pending confirmation timer (the episode is over).
    pub async fn shutdown(&self) {
        self.store.lock().await.stop_timer();
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
            "candidate-config" => Ok(datastore::candidate_file(self).await),
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
                datastore::push_candidate(self, lines).await
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
}

impl Backend for LinuxDevice {
    type Snapshot = Snapshot;
    const WHAT: &'static str = "state";

    fn name(&self) -> &str {
        &self.name
    }
    fn settings(&self) -> Settings {
        self.settings
    }
    fn events(&self) -> &broadcast::Sender<Event> {
        &self.events
    }
    fn datastore(&self) -> &Mutex<Datastore<Snapshot>> {
        &self.store
    }
    /// The node's state now (links, addresses, routes, rules, neighbours, sysctls, firewall,
    /// qdiscs).
    async fn snapshot(&self) -> Result<Snapshot, NetError> {
        linux_state::snapshot(&self.ns()?, self.settings.exec_timeout).await
    }
    async fn restore(&self, to: &Snapshot) -> Result<Vec<String>, NetError> {
        linux_state::restore(&self.ns()?, to, self.settings.exec_timeout).await.map_err(|e| match e {
            NetError::RollbackFailed(m) => NetError::RollbackFailed(format!("device {}: {m}", self.name)),
            other => other,
        })
    }
    async fn apply(&self, commands: &[String]) -> Result<Vec<CommandResult>, NetError> {
        self.run_all(commands).await
    }
    fn check(&self, command: &str) -> Result<(), String> {
        exec::parse(command).map(drop).map_err(|refusal| refusal.to_string())
    }
    fn outside(&self, command: &str) -> Option<String> {
        linux_state::covered(command).err()
    }
}

/// A Linux device shared by the servers of an episode.
pub type Shared = Arc<LinuxDevice>;
