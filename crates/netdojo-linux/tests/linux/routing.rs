//! The §C.2 fault catalogue on real networks: every method of every error type breaks
//! reachability, and its repair restores all of it without any repair step breaking a pair.

use crate::common;

use futures::future::join_all;
use netdojo_core::{EnvironmentFactory, Task, TaskKind, ToolCall};
use netdojo_linux::routing::faults::{self, FaultKind};
use netdojo_linux::routing::layout::{Layout, ROUTER};
use netdojo_linux::routing::{RoutingFactory, RoutingOptions};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::json;

/// A one-fault task with a forced method, built as the generator builds them.
fn task_with(kind: FaultKind, method: &str, seed: u64) -> Task {
    let layout = Layout::new(3, 2);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let d = faults::draw(kind, Some(method), &layout, &[], &mut rng).expect("draw");
    let mut fault = d.fault.clone();
    fault.params["inject"] = json!(d.inject);
    let repair =
        d.repair.iter().map(|c| ToolCall::new("exec", json!({"machine": ROUTER, "command": c}))).collect();
    Task {
        id: format!("{}-{method}", kind.abbrev()),
        application: "routing".into(),
        level: 1,
        label: kind.abbrev().into(),
        domain: None,
        seed: Some(seed),
        query: String::new(),
        setup: json!({"subnets": 3, "hosts_per_subnet": 2}),
        kind: TaskKind::Reactive { faults: vec![fault], repair },
    }
}

/// Resets (which fails if the fault broke nothing), plays the repair step by step, checks
/// every step is safe and the end fully reachable. Returns a failure description.
async fn inject_and_repair(factory: &RoutingFactory, task: Task) -> Result<(), String> {
    let mut env = factory.create(&task).await.map_err(|e| e.to_string())?;
    let result = async {
        env.reset(&task).await.map_err(|e| format!("{}: reset: {e}", task.id))?;
        let TaskKind::Reactive { repair, .. } = &task.kind else { unreachable!() };
        for call in repair {
            let obs = env.execute(call).await.map_err(|e| e.to_string())?;
            if !obs.ok {
                return Err(format!(
                    "{}: repair `{}` failed:\n{}",
                    task.id, call.arguments["command"], obs.content
                ));
            }
            let check = env.check().await.map_err(|e| e.to_string())?;
            if !check.safe {
                return Err(format!("{}: repair step unsafe: {:?}", task.id, check.violations));
            }
        }
        let outcome = env.evaluate(&task, None).await.map_err(|e| e.to_string())?;
        if !outcome.solved() {
            return Err(format!("{}: not repaired:\n{}", task.id, outcome.export["pingall"]));
        }
        Ok(())
    }
    .await;
    env.close().await.map_err(|e| e.to_string())?;
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_method_breaks_reachability_and_its_repair_restores_it() {
    if !common::root_or_skip("fault catalogue") {
        return;
    }
    let factory = RoutingFactory::new(RoutingOptions::default()).expect("factory");
    let tasks: Vec<Task> = faults::all_methods()
        .enumerate()
        .map(|(i, (kind, method))| task_with(kind, method, i as u64))
        .collect();
    assert!(tasks.len() >= 19, "the catalogue has {} methods", tasks.len());
    let mut failures = Vec::new();
    for chunk in tasks.chunks(5) {
        let results = join_all(chunk.iter().cloned().map(|t| inject_and_repair(&factory, t))).await;
        failures.extend(results.into_iter().filter_map(Result::err));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A refused command is the agent's failed step, and its message reads `refused:` once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_command_reads_refused_once() {
    if !common::root_or_skip("refusal message") {
        return;
    }
    let factory = RoutingFactory::new(RoutingOptions::default()).expect("factory");
    let Some((kind, method)) = faults::all_methods().next() else { panic!("no fault methods") };
    let task = task_with(kind, method, 7);
    let mut env = factory.create(&task).await.expect("env");
    env.reset(&task).await.expect("reset");
    let mut messages = Vec::new();
    for line in ["ip link add evil0 link-net x type veth peer name y", "ip -n x link", "ip\0link"] {
        let call = ToolCall::new("exec", json!({"machine": ROUTER, "command": line}));
        messages.push(env.execute(&call).await.map(|obs| (obs.ok, obs.content)));
    }
    env.close().await.expect("close");
    for message in messages {
        let (ok, content) = message.expect("a refusal is an observation");
        assert!(!ok && content.matches("refused").count() == 1, "{content}");
    }
}

/// NetPress §C.4 beside eq. 5: a change that restores nothing (the router's txqueuelen) breaks
/// no pair, so it is safe, but it is an unproductive change; reading is neither; the repair's
/// last command restores pairs and is productive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_repairs_nothing_is_safe_but_unproductive() {
    if !common::root_or_skip("unproductive changes") {
        return;
    }
    let factory = RoutingFactory::new(RoutingOptions::default()).expect("factory");
    let Some((kind, method)) = faults::all_methods().next() else { panic!("no fault methods") };
    let task = task_with(kind, method, 11);
    let mut env = factory.create(&task).await.expect("env");
    env.reset(&task).await.expect("reset");
    // Once reset, the tool's schema names the machines.
    let machines = env.tools()[0].parameters["properties"]["machine"]["enum"].clone();
    assert!(
        machines.as_array().is_some_and(|m| m.contains(&json!("r0")) && m.contains(&json!("h1"))),
        "{machines}"
    );
    let mut step = async |command: &str| {
        let call = ToolCall::new("exec", json!({"machine": ROUTER, "command": command}));
        let obs = env.execute(&call).await.expect("execute");
        assert!(obs.ok, "{command}: {}", obs.content);
        env.check().await.expect("check")
    };
    let check = step("ip link set dev lo txqueuelen 500").await;
    assert!(check.safe && check.unproductive, "{check:?}");
    let check = step("ip route").await;
    assert!(check.safe && !check.unproductive, "a read changes nothing: {check:?}");
    let TaskKind::Reactive { repair, .. } = &task.kind else { unreachable!() };
    let mut last = None;
    for call in repair {
        last = Some(step(call.arguments["command"].as_str().unwrap_or_default()).await);
    }
    let last = last.expect("a repair has a command");
    assert!(last.safe && !last.unproductive, "{last:?}");
    env.close().await.expect("close");
}
