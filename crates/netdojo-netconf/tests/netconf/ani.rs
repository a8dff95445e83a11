//! The Agent-Network Interface on real FRR routers: topology, running config, per-command
//! results of update-cfg (a failing command does not stop the ones after it), read-only
//! execute-cmd, and the testcases of the evaluation interface.

use std::path::Path;

use netdojo_core::task::StaticSuite;
use netdojo_core::{EnvironmentFactory, TaskSource, ToolCall};
use netdojo_linux::preflight::{self, Need};
use netdojo_netconf::NetconfFactory;
use serde_json::json;

fn ready(what: &str) -> bool {
    preflight::ready_or_skip(what, &[Need::Root, Need::Frr])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ani_answers_per_command_and_refuses_writes_in_execute_cmd() {
    if !ready("ANI") {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/netconf/static-route.json");
    let suite = StaticSuite::load(&path).expect("task loads as the seed writes it");
    let task = suite.tasks().next().expect("one task").expect("valid");
    assert_eq!((task.id.as_str(), task.application.as_str()), ("static-route", "netconf"));
    let factory = NetconfFactory::new().expect("factory");
    let mut env = factory.create(&task).await.expect("env");
    let brief = env.reset(&task).await.expect("reset");
    assert!(brief.contains("2.2.2.2/32") && brief.contains("R1 eth0 <-> R2 eth0"), "{brief}");

    let topo =
        env.execute(&ToolCall::new("get-topology", json!({"devices": ["R2"]}))).await.expect("topology");
    assert_eq!(topo.data, Some(json!({"topology": {"nodes": ["R2"], "links": ["R1 eth0 <-> R2 eth0"]}})));

    let update = ToolCall::new(
        "update-cfg",
        json!({"device": "R1", "commands": ["configure terminal", "ip route 9.9.9.0/24 10.0.12.2", "frobnicate 8.8.8.0/24", "ip route 7.7.7.0/24 10.0.12.2", "end"]}),
    );
    let obs = env.execute(&update).await.expect("update");
    assert!(!obs.ok, "one command failed, so the call is not ok");
    let results = obs.data.expect("results")["results"].clone();
    let statuses: Vec<&str> =
        results.as_array().expect("array").iter().map(|r| r["status"].as_str().unwrap_or("")).collect();
    assert_eq!(statuses, ["success", "success", "error", "success", "success"], "{results}");
    assert!(results[2]["error"].as_str().unwrap_or("").contains("Unknown command"), "{results}");

    let running =
        env.execute(&ToolCall::new("get-running-cfg", json!({"device": "R1"}))).await.expect("running");
    assert!(running.content.contains("ip route 9.9.9.0/24 10.0.12.2"), "{}", running.content);
    assert!(running.content.contains("ip route 7.7.7.0/24 10.0.12.2"), "{}", running.content);
    assert!(running.content.contains("hostname R1"), "{}", running.content);

    for refused in
        ["configure terminal", "write memory", "clear ip route *", "show ip route\nconfigure terminal"]
    {
        let obs = env
            .execute(&ToolCall::new("execute-cmd", json!({"device": "R1", "command": refused})))
            .await
            .expect("exec");
        assert!(!obs.ok && obs.content.contains("refused"), "{refused:?}: {}", obs.content);
    }
    let show = env
        .execute(&ToolCall::new(
            "execute-cmd",
            json!({"device": "R1", "command": "show ip route 9.9.9.0/24"}),
        ))
        .await
        .expect("show");
    assert!(show.ok && show.content.contains("static"), "{}", show.content);
    let unknown =
        env.execute(&ToolCall::new("get-running-cfg", json!({"device": "R9"}))).await.expect("unknown");
    assert!(!unknown.ok && unknown.content.contains("unknown device `R9`"), "{}", unknown.content);

    // The Linux dialect: nft and tc through the agent sandbox; reads only in execute-cmd.
    let linux = ToolCall::new(
        "update-cfg",
        json!({"device": "R2", "dialect": "linux", "commands": ["nft add table inet t", "nft list ruleset | sh", "ping 1.1.1.1"]}),
    );
    let obs = env.execute(&linux).await.expect("linux update");
    let results = obs.data.expect("results")["results"].clone();
    let statuses: Vec<&str> =
        results.as_array().expect("array").iter().map(|r| r["status"].as_str().unwrap_or("")).collect();
    assert_eq!(statuses, ["success", "error", "error"], "{results}");
    assert!(results[1]["error"].as_str().unwrap_or("").contains("no shell"), "{results}");
    let list = ToolCall::new(
        "execute-cmd",
        json!({"device": "R2", "dialect": "linux", "command": "nft list ruleset"}),
    );
    let obs = env.execute(&list).await.expect("nft list");
    assert!(obs.ok && obs.content.contains("table inet t"), "{}", obs.content);
    for write in [
        "nft flush ruleset",
        "tc qdisc add dev eth0 root tbf rate 1mbit burst 2kb latency 50ms",
        "ip link set eth0 down",
    ] {
        let call =
            ToolCall::new("execute-cmd", json!({"device": "R2", "dialect": "linux", "command": write}));
        let obs = env.execute(&call).await.expect("refused write");
        assert!(!obs.ok && obs.content.contains("read-only"), "{write}: {}", obs.content);
    }

    // The ground truth makes both testcases pass.
    let gt =
        ToolCall::new("update-cfg", json!({"device": "R1", "commands": ["ip route 2.2.2.2/32 10.0.12.2"]}));
    assert!(env.execute(&gt).await.expect("gt").ok);
    let outcome = env.evaluate(&task, None).await.expect("evaluate");
    assert!(outcome.solved(), "{:?}", outcome.checks);
    assert!(outcome.export["configs"]["R1"].as_str().unwrap_or("").contains("ip route 2.2.2.2/32 10.0.12.2"));
    assert!(!outcome.export["initial_configs"]["R1"].as_str().unwrap_or("").contains("ip route 2.2.2.2/32"));
    env.close().await.expect("close");
}

/// Whatever an agent sends is its own failed step: refused FRR commands (files, history), a NUL
/// byte or a huge command, too many commands, Linux refusals that read `refused:` once. None of
/// it is an `Err` (an errored episode), and nothing reaches the host's filesystem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_input_is_a_failed_step_never_an_environment_error() {
    if !ready("agent input") {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/netconf/static-route.json");
    let suite = StaticSuite::load(&path).expect("task loads");
    let task = suite.tasks().next().expect("one task").expect("valid");
    let factory = NetconfFactory::new().expect("factory");
    let mut env = factory.create(&task).await.expect("env");
    env.reset(&task).await.expect("reset");

    let planted = format!("/tmp/netdojo-vty-{}", std::process::id());
    let update = ToolCall::new(
        "update-cfg",
        json!({"device": "R1", "commands": [
            format!("log file {planted}.log"),
            format!("lo fi {planted}.2.log"),
            "ip route 9.9.9.0/24 10.0.12.2".to_string(),
            "router bgp 65001".to_string(),
            format!("dump bgp all {planted}.mrt 1m"),
            "write memory".to_string(),
        ]}),
    );
    let obs = env.execute(&update).await.expect("update is an observation");
    assert!(!obs.ok);
    let results = obs.data.expect("results")["results"].clone();
    let statuses: Vec<&str> =
        results.as_array().expect("array").iter().map(|r| r["status"].as_str().unwrap_or("")).collect();
    assert_eq!(statuses, ["error", "error", "success", "success", "error", "error"], "{results}");
    let first = results[0]["error"].as_str().unwrap_or("");
    assert!(first.starts_with("refused: ") && first.contains("name or write a file"), "{first}");
    for suffix in [".log", ".2.log", ".mrt"] {
        assert!(!Path::new(&format!("{planted}{suffix}")).exists(), "{planted}{suffix} was written");
    }

    let too_long = format!("show ip route {}", "x".repeat(129 * 1024));
    for command in ["show ip\0route", too_long.as_str(), "show history", "sh hist", "show hi"] {
        let call = ToolCall::new("execute-cmd", json!({"device": "R1", "command": command}));
        let obs = env.execute(&call).await.expect("execute-cmd is an observation");
        assert!(!obs.ok && obs.content.contains("refused: "), "{:?}: {}", &command[..12], obs.content);
        assert_eq!(obs.content.matches("refused").count(), 1, "{}", obs.content);
    }

    let many: Vec<String> =
        (0..1001).map(|i| format!("ip route 10.{}.{}.0/24 10.0.12.2", i / 256, i % 256)).collect();
    let obs = env
        .execute(&ToolCall::new("update-cfg", json!({"device": "R1", "commands": many})))
        .await
        .expect("a huge update is an observation");
    assert!(!obs.ok && obs.content.contains("limit is 1000"), "{}", obs.content);

    for (tool, command) in [("execute-cmd", "ip netns list"), ("execute-cmd", "ip link set eth0 down")] {
        let call = ToolCall::new(tool, json!({"device": "R2", "dialect": "linux", "command": command}));
        let obs = env.execute(&call).await.expect("linux refusal");
        assert!(!obs.ok && obs.content.contains("refused: "), "{command}: {}", obs.content);
        assert_eq!(obs.content.matches("refused").count(), 1, "{}", obs.content);
    }
    let call = ToolCall::new(
        "update-cfg",
        json!({"device": "R2", "dialect": "linux", "commands": ["ip link add e0 link-net x type veth peer name e1"]}),
    );
    let obs = env.execute(&call).await.expect("linux update");
    let error = obs.data.expect("results")["results"][0]["error"].as_str().unwrap_or("").to_string();
    assert!(error.starts_with("refused: `link-net` (ip reads it as `link-netns`)"), "{error}");
    assert_eq!(error.matches("refused").count(), 1, "{error}");
    env.close().await.expect("close");
}
