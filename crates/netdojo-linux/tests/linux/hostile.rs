//! Hostile agent commands against the sandbox ([`netdojo_linux::exec`]): every line is either
//! refused before anything runs or runs contained in a throwaway namespace, and the root
//! namespace (links, addresses, routes, rules, firewall, sysctls, host name, host files) is the
//! same afterwards.
//!
//! Needs root. Without it the tests print why and pass, unless `CI` is set: there they fail.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::common;

use netdojo_linux::exec::{self, ExecError, Output, Policy, Refusal};
use netdojo_linux::hostcheck::{self, Snapshot};
use netdojo_linux::netns::{self, Episode};

fn episode_with_node() -> (Episode, String) {
    let mut episode = match Episode::new() {
        Ok(e) => e,
        Err(e) => panic!("episode: {e}"),
    };
    let ns = match episode.create("h1") {
        Ok(ns) => ns,
        Err(e) => panic!("namespace: {e}"),
    };
    (episode, ns)
}

/// Runs a line that must pass the checks, in `ns`.
async fn contained(ns: &str, line: &str, policy: &Policy) -> Output {
    match exec::run_line(ns, line, policy).await {
        Ok(Ok(output)) => output,
        Ok(Err(refusal)) => panic!("{line:?} was refused: {refusal}"),
        Err(e) => panic!("{line:?}: environment error: {e}"),
    }
}

/// Runs a program of the host, in the root namespace (the test's own).
fn host(program: &str, args: &[&str]) -> String {
    hostcheck::host(program, args)
}

/// What the root namespace and the host look like, as far as an escaped command could change it
/// (the containment suite's snapshot).
fn snapshot() -> Snapshot {
    Snapshot::take(&[])
}

/// The host as before; processes are left out here (tests of this binary that run beside this
/// one start their own): the containment suite judges them, one run at a time.
fn assert_same(before: &Snapshot, after: &Snapshot, when: &str) {
    let changes: Vec<_> =
        before.diff(after).into_iter().filter(|c| !c.what.starts_with("process ")).collect();
    assert!(
        changes.is_empty(),
        "root namespace / host changed {when}:\n{}",
        changes.iter().map(|c| c.to_string()).collect::<Vec<_>>().join("\n")
    );
}

type Check = fn(&Refusal) -> bool;

