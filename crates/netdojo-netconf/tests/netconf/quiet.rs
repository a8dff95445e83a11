//! What the speed-ups of an episode must not change, on real FRR: the exported sysctls are the
//! lines `sysctl` prints, a testcase's `show` answered by the daemon is what vtysh prints, and
//! the early verdict of a failing episode is the verdict of the whole convergence time.

use std::time::Duration;

use netdojo_core::{Environment, Task};
use netdojo_linux::exec;
use netdojo_linux::preflight::{self, Need};
use netdojo_netconf::env::{SYSCTL_READ, linux_state, scored_sysctl};
use netdojo_netconf::{NetconfEnv, NetconfFactory};

fn ready(what: &str) -> bool {
    preflight::ready_or_skip(what, &[Need::Root, Need::Frr])
}

fn task(name: &str) -> Task {
    netdojo_testkit::static_task(&format!("netconf/{name}.json"))
}

async fn started(name: &str) -> (NetconfEnv, Task) {
    let factory = NetconfFactory::new().expect("factory");
    let mut env = factory.env();
    let task = task(name);
    env.reset(&task).await.expect("reset");
    (env, task)
}

#[tokio::test(flavor = "multi_thread")]
async fn exported_sysctls_are_what_sysctl_prints_and_daemon_shows_what_vtysh_prints() {
    if !ready("export and show") {
        return;
    }
    let (mut env, _task) = started("ospf-single-area").await;
    let net = env.network().and_then(|w| w.upgrade()).expect("network");
    for (device, _) in net.topology().nodes() {
        let ns = net.ns_name(device).expect("namespace");
        let policy = exec::Policy::default();
        // A key away from its default, on one interface.
        exec::run_line(ns, "sysctl -w net.ipv4.conf.eth0.rp_filter=1", &policy)
            .await
            .expect("run")
            .expect("allowed");
        let printed = exec::run_line(ns, SYSCTL_READ, &policy).await.expect("run").expect("allowed").text;
        let expected: String = printed
            .lines()
            .filter(|l| l.split_once(" = ").is_some_and(|(k, _)| scored_sysctl(k)))
            .map(|l| format!("{l}\n"))
            .collect();
        let state = linux_state(ns).await;
        let (_, section) =
            state.split_once(&format!("# {SYSCTL_READ} (the keys a task may set)\n")).expect("section");
        let section: String =
            section.lines().take_while(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect();
        assert!(expected.contains("net.ipv4.conf.eth0.rp_filter = 1"), "{expected}");
        assert_eq!(section, expected, "{device}");

        let frr = net.frr(device).expect("router");
        for command in [
            "show ip route",
            "show ip route json",
            "show ip route 9.9.9.9/32",
            "show ip ospf neighbor",
            "show ip ospf interface",
            "show ip bgp summary",
            "show ip rip status",
        ] {
            let direct = frr.show_text(&[command], Duration::from_secs(10)).await.expect("show");
            let vtysh = frr.vtysh(&["-c", command], Duration::from_secs(10)).await.expect("vtysh").text();
            let mask = netdojo_netconf::quiet::mask_clocks;
            assert_eq!(mask(&direct), mask(&vtysh), "{device}: {command}");
        }
        let both =
            frr.show_text(&["show ip route 9.9.9.9/32", "show ip ospf"], Duration::from_secs(10)).await;
        let vtysh = frr
            .vtysh(&["-c", "show ip route 9.9.9.9/32", "-c", "show ip ospf"], Duration::from_secs(10))
            .await;
        let mask = netdojo_netconf::quiet::mask_clocks;
        assert_eq!(mask(&both.expect("show")), mask(&vtysh.expect("vtysh").text()), "{device}: two commands");
    }
    drop(net);
    env.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_episodes_early_verdict_is_the_verdict_of_the_whole_wait() {
    if !ready("early verdict") {
        return;
    }
    // The no-op agent: nothing configured, the task fails.
    let (mut env, task) = started("ospf-single-area").await;
    let early = env.evaluate(&task, None).await.expect("evaluate");
    let phases = env.phases();
    assert!(!early.solved());
    assert!(phases.early_verdict, "no early verdict: {phases:?}");
    assert!(phases.testcases < Duration::from_secs(8), "{phases:?}");
    env.set_early_verdict(false);
    let full = env.evaluate(&task, None).await.expect("evaluate");
    assert!(!env.phases().early_verdict);
    assert!(env.phases().testcases >= netdojo_netconf::env::CONVERGENCE, "{:?}", env.phases());
    let verdicts =
        |o: &netdojo_core::Outcome| o.checks.iter().map(|c| (c.name.clone(), c.passed)).collect::<Vec<_>>();
    assert_eq!(verdicts(&early), verdicts(&full));
    assert_eq!(early.export["command_score"], full.export["command_score"]);
    env.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_round_waiting_on_a_ping_is_abandoned_once_the_routes_are_there_and_the_verdict_round_is_whole() {
    if !ready("abandoned rounds") {
        return;
    }
    // The oracle's configuration, evaluated at once: OSPF has not converged at the first round,
    // whose shows fail; its ping waits its whole timeout for a route that is not there.
    let (mut env, task) = started("ospf-single-area").await;
    let netdojo_core::TaskKind::Config(config) = &task.kind else { panic!("a configuration task") };
    for (device, commands) in &config.ground_truth_configs {
        let call: netdojo_core::ToolCall = serde_json::from_value(serde_json::json!({
            "name": "update-cfg", "arguments": {"device": device, "commands": commands}
        }))
        .expect("call");
        let obs = env.execute(&call).await.expect("execute");
        assert!(obs.ok, "{device}: {}", obs.content);
    }
    let outcome = env.evaluate(&task, None).await.expect("evaluate");
    let phases = env.phases();
    assert!(outcome.solved(), "{:?}", outcome.checks);
    assert!(phases.abandoned_rounds >= 1 && phases.rounds > phases.abandoned_rounds, "{phases:?}");
    // The verdict is a whole round: every testcase ran in it.
    for check in &outcome.checks {
        assert_ne!(check.detail, "not run", "{}", check.name);
    }
    // A failing episode's verdict too.
    let (mut env2, task2) = started("ospf-single-area").await;
    let failing = env2.evaluate(&task2, None).await.expect("evaluate");
    assert!(!failing.solved());
    for check in &failing.checks {
        assert_ne!(check.detail, "not run", "{}", check.name);
    }
    env.close().await.expect("close");
    env2.close().await.expect("close");
}
