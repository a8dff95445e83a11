//! FRRouting routers on real namespaces: two OSPF routers learn each other's LAN, hosts
//! behind them reach each other, vtysh shows each router's own name, and nothing of FRR is
//! left after teardown.

use crate::common;

use std::time::{Duration, Instant};

use netdojo_linux::frr;
use netdojo_linux::network::Network;
use netdojo_linux::pingmesh::Options;
use netdojo_linux::topology::Topology;

fn router(id: u8, lan: &str) -> String {
    format!(
        r#"{{ kind: frr, daemons: [ospfd], interfaces: {{ eth1: 10.0.12.{id}/30, eth2: {lan}.1/24 }}, config: "interface eth1\n ip ospf network point-to-point\n ip ospf dead-interval minimal hello-multiplier 4\nexit\nrouter ospf\n ospf router-id {id}.{id}.{id}.{id}\n timers throttle lsa all 0\n timers lsa min-arrival 0\n network 10.0.12.0/30 area 0\n network {lan}.0/24 area 0\nexit\n" }}"#
    )
}

fn topology() -> Topology {
    let text = format!(
        r#"
name: ospf-pair
topology:
  nodes:
    h1: {{ kind: host, interfaces: {{ h1-eth0: 192.168.1.100/24 }}, routes: [ {{ dst: default, via: 192.168.1.1 }} ] }}
    h2: {{ kind: host, interfaces: {{ h2-eth0: 192.168.2.100/24 }}, routes: [ {{ dst: default, via: 192.168.2.1 }} ] }}
    r1: {r1}
    r2: {r2}
  links:
    - endpoints: ["r1:eth1", "r2:eth1"]
    - endpoints: ["h1:h1-eth0", "r1:eth2"]
    - endpoints: ["h2:h2-eth0", "r2:eth2"]
"#,
        r1 = router(1, "192.168.1"),
        r2 = router(2, "192.168.2"),
    );
    Topology::from_str_named(&text, "ospf-pair.clab.yml").expect("valid topology")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ospf_routers_connect_their_lans_and_leave_nothing_behind() {
    if !common::frr_or_skip("frr ospf") {
        return;
    }
    let (mut net, times) = Network::build(topology()).await.expect("build");
    let start = Instant::now();
    let mut mesh = net.pingmesh(&Options::default()).await;
    while !mesh.full() && start.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        mesh = net.pingmesh(&Options::default()).await;
    }
    eprintln!("built in {times:?}; OSPF converged in {:?}", start.elapsed());
    assert!(mesh.full(), "{}", mesh.render());

    let r1 = net.frr("r1").expect("r1 runs FRR");
    let config = r1.running_config().await.expect("running-config");
    let hostnames: Vec<&str> = config.lines().filter(|l| l.starts_with("hostname")).collect();
    assert_eq!(hostnames, ["hostname r1"], "{config}");
    assert!(config.contains("network 192.168.1.0/24 area 0"), "{config}");
    let routes = r1.vtysh(&["-c", "show ip route ospf"], Duration::from_secs(5)).await.expect("vtysh");
    assert!(routes.stdout.contains("192.168.2.0/24"), "{}", routes.text());

    // A failing line is reported by line number, and the lines around it still apply.
    let out = r1
        .apply_file("ip route 10.9.9.0/24 10.0.12.2\nbogus command\nip route 10.8.8.0/24 10.0.12.2\n")
        .await
        .expect("apply");
    assert_eq!(out.status, Some(2), "{}", out.text());
    assert!(out.text().contains("line 2:"), "{}", out.text());
    let config = r1.running_config().await.expect("running-config");
    assert!(
        config.contains("ip route 10.9.9.0/24 10.0.12.2")
            && config.contains("ip route 10.8.8.0/24 10.0.12.2"),
        "{config}"
    );

    // The daemons' logs, read once: each daemon's start-up line, and none of them again.
    let mut cursor = frr::LogCursor::default();
    let logs = r1.read_logs(&mut cursor);
    for daemon in ["zebra", "staticd", "ospfd"] {
        assert!(
            logs.iter().any(|l| l.daemon == daemon
                && l.message.starts_with(&format!("{daemon} "))
                && l.message.contains("starting")),
            "no start-up line of {daemon} in {logs:?}"
        );
    }
    assert!(logs.iter().all(|l| !l.time.is_empty()), "{logs:?}");
    let again = r1.read_logs(&mut cursor);
    assert!(again.iter().all(|l| !l.message.contains("starting")), "read twice: {again:?}");

    let ns = net.ns_name("r1").expect("ns").to_string();
    net.teardown();
    assert!(!std::path::Path::new(frr::RUN_DIR).join(&ns).exists());
    assert!(!std::path::Path::new(frr::FRR_STATE).join(&ns).exists());
    let daemons =
        std::process::Command::new("pgrep").args(["-f", &format!("-N {ns}")]).output().expect("pgrep");
    assert!(daemons.stdout.is_empty(), "FRR daemons left: {}", String::from_utf8_lossy(&daemons.stdout));
}

