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
