//! A warm pool of FRR routers: namespaces with their daemons already running, handed to
//! episodes so that an episode's setup is links and configuration only.
//!
//! A router comes back when its network is torn down. A worker thread then resets it, off the
//! episode's critical path: its daemons are killed, every link but the loopback is deleted, the
//! nftables ruleset, the loopback's qdiscs, the main and default routing tables, policy rules and
//! the loopback's addresses are put back, every per-namespace sysctl is written back to its value
//! when fresh, the connection-tracking table is flushed, and the daemons of the node it last
//! served are started again with an empty configuration, in the run directory the killed ones
//! leave (`Frr::kill`: their files rewritten or emptied rather than made anew; those it ran
//! beyond them, started as an agent first addressed it, are gone with the rest). So the pool
//! holds routers running what the labs' nodes run, and [`PoolHandle::take`] serves a node from
//! a router that runs its daemons already: a daemon's start (most of a router's CPU) stays off
//! the node's setup path, and no router starts daemons that no node it serves uses. (Undoing the configuration with `no`
//! commands instead, as frr-reload.py does, was tried: zebra and ripd keep interfaces and routes
//! that no command takes back, and a reused router then rejected routes now and then. The daemons' own allocation counts, `show
//! memory`, say the same of zebra, ospfd and bgpd after such an undo: nexthop groups, route nodes,
//! route-map entries and BGP tables a never-configured daemon has not, with the running
//! configuration back to the fresh one; docs/incident.md, "Speed".) Then the router's whole state
//! ([`Snapshot`]: each FRR daemon's running configuration, zebra's interfaces; links, addresses,
//! routes, rules, nftables ruleset, qdiscs, classes, filters; every per-namespace `net.*` sysctl)
//! is compared with the one taken when it was fresh, before any episode. Only a router equal to its
//! fresh self goes back to the pool; any other is destroyed (daemons killed, namespace deleted) and
//! counted in [`PoolStats::discarded`].
//!
//! Resets are background work and run niced ([`RESET_NICE`]), the daemons they start with them,
//! so that on a machine with few cores they yield to the episodes running; a router taken for
//! a node has every thread of its daemons set back to 0 ([`PoolHandle::take`]).
//!
//! The pool grows to the working set (routers in use plus routers being reset, at most
//! [`MAX_ROUTERS`]): an episode that finds too few idle routers starts the missing ones itself,
//! exactly as a fresh network would. Each router is its own [`Episode`] (its own marker), so the
//! sweep removes what a killed process left, and dropping the pool removes everything.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command as StdCommand;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use crate::error::NetworkError;
use crate::frr::{Frr, FrrError};
use crate::netns::{self, Episode};

/// The host name of an idle router (the daemons' and its UTS namespace's).
pub const IDLE_HOSTNAME: &str = "pooled";
/// The nice value of a router's reset, and so of the daemons it starts until the router is
/// taken ([`PoolHandle::take`] sets them back to 0).
pub const RESET_NICE: i32 = 10;
/// The most routers a pool keeps alive at once (idle, in use and being reset).
pub const MAX_ROUTERS: usize = 64;

/// What every router of a pool is: the daemons (besides zebra, and staticd unless
/// [`staticd_on_demand`](Self::staticd_on_demand)) it runs at least and the sysctls its
/// namespace gets before any interface exists. A node is served from the pool
/// when it runs at least these daemons and sets every one of these sysctls; a router running
/// its other daemons is looked for ([`PoolHandle::take`]), those still missing are started, and
/// the values it sets otherwise and any sysctl of its own written, as it is taken
/// (`Network::build_with`, [`Warm::adopt`]); the reset takes the sysctls back when it returns,
/// and starts the node's daemons again, fresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterSpec {
    pub daemons: Vec<String>,
    pub sysctls: BTreeMap<String, String>,
    /// staticd runs only on a router whose node lists it (or `daemons` does), not on every
    /// router as [`Frr::start`] starts it: for whoever starts it as a static route is first
    /// configured ([`Frr::start_only`]). An idle router then runs zebra alone.
    pub staticd_on_demand: bool,
}

