//! What the host looks like, as far as an escaped agent command could change it: for the
//! containment tests of every crate that runs agent input (routing exec, NetConfBench tools,
//! MCP devices). [`Snapshot::take`] reads the root namespace (links, addresses, routes of every
//! table, rules, nftables, iptables, qdiscs, every readable sysctl), the host files an agent
//! must not reach (/tmp, /etc/frr, /root), the namespaces in /run/netns that are not netdojo
//! episodes', and the process table; [`Snapshot::diff`] names what changed.
//!
//! It is for tests (it spawns `ip`, `nft`... in the root namespace, as the trusted harness),
//! and it reads; it never writes. What changes by itself is left out, each with its reason:
//! [`NOISY_SYSCTLS`], [`IGNORED_FILES`].
//!
//! [`namespace_state`] reads one namespace the same way (links, addresses, routes, rules,
//! nftables, iptables, qdiscs), for a victim episode's nodes.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::UNIX_EPOCH;

use crate::netns;

/// Sysctls whose value changes on its own (found by snapshotting an idle host twice, and a
/// host where other netdojo runs build and tear down networks): counters, random values, and
/// what namespaces created by concurrent runs move. Matched as a prefix of the key
/// (`kernel/random/` covers the directory).
pub const NOISY_SYSCTLS: &[&str] = &[
    // Random: a new UUID on every read, and the entropy estimate.
    "kernel/random/",
    // Counters of the kernel's caches and tables.
    "fs/dentry-state",
    "fs/inode-state",
    "fs/inode-nr",
    "fs/file-nr",
    "fs/aio-nr",
    "fs/quota/",
    "kernel/ns_last_pid",
    "kernel/pty/nr",
    "kernel/tainted",
    "net/netfilter/nf_conntrack_count",
    "net/ipv4/tcp_mem",
    "net/ipv4/udp_mem",
    // Grow with every network namespace anyone creates (concurrent runs, other engineers).
    "user/max_",
    "fs/mqueue/",
    // Read-only views of the scheduler and memory that move with load.
    "vm/stat_refresh",
    "kernel/sched_domain/",
    "kernel/unprivileged_bpf_disabled",
];

/// Entries of the watched trees left out, each a `(tree, name prefix, why)`. A name is the path
/// relative to the tree; a prefix that ends in `/` is a directory and all below it.
pub const IGNORED_FILES: &[(&str, &str, &str)] = &[
    ("/tmp", ".tmp", "tempfile's directories and files (the MCP tests' run directories)"),
    ("/tmp", "tmp.", "mktemp's default names (shells and scripts on a developer machine)"),
    ("/tmp", "rustc", "rustc's temporary directories while a build runs beside the tests"),
    ("/tmp", "cc", "the C compiler's temporary files (build scripts of a concurrent cargo build)"),
    ("/tmp", "bash_tool_", "the development tooling's own scratch directories (not netdojo)"),
    ("/tmp", "bash_jobs.", "the development tooling's job outputs (not netdojo)"),
    ("/tmp", "suite-", "this suite's own build logs on a developer machine"),
    ("/root", ".cargo/", "cargo's registry and git caches (a concurrent build downloads)"),
    ("/root", ".rustup/", "the toolchain"),
    ("/root", ".cache/", "caches of tools (pip, cargo-nextest...)"),
    ("/root", ".npm/", "the development tooling's npm cache"),
    ("/root", ".claude", "the development tooling's own state"),
    ("/root", ".pyenv/", "the Python toolchain"),
    ("/root", ".python_history", "interactive Python on a developer machine"),
    ("/root", ".bash_history", "interactive shells on a developer machine"),
    ("/root", ".lesshst", "interactive less on a developer machine"),
    ("/root", ".viminfo", "interactive vim on a developer machine"),
];

/// Processes of the machine, not of netdojo, that show up as new orphans in the root namespace
/// while the suite runs: (command line prefix, why).
pub const IGNORED_PROCESSES: &[(&str, &str)] =
    &[("/process_api", "the development machine's own command runner (each shell of the tooling)")];

