//! The containment suite over MCP (issue 14): the hostile corpus
//! (`testdata/containment/corpus.txt`) through the network tools of an attacking episode
//! served on HTTP, while a victim episode of the same task runs beside it: a routing task's
//! Linux router (`network.cli.exec`, `network.cli.configure` + `network.commit`,
//! `network.file.push` + `network.commit`) and a NetConfBench task's FRR router (the same
//! tools). After every line: the host and the victim's namespaces are unchanged, and a
//! read-only `network.cli.exec` left the attacker's own router as it was; after every batch
//! and at the end, the victim's score is unchanged. An answer -32603 (internal error) or an
//! errored episode fails the run. The judge and the counts are `netdojo_linux::containment`'s.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::common::{Client, call, client};
use netdojo_core::runner::Budget;
use netdojo_core::store::RunDir;
use netdojo_core::{Environment, Task, TaskGenerator, ToolCall};
use netdojo_linux::containment::{self, Case, Entry, Outcome, Run, Vars};
use netdojo_linux::hostcheck;
use netdojo_linux::routing::{RoutingEnv, RoutingGenerator, RoutingOptions};
use netdojo_linux::{exec, pingmesh};
use netdojo_mcp::episode::{McpFactory, run_config};
use netdojo_mcp::{Episode, Role, Settings};
use netdojo_netconf::NetconfEnv;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const BATCH: usize = 50;

fn routing_options() -> RoutingOptions {
    RoutingOptions {
        mesh: pingmesh::Options {
            deadline: Duration::from_millis(150),
            resend: vec![Duration::from_millis(30), Duration::from_millis(80)],
        },
        exec: exec::Policy { timeout: Duration::from_secs(1), ..exec::Policy::default() },
    }
}

fn settings() -> Settings {
    Settings { exec_timeout: Duration::from_secs(2), ..Settings::default() }
}

/// What the attacker runs on: a routing task's Linux nodes, or a NetConfBench task's FRR
/// routers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Linux,
    Frr,
}

/// A victim episode of the same kind, outside MCP (the environment itself).
enum Victim {
    Linux(RoutingEnv),
    Frr(NetconfEnv),
}

impl Victim {
    async fn start(kind: Kind, task: &Task) -> Self {
        match kind {
            Kind::Linux => {
                let mut env = RoutingEnv::new(routing_options());
                env.reset(task).await.expect("victim reset");
                Victim::Linux(env)
            }
            Kind::Frr => {
                let mut env = NetconfEnv::default();
                env.reset(task).await.expect("victim reset");
                let truth = ToolCall::new(
                    "update-cfg",
                    json!({"device": "R1", "commands": ["ip route 2.2.2.2/32 10.0.12.2"]}),
                );
                assert!(env.execute(&truth).await.expect("ground truth").ok);
                Victim::Frr(env)
            }
        }
    }

    fn net(&self) -> Arc<netdojo_linux::network::Network> {
        let weak = match self {
            Victim::Linux(e) => e.network(),
            Victim::Frr(e) => e.network(),
        };
        weak.and_then(|w| w.upgrade()).expect("victim network")
    }

    fn namespaces(&self) -> Vec<String> {
        let net = self.net();
        net.topology().nodes().filter_map(|(n, _)| net.ns_name(n).map(str::to_string)).collect()
    }

    async fn score(&mut self, task: &Task) -> String {
        match self {
            Victim::Linux(e) => {
                let o = e.evaluate(task, None).await.expect("victim evaluates");
                o.export["pingall"].as_str().unwrap_or_default().to_string()
            }
            Victim::Frr(e) => {
                let o = e.evaluate(task, None).await.expect("victim evaluates");
                let checks: Vec<String> =
                    o.checks.iter().map(|c| format!("{}={}", c.name, c.passed)).collect();
                format!("{}\n{}", checks.join(", "), o.export["configs"])
            }
        }
    }

    async fn close(self) {
        match self {
            Victim::Linux(mut e) => e.close().await.expect("close"),
            Victim::Frr(mut e) => e.close().await.expect("close"),
        }
    }
}

/// The attacking episode, served on streamable HTTP.
struct Attacker {
    episode: Episode,
    cancel: CancellationToken,
    client: Client,
    device: &'static str,
    ns: String,
    namespaces: Vec<String>,
    _dir: tempfile::TempDir,
}

