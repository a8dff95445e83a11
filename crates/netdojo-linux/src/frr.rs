//! FRRouting routers: one FRR instance per router namespace (Debian's `frr` 8.4).
//!
//! Each instance has its own pathspace (`-N NS`, sockets in `/var/run/frr/NS`), its own run
//! directory `/run/netdojo/frr/NS` (configs, pid files, logs, vtysh.conf), and its own UTS
//! namespace with the router's hostname, so that both the daemons and vtysh print the
//! router's name (vtysh writes its own host name into `show running-config`). Daemons start
//! empty; the startup configuration is then applied through vtysh, which sends each command to
//! the daemon that owns it, or, for trusted text, straight over the daemons' vty sockets
//! ([`Frr::apply_config`], no vtysh process). vtysh always runs inside the router's network
//! namespace with a timeout: it runs `ping` in its own namespace and forever otherwise.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::Command;

use netdojo_jail::Profile;

pub use crate::paths::{FRR_BIN, FRR_STATE, RUN_DIR};

/// FRR's reload script (Debian's `frr` ships it; it needs python3).
pub const RELOAD: &str = "/usr/lib/frr/frr-reload.py";

/// The daemons a router may run (zebra always, first; staticd too unless started with
/// [`Frr::start_only`]).
pub const DAEMONS: [&str; 6] = ["zebra", "staticd", "ospfd", "bgpd", "ripd", "ospf6d"];

#[derive(Debug, thiserror::Error)]
pub enum FrrError {
    #[error("FRRouting is not installed ({FRR_BIN}/zebra missing): apt-get install frr")]
    NotInstalled,
    #[error(
        "FRR's {RELOAD} is missing (rollback and configuration restore need it): apt-get install frr-pythontools"
    )]
    NoReload,
    #[error("router {router}: unknown FRR daemon `{daemon}` (known: {})", DAEMONS.join(", "))]
    UnknownDaemon { router: String, daemon: String },
    #[error("router {router}: hostname `{hostname}` is not a valid host name")]
    BadHostname { router: String, hostname: String },
    #[error("router {router}: {what}: {source}")]
    Io {
        router: String,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("router {router}: {what}: {source}")]
    Sys {
        router: String,
        what: &'static str,
        #[source]
        source: nix::Error,
    },
    #[error("router {router}: {daemon} did not start: {detail}")]
    Start { router: String, daemon: String, detail: String },
    #[error("router {router}: FRR not ready after {waited:?}: {detail}")]
    NotReady { router: String, waited: Duration, detail: String },
    #[error("router {router}: the jail could not be set up: {message}")]
    Jail { router: String, message: String },
    #[error("router {router}: vtysh timed out after {0:?}", .timeout)]
    Timeout { router: String, timeout: Duration },
    /// A line of a configuration applied on the daemons' vty sockets ([`Frr::apply_config`])
    /// that no daemon accepted, or that a daemon refused: what vtysh would report as `line N:
    /// % Unknown command` or `Failure to communicate`.
    /// `detail`: the line in backquotes, then every daemon's answer.
    #[error("router {router}: configuration line {line} {detail}")]
    Config { router: String, line: usize, detail: String },
}

/// Command status codes of FRR's vty protocol (lib/command.h, FRR 8.4).
const CMD_SUCCESS: u8 = 0;
const CMD_WARNING: u8 = 1;
const CMD_ERR_NO_MATCH: u8 = 2;

/// Lines that only one daemon owns although another accepts them: FRR's parser takes a word for
/// any longer keyword it begins (`ip` for `ipv6`, `ospf` for `ospf6`), so ospf6d alone reads
/// `router ospf` as `router ospf6` and `ip ospf area 0` as `ipv6 ospf6 area 0`. vtysh, whose
/// parser holds every daemon's commands, prefers the exact match and sends such a line to its
/// owner only; [`Frr::apply_config`] does the same for the lines whose first words are these.
const OWNED: [(&[&str], &str); 7] = [
    (&["router", "ospf"], "ospfd"),
    (&["router", "ospf6"], "ospf6d"),
    (&["router", "bgp"], "bgpd"),
    (&["router", "rip"], "ripd"),
    (&["ip", "ospf"], "ospfd"),
    (&["ipv6", "ospf6"], "ospf6d"),
    (&["ip", "rip"], "ripd"),
];

/// The daemon that alone owns `line` ([`OWNED`]), if any; `no` forms included.
fn owner_of(line: &str) -> Option<&'static str> {
    let mut words: Vec<&str> = line.split_ascii_whitespace().collect();
    if words.first() == Some(&"no") {
        words.remove(0);
    }
    OWNED.iter().find(|(first, _)| words.starts_with(first)).map(|(_, owner)| *owner)
}

/// The daemons besides zebra that `config` (configuration text in the form FRR writes it)
/// configures: those owning a line of it ([`OWNED`]: `router ospf`, `ip ospf ...`, `router
/// bgp`, ...), bgpd for its own lists (`bgp as-path access-list`, `bgp community-list`), and
/// staticd for a static route (`ip route`, `ipv6 route`, in a `vrf` block too), in [`DAEMONS`]'
/// order. A line of another daemon's that this misses (a route-map clause only bgpd knows)
/// reaches no running daemon, and [`Frr::apply_config`] then fails on it, naming it: a router
/// is never left silently without a line.
pub fn daemons_of(config: &str) -> Vec<&'static str> {
    let mut used = Vec::new();
    for line in config.lines() {
        let word = line.trim_start();
        let mut words = word.split_ascii_whitespace().skip_while(|w| *w == "no");
        let (first, second) = (words.next(), words.next());
        let bgp_list = first == Some("bgp");
        let static_route = matches!(first, Some("ip" | "ipv6")) && second == Some("route");
        if let Some(owner) =
            owner_of(word).or(bgp_list.then_some("bgpd")).or(static_route.then_some("staticd"))
            && !used.contains(&owner)
        {
            used.push(owner);
        }
    }
    DAEMONS.into_iter().filter(|d| used.contains(d)).collect()
}

/// `daemons` and, after them, those `config` uses ([`daemons_of`]) that it does not list: what
/// a router given `config` must run, since vtysh drops a line whose daemon is not running with
/// no more than a warning.
pub fn daemons_with(daemons: &[String], config: Option<&str>) -> Vec<String> {
    let mut all = daemons.to_vec();
    for d in daemons_of(config.unwrap_or_default()) {
        if !all.iter().any(|have| have == d) {
            all.push(d.to_string());
        }
    }
    all
}

/// One session on a daemon's vty socket, in vtysh's protocol: a NUL-terminated line, answered by
/// the output, three NUL bytes and the status (lib/vty.c `vtysh_flush`).
struct VtySession {
    daemon: String,
    sock: tokio::net::UnixStream,
}