/// A warm pool of IPv4-only routers that start no daemon beyond zebra (and staticd, unless
/// `staticd_on_demand`) until a node asks for one.
fn ipv4_pool(staticd_on_demand: bool) -> netdojo_linux::pool::FrrPool {
    use netdojo_linux::pool::{FrrPool, RouterSpec};
    FrrPool::new(RouterSpec {
        daemons: Vec::new(),
        sysctls: netdojo_linux::topology::Node::ipv4_only_sysctls(),
        staticd_on_demand,
    })
    .expect("pool")
}

/// A command of the test's own inside namespace `ns`.
fn in_router(ns: &str, args: &'static [&'static str]) {
    let out = netdojo_linux::netns::in_netns(ns, move || {
        std::process::Command::new(args[0]).args(&args[1..]).output().expect("run")
    })
    .expect("enter the namespace");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A daemon started after the others took a configuration (`start_more`, then
/// `apply_config_to` it alone) holds what it would have held had it run from the start: the
/// shared lines (a prefix-list, a route-map, an access-list) and nothing of another daemon's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_started_later_holds_what_one_started_at_once_holds() {
    use netdojo_linux::pool::{RouterSpec, start_router};
    if !common::frr_or_skip("frr late daemon") {
        return;
    }
    const CONFIG: &str = "interface lo\n ip address 10.9.9.9/32\n ip ospf cost 7\nexit\n\
        router ospf\n ospf router-id 9.9.9.9\n network 10.9.9.9/32 area 0\nexit\n\
        ip prefix-list P seq 5 permit 10.0.0.0/8 le 32\naccess-list 1 permit 10.0.0.0 0.255.255.255\n\
        route-map RM permit 10\n match ip address prefix-list P\nexit\nip route 10.8.0.0/16 blackhole\n";
    let spec = RouterSpec {
        daemons: Vec::new(),
        sysctls: netdojo_linux::topology::Node::ipv4_only_sysctls(),
        staticd_on_demand: false,
    };
    let mut eager = start_router(&spec, &[]).await.expect("a warm router");
    eager.adopt("r", &["ospfd", "bgpd"].map(String::from), Some(CONFIG)).await.expect("eager");
    let mut late = start_router(&spec, &[]).await.expect("a warm router");
    late.adopt("r", &["ospfd"].map(String::from), Some(CONFIG)).await.expect("ospfd only");
    assert_eq!(late.frr().daemons(), ["zebra", "staticd", "ospfd"]);
    let started = late.frr().start_more(&["ospfd", "bgpd"].map(String::from)).await.expect("start bgpd");
    assert_eq!(started, ["bgpd"], "only the daemon not running starts");
    late.frr().apply_config_to(CONFIG, &started).await.expect("bgpd takes its share");
    async fn written(frr: &frr::Frr, daemon: &str) -> String {
        let lines = ["enable", "write terminal"].map(String::from);
        let text = frr.vty(daemon, &lines, Duration::from_secs(5)).await.expect("write terminal");
        // Without the `!` lines: the log file's path among them names the namespace.
        text.concat().lines().filter(|l| !l.starts_with('!')).collect::<Vec<_>>().join("\n")
    }
    for daemon in ["zebra", "staticd", "ospfd", "bgpd"] {
        assert_eq!(written(late.frr(), daemon).await, written(eager.frr(), daemon).await, "{daemon}");
    }
    let bgpd = written(late.frr(), "bgpd").await;
    assert!(
        bgpd.contains("route-map RM permit 10")
            && bgpd.contains("ip prefix-list P seq 5")
            && !bgpd.contains("router ospf"),
        "{bgpd}"
    );
}

/// The warm pool's promise: after an episode that changed everything it could (every daemon's
/// configuration, a link, addresses, routes, a policy rule, nftables, a qdisc, sysctls), a reset
/// router shows exactly the state it had when fresh, and the same state as a router started
/// now; and nothing of either is left once they are dropped. The episode's router ran two
/// daemons more than it had (started as it was taken): the reset starts its node's daemons
/// again, fresh, and a router that next serves a node running fewer drops the others at its
/// next reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_router_after_a_hostile_episode_is_a_fresh_router_again() {
    use netdojo_linux::pool::{RouterSpec, start_router};
    if !common::frr_or_skip("frr pool") {
        return;
    }
    let spec = RouterSpec {
        daemons: ["ospfd"].map(String::from).to_vec(),
        sysctls: netdojo_linux::topology::Node::ipv4_only_sysctls(),
        staticd_on_demand: false,
    };
    let mut router = start_router(&spec, &spec.daemons).await.expect("a warm router");
    let fresh = router.fresh().clone();
    let evil = ["ospfd", "bgpd", "ripd"].map(String::from);
    router
        .adopt(
            "evil",
            &evil,
            Some(
                "interface lo\n ip address 10.9.9.9/32\n ip ospf cost 7\n ip rip authentication mode md5\nexit\n\
                 router ospf\n ospf router-id 9.9.9.9\n network 10.9.9.9/32 area 0\nexit\n\
                 router bgp 65001\n neighbor 10.0.0.2 remote-as 65002\nexit\n\
                 router rip\n network 10.0.0.0/8\nexit\n\
                 ip route 10.8.0.0/16 blackhole\naccess-list 1 permit any\n\
                 ip prefix-list P seq 5 permit 10.0.0.0/8\nroute-map RM permit 10\nexit\n",
            ),
        )
        .await
        .expect("the hostile configuration applies");
    let ns = router.ns().to_string();
    in_router(&ns, &["ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1"]);
    in_router(&ns, &["ip", "addr", "add", "10.7.7.7/32", "dev", "lo"]);
    in_router(&ns, &["ip", "route", "add", "10.6.0.0/16", "dev", "lo"]);
    in_router(&ns, &["ip", "rule", "add", "prohibit", "to", "10.5.0.0/16"]);
    in_router(&ns, &["nft", "add", "table", "inet", "evil"]);
    in_router(
        &ns,
        &[
            "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "1mbit", "burst", "32k", "latency",
            "400ms",
        ],
    );
    in_router(&ns, &["sysctl", "-w", "net.ipv4.conf.all.rp_filter=2", "net.ipv4.icmp_echo_ignore_all=1"]);
    let dirty = router.snapshot().await.expect("snapshot");
    let changed = dirty.differences(&fresh);
    for part in ["FRR running-config", "ip", "nft", "tc", "sysctls"] {
        assert!(
            changed.iter().any(|c| c.starts_with(part)),
            "the episode did not change {part}: {changed:?}"
        );
    }

    assert_eq!(router.frr().daemons(), ["zebra", "staticd", "ospfd", "bgpd", "ripd"]);
    // The reset starts the daemons in the files the killed ones left (`Frr::kill`): a
    // configuration rewritten in place (the same inode), a log emptied, a file that a
    // configuration command wrote removed.
    use std::os::unix::fs::MetadataExt;
    let dir = std::path::Path::new(frr::RUN_DIR).join(router.ns());
    let inode = |f: &str| std::fs::metadata(dir.join(f)).map(|m| m.ino()).expect(f);
    let conf = inode("zebra.conf");
    std::fs::write(dir.join("apply.conf"), "router rip\n").expect("a leftover file");
    let mut log = std::fs::OpenOptions::new().append(true).open(dir.join("zebra.log")).expect("zebra.log");
    std::io::Write::write_all(&mut log, b"MARKER of the episode before\n").expect("a log line");
    // The daemons ran as `frr` with the directory writable: a link one of them left where a log
    // and a configuration go is removed, never followed; what it points at is untouched.
    let outside = tempfile::tempdir().expect("a directory outside the run directory");
    let precious = outside.path().join("precious");
    std::fs::write(&precious, "precious\n").expect("a file outside");
    for name in ["ospfd.log", "bgpd.conf"] {
        std::fs::remove_file(dir.join(name)).expect(name);
        std::os::unix::fs::symlink(&precious, dir.join(name)).expect("a link");
    }
    router.reset(&spec).await.expect("the reset brings the fresh state back");
    assert_eq!(std::fs::read_to_string(&precious).expect("precious"), "precious\n");
    assert_eq!(std::fs::metadata(&precious).expect("precious").uid(), 0, "chowned through a link");
    for name in ["ospfd.log", "bgpd.conf"] {
        let kind = std::fs::symlink_metadata(dir.join(name)).expect(name).file_type();
        assert!(kind.is_file(), "{name} is still a link");
    }
    assert_eq!(inode("zebra.conf"), conf, "zebra.conf made anew");
    assert!(!dir.join("apply.conf").exists(), "a file of the episode before is left");
    let log = std::fs::read_to_string(dir.join("zebra.log")).expect("zebra.log");
    assert!(!log.contains("MARKER"), "the log of the episode before is left: {log}");
    assert_eq!(
        router.frr().daemons(),
        ["zebra", "staticd", "ospfd", "bgpd", "ripd"],
        "its node's daemons, again"
    );
    let now = router.snapshot().await.expect("snapshot");
    assert_eq!(
        (&now.interfaces, &now.kernel, &now.sysctls),
        (&fresh.interfaces, &fresh.kernel, &fresh.sysctls)
    );
    let config = router.frr().running_config().await.expect("running-config");
    assert!(!config.contains("evil") && !config.contains("10.9.9.9"), "{config}");

    // A router started now with the same daemons is the same router (its own per-namespace
    // sysctls aside: a few are random per namespace).
    let other = start_router(&spec, &evil).await.expect("a second router");
    assert_eq!(
        (&now.running, &now.interfaces, &now.kernel),
        (&other.fresh().running, &other.fresh().interfaces, &other.fresh().kernel)
    );

    // Served next to a node running ospfd alone, its reset drops the others: it is the router
    // it was when first started.
    router
        .adopt("plain", &spec.daemons, Some("router ospf\n ospf router-id 1.1.1.1\nexit\n"))
        .await
        .expect("adopt");
    router.reset(&spec).await.expect("the second reset");
    assert_eq!(router.frr().daemons(), ["zebra", "staticd", "ospfd"]);
    let now = router.snapshot().await.expect("snapshot");
    assert_eq!(now.differences(&fresh), Vec::<String>::new());
    assert_eq!(now, fresh);
    let names = [router.ns().to_string(), other.ns().to_string()];
    drop(router);
    drop(other);
    for name in names {
        assert!(!netdojo_linux::netns::ns_path(&name).exists(), "{name} left behind");
        assert!(!std::path::Path::new(frr::RUN_DIR).join(&name).exists(), "{name}'s FRR files left behind");
    }
}