async fn attacker(kind: Kind, task: Task) -> Attacker {
    let dir = tempfile::tempdir().expect("tempdir");
    let budget = Budget { max_steps: 1_000_000, ..netdojo_mcp::serve::default_budget() };
    let store =
        RunDir::create(dir.path().join("run"), &run_config(&task, &settings(), &budget)).expect("run dir");
    let scorers = netdojo_mcp::serve::scorers_for(&task);
    let factory = match kind {
        Kind::Linux => McpFactory::routing(routing_options(), settings()),
        Kind::Frr => McpFactory::new(settings()),
    }
    .expect("factory");
    let episode = Episode::start_on(factory, task, scorers, budget, store);
    let live = episode.link.live().await.expect("network up");
    let device = if kind == Kind::Linux { "r0" } else { "R1" };
    let ns = live.devices.get(device).ok().and_then(|d| d.namespace()).expect("namespace");
    let namespaces =
        live.devices.names().iter().filter_map(|n| live.devices.get(n).ok()?.namespace()).collect();
    let cancel = CancellationToken::new();
    let app = netdojo_mcp::transport::router(
        episode.link.clone(),
        &live.devices.names(),
        Role::Operator,
        settings(),
        &cancel,
    );
    let (addr, _server) = netdojo_mcp::transport::serve_http(app, 0, cancel.clone()).await.expect("bind");
    let client = client(&format!("http://{addr}/mcp/{device}")).await;
    Attacker { episode, cancel, client, device, ns, namespaces, _dir: dir }
}

/// An MCP answer as the judge reads it: a bad-input or refused-by-the-device error is a
/// refusal, -32603 and a gone episode are environment errors.
fn classify(result: &Result<rmcp::model::CallToolResult, rmcp::model::ErrorData>) -> Outcome {
    match result {
        Err(e) if matches!(e.code.0, -32603 | -32082) => {
            Outcome::Errored(format!("{}: {}", e.code.0, e.message))
        }
        Err(e) => Outcome::Refused(format!("{}: {}", e.code.0, e.message)),
        Ok(r) => {
            let text = r
                .structured_content
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_else(|| format!("{:?}", r.content));
            Outcome::Ran { ok: r.is_error != Some(true), text }
        }
    }
}

/// Which MCP tools a line goes through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tool {
    Exec,
    Configure,
    Push,
}

/// The attacker's own router, for the read-only tool: its namespace (Linux) or its running
/// configuration (FRR).
async fn own_state(a: &Attacker, kind: Kind) -> String {
    if kind == Kind::Linux {
        return hostcheck::namespace_state(&a.ns);
    }
    match call(&a.client, "network.file.pull", json!({"file": "running-config"})).await {
        Ok(r) => r.structured_content.map(|v| v["content"].to_string()).unwrap_or_default(),
        Err(e) => e.message.to_string(),
    }
}

