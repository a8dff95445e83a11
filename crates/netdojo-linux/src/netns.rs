//! netdojo's own network namespaces: creation, the ownership marker, deletion and the sweep.
//!
//! A namespace is made the way `ip netns add` makes one (unshare a thread into a new network
//! namespace, bind-mount it on `/run/netns/NAME`), in-process, so building a network costs no
//! child process. Every namespace of an episode is named `PREFIX-NODE`; the prefix is unique to
//! the episode and recorded in a marker file, `/run/netdojo/episodes/PREFIX`, that holds the
//! owning process's PID and start time. The sweep deletes the namespaces of markers whose owner
//! is gone (a run killed with SIGKILL), and nothing else: a namespace without netdojo's marker
//! is never touched, and neither is one whose owner is still running (a concurrent run).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;

pub use crate::paths::{NETNS_DIR, ns_path};

/// Where netdojo keeps its ownership markers.
pub const MARKER_DIR: &str = "/run/netdojo/episodes";
/// Every prefix starts with this, so an operator can tell netdojo's namespaces apart.
pub const PREFIX_STEM: &str = "ndj";

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("network namespaces need root (CAP_SYS_ADMIN); run as root")]
    NotRoot,
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("namespace {name}: {what}: {source}")]
    Sys {
        name: String,
        what: &'static str,
        #[source]
        source: nix::Error,
    },
    #[error("namespace {name}: node name `{node}` is not usable (letters, digits, `-`, `_`; at most 32)")]
    BadNode { name: String, node: String },
    #[error("namespace {name} already exists")]
    Exists { name: String },
}

fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> NetnsError {
    let path = path.into();
    move |source| NetnsError::Io { path, source }
}

/// The namespaces of one episode. Dropping it deletes them and its marker.
#[derive(Debug)]
pub struct Episode {
    prefix: String,
    marker: PathBuf,
    namespaces: Vec<String>,
}

static NEXT_EPISODE: AtomicU32 = AtomicU32::new(0);

