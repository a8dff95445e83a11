//! Which `net.*` sysctls belong to a network namespace, asked of the kernel rather than read
//! from the name: `net.netfilter.nf_hooks_lwtunnel` is shown in every namespace but is one
//! value for the whole machine, so "net.* is per namespace" is not true.
//!
//! [`probe`] runs once per process. In a scratch network namespace it lists every writable file
//! under `/proc/sys/net`, then for each one:
//! - if its value there differs from the root namespace's, it is per namespace (nothing written);
//! - else it writes a different value in the scratch namespace and reads the root namespace's
//!   again: unchanged means per namespace; changed means host-wide, and the old value is written
//!   back at once (the host saw the other value for a few microseconds);
//! - a value it cannot change (not a number, write-only, refused) stays unprobed.
//!
//! Keys the kernel makes one-way ([`ONE_WAY`]) are never written by the probe, because the
//! write could not be undone: they count as host-wide. An agent may write only keys proven per
//! namespace ([`Sysctls::writable`]); the jail binds every other writable key read-only
//! ([`Sysctls::read_only_paths`]), so a key the parser lets through still changes nothing.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::mpsc;

const PROC_SYS: &str = "/proc/sys";

/// Keys that can be set but never unset, once set anywhere (`nf_hooks_lwtunnel` answers EBUSY
/// to a 0 after a 1, until reboot): the probe would change the host for good by testing them.
pub const ONE_WAY: &[&str] = &["net/netfilter/nf_hooks_lwtunnel"];

/// The `net/` keys of this kernel, sorted by who owns them. Paths are relative to `/proc/sys`
/// (`net/ipv4/ip_forward`), with per-interface directories as the scratch namespace shows them
/// (`lo`, `all`, `default`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sysctls {
    pub per_namespace: BTreeSet<String>,
    pub host_wide: BTreeSet<String>,
    pub unprobed: BTreeSet<String>,
}

