//! One node of a GNS3 project (a Cisco IOS router, a VPCS host) as a network device of draft
//! 002, driven over the console netdojo-gns3's environment opened ([`netdojo_gns3::env::Console`],
//! shared with it: one command at a time).
//!
//! `network.cli.exec` runs what the dialect's read-only allow-list lets through (IOS: show,
//! ping, traceroute; VPCS: show, ping, trace, arp). The candidate is configuration commands
//! the dialect accepts, not sent; `network.commit` sends them in configuration mode, all or
//! nothing. Rollback: before each commit the running configuration is read; a rollback, an
//! unconfirmed confirmed commit and a failing commit send the commands that take the device
//! back to it ([`CliDialect::restore_commands`]: IOS's configuration diff, VPCS's `ip` or
//! `clear ip`) and compare the running configuration with it afterwards (-32085 when they
//! differ). A switch or a hub has no console and is not a device.

use std::sync::{Arc, Weak};
use std::time::Duration;

use netdojo_gns3::CliDialect;
use netdojo_gns3::device::Device as ConsoleDevice;
use netdojo_gns3::telnet::ConsoleError;
use netdojo_netconf::env::CommandResult;
use serde_json::{Value, json};
use tokio::sync::{Mutex, broadcast};

use crate::datastore::{self, Backend, Datastore, config_changed, result};
use crate::error::NetError;
use crate::model::{Changed, Event, Settings};
use crate::redact::redact;

/// §3 `cliDialect` of a GNS3 node.
pub fn dialect_name(dialect: CliDialect) -> &'static str {
    match dialect {
        CliDialect::Ios => "cisco-ios",
        CliDialect::Vpcs => "vpcs",
    }
}

/// One GNS3 node with a console.
#[derive(Debug)]
pub struct Gns3Device {
    name: String,
    console: Weak<Mutex<ConsoleDevice>>,
    dialect: CliDialect,
    settings: Settings,
    startup: String,
    store: Mutex<Datastore<String>>,
    events: broadcast::Sender<Event>,
}

