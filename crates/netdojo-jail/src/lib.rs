//! netdojo-jail: the kernel's wall around every command an agent sends and every FRR daemon.
//!
//! The parser in `netdojo-linux::exec` refuses what it recognises and explains why; this crate
//! makes what it misses reach nothing. A jailed process:
//!
//! - is in one node's network namespace (and UTS namespace), entered by path before anything
//!   else, and can reach no other: `/run/netns` is not in its filesystem, its `/proc` is that of
//!   a PID namespace of its own ([`Profile::pid_namespace`]), no file descriptor of its
//!   parent's survives, and `setns`/`unshare` are refused by seccomp;
//! - sees a root filesystem built from nothing ([`mounts`]): `/usr` and a short list of `/etc`
//!   read-only, a fresh `/dev` with the harmless devices, `/sys` read-only, `/proc/sys`
//!   read-only but for the node's own `net.*` keys, and small private `tmpfs` for `/tmp` and
//!   `/run`; the host's `/tmp`, `/root`, `/home`, `/etc/frr`, `/var` are absent;
//! - keeps only the capabilities its profile needs ([`capabilities`]), under `no_new_privs`;
//! - runs under a seccomp filter ([`seccomp`]) that refuses mounting, namespaces, BPF,
//!   ptrace, keyrings, modules, reboot and the like, and (for agent commands) creating processes;
//! - has rlimits on CPU time, file size, open files and address space ([`limits`]).
//!
//! It is a binary (`netdojo-jail`), not a library call in a forked child, so that the unsafe
//! part of forking a threaded program never exists: the caller spawns the jail like any program
//! with [`Spec::args`], and the jail sets up and `exec`s. The binary is found by [`binary`].
//!
//! The order of the layers is in [`contain`], one short function, as in nsjail's `contain.cc`.

pub mod capabilities;
pub mod limits;
pub mod mounts;
pub mod run;
pub mod seccomp;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The exit status with which the jail reports that it could not set itself up (the program
/// never ran). Its message is the last line of stderr, starting with [`SETUP_FAILED`].
pub const SETUP_EXIT: i32 = 125;

/// How the jail's own setup failures begin on stderr.
pub const SETUP_FAILED: &str = "netdojo-jail: setup failed:";

/// The environment variable that names the jail binary, ahead of the places [`binary`] looks.
pub const BINARY_ENV: &str = "NETDOJO_JAIL";

/// What a jailed program is, which decides what it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// One command of an agent (`ip`, `nft`, `tc`, `sysctl` ...): network administration in
    /// its node, no new processes, no files but a private `/tmp`.
    Agent,
    /// vtysh (and FRR's frr-reload.py) talking to one router's daemons: may start `ping` and
    /// `traceroute` (as vtysh does), sees the router's sockets and run directory read-only.
    Vtysh,
    /// An FRR daemon of one router: writes only its run directories, keeps the capabilities
    /// FRR asks for, and stays in the host's PID namespace so that its pid file is true.
    Daemon,
    /// Code a model wrote (NetPress §B.3's `process_graph`, run by a Python interpreter): a
    /// network namespace of its own with nothing in it (no `--net`), no capabilities, no new
    /// processes, nothing writable but a private `/tmp`.
    Code,
}

impl Profile {
    pub const ALL: [Profile; 4] = [Profile::Agent, Profile::Vtysh, Profile::Daemon, Profile::Code];

    pub fn name(self) -> &'static str {
        match self {
            Profile::Agent => "agent",
            Profile::Vtysh => "vtysh",
            Profile::Daemon => "daemon",
            Profile::Code => "code",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Profile::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether it gets a PID namespace (and so a `/proc` with only its own processes). A
    /// daemon does not: FRR writes its PID to a file, and netdojo stops it by that PID.
    pub fn pid_namespace(self) -> bool {
        !matches!(self, Profile::Daemon)
    }

    /// Whether it may create processes (threads are always allowed).
    pub fn may_fork(self) -> bool {
        !matches!(self, Profile::Agent | Profile::Code)
    }

    /// Whether it gets a fresh, empty network namespace instead of entering a node's (`--net`):
    /// only a loopback that is down, so it reaches no network at all.
    pub fn fresh_network(self) -> bool {
        matches!(self, Profile::Code)
    }
}

/// Everything the jail needs to know, as typed data; [`Spec::args`] is its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub profile: Profile,
    /// The network namespace to enter (`/run/netns/NAME`); empty for a profile with a
    /// [`Profile::fresh_network`].
    pub net: PathBuf,
    /// A UTS namespace to enter (a router's host name); without one, the jail gets a UTS
    /// namespace of its own, so `hostname NAME` renames nothing outside it.
    pub uts: Option<PathBuf>,
    /// Directories bound at the same path, writable.
    pub writable: Vec<PathBuf>,
    /// Directories bound at the same path, read-only.
    pub readable: Vec<PathBuf>,
    /// Keys under `/proc/sys/net` (as paths relative to `/proc/sys`, `net/netfilter/x`) that
    /// are shared with the host although they are shown in every namespace: bound read-only.
    pub host_wide_sysctls: Vec<String>,
    /// CPU seconds before the kernel kills it.
    pub cpu_seconds: u64,
    /// Address space (virtual memory) in MiB, for the profiles that bound it (agent, vtysh,
    /// code); `0` keeps the profile's default.
    pub memory_mib: u64,
}