impl Episode {
    /// Claims a fresh prefix and writes its marker. Creates no namespace yet.
    pub fn new() -> Result<Self, NetnsError> {
        if !crate::preflight::Need::Root.met() {
            return Err(NetnsError::NotRoot);
        }
        fs::create_dir_all(MARKER_DIR).map_err(io_err(MARKER_DIR))?;
        let owner = Owner::current().map_err(io_err("/proc/self/stat"))?;
        loop {
            let n = NEXT_EPISODE.fetch_add(1, Ordering::Relaxed);
            let prefix = format!("{PREFIX_STEM}{:x}x{n:x}", owner.pid);
            let marker = Path::new(MARKER_DIR).join(&prefix);
            // create_new: a stale marker of a dead process with the same PID keeps its prefix
            // until the sweep; take the next number instead of adopting its namespaces.
            match OpenOptions::new().write(true).create_new(true).open(&marker) {
                Ok(mut f) => {
                    f.write_all(owner.to_line().as_bytes()).map_err(io_err(&marker))?;
                    return Ok(Self { prefix, marker, namespaces: Vec::new() });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err(&marker)(e)),
            }
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The namespace name of `node` in this episode.
    pub fn ns_name(&self, node: &str) -> String {
        format!("{}-{node}", self.prefix)
    }

    /// Creates the namespace of `node` with its loopback still down and returns its name.
    pub fn create(&mut self, node: &str) -> Result<String, NetnsError> {
        self.create_with(node, || ()).map(|(name, ())| name)
    }

    /// Creates the namespace of `node` and runs `init` on the creating thread, inside the new
    /// namespace: sockets it opens (netlink, ICMP) belong to that namespace for good.
    pub fn create_with<T: Send + 'static>(
        &mut self,
        node: &str,
        init: impl FnOnce() -> T + Send + 'static,
    ) -> Result<(String, T), NetnsError> {
        let mut made = self.create_all(vec![(node.to_string(), init)])?;
        made.pop().ok_or_else(|| NetnsError::Io {
            path: ns_path(&self.ns_name(node)),
            source: io::Error::other("the namespace was not made"),
        })
    }

    /// [`create_with`](Self::create_with) for many nodes at once, each namespace made on its
    /// own thread: the kernel work of one (registering its loopback, its sysctl tables) overlaps
    /// the others', which is most of the time it takes to build a network. Returns the names and
    /// values in the order given; on error, whatever was made is still the episode's, removed at
    /// teardown.
    pub fn create_all<T: Send + 'static, F: FnOnce() -> T + Send + 'static>(
        &mut self,
        nodes: Vec<(String, F)>,
    ) -> Result<Vec<(String, T)>, NetnsError> {
        let mut pending = Vec::with_capacity(nodes.len());
        let mut first_error = None;
        for (node, init) in nodes {
            let name = self.ns_name(&node);
            let valid = !node.is_empty()
                && node.len() <= 32
                && node.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !valid {
                first_error = Some(NetnsError::BadNode { name, node });
                break;
            }
            // Recorded before it exists, so a crash between the two leaves nothing the sweep
            // does not know about.
            self.namespaces.push(name.clone());
            match start_netns(&name, init) {
                Ok(p) => pending.push((name, p)),
                Err(e) => {
                    first_error = Some(e);
                    break;
                }
            }
        }
        // Every thread is joined, also after an error, so none is left inside a namespace.
        let mut made = Vec::with_capacity(pending.len());
        for (name, p) in pending {
            match p.join() {
                Ok(value) => made.push((name, value)),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(made), Err)
    }

    /// The namespaces created so far.
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// Deletes every namespace of the episode and its marker. Idempotent.
    pub fn teardown(&mut self) {
        // FRR instances normally stop with their router; this catches any left running.
        crate::frr::reap_prefix(&self.prefix);
        for name in self.namespaces.drain(..) {
            if let Err(e) = delete_netns(&name) {
                tracing::warn!("teardown: {e}");
            }
        }
        // The namespaces of a prefix can also be found by name, in case one was created by
        // a previous incarnation of this episode's code path and not recorded.
        for name in list_with_prefix(&self.prefix) {
            if let Err(e) = delete_netns(&name) {
                tracing::warn!("teardown: {e}");
            }
        }
        let _ = fs::remove_file(&self.marker);
    }
}

impl Drop for Episode {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// The process that owns a marker: PID and start time (so a reused PID is not mistaken for
/// the owner).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    pid: u32,
    start: u64,
}

impl Owner {
    fn current() -> io::Result<Self> {
        let pid = std::process::id();
        let start = start_time(pid)?;
        Ok(Self { pid, start })
    }

    fn to_line(&self) -> String {
        format!("netdojo pid={} start={}\n", self.pid, self.start)
    }

    fn parse(text: &str) -> Option<Self> {
        let mut pid = None;
        let mut start = None;
        let mut words = text.split_whitespace();
        if words.next()? != "netdojo" {
            return None;
        }
        for word in words {
            match word.split_once('=') {
                Some(("pid", v)) => pid = v.parse().ok(),
                Some(("start", v)) => start = v.parse().ok(),
                _ => {}
            }
        }
        Some(Self { pid: pid?, start: start? })
    }

    fn alive(&self) -> bool {
        start_time(self.pid).is_ok_and(|s| s == self.start)
    }
}

/// Field 22 of /proc/PID/stat: the start time in clock ticks since boot.
fn start_time(pid: u32) -> io::Result<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    after
        .split_whitespace()
        .nth(19)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable /proc/PID/stat"))
}

/// What a sweep removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    /// Markers of dead owners that were removed.
    pub episodes: Vec<String>,
    /// Namespaces deleted.
    pub namespaces: Vec<String>,
}