impl Gns3Device {
    /// Reads the configuration the device starts the episode with.
    pub async fn discover(
        name: &str,
        console: Weak<Mutex<ConsoleDevice>>,
        settings: Settings,
        events: broadcast::Sender<Event>,
    ) -> Result<Self, NetError> {
        let dialect = match console.upgrade() {
            Some(c) => c.lock().await.dialect(),
            None => return Err(NetError::Unreachable(format!("device {name}: its console is closed"))),
        };
        let mut device = Self {
            name: name.into(),
            console,
            dialect,
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

    pub fn dialect(&self) -> CliDialect {
        self.dialect
    }

    fn console(&self) -> Result<Arc<Mutex<ConsoleDevice>>, NetError> {
        self.console.upgrade().ok_or_else(|| {
            NetError::Unreachable(format!(
                "device {}: the GNS3 project is gone (the episode ended)",
                self.name
            ))
        })
    }

    fn console_err(&self, e: ConsoleError) -> NetError {
        match e {
            ConsoleError::Timeout { .. } => NetError::Timeout(format!("device {}: {e}", self.name)),
            ConsoleError::TooMuch { .. } => NetError::Internal(format!("device {}: {e}", self.name)),
            _ => NetError::Unreachable(format!("device {}: {e}", self.name)),
        }
    }

    /// Runs one command on the console as it is (the caller checked it).
    async fn run(&self, command: &str) -> Result<String, NetError> {
        let console = self.console()?;
        let t = std::time::Instant::now();
        let mut console = console.lock().await;
        let locked = t.elapsed();
        let out = console.run(command).await.map(|(out, _)| out).map_err(|e| self.console_err(e));
        tracing::debug!(device = %self.name, command, ?locked, took = ?t.elapsed(), "console");
        out
    }

    /// A read-only command (the dialect's allow-list). The console's own limit (30 s) bounds
    /// it: a command cut short would leave its output to the next one.
    pub async fn exec(&self, line: &str) -> Result<String, NetError> {
        let line = line.trim();
        if let Some(why) = self.dialect.refuse_exec(line) {
            return Err(NetError::InvalidParams(format!(
                "device {}: `{}` refused: {}",
                self.name,
                redact(line),
                why.replace("execute-cmd", "network.cli.exec").replace("update-cfg", "network.cli.configure")
            )));
        }
        let out = self.run(line).await?;
        match self.dialect.error_in(&out) {
            Some(error) if !line.starts_with("ping") => {
                Err(NetError::InvalidParams(format!("device {}: `{}`: {error}", self.name, redact(line))))
            }
            _ => Ok(out),
        }
    }

    /// Stages `commands` (each checked by the dialect, only accepted ones staged), or sends
    /// them at once in configuration mode (`target: running`).
    pub async fn configure(
        &self,
        commands: &[String],
        running: bool,
    ) -> Result<Vec<CommandResult>, NetError> {
        datastore::configure(self, commands, running).await
    }

    /// Sends `commands` in configuration mode; each is answered with the device's verdict.
    async fn send(&self, commands: &[String]) -> Result<Vec<CommandResult>, NetError> {
        let console = self.console()?;
        let mut console = console.lock().await;
        let results = console.configure(commands).await.map_err(|e| self.console_err(e))?;
        Ok(results.into_iter().map(|r| result(&r.command, r.status, &r.error)).collect())
    }

    /// The running configuration (IOS's `show running-config`; VPCS's address as its `ip`
    /// command).
    pub async fn running(&self) -> Result<String, NetError> {
        let console = self.console()?;
        let mut console = console.lock().await;
        console.running_config().await.map_err(|e| self.console_err(e))
    }

    /// Takes the running configuration back to `to` and checks that it is.
    async fn restore_to(&self, to: &str) -> Result<Vec<String>, NetError> {
        let now = self.running().await?;
        if same(&now, to) {
            return Ok(vec![]);
        }
        let commands = self
            .dialect
            .restore_commands(&now, to)
            .map_err(|e| NetError::RollbackFailed(format!("device {}: {e}", self.name)))?;
        let results = self.send(&commands).await?;
        let after = self.running().await?;
        if !same(&after, to) {
            let failed: Vec<String> = results
                .iter()
                .filter(|r| r.status != "success")
                .map(|r| format!("`{}`: {}", redact(&r.command), redact(&r.error)))
                .collect();
            return Err(NetError::RollbackFailed(format!(
                "device {}: the running configuration differs from the one restored after {} command(s){}",
                self.name,
                commands.len(),
                if failed.is_empty() { String::new() } else { format!(" (failed: {})", failed.join("; ")) }
            )));
        }
        Ok(commands)
    }

    /// Sends the candidate, all or nothing (see [`datastore::commit`]).
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

    /// `running-config`, `startup-config` (at the episode's start), `candidate-config` (the
    /// staged commands, one a line).
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
    /// `running-config` takes the device to that configuration, recorded as a commit that a
    /// rollback undoes.
    pub async fn push(&self, file: &str, content: &str) -> Result<Value, NetError> {
        match file {
            "candidate-config" => {
                let lines: Vec<String> = content
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('!') && !self.dialect.is_framing(l))
                    .map(str::to_string)
                    .collect();
                datastore::push_candidate(self, lines).await
            }
            "running-config" => {
                let mut state = self.store.lock().await;
                state.stop_timer();
                let before = self.running().await?;
                let restored = self.restore_to(content).await;
                config_changed(self, Changed::Running, "push", json!({"ok": restored.is_ok()}));
                let ran = restored?;
                let id = state.record("push", "network.file.push running-config".into(), ran, before, None);
                Ok(json!({"device": self.name, "file": file, "commit": id}))
            }
            other => Err(NetError::InvalidParams(format!(
                "cannot push `{other}` (files: running-config, candidate-config)"
            ))),
        }
    }

    /// The interfaces, each with a `name`: IOS's `show ip interface brief` rows, VPCS's one
    /// interface from `show ip`.
    pub async fn interfaces(&self) -> Result<Vec<Value>, NetError> {
        match self.dialect {
            CliDialect::Ios => Ok(ios_interfaces(&self.run("show ip interface brief").await?)),
            CliDialect::Vpcs => Ok(vpcs_interfaces(&self.run("show ip").await?)),
        }
    }

    /// The IPv4 routes: IOS's `show ip route` entries, VPCS's connected network and gateway.
    pub async fn routes(&self) -> Result<Vec<Value>, NetError> {
        match self.dialect {
            CliDialect::Ios => Ok(ios_routes(&self.run("show ip route").await?)),
            CliDialect::Vpcs => {
                let interfaces = vpcs_interfaces(&self.run("show ip").await?);
                let mut routes = Vec::new();
                for i in interfaces {
                    if let Some(prefix) = i["prefix"].as_str() {
                        routes
                            .push(json!({"prefix": prefix, "protocol": "connected", "interface": i["name"]}));
                    }
                    if let Some(gw) = i["gateway"].as_str() {
                        routes.push(json!({"prefix": "0.0.0.0/0", "protocol": "static", "nexthop": gw}));
                    }
                }
                Ok(routes)
            }
        }
    }
}

impl Backend for Gns3Device {
    type Snapshot = String;
    const WHAT: &'static str = "configuration";