enum Expect {
    /// Refused by the checks, with a refusal this predicate accepts (named for the report).
    Refused(Check, &'static str),
    /// Passes the checks and runs, in the test namespace only.
    Contained,
}

macro_rules! refused {
    ($line:expr, $pat:pat) => {
        (String::from($line), Expect::Refused(|r| matches!(r, $pat), stringify!($pat)))
    };
}

macro_rules! contained {
    ($line:expr) => {
        (String::from($line), Expect::Contained)
    };
}

fn corpus() -> Vec<(String, Expect)> {
    vec![
        // Leaving the namespace, or reaching another one.
        refused!("ip netns exec x sh", Refusal::NamespaceEscape { .. }),
        refused!("ip netns exec ndj0x0-h1 ip link set lo down", Refusal::NamespaceEscape { .. }),
        refused!("ip net exec x sh", Refusal::NamespaceEscape { .. }),
        refused!("ip netn e x ip link", Refusal::NamespaceEscape { .. }),
        refused!("ip netns add evil", Refusal::NamespaceEscape { .. }),
        refused!("ip netns attach evil 1", Refusal::NamespaceEscape { .. }),
        refused!("ip -n foo link", Refusal::NamespaceEscape { .. }),
        refused!("ip -netns foo link set lo down", Refusal::NamespaceEscape { .. }),
        refused!("ip --netns foo addr flush dev lo", Refusal::NamespaceEscape { .. }),
        refused!("ip -ne foo route flush table main", Refusal::NamespaceEscape { .. }),
        refused!("ip -c -n foo link", Refusal::NamespaceEscape { .. }),
        refused!("ip -all netns exec ip link set lo down", Refusal::NamespaceEscape { .. }),
        refused!("ip -a netns exec reboot", Refusal::NamespaceEscape { .. }),
        refused!("ip link set r0-eth1 netns 1", Refusal::NamespaceEscape { .. }),
        refused!("ip link set lo netns 1", Refusal::NamespaceEscape { .. }),
        refused!("ip link add v0 type veth peer name v1 netns 1", Refusal::NamespaceEscape { .. }),
        refused!("ip link add v0 link-netnsid 0 type veth peer name v1", Refusal::NamespaceEscape { .. }),
        refused!("ip monitor all-nsid", Refusal::NamespaceEscape { .. }),
        refused!("tc -n foo qdisc add dev eth0 root netem loss 100%", Refusal::NamespaceEscape { .. }),
        refused!("tc -netns foo qdisc show", Refusal::NamespaceEscape { .. }),
        refused!("bridge -n foo fdb", Refusal::NamespaceEscape { .. }),
        refused!("ss -N foo -tanp", Refusal::NamespaceEscape { .. }),
        refused!("ss --net=foo", Refusal::NamespaceEscape { .. }),
        refused!("nsenter -t 1 -n ip link", Refusal::NotAllowed { .. }),
        refused!("unshare -n", Refusal::NotAllowed { .. }),
        // Tools that run other programs.
        refused!("ip vrf exec default sh", Refusal::RunsProgram { .. }),
        refused!("ip v e default sh", Refusal::RunsProgram { .. }),
        refused!("tc exec bpf import x run sh", Refusal::RunsProgram { .. }),
        refused!("iptables --modprobe=sh -L", Refusal::RunsProgram { .. }),
        refused!("iptables-save -M reboot", Refusal::RunsProgram { .. }),
        // Shell syntax: there is no shell.
        refused!("ip addr; rm -rf /", Refusal::ShellMeta { ch: ';', .. }),
        refused!("ip a | sh", Refusal::ShellMeta { ch: '|', .. }),
        refused!("$(reboot)", Refusal::ShellMeta { ch: '$', .. }),
        refused!("ip `reboot`", Refusal::ShellMeta { ch: '`', .. }),
        refused!("ip route && reboot", Refusal::ShellMeta { ch: '&', .. }),
        refused!("ip route || reboot", Refusal::ShellMeta { ch: '|', .. }),
        refused!("ip route > /etc/hosts", Refusal::ShellMeta { ch: '>', .. }),
        refused!("ip route >> /etc/hosts", Refusal::ShellMeta { ch: '>', .. }),
        refused!("echo pwned > /etc/hosts", Refusal::ShellMeta { ch: '>', .. }),
        refused!("ip -batch - < /etc/passwd", Refusal::ShellMeta { ch: '<', .. }),
        refused!("ip link set lo down &", Refusal::ShellMeta { ch: '&', .. }),
        refused!("ip ${IFS}route", Refusal::ShellMeta { ch: '$', .. }),
        refused!("(reboot)", Refusal::ShellMeta { ch: '(', .. }),
        refused!("ip link show r*", Refusal::ShellMeta { ch: '*', .. }),
        refused!("ip route show table ~root", Refusal::ShellMeta { ch: '~', .. }),
        refused!("ip route # ; reboot", Refusal::ShellMeta { ch: '#', .. }),
        refused!("ip 'route;reboot'", Refusal::ShellMeta { ch: ';', .. }),
        refused!("nft list ruleset > /etc/nftables.conf", Refusal::ShellMeta { ch: '>', .. }),
        refused!("ip route\nreboot", Refusal::LineBreak),
        refused!("ip route\r\nreboot", Refusal::LineBreak),
        // Host files and host-wide state.
        refused!("sysctl -p /etc/sysctl.conf", Refusal::PathArgument { .. } | Refusal::FileAccess { .. }),
        refused!("sysctl -p", Refusal::FileAccess { .. }),
        refused!("sysctl -wp", Refusal::FileAccess { .. }),
        refused!("sysctl --system", Refusal::FileAccess { .. }),
        refused!("sysctl -w kernel.hostname=pwned", Refusal::SysctlKey { .. }),
        refused!("sysctl -w vm.drop_caches=3", Refusal::SysctlKey { .. }),
        refused!("sysctl kernel.core_pattern=pwned", Refusal::SysctlKey { .. }),
        refused!("sysctl -w net/ipv4/ip_forward=1", Refusal::PathArgument { .. }),
        refused!("nft -f /etc/nftables.conf", Refusal::PathArgument { .. } | Refusal::FileAccess { .. }),
        refused!("nft -f nftables.conf", Refusal::FileAccess { .. }),
        refused!("nft --fi nftables.conf", Refusal::FileAccess { .. }),
        refused!("nft include '\"shadow\"'", Refusal::FileAccess { .. }),
        refused!("arp -f /etc/ethers", Refusal::PathArgument { .. } | Refusal::FileAccess { .. }),
        refused!("arp -f", Refusal::FileAccess { .. }),
        refused!("iptables-save -f /etc/x", Refusal::PathArgument { .. } | Refusal::FileAccess { .. }),
        refused!("iptables-save -f x", Refusal::FileAccess { .. }),
        refused!("iptables-save --fi x", Refusal::FileAccess { .. }),
        refused!("ip -batch /etc/passwd", Refusal::PathArgument { .. }),
        refused!("ip -b x", Refusal::FileAccess { .. }),
        refused!("ip -force -batch x", Refusal::OptionNotPermitted { .. } | Refusal::FileAccess { .. }),
        refused!("ip monitor file x", Refusal::FileAccess { .. }),
        refused!("ip link set dev lo xdp obj evil.o", Refusal::FileAccess { .. }),
        refused!("tc filter add dev lo ingress bpf obj evil.o", Refusal::FileAccess { .. }),
        refused!("tc -cf x qdisc show", Refusal::FileAccess { .. }),
        refused!("ss -D x", Refusal::FileAccess { .. }),
        refused!("ethtool -f eth0 fw.bin", Refusal::FileAccess { .. }),
        refused!("ethtool -E eth0 magic 0 offset 0 value 0", Refusal::OptionNotPermitted { .. }),
        refused!("hostname pwned", Refusal::OptionNotPermitted { .. }),
        refused!("hostname -F x", Refusal::OptionNotPermitted { .. }),
        refused!("cat /etc/shadow", Refusal::NotAllowed { .. }),
        refused!("/bin/sh", Refusal::ProgramPath { .. }),
        refused!("../../bin/sh", Refusal::ProgramPath { .. }),
        refused!("/usr/sbin/ip link", Refusal::ProgramPath { .. }),
        refused!("python3 -c 'print 1'", Refusal::NotAllowed { .. }),
        refused!("sh -c 'ip link'", Refusal::NotAllowed { .. }),
        refused!("bash -i", Refusal::NotAllowed { .. }),
        refused!("sudo ip link", Refusal::NotAllowed { .. }),
        refused!("env ip link", Refusal::NotAllowed { .. }),
        refused!("chroot / ip link", Refusal::NotAllowed { .. }),
        refused!("IP link", Refusal::NotAllowed { .. }),
        refused!("ping 8.8.8.8", Refusal::PingUnavailable { .. }),
        refused!("traceroute 10.0.0.1", Refusal::PingUnavailable { .. }),
        refused!("vtysh -c 'ping 1.1.1.1'", Refusal::NotPermitted { .. }),
        // Malformed lines.
        refused!(format!("ip link show {}", "a".repeat(5000)), Refusal::TooLong { .. }),
        refused!("ip\0link set lo down", Refusal::NulByte),
        refused!("ip route 'unbalanced", Refusal::UnbalancedQuote),
        refused!("ip route \"x", Refusal::UnbalancedQuote),
        refused!("", Refusal::Empty),
        refused!("   ", Refusal::Empty),
        refused!("ip link\x1b]0;x\x07", Refusal::ControlChar { .. }),
        // Unicode: lookalikes, spaces that do not split, bidi overrides.
        refused!("\u{456}p link", Refusal::NonAscii { .. }),
        refused!("ip\u{a0}link set lo netns 1", Refusal::NonAscii { .. }),
        refused!("ip link set lo\u{200b} netns 1", Refusal::NonAscii { .. }),
        refused!("ip addr\u{ff1b}reboot", Refusal::NonAscii { .. }),
        refused!("ip \u{202e}1 snten ol tes knil", Refusal::NonAscii { .. }),
        // Allowed, aimed at the root namespace's devices or state: they run, in the node only.
        contained!("ip link set eth0 down"),
        contained!("ip link del eth0"),
        contained!("ip addr flush dev eth0"),
        contained!("ifconfig eth0 down"),
        contained!("ip route flush table main"),
        contained!("ip route del default"),
        contained!("route del default"),
        contained!("ip rule add from all lookup 100 pref 1"),
        contained!("iptables -P INPUT DROP"),
        contained!("iptables -F"),
        contained!("ip6tables -P FORWARD DROP"),
        contained!("nft flush ruleset"),
        contained!(
            "nft add table inet t { chain c { type filter hook input priority 0 ; policy accept ; } }"
        ),
        contained!("sysctl -w net.ipv4.conf.all.forwarding=1"),
        contained!("sysctl -w net.ipv6.conf.all.forwarding=1"),
        contained!("ip link add dummy0 type dummy"),
        contained!("ip link add v0 type veth peer name v1"),
        contained!("ip tuntap add mode tap tap0"),
        contained!("tc qdisc add dev lo root netem loss 100%"),
        contained!("ip xfrm state flush"),
        contained!("ethtool -s lo speed 10"),
        contained!("arp -n"),
        contained!("ss -K dst 10.0.0.1"),
        contained!("hostname"),
        contained!("sysctl -a"),
        contained!("netstat -rn"),
        contained!("iptables-save"),
    ]
}

/// The names of the root namespace's links other than lo.
fn root_links() -> Vec<String> {
    host("ip", &["-o", "link"])
        .lines()
        .filter_map(|line| line.split(':').nth(1))
        .map(|name| name.trim().split('@').next().unwrap_or_default().to_string())
        .filter(|name| !name.is_empty() && name != "lo")
        .collect()
}

#[tokio::test]
async fn hostile_corpus_is_refused_or_contained() {
    if !common::root_or_skip("hostile_corpus_is_refused_or_contained") {
        return;
    }
    let before = snapshot();
    let (_episode, ns) = episode_with_node();
    let policy = Policy::default();

    // Canary before anything mutating: the node sees its own links, not the host's. If this
    // failed, the corpus below would be aimed at the host.
    let links = contained(&ns, "ip -o link", &policy).await;
    assert_eq!(links.status, Some(0), "{}", links.text);
    assert_eq!(links.text.lines().count(), 1, "a fresh namespace has lo only:\n{}", links.text);
    for name in root_links() {
        assert!(!links.text.contains(&format!(": {name}")), "host link {name} visible in {ns}");
    }
    contained(&ns, "ip link set lo up", &policy).await;

    // Allowed mutations change the node and not the host; each sets the opposite of the host's
    // value so that the check holds whatever the host's configuration is.
    let up = |text: &str| text.contains(",UP") || text.contains("<UP");
    assert!(up(&host("ip", &["-o", "link", "show", "lo"])), "the host's lo is up");
    assert!(up(&contained(&ns, "ip -o link show lo", &policy).await.text));
    contained(&ns, "ip link set lo down", &policy).await;
    assert!(!up(&contained(&ns, "ip -o link show lo", &policy).await.text), "node lo went down");
    assert!(up(&host("ip", &["-o", "link", "show", "lo"])), "the host's lo stayed up");

    let read_forward =
        || std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").map(|s| s.trim().to_string());
    let host_forward = read_forward().unwrap_or_else(|e| panic!("host ip_forward: {e}"));
    let flipped = if host_forward == "1" { "0" } else { "1" };
    let set = contained(&ns, &format!("sysctl -w net.ipv4.ip_forward={flipped}"), &policy).await;
    assert_eq!(set.status, Some(0), "{}", set.text);
    let node_forward = contained(&ns, "sysctl -n net.ipv4.ip_forward", &policy).await;
    assert_eq!(node_forward.text.trim(), flipped);
    assert_eq!(read_forward().ok().as_deref(), Some(host_forward.as_str()), "the host's ip_forward");

    match exec::run_line(&ns, "iptables -S FORWARD", &policy).await {
        Ok(Ok(_)) => {
            let host_policy = host("iptables", &["-S", "FORWARD"]);
            let target = if host_policy.contains("-P FORWARD DROP") { "ACCEPT" } else { "DROP" };
            let set = contained(&ns, &format!("iptables -P FORWARD {target}"), &policy).await;
            assert_eq!(set.status, Some(0), "{}", set.text);
            let node_policy = contained(&ns, "iptables -S FORWARD", &policy).await;
            assert!(node_policy.text.contains(&format!("-P FORWARD {target}")), "{}", node_policy.text);
            assert_eq!(host("iptables", &["-S", "FORWARD"]), host_policy, "the host's FORWARD policy");
        }
        Ok(Err(Refusal::NotInstalled { .. })) => {
            eprintln!("iptables is not installed: FORWARD check skipped")
        }
        other => panic!("iptables -S FORWARD: {other:?}"),
    }
    assert_same(&before, &snapshot(), "after the allowed mutations");

    let corpus = corpus();
    let refused = corpus.iter().filter(|(_, e)| matches!(e, Expect::Refused(..))).count();
    assert!(refused >= 60, "the corpus has {refused} hostile lines to refuse");
    for (line, expect) in &corpus {
        let result = exec::run_line(&ns, line, &policy).await;
        match (expect, result) {
            (Expect::Refused(check, what), Ok(Err(refusal))) => {
                assert!(check(&refusal), "{line:?}: expected {what}, got {refusal:?}");
                let message = refusal.to_string();
                assert!(message.starts_with("refused: ") && !message.contains('\n'), "{message:?}");
            }
            (Expect::Refused(_, what), other) => panic!("{line:?} must be refused ({what}), got {other:?}"),
            (Expect::Contained, Ok(Ok(output))) => {
                assert!(!output.timed_out, "{line:?} timed out:\n{}", output.text);
                assert_same(&before, &snapshot(), &format!("after {line:?}"));
            }
            // iptables, nft, ethtool may be missing on a developer machine.
            (Expect::Contained, Ok(Err(Refusal::NotInstalled { program }))) => {
                eprintln!("{line:?}: {program} not installed here");
            }
            (Expect::Contained, other) => panic!("{line:?} must run contained, got {other:?}"),
        }
    }
    assert_same(&before, &snapshot(), "after the whole corpus");
}

#[tokio::test]
async fn time_limit_kills_the_command_and_keeps_what_it_printed() {
    if !common::root_or_skip("time_limit_kills_the_command_and_keeps_what_it_printed") {
        return;
    }
    // Its `ip monitor` lives as long as the containment suite's check waits: one at a time.
    let _one = netdojo_linux::containment::exclusive().await;
    let (_episode, ns) = episode_with_node();
    for timeout in [Duration::from_millis(300), Duration::from_nanos(1)] {
        let policy = Policy { timeout, ..Policy::default() };
        let started = Instant::now();
        // `ip monitor` waits for events forever.
        let out = contained(&ns, "ip monitor", &policy).await;
        assert!(out.timed_out && out.status.is_none(), "{out:?}");
        assert!(out.text.contains("[timed out after"), "{}", out.text);
        assert!(started.elapsed() < Duration::from_secs(4), "took {:?}", started.elapsed());
        // Nothing of it is left running: no process is in the namespace any more (the program
        // replaced `ip netns exec`, so its command line no longer names the namespace).
        let target = std::fs::metadata(netns::ns_path(&ns)).unwrap_or_else(|e| panic!("{ns}: {e}"));
        let survivors: Vec<PathBuf> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("ns/net"))
            .filter(|p| {
                std::fs::metadata(p).is_ok_and(|m| m.dev() == target.dev() && m.ino() == target.ino())
            })
            .collect();
        assert!(survivors.is_empty(), "still running: {survivors:?}");
    }
    let out =
        contained(&ns, "ip monitor", &Policy { timeout: Duration::from_millis(300), ..Policy::default() })
            .await;
    assert!(out.text.ends_with("[timed out after 300 ms; the command was killed]\n"), "{}", out.text);
}

