//! The filesystem layer: a root built from nothing, as bubblewrap does.
//!
//! A `tmpfs` becomes the new root; `/usr` and a short list of `/etc` entries are bound into it
//! read-only, `/dev` gets only null, zero, full, random and urandom, `/proc` is mounted afresh
//! (with a PID namespace, it lists only the jail's processes, so no `/proc/PID/ns/net` of anyone
//! else), `/sys` is read-only, `/tmp` and `/run` are small private `tmpfs`. `/proc/sys` is
//! read-only except `/proc/sys/net` (the node's own namespace's keys), and inside that the keys
//! the caller names as host-wide are read-only again. Then `pivot_root`, the old root is
//! detached, and the new root is made read-only. Everything of the host not named here
//! (`/tmp`, `/root`, `/home`, `/var`, `/etc/frr`, `/run/netns`, a checkout) is absent.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};

use crate::{Profile, SetupError, Spec};

/// Where the new root is assembled. Its own contents are hidden by the `tmpfs` mounted on it,
/// in the jail's private mount namespace only.
const BASE: &str = "/tmp";

/// The entries of `/etc` the allowed programs read: users and groups, name service switch,
/// protocol and service names (iproute2, iptables, nft), iproute2's tables, the alternatives
/// that make `iptables` iptables-nft, the dynamic linker's cache, time zone, Python's site
/// configuration (frr-reload.py).
pub const ETC: &[&str] = &[
    "alternatives",
    "ethertypes",
    "gai.conf",
    "group",
    "host.conf",
    "hosts",
    "iproute2",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "netconfig",
    "nsswitch.conf",
    "passwd",
    "protocols",
    "python3",
    "python3.11",
    "rpc",
    "services",
];

/// The PAM service vtysh asks for (`frr`): anyone who can run vtysh in the jail may.
const VTYSH_PAM: &str =
    "auth sufficient pam_permit.so\naccount sufficient pam_permit.so\nsession optional pam_permit.so\n";

/// Top-level names that are symbolic links into `/usr` on a merged-`/usr` system (and
/// directories elsewhere, then bound read-only).
const USR_LINKS: &[&str] = &["bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// The device nodes a command may open.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom"];

/// Files of `/proc` that act on the whole machine or show kernel memory: hidden behind
/// `/dev/null` (the ones that can be read) or made read-only.
const PROC_NULLED: &[&str] = &["kcore", "kmsg", "keys", "timer_list", "sched_debug"];
const PROC_READ_ONLY: &[&str] = &["sysrq-trigger", "bus", "fs", "irq"];

fn sys(step: impl Into<String>) -> impl FnOnce(nix::Error) -> SetupError {
    let step = step.into();
    move |e| SetupError::nix(step, e)
}

fn io(step: impl Into<String>) -> impl FnOnce(std::io::Error) -> SetupError {
    let step = step.into();
    move |e| SetupError::new(step, e)
}

const NONE: Option<&str> = None;

/// Binds `from` onto `to` (which must exist), recursively, then sets its flags: read-only
/// unless `writable`, and never set-uid or device files unless `devices`.
fn bind(from: &Path, to: &Path, writable: bool, devices: bool) -> Result<(), SetupError> {
    let what = format!("bind {} on {}", from.display(), to.display());
    mount(Some(from), to, NONE, MsFlags::MS_BIND | MsFlags::MS_REC, NONE).map_err(sys(&what))?;
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_NOSUID;
    if !writable {
        flags |= MsFlags::MS_RDONLY;
    }
    if !devices {
        flags |= MsFlags::MS_NODEV;
    }
    mount(NONE, to, NONE, flags, NONE).map_err(sys(format!("remount {}", to.display())))
}

fn tmpfs(to: &Path, options: &str) -> Result<(), SetupError> {
    mount(Some("tmpfs"), to, Some("tmpfs"), MsFlags::MS_NOSUID | MsFlags::MS_NODEV, Some(options))
        .map_err(sys(format!("tmpfs on {}", to.display())))
}

/// An empty file or directory at `to`, shaped like `like`, to mount on.
fn mount_point(like: &Path, to: &Path) -> Result<(), SetupError> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).map_err(io(format!("mkdir {}", parent.display())))?;
    }
    if like.is_dir() {
        fs::create_dir_all(to).map_err(io(format!("mkdir {}", to.display())))
    } else {
        fs::write(to, b"").map_err(io(format!("create {}", to.display())))
    }
}

/// `/oldroot/PATH` for a host path, once the root has been pivoted.
fn old(path: &Path) -> PathBuf {
    Path::new("/oldroot").join(path.strip_prefix("/").unwrap_or(path))
}