    fn name(&self) -> &str {
        &self.name
    }
    fn settings(&self) -> Settings {
        self.settings
    }
    fn events(&self) -> &broadcast::Sender<Event> {
        &self.events
    }
    fn datastore(&self) -> &Mutex<Datastore<String>> {
        &self.store
    }
    async fn snapshot(&self) -> Result<String, NetError> {
        self.running().await
    }
    async fn restore(&self, to: &String) -> Result<Vec<String>, NetError> {
        self.restore_to(to).await
    }
    async fn apply(&self, commands: &[String]) -> Result<Vec<CommandResult>, NetError> {
        self.send(commands).await
    }
    fn check(&self, command: &str) -> Result<(), String> {
        match self.dialect.refuse_config(command) {
            Some(why) => Err(format!("refused: {why}")),
            None => Ok(()),
        }
    }
}

/// Two running configurations are the same when their lines are, blank lines and `!`
/// separators aside.
fn same(a: &str, b: &str) -> bool {
    let lines = |t: &str| -> Vec<String> {
        t.lines()
            .map(|l| l.trim_end().to_string())
            .filter(|l| !l.trim().is_empty() && l.trim() != "!")
            .collect()
    };
    lines(a) == lines(b)
}

/// `show ip interface brief`: `Interface IP-Address OK? Method Status Protocol` rows.
fn ios_interfaces(out: &str) -> Vec<Value> {
    out.lines()
        .filter(|l| !l.starts_with("Interface"))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.len() < 6 {
                return None;
            }
            let status = w[4..w.len() - 1].join(" ");
            Some(json!({"name": w[0], "address": w[1], "method": w[3], "status": status,
                "protocol": w[w.len() - 1]}))
        })
        .collect()
}

