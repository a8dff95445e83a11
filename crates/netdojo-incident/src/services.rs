//! The services hosts of a lab run: DNS is Debian's dnsmasq, HTTP is Python's `http.server`
//! (python3 is already there for FRR's frr-reload.py, so HTTP costs no package; a page is
//! served from a directory of the service's own). Each runs inside its host's namespace in
//! netdojo-jail's daemon profile, as an FRR daemon does: a read-only root with only its own
//! directory, capabilities cut to a daemon's, in the foreground so that the PID netdojo holds is
//! the server's own, and stopped by that PID (SIGKILL; nothing of it needs saving).
//!
//! Operations ([`Services::apply`], a fault's or an agent's `service` action): `start`, `stop`,
//! `set port N`, `set record NAME ADDR` (DNS). A `set` restarts a running service with the
//! change; a stopped one keeps it for its next start.

use std::collections::BTreeMap;
use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use netdojo_jail::Profile;
use tokio::process::{Child, Command};

use crate::lab::{Service, ServiceKind};

/// Where each running service's directory lives (`NS-SERVICE`): its page, its log.
pub const RUN_DIR: &str = "/run/netdojo/services";

const DNSMASQ: &str = "/usr/sbin/dnsmasq";
const PYTHON: &str = "/usr/bin/python3";

/// One service: what it is now (port and records change with operations) and its process.
#[derive(Debug)]
struct Running {
    spec: Service,
    ns: String,
    dir: PathBuf,
    child: Option<Child>,
}

/// The services of one live lab.
#[derive(Debug, Default)]
pub struct Services {
    services: BTreeMap<String, Running>,
    ipv6: bool,
}

impl Services {
    /// Prepares (does not start) `specs`; `ns_of` names each host's namespace.
    pub fn new(
        specs: &[Service],
        ns_of: impl Fn(&str) -> Option<String>,
        ipv6: bool,
    ) -> Result<Self, String> {
        let mut services = BTreeMap::new();
        for spec in specs {
            let ns = ns_of(&spec.node).ok_or_else(|| format!("no namespace for node {}", spec.node))?;
            let dir = Path::new(RUN_DIR).join(format!("{ns}-{}", spec.name));
            services.insert(spec.name.clone(), Running { spec: spec.clone(), ns, dir, child: None });
        }
        Ok(Self { services, ipv6 })
    }

    /// Starts every service, concurrently.
    pub async fn start_all(&mut self) -> Result<(), String> {
        let ipv6 = self.ipv6;
        let starts = self.services.values_mut().map(|s| s.start(ipv6));
        futures::future::join_all(starts).await.into_iter().collect::<Result<Vec<()>, String>>()?;
        Ok(())
    }

    /// The node a service runs on.
    pub fn node_of(&self, service: &str) -> Option<&str> {
        self.services.get(service).map(|s| s.spec.node.as_str())
    }

    /// The service as it is now (port, records).
    pub fn spec(&self, service: &str) -> Option<&Service> {
        self.services.get(service).map(|s| &s.spec)
    }

    /// Whether the service's process is running.
    pub fn running(&mut self, service: &str) -> bool {
        self.services.get_mut(service).is_some_and(Running::alive)
    }