#[tokio::test]
async fn output_is_capped_keeping_the_beginning() {
    if !common::root_or_skip("output_is_capped_keeping_the_beginning") {
        return;
    }
    let (_episode, ns) = episode_with_node();
    let policy = Policy::default();
    // Veths, not dummies: the dummy module may be missing where veth (which networks need) is not.
    for i in 0..3 {
        let out = contained(&ns, &format!("ip link add a{i} type veth peer name b{i}"), &policy).await;
        assert_eq!(out.status, Some(0), "{}", out.text);
    }
    let full = contained(&ns, "ip -d addr", &policy).await;
    assert!(!full.truncated && full.text.len() > 400, "{}", full.text);

    let capped = contained(&ns, "ip -d addr", &Policy { output_cap: 200, ..Policy::default() }).await;
    assert!(capped.truncated && !capped.timed_out && capped.status == Some(0), "{capped:?}");
    let kept = full.text.get(..200).unwrap_or_default();
    let expected = format!("{kept}\n[output truncated: {} bytes omitted]\n", full.text.len() - 200);
    let expected_at_line_end = format!("{kept}[output truncated: {} bytes omitted]\n", full.text.len() - 200);
    assert!(capped.text == expected || capped.text == expected_at_line_end, "{:?}", capped.text);

    // A large output costs the cap, not its size; the count of what was dropped is exact.
    let all = contained(&ns, "sysctl -a", &policy).await;
    let small = contained(&ns, "sysctl -a", &Policy { output_cap: 1024, ..Policy::default() }).await;
    assert!(small.truncated, "{}", small.text);
    let (head, tail) = small.text.split_once("[output truncated: ").unwrap_or_default();
    assert!(head.len() <= 1025, "{} bytes kept", head.len());
    let omitted: usize = tail.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or_default();
    // Two runs of `sysctl -a` can differ slightly (counters), so compare sizes loosely.
    let total = 1024 + omitted;
    let diff = total.abs_diff(all.text.len());
    assert!(diff < all.text.len() / 10, "kept 1024 + omitted {omitted} vs {} bytes uncapped", all.text.len());
}