/// A router with sysctls of its own (a strict `rp_filter`) is served from the warm pool: it has
/// them while it is in the network, on the interfaces made after it was taken too, and the
/// pool's reset writes them back, so the router goes back to the pool (not discarded) and the
/// next network gets it as a freshly started router would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_router_takes_its_own_sysctls_and_its_reset_gives_them_back() {
    use netdojo_linux::pool::{FrrPool, RouterSpec};
    use netdojo_linux::topology::Node;
    if !common::frr_or_skip("frr pool sysctls") {
        return;
    }
    let spec = RouterSpec {
        daemons: vec!["ospfd".to_string()],
        sysctls: Node::ipv4_only_sysctls(),
        staticd_on_demand: false,
    };
    let pool = FrrPool::new(spec.clone()).expect("pool");
    let handle = pool.handle();
    let topology = |own: &[(&str, &str)]| {
        let text = "name: one\ntopology:\n  nodes:\n    r1: { kind: frr, daemons: [ospfd], interfaces: { eth1: 10.0.0.1/30 } }\n    h1: { kind: host, interfaces: { eth0: 10.0.0.2/30 } }\n  links:\n    - endpoints: [\"r1:eth1\", \"h1:eth0\"]\n";
        let mut t = Topology::from_str_named(text, "one.clab.yml").expect("valid topology");
        for (name, node) in t.topology.nodes.0.iter_mut() {
            if name == "r1" {
                node.sysctls = spec.sysctls.clone();
                node.sysctls.extend(own.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            }
        }
        t
    };
    let read = |net: &Network, key: &str| -> String {
        let ns = net.ns_name("r1").expect("r1").to_string();
        let path = std::path::Path::new("/proc/sys").join(key.replace('.', "/"));
        netdojo_linux::netns::in_netns(&ns, move || std::fs::read_to_string(path))
            .expect("enter r1")
            .expect("read the sysctl")
            .trim()
            .to_string()
    };
    let keys =
        ["net.ipv4.conf.all.rp_filter", "net.ipv4.conf.default.rp_filter", "net.ipv4.conf.eth1.rp_filter"];

    // As a freshly started router is, without the pool.
    let (mut fresh, _) = Network::build(topology(&[])).await.expect("build without the pool");
    let fresh_values: Vec<String> = keys.iter().map(|k| read(&fresh, k)).collect();
    fresh.teardown();
    let strict = if fresh_values.iter().all(|v| v == "1") { "2" } else { "1" };

    let own = [("net.ipv4.conf.all.rp_filter", strict), ("net.ipv4.conf.default.rp_filter", strict)];
    let (mut net, _) = Network::build_with(topology(&own), Some(&handle)).await.expect("build with the pool");
    assert_eq!(handle.stats().created, 1, "r1 was not served from the pool: {:?}", handle.stats());
    for key in keys {
        assert_eq!(read(&net, key), strict, "{key} while r1 is in the network");
    }
    net.teardown();
    pool.settle(Duration::from_secs(20));
    assert_eq!(handle.idle(), 1, "r1 did not go back to the pool: {:?}", handle.stats());

    let (mut again, _) = Network::build_with(topology(&[]), Some(&handle)).await.expect("build again");
    let stats = handle.stats();
    assert_eq!((stats.created, stats.reused, stats.discarded), (1, 1, 0), "{stats:?}");
    let values: Vec<String> = keys.iter().map(|k| read(&again, k)).collect();
    assert_eq!(values, fresh_values, "the reused router's {keys:?}");
    again.teardown();
}