    /// Applies one operation; returns what happened, for people.
    pub async fn apply(&mut self, service: &str, op: &str) -> Result<String, String> {
        let ipv6 = self.ipv6;
        let s = self.services.get_mut(service).ok_or_else(|| format!("no service `{service}`"))?;
        let words: Vec<&str> = op.split_whitespace().collect();
        match words.as_slice() {
            ["start"] => {
                if s.alive() {
                    return Ok(format!("{service} is already running"));
                }
                s.start(ipv6).await?;
                Ok(format!("{service} started"))
            }
            ["stop"] => {
                s.stop().await;
                Ok(format!("{service} stopped"))
            }
            ["set", "port", port] => {
                let port: u16 =
                    port.parse().ok().filter(|p| *p > 0).ok_or_else(|| format!("`{port}` is not a port"))?;
                s.spec.port = Some(port);
                s.restart_if_running(ipv6).await?;
                Ok(format!("{service} port {port}"))
            }
            ["set", "record", name, addr] => {
                if s.spec.kind != ServiceKind::Dns {
                    return Err(format!("{service} is not a DNS server: it has no records"));
                }
                let addr: IpAddr = addr.parse().map_err(|_| format!("`{addr}` is not an address"))?;
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b)) {
                    return Err(format!("`{name}` is not a domain name"));
                }
                s.spec.records.insert(name.to_string(), addr.to_string());
                s.restart_if_running(ipv6).await?;
                Ok(format!("{service} record {name} = {addr}"))
            }
            _ => Err(format!(
                "unknown service operation `{op}`: `start`, `stop`, `set port N`, `set record NAME ADDR`"
            )),
        }
    }

    /// Stops every service (SIGKILL by PID) and removes their directories.
    pub fn stop_all(&mut self) {
        for s in self.services.values_mut() {
            s.kill_now();
            let _ = fs::remove_dir_all(&s.dir);
        }
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        self.stop_all();
    }
}

impl Running {
    fn alive(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    async fn restart_if_running(&mut self, ipv6: bool) -> Result<(), String> {
        if self.alive() {
            self.stop().await;
            self.start(ipv6).await?;
        }
        Ok(())
    }

    fn kill_now(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            // Reaped by tokio's orphan queue if it is not gone yet; SIGKILL needs no wait.
            let _ = child.try_wait();
        }
    }

    async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// The program and its arguments.
    fn command(&self, ipv6: bool) -> (PathBuf, Vec<String>) {
        let port = self.spec.port().to_string();
        match self.spec.kind {
            ServiceKind::Dns => {
                let mut args = vec![
                    "--keep-in-foreground".to_string(),
                    "--conf-file=/dev/null".into(),
                    "--no-resolv".into(),
                    "--no-hosts".into(),
                    "--no-poll".into(),
                    // It stays root in its jail: no user of its own to become there.
                    "--user=root".into(),
                    "--pid-file=".into(),
                    "--log-facility=-".into(),
                    format!("--port={port}"),
                ];
                for (name, addr) in &self.spec.records {
                    args.push(format!("--host-record={name},{addr}"));
                }
                (PathBuf::from(DNSMASQ), args)
            }
            ServiceKind::Http => {
                let bind = if ipv6 { "::" } else { "0.0.0.0" };
                let args = vec![
                    "-I".to_string(),
                    "-m".into(),
                    "http.server".into(),
                    "--bind".into(),
                    bind.into(),
                    "--directory".into(),
                    self.dir.join("www").display().to_string(),
                    port,
                ];
                (PathBuf::from(PYTHON), args)
            }
        }
    }

    async fn start(&mut self, ipv6: bool) -> Result<(), String> {
        let what = |e: std::io::Error| format!("{}: {e}", self.dir.display());
        fs::create_dir_all(self.dir.join("www")).map_err(what)?;
        fs::write(
            self.dir.join("www").join("index.html"),
            format!("<html><body>{} on {}</body></html>\n", self.spec.name, self.spec.node),
        )
        .map_err(what)?;
        let log = fs::File::create(self.dir.join("log")).map_err(what)?;
        let (program, args) = self.command(ipv6);
        if !program.exists() {
            let package = if self.spec.kind == ServiceKind::Dns { "dnsmasq-base" } else { "python3" };
            return Err(format!("{} is not installed (apt-get install {package})", program.display()));
        }
        let mut spec = netdojo_linux::sysctl::jail_spec(Profile::Daemon, &self.ns)?;
        spec.writable = vec![self.dir.clone()];
        spec.cpu_seconds = 0;
        let jail = netdojo_jail::binary().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(jail);
        cmd.args(spec.args(&program, &args))
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("LC_ALL", "C")
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true);
        let child = cmd.spawn().map_err(|e| format!("starting {}: {e}", program.display()))?;
        self.child = Some(child);
        Ok(())
    }
}