impl RouterSpec {
    /// Starts an idle router of this spec in `ns`, running `daemons` besides zebra (and
    /// staticd, unless [`staticd_on_demand`](Self::staticd_on_demand)).
    async fn start_idle(&self, ns: &str, daemons: &[String]) -> Result<Frr, FrrError> {
        if self.staticd_on_demand {
            Frr::start_only(IDLE_HOSTNAME, ns, IDLE_HOSTNAME, daemons, None).await
        } else {
            Frr::start(IDLE_HOSTNAME, ns, IDLE_HOSTNAME, daemons, None).await
        }
    }
}

/// Everything of a router that an episode can read or that is scored, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Every daemon's own `show running-config` (without its `Building configuration...`
    /// banner), each under a `! daemon` line, zebra first.
    pub running: String,
    /// `show interface brief`: zebra's interfaces, also those without configuration.
    pub interfaces: String,
    /// The kernel's side, section by section (`# ip -d link show` then its output, ...).
    pub kernel: BTreeMap<String, String>,
    /// Every per-namespace `net.*` sysctl (path under /proc/sys → value).
    pub sysctls: BTreeMap<String, String>,
}

impl Snapshot {
    /// The parts that differ from `other`, by name (empty when equal).
    pub fn differences(&self, other: &Snapshot) -> Vec<String> {
        let mut out = Vec::new();
        if self.running != other.running {
            out.push("FRR running-config".to_string());
        }
        if self.interfaces != other.interfaces {
            out.push("FRR interfaces".to_string());
        }
        for (k, v) in &self.kernel {
            if other.kernel.get(k) != Some(v) {
                out.push(k.clone());
            }
        }
        let sysctls: Vec<&String> = self
            .sysctls
            .iter()
            .filter(|(k, v)| other.sysctls.get(*k) != Some(*v))
            .map(|(k, _)| k)
            .chain(other.sysctls.keys().filter(|k| !self.sysctls.contains_key(*k)))
            .collect();
        if !sysctls.is_empty() {
            out.push(format!(
                "sysctls {}",
                sysctls.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        out
    }
}

/// The kernel reads of a [`Snapshot`], run inside the router's namespace: one process per
/// tool (`-batch`), each section its output.
const IP_READS: &str = "link show\naddr show\nroute show table all\nrule show\n";
const IP6_READS: &str = "route show table all\nrule show\n";
const TC_READS: &str = "qdisc show\nclass show dev lo\nfilter show dev lo\nfilter show dev lo ingress\n";

/// One warm router: its namespace (an episode of its own) and its FRR instance.
#[derive(Debug)]
pub struct Warm {
    // Declared first: its daemons are stopped before the namespace goes.
    frr: Frr,
    fresh: Snapshot,
    /// Each daemon's running configuration when it was fresh (a [`Snapshot::running`] section),
    /// those started as the router was taken ([`adopt`](Self::adopt)) too: the reset compares
    /// the daemons it starts with these.
    fresh_daemons: BTreeMap<String, String>,
    /// The daemons (besides zebra, and staticd unless [`RouterSpec::staticd_on_demand`]) the
    /// reset starts, and so those an idle router runs: the pool's and those of the node the
    /// router last served, so that the pool holds
    /// routers running what the labs ask for and a node finds one that runs its daemons already
    /// (none started on its setup's path).
    want: Vec<String>,
    /// Held for its drop: the namespace and its marker go with the router.
    _episode: Episode,
}

impl Warm {
    /// The router's namespace.
    pub fn ns(&self) -> &str {
        self.frr.ns()
    }

    pub fn frr(&self) -> &Frr {
        &self.frr
    }

    /// The router's state now.
    pub async fn snapshot(&self) -> Result<Snapshot, NetworkError> {
        snapshot(&self.frr).await
    }

    /// The state it had when fresh, before any episode.
    pub fn fresh(&self) -> &Snapshot {
        &self.fresh
    }

    /// Makes it router `router` (host name and all), running `daemons` besides zebra (and
    /// staticd, unless [`RouterSpec::staticd_on_demand`]; those it does not run yet are started
    /// now; its reset starts these again) and those `startup` uses, and applies
    /// `startup` (configuration commands, one a line), as [`Frr::start`] does for a fresh router.
    pub async fn adopt(
        &mut self,
        router: &str,
        daemons: &[String],
        startup: Option<&str>,
    ) -> Result<(), FrrError> {
        let daemons = crate::frr::daemons_with(daemons, startup);
        // Started before the rename, so that their fresh running configuration (the idle host
        // name) is recorded for the reset's check.
        let started = self.frr.start_more(&daemons).await?;
        for daemon in started {
            let section = running_section(&self.frr, daemon).await?;
            self.fresh_daemons.insert(daemon.to_string(), section);
        }
        self.want = daemons;
        self.frr.rename(router, router).await?;
        let Some(config) = startup else { return Ok(()) };
        let out = self.frr.apply_file(config).await?;
        if !out.success() {
            return Err(FrrError::Start {
                router: router.into(),
                daemon: "startup configuration".into(),
                detail: out.text(),
            });
        }
        Ok(())
    }

    /// Brings the router back to its fresh state (see the module docs) and checks it: `Err`
    /// names what still differs, and the router must then be destroyed.
    pub async fn reset(&mut self, spec: &RouterSpec) -> Result<(), String> {
        // The daemons go first, so that nothing they hold (a route, an interface, a neighbour,
        // a log line) reaches the next router; they are started again on the clean namespace,
        // in the files they leave (`Frr::kill`).
        let ns = self.frr.ns().to_string();
        self.frr.kill();
        let fresh = self.fresh.clone();
        let in_ns = ns.clone();
        tokio::task::spawn_blocking(move || netns::in_netns(&in_ns, move || reset_kernel(&fresh)))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())??;
        crate::conntrack::flush(&ns).map_err(|e| e.to_string())?;
        for d in &spec.daemons {
            if !self.want.contains(d) {
                self.want.push(d.clone());
            }
        }
        let started = spec.start_idle(&ns, &self.want).await.map_err(|e| e.to_string())?;
        std::mem::replace(&mut self.frr, started).hand_over();
        let now = self.snapshot().await.map_err(|e| e.to_string())?;
        let mut expected = self.fresh.clone();
        expected.running = String::new();
        for daemon in self.frr.daemons() {
            let Some(section) = self.fresh_daemons.get(daemon) else {
                return Err(format!("{daemon} has no fresh state on record"));
            };
            expected.running.push_str(section);
        }
        let differences = now.differences(&expected);
        if differences.is_empty() {
            Ok(())
        } else {
            Err(format!("differs from a fresh router in: {}", differences.join("; ")))
        }
    }
}

/// Starts one router of `spec`, running `daemons` (besides zebra, and staticd unless
/// [`RouterSpec::staticd_on_demand`]; the spec's among them), in a namespace of its own and
/// records its fresh state.
pub async fn start_router(spec: &RouterSpec, daemons: &[String]) -> Result<Warm, NetworkError> {
    let mut episode = Episode::new()?;
    let sysctls = spec.sysctls.clone();
    let (ns, made) = episode.create_with("r", move || -> Result<(), String> {
        // As `Network::build` sets a router's namespace up: sysctls before any interface.
        for (key, value) in &sysctls {
            netns::write_sysctl(key, value).map_err(|e| format!("sysctl {key}={value}: {e}"))?;
        }
        netns::write_sysctl("net.ipv4.ip_forward", "1").map_err(|e| format!("net.ipv4.ip_forward: {e}"))?;
        run_here(&["ip", "link", "set", "lo", "up"], "").map(|_| ())
    })?;
    made.map_err(|message| NetworkError::Build { what: ns.clone(), message })?;
    let frr = spec.start_idle(&ns, daemons).await?;
    let (fresh, fresh_daemons) = snapshot_by_daemon(&frr).await?;
    Ok(Warm { frr, fresh, fresh_daemons, want: daemons.to_vec(), _episode: episode })
}

/// One daemon's part of [`Snapshot::running`]: its own running configuration, read on its vty
/// socket, under a `! daemon` line.
async fn running_section(frr: &Frr, daemon: &str) -> Result<String, FrrError> {
    // `write terminal` in the enable node: what vtysh asks each daemon for before merging;
    // `vty` makes any answer but success an error.
    let ask = ["enable".to_string(), "write terminal".to_string()];
    let text = frr.vty(daemon, &ask, Duration::from_secs(5)).await?.pop().unwrap_or_default();
    // Without the banner and the `!` comment lines (the log file's path, which names the
    // namespace, among them), which vtysh's merge leaves out too.
    let lines: String = text
        .lines()
        .filter(|l| {
            !l.starts_with('!')
                && !l.starts_with("Building configuration")
                && !l.starts_with("Current configuration")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    Ok(format!("! {daemon}\n{lines}"))
}

async fn snapshot(frr: &Frr) -> Result<Snapshot, NetworkError> {
    snapshot_by_daemon(frr).await.map(|(snapshot, _)| snapshot)
}

/// [`snapshot`], with each daemon's section of its running configuration apart.
async fn snapshot_by_daemon(frr: &Frr) -> Result<(Snapshot, BTreeMap<String, String>), NetworkError> {
    // Each daemon's own running configuration, read on its vty socket, in the daemons' order:
    // as strict as vtysh's merged `show running-config` (a line changed in any daemon shows),
    // without a vtysh process per snapshot (vtysh builds every daemon's command tree as it
    // starts: about 10% of the machine's CPU time in a run of the incident suite, one
    // snapshot a router reset). A daemon that does not answer fails the snapshot, so the
    // router is destroyed rather than reused.
    let mut running = String::new();
    let mut sections = BTreeMap::new();
    for daemon in frr.daemons() {
        let section = running_section(frr, daemon).await?;
        running.push_str(&section);
        sections.insert(daemon.to_string(), section);
    }
    let interfaces = frr.show("zebra", "show interface brief").await?;
    let ns = frr.ns().to_string();
    let (kernel, sysctls) = tokio::task::spawn_blocking(move || netns::in_netns(&ns, kernel_state))
        .await
        .map_err(|e| NetworkError::Build { what: "snapshot".into(), message: e.to_string() })??
        .map_err(|message| NetworkError::Build { what: "snapshot".into(), message })?;
    Ok((Snapshot { running, interfaces, kernel, sysctls }, sections))
}

/// A command of ours (the kernel reads and the resets), run from the calling thread, whose
/// network namespace the child inherits; `input` goes to its standard input (`-batch -`).
fn run_here(args: &[&str], input: &str) -> Result<String, String> {
    use std::io::Write;
    // By its absolute path: a bare name with a `PATH` of the child's own makes the standard
    // library fork this whole process rather than posix_spawn it, and a router's reset runs a
    // dozen of these (the page-table copy and teardown were 4% of a suite run's CPU).
    let program = crate::exec::resolve(args[0]).ok_or_else(|| format!("{}: not installed", args[0]))?;
    let mut child = StdCommand::new(program)
        .args(&args[1..])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes());
    }
    let out = child.wait_with_output().map_err(|e| format!("{}: {e}", args.join(" ")))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    if out.status.success() { Ok(text) } else { Err(format!("{}: {}", args.join(" "), text.trim())) }
}

/// The kernel sections and the per-namespace sysctls of the calling thread's namespace.
type KernelState = (BTreeMap<String, String>, BTreeMap<String, String>);

fn kernel_state() -> Result<KernelState, String> {
    let mut kernel = BTreeMap::new();
    let reads: [(&str, &[&str], &str); 4] = [
        ("ip", &["ip", "-d", "-batch", "-"], IP_READS),
        ("ip -6", &["ip", "-6", "-batch", "-"], IP6_READS),
        ("nft", &["nft", "list", "ruleset"], ""),
        ("tc", &["tc", "-batch", "-"], TC_READS),
    ];
    for (name, args, input) in reads {
        kernel.insert(name.to_string(), run_here(args, input)?);
    }
    let mut sysctls = BTreeMap::new();
    if let Ok(keys) = crate::sysctl::probe() {
        for key in &keys.per_namespace {
            if let Ok(value) = std::fs::read_to_string(Path::new("/proc/sys").join(key)) {
                sysctls.insert(key.clone(), value.trim().to_string());
            }
        }
    }
    Ok((kernel, sysctls))
}

/// Puts the kernel side of the calling thread's namespace back as `fresh` had it, as far as it
/// differs (the check afterwards says whether it worked).
fn reset_kernel(fresh: &Snapshot) -> Result<(), String> {
    // Every link but the loopback goes: the episode's veths (their peers with them) and any
    // the agent made.
    let links = run_here(&["ip", "-o", "link", "show"], "")?;
    let mut batch = String::new();
    for line in links.lines() {
        let Some(name) = line.split(": ").nth(1) else { continue };
        let name = name.split('@').next().unwrap_or(name);
        if name != "lo" {
            batch.push_str(&format!("link del {name}\n"));
        }
    }
    if !batch.is_empty() {
        // -force: a veth whose peer went a moment before is gone already.
        let _ = run_here(&["ip", "-force", "-batch", "-"], &batch);
    }
    let (now, sysctls) = kernel_state()?;
    if now.get("nft") != fresh.kernel.get("nft") {
        run_here(&["nft", "flush", "ruleset"], "")?;
    }
    if now.get("tc") != fresh.kernel.get("tc") {
        let _ =
            run_here(&["tc", "-force", "-batch", "-"], "qdisc del dev lo root\nqdisc del dev lo ingress\n");
    }
    // Sysctls before addresses and routes: `disable_ipv6` and `ip_forward` change both.
    for (key, value) in &fresh.sysctls {
        if sysctls.get(key) != Some(value) {
            std::fs::write(Path::new("/proc/sys").join(key), value)
                .map_err(|e| format!("sysctl {key}: {e}"))?;
        }
    }
    if now.get("ip") != fresh.kernel.get("ip") {
        // Policy rules back to the kernel's three, the main and default tables emptied, and
        // the loopback's addresses: it gets 127.0.0.1/8 back by itself when it comes up with
        // none (the daemons are stopped meanwhile).
        let mut batch = String::from(
            "rule flush\nrule add pref 32766 table main protocol kernel\n\
             rule add pref 32767 table default protocol kernel\n\
             route flush table main\nroute flush table default\n",
        );
        let lo = run_here(&["ip", "addr", "show", "dev", "lo"], "")?;
        if !fresh.kernel.get("ip").is_some_and(|f| f.contains(&lo)) {
            batch.push_str("addr flush dev lo\nlink set lo down\nlink set lo up\n");
        }
        let _ = run_here(&["ip", "-force", "-batch", "-"], &batch);
    }
    Ok(())
}

/// The idle router that serves a node running `want` (besides zebra, and staticd unless
/// [`RouterSpec::staticd_on_demand`]) best: one running all of them and the fewest others;
/// unless `superset_only`, else one missing the fewest of them.
fn closest(idle: &[Warm], want: &[String], superset_only: bool) -> Option<usize> {
    // An idle router runs what its reset started (`Warm::want`): no process table read under
    // the pool's lock.
    let cost = |w: &Warm| {
        let lacking = want.iter().filter(|d| !w.want.contains(d)).count();
        let extra = w.want.iter().filter(|d| !want.contains(d)).count();
        (lacking, extra)
    };
    idle.iter()
        .enumerate()
        .map(|(k, w)| (cost(w), k))
        .filter(|((lacking, _), _)| !superset_only || *lacking == 0)
        .min()
        .map(|(_, k)| k)
}

/// How the pool has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PoolStats {
    /// Routers started (for the pool or because it had none idle).
    pub created: u64,
    /// Routers handed out again after a reset.
    pub reused: u64,
    /// Routers destroyed because their reset did not bring back the fresh state.
    pub discarded: u64,
}

#[derive(Debug)]
struct Shared {
    spec: RouterSpec,
    idle: Mutex<Vec<Warm>>,
    /// To the reset worker; `None` once the pool is closing.
    returns: Mutex<Option<mpsc::Sender<Warm>>>,
    live: AtomicUsize,
    closed: AtomicBool,
    created: AtomicU64,
    reused: AtomicU64,
    discarded: AtomicU64,
}

/// What a network holds of its pool: routers are taken from it and given back to it.
#[derive(Debug, Clone)]
pub struct PoolHandle(Arc<Shared>);

impl PoolHandle {
    pub fn spec(&self) -> &RouterSpec {
        &self.0.spec
    }