impl Spec {
    pub fn new(profile: Profile, net: impl Into<PathBuf>) -> Self {
        Self {
            profile,
            net: net.into(),
            uts: None,
            writable: Vec::new(),
            readable: Vec::new(),
            host_wide_sysctls: Vec::new(),
            cpu_seconds: 10,
            memory_mib: 0,
        }
    }

    /// A spec for a profile with a [`Profile::fresh_network`] (no namespace to name).
    pub fn isolated(profile: Profile) -> Self {
        Self::new(profile, PathBuf::new())
    }

    /// The jail's arguments for running `program` with `args` (put the jail binary in front).
    pub fn args<I, S>(&self, program: &Path, args: I) -> Vec<OsString>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut out: Vec<OsString> = vec!["--profile".into(), self.profile.name().into()];
        if !self.net.as_os_str().is_empty() {
            out.push("--net".into());
            out.push(self.net.clone().into());
        }
        if let Some(uts) = &self.uts {
            out.push("--uts".into());
            out.push(uts.clone().into());
        }
        for dir in &self.writable {
            out.push("--rw".into());
            out.push(dir.clone().into());
        }
        for dir in &self.readable {
            out.push("--ro".into());
            out.push(dir.clone().into());
        }
        for key in &self.host_wide_sysctls {
            out.push("--host-sysctl".into());
            out.push(key.into());
        }
        out.push("--cpu".into());
        out.push(self.cpu_seconds.to_string().into());
        if self.memory_mib > 0 {
            out.push("--memory-mib".into());
            out.push(self.memory_mib.to_string().into());
        }
        out.push("--".into());
        out.push(program.into());
        out.extend(args.into_iter().map(Into::into));
        out
    }

    /// Reads [`Spec::args`] back: the spec, the program and its arguments.
    pub fn parse(argv: &[OsString]) -> Result<(Self, PathBuf, Vec<OsString>), String> {
        let mut spec = Spec::new(Profile::Agent, PathBuf::new());
        let mut profile = None;
        let mut words = argv.iter();
        let text = |w: Option<&OsString>, flag: &str| -> Result<String, String> {
            w.and_then(|w| w.to_str()).map(str::to_string).ok_or_else(|| format!("{flag} needs a value"))
        };
        loop {
            let Some(word) = words.next() else { return Err("no `-- PROGRAM` given".into()) };
            match word.to_str().unwrap_or_default() {
                "--profile" => {
                    let name = text(words.next(), "--profile")?;
                    profile = Some(Profile::from_name(&name).ok_or(format!("unknown profile `{name}`"))?);
                }
                "--net" => spec.net = PathBuf::from(text(words.next(), "--net")?),
                "--uts" => spec.uts = Some(PathBuf::from(text(words.next(), "--uts")?)),
                "--rw" => spec.writable.push(PathBuf::from(text(words.next(), "--rw")?)),
                "--ro" => spec.readable.push(PathBuf::from(text(words.next(), "--ro")?)),
                "--host-sysctl" => spec.host_wide_sysctls.push(text(words.next(), "--host-sysctl")?),
                "--cpu" => {
                    let n = text(words.next(), "--cpu")?;
                    spec.cpu_seconds = n.parse().map_err(|_| format!("--cpu `{n}` is not a number"))?;
                }
                "--memory-mib" => {
                    let n = text(words.next(), "--memory-mib")?;
                    spec.memory_mib = n.parse().map_err(|_| format!("--memory-mib `{n}` is not a number"))?;
                }
                "--" => break,
                other => return Err(format!("unknown option `{other}`")),
            }
        }
        spec.profile = profile.ok_or("--profile is required")?;
        match (spec.profile.fresh_network(), spec.net.as_os_str().is_empty()) {
            (false, true) => return Err("--net is required".into()),
            (true, false) => {
                return Err(format!(
                    "profile `{}` runs in an empty network namespace of its own: --net is not allowed",
                    spec.profile.name()
                ));
            }
            _ => {}
        }
        let program = words.next().ok_or("no program after `--`")?;
        let program = PathBuf::from(program);
        if !program.is_absolute() {
            return Err(format!("the program `{}` must be an absolute path", program.display()));
        }
        Ok((spec, program, words.cloned().collect()))
    }
}

/// The jail's own setup failure, told apart from the program's: exit status [`SETUP_EXIT`] and
/// a last stderr line starting with [`SETUP_FAILED`]. `Some(message)` when the program never
/// ran; callers report that as the environment's failure, never the agent's.
pub fn setup_failure(status: Option<i32>, stderr: &[u8]) -> Option<String> {
    if status != Some(SETUP_EXIT) {
        return None;
    }
    let stderr = String::from_utf8_lossy(stderr);
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty())?;
    last.strip_prefix(SETUP_FAILED).map(|why| why.trim().to_string())
}