/// Deletes the namespaces and markers left by netdojo processes that died without cleaning up.
/// Namespaces of live netdojo processes and namespaces without a netdojo marker are left alone.
pub fn sweep() -> Result<Swept, NetnsError> {
    let mut swept = Swept::default();
    let entries = match fs::read_dir(MARKER_DIR) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(swept),
        Err(e) => return Err(io_err(MARKER_DIR)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io_err(MARKER_DIR))?;
        let path = entry.path();
        let Some(prefix) = path.file_name().and_then(|n| n.to_str()).map(str::to_string) else { continue };
        if !prefix.starts_with(PREFIX_STEM) {
            continue;
        }
        let Ok(text) = fs::read_to_string(&path) else { continue };
        // A marker being written right now is empty or partial: not ours to judge.
        let Some(owner) = Owner::parse(&text) else { continue };
        if owner.alive() {
            continue;
        }
        remove_episode(&prefix, &path, &mut swept)?;
    }
    if !swept.namespaces.is_empty() {
        tracing::info!(
            "swept {} namespace(s) of {} crashed episode(s)",
            swept.namespaces.len(),
            swept.episodes.len()
        );
    }
    Ok(swept)
}

/// An episode's FRR daemons, namespaces and marker.
fn remove_episode(prefix: &str, marker: &Path, swept: &mut Swept) -> Result<(), NetnsError> {
    // Daemons first: a process inside a namespace keeps it alive after its mount is gone.
    crate::frr::reap_prefix(prefix);
    for name in list_with_prefix(prefix) {
        delete_netns(&name)?;
        swept.namespaces.push(name);
    }
    match fs::remove_file(marker) {
        Ok(()) => swept.episodes.push(prefix.to_string()),
        // Another sweep (a second run starting at the same moment, or a second factory of
        // this process) took this marker first: nothing of it is left to sweep.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(marker)(e)),
    }
    Ok(())
}

/// Deletes this process's own episodes (their daemons, namespaces and markers) whatever they
/// are doing: for a process that must exit now (a SIGTERM it cannot wait out) and will not
/// run the episodes' own teardown. Other processes' episodes are left alone.
pub fn release_own() -> Result<Swept, NetnsError> {
    let mut swept = Swept::default();
    let me = Owner::current().map_err(io_err("/proc/self/stat"))?;
    let entries = match fs::read_dir(MARKER_DIR) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(swept),
        Err(e) => return Err(io_err(MARKER_DIR)(e)),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(prefix) = path.file_name().and_then(|n| n.to_str()).map(str::to_string) else { continue };
        let owned = fs::read_to_string(&path).ok().and_then(|t| Owner::parse(&t)).is_some_and(|o| o == me);
        if prefix.starts_with(PREFIX_STEM) && owned {
            remove_episode(&prefix, &path, &mut swept)?;
        }
    }
    Ok(swept)
}

/// The namespaces in /run/netns named `PREFIX-...`.
pub fn list_with_prefix(prefix: &str) -> Vec<String> {
    let stem = format!("{prefix}-");
    let Ok(entries) = fs::read_dir(NETNS_DIR) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&stem))
        .collect();
    names.sort();
    names
}

/// Makes /run/netns a shared mount point, as iproute2 does, so that namespaces mounted there
/// stay visible to processes in other mount namespaces (`ip netns exec` makes one per call).
fn prepare_netns_dir() -> Result<(), NetnsError> {
    static DONE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    if DONE.get().is_some() {
        return Ok(());
    }
    fs::create_dir_all(NETNS_DIR).map_err(io_err(NETNS_DIR))?;
    let dir = Path::new(NETNS_DIR);
    let shared = MsFlags::MS_SHARED | MsFlags::MS_REC;
    if nix::mount::mount(None::<&str>, dir, None::<&str>, shared, None::<&str>).is_err() {
        // Not a mount point yet: bind it onto itself first (EINVAL above), then share it.
        nix::mount::mount(Some(dir), dir, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)
            .map_err(|source| NetnsError::Sys { name: NETNS_DIR.into(), what: "bind-mount", source })?;
        nix::mount::mount(None::<&str>, dir, None::<&str>, shared, None::<&str>)
            .map_err(|source| NetnsError::Sys { name: NETNS_DIR.into(), what: "make shared", source })?;
    }
    let _ = DONE.set(());
    Ok(())
}

/// A namespace being made on its own thread: `/run/netns/NAME` exists, the mount may not yet.
struct PendingNetns<T> {
    name: String,
    path: PathBuf,
    thread: std::thread::JoinHandle<Result<T, NetnsError>>,
}