/// The probe's result for this process (see the module docs), run on first use.
pub fn probe() -> Result<&'static Sysctls, String> {
    static PROBED: OnceLock<Result<Sysctls, String>> = OnceLock::new();
    PROBED
        .get_or_init(|| {
            run_probe().map_err(|e| format!("probing which net.* sysctls are per namespace: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The jail of a program in node `ns_name` under `profile`, with every key not proven per
/// namespace read-only ([`Sysctls::read_only_paths`]): what every caller of the jail starts from.
pub fn jail_spec(profile: netdojo_jail::Profile, ns_name: &str) -> Result<netdojo_jail::Spec, String> {
    let known = probe()?;
    let mut spec = netdojo_jail::Spec::new(profile, crate::paths::ns_path(ns_name));
    spec.host_wide_sysctls = known.read_only_paths().map(str::to_string).collect();
    Ok(spec)
}

/// The path under `/proc/sys` of a key as sysctl(8) takes it: dots separate words unless the
/// key has a slash, and then slashes do (`net/ipv4/conf/eth0.100/rp_filter`).
pub fn key_path(key: &str) -> Vec<String> {
    if key.contains('/') {
        key.split('/').filter(|w| !w.is_empty()).map(str::to_string).collect()
    } else {
        key.split('.').map(str::to_string).collect()
    }
}

impl Sysctls {
    /// Whether an agent may write `key` (sysctl's spelling): a key the probe proved per
    /// namespace. Per-interface keys (`net.ipv4.conf.IFACE.*`, `net.ipv6.conf.IFACE.*`, their
    /// `neigh` and `net.mpls.conf` siblings) are judged by the `default` interface's key, since
    /// the interface is the node's own.
    pub fn writable(&self, key: &str) -> bool {
        let mut words = key_path(key);
        let per_interface = matches!(
            words.iter().map(String::as_str).take(3).collect::<Vec<_>>().as_slice(),
            ["net", "ipv4" | "ipv6", "conf" | "neigh"] | ["net", "mpls", "conf"]
        );
        if per_interface && words.len() > 4 {
            words[3] = "default".to_string();
        }
        if words.iter().any(|w| w == "." || w == ".." || w.is_empty()) {
            return false;
        }
        self.per_namespace.contains(&words.join("/"))
    }

    /// The keys to bind read-only in a jail: every writable key not proven per namespace.
    pub fn read_only_paths(&self) -> impl Iterator<Item = &str> {
        self.host_wide.iter().chain(&self.unprobed).map(String::as_str)
    }
}

/// One question from the root-namespace side to the scratch side.
enum Ask {
    Read(String),
    Write(String, String),
}

fn run_probe() -> io::Result<Sysctls> {
    let (ask_tx, ask_rx) = mpsc::channel::<Ask>();
    let (answer_tx, answer_rx) = mpsc::channel::<io::Result<String>>();
    let (list_tx, list_rx) = mpsc::channel::<io::Result<Vec<String>>>();
    // The scratch side: a thread in a fresh network namespace (unshare affects only this
    // thread), which is freed when the thread ends.
    let scratch = std::thread::spawn(move || {
        if let Err(e) = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET) {
            let _ = list_tx.send(Err(io::Error::from_raw_os_error(e as i32)));
            return;
        }
        let _ = list_tx.send(writable_files(Path::new(PROC_SYS), "net"));
        for ask in ask_rx {
            let answer = match ask {
                Ask::Read(rel) => fs::read_to_string(Path::new(PROC_SYS).join(rel)),
                Ask::Write(rel, value) => fs::write(Path::new(PROC_SYS).join(&rel), &value)
                    .and_then(|()| fs::read_to_string(Path::new(PROC_SYS).join(rel))),
            };
            if answer_tx.send(answer).is_err() {
                return;
            }
        }
    });
    let files = list_rx.recv().map_err(|_| io::Error::other("the scratch namespace thread ended"))??;
    let ask = |q: Ask| -> io::Result<String> {
        ask_tx.send(q).map_err(|_| io::Error::other("the scratch namespace thread ended"))?;
        answer_rx.recv().map_err(|_| io::Error::other("the scratch namespace thread ended"))?
    };
    let root = |rel: &str| fs::read_to_string(Path::new(PROC_SYS).join(rel));
    let mut out = Sysctls::default();
    for rel in files {
        if ONE_WAY.contains(&rel.as_str()) {
            out.host_wide.insert(rel);
            continue;
        }
        let (Ok(in_scratch), Ok(in_root)) = (ask(Ask::Read(rel.clone())), root(&rel)) else {
            out.unprobed.insert(rel);
            continue;
        };
        if in_scratch.trim() != in_root.trim() {
            out.per_namespace.insert(rel);
            continue;
        }
        let mut verdict = None;
        for value in other_values(&in_scratch) {
            let Ok(read_back) = ask(Ask::Write(rel.clone(), value.clone())) else { continue };
            if read_back.trim() == in_scratch.trim() {
                continue;
            }
            let host_now = root(&rel).unwrap_or_default();
            if host_now.trim() == in_root.trim() {
                // Put the scratch value back too, so that the next key starts from defaults.
                let _ = ask(Ask::Write(rel.clone(), in_scratch.trim().to_string()));
                verdict = Some(true);
            } else {
                // Host-wide: the scratch write was the host's; undo it now.
                let _ = ask(Ask::Write(rel.clone(), in_root.trim().to_string()));
                verdict = Some(false);
            }
            break;
        }
        match verdict {
            Some(true) => out.per_namespace.insert(rel),
            Some(false) => out.host_wide.insert(rel),
            None => out.unprobed.insert(rel),
        };
    }
    drop(ask_tx);
    let _ = scratch.join();
    Ok(out)
}

/// Values to try instead of `current`: its first number one up, one down, then 0 and 1; the
/// other numbers of a vector (`tcp_rmem`) unchanged. Empty when it is not numbers.
fn other_values(current: &str) -> Vec<String> {
    let words: Vec<&str> = current.split_whitespace().collect();
    let numbers: Option<Vec<i64>> = words.iter().map(|w| w.parse::<i64>().ok()).collect();
    let Some(numbers) = numbers.filter(|n| !n.is_empty()) else { return Vec::new() };
    let first = numbers[0];
    let mut tries = Vec::new();
    for candidate in [first.saturating_add(1), first.saturating_sub(1), 0, 1] {
        if candidate != first && !tries.contains(&candidate) {
            tries.push(candidate);
        }
    }
    tries
        .into_iter()
        .map(|c| {
            let mut v = numbers.clone();
            v[0] = c;
            v.iter().map(i64::to_string).collect::<Vec<_>>().join(" ")
        })
        .collect()
}

/// The files under `dir/rel` with a write bit, as paths relative to `dir`.
fn writable_files(dir: &Path, rel: &str) -> io::Result<Vec<String>> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = vec![PathBuf::from(rel)];
    while let Some(sub) = stack.pop() {
        for entry in fs::read_dir(dir.join(&sub))? {
            let entry = entry?;
            let path = sub.join(entry.file_name());
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(path);
            } else if meta.permissions().mode() & 0o222 != 0 {
                out.push(path.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_values_change_the_first_number_only() {
        assert_eq!(other_values("0\n"), ["1", "-1"]);
        assert_eq!(other_values("1"), ["2", "0"]);
        assert_eq!(
            other_values("4096\t131072\t6291456\n"),
            ["4097 131072 6291456", "4095 131072 6291456", "0 131072 6291456", "1 131072 6291456"]
        );
        assert!(other_values("cubic").is_empty());
        assert!(other_values("").is_empty());
    }

    #[test]
    fn keys_are_spelt_as_sysctl_takes_them() {
        let s = Sysctls {
            per_namespace: [
                "net/ipv4/ip_forward",
                "net/ipv4/conf/default/rp_filter",
                "net/ipv6/conf/default/forwarding",
            ]
            .map(String::from)
            .into(),
            host_wide: ["net/netfilter/nf_hooks_lwtunnel".to_string()].into(),
            unprobed: BTreeSet::new(),
        };
        assert!(s.writable("net.ipv4.ip_forward"));
        assert!(s.writable("net/ipv4/ip_forward"));
        assert!(s.writable("net.ipv4.conf.r0-eth1.rp_filter"));
        assert!(s.writable("net/ipv4/conf/eth0.100/rp_filter"));
        assert!(s.writable("net.ipv6.conf.all.forwarding"));
        assert!(!s.writable("net.netfilter.nf_hooks_lwtunnel"));
        assert!(!s.writable("net.ipv4.conf.../rp_filter"));
        assert!(!s.writable("net/ipv4/conf/../../../kernel/hostname"));
        assert!(!s.writable("kernel.hostname"));
    }
}
