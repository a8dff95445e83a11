//! Testcases of the evaluation interface: the seed's §4.1 shape (`name` + `expected_result`)
//! checked against the device's routing table, beside §4.3 ones, and the convergence rounds
//! going on for every testcase whatever another one's failure or error.

use std::path::{Path, PathBuf};
use std::time::Instant;

use netdojo_core::task::StaticSuite;
use netdojo_core::{Environment, Task, TaskSource, ToolCall};
use netdojo_linux::preflight::{self, Need};
use netdojo_netconf::NetconfFactory;
use serde_json::{Value, json};

fn ready(what: &str) -> bool {
    preflight::ready_or_skip(what, &[Need::Root, Need::Frr])
}

fn suite_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/netconf").join(name)
}

/// `bgp-ebgp` with `extra` testcases after its own, loaded from a file as a suite would be.
fn bgp_with(id: &str, extra: Vec<Value>) -> Task {
    let text = std::fs::read_to_string(suite_file("bgp-ebgp.json")).expect("bgp-ebgp.json");
    let mut task: Value = serde_json::from_str(&text).expect("json");
    if let Some(testcases) = task["testcases"].as_array_mut() {
        testcases.extend(extra);
    }
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{id}.json"));
    std::fs::write(&path, task.to_string()).expect("write the task");
    let suite = StaticSuite::load(&path).expect("task loads");
    suite.tasks().next().expect("one task").expect("valid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expected_result_testcases_check_the_routing_table_and_no_testcase_stops_the_rounds() {
    if !ready("expected_result testcases") {
        return;
    }
    let task = bgp_with(
        "bgp-ebgp-expected-result",
        vec![
            json!({"name": "BGP route from R1 to R2", "expected_result":
                {"protocol": "bgp", "next_hop": "10.0.12.2", "prefix": "2.2.2.2/32", "installed": true, "selected": true}}),
            json!({"name": "R2 learns 1.1.1.1", "device": "R2", "expected_result":
                {"protocol": "bgp", "destination": "1.1.1.1 255.255.255.255", "interface": "eth0", "admin_distance": 20, "metric": 0}}),
            json!({"name": "Static Route from R1 to R2", "expected_result": {"protocol": "static", "next_hop": "10.0.12.2"}}),
            json!({"name": "a testcase that errors", "device": "R1", "commands": ["show ip route"], "expected_output": "("}),
        ],
    );
    let factory = NetconfFactory::new().expect("factory");
    let mut env = factory.env();
    // What this holds is that no testcase stops the rounds: without the early verdict (a
    // quiescent network's failing verdict given before the end, tests/netconf/quiet.rs) they
    // go on to the end.
    env.set_early_verdict(false);
    env.reset(&task).await.expect("reset");
    let netdojo_core::TaskKind::Config(config) = &task.kind else { panic!("a configuration task") };
    for (device, commands) in &config.ground_truth_configs {
        let call = ToolCall::new("update-cfg", json!({"device": device, "commands": commands}));
        assert!(env.execute(&call).await.expect("ground truth").ok, "{device}");
    }
    let start = Instant::now();
    let outcome = env.evaluate(&task, None).await.expect("evaluate");
    let took = start.elapsed();
    env.close().await.expect("close");

    let verdicts: Vec<(&str, bool)> = outcome.checks.iter().map(|c| (c.name.as_str(), c.passed)).collect();
    let passed = verdicts.iter().filter(|(_, p)| *p).count();
    assert_eq!(passed, 6, "bgp-ebgp's four and the two true §4.1 testcases pass: {:#?}", outcome.checks);
    assert_eq!(&verdicts[6..], [("Static Route from R1 to R2", false), ("a testcase that errors", false)]);
    assert!(outcome.checks[6].detail.contains("no route"), "{}", outcome.checks[6].detail);
    assert!(outcome.checks[7].detail.contains("regular expression"), "{}", outcome.checks[7].detail);
    assert!(took >= netdojo_netconf::env::CONVERGENCE, "the rounds went on to the end: {took:?}");
}

/// `static-route` with `testcases` replaced, written where a suite would be read from; the
/// load's error as the author would read it.
fn load_static_route(file: &str, testcases: Value) -> Result<Task, String> {
    let text = std::fs::read_to_string(suite_file("static-route.json")).expect("static-route.json");
    let mut task: Value = serde_json::from_str(&text).expect("json");
    task["testcases"] = testcases;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("testcase-load");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(file);
    std::fs::write(&path, task.to_string()).expect("write the task");
    let suite = StaticSuite::load(&path).map_err(|e| e.to_string())?;
    Ok(suite.tasks().next().expect("one task").expect("valid"))
}

#[test]
fn a_testcase_no_backend_could_run_is_refused_at_load_naming_file_and_field() {
    let good = json!({"name": "Static Route from R1 to R2", "expected_result": {"protocol": "static", "next_hop": "10.0.12.2"}});
    let with_third =
        |third: Value| json!([good, {"name": "on R2", "expected_result": {"prefix": "10.0.12.0/30"}}, third]);

    let err = load_static_route(
        "static-route.json",
        with_third(
            json!({"name": "R1 to R2", "expected_result": {"protocol": "static", "nexthop": "10.0.12.2"}}),
        ),
    )
    .expect_err("unknown key");
    assert!(
        err.ends_with(
            "static-route.json: testcases[2].expected_result.nexthop: unknown key (keys: protocol, next_hop, \
             prefix, destination, interface, distance, admin_distance, metric, installed, selected)"
        ),
        "{err}"
    );
    for (third, field, says) in [
        (
            json!({"name": "Static Route", "expected_result": {"protocol": "static"}}),
            "name",
            "names no device",
        ),
        (
            json!({"name": "R1 and R2", "expected_result": {"protocol": "static"}}),
            "name",
            "several devices (R1, R2)",
        ),
        (json!({"expected_result": {"protocol": "static"}}), "name", "no name"),
        (
            json!({"name": "on R1", "expected_result": {"next_hop": "10.0.12"}}),
            "expected_result.next_hop",
            "not an IP address",
        ),
        (json!({"name": "on R1", "expected_result": {}}), "expected_result", "checks nothing"),
        (
            json!({"device": "R9", "expected_result": {"protocol": "static"}}),
            "device",
            "`R9` is not in topology.nodes",
        ),
    ] {
        let err = load_static_route("bad.json", with_third(third.clone())).expect_err("invalid");
        assert!(
            err.contains(&format!("bad.json: testcases[2].{field}: ")) && err.contains(says),
            "{third}: {err}"
        );
    }
}

/// The seed's §4.1 example as the draft prints it, less the `...` that are not JSON.
#[test]
fn the_drafts_example_loads_and_its_testcases_resolve_to_newyork() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/netconf-draft/draft-example.json");
    let suite = StaticSuite::load(&path).expect("the draft's example loads");
    let task = suite.tasks().next().expect("one task").expect("valid");
    assert_eq!((task.id.as_str(), task.label.as_str()), ("draft-example", "Static Routing"));
    let netdojo_core::TaskKind::Config(config) = &task.kind else { panic!("a configuration task") };
    assert_eq!(
        config.topology.links,
        ["NewYork S0/0 <-> Washington S0/0 ", "NewYork S0/1 <-> Washington S0/1"]
    );
    assert!(
        config.startup_configs["NewYork"]
            .starts_with("!\r\nversion 12.4\r\nservice timestamps debug datetime msec\r\n")
    );
    let resolved: Vec<(String, Vec<&str>)> = config
        .testcases
        .iter()
        .map(|tc| {
            let device =
                netdojo_core::testcase::testcase_device(tc, &config.topology.nodes).expect("a device");
            let checks =
                netdojo_core::testcase::route_checks(tc.expected_result.as_ref().expect("expected_result"))
                    .expect("checks");
            (device, checks.iter().map(|c| c.key()).collect())
        })
        .collect();
    assert_eq!(resolved, [("NewYork".to_string(), vec!["protocol", "next_hop"])]);
}
