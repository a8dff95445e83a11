//! `netdojo-jail --profile agent|vtysh|daemon|code [--net /run/netns/NODE] [--uts PATH] [--rw DIR]...
//! [--ro DIR]... [--host-sysctl net/KEY]... [--cpu SECONDS] [--memory-mib MIB] -- /abs/PROGRAM ARGS...`
//!
//! Enters the node's network namespace (profile `code`: makes an empty one), makes the namespaces of its own, builds the jail (see
//! the library's [`netdojo_jail::contain`]) and `exec`s the program. With a PID namespace it
//! stays as the parent of the namespace's first process and exits with its status (128 + the
//! signal when it was killed). When the jail itself cannot be set up, it prints one line
//! starting with `netdojo-jail: setup failed:` and exits with 125, and the program never ran.

use std::ffi::OsString;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitCode};

use netdojo_jail::{SETUP_EXIT, SETUP_FAILED, SetupError, Spec};
use nix::sched::{CloneFlags, setns, unshare};

/// The first word of the second stage: the process that became PID 1 of the new namespace.
const STAGE2: &str = "--stage2";

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let (stage2, rest) = match argv.split_first() {
        Some((first, rest)) if first == STAGE2 => (true, rest),
        _ => (false, argv.as_slice()),
    };
    let (spec, program, args) = match Spec::parse(rest) {
        Ok(parsed) => parsed,
        Err(message) => return fail(&format!("usage: {message}")),
    };
    if stage2 {
        // PID 1 of the namespace: dies with the first stage, and everything in the namespace
        // dies with it.
        if let Err(e) = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL) {
            return fail(&format!("pdeathsig: {e}"));
        }
        return fail(&exec(&spec, &program, &args).to_string());
    }
    if let Err(e) = enter(&spec) {
        return fail(&e.to_string());
    }
    if !spec.profile.pid_namespace() {
        return fail(&exec(&spec, &program, &args).to_string());
    }
    // unshare(CLONE_NEWPID) puts the next child, not this process, in the new namespace.
    let exe = Path::new("/proc/self/exe");
    let mut stage = Command::new(exe);
    stage.arg(STAGE2).args(rest);
    match stage.status() {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => ExitCode::from(u8::try_from(code).unwrap_or(255)),
            (None, Some(signal)) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(255)),
            (None, None) => ExitCode::from(255),
        },
        Err(e) => fail(&format!("starting the second stage: {e}")),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("{SETUP_FAILED} {message}");
    ExitCode::from(SETUP_EXIT as u8)
}

/// The node's namespaces, then fresh mount, IPC (and UTS, PID) namespaces of the jail's own.
fn enter(spec: &Spec) -> Result<(), SetupError> {
    if spec.profile.fresh_network() {
        // Nothing to enter: a network namespace of its own, with only a loopback that is down.
        unshare(CloneFlags::CLONE_NEWNET).map_err(|e| SetupError::nix("unshare the network", e))?;
        return unshare_rest(spec);
    }
    let net =
        File::open(&spec.net).map_err(|e| SetupError::new(format!("open {}", spec.net.display()), e))?;
    // The caller checks this too; a jail must never be the host's own network.
    let ours = std::fs::metadata("/proc/self/ns/net").map_err(|e| SetupError::new("stat own netns", e))?;
    let target = net.metadata().map_err(|e| SetupError::new("stat netns", e))?;
    if (target.dev(), target.ino()) == (ours.dev(), ours.ino()) {
        return Err(SetupError::new(
            format!("{} is the host's own network namespace", spec.net.display()),
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        ));
    }
    setns(&net, CloneFlags::CLONE_NEWNET)
        .map_err(|e| SetupError::nix(format!("enter {}", spec.net.display()), e))?;
    drop(net);
    unshare_rest(spec)
}

/// The mount, IPC, UTS (unless entered) and PID namespaces of the jail's own.
fn unshare_rest(spec: &Spec) -> Result<(), SetupError> {
    let mut flags = CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWIPC;
    match &spec.uts {
        Some(path) => {
            let uts = File::open(path).map_err(|e| SetupError::new(format!("open {}", path.display()), e))?;
            setns(&uts, CloneFlags::CLONE_NEWUTS)
                .map_err(|e| SetupError::nix(format!("enter {}", path.display()), e))?;
        }
        None => flags |= CloneFlags::CLONE_NEWUTS,
    }
    if spec.profile.pid_namespace() {
        flags |= CloneFlags::CLONE_NEWPID;
    }
    unshare(flags).map_err(|e| SetupError::nix("unshare", e))
}

/// Contains this process and becomes the program. Returns only on failure.
fn exec(spec: &Spec, program: &Path, args: &[OsString]) -> SetupError {
    if let Err(e) = netdojo_jail::contain(spec) {
        return e;
    }
    if let Err(e) = close_inherited() {
        return e;
    }
    let e = Command::new(program).args(args).exec();
    SetupError::new(format!("exec {}", program.display()), e)
}

/// Marks every descriptor above stderr close-on-exec: nothing of the caller's (a namespace file,
/// a socket, a pipe left without close-on-exec by some library) reaches the program.
#[allow(unsafe_code)]
fn close_inherited() -> Result<(), SetupError> {
    // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC takes no pointers and closes nothing now:
    // it only sets a flag on descriptors, so no Rust object's descriptor becomes invalid before
    // `exec`, which replaces the whole process anyway.
    let rc = unsafe {
        nix::libc::syscall(nix::libc::SYS_close_range, 3u32, u32::MAX, nix::libc::CLOSE_RANGE_CLOEXEC)
    };
    if rc != 0 {
        return Err(SetupError::new("close_range", std::io::Error::last_os_error()));
    }
    Ok(())
}