/// Builds the jail's root and enters it (see the module docs). The process must be alone in
/// a fresh mount namespace, and with a PID namespace, its first process.
pub fn build_root(spec: &Spec) -> Result<(), SetupError> {
    // The caller's directories as the host resolves them (`/var/run` is a link to `/run`),
    // while the host's root is still the root.
    let mut resolved = spec.clone();
    for dir in resolved.writable.iter_mut().chain(resolved.readable.iter_mut()) {
        *dir = fs::canonicalize(&*dir).map_err(io(format!("bind {}", dir.display())))?;
    }
    let spec = &resolved;
    // Nothing mounted from here on may reach the host's mount table.
    mount(NONE, "/", NONE, MsFlags::MS_REC | MsFlags::MS_PRIVATE, NONE).map_err(sys("make / private"))?;
    let base = Path::new(BASE);
    tmpfs(base, "mode=0755,size=1m")?;
    fs::create_dir(base.join("oldroot")).map_err(io("mkdir oldroot"))?;
    std::env::set_current_dir(base).map_err(io("chdir to the new root"))?;
    nix::unistd::pivot_root(".", "oldroot").map_err(sys("pivot_root"))?;
    std::env::set_current_dir("/").map_err(io("chdir /"))?;

    populate(spec)?;

    umount2("/oldroot", MntFlags::MNT_DETACH).map_err(sys("detach the old root"))?;
    fs::remove_dir("/oldroot").map_err(io("rmdir /oldroot"))?;
    mount(
        NONE,
        "/",
        NONE,
        MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        NONE,
    )
    .map_err(sys("remount / read-only"))
}

fn populate(spec: &Spec) -> Result<(), SetupError> {
    for dir in ["usr", "etc", "dev", "proc", "sys", "tmp", "run", "var"] {
        fs::create_dir(Path::new("/").join(dir)).map_err(io(format!("mkdir /{dir}")))?;
    }
    bind(&old(Path::new("/usr")), Path::new("/usr"), false, false)?;
    for name in USR_LINKS {
        let host = old(&Path::new("/").join(name));
        let here = Path::new("/").join(name);
        match fs::read_link(&host) {
            Ok(target) => symlink(&target, &here).map_err(io(format!("symlink /{name}")))?,
            Err(_) if host.is_dir() => {
                mount_point(&host, &here)?;
                bind(&host, &here, false, false)?;
            }
            Err(_) => {}
        }
    }
    for name in ETC {
        let host = old(&Path::new("/etc").join(name));
        let here = Path::new("/etc").join(name);
        if let Ok(target) = fs::read_link(&host) {
            symlink(&target, &here).map_err(io(format!("symlink /etc/{name}")))?;
        } else if host.exists() {
            mount_point(&host, &here)?;
            bind(&host, &here, false, false)?;
        }
    }
    symlink("/run", "/var/run").map_err(io("symlink /var/run"))?;
    if spec.profile == Profile::Vtysh {
        // vtysh asks PAM (service `frr`) whether its user may run it; Debian's stack would
        // read /etc/shadow for that. The jail's answer is its own, and /etc/shadow stays out.
        fs::create_dir("/etc/pam.d").map_err(io("mkdir /etc/pam.d"))?;
        fs::write("/etc/pam.d/frr", VTYSH_PAM).map_err(io("write /etc/pam.d/frr"))?;
    }

    tmpfs(Path::new("/dev"), "mode=0755,size=64k")?;
    for dev in DEVICES {
        let here = Path::new("/dev").join(dev);
        mount_point(Path::new("/nonexistent"), &here)?;
        bind(&old(&Path::new("/dev").join(dev)), &here, true, true)?;
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        symlink(target, Path::new("/dev").join(name)).map_err(io(format!("symlink /dev/{name}")))?;
    }

    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        NONE,
    )
    .map_err(sys("mount /proc"))?;
    proc_sys(spec)?;
    for name in PROC_NULLED {
        let here = Path::new("/proc").join(name);
        if here.exists() {
            bind(Path::new("/dev/null"), &here, false, true)?;
        }
    }
    for name in PROC_READ_ONLY {
        let here = Path::new("/proc").join(name);
        if here.exists() {
            bind(&here, &here, false, false)?;
        }
    }
    mount(
        Some("sysfs"),
        "/sys",
        Some("sysfs"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        NONE,
    )
    .map_err(sys("mount /sys"))?;

    tmpfs(Path::new("/tmp"), "mode=1777,size=16m")?;
    tmpfs(Path::new("/run"), "mode=0755,size=1m")?;
    for (dirs, writable) in [(&spec.writable, true), (&spec.readable, false)] {
        for dir in dirs {
            let host = old(dir);
            mount_point(&host, dir)?;
            bind(&host, dir, writable, false)?;
        }
    }
    Ok(())
}

/// `/proc/sys` read-only, its `net` subtree writable for the profiles that configure the node
/// (the keys there are the node's own namespace's), and the host-wide keys the caller found
/// inside it read-only again.
fn proc_sys(spec: &Spec) -> Result<(), SetupError> {
    let sys_dir = Path::new("/proc/sys");
    bind(sys_dir, sys_dir, false, false)?;
    if matches!(spec.profile, Profile::Vtysh | Profile::Code) {
        return Ok(());
    }
    let net = sys_dir.join("net");
    bind(&net, &net, true, false)?;
    for key in &spec.host_wide_sysctls {
        let rel = Path::new(key);
        // Only plain relative paths inside net/: nothing the caller passes may climb out.
        let plain = rel.components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain || !rel.starts_with("net") {
            return Err(SetupError::new(
                format!("host-wide sysctl `{key}`"),
                std::io::Error::from(std::io::ErrorKind::InvalidInput),
            ));
        }
        let file = sys_dir.join(rel);
        if file.exists() {
            bind(&file, &file, false, false)?;
        }
    }
    Ok(())
}
