//! The emulator on real namespaces: build, readiness, pingmesh, teardown, sweep.

use crate::common;

use std::time::Instant;

use netdojo_linux::network::Network;
use netdojo_linux::pingmesh::Options;
use netdojo_linux::routing::layout::Layout;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_routing_topology_is_fully_reachable_and_leaves_nothing_behind() {
    if !common::root_or_skip("network build") {
        return;
    }
    let layout = Layout::new(4, 4);
    let t = Instant::now();
    let (mut net, times) = Network::build(layout.topology()).await.expect("build");
    let built = t.elapsed();
    let prefix = net.prefix().to_string();
    assert_eq!(common::namespaces_with(&prefix).len(), 21, "1 router + 4 switches + 16 hosts");
    let t = Instant::now();
    let mesh = net.pingmesh(&Options::default()).await;
    eprintln!("build {built:?} ({times:?}), mesh {:?}", t.elapsed());
    assert_eq!(mesh.nodes.len(), 17);
    assert!(mesh.full(), "{}", mesh.render());
    assert!(mesh.render().ends_with("*** Results: 0% dropped (272/272 received)\n"));
    net.teardown();
    assert!(common::namespaces_with(&prefix).is_empty());
}

/// Every way a link can meet a bridge: a host's end listed first, a bridge's end listed first,
/// two bridges, and no bridge at all (with its own MTU). Each veth must come out on the right
/// node, enslaved where it meets a bridge, up, and with the MTU asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_to_from_between_and_without_bridges_all_forward() {
    if !common::root_or_skip("network build") {
        return;
    }
    let topology = netdojo_linux::topology::Topology::from_str_named(
        r#"
name: shapes
topology:
  nodes:
    r0: { kind: router, interfaces: { r0-eth1: 10.0.0.1/24, r0-eth2: 10.0.1.1/24 } }
    s1: { kind: bridge }
    s2: { kind: bridge }
    h1: { kind: host, interfaces: { h1-eth0: 10.0.0.11/24 }, routes: [ { dst: default, via: 10.0.0.1 } ] }
    h2: { kind: host, interfaces: { h2-eth0: 10.0.0.12/24 }, routes: [ { dst: default, via: 10.0.0.1 } ] }
    h3: { kind: host, interfaces: { h3-eth0: 10.0.1.13/24 }, routes: [ { dst: default, via: 10.0.1.1 } ] }
  links:
    - endpoints: ["r0:r0-eth1", "s1:s1-eth1"]
    - endpoints: ["h1:h1-eth0", "s1:s1-eth2"]
    - endpoints: ["s1:s1-eth3", "s2:s2-eth1"]
    - endpoints: ["s2:s2-eth2", "h2:h2-eth0"]
    - endpoints: ["h3:h3-eth0", "r0:r0-eth2"]
      mtu: 1400
"#,
        "shapes.clab.yml",
    )
    .expect("valid topology");
    let (mut net, _) = Network::build(topology).await.expect("build");
    let mesh = net.pingmesh(&Options::default()).await;
    assert!(mesh.full(), "{}", mesh.render());

    let show = |node: &str, iface: &str| -> String {
        let ns = net.ns_name(node).expect("node").to_string();
        let out = std::process::Command::new("ip")
            .args(["-n", &ns, "-o", "link", "show", "dev", iface])
            .output()
            .expect("ip");
        assert!(out.status.success(), "{node}:{iface}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for (node, iface, bridge) in [
        ("s1", "s1-eth1", "s1"),
        ("s1", "s1-eth2", "s1"),
        ("s1", "s1-eth3", "s1"),
        ("s2", "s2-eth1", "s2"),
        ("s2", "s2-eth2", "s2"),
    ] {
        let line = show(node, iface);
        assert!(
            line.contains(&format!("master {bridge} ")),
            "{node}:{iface} is not a port of {bridge}: {line}"
        );
        assert!(line.contains("state UP"), "{node}:{iface} is not up: {line}");
    }
    for (node, iface) in [("h3", "h3-eth0"), ("r0", "r0-eth2")] {
        let line = show(node, iface);
        assert!(line.contains("mtu 1400 "), "{node}:{iface}: {line}");
        assert!(!line.contains("master"), "{node}:{iface}: {line}");
    }
    assert!(show("r0", "r0-eth1").contains("mtu 1500 "));
    net.teardown();
}