/// A pool whose routers start staticd on demand: an idle router runs zebra alone, a node that
/// lists staticd (or whose configuration has a static route) gets it as it is taken, and the
/// static route is in the kernel; a node without one runs no staticd; both routers come back
/// from their reset as fresh ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_with_staticd_on_demand_starts_it_for_a_static_route_only() {
    use netdojo_linux::topology::Node;
    if !common::frr_or_skip("frr pool staticd on demand") {
        return;
    }
    let pool = ipv4_pool(true);
    let handle = pool.handle();
    let text = "name: two\ntopology:\n  nodes:\n    r1: { kind: frr, interfaces: { eth1: 10.0.0.1/30 }, config: \"ip route 10.9.0.0/16 10.0.0.2\\n\" }\n    r2: { kind: frr, interfaces: { eth1: 10.0.0.2/30 } }\n  links:\n    - endpoints: [\"r1:eth1\", \"r2:eth1\"]\n";
    let topology = || {
        let mut t = Topology::from_str_named(text, "two.clab.yml").expect("valid topology");
        for (_, node) in t.topology.nodes.0.iter_mut() {
            node.sysctls = Node::ipv4_only_sysctls();
        }
        t
    };
    let (mut net, _) = Network::build_with(topology(), Some(&handle)).await.expect("build with the pool");
    assert_eq!(handle.stats().created, 2, "not served from the pool: {:?}", handle.stats());
    assert_eq!(net.frr("r1").expect("r1").daemons(), ["zebra", "staticd"], "r1 has a static route");
    assert_eq!(net.frr("r2").expect("r2").daemons(), ["zebra"], "r2 has none");
    let ns = net.ns_name("r1").expect("r1").to_string();
    // zebra installs it once the link is up: a few hundred milliseconds at most.
    let start = Instant::now();
    let routes = loop {
        let out = netdojo_linux::netns::in_netns(&ns, || {
            std::process::Command::new("ip").args(["route", "show", "10.9.0.0/16"]).output()
        })
        .expect("enter r1")
        .expect("ip route");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains("via 10.0.0.2") || start.elapsed() > Duration::from_secs(10) {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(routes.contains("via 10.0.0.2"), "r1's static route is not in its kernel: {routes:?}");
    net.teardown();
    pool.settle(Duration::from_secs(20));
    let stats = handle.stats();
    assert_eq!((handle.idle(), stats.discarded), (2, 0), "{stats:?}");
}

/// The pool keeps each router's daemons through its reset (those of the node it last served)
/// and serves a node from a router that runs its daemons already: nothing is started on the
/// node's setup path when such a router is idle, and a router running fewer is taken (its
/// missing daemons started) only when none is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_serves_a_node_from_a_router_running_its_daemons() {
    if !common::frr_or_skip("frr pool daemons") {
        return;
    }
    let pool = ipv4_pool(false);
    let handle = pool.handle();
    let wants = |w: &[&[&str]]| -> Vec<Vec<String>> {
        w.iter().map(|d| d.iter().map(|s| s.to_string()).collect()).collect()
    };
    let runs = |w: &netdojo_linux::pool::Warm| w.frr().daemons();
    let first = handle.take(&wants(&[&["ospfd"], &["ospfd", "bgpd"], &[]])).await.expect("take");
    assert_eq!(
        first.iter().map(runs).collect::<Vec<_>>(),
        [
            vec!["zebra", "staticd", "ospfd"],
            vec!["zebra", "staticd", "ospfd", "bgpd"],
            vec!["zebra", "staticd"]
        ],
        "routers started for the pool run what their node asks for"
    );
    for w in first {
        handle.give_back(w);
    }
    pool.settle(Duration::from_secs(20));
    assert_eq!(handle.idle(), 3, "{:?}", handle.stats());

    // In another order: each node gets the router running exactly its daemons.
    let second = handle.take(&wants(&[&[], &["ospfd", "bgpd"], &["ospfd"]])).await.expect("take again");
    assert_eq!(
        second.iter().map(runs).collect::<Vec<_>>(),
        [
            vec!["zebra", "staticd"],
            vec!["zebra", "staticd", "ospfd", "bgpd"],
            vec!["zebra", "staticd", "ospfd"]
        ],
    );
    let stats = handle.stats();
    assert_eq!((stats.created, stats.reused, stats.discarded), (3, 3, 0), "{stats:?}");
    // The idle pool is empty: the next node gets a router started for it.
    let third = handle.take(&wants(&[&["bgpd"]])).await.expect("take a third");
    assert_eq!(third.iter().map(runs).collect::<Vec<_>>(), [vec!["zebra", "staticd", "bgpd"]]);
    for w in second.into_iter().chain(third) {
        handle.give_back(w);
    }
    pool.settle(Duration::from_secs(20));

    // A node running bgpd alone takes the bgpd router rather than one running more; a node
    // running ospf6d, which no idle router runs, takes the one missing the fewest daemons.
    let fourth = handle.take(&wants(&[&["bgpd"], &["ospfd", "ospf6d"]])).await.expect("take a fourth");
    assert_eq!(
        fourth.iter().map(runs).collect::<Vec<_>>(),
        [vec!["zebra", "staticd", "bgpd"], vec!["zebra", "staticd", "ospfd"]],
    );
    assert_eq!(handle.stats().created, 4, "{:?}", handle.stats());
    for w in fourth {
        handle.give_back(w);
    }
}

