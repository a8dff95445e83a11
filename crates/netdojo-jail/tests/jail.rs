//! The jail binary as its callers see it: exit statuses, its own failures told apart, the
//! host's namespace refused, what each profile keeps. (What an agent's command can reach from
//! inside is tested through netdojo-linux's sandbox, in its `tests/linux/jail.rs`.)
//!
//! Needs root for everything but the usage errors; without it those tests print why and pass,
//! unless `CI` is set: there they fail.

use std::process::{Command, Output};

use netdojo_jail::{Profile, SETUP_EXIT, SETUP_FAILED, Spec};

const JAIL: &str = env!("CARGO_BIN_EXE_netdojo-jail");

fn root_or_skip(what: &str) -> bool {
    netdojo_testkit::root_or_skip(what, "namespaces, mounts")
}

/// A network namespace of this test's own, deleted on drop.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Self {
        let name = format!("ndjjailtest-{}-{tag}", std::process::id());
        let ok = Command::new("ip").args(["netns", "add", &name]).status().expect("ip netns add").success();
        assert!(ok, "ip netns add {name}");
        Self(name)
    }
    fn path(&self) -> String {
        format!("/run/netns/{}", self.0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn jail(spec: &Spec, program: &str, args: &[&str]) -> Output {
    Command::new(JAIL)
        .args(spec.args(std::path::Path::new(program), args.iter().copied()))
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin")
        .output()
        .expect("run the jail")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_bad_command_line_is_the_jails_own_failure() {
    let out = Command::new(JAIL).args(["--profile", "agent", "--", "/bin/true"]).output().expect("run");
    assert_eq!(out.status.code(), Some(SETUP_EXIT));
    assert_eq!(stderr(&out).trim(), format!("{SETUP_FAILED} usage: --net is required"));
}

#[test]
fn the_hosts_own_namespace_is_refused() {
    if !root_or_skip("the host namespace check") {
        return;
    }
    let out = jail(&Spec::new(Profile::Agent, "/proc/self/ns/net"), "/usr/sbin/ip", &["link"]);
    assert_eq!(out.status.code(), Some(SETUP_EXIT), "{}", stderr(&out));
    assert!(stderr(&out).contains("is the host's own network namespace"), "{}", stderr(&out));
}

#[test]
fn the_programs_status_comes_back_and_a_missing_program_is_a_setup_failure() {
    if !root_or_skip("exit statuses through the jail") {
        return;
    }
    let ns = Netns::new("status");
    let spec = Spec::new(Profile::Agent, ns.path());
    assert_eq!(jail(&spec, "/usr/bin/true", &[]).status.code(), Some(0));
    assert_eq!(jail(&spec, "/usr/bin/false", &[]).status.code(), Some(1));
    let out = jail(&spec, "/usr/sbin/ip", &["link", "show", "nosuchlink"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
    let out = jail(&spec, "/usr/bin/no-such-program", &[]);
    assert_eq!(out.status.code(), Some(SETUP_EXIT));
    assert!(stderr(&out).starts_with(SETUP_FAILED), "{}", stderr(&out));
}

#[test]
fn each_profile_keeps_only_its_capabilities_and_pid_namespace() {
    if !root_or_skip("the profiles' capabilities") {
        return;
    }
    let ns = Netns::new("caps");
    for (profile, pid_ns) in [(Profile::Agent, true), (Profile::Vtysh, true), (Profile::Daemon, false)] {
        let out = jail(&Spec::new(profile, ns.path()), "/usr/bin/cat", &["/proc/self/status"]);
        let text = String::from_utf8_lossy(&out.stdout);
        let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or("");
        let bounding = u64::from_str_radix(field("CapBnd:"), 16).expect("CapBnd");
        let expected: u64 = netdojo_jail::capabilities::kept(profile).iter().map(|c| 1u64 << c.index()).sum();
        assert_eq!(bounding, expected, "{profile:?}: {text}");
        assert_eq!(field("NoNewPrivs:"), "1", "{profile:?}");
        assert_eq!(field("Seccomp:"), "2", "{profile:?}");
        assert_eq!(field("Pid:") == "1", pid_ns, "{profile:?}: {text}");
    }
}

#[test]
fn code_gets_an_empty_network_of_its_own_and_no_privilege() {
    if !root_or_skip("the code profile") {
        return;
    }
    let spec = Spec::isolated(Profile::Code);
    let out = jail(&spec, "/usr/sbin/ip", &["-o", "link"]);
    let links = String::from_utf8_lossy(&out.stdout);
    // Only a loopback, down: nothing of the host's interfaces.
    assert_eq!(links.lines().count(), 1, "{links}{}", stderr(&out));
    assert!(links.contains("lo:") && links.contains("state DOWN"), "{links}");
    let ours = std::fs::read_link("/proc/self/ns/net").expect("own netns");
    let out = jail(&spec, "/usr/bin/readlink", &["/proc/self/ns/net"]);
    assert_ne!(String::from_utf8_lossy(&out.stdout).trim(), ours.to_string_lossy(), "{}", stderr(&out));
    let out = jail(&spec, "/usr/bin/cat", &["/proc/self/status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or("");
    assert_eq!(field("CapBnd:"), "0000000000000000", "{text}");
    assert_eq!(field("Pid:"), "1", "{text}");
    assert_eq!(field("Seccomp:"), "2", "{text}");
    // Its sysctls cannot be changed, and `--net` is refused for it.
    let out = jail(&spec, "/usr/bin/sh", &["-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"]);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = jail(&Spec::new(Profile::Code, "/run/netns/x"), "/usr/bin/true", &[]);
    assert_eq!(out.status.code(), Some(SETUP_EXIT));
    assert!(stderr(&out).contains("--net is not allowed"), "{}", stderr(&out));
}