/// The jail binary wasn't found.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the netdojo-jail binary was not found (looked in ${BINARY_ENV}, then beside {exe} and its parent); \
     build it with `cargo build -p netdojo-jail` (cargo xtask and `cargo test --workspace` build it)"
)]
pub struct NotFound {
    exe: String,
}

/// The jail binary: `$NETDOJO_JAIL`, else `netdojo-jail` beside the running executable or in
/// its parent directory (a test binary runs from `target/debug/deps`, the jail is in
/// `target/debug`), else in `/usr/local/bin` and `/usr/bin`.
pub fn binary() -> Result<PathBuf, NotFound> {
    if let Some(path) = std::env::var_os(BINARY_ENV) {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let mut candidates = Vec::new();
    if let Some(dir) = exe.parent() {
        candidates.push(dir.join("netdojo-jail"));
        if let Some(up) = dir.parent() {
            candidates.push(up.join("netdojo-jail"));
        }
    }
    candidates.push(PathBuf::from("/usr/local/bin/netdojo-jail"));
    candidates.push(PathBuf::from("/usr/bin/netdojo-jail"));
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| NotFound { exe: exe.display().to_string() })
}

/// A setup step that failed, named for the message.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {source}")]
pub struct SetupError {
    pub step: String,
    #[source]
    pub source: std::io::Error,
}

impl SetupError {
    pub fn new(step: impl Into<String>, source: impl Into<std::io::Error>) -> Self {
        Self { step: step.into(), source: source.into() }
    }

    pub fn nix(step: impl Into<String>, errno: nix::Error) -> Self {
        Self { step: step.into(), source: std::io::Error::from_raw_os_error(errno as i32) }
    }
}

/// The layers, in order, once the process is in its namespaces (and, with a PID namespace,
/// is that namespace's first process): filesystem, limits, privileges, then the seccomp filter,
/// which is last because it refuses the calls the steps before it make.
pub fn contain(spec: &Spec) -> Result<(), SetupError> {
    mounts::build_root(spec)?;
    limits::apply(spec)?;
    capabilities::drop_to(spec.profile)?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| SetupError::nix("no_new_privs", e))?;
    seccomp::install(spec.profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_read_back() {
        let mut spec = Spec::new(Profile::Vtysh, "/run/netns/ndj1-r1");
        spec.uts = Some("/run/netdojo/frr/ndj1-r1/uts".into());
        spec.writable.push("/run/netdojo/frr/ndj1-r1".into());
        spec.readable.push("/run/frr/ndj1-r1".into());
        spec.host_wide_sysctls.push("net/netfilter/nf_hooks_lwtunnel".into());
        spec.cpu_seconds = 7;
        let argv = spec.args(Path::new("/usr/bin/vtysh"), ["-c", "show version"]);
        let (back, program, args) = Spec::parse(&argv).expect("parses");
        assert_eq!(back, spec);
        assert_eq!(program, Path::new("/usr/bin/vtysh"));
        assert_eq!(args, vec![OsString::from("-c"), OsString::from("show version")]);
    }

    #[test]
    fn bad_command_lines_are_named() {
        let words = |s: &str| s.split_whitespace().map(OsString::from).collect::<Vec<_>>();
        let err = |s: &str| Spec::parse(&words(s)).expect_err(s);
        assert_eq!(err("--net /x -- /bin/ip"), "--profile is required");
        assert_eq!(err("--profile agent -- /bin/ip"), "--net is required");
        assert_eq!(err("--profile agent --net /x -- ip"), "the program `ip` must be an absolute path");
        assert_eq!(err("--profile nobody --net /x -- /bin/ip"), "unknown profile `nobody`");
        assert_eq!(err("--profile agent --net /x --bogus -- /bin/ip"), "unknown option `--bogus`");
        assert_eq!(err("--profile agent --net /x"), "no `-- PROGRAM` given");
        assert_eq!(
            err("--profile code --net /x -- /bin/true"),
            "profile `code` runs in an empty network namespace of its own: --net is not allowed"
        );
        assert_eq!(
            err("--profile code --memory-mib lots -- /bin/true"),
            "--memory-mib `lots` is not a number"
        );
    }

    #[test]
    fn code_needs_no_namespace_and_reads_its_memory_limit_back() {
        let mut spec = Spec::isolated(Profile::Code);
        spec.readable.push("/opt/venv".into());
        spec.cpu_seconds = 3;
        spec.memory_mib = 512;
        let argv = spec.args(Path::new("/usr/bin/python3"), ["-c", "pass"]);
        assert!(!argv.iter().any(|a| a == "--net"), "{argv:?}");
        let (back, _, _) = Spec::parse(&argv).expect("parses");
        assert_eq!(back, spec);
    }
}