impl VtySession {
    async fn connect(daemon: &str, path: &Path) -> std::io::Result<Self> {
        Ok(Self { daemon: daemon.to_string(), sock: tokio::net::UnixStream::connect(path).await? })
    }

    /// Sends `line`; its status and output.
    async fn ask(&mut self, line: &str) -> std::io::Result<(u8, String)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.sock.write_all(format!("{line}\0").as_bytes()).await?;
        let mut answer = Vec::new();
        let mut buf = [0u8; 16384];
        while !(answer.len() >= 4 && answer[answer.len() - 4..answer.len() - 1] == [0, 0, 0]) {
            let n = self.sock.read(&mut buf).await?;
            if n == 0 {
                return Err(std::io::Error::other("connection closed"));
            }
            answer.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&answer[..answer.len() - 4]).into_owned();
        Ok((answer[answer.len() - 1], text))
    }
}

/// How far [`Frr::read_logs`] has read each daemon's log.
#[derive(Debug, Clone, Default)]
pub struct LogCursor {
    offsets: std::collections::HashMap<&'static str, u64>,
}

/// One line of an FRR daemon's log: `2026/11/23 19:19:19 ZEBRA: [T83RR-8SM5G] zebra 8.4.4
/// starting: vty@2601`, or with an error code, `... ZEBRA: [NNACN-54BDA][EC 4043309110] ...`.
/// FRR writes the priority into its log file only under `log record-priority`, a configuration
/// line that would show in every running configuration an agent reads; the error code, which
/// FRR attaches to its errors and warnings only, stands in for it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogLine {
    pub daemon: &'static str,
    /// As FRR wrote it: `YYYY/MM/DD HH:MM:SS`, local time.
    pub time: String,
    /// FRR's message id, e.g. `T83RR-8SM5G`.
    pub id: Option<String>,
    /// FRR's error code (`[EC n]`): set on errors and warnings.
    pub error_code: Option<u64>,
    pub message: String,
}

impl LogLine {
    /// A line of `daemon`'s log; `None` for a blank line. A line not in FRR's format (a
    /// continuation, a crash backtrace) is kept whole as the message.
    pub fn parse(daemon: &'static str, line: &str) -> Option<Self> {
        let line = line.trim_end();
        if line.trim().is_empty() {
            return None;
        }
        let whole = || Self { daemon, time: String::new(), id: None, error_code: None, message: line.into() };
        let mut parts = line.splitn(3, ' ');
        let (Some(date), Some(clock), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
            return Some(whole());
        };
        let Some((_tag, mut rest)) = rest.split_once(": ").filter(|(tag, _)| !tag.contains(' ')) else {
            return Some(whole());
        };
        let mut id = None;
        let mut error_code = None;
        while let Some(inner) = rest.strip_prefix('[').and_then(|r| r.split_once(']')) {
            let (field, after) = inner;
            match field.strip_prefix("EC ") {
                Some(code) => error_code = code.trim().parse().ok(),
                None => id = Some(field.to_string()),
            }
            rest = after;
        }
        Some(Self {
            daemon,
            time: format!("{date} {clock}"),
            id,
            error_code,
            message: rest.trim_start().to_string(),
        })
    }
}

/// What vtysh printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VtyshOutput {
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl VtyshOutput {
    pub fn success(&self) -> bool {
        self.status == Some(0)
    }
    /// stdout then stderr, as a terminal would show them.
    pub fn text(&self) -> String {
        let mut t = self.stdout.clone();
        if !self.stderr.is_empty() {
            if !t.is_empty() && !t.ends_with('\n') {
                t.push('\n');
            }
            t.push_str(&self.stderr);
        }
        t
    }
}

/// A running FRR instance. Dropping it stops the daemons and removes its files.
#[derive(Debug)]
pub struct Frr {
    router: String,
    ns: String,
    dir: PathBuf,
    /// The host name the daemons print ([`rename`](Self::rename) changes it), for a daemon
    /// started later ([`start_more`](Self::start_more)).
    hostname: String,
    stopped: bool,
}