    /// A router for each of `wants` (the daemons a node runs besides zebra, and staticd unless
    /// [`RouterSpec::staticd_on_demand`]), in order: an idle one running exactly those, or the
    /// fewest more, first; then any idle one, missing the fewest (its missing daemons are
    /// started as it is taken, [`Warm::adopt`]); the rest started now (all at once), running
    /// what their node wants.
    pub async fn take(&self, wants: &[Vec<String>]) -> Result<Vec<Warm>, NetworkError> {
        let mut slots: Vec<Option<Warm>> = wants.iter().map(|_| None).collect();
        {
            let mut idle = self.0.idle.lock().unwrap_or_else(|p| p.into_inner());
            for superset_only in [true, false] {
                for (slot, want) in slots.iter_mut().zip(wants) {
                    if slot.is_none()
                        && let Some(k) = closest(&idle, want, superset_only)
                    {
                        *slot = Some(idle.swap_remove(k));
                    }
                }
            }
        }
        self.0.reused.fetch_add(slots.iter().flatten().count() as u64, Ordering::Relaxed);
        // Past the cap, wait for resets to bring routers back rather than start more.
        loop {
            let missing = slots.iter().filter(|s| s.is_none()).count();
            if missing == 0 || self.0.live.load(Ordering::Relaxed) + missing <= MAX_ROUTERS {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            let mut idle = self.0.idle.lock().unwrap_or_else(|p| p.into_inner());
            for (slot, want) in slots.iter_mut().zip(wants) {
                if slot.is_none()
                    && let Some(k) = closest(&idle, want, false)
                {
                    self.0.reused.fetch_add(1, Ordering::Relaxed);
                    *slot = Some(idle.swap_remove(k));
                }
            }
        }
        let missing: Vec<usize> = (0..slots.len()).filter(|i| slots[*i].is_none()).collect();
        self.0.live.fetch_add(missing.len(), Ordering::Relaxed);
        let started =
            futures::future::join_all(missing.iter().map(|i| start_router(&self.0.spec, &wants[*i]))).await;
        let mut first_error = None;
        for (i, s) in missing.into_iter().zip(started) {
            match s {
                Ok(w) => {
                    self.0.created.fetch_add(1, Ordering::Relaxed);
                    slots[i] = Some(w);
                }
                Err(e) => {
                    self.0.live.fetch_sub(1, Ordering::Relaxed);
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            None => {
                let routers: Vec<Warm> = slots.into_iter().flatten().collect();
                for w in &routers {
                    w.frr.renice(0);
                }
                Ok(routers)
            }
            Some(e) => {
                for w in slots.into_iter().flatten() {
                    self.give_back(w);
                }
                Err(e)
            }
        }
    }

    /// Hands a router back for its reset (or destroys it, when the pool is closing).
    pub fn give_back(&self, router: Warm) {
        let returns = self.0.returns.lock().unwrap_or_else(|p| p.into_inner());
        let router = match returns.as_ref() {
            Some(tx) => match tx.send(router) {
                Ok(()) => return,
                Err(mpsc::SendError(r)) => r,
            },
            None => router,
        };
        drop(returns);
        self.0.live.fetch_sub(1, Ordering::Relaxed);
        drop(router);
    }

    pub fn stats(&self) -> PoolStats {
        PoolStats {
            created: self.0.created.load(Ordering::Relaxed),
            reused: self.0.reused.load(Ordering::Relaxed),
            discarded: self.0.discarded.load(Ordering::Relaxed),
        }
    }

    /// Routers idle now (reset and checked).
    pub fn idle(&self) -> usize {
        self.0.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// The pool. Dropping it waits for the resets under way and destroys every router it holds;
/// routers still in a network are destroyed when that network is torn down.
#[derive(Debug)]
pub struct FrrPool {
    handle: PoolHandle,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl FrrPool {
    /// An empty pool of routers of `spec` and its reset worker.
    pub fn new(spec: RouterSpec) -> Result<Self, NetworkError> {
        let (tx, rx) = mpsc::channel::<Warm>();
        let shared = Arc::new(Shared {
            spec,
            idle: Mutex::new(Vec::new()),
            returns: Mutex::new(Some(tx)),
            live: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            created: AtomicU64::new(0),
            reused: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
        });
        let worker_shared = shared.clone();
        let worker = std::thread::Builder::new()
            .name("frr-pool-reset".into())
            .spawn(move || reset_worker(rx, worker_shared))
            .map_err(|e| NetworkError::Build { what: "FRR pool".into(), message: e.to_string() })?;
        Ok(Self { handle: PoolHandle(shared), worker: Some(worker) })
    }

    pub fn handle(&self) -> PoolHandle {
        self.handle.clone()
    }

    /// Waits until no reset is under way (every router given back is idle or destroyed).
    pub fn settle(&self, timeout: Duration) {
        let start = std::time::Instant::now();
        while start.elapsed() < timeout {
            let idle = self.handle.idle();
            let live = self.handle.0.live.load(Ordering::Relaxed);
            if idle >= live {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for FrrPool {
    fn drop(&mut self) {
        let shared = &self.handle.0;
        shared.closed.store(true, Ordering::Relaxed);
        // The worker ends once the channel is empty and this, the only sender, is gone.
        shared.returns.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
        shared.idle.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

/// Resets the routers given back, all those waiting at once, on a runtime of its own.
fn reset_worker(rx: mpsc::Receiver<Warm>, shared: Arc<Shared>) {
    // Resets are background work: the daemons they start (whose start is most of a reset's
    // CPU) inherit this thread's nice value, and yield to the episodes running.
    if let Err(e) = crate::frr::set_nice(0, RESET_NICE) {
        tracing::debug!("the reset worker keeps its priority: {e}");
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let Ok(runtime) = runtime.as_ref() else {
            // No runtime, no reset: every router is destroyed.
            shared.live.fetch_sub(batch.len(), Ordering::Relaxed);
            shared.discarded.fetch_add(batch.len() as u64, Ordering::Relaxed);
            continue;
        };
        let spec = shared.spec.clone();
        let done = runtime.block_on(futures::future::join_all(batch.into_iter().map(|mut w| {
            let spec = spec.clone();
            async move {
                let result = w.reset(&spec).await;
                (w, result)
            }
        })));
        for (w, result) in done {
            match result {
                Ok(()) if !shared.closed.load(Ordering::Relaxed) => {
                    shared.idle.lock().unwrap_or_else(|p| p.into_inner()).push(w);
                }
                Ok(()) => {
                    shared.live.fetch_sub(1, Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::warn!("pooled router {}: destroyed, not reused: {e}", w.ns());
                    shared.discarded.fetch_add(1, Ordering::Relaxed);
                    shared.live.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }
}
