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

/// The published default suite's tasks.
fn default_suite() -> Vec<netdojo_core::Task> {
    use netdojo_core::TaskSource;
    let suite =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/incident/suite/default.jsonl");
    netdojo_core::StaticSuite::load(&suite)
        .expect("the default suite")
        .tasks()
        .collect::<Result<_, _>>()
        .expect("its tasks")
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
    let setup = netdojo_incident::task::setup_of(&task).expect("setup");
    assert_eq!(
        setup.inject_at_start,
        report.at_start.is_none(),
        "the task says whether its faults go in at start as verification found: {:?}",
        report.at_start
    );

    // The oracle: diagnosis, repair, and every check passes.
    let mut e = env(&labs);
    let brief = e.reset(&task).await.expect("reset");
    assert_eq!(brief, task.query);
    let phases = e.phases();
    if setup.inject_at_start {
        // Injected as the lab started: no separate wait for the symptom.
        assert_eq!(phases.symptom, std::time::Duration::ZERO, "{phases:?}");
        assert_eq!(phases.inject, phases.lab.inject, "{phases:?}");
    }
    for call in repair {
        let obs = e.execute(call).await.expect("a step");
        assert!(obs.ok, "{}: {}", call.name, obs.content);
        let check = e.check().await.expect("a check");
        assert!(check.safe, "the oracle's step broke {:?}", check.violations);
    }
    let outcome = e.evaluate(&task, None).await.expect("evaluate");
    e.close().await.expect("close");
    assert!(outcome.solved(), "{:?}", outcome.checks.iter().filter(|c| !c.passed).collect::<Vec<_>>());

    // The no-op: nothing submitted, nothing changed; served the other way (faults injected
    // into the converged lab, then their symptom awaited), which every task supports.
    let mut classic = task.clone();
    classic.setup["inject_at_start"] = json!(false);
    let mut e = env(&labs);
    e.reset(&classic).await.expect("reset");
    assert!(e.phases().symptom > std::time::Duration::ZERO, "{:?}", e.phases());
    let outcome = e.evaluate(&task, None).await.expect("evaluate");
    e.close().await.expect("close");
    let failed: Vec<&str> = outcome.checks.iter().filter(|c| !c.passed).map(|c| c.name.as_str()).collect();
    assert!(failed.contains(&DIAGNOSIS_CHECK), "{failed:?}");
    assert!(failed.len() >= 2, "a health check must fail without a repair: {failed:?}");
}

/// A lab started with faults that do not show the expected symptom is refused, the error naming
/// the checks expected to fail and those failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labs_prepared_ahead_are_served_to_their_episodes_in_order_showing_their_symptom() {
    use netdojo_core::EnvironmentFactory;
    if !ready_or_skip("incident episodes", &[Need::Root, Need::Frr]) {
        return;
    }
    let tasks = default_suite();
    let setup = |t: &netdojo_core::Task| netdojo_incident::task::setup_of(t).expect("setup");
    let one_fault = |at_start: bool| {
        tasks
            .iter()
            .find(|t| t.level == 1 && t.label != HEALTHY && setup(t).inject_at_start == at_start)
            .expect("a one-fault task of that kind")
            .clone()
    };
    let (at_start, after) = (one_fault(true), one_fault(false));
    let control = tasks.iter().find(|t| t.label == HEALTHY).expect("a control").clone();
    let factory =
        netdojo_incident::IncidentFactory::new(labs(), IncidentOptions::default()).expect("the factory");
    // The runner's order: a task run for two epochs is prepared twice, one lab per episode.
    for task in [&at_start, &at_start, &after] {
        factory.prepare(task);
    }
    // Time for some to be ready before their episode asks: those are checked again at reset.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    for (task, prepared) in [(&at_start, true), (&at_start, true), (&after, true), (&control, false)] {
        let mut env = factory.env();
        let brief = env.reset(task).await.unwrap_or_else(|e| panic!("{}: {}", task.id, e.chain()));
        assert_eq!(brief, task.query);
        assert_eq!(env.phases().ahead, prepared, "{}: {:?}", task.id, env.phases());
        let check = env.check().await.expect("a check");
        let failing: Vec<String> = check
            .summary
            .as_ref()
            .and_then(|s| s["failing"].as_array())
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        let symptom = setup(task).symptom;
        assert!(
            symptom.iter().all(|c| failing.contains(c)) && (task.label != HEALTHY || failing.is_empty()),
            "{}: served with {failing:?} failing, its symptom is {symptom:?}",
            task.id
        );
        env.close().await.expect("close");
    }
}

