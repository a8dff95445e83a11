//! Whole episodes on a live lab (root and FRR; skipped with the reason elsewhere, never under
//! CI): a task verified on its lab, then the oracle's calls solve it, the no-op agent's do
//! not, hostile and mistaken calls are failed steps, and a healthy control stays healthy.

use std::collections::BTreeMap;

use serde_json::json;

use netdojo_core::{Environment, TaskKind, ToolCall};
use netdojo_incident::env::{IncidentEnv, IncidentOptions};
use netdojo_incident::score::DIAGNOSIS_CHECK;
use netdojo_incident::task::{HEALTHY, default_labs_dir, load_labs, tools};
use netdojo_incident::verify::Patience;
use netdojo_incident::{IncidentGenerator, Lab};
use netdojo_linux::preflight::{Need, ready_or_skip};

fn labs() -> BTreeMap<String, Lab> {
    load_labs(&default_labs_dir()).expect("the published labs load")
}

fn env(labs: &BTreeMap<String, Lab>) -> IncidentEnv {
    IncidentEnv::new(std::sync::Arc::new(labs.clone()), IncidentOptions::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oracle_solves_a_verified_task_and_the_noop_does_not() {
    if !ready_or_skip("incident episodes", &[Need::Root, Need::Frr]) {
        return;
    }
    let labs = labs();
    let generator = IncidentGenerator::new(labs.clone(), netdojo_incident::faults::candidates);
    // Task 0 has one fault (the stratification's first level).
    let (task, report) = generator.verified(1, 0, Patience::default()).await.expect("task 0 verifies");
    eprintln!("{} ({}) verified in {:?}; redrawn: {:?}", task.id, task.label, report.took, report.redrawn);
    let TaskKind::Reactive { repair, .. } = &task.kind else { panic!("an incident task is reactive") };

    // The oracle: diagnosis, repair, and every check passes.
    let mut e = env(&labs);
    let brief = e.reset(&task).await.expect("reset");
    assert_eq!(brief, task.query);
    for call in repair {
        let obs = e.execute(call).await.expect("a step");
        assert!(obs.ok, "{}: {}", call.name, obs.content);
        let check = e.check().await.expect("a check");
        assert!(check.safe, "the oracle's step broke {:?}", check.violations);
    }
    let outcome = e.evaluate(&task, None).await.expect("evaluate");
    e.close().await.expect("close");
    assert!(outcome.solved(), "{:?}", outcome.checks.iter().filter(|c| !c.passed).collect::<Vec<_>>());

    // The no-op: nothing submitted, nothing changed.
    let mut e = env(&labs);
    e.reset(&task).await.expect("reset");
    let outcome = e.evaluate(&task, None).await.expect("evaluate");
    e.close().await.expect("close");
    let failed: Vec<&str> = outcome.checks.iter().filter(|c| !c.passed).map(|c| c.name.as_str()).collect();
    assert!(failed.contains(&DIAGNOSIS_CHECK), "{failed:?}");
    assert!(failed.len() >= 2, "a health check must fail without a repair: {failed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mistakes_and_hostile_calls_are_failed_steps_and_a_control_stays_healthy() {
    if !ready_or_skip("incident episodes", &[Need::Root, Need::Frr]) {
        return;
    }
    let labs = labs();
    let generator = IncidentGenerator::new(labs.clone(), netdojo_incident::faults::candidates);
    // Task 9 is a healthy control.
    let (task, _) = generator.verified(1, 9, Patience::default()).await.expect("task 9");
    assert_eq!(task.label, HEALTHY);
    let lab = &labs[&netdojo_incident::task::setup_of(&task).expect("setup").lab];
    let router = lab.routers()[0].to_string();
    let host = lab.hosts()[0].to_string();
    let mut e = env(&labs);
    e.reset(&task).await.expect("reset");
    let refused = [
        ToolCall::new(tools::SHOW, json!({"device": router, "command": "configure terminal"})),
        ToolCall::new(tools::SHOW, json!({"device": host, "command": "show ip route"})),
        ToolCall::new(tools::SHOW, json!({"device": router, "command": "ip link set eth1 down"})),
        ToolCall::new(tools::SHOW, json!({"device": "nope", "command": "ip addr"})),
        ToolCall::new(
            tools::CONFIGURE,
            json!({"device": router, "dialect": "linux", "commands": ["rm -rf /"]}),
        ),
        ToolCall::new(
            tools::CONFIGURE,
            json!({"device": router, "dialect": "frr", "commands": ["log file /etc/passwd"]}),
        ),
        ToolCall::new(
            tools::CONFIGURE,
            json!({"device": host, "dialect": "frr", "commands": ["router ospf"]}),
        ),
        ToolCall::new(tools::PING, json!({"from": host, "to": "not-a-node"})),
        ToolCall::new(tools::SERVICE, json!({"service": "nope", "op": "stop"})),
        ToolCall::new(tools::SUBMIT, json!({"faults": [{"device": "r99", "type": "interface_down"}]})),
        ToolCall::new("rm", json!({})),
    ];
    for call in &refused {
        let obs = e.execute(call).await.expect("a failed step, not an environment error");
        assert!(!obs.ok, "{} {} was accepted: {}", call.name, call.arguments, obs.content);
    }
    // Looking works.
    let obs = e
        .execute(&ToolCall::new(tools::SHOW, json!({"device": router, "command": "show ip route"})))
        .await
        .expect("show");
    assert!(obs.ok, "{}", obs.content);
    let obs = e
        .execute(&ToolCall::new(tools::PING, json!({"from": host, "to": lab.hosts()[1], "count": 1})))
        .await
        .expect("ping");
    assert!(obs.ok && obs.content.contains("1 answered"), "{}", obs.content);
    // The right answer on a control: no fault, no change.
    let obs = e.execute(&ToolCall::new(tools::SUBMIT, json!({"faults": []}))).await.expect("submit");
    assert!(obs.ok, "{}", obs.content);
    let check = e.check().await.expect("check");
    assert!(check.safe && !check.unproductive);
    let outcome = e.evaluate(&task, None).await.expect("evaluate");
    e.close().await.expect("close");
    assert!(outcome.solved(), "{:?}", outcome.checks.iter().filter(|c| !c.passed).collect::<Vec<_>>());
}