/// Starts making the namespace `name` (see [`Episode::create_with`]); [`PendingNetns::join`]
/// waits for it.
fn start_netns<T: Send + 'static>(
    name: &str,
    init: impl FnOnce() -> T + Send + 'static,
) -> Result<PendingNetns<T>, NetnsError> {
    prepare_netns_dir()?;
    let path = ns_path(name);
    match OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(file) => drop(file),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(NetnsError::Exists { name: name.to_string() });
        }
        Err(e) => return Err(io_err(&path)(e)),
    }
    let owned_name = name.to_string();
    let mount_point = path.clone();
    // A fresh thread, because unshare(CLONE_NEWNET) moves only the calling thread: the thread
    // ends with the closure, so no thread of the process is left in the new namespace.
    let thread = std::thread::Builder::new()
        .name(format!("netns-{name}"))
        .spawn(move || -> Result<T, NetnsError> {
            let sys = |what, source| NetnsError::Sys { name: owned_name.clone(), what, source };
            nix::sched::unshare(CloneFlags::CLONE_NEWNET).map_err(|e| sys("unshare", e))?;
            nix::mount::mount(
                Some("/proc/thread-self/ns/net"),
                &mount_point,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(|e| sys("bind-mount", e))?;
            Ok(init())
        })
        .map_err(|e| {
            let _ = fs::remove_file(&path);
            io_err(&path)(e)
        })?;
    Ok(PendingNetns { name: name.to_string(), path, thread })
}

impl<T> PendingNetns<T> {
    fn join(self) -> Result<T, NetnsError> {
        match self.thread.join() {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                let _ = fs::remove_file(&self.path);
                Err(e)
            }
            Err(_) => {
                let _ = delete_netns(&self.name);
                Err(NetnsError::Io { path: self.path, source: io::Error::other("namespace init panicked") })
            }
        }
    }
}

/// Unmounts and removes `/run/netns/NAME`. The kernel frees the namespace (and its veths)
/// once nothing holds it.
pub fn delete_netns(name: &str) -> Result<(), NetnsError> {
    let path = ns_path(name);
    match nix::mount::umount2(&path, MntFlags::MNT_DETACH) {
        Ok(()) | Err(nix::Error::EINVAL) | Err(nix::Error::ENOENT) => {}
        Err(source) => return Err(NetnsError::Sys { name: name.to_string(), what: "unmount", source }),
    }
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(&path)(e)),
    }
}

/// Runs `f` on a short-lived thread that has entered the namespace `name`.
pub fn in_netns<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, NetnsError> {
    let path = ns_path(name);
    let file = File::open(&path).map_err(io_err(&path))?;
    let owned_name = name.to_string();
    std::thread::Builder::new()
        .name(format!("in-{name}"))
        .spawn(move || {
            nix::sched::setns(&file, CloneFlags::CLONE_NEWNET).map_err(|source| NetnsError::Sys {
                name: owned_name,
                what: "setns",
                source,
            })?;
            Ok(f())
        })
        .map_err(io_err(&path))?
        .join()
        .map_err(|_| NetnsError::Io { path, source: io::Error::other("thread in namespace panicked") })?
}

/// Writes a sysctl of the namespace the calling thread is in (`net.ipv4.ip_forward` ->
/// `/proc/sys/net/ipv4/ip_forward`). /proc/sys/net follows the opener's network namespace.
pub fn write_sysctl(key: &str, value: &str) -> io::Result<()> {
    let path = Path::new("/proc/sys").join(key.replace('.', "/"));
    fs::write(path, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_lines_round_trip_and_reject_foreign_text() {
        let owner = Owner { pid: 42, start: 12345 };
        assert_eq!(Owner::parse(&owner.to_line()), Some(owner));
        assert_eq!(Owner::parse("something else pid=1 start=2"), None);
        assert_eq!(Owner::parse(""), None);
        assert_eq!(Owner::parse("netdojo pid=1"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_is_not() {
        let me = Owner::current().expect("own /proc stat");
        assert!(me.alive());
        assert!(!Owner { start: me.start + 1, ..me }.alive());
    }
}