async fn corpus_through(what: &str, kind: Kind, tool: Tool) {
    if !super::common::ready(what) {
        return;
    }
    let _one = containment::exclusive().await;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(containment::CORPUS);
    let cases = containment::load(&path).expect("corpus");
    let task = match kind {
        Kind::Linux => RoutingGenerator.generate(1, 8).expect("a routing task"),
        Kind::Frr => super::common::task("static-route"),
    };
    let entry = match (kind, tool) {
        (Kind::Linux, _) => Entry::Linux,
        (Kind::Frr, Tool::Exec) => Entry::FrrExec,
        (Kind::Frr, _) => Entry::FrrConfig,
    };
    let mut victim = Victim::start(kind, &task).await;
    let victim_ns =
        victim.net().ns_name(if kind == Kind::Linux { "r0" } else { "R1" }).expect("router").to_string();
    if let Victim::Frr(_) = &victim
        && let Some(frr) = victim.net().frr("R1")
    {
        let canary = format!("show ip route {}/32", containment::CANARY);
        let _ = frr.vtysh(&["-c", &canary], Duration::from_secs(10)).await;
    }
    let a = attacker(kind, task.clone()).await;
    let mut resident = containment::resident(&victim_ns).expect("a process in the victim");
    let victim_if = if kind == Kind::Linux { "r0-eth1" } else { "eth0" };
    let vars = Vars {
        victim_addr: containment::first_address(&victim_ns, victim_if),
        victim_prefix: victim_ns.rsplit_once('-').map(|(p, _)| p.to_string()).unwrap_or_default(),
        victim_ns,
        victim_pid: resident.id(),
        victim_if: victim_if.into(),
        self_ns: a.ns.clone(),
        self_if: victim_if.into(),
    };
    let base_config = match kind {
        Kind::Frr => call(&a.client, "network.file.pull", json!({"file": "running-config"}))
            .await
            .ok()
            .and_then(|r| r.structured_content)
            .and_then(|v| v["content"].as_str().map(str::to_string))
            .unwrap_or_default(),
        Kind::Linux => String::new(),
    };
    let mut victim_score = victim.score(&task).await;
    let mut watch = victim.namespaces();
    watch.extend(a.namespaces.clone());
    let mut run = Run::new(what, vars.clone(), watch, victim.namespaces());
    let irreversible = containment::irreversible_allowed();
    // A commit on a Linux device snapshots the node, applies and takes a pingmesh (about a
    // second on 2 cores): configure and file.push there take the categories that change state
    // across namespaces and files; NETDOJO_CONTAINMENT_FULL=1 sends them the whole corpus.
    // network.cli.exec takes the whole corpus always.
    let full = std::env::var("NETDOJO_CONTAINMENT_FULL").is_ok_and(|v| v == "1");
    let subset = kind == Kind::Linux && tool != Tool::Exec && !full;
    let mine: Vec<Case> = cases
        .iter()
        .filter(|c| c.entries.contains(&entry))
        .filter(|c| !subset || matches!(c.category.as_str(), "namespaces" | "files"))
        .cloned()
        .collect();
    let mut sent_lines = 0;
    for case in &mine {
        if case.host_irreversible && !irreversible {
            run.skip(case);
            continue;
        }
        let commands = case.fill(&vars);
        let sent = commands.join("\n");
        let before = if tool == Tool::Exec { Some(own_state(&a, kind).await) } else { None };
        let outcome = match tool {
            Tool::Exec => classify(
                &call(
                    &a.client,
                    "network.cli.exec",
                    json!({"device": a.device, "command": commands.concat()}),
                )
                .await,
            ),
            Tool::Configure | Tool::Push => {
                let staged = if tool == Tool::Configure {
                    call(
                        &a.client,
                        "network.cli.configure",
                        json!({"device": a.device, "commands": commands}),
                    )
                    .await
                } else if kind == Kind::Frr {
                    let content = format!("{base_config}\n{}\n", commands.join("\n"));
                    call(
                        &a.client,
                        "network.file.push",
                        json!({"device": a.device, "file": "running-config", "content": content}),
                    )
                    .await
                } else {
                    let content = commands.join("\n");
                    call(
                        &a.client,
                        "network.file.push",
                        json!({"device": a.device, "file": "candidate-config", "content": content}),
                    )
                    .await
                };
                match classify(&staged) {
                    Outcome::Ran { ok: true, .. } if !(tool == Tool::Push && kind == Kind::Frr) => {
                        classify(&call(&a.client, "network.commit", json!({"device": a.device})).await)
                    }
                    other => other,
                }
            }
        };
        let mut own = Vec::new();
        if let Some(before) = before
            && own_state(&a, kind).await != before
        {
            own.push("a read-only network.cli.exec changed the attacker's own router".to_string());
        }
        let escapes = run.escapes.len();
        run.judge(case, &sent, outcome, own);
        if run.escapes.len() > escapes && kind == Kind::Frr {
            // What escaped (a log file, a dump) keeps writing while it is configured: the
            // attacker's router goes back to its start so the next line starts clean.
            let cleanup = json!({"device": a.device, "commands": containment::FRR_CLEANUP});
            let _ = call(&a.client, "network.cli.configure", cleanup).await;
            let _ = call(&a.client, "network.commit", json!({"device": a.device})).await;
            let _ = call(
                &a.client,
                "network.file.push",
                json!({"device": a.device, "file": "running-config", "content": base_config}),
            )
            .await;
        }
        sent_lines += 1;
        if sent_lines % BATCH == 0 {
            let now = victim.score(&task).await;
            if now != victim_score {
                run.attribute(case, &sent, vec![format!("victim score moved: {now}")]);
                victim_score = now;
            }
        }
    }
    if let Some(last) = mine.last() {
        let now = victim.score(&task).await;
        if now != victim_score {
            run.attribute(last, "(end of the run)", vec![format!("victim score moved by the end: {now}")]);
        }
    }
    a.episode.stop();
    let finished = a.episode.join().await;
    a.cancel.cancel();
    let _ = resident.kill();
    let _ = resident.wait();
    victim.close().await;
    if let Some(error) = finished.and_then(|f| f.error.or(f.record.and_then(|r| r.error))) {
        run.attribute(
            mine.last().expect("lines"),
            "(the episode)",
            vec![format!("the episode errored: {error}")],
        );
    }
    run.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mcp_linux_exec_contains_the_hostile_corpus() {
    corpus_through("containment: mcp linux network.cli.exec", Kind::Linux, Tool::Exec).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mcp_linux_configure_commit_contains_the_hostile_corpus() {
    corpus_through("containment: mcp linux network.cli.configure", Kind::Linux, Tool::Configure).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mcp_linux_file_push_contains_the_hostile_corpus() {
    corpus_through("containment: mcp linux network.file.push", Kind::Linux, Tool::Push).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mcp_frr_exec_contains_the_hostile_corpus() {
    corpus_through("containment: mcp frr network.cli.exec", Kind::Frr, Tool::Exec).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mcp_frr_configure_commit_contains_the_hostile_corpus() {
    corpus_through("containment: mcp frr network.cli.configure", Kind::Frr, Tool::Configure).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mcp_frr_file_push_contains_the_hostile_corpus() {
    corpus_through("containment: mcp frr network.file.push", Kind::Frr, Tool::Push).await;
}