/// A colon-separated list of paths (`/tmp/build.log`, `/run/netns/jailtest`) to leave out, each
/// a prefix: what other work on a shared development machine changes while the suite runs.
/// Unset in CI, where nothing else runs.
pub const IGNORE_ENV: &str = "NETDOJO_HOSTCHECK_IGNORE";

/// `NETDOJO_HOSTCHECK_SHARED=1`: a development machine shared with other work, whose files
/// come and go in /tmp under any name. There only the names an attack would leave are judged
/// in /tmp: the corpus's (`ndj*`) and files not owned by root (FRR's daemons run as `frr`).
/// Unset in CI, where every entry of /tmp counts.
pub const SHARED_ENV: &str = "NETDOJO_HOSTCHECK_SHARED";

fn shared_machine() -> bool {
    std::env::var(SHARED_ENV).is_ok_and(|v| v == "1")
}

fn ignored_by_env(path: &str) -> bool {
    std::env::var(IGNORE_ENV).is_ok_and(|v| v.split(':').any(|p| !p.is_empty() && path.starts_with(p)))
}

/// Host files outside the trees an escaped command could write (digests).
pub const HOST_FILES: &[&str] = &[
    "/etc/hosts",
    "/etc/hostname",
    "/etc/passwd",
    "/etc/shadow",
    "/etc/sysctl.conf",
    "/etc/ethers",
    "/etc/nftables.conf",
    "/etc/resolv.conf",
];

/// The file trees watched.
pub const TREES: &[&str] = &["/tmp", "/etc/frr", "/root"];

/// The working directory of agent commands (`exec` runs them in `/`): a relative file name
/// (`ip monitor f NAME`) lands here. Its entries are watched, not below them.
pub const WORKING_DIR: &str = "/";

/// How deep a tree is walked: deep enough for a file an agent planted below a new directory.
const TREE_DEPTH: usize = 4;
/// At most this many entries a tree (an output flood in /tmp would otherwise make the
/// snapshot itself slow); the count is kept, so a flood still shows.
const TREE_ENTRIES: usize = 5000;

/// One process of the process table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Process {
    ppid: i32,
    cmdline: String,
    /// `net:[4026531840]`
    netns: String,
}

/// The host as far as an agent's command could change it.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    entries: BTreeMap<String, String>,
    /// (pid, start time in clock ticks) → the process.
    processes: BTreeMap<(i32, u64), Process>,
    /// The network namespaces (`net:[INODE]`) whose processes are watched.
    watched: BTreeSet<String>,
    host_netns: String,
}

/// One difference between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// What changed: `ip route show table all`, `/proc/sys/net/core/somaxconn`, `/tmp/x.log`,
    /// `process 1234`.
    pub what: String,
    /// The lines before and after that differ (removed `-`, added `+`), or a one-line note.
    pub detail: String,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.detail)
    }
}

impl Snapshot {
    /// Reads the host. `watch` names network namespaces (episodes under test) whose new
    /// processes count as escapes, besides new orphans in the root namespace.
    pub fn take(watch: &[String]) -> Self {
        let mut entries = BTreeMap::new();
        for (program, args) in HOST_READS {
            entries.insert(format!("{program} {}", args.join(" ")), normalize(&host(program, args)));
        }
        entries.insert(netns::NETNS_DIR.to_string(), foreign_namespaces().join(" "));
        sysctls(Path::new("/proc/sys"), "", &mut entries);
        for tree in TREES {
            files(Path::new(tree), tree, "", 0, &mut entries);
        }
        files(Path::new(WORKING_DIR), "", "", TREE_DEPTH - 1, &mut entries);
        for path in HOST_FILES {
            let value = match std::fs::read(path) {
                Ok(bytes) => format!("{} bytes, hash {}", bytes.len(), digest(&bytes)),
                Err(e) => format!("unreadable: {}", e.kind()),
            };
            entries.insert(path.to_string(), value);
        }
        let watched = watch
            .iter()
            .filter_map(|ns| std::fs::metadata(netns::ns_path(ns)).ok())
            .map(|m| format!("net:[{}]", m.ino()))
            .collect();
        let host_netns = read_link("/proc/1/ns/net");
        Self { entries, processes: processes(), watched, host_netns }
    }

