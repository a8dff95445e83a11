//! The containment suite on the routing environment's `exec` tool (issue 14): every Linux line
//! of the hostile corpus (`testdata/containment/corpus.txt`) sent as an agent would, by
//! `Environment::execute`, on the router of an attacking episode while a victim episode of the
//! same task runs beside it. After every line: the host (root namespace, /proc/sys, /tmp,
//! /etc/frr, /root, /run/netns, processes) and the victim's router are unchanged; after every
//! batch and at the end, the victim's score (its pingmesh) is too. The judge and the counts are
//! `netdojo_linux::containment`'s; it tolerates no escape (`TOLERATED_ESCAPES` is empty).

use std::path::Path;
use std::time::Duration;

use crate::common;

use netdojo_core::{Environment, Task, TaskGenerator, ToolCall};
use netdojo_linux::containment::{self, Entry, Outcome, Run, Vars};
use netdojo_linux::routing::{RoutingEnv, RoutingGenerator, RoutingOptions};
use netdojo_linux::{exec, pingmesh};
use serde_json::json;

/// Victim score checked after this many lines (a pingmesh of the victim's whole network).
const BATCH: usize = 40;

fn options() -> RoutingOptions {
    RoutingOptions {
        // Nodes on one machine answer in microseconds; a short deadline keeps 400 lines with a
        // pingmesh each (a faulty network always waits for the deadline) near a minute.
        mesh: pingmesh::Options {
            deadline: Duration::from_millis(150),
            resend: vec![Duration::from_millis(30), Duration::from_millis(80)],
        },
        // Long-running commands (monitors) are killed by the time limit: 1 s is enough to see
        // that they are.
        exec: exec::Policy { timeout: Duration::from_secs(1), ..exec::Policy::default() },
    }
}

fn task() -> Task {
    RoutingGenerator.generate(1, 8).expect("a routing task")
}

async fn episode(task: &Task) -> RoutingEnv {
    let mut env = RoutingEnv::new(options());
    env.reset(task).await.expect("reset");
    env
}

fn ns_of(env: &RoutingEnv, node: &str) -> String {
    let net = env.network().and_then(|w| w.upgrade()).expect("network");
    net.ns_name(node).expect("node").to_string()
}

fn all_ns(env: &RoutingEnv) -> Vec<String> {
    let net = env.network().and_then(|w| w.upgrade()).expect("network");
    net.topology().nodes().filter_map(|(n, _)| net.ns_name(n).map(str::to_string)).collect()
}

async fn score(env: &mut RoutingEnv, task: &Task) -> String {
    let outcome = env.evaluate(task, None).await.expect("victim evaluates");
    outcome.export["pingall"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_exec_contains_the_hostile_corpus() {
    if !common::root_or_skip("containment: routing exec") {
        return;
    }
    let _one = containment::exclusive().await;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(containment::CORPUS);
    let cases = containment::load(&path).expect("corpus");
    let task = task();
    let mut victim = episode(&task).await;
    let mut attacker = episode(&task).await;
    let victim_ns = ns_of(&victim, "r0");
    let self_ns = ns_of(&attacker, "r0");
    let mut resident = containment::resident(&victim_ns).expect("a process in the victim");
    let prefix = victim_ns.rsplit_once('-').map(|(p, _)| p.to_string()).unwrap_or_default();
    let vars = Vars {
        victim_addr: containment::first_address(&victim_ns, "r0-eth1"),
        victim_ns,
        victim_prefix: prefix,
        victim_pid: resident.id(),
        victim_if: "r0-eth1".into(),
        self_ns,
        self_if: "r0-eth1".into(),
    };
    let victim_score = score(&mut victim, &task).await;
    let mut watch = all_ns(&victim);
    watch.extend(all_ns(&attacker));
    let mut run = Run::new("routing exec", vars.clone(), watch, all_ns(&victim));
    let irreversible = containment::irreversible_allowed();
    let mut sent_lines = 0;
    for case in cases.iter().filter(|c| c.entries.contains(&Entry::Linux)) {
        if case.host_irreversible && !irreversible {
            run.skip(case);
            continue;
        }
        let command = case.fill(&vars).concat();
        let call = ToolCall::new("exec", json!({"machine": "r0", "command": command}));
        let outcome = match attacker.execute(&call).await {
            Err(e) => Outcome::Errored(e.to_string()),
            Ok(obs) if !obs.ok && obs.content.trim_start_matches("error: ").starts_with("refused") => {
                Outcome::Refused(obs.content)
            }
            Ok(obs) => Outcome::Ran { ok: obs.ok, text: obs.content },
        };
        run.judge(case, &command, outcome, Vec::new());
        sent_lines += 1;
        if sent_lines % BATCH == 0 {
            let now = score(&mut victim, &task).await;
            if now != victim_score {
                run.attribute(case, &command, vec![format!("victim pingmesh moved: {now}")]);
            }
        }
    }
    let now = score(&mut victim, &task).await;
    if let Some(last) = cases.iter().rfind(|c| c.entries.contains(&Entry::Linux))
        && now != victim_score
    {
        run.attribute(last, "", vec![format!("victim pingmesh moved by the end: {now}")]);
    }
    let _ = resident.kill();
    let _ = resident.wait();
    attacker.close().await.expect("close");
    victim.close().await.expect("close");
    run.finish();
}

/// The snapshot's ignore lists hold: two snapshots of a host where nothing is attacked agree,
/// while a network is built and torn down beside them (the noise of concurrent runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_snapshots_of_an_unattacked_host_agree() {
    if !common::root_or_skip("containment: host snapshot") {
        return;
    }
    let _one = containment::exclusive().await;
    let before = netdojo_linux::hostcheck::Snapshot::take(&[]);
    for key in [
        "/proc/sys/net/ipv4/ip_forward",
        "/proc/sys/kernel/hostname",
        "/proc/sys/net/core/somaxconn",
        "ip -o link",
    ] {
        assert!(before.get(key).is_some(), "the snapshot reads {key}");
    }
    let task = task();
    let mut env = episode(&task).await;
    env.close().await.expect("close");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = netdojo_linux::hostcheck::Snapshot::take(&[]);
    let changes = before.diff(&after);
    assert!(
        changes.is_empty(),
        "changed by itself (add to hostcheck's ignore lists, with the reason):\n{}",
        changes.iter().map(|c| c.to_string()).collect::<Vec<_>>().join("\n")
    );
}