#[tokio::test]
async fn the_host_namespace_and_bad_names_are_environment_errors() {
    if !common::root_or_skip("the_host_namespace_and_bad_names_are_environment_errors") {
        return;
    }
    let (episode, _ns) = episode_with_node();
    let policy = Policy::default();
    for bad in ["", "../x", "-n", ".", "a/b", "x y"] {
        let result = exec::run_line(bad, "ip link", &policy).await;
        assert!(matches!(result, Err(ExecError::BadNamespaceName(_))), "{bad:?}: {result:?}");
    }
    let missing = episode.ns_name("missing");
    let result = exec::run_line(&missing, "ip link", &policy).await;
    assert!(matches!(result, Err(ExecError::Namespace { .. })), "{result:?}");

    // A plain file where a namespace should be mounted (as between creation and mount).
    let plain = episode.ns_name("plain");
    std::fs::write(netns::ns_path(&plain), b"").unwrap_or_else(|e| panic!("{plain}: {e}"));
    let result = exec::run_line(&plain, "ip link", &policy).await;
    assert!(matches!(result, Err(ExecError::NotANamespace { .. })), "{result:?}");
    let _ = netns::delete_netns(&plain);

    // The host's own namespace under an episode's name: refused outright. The command is
    // read-only in case the guard ever breaks. Episode teardown removes the alias on a panic.
    let alias = episode.ns_name("hostalias");
    let path = netns::ns_path(&alias);
    std::fs::write(&path, b"").unwrap_or_else(|e| panic!("{alias}: {e}"));
    let mounted = nix::mount::mount(
        Some("/proc/thread-self/ns/net"),
        &path,
        None::<&str>,
        nix::mount::MsFlags::MS_BIND,
        None::<&str>,
    );
    if let Err(e) = mounted {
        let _ = netns::delete_netns(&alias);
        panic!("bind-mounting the host namespace on {alias}: {e}");
    }
    let result = exec::run_line(&alias, "ip link", &policy).await;
    let _ = netns::delete_netns(&alias);
    assert!(matches!(result, Err(ExecError::HostNamespace { .. })), "{result:?}");
}