    /// What changed from `self` to `later`: every entry that differs, appears or disappears,
    /// and every process that is new in `later` (not in `self`) and is still running: one
    /// descended from the caller, one in a watched namespace, or an orphan (parent 1) in the
    /// root namespace. Processes of other programs on the machine are not judged.
    pub fn diff(&self, later: &Snapshot) -> Vec<Change> {
        let mut changes = Vec::new();
        let keys: BTreeSet<&String> = self.entries.keys().chain(later.entries.keys()).collect();
        for key in keys {
            let before = self.entries.get(key);
            let after = later.entries.get(key);
            if before == after {
                continue;
            }
            let detail = match (before, after) {
                (Some(b), Some(a)) => line_diff(b, a),
                (None, Some(a)) => format!("appeared: {}", first_line(a)),
                (Some(b), None) => format!("disappeared (was {})", first_line(b)),
                (None, None) => continue,
            };
            changes.push(Change { what: key.clone(), detail });
        }
        for (&(pid, start), p) in &later.processes {
            let new = !self.processes.contains_key(&(pid, start));
            let watched = self.watched.contains(&p.netns);
            // A process that ended between the reads has no command line or namespace left.
            let orphan = p.ppid == 1
                && p.netns == self.host_netns
                && !p.cmdline.is_empty()
                && !IGNORED_PROCESSES.iter().any(|(prefix, _)| p.cmdline.starts_with(prefix));
            if new && (watched || orphan) {
                let why =
                    if watched { "in an episode's namespace" } else { "an orphan in the root namespace" };
                changes.push(Change {
                    what: format!("process {pid}"),
                    detail: format!("new, {why}: {} (parent {}, {})", p.cmdline, p.ppid, p.netns),
                });
            }
        }
        changes
    }

    /// The entries, for a test that wants one value (`/proc/sys/net/core/somaxconn`).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }
}

/// The state of one network namespace, as text: links, addresses, routes of every table, rules
/// (v4 and v6), nftables, iptables, qdiscs. Read by the trusted harness (`ip -n`, `ip netns
/// exec`), for a victim episode's nodes. Lifetimes and counters are blanked.
pub fn namespace_state(ns: &str) -> String {
    let mut out = String::new();
    // The host's own reads that take `-n`: links, addresses, routes, rules, qdiscs.
    let reads = HOST_READS.iter().filter(|(program, _)| matches!(*program, "ip" | "tc"));
    for (program, args) in reads {
        let mut full = vec!["-n", ns];
        full.extend_from_slice(args);
        out.push_str(&format!("## {program} {}\n{}\n", args.join(" "), normalize(&host(program, &full))));
    }
    for (program, args) in [("nft", &["list", "ruleset"][..]), ("iptables-save", &[][..])] {
        let mut full = vec!["netns", "exec", ns, program];
        full.extend_from_slice(args);
        out.push_str(&format!("## {program} {}\n{}\n", args.join(" "), normalize(&host("ip", &full))));
    }
    out
}

/// What the root namespace's tools print, read as the host.
const HOST_READS: &[(&str, &[&str])] = &[
    ("ip", &["-o", "link"]),
    ("ip", &["-o", "addr"]),
    ("ip", &["route", "show", "table", "all"]),
    ("ip", &["-6", "route", "show", "table", "all"]),
    ("ip", &["rule"]),
    ("ip", &["-6", "rule"]),
    ("tc", &["qdisc", "show"]),
    ("hostname", &[]),
    ("nft", &["list", "ruleset"]),
    ("iptables-save", &[]),
    ("ip6tables-save", &[]),
];

/// Runs a program of the host in the caller's namespace (the root one, for a test): its exit
/// status and output, or why it could not run.
pub fn host(program: &str, args: &[&str]) -> String {
    let found = crate::exec::BIN_DIRS.iter().map(|dir| Path::new(dir).join(program)).find(|p| p.exists());
    let Some(path) = found else {
        return format!("{program}: not installed");
    };
    match std::process::Command::new(&path)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(o) => format!(
            "exit {:?}\n{}{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => format!("{program}: {e}"),
    }
}