/// A task holding a duplicate router-id, whose symptom races (task 11 on campus: measured, its
/// race settled with 5 of its 9 recorded checks failing in 4 starts of 4), is served once the
/// checks that fail have stayed the same for `RACE_STEADY`, not after the whole symptom window;
/// a lab prepared ahead and found as it was when ready is served on that look. The window here
/// is 40 s, so a reset that waited it out fails the test by far.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racing_task_is_served_once_its_race_has_settled_not_after_the_whole_window() {
    use netdojo_core::EnvironmentFactory;
    if !ready_or_skip("incident episodes", &[Need::Root, Need::Frr]) {
        return;
    }
    let task = default_suite()
        .into_iter()
        .find(|t| t.id == "incident-s1-0011")
        .expect("task 11 of the default suite");
    assert_eq!(task.label, "ospf_duplicate_router_id");
    let symptom = netdojo_incident::task::setup_of(&task).expect("setup").symptom;
    let window = std::time::Duration::from_secs(40);
    let options = IncidentOptions { symptom: window, ..IncidentOptions::default() };
    let factory = netdojo_incident::IncidentFactory::new(labs(), options).expect("the factory");
    let failing_of = |check: &netdojo_core::StateCheck| -> Vec<String> {
        check
            .summary
            .as_ref()
            .and_then(|s| s["failing"].as_array())
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    // Set up as the episode begins, then prepared ahead and taken once ready.
    for ahead in [false, true] {
        if ahead {
            factory.prepare(&task);
            let asked = std::time::Instant::now();
            while factory.prepared(&task) != Some(true) {
                assert!(asked.elapsed() < window, "the lab prepared ahead was not ready within {window:?}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
        let mut env = factory.env();
        let reset = std::time::Instant::now();
        env.reset(&task).await.unwrap_or_else(|e| panic!("{}: {}", task.id, e.chain()));
        let took = reset.elapsed();
        let phases = env.phases();
        assert_eq!(phases.ahead, ahead, "{phases:?}");
        assert!(phases.symptom < window, "its symptom was awaited for the whole window: {phases:?}");
        assert!(took < window, "the reset took {took:?}, the whole window ({phases:?})");
        let failing = failing_of(&env.check().await.expect("a check"));
        assert!(
            symptom.iter().any(|c| failing.contains(c)),
            "served with none of its symptom failing: {failing:?}, its symptom is {symptom:?}"
        );
        env.close().await.expect("close");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lab_started_injected_without_its_symptom_is_refused_by_name() {
    if !ready_or_skip("incident episodes", &[Need::Root, Need::Frr]) {
        return;
    }
    let labs = labs();
    let generator = IncidentGenerator::new(labs.clone(), netdojo_incident::faults::candidates);
    let task = netdojo_core::TaskGenerator::generate(&generator, 1, 0).expect("task 0 draws");
    let setup = netdojo_incident::task::setup_of(&task).expect("setup");
    let faults = netdojo_incident::task::faults_of(&task).expect("faults");
    let inject: Vec<netdojo_incident::Action> = faults.iter().flat_map(|f| f.inject.clone()).collect();
    let wrong: std::collections::BTreeSet<String> = ["reach nowhere -> 192.0.2.99".to_string()].into();
    let err = netdojo_incident::LiveLab::start_injected(
        &labs[&setup.lab],
        None,
        &inject,
        &wrong,
        std::time::Duration::from_secs(2),
    )
    .await
    .expect_err("a symptom that cannot show is refused");
    let text = err.to_string();
    assert!(text.contains("reach nowhere -> 192.0.2.99") && text.contains("not showing"), "{text}");
    // What the routers' daemons said then, for the log, and not in the message.
    let state = err.routers_state().expect("the routers' state is kept");
    for router in labs[&setup.lab].routers() {
        assert!(state.contains(&format!("--- {router}\n")), "{router} missing from:\n{state}");
    }
    for command in [
        "# show interface brief",
        "# show ip ospf neighbor",
        "# show bgp summary",
        "# ip -br address show\nlo ",
    ] {
        assert!(state.contains(command), "{command} missing from:\n{state}");
    }
    assert!(!state.contains("did not answer"), "{state}");
    assert!(!text.contains("# show"), "{text}");
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

/// A step that leaves an adjacency stuck in its database exchange (core's end of the core-access
/// link given a smaller MTU, then the link flapped so that the adjacency forms again: core drops
/// access's database descriptions as too large) is watched past the settle time, for
/// `EXCHANGE_GRACE` more, and is still judged to have broken the adjacency: the grace waits for
/// an exchange that ends by itself, it does not excuse one that never ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adjacency_stuck_in_its_database_exchange_is_watched_longer_and_still_broken() {
    use netdojo_incident::env::EXCHANGE_GRACE;
    if !ready_or_skip("incident episodes", &[Need::Root, Need::Frr]) {
        return;
    }
    let control = default_suite()
        .into_iter()
        .find(|t| t.label == HEALTHY && netdojo_incident::task::setup_of(t).expect("setup").lab == "edge")
        .expect("a control on the edge lab");
    let labs = labs();
    let mut e = env(&labs);
    e.reset(&control).await.unwrap_or_else(|err| panic!("{}: {}", control.id, err.chain()));
    let flap = ToolCall::new(
        tools::CONFIGURE,
        json!({"device": "core", "dialect": "linux", "commands": [
            "ip link set dev eth2 mtu 1400", "ip link set dev eth2 down", "ip link set dev eth2 up"
        ]}),
    );
    let started = std::time::Instant::now();
    let obs = e.execute(&flap).await.expect("a step");
    let watched = started.elapsed();
    assert!(obs.ok, "{}", obs.content);
    let check = e.check().await.expect("a check");
    assert!(
        !check.safe
            && check.violations.iter().any(|v| v.starts_with("ospf core ~ 10.30.255.3 passed before")),
        "{:?}",
        check.violations
    );
    let least = IncidentOptions::default().settle + EXCHANGE_GRACE;
    assert!(watched >= least, "watched for {watched:?}, less than the settle time and the grace ({least:?})");
    e.close().await.expect("close");
}