fn valid_hostname(h: &str) -> bool {
    !h.is_empty() && h.len() <= 63 && h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Frr {
    /// Starts zebra, staticd and `daemons` (zebra first) in namespace `ns` for router `router`, waits
    /// until vtysh reaches every one, and applies `startup` (configuration commands, one a
    /// line) if given. Errors from the startup configuration are returned, not ignored.
    pub async fn start(
        router: &str,
        ns: &str,
        hostname: &str,
        daemons: &[String],
        startup: Option<&str>,
    ) -> Result<Self, FrrError> {
        // staticd runs with zebra unless asked otherwise: without it vtysh drops `ip route`
        // with no more than a warning.
        let mut with_staticd = vec!["staticd".to_string()];
        with_staticd.extend(daemons.iter().cloned());
        Self::start_only(router, ns, hostname, &with_staticd, startup).await
    }

    /// [`start`](Self::start), running zebra, `daemons` and those `startup` uses
    /// ([`daemons_with`]) alone: staticd only for a static route or if listed. For whoever
    /// starts staticd when a static route is first configured
    /// ([`start_more`](Self::start_more)).
    pub async fn start_only(
        router: &str,
        ns: &str,
        hostname: &str,
        daemons: &[String],
        startup: Option<&str>,
    ) -> Result<Self, FrrError> {
        if !crate::preflight::Need::Frr.met() {
            return Err(FrrError::NotInstalled);
        }
        if !valid_hostname(hostname) {
            return Err(FrrError::BadHostname { router: router.into(), hostname: hostname.into() });
        }
        let mut list: Vec<&str> = vec!["zebra"];
        for d in &daemons_with(daemons, startup) {
            let Some(known) = DAEMONS.iter().find(|k| **k == d.as_str()) else {
                return Err(FrrError::UnknownDaemon { router: router.into(), daemon: d.clone() });
            };
            if !list.contains(known) {
                list.push(known);
            }
        }
        let io = |what: &str| {
            let (router, what) = (router.to_string(), what.to_string());
            move |source| FrrError::Io { router, what, source }
        };
        let dir = Path::new(RUN_DIR).join(ns);
        // Created before anything runs, so that stop() (and the sweep) finds what to clean; or
        // the files of the instance killed before it on this namespace, taken over (`kill`).
        fs::create_dir_all(&dir).map_err(io("run directory"))?;
        take_over(&dir, ns, &list).map_err(io("run directory"))?;
        fs::create_dir_all(dir.join(ns)).map_err(io("run directory"))?;
        let frr = Self {
            router: router.into(),
            ns: ns.into(),
            dir: dir.clone(),
            hostname: hostname.into(),
            stopped: false,
        };
        write_file(&dir.join(ns).join("vtysh.conf"), "").map_err(io("vtysh.conf"))?;
        for d in &list {
            write_file(&dir.join(format!("{d}.conf")), &format!("hostname {hostname}\n"))
                .map_err(io("daemon config"))?;
        }
        // The daemons' socket directory, made here so that their jail can bind it; empty, since
        // readiness is read from the sockets in it.
        empty_dir(&Path::new(FRR_STATE).join(ns)).map_err(io("socket directory"))?;
        chown_frr(&dir).map_err(io("chown to frr"))?;
        chown_frr(&Path::new(FRR_STATE).join(ns)).map_err(io("chown to frr"))?;
        frr.make_uts(hostname)?;

        // zebra first: the others connect to its socket once at start and, finding none,
        // retry only 10 s later. zebra's `-d` returns once its sockets are open, and then the
        // others start together.
        frr.start_daemon("zebra").await?;
        futures::future::try_join_all(list[1..].iter().map(|d| frr.start_daemon(d))).await?;
        frr.wait_sockets(&list, Duration::from_secs(10)).await?;
        if let Some(config) = startup {
            let out = frr.apply_file(config).await?;
            if !out.success() {
                return Err(FrrError::Start {
                    router: router.into(),
                    daemon: "startup configuration".into(),
                    detail: out.text(),
                });
            }
        }
        Ok(frr)
    }

    /// Starts those of `daemons` that are not running yet, as [`start`](Self::start) starts
    /// its daemons (an empty configuration but for the host name, every one reachable on its
    /// vty socket before this returns), and returns them. Their share of a configuration that
    /// the others already run is [`apply_config_to`](Self::apply_config_to)'s to give them.
    pub async fn start_more(&self, daemons: &[String]) -> Result<Vec<&'static str>, FrrError> {
        let running = self.daemons();
        let mut new: Vec<&'static str> = Vec::new();
        for d in daemons {
            let Some(known) = DAEMONS.iter().find(|k| **k == d.as_str()) else {
                return Err(FrrError::UnknownDaemon { router: self.router.clone(), daemon: d.clone() });
            };
            if !running.contains(known) && !new.contains(known) {
                new.push(known);
            }
        }
        for d in &new {
            let conf = self.dir.join(format!("{d}.conf"));
            write_file(&conf, &format!("hostname {}\n", self.hostname))
                .and_then(|()| chown_frr(&conf))
                .map_err(|source| FrrError::Io {
                    router: self.router.clone(),
                    what: format!("{d}.conf"),
                    source,
                })?;
        }
        futures::future::try_join_all(new.iter().map(|d| self.start_daemon(d))).await?;
        self.wait_sockets(&new, Duration::from_secs(10)).await?;
        Ok(new)
    }

    pub fn router(&self) -> &str {
        &self.router
    }

    /// Starts one daemon (`-d`: it returns once the daemon has read its configuration).
    async fn start_daemon(&self, d: &str) -> Result<(), FrrError> {
        let io = |what: &str| {
            let (router, what) = (self.router.clone(), what.to_string());
            move |source| FrrError::Io { router, what, source }
        };
        let dir = &self.dir;
        let bin = Path::new(FRR_BIN).join(d);
        let conf = dir.join(format!("{d}.conf"));
        let pid = dir.join(format!("{d}.pid"));
        let log = format!("file:{}", dir.join(format!("{d}.log")).display());
        let args = [
            "-N".into(),
            self.ns.clone().into(),
            "-d".into(),
            "-f".into(),
            conf.into_os_string(),
            "-i".into(),
            pid.into_os_string(),
            "--log".into(),
            log.into(),
        ];
        let mut cmd = self.jailed::<std::ffi::OsString>(Profile::Daemon, &bin, &args, 0)?;
        let out = cmd.output().await.map_err(io(d))?;
        self.check_jail(&out)?;
        if !out.status.success() {
            let log_text = fs::read_to_string(dir.join(format!("{d}.log"))).unwrap_or_default();
            return Err(FrrError::Start {
                router: self.router.clone(),
                daemon: d.to_string(),
                detail: format!("{}{}", String::from_utf8_lossy(&out.stderr), tail(&log_text, 5)),
            });
        }
        Ok(())
    }

    /// Sets every thread of the running daemons to `nice` (a pool's reset starts them niced;
    /// the router they then serve runs them at 0).
    pub fn renice(&self, nice: i32) {
        renice_daemons(&self.ns, &self.dir, nice);
    }

    /// The daemons running (zebra first), by their pid files.
    pub fn daemons(&self) -> Vec<&'static str> {
        DAEMONS.into_iter().filter(|d| self.dir.join(format!("{d}.pid")).exists()).collect()
    }

    /// The namespace the router runs in.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// Gives the instance to another router of the same daemons (a warm pool hands it out):
    /// its name in errors, and the host name that the daemons, vtysh and its UTS namespace
    /// print, as if it had been started with that name.
    pub async fn rename(&mut self, router: &str, hostname: &str) -> Result<(), FrrError> {
        if !valid_hostname(hostname) {
            return Err(FrrError::BadHostname { router: router.into(), hostname: hostname.into() });
        }
        self.router = router.to_string();
        self.hostname = hostname.to_string();
        let uts = fs::File::open(self.uts_path()).map_err(|source| FrrError::Io {
            router: self.router.clone(),
            what: "uts".into(),
            source,
        })?;
        let name = hostname.to_string();
        let r = self.router.clone();
        std::thread::spawn(move || -> Result<(), FrrError> {
            let sys = |what, source| FrrError::Sys { router: r.clone(), what, source };
            nix::sched::setns(&uts, CloneFlags::CLONE_NEWUTS).map_err(|e| sys("setns uts", e))?;
            nix::unistd::sethostname(&name).map_err(|e| sys("sethostname", e))
        })
        .join()
        .map_err(|_| FrrError::Io {
            router: self.router.clone(),
            what: "uts".into(),
            source: std::io::Error::other("thread panicked"),
        })??;
        // vtysh keeps `hostname` to itself (it names its own prompt), so each daemon is told
        // on its own vty socket, in vtysh's protocol: a NUL-terminated line, answered by the
        // output and then three NUL bytes and the status.
        let lines =
            ["enable".to_string(), "configure terminal".into(), format!("hostname {hostname}"), "end".into()];
        // Every daemon at once: each is its own socket and process.
        let this = &*self;
        let renames = this.daemons().into_iter().map(|d| {
            let lines = &lines;
            async move {
                this.vty(d, lines, Duration::from_secs(5)).await.map_err(|e| match e {
                    FrrError::Io { router, source, .. } => {
                        FrrError::Io { router, what: format!("{d}: hostname"), source }
                    }
                    other => other,
                })
            }
        });
        futures::future::try_join_all(renames).await?;
        Ok(())
    }

    /// Sends `lines` to daemon `daemon` on its own vty socket, in vtysh's protocol (a
    /// NUL-terminated line, answered by the output, three NUL bytes and the status), and returns
    /// each line's output. A line the daemon refuses is an error naming it. No process is
    /// started: this is how netdojo's own reads (health checks) cost microseconds, not a vtysh.
    pub async fn vty(
        &self,
        daemon: &str,
        lines: &[String],
        timeout: Duration,
    ) -> Result<Vec<String>, FrrError> {
        let answers = self.vty_raw(daemon, lines, timeout).await?;
        let mut outputs = Vec::with_capacity(answers.len());
        for (line, (status, text)) in lines.iter().zip(answers) {
            if status != 0 {
                return Err(FrrError::Io {
                    router: self.router.clone(),
                    what: format!("{daemon} vty"),
                    source: std::io::Error::other(format!("`{line}`: {}", text.trim())),
                });
            }
            outputs.push(text);
        }
        Ok(outputs)
    }

    /// [`vty`](Self::vty)'s exchange: each line's status (0: success) and output.
    async fn vty_raw(
        &self,
        daemon: &str,
        lines: &[String],
        timeout: Duration,
    ) -> Result<Vec<(u8, String)>, FrrError> {
        let talk = async {
            let mut session = VtySession::connect(daemon, &self.vty_path(daemon)).await?;
            let mut outputs = Vec::with_capacity(lines.len());
            for line in lines {
                outputs.push(session.ask(line).await?);
            }
            Ok(outputs)
        };
        tokio::time::timeout(timeout, talk)
            .await
            .map_err(|_| FrrError::Timeout { router: self.router.clone(), timeout })?
            .map_err(|source| FrrError::Io {
                router: self.router.clone(),
                what: format!("{daemon} vty"),
                source,
            })
    }

    fn vty_path(&self, daemon: &str) -> PathBuf {
        Path::new(FRR_STATE).join(&self.ns).join(format!("{daemon}.vty"))
    }

    /// Applies trusted configuration text (a lab's startup configuration, never an agent's:
    /// agents go through the jailed vtysh) as `vtysh -f` would, but on the daemons' own vty
    /// sockets, with no vtysh process (starting one costs 20-25 ms of CPU: it builds its whole
    /// command tree). Returns what the daemons printed.
    ///
    /// vtysh knows which daemons own each command and sends a line to those only. Here every
    /// daemon is asked and its answer decides: a line goes to every daemon running, and those
    /// that accept a column-0 line (`router ospf`, `interface eth1`, `route-map X permit 10`,
    /// `ip route ...`) alone receive the indented lines under it and its closing `exit`, so a
    /// daemon that does not know a block never sees the block's lines (an `exit` would take it
    /// out of configuration mode). A daemon's `no match` means the line is not its; a line no
    /// daemon accepts, or that a daemon refuses otherwise (incomplete, ambiguous, failed), is
    /// [`FrrError::Config`], where vtysh would print `% Unknown command` or `Failure to
    /// communicate`. A warning counts as accepted, as vtysh -f counts it. Comments and `end`
    /// are skipped, as vtysh -f skips them, and the text is framed as vtysh frames a file:
    /// `enable`, `configure terminal`, `XFRR_start_configuration` first and
    /// `XFRR_end_configuration`, `end` last, so that the daemons commit it as one file (bgpd
    /// holds new peers until the end; see `live::BGP_RELEASE` in netdojo-incident). Sound for
    /// configuration in the form FRR writes it, each block's lines indented under its opener
    /// and no line of a block also a top-level command of a daemon outside that block's owners
    /// (a daemon tries a line it lacks in its parent nodes); netdojo-incident's `labs` test
    /// checks every lab's routers against vtysh -f.
    pub async fn apply_config(&self, config: &str) -> Result<String, FrrError> {
        let timeout = Duration::from_secs(30);
        tokio::time::timeout(timeout, self.apply_config_within(config, None))
            .await
            .map_err(|_| FrrError::Timeout { router: self.router.clone(), timeout })?
    }

    /// [`apply_config`](Self::apply_config) to `daemons` alone (daemons started after the
    /// others took `config`, by [`start_more`](Self::start_more)): each gets the lines it
    /// would have got had it been running then. A line none of them takes (`no match`) is
    /// another daemon's and is skipped, with the block it opens; any other refusal is an error.
    pub async fn apply_config_to(&self, config: &str, daemons: &[&str]) -> Result<String, FrrError> {
        let timeout = Duration::from_secs(30);
        tokio::time::timeout(timeout, self.apply_config_within(config, Some(daemons)))
            .await
            .map_err(|_| FrrError::Timeout { router: self.router.clone(), timeout })?
    }

    /// `only`: the daemons to configure, lines that none of them takes skipped
    /// ([`apply_config_to`](Self::apply_config_to)); `None`: every daemon running, a line that
    /// none takes an error.
    async fn apply_config_within(&self, config: &str, only: Option<&[&str]>) -> Result<String, FrrError> {
        let io = |daemon: &str, source| FrrError::Io {
            router: self.router.clone(),
            what: format!("{daemon} vty"),
            source,
        };
        let mut sessions = Vec::new();
        for daemon in self.daemons().into_iter().filter(|d| only.is_none_or(|o| o.contains(d))) {
            sessions
                .push(VtySession::connect(daemon, &self.vty_path(daemon)).await.map_err(|e| io(daemon, e))?);
        }
        let all = vec![true; sessions.len()];
        // Framed as vtysh -f frames a file. Without the markers the daemons would take the
        // lines as typed at a terminal: a little cheaper (141 against 198 ms for a 6-router
        // lab), but bgpd would then start each new peer on its 1 s Idle timer instead of at
        // the end of the file (with `live::BGP_RELEASE`), and a lab converge 0.3-0.5 s later (`xtask bench incident`).
        let frame = ["enable", "configure terminal", "XFRR_start_configuration"];
        let mut printed = String::new();
        let lenient = only.is_some();
        if sessions.is_empty() {
            return Ok(String::new());
        }
        for line in frame {
            self.ask_all(&mut sessions, &all, line, 0, true, false, &mut printed).await?;
        }
        // Which daemons accepted the last column-0 line: the owners of its block.
        let mut block: Option<Vec<bool>> = None;
        for (number, raw) in config.lines().enumerate() {
            let line = raw.trim_end();
            let word = line.trim_start();
            if word.is_empty() || word.starts_with(['!', '#']) || word == "end" {
                continue;
            }
            let top = !line.starts_with([' ', '\t']);
            let mut targets = match &block {
                Some(owners) if !top || word == "exit" => owners.clone(),
                _ => all.clone(),
            };
            if let Some(owner) = owner_of(word) {
                for (t, s) in targets.iter_mut().zip(&sessions) {
                    *t &= s.daemon == owner;
                }
            }
            let accepted =
                self.ask_all(&mut sessions, &targets, line, number + 1, false, lenient, &mut printed).await?;
            if top {
                block = (word != "exit").then_some(accepted);
            }
        }
        for line in ["XFRR_end_configuration", "end"] {
            self.ask_all(&mut sessions, &all, line, 0, true, false, &mut printed).await?;
        }
        Ok(printed)
    }

    /// Sends `line` (line `number` of the configuration; 0 for vtysh's own framing) to the
    /// daemons of `sessions` that `targets` marks, all at once, and returns which accepted it.
    /// `every` asks that every one does; `lenient` lets none take it (`no match` from each, or
    /// no daemon marked), which the caller then skips.
    #[allow(clippy::too_many_arguments)]
    async fn ask_all(
        &self,
        sessions: &mut [VtySession],
        targets: &[bool],
        line: &str,
        number: usize,
        every: bool,
        lenient: bool,
        printed: &mut String,
    ) -> Result<Vec<bool>, FrrError> {
        let asks = sessions
            .iter_mut()
            .zip(targets)
            .filter(|(_, t)| **t)
            .map(|(s, _)| async move { (s.daemon.clone(), s.ask(line).await) });
        let answers = futures::future::join_all(asks).await;
        let mut accepted_by = Vec::new();
        let mut refused = false;
        let mut said = Vec::new();
        for (daemon, answer) in answers {
            let (status, text) = answer.map_err(|source| FrrError::Io {
                router: self.router.clone(),
                what: format!("{daemon} vty: `{}`", line.trim()),
                source,
            })?;
            said.push(format!(
                "{daemon}: status {status}{}{}",
                if text.trim().is_empty() { "" } else { ", " },
                text.trim()
            ));
            match status {
                CMD_SUCCESS | CMD_WARNING => {
                    accepted_by.push(daemon);
                    printed.push_str(&text);
                }
                CMD_ERR_NO_MATCH if !every => {}
                _ => refused = true,
            }
        }
        if !refused && accepted_by.is_empty() && lenient {
            return Ok(vec![false; sessions.len()]);
        }
        if refused || accepted_by.is_empty() {
            return Err(FrrError::Config {
                router: self.router.clone(),
                line: number,
                detail: format!(
                    "`{line}`: {}",
                    if said.is_empty() { "no daemon to send it to".into() } else { said.join("; ") }
                ),
            });
        }
        Ok(sessions.iter().zip(targets).map(|(s, t)| *t && accepted_by.contains(&s.daemon)).collect())
    }

    /// One `show` command answered by `daemon` on its vty socket (see [`vty`](Self::vty)).
    /// Its output is returned whatever its status: a `show` that finds nothing (`show ip route
    /// PREFIX json` answers `{}`) ends with a warning status.
    pub async fn show(&self, daemon: &str, command: &str) -> Result<String, FrrError> {
        let mut out = self.vty_raw(daemon, &[command.to_string()], Duration::from_secs(5)).await?;
        Ok(out.pop().map(|(_, text)| text).unwrap_or_default())
    }

    /// Read-only `show` commands answered as `vtysh -c C1 -c C2 ...` would print them (stdout then
    /// stderr, [`VtyshOutput::text`]), without a vtysh process when every command belongs to
    /// one daemon ([`daemon_of_show`]): vtysh passes such a command to that daemon
    /// and prints its answer unchanged. Any other command, a daemon that cannot be reached, or
    /// an answer other than success or warning (vtysh would stop there) goes to vtysh itself,
    /// so the text is vtysh's either way. For netdojo's own trusted reads (testcases); what an
    /// agent sends still goes through vtysh.
    pub async fn show_text(&self, commands: &[&str], timeout: Duration) -> Result<String, FrrError> {
        let direct = async {
            let mut text = String::new();
            for command in commands {
                let daemon = daemon_of_show(command)?;
                let mut answer = self.vty_raw(daemon, &[command.to_string()], timeout).await.ok()?;
                let (status, out) = answer.pop()?;
                // 0: success; 1: a warning such as `% Network not in table`, after which
                // vtysh goes on with the next command.
                if status > 1 {
                    return None;
                }
                text.push_str(&out);
            }
            Some(text)
        };
        if let Some(text) = direct.await {
            return Ok(text);
        }
        let mut args = Vec::with_capacity(2 * commands.len());
        for c in commands {
            args.push("-c");
            args.push(*c);
        }
        Ok(self.vtysh(&args, timeout).await?.text())
    }

    fn uts_path(&self) -> PathBuf {
        self.dir.join("uts")
    }

    /// A UTS namespace with the router's host name, kept by a bind mount like a netns.
    fn make_uts(&self, hostname: &str) -> Result<(), FrrError> {
        let path = self.uts_path();
        write_file(&path, "").map_err(|source| FrrError::Io {
            router: self.router.clone(),
            what: "uts".into(),
            source,
        })?;
        let router = self.router.clone();
        let hostname = hostname.to_string();
        std::thread::spawn(move || -> Result<(), FrrError> {
            let sys = |what, source| FrrError::Sys { router: router.clone(), what, source };
            nix::sched::unshare(CloneFlags::CLONE_NEWUTS).map_err(|e| sys("unshare uts", e))?;
            nix::unistd::sethostname(&hostname).map_err(|e| sys("sethostname", e))?;
            nix::mount::mount(
                Some("/proc/thread-self/ns/uts"),
                &path,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(|e| sys("bind-mount uts", e))
        })
        .join()
        .map_err(|_| FrrError::Io {
            router: self.router.clone(),
            what: "uts".into(),
            source: std::io::Error::other("thread panicked"),
        })?
    }

    /// `program args` in a jail inside the router's network and UTS namespaces (see
    /// netdojo-jail): a daemon may write only the router's run directories; vtysh and
    /// frr-reload.py only read them, and have their own PID namespace, so a `ping` they start
    /// ends with them.
    fn jailed<S: AsRef<std::ffi::OsStr>>(
        &self,
        profile: Profile,
        program: &Path,
        args: &[S],
        cpu_seconds: u64,
    ) -> Result<Command, FrrError> {
        let jail_err = |message: String| FrrError::Jail { router: self.router.clone(), message };
        let jail = netdojo_jail::binary().map_err(|e| jail_err(e.to_string()))?;
        let mut spec = crate::sysctl::jail_spec(profile, &self.ns).map_err(jail_err)?;
        spec.uts = Some(self.uts_path());
        let dirs = vec![self.dir.clone(), Path::new(FRR_STATE).join(&self.ns)];
        if profile == Profile::Daemon {
            spec.writable = dirs;
        } else {
            spec.readable = dirs;
        }
        spec.cpu_seconds = cpu_seconds;
        let mut cmd = Command::new(jail);
        cmd.args(spec.args(program, args.iter().map(|a| a.as_ref().to_os_string())))
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("LC_ALL", "C")
            .current_dir("/")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        Ok(cmd)
    }

    /// Runs vtysh with `args` inside the router, killed after `timeout`.
    pub async fn vtysh(&self, args: &[&str], timeout: Duration) -> Result<VtyshOutput, FrrError> {
        let secs = timeout.as_secs().max(1).to_string();
        let mut words: Vec<&str> = vec!["-s", "KILL", &secs, "vtysh", "-N", &self.ns, "--config_dir"];
        let dir = self.dir.to_string_lossy();
        words.push(&dir);
        words.extend_from_slice(args);
        let mut cmd =
            self.jailed(Profile::Vtysh, Path::new("/usr/bin/timeout"), &words, timeout.as_secs() + 2)?;
        let out = tokio::time::timeout(timeout + Duration::from_secs(1), cmd.output())
            .await
            .map_err(|_| FrrError::Timeout { router: self.router.clone(), timeout })?
            .map_err(|source| FrrError::Io { router: self.router.clone(), what: "vtysh".into(), source })?;
        self.check_jail(&out)?;
        // `timeout -s KILL` ends with its child's signal: killed, not an exit status.
        let killed = std::os::unix::process::ExitStatusExt::signal(&out.status) == Some(9);
        if killed || out.status.code() == Some(137) || out.status.code() == Some(124) {
            return Err(FrrError::Timeout { router: self.router.clone(), timeout });
        }
        Ok(VtyshOutput {
            status: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// The jail's own failure (exit 125 and its message last on stderr) is the environment's.
    fn check_jail(&self, out: &std::process::Output) -> Result<(), FrrError> {
        match netdojo_jail::setup_failure(out.status.code(), &out.stderr) {
            Some(message) => Err(FrrError::Jail { router: self.router.clone(), message }),
            None => Ok(()),
        }
    }

    /// Applies configuration text with `vtysh -f`, which goes on after a failing line and
    /// reports it as `line N: % ...` (exit status 2).
    pub async fn apply_file(&self, config: &str) -> Result<VtyshOutput, FrrError> {
        let path = self.dir.join("apply.conf");
        write_file(&path, config).map_err(|source| FrrError::Io {
            router: self.router.clone(),
            what: "apply.conf".into(),
            source,
        })?;
        let path_str = path.to_string_lossy().into_owned();
        self.vtysh(&["-f", &path_str], Duration::from_secs(30)).await
    }

    /// Checks configuration text with `vtysh -C -f` (vtysh's own parser, nothing reaches a
    /// daemon): failing lines come back as `line N: % ...`, exit status 2.
    pub async fn check_file(&self, config: &str) -> Result<VtyshOutput, FrrError> {
        let path = self.dir.join("check.conf");
        write_file(&path, config).map_err(|source| FrrError::Io {
            router: self.router.clone(),
            what: "check.conf".into(),
            source,
        })?;
        let path_str = path.to_string_lossy().into_owned();
        self.vtysh(&["-C", "-f", &path_str], Duration::from_secs(30)).await
    }

    /// Makes the running configuration `config` (a whole configuration, as `show
    /// running-config` prints it) with FRR's own `frr-reload.py`: it diffs the running
    /// configuration against `config` and applies only the difference, removals first.
    pub async fn reload(&self, config: &str) -> Result<VtyshOutput, FrrError> {
        if !Path::new(RELOAD).exists() {
            return Err(FrrError::NoReload);
        }
        let io = |what: &str| {
            let (router, what) = (self.router.clone(), what.to_string());
            move |source| FrrError::Io { router, what, source }
        };
        // The banner `show running-config` prints is not configuration.
        let body: String = config
            .lines()
            .filter(|l| !l.starts_with("Building configuration") && !l.starts_with("Current configuration"))
            .map(|l| format!("{l}\n"))
            .collect();
        // Named frr.conf in --confdir, so that frr-reload.py does not `write` afterwards.
        let path = self.dir.join("frr.conf");
        write_file(&path, &body).map_err(io("frr.conf"))?;
        let timeout = Duration::from_secs(60);
        let dir = self.dir.to_string_lossy().into_owned();
        let path_str = path.to_string_lossy().into_owned();
        let args = [
            "-s",
            "KILL",
            "60",
            "python3",
            RELOAD,
            "--reload",
            "--stdout",
            "--pathspace",
            &self.ns,
            "--confdir",
            &dir,
            // Its temporary files go to the jail's own /tmp: the run directory is read-only.
            "--bindir",
            "/usr/bin",
            "--rundir",
            "/tmp",
            &path_str,
        ];
        let mut cmd = self.jailed(Profile::Vtysh, Path::new("/usr/bin/timeout"), &args, 62)?;
        let out = tokio::time::timeout(timeout + Duration::from_secs(1), cmd.output())
            .await
            .map_err(|_| FrrError::Timeout { router: self.router.clone(), timeout })?
            .map_err(io("frr-reload.py"))?;
        self.check_jail(&out)?;
        if out.status.code() == Some(137) {
            return Err(FrrError::Timeout { router: self.router.clone(), timeout });
        }
        Ok(VtyshOutput {
            status: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// `show running-config`.
    pub async fn running_config(&self) -> Result<String, FrrError> {
        let out = self.vtysh(&["-c", "show running-config"], Duration::from_secs(10)).await?;
        Ok(out.stdout)
    }

    /// Waits until every daemon's vty socket is there (what vtysh connects to): with `-d`, a
    /// daemon returns once it is up, so this rarely waits; no vtysh round trip is spent on it.
    async fn wait_sockets(&self, daemons: &[&str], timeout: Duration) -> Result<(), FrrError> {
        use std::os::unix::fs::FileTypeExt;
        let start = Instant::now();
        let state = Path::new(FRR_STATE).join(&self.ns);
        loop {
            let missing: Vec<&str> = daemons
                .iter()
                .copied()
                .filter(|d| {
                    !fs::metadata(state.join(format!("{d}.vty"))).is_ok_and(|m| m.file_type().is_socket())
                })
                .collect();
            if missing.is_empty() {
                return Ok(());
            }
            if start.elapsed() >= timeout {
                return Err(FrrError::NotReady {
                    router: self.router.clone(),
                    waited: start.elapsed(),
                    detail: format!("no vty socket for {}", missing.join(", ")),
                });
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The log lines the router's daemons wrote since `cursor`, daemon by daemon (zebra first),
    /// each in the order written; `cursor` moves past them. Only whole lines are read: a line
    /// still being written comes with the next call. FRR logs to one file per daemon here (see
    /// [`start`](Self::start)); a file not there yet reads as empty.
    pub fn read_logs(&self, cursor: &mut LogCursor) -> Vec<LogLine> {
        use std::io::{Read, Seek, SeekFrom};
        let mut lines = Vec::new();
        for daemon in DAEMONS {
            let Ok(mut file) = fs::File::open(self.dir.join(format!("{daemon}.log"))) else { continue };
            let offset = cursor.offsets.entry(daemon).or_insert(0);
            let mut text = Vec::new();
            if file.seek(SeekFrom::Start(*offset)).is_err() || file.read_to_end(&mut text).is_err() {
                continue;
            }
            let whole = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            *offset += whole as u64;
            for line in String::from_utf8_lossy(&text[..whole]).lines() {
                if let Some(parsed) = LogLine::parse(daemon, line) {
                    lines.push(parsed);
                }
            }
        }
        lines
    }

    /// Stops the daemons (SIGKILL: their files and namespace go with them, so there is nothing
    /// for a graceful exit to save) and removes the instance's files. Idempotent.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        reap(&self.ns, &self.dir);
    }

    /// Stops the daemons as [`stop`](Self::stop) does but leaves the instance's files, for the
    /// instance [`start_only`](Self::start_only) starts next on the same namespace to take over
    /// (a warm pool's reset): it rewrites, empties or removes each as a fresh start would make
    /// it. So a reset creates only the daemons' sockets anew, not a dozen files and directories
    /// a router: on an ext4 `/run`, allocating inodes among those just freed took about 3% of
    /// the machine's CPU in a suite run. Until [`hand_over`](Self::hand_over), dropping the
    /// instance still removes its files.
    pub fn kill(&mut self) {
        kill_daemons(&self.ns, &self.dir);
    }

    /// Leaves the instance's files to the instance started on its namespace after
    /// [`kill`](Self::kill): dropping this one no longer touches them.
    pub fn hand_over(&mut self) {
        self.stopped = true;
    }
}

/// Makes `dir` (an instance's run directory, `ns` its pathspace) what a fresh start of `daemons`
/// finds before it writes its files: a file an instance killed before it left (`Frr::kill`) is
/// kept where the start writes it again, emptied where a daemon appends to it (its log), and
/// removed otherwise (a pid file of a daemon not started again, which [`Frr::daemons`] would
/// count; a file written by a configuration command). Nothing to do in a new directory.
///
/// The daemons ran as user `frr` with this directory writable, so what is in it is not
/// trusted: only a plain file is kept (a link is removed, never followed), and a kept file is
/// opened without following a link (`write_file`; the daemons are gone by now, but a link
/// swapped in since must still not lead root's write out of the directory).
fn take_over(dir: &Path, ns: &str, daemons: &[&str]) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rewritten = name == "uts"
            || daemons.iter().any(|d| name == format!("{d}.conf") || name == format!("{d}.pid"));
        if name == ns && kind.is_dir() {
            for inner in fs::read_dir(entry.path())? {
                let inner = inner?;
                if !(inner.file_name() == "vtysh.conf" && inner.file_type()?.is_file()) {
                    remove(&inner.path())?;
                }
            }
        } else if kind.is_file() && name.ends_with(".log") {
            open_file(&entry.path())?;
        } else if !(kind.is_file() && rewritten) {
            remove(&entry.path())?;
        }
    }
    Ok(())
}

/// Opens `path` for writing, emptied, created if missing, without following a link as its last
/// component (`O_NOFOLLOW`): the run directory is writable by the daemons (user `frr`), and
/// root must not write through a link one of them put there.
fn open_file(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
}

/// `contents` as the whole of `path`, as `fs::write` but through [`open_file`].
fn write_file(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    open_file(path)?.write_all(contents.as_bytes())
}

/// `dir` created, or emptied if it is there.
fn empty_dir(dir: &Path) -> std::io::Result<()> {
    match fs::read_dir(dir) {
        Ok(entries) => {
            for entry in entries {
                remove(&entry?.path())?;
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => fs::create_dir_all(dir),
        Err(e) => Err(e),
    }
}

fn remove(path: &Path) -> std::io::Result<()> {
    if fs::symlink_metadata(path)?.is_dir() { fs::remove_dir_all(path) } else { fs::remove_file(path) }
}

impl Drop for Frr {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Stops the daemons of the instance in `dir` and removes its files and its UTS namespace
/// mount.
fn reap(ns: &str, dir: &Path) {
    kill_daemons(ns, dir);
    let _ = fs::remove_dir_all(dir);
    let _ = fs::remove_dir_all(Path::new(FRR_STATE).join(ns));
}

/// Kills the daemons of the instance in `dir` (only processes that really are FRR daemons of
/// pathspace `ns`: a pid file can outlive its process, and the PID be reused), waits until
/// they are gone, and takes its UTS namespace's mount away.
fn kill_daemons(ns: &str, dir: &Path) {
    let pids: Vec<i32> = daemon_pids(ns, dir).into_iter().map(|(_, pid)| pid).collect();
    for pid in &pids {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    // Gone within milliseconds; waited for so that nothing of theirs outlives the call.
    let deadline = Instant::now() + Duration::from_secs(1);
    while pids.iter().any(|p| is_frr_of(*p, ns)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = nix::mount::umount2(&dir.join("uts"), MntFlags::MNT_DETACH);
}

/// The daemons of the instance in `dir` that are running, by their pid files: only processes
/// that really are FRR daemons of pathspace `ns` (a pid file can outlive its process, and the
/// PID be reused).
fn daemon_pids(ns: &str, dir: &Path) -> Vec<(&'static str, i32)> {
    DAEMONS
        .into_iter()
        .filter_map(|d| {
            let pid = fs::read_to_string(dir.join(format!("{d}.pid"))).ok()?.trim().parse::<i32>().ok()?;
            is_frr_of(pid, ns).then_some((d, pid))
        })
        .collect()
}

/// Sets the nice value of every thread of the FRR daemons of pathspace `ns` in `dir` (Linux
/// keeps it per thread, and FRR's daemons run several).
fn renice_daemons(ns: &str, dir: &Path, nice: i32) {
    for (d, pid) in daemon_pids(ns, dir) {
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for tid in tasks.flatten().filter_map(|t| t.file_name().to_str()?.parse::<i32>().ok()) {
            if let Err(e) = set_nice(tid, nice) {
                tracing::debug!(ns, daemon = d, tid, "nice {nice}: {e}");
            }
        }
    }
}

/// setpriority(2) for one thread (`tid` 0: the calling one).
pub(crate) fn set_nice(tid: i32, nice: i32) -> std::io::Result<()> {
    rustix::process::setpriority_process(rustix::process::Pid::from_raw(tid), nice).map_err(Into::into)
}

/// Whether `pid` is a live FRR daemon started with `-N ns`.
fn is_frr_of(pid: i32, ns: &str) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let is_frr = args.first().is_some_and(|a| a.starts_with(FRR_BIN.as_bytes()));
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    is_frr && !zombie && args.windows(2).any(|w| w[0] == b"-N" && w[1] == ns.as_bytes())
}

/// Stops the FRR instances of every namespace named `PREFIX-...` (used by the sweep).
pub fn reap_prefix(prefix: &str) -> Vec<String> {
    let stem = format!("{prefix}-");
    let Ok(entries) = fs::read_dir(RUN_DIR) else { return Vec::new() };
    let mut reaped = Vec::new();
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else { continue };
        if name.starts_with(&stem) {
            reap(&name, &entry.path());
            reaped.push(name);
        }
    }
    reaped
}

/// Gives `dir` (a file, or a directory and what is in it, two levels deep) to user `frr`.
fn chown_frr(dir: &Path) -> std::io::Result<()> {
    let user = nix::unistd::User::from_name("frr")
        .ok()
        .flatten()
        .ok_or_else(|| std::io::Error::other("no user `frr` (is the frr package installed?)"))?;
    // lchown, and into real directories only: a link a daemon put in its run directory is
    // given to `frr` itself, never what it points at.
    let chown = |p: &Path| std::os::unix::fs::lchown(p, Some(user.uid.as_raw()), Some(user.gid.as_raw()));
    let is_dir = |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    chown(dir)?;
    if !is_dir(dir) {
        return Ok(());
    }
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        chown(&path)?;
        if is_dir(&path) {
            for inner in fs::read_dir(&path)? {
                chown(&inner?.path())?;
            }
        }
    }
    Ok(())
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The one daemon that answers `command` when vtysh runs it, for the read-only `show` commands
/// of a single daemon netdojo reads itself (routes, OSPF, BGP, RIP), spelled out in full: an
/// abbreviation, a pipe (`| include`, which vtysh applies) or any other command is `None`,
/// and goes to vtysh.
pub fn daemon_of_show(command: &str) -> Option<&'static str> {
    if command.contains(['|', '\0', '\n', '\r']) {
        return None;
    }
    let words: Vec<&str> = command.split_ascii_whitespace().collect();
    match words.as_slice() {
        ["show", "ip" | "ipv6", "route", ..] => Some("zebra"),
        ["show", "ip", "ospf", ..] => Some("ospfd"),
        ["show", "ip", "bgp", ..] | ["show", "bgp", ..] => Some("bgpd"),
        ["show", "ip", "rip"] | ["show", "ip", "rip", "status"] => Some("ripd"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_another_daemon_would_read_abbreviated_go_to_their_owner_only() {
        assert_eq!(owner_of("router ospf"), Some("ospfd"));
        assert_eq!(owner_of("router ospf6"), Some("ospf6d"));
        assert_eq!(owner_of(" ip ospf area 0"), Some("ospfd"));
        assert_eq!(owner_of(" no ip ospf passive"), Some("ospfd"));
        assert_eq!(owner_of(" ipv6 ospf6 area 0.0.0.0"), Some("ospf6d"));
        assert_eq!(owner_of("router bgp 65001"), Some("bgpd"));
        // The daemons' answers decide the rest.
        assert_eq!(owner_of(" ip address 10.0.0.1/30"), None);
        assert_eq!(owner_of("route-map OUT permit 10"), None);
        assert_eq!(owner_of("interface eth1"), None);
    }

    #[test]
    fn a_configuration_names_the_daemons_it_configures() {
        let ospf = "interface eth1\n ip ospf network point-to-point\nexit\nrouter ospf\n network 10.0.0.0/8 area 0\nexit\n";
        assert_eq!(daemons_of(ospf), ["ospfd"]);
        // An interface line alone needs its daemon too, and order follows DAEMONS.
        let both = "router bgp 65001\n neighbor 10.0.0.2 remote-as 65002\nexit\ninterface lo\n ip ospf cost 3\nexit\n";
        assert_eq!(daemons_of(both), ["ospfd", "bgpd"]);
        assert_eq!(daemons_of("bgp as-path access-list A seq 5 permit _65002$\n"), ["bgpd"]);
        assert_eq!(
            daemons_of("ip route 10.0.0.0/8 10.1.1.2\nrouter ospf\n redistribute static\n"),
            ["staticd", "ospfd"]
        );
        assert_eq!(daemons_of("vrf red\n ipv6 route ::/0 blackhole\nexit-vrf\n"), ["staticd"]);
        assert_eq!(daemons_of("no ip route 10.0.0.0/8 10.1.1.2\n"), ["staticd"]);
        assert!(daemons_of("ip prefix-list P seq 5 permit 10.0.0.0/8\nroute-map M permit 10\n").is_empty());
        assert_eq!(
            daemons_of("interface eth1\n ipv6 ospf6 area 0.0.0.0\nexit\nrouter ospf6\nexit\n"),
            ["ospf6d"]
        );
        // What zebra takes needs nothing more; a static route needs staticd.
        assert_eq!(
            daemons_of(
                "ip route 10.9.0.0/16 10.0.0.2\nroute-map RM permit 10\nexit\ninterface eth1\n ip address 10.0.0.1/30\nexit\n"
            ),
            ["staticd"]
        );
        assert!(
            daemons_of("route-map RM permit 10\nexit\ninterface eth1\n ip address 10.0.0.1/30\nexit\n")
                .is_empty()
        );
    }

    #[test]
    fn log_lines_parse_with_and_without_an_error_code() {
        let l = LogLine::parse(
            "zebra",
            "2026/11/23 19:19:19 ZEBRA: [T83RR-8SM5G] zebra 8.4.4 starting: vty@2601",
        )
        .expect("a line");
        assert_eq!(l.time, "2026/11/23 19:19:19");
        assert_eq!(l.id.as_deref(), Some("T83RR-8SM5G"));
        assert_eq!(l.error_code, None);
        assert_eq!(l.message, "zebra 8.4.4 starting: vty@2601");
        let e = LogLine::parse(
            "zebra",
            "2026/11/23 19:19:19 ZEBRA: [NNACN-54BDA][EC 4043309110] Disabling MPLS support (no kernel support)",
        )
        .expect("a line");
        assert_eq!((e.id.as_deref(), e.error_code), (Some("NNACN-54BDA"), Some(4043309110)));
        assert_eq!(e.message, "Disabling MPLS support (no kernel support)");
        let odd = LogLine::parse("bgpd", "  in thread_call at lib/thread.c:2000").expect("kept");
        assert_eq!((odd.time.as_str(), odd.message.as_str()), ("", "  in thread_call at lib/thread.c:2000"));
        assert_eq!(LogLine::parse("bgpd", "   "), None);
    }
}