/// After an address is deleted or moved, a neighbour still reaches through its cached entry
/// until the kernel fails it (23-53 s with the default timers); `forget_stale_neighbours`
/// deletes exactly the entries whose (address, MAC address) no interface holds any more: a
/// gateway's address deleted, a host's address moved to another interface. An entry that is
/// still right stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_neighbour_entries_are_forgotten_and_right_ones_kept() {
    if !common::root_or_skip("network build") {
        return;
    }
    let topology = netdojo_linux::topology::Topology::from_str_named(
        r#"
name: caches
topology:
  nodes:
    r0: { kind: router, interfaces: { r0-eth1: 10.0.0.1/24, r0-eth2: 10.0.1.1/24 } }
    s1: { kind: bridge }
    h1: { kind: host, interfaces: { h1-eth0: 10.0.0.11/24 }, routes: [ { dst: default, via: 10.0.0.1 } ] }
    h2: { kind: host, interfaces: { h2-eth0: 10.0.0.12/24 }, routes: [ { dst: default, via: 10.0.0.1 } ] }
    h4: { kind: host, interfaces: { h4-eth0: 10.0.0.14/24 }, routes: [ { dst: default, via: 10.0.0.1 } ] }
    h3: { kind: host, interfaces: { h3-eth0: 10.0.1.13/24 }, routes: [ { dst: default, via: 10.0.1.1 } ] }
  links:
    - endpoints: ["r0:r0-eth1", "s1:s1-eth1"]
    - endpoints: ["h1:h1-eth0", "s1:s1-eth2"]
    - endpoints: ["h2:h2-eth0", "s1:s1-eth3"]
    - endpoints: ["h4:h4-eth0", "s1:s1-eth4"]
    - endpoints: ["h3:h3-eth0", "r0:r0-eth2"]
"#,
        "caches.clab.yml",
    )
    .expect("valid topology");
    let (mut net, _) = Network::build(topology).await.expect("build");
    let mesh = net.pingmesh(&Options::default()).await;
    assert!(mesh.full(), "{}", mesh.render());
    let ns = |node: &str| net.ns_name(node).expect("node").to_string();
    let ip = |node: &str, args: &str| {
        let mut cmd = std::process::Command::new("ip");
        cmd.args(["-n", &ns(node)]).args(args.split_whitespace());
        let out = cmd.output().expect("ip");
        assert!(out.status.success(), "{node}: ip {args}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // h1's entries with a link-layer address, as `address mac`.
    let entries = |node: &str| -> Vec<String> {
        let json: serde_json::Value = serde_json::from_str(&ip(node, "-j neigh show")).expect("ip -j neigh");
        let mut out: Vec<String> = json
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| Some(format!("{} {}", e["dst"].as_str()?, e["lladdr"].as_str()?)))
            .collect();
        out.sort();
        out
    };
    assert_eq!(
        net.forget_stale_neighbours().await.expect("forget"),
        0,
        "a healthy network has no stale entry"
    );
    let before = entries("h1");
    let has = |list: &[String], addr: &str| list.iter().any(|e| e.starts_with(&format!("{addr} ")));
    for addr in ["10.0.0.1", "10.0.0.12", "10.0.0.14"] {
        assert!(has(&before, addr), "the mesh left h1 no entry for {addr}: {before:?}");
    }

    // The gateway's address moves away; h2's address moves to r0.
    ip("r0", "addr del 10.0.0.1/24 dev r0-eth1");
    ip("r0", "addr add 10.0.0.254/24 dev r0-eth1");
    ip("h2", "addr del 10.0.0.12/24 dev h2-eth0");
    ip("r0", "addr add 10.0.0.12/24 dev r0-eth1");
    let h1 = ns("h1");
    let h3: std::net::IpAddr = "10.0.1.13".parse().expect("address");
    let timeout = std::time::Duration::from_secs(1);
    assert!(
        netdojo_linux::probe::ping(&h1, h3, timeout).await.expect("ping"),
        "through its cached entry h1 still reaches past a gateway address that is gone"
    );
    let forgotten = net.forget_stale_neighbours().await.expect("forget");
    let after = entries("h1");
    assert!(!has(&after, "10.0.0.1"), "{after:?}");
    assert!(!has(&after, "10.0.0.12"), "h2's MAC address no longer holds 10.0.0.12: {after:?}");
    assert!(after.iter().any(|e| before.contains(e) && e.starts_with("10.0.0.14 ")), "{after:?}");
    assert!(forgotten >= 2, "{forgotten} forgotten");
    assert!(
        !netdojo_linux::probe::ping(&h1, h3, timeout).await.expect("ping"),
        "with the entry forgotten, h1 finds no gateway at 10.0.0.1"
    );
    net.teardown();
}