/// Drops what changes by itself: address lifetimes, route expiry, packet counters, the
/// timestamps of iptables-save, the link-netnsid of veths whose peers are in netdojo episodes'
/// namespaces (none in a clean root namespace), and lines naming netdojo's namespaces
/// (concurrent runs).
pub fn normalize(text: &str) -> String {
    let mut lines = Vec::new();
    for line in text.lines() {
        // iproute2 prints this for a veth whose peer's namespace id is being reassigned while
        // another namespace on the machine goes away (a concurrent teardown); it is not state.
        if line.starts_with('#')
            || line.starts_with(netns::PREFIX_STEM)
            || line.starts_with("Error: Peer netns reference is invalid")
        {
            continue;
        }
        let mut words = Vec::new();
        let mut blank_next = false;
        for word in line.split_whitespace() {
            if blank_next {
                words.push("*");
                blank_next = false;
                continue;
            }
            blank_next = matches!(word, "valid_lft" | "preferred_lft" | "expires" | "packets" | "bytes");
            // A link's operational state moves by itself while a network settles (a bridge goes
            // from UNKNOWN to UP); a link set down loses its UP flag, which is kept.
            if matches!(word, "UNKNOWN" | "UP" | "DOWN" | "LOWERLAYERDOWN" | "DORMANT")
                && words.last() == Some(&"state")
            {
                words.push("*");
                continue;
            }
            // iptables-save chain counters: `:INPUT ACCEPT [12:3456]`.
            if word.starts_with('[') && word.ends_with(']') && word.contains(':') {
                words.push("[*]");
            } else {
                words.push(word);
            }
        }
        lines.push(words.join(" "));
    }
    lines.join("\n")
}

/// The names in /run/netns that are not a live netdojo episode's (whose prefix has a marker):
/// a namespace an agent added, or one that vanished.
fn foreign_namespaces() -> Vec<String> {
    let markers: BTreeSet<String> = std::fs::read_dir(netns::MARKER_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    let mut names: Vec<String> = std::fs::read_dir(netns::NETNS_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| !ignored_by_env(&format!("{}/{name}", netns::NETNS_DIR)))
        .filter(|name| {
            let prefix = name.split('-').next().unwrap_or_default();
            // A marker is written before its namespaces and removed after them.
            !(is_episode_prefix(prefix) && markers.contains(prefix))
        })
        .collect();
    names.sort();
    names
}

/// `ndj<hex>x<hex>`: the shape of an episode prefix.
fn is_episode_prefix(prefix: &str) -> bool {
    let Some(rest) = prefix.strip_prefix(netns::PREFIX_STEM) else { return false };
    let Some((pid, n)) = rest.split_once('x') else { return false };
    !pid.is_empty()
        && !n.is_empty()
        && pid.chars().all(|c| c.is_ascii_hexdigit())
        && n.chars().all(|c| c.is_ascii_hexdigit())
}

fn digest(bytes: &[u8]) -> String {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// Every readable file under /proc/sys, by value (short ones) or by hash.
fn sysctls(dir: &Path, key: &str, out: &mut BTreeMap<String, String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let sub = if key.is_empty() { name } else { format!("{key}/{name}") };
        if NOISY_SYSCTLS.iter().any(|n| sub.starts_with(n)) {
            continue;
        }
        // Per-interface keys of the root namespace's links: a link an agent added shows in
        // `ip -o link`; concurrent runs' links never reach the root namespace.
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            sysctls(&path, &sub, out);
        } else if let Ok(meta) = entry.metadata()
            && meta.mode() & 0o444 != 0
        {
            match std::fs::read(&path) {
                Ok(bytes) if bytes.len() <= 200 => {
                    out.insert(
                        format!("/proc/sys/{sub}"),
                        String::from_utf8_lossy(&bytes).trim().to_string(),
                    );
                }
                Ok(bytes) => {
                    out.insert(
                        format!("/proc/sys/{sub}"),
                        format!("{} bytes, hash {}", bytes.len(), digest(&bytes)),
                    );
                }
                // Write-only or refused: nothing to compare.
                Err(_) => {}
            }
        }
    }
}