/// The nice value of every thread of every live FRR daemon of namespace `ns`, by daemon, read
/// from /proc as `ps` would.
fn daemon_nices(ns: &str) -> std::collections::BTreeMap<String, Vec<i32>> {
    let mut out = std::collections::BTreeMap::<String, Vec<i32>>::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let Some(program) = args.first().and_then(|a| std::str::from_utf8(a).ok()) else { continue };
        if !program.starts_with("/usr/lib/frr/")
            || !args.windows(2).any(|w| w[0] == b"-N" && w[1] == ns.as_bytes())
        {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for task in tasks.flatten() {
            let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
            // After the command's closing parenthesis: state is field 3, nice field 19.
            let Some((_, rest)) = stat.rsplit_once(')') else { continue };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            if fields.first() == Some(&"Z") {
                continue;
            }
            let nice = fields.get(16).and_then(|n| n.parse().ok()).expect("a nice value in stat");
            let daemon = program.trim_start_matches("/usr/lib/frr/").to_string();
            out.entry(daemon).or_default().push(nice);
        }
    }
    out
}

/// A router's reset is background work: the daemons it starts again run niced
/// ([`RESET_NICE`](netdojo_linux::pool::RESET_NICE)), every thread of them, while the router is
/// idle, so that they yield to the episodes running; once a node takes the router, they run at
/// 0 again, as the daemons of a router started for a node do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_starts_its_daemons_niced_and_a_taken_router_runs_them_at_0() {
    use netdojo_linux::pool::RESET_NICE;
    if !common::frr_or_skip("frr pool priorities") {
        return;
    }
    let pool = ipv4_pool(false);
    let handle = pool.handle();
    let want = vec![vec!["ospfd".to_string(), "bgpd".to_string()]];
    let daemons = ["bgpd", "ospfd", "staticd", "zebra"];
    let all_at = |nices: &std::collections::BTreeMap<String, Vec<i32>>, nice: i32| {
        nices.keys().map(String::as_str).eq(daemons) && nices.values().flatten().all(|n| *n == nice)
    };
    let first = handle.take(&want).await.expect("take");
    let ns = first[0].ns().to_string();
    let started = daemon_nices(&ns);
    assert!(all_at(&started, 0), "a router started for a node: {started:?}");
    for w in first {
        handle.give_back(w);
    }
    pool.settle(Duration::from_secs(20));
    let idle = daemon_nices(&ns);
    assert!(all_at(&idle, RESET_NICE), "an idle router after its reset: {idle:?}");
    assert!(idle.values().any(|threads| threads.len() > 1), "FRR's daemons run several threads: {idle:?}");
    let second = handle.take(&want).await.expect("take again");
    assert_eq!(second[0].ns(), ns, "the reset router is taken again: {:?}", handle.stats());
    let taken = daemon_nices(&ns);
    assert!(all_at(&taken, 0), "a router taken from the pool: {taken:?}");
    for w in second {
        handle.give_back(w);
    }
}
