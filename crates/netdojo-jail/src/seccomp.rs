//! The system-call layer: a seccomp filter that refuses (EPERM) what no network command and
//! no routing daemon needs and what would undo the other layers: mounting, entering or making
//! namespaces, BPF, ptrace and reading other processes' memory, keyrings, kernel modules,
//! reboot, swap, clocks, the kernel log, io_uring (whose operations bypass seccomp), file
//! handles (the classic container escape). For an agent's command, creating a process is
//! refused too (threads stay allowed): no allowed tool needs one, and this is what bounds the
//! number of processes. Everything else is allowed: this is a deny-list on top of the other
//! layers, not the only wall.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

use crate::{Profile, SetupError};

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;

/// Refused for every profile.
const DENIED: &[(&str, libc::c_long)] = &[
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("setns", libc::SYS_setns),
    ("unshare", libc::SYS_unshare),
    ("open_tree", libc::SYS_open_tree),
    ("move_mount", libc::SYS_move_mount),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("bpf", libc::SYS_bpf),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("kcmp", libc::SYS_kcmp),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("syslog", libc::SYS_syslog),
    ("vhangup", libc::SYS_vhangup),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    #[cfg(target_arch = "x86_64")]
    ("iopl", libc::SYS_iopl),
    #[cfg(target_arch = "x86_64")]
    ("ioperm", libc::SYS_ioperm),
];

/// Refused to an agent's command as well: its host name is its own UTS namespace's anyway.
const DENIED_TO_AGENTS: &[(&str, libc::c_long)] = &[
    ("sethostname", libc::SYS_sethostname),
    ("setdomainname", libc::SYS_setdomainname),
    #[cfg(target_arch = "x86_64")]
    ("fork", libc::SYS_fork),
    #[cfg(target_arch = "x86_64")]
    ("vfork", libc::SYS_vfork),
];

/// The names of the calls a profile refuses outright, for the docs and the tests.
pub fn denied(profile: Profile) -> Vec<&'static str> {
    let mut names: Vec<&str> = DENIED.iter().map(|(n, _)| *n).collect();
    if !profile.may_fork() {
        names.extend(DENIED_TO_AGENTS.iter().map(|(n, _)| *n));
    }
    names
}

/// The flags that make `clone` create a namespace.
const CLONE_NAMESPACES: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
];

fn setup(what: &str) -> impl FnOnce(seccompiler::BackendError) -> SetupError + '_ {
    move |e| SetupError::new(format!("seccomp: {what}"), std::io::Error::other(e.to_string()))
}

/// `clone`'s first argument (its flags) with `mask & flags == value`.
fn clone_flags(mask: u64, value: u64) -> Result<SeccompRule, SetupError> {
    let cond = SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(mask), value)
        .map_err(setup("clone condition"))?;
    SeccompRule::new(vec![cond]).map_err(setup("clone rule"))
}

fn programs(profile: Profile) -> Result<Vec<BpfProgram>, SetupError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut deny = |nr: libc::c_long| {
        rules.insert(nr, Vec::new());
    };
    DENIED.iter().for_each(|(_, nr)| deny(*nr));
    if !profile.may_fork() {
        DENIED_TO_AGENTS.iter().for_each(|(_, nr)| deny(*nr));
    }
    // clone: a process (no CLONE_THREAD) for an agent; a namespace for anyone.
    let mut clone = Vec::new();
    if !profile.may_fork() {
        clone.push(clone_flags(libc::CLONE_THREAD as u64, 0)?);
    }
    for flag in CLONE_NAMESPACES {
        clone.push(clone_flags(*flag, *flag)?);
    }
    rules.insert(libc::SYS_clone, clone);
    let eperm = SeccompAction::Errno(libc::EPERM as u32);
    let main = SeccompFilter::new(rules, SeccompAction::Allow, eperm, ARCH).map_err(setup("filter"))?;
    // clone3 passes its flags in memory, where a filter cannot look: ENOSYS makes the C
    // library fall back to clone, which the filter above can judge.
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        ARCH,
    )
    .map_err(setup("clone3 filter"))?;
    Ok(vec![
        main.try_into().map_err(|e: seccompiler::BackendError| setup("compile")(e))?,
        clone3.try_into().map_err(|e: seccompiler::BackendError| setup("compile clone3")(e))?,
    ])
}

/// Installs the profile's filters on this thread (the jail is single-threaded): they pass
/// through `exec` and to every thread and child of the program.
pub fn install(profile: Profile) -> Result<(), SetupError> {
    for program in programs(profile)? {
        seccompiler::apply_filter(&program)
            .map_err(|e| SetupError::new("seccomp: install", std::io::Error::other(e.to_string())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_compiles() {
        for profile in Profile::ALL {
            let programs = programs(profile).expect("compiles");
            assert_eq!(programs.len(), 2);
            assert!(programs.iter().all(|p| !p.is_empty()));
        }
        assert!(denied(Profile::Agent).contains(&"fork"));
        assert!(!denied(Profile::Vtysh).contains(&"fork"));
        assert!(denied(Profile::Daemon).contains(&"setns"));
        assert!(denied(Profile::Code).contains(&"fork"));
    }
}