/// A tree's entries: names, sizes, modification times and hashes of small files (directory
/// times are left out: they move with any entry, and entries are compared one by one).
fn files(dir: &Path, tree: &str, rel: &str, depth: usize, out: &mut BTreeMap<String, String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    let mut kept = 0usize;
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let sub = if rel.is_empty() { name } else { format!("{rel}/{name}") };
        let ignored = IGNORED_FILES.iter().any(|(t, prefix, _)| {
            *t == tree && (sub.starts_with(prefix) || prefix.strip_suffix('/') == Some(sub.as_str()))
        }) || ignored_by_env(&format!("{tree}/{sub}"));
        if ignored {
            continue;
        }
        kept += 1;
        if kept > TREE_ENTRIES {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if tree == "/tmp" && shared_machine() && !sub.starts_with("ndj") && meta.uid() == 0 {
            continue;
        }
        let key = format!("{tree}/{sub}");
        if meta.is_dir() {
            out.insert(key, format!("directory, mode {:o}", meta.mode() & 0o7777));
            if depth + 1 < TREE_DEPTH {
                files(&path, tree, &sub, depth + 1, out);
            }
        } else {
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            out.insert(
                key,
                format!("{} bytes, mode {:o}, modified {mtime}", meta.len(), meta.mode() & 0o7777),
            );
        }
    }
    if kept > TREE_ENTRIES {
        out.insert(format!("{tree}/{rel} (entries)"), kept.to_string());
    }
}

fn read_link(path: &str) -> String {
    std::fs::read_link(path).map(|p| p.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The process table: every process with its parent, start time, command line, network
/// namespace.
fn processes() -> BTreeMap<(i32, u64), Process> {
    let me = std::process::id() as i32;
    let mut raw: BTreeMap<i32, (i32, u64, String, String)> = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // `PID (COMM) STATE PPID ...`: the command may hold spaces and parentheses.
        let Some(after) = stat.rfind(')').and_then(|i| stat.get(i + 1..)) else { continue };
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ppid = fields.get(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let start = fields.get(19).and_then(|s| s.parse().ok()).unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " ").trim().to_string())
            .unwrap_or_default();
        let netns = read_link(&format!("/proc/{pid}/ns/net"));
        raw.insert(pid, (ppid, start, cmdline, netns));
    }
    raw.iter()
        .filter(|(pid, _)| **pid != me)
        .map(|(&pid, (ppid, start, cmdline, netns))| {
            ((pid, *start), Process { ppid: *ppid, cmdline: cmdline.clone(), netns: netns.clone() })
        })
        .collect()
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// The lines only in `before` (`-`) and only in `after` (`+`), at most 12.
fn line_diff(before: &str, after: &str) -> String {
    let old: BTreeSet<&str> = before.lines().collect();
    let new: BTreeSet<&str> = after.lines().collect();
    let mut out: Vec<String> = old.difference(&new).map(|l| format!("-{l}")).collect();
    out.extend(new.difference(&old).map(|l| format!("+{l}")));
    if out.is_empty() {
        return format!("{before:?} -> {after:?}");
    }
    let more = out.len().saturating_sub(12);
    out.truncate(12);
    if more > 0 {
        out.push(format!("(+{more} more)"));
    }
    out.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_names_the_lines_that_changed() {
        assert_eq!(line_diff("a\nb\nc", "a\nc\nd"), "-b | +d");
        assert_eq!(line_diff("1", "2"), "-1 | +2");
        assert!(is_episode_prefix("ndj1a2bx0") && !is_episode_prefix("ndjevil") && !is_episode_prefix("x"));
        assert_eq!(
            normalize("inet 10.0.0.1/24 valid_lft 100 preferred_lft 50"),
            "inet 10.0.0.1/24 valid_lft * preferred_lft *"
        );
    }
}