/// `show ip` of VPCS: `NAME`, `IP/MASK`, `GATEWAY`, `MAC` ... as one interface, `eth0`.
fn vpcs_interfaces(out: &str) -> Vec<Value> {
    let field = |name: &str| {
        out.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let mut iface = json!({"name": "eth0"});
    if let Some(addr) = field("IP/MASK").filter(|a| !a.starts_with("0.0.0.0")) {
        iface["address"] = json!(addr);
        if let Some((ip, len)) = addr.split_once('/')
            && let (Ok(ip), Ok(len)) = (ip.parse::<std::net::Ipv4Addr>(), len.parse::<u32>())
            && len <= 32
        {
            let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
            iface["prefix"] = json!(format!("{}/{len}", std::net::Ipv4Addr::from(u32::from(ip) & mask)));
        }
    }
    if let Some(gw) = field("GATEWAY").filter(|g| !g.is_empty() && g != "0.0.0.0") {
        iface["gateway"] = json!(gw);
    }
    if let Some(mac) = field("MAC") {
        iface["mac"] = json!(mac);
    }
    vec![iface]
}

/// The entries of IOS's `show ip route`: a code, a prefix (the mask of a `is subnetted` line
/// above applies to the lines under it) and the rest of the line.
fn ios_routes(out: &str) -> Vec<Value> {
    let mut routes = Vec::new();
    let mut subnet_len: Option<String> = None;
    let mut in_table = false;
    for line in out.lines() {
        let t = line.trim_end();
        if t.starts_with("Gateway of last resort") {
            in_table = true;
            continue;
        }
        if !in_table || t.trim().is_empty() {
            continue;
        }
        let words: Vec<&str> = t.split_whitespace().collect();
        if t.contains("is subnetted") || t.contains("is variably subnetted") {
            subnet_len = words.first().and_then(|w| w.split_once('/')).map(|(_, l)| l.to_string());
            continue;
        }
        let Some(at) = words
            .iter()
            .position(|w| w.split('/').next().is_some_and(|a| a.parse::<std::net::Ipv4Addr>().is_ok()))
        else {
            continue;
        };
        let code = words[..at].join(" ");
        if code.is_empty() {
            continue;
        }
        let prefix = match (words[at].contains('/'), &subnet_len) {
            (true, _) => words[at].to_string(),
            (false, Some(len)) => format!("{}/{len}", words[at]),
            (false, None) => words[at].to_string(),
        };
        routes.push(json!({"protocol": code, "prefix": prefix, "detail": words[at + 1..].join(" ")}));
    }
    routes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ios_interfaces_and_routes_parse() {
        let brief = "Interface                  IP-Address      OK? Method Status                Protocol\n\
FastEthernet0/0            10.0.12.1       YES manual up                    up\n\
FastEthernet0/1            unassigned      YES unset  administratively down down\n";
        let i = ios_interfaces(brief);
        assert_eq!(i.len(), 2);
        assert_eq!(i[0]["name"], "FastEthernet0/0");
        assert_eq!(i[0]["address"], "10.0.12.1");
        assert_eq!(i[1]["status"], "administratively down");
        assert_eq!(i[1]["protocol"], "down");
        let table = "Codes: C - connected, S - static\n\nGateway of last resort is not set\n\n\
     2.0.0.0/30 is subnetted, 1 subnets\n\
S       2.2.2.0 [1/0] via 10.0.12.2\n\
     10.0.0.0/30 is subnetted, 1 subnets\n\
C       10.0.12.0 is directly connected, FastEthernet0/0\n\
S*   0.0.0.0/0 [1/0] via 10.0.12.2\n";
        let r = ios_routes(table);
        let got: Vec<(String, String)> = r
            .iter()
            .map(|r| (r["protocol"].as_str().unwrap_or("").into(), r["prefix"].as_str().unwrap_or("").into()))
            .collect();
        assert_eq!(
            got,
            [
                ("S".to_string(), "2.2.2.0/30".to_string()),
                ("C".into(), "10.0.12.0/30".into()),
                ("S*".into(), "0.0.0.0/0".into())
            ]
        );
    }

    #[test]
    fn vpcs_show_ip_is_one_interface() {
        let out = "NAME        : PC1[1]\nIP/MASK     : 10.0.0.1/24\nGATEWAY     : 10.0.0.254\nDNS         : \nMAC         : 00:50:79:66:68:00\n";
        let i = vpcs_interfaces(out);
        assert_eq!(i[0]["address"], "10.0.0.1/24");
        assert_eq!(i[0]["prefix"], "10.0.0.0/24");
        assert_eq!(i[0]["gateway"], "10.0.0.254");
        let none = vpcs_interfaces("NAME        : PC1[1]\nIP/MASK     : 0.0.0.0/0\nGATEWAY     : 0.0.0.0\n");
        assert!(none[0].get("address").is_none() && none[0].get("gateway").is_none());
    }

    #[test]
    fn configurations_compare_without_separators() {
        assert!(same("!\nhostname R1\n!\n\nend\n", "hostname R1\nend"));
        assert!(!same("hostname R1\n", "hostname R2\n"));
    }
}
