//! The containment suite on NetConfBench's tools (issue 14): the hostile corpus
//! (`testdata/containment/corpus.txt`) through `update-cfg` (dialects frr and linux) and
//! `execute-cmd` (frr and linux) of an attacking episode, by `Environment::execute`, while a
//! victim episode of the same task runs beside it with its ground truth applied. After every
//! line: the host and the victim's routers (namespaces) are unchanged, and a read-only
//! `execute-cmd` left the attacker's own router as it was; after every batch and at the end,
//! the victim's running configurations and testcases are. The judge and the counts are
//! `netdojo_linux::containment`'s.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use netdojo_core::{Environment, Task, ToolCall};
use netdojo_linux::containment::{self, Case, Entry, Outcome, Run, Vars};
use netdojo_linux::hostcheck;
use netdojo_linux::network::Network;
use netdojo_linux::preflight::{self, Need};
use netdojo_netconf::NetconfEnv;
use serde_json::json;

/// The victim's score (testcases, running configurations) is checked after this many lines.
const BATCH: usize = 50;

fn ready(what: &str) -> bool {
    preflight::ready_or_skip(what, &[Need::Root, Need::Frr])
}

fn task() -> Task {
    netdojo_testkit::static_task("netconf/static-route.json")
}

fn net(env: &NetconfEnv) -> Arc<Network> {
    env.network().and_then(|w| w.upgrade()).expect("network")
}

fn all_ns(env: &NetconfEnv) -> Vec<String> {
    let net = net(env);
    net.topology().nodes().filter_map(|(n, _)| net.ns_name(n).map(str::to_string)).collect()
}

/// The victim's score: its testcases (the ground truth is applied, so they pass) and its
/// running configurations.
async fn score(env: &mut NetconfEnv, task: &Task) -> String {
    let outcome = env.evaluate(task, None).await.expect("victim evaluates");
    let checks: Vec<String> = outcome.checks.iter().map(|c| format!("{}={}", c.name, c.passed)).collect();
    format!("{}\n{}", checks.join(", "), outcome.export["configs"])
}

/// The attacker's own router, for the read-only tools: its namespace (dialect linux) or its FRR
/// configuration (dialect frr).
async fn own_state(env: &NetconfEnv, dialect: &str) -> String {
    let net = net(env);
    if dialect == "linux" {
        return hostcheck::namespace_state(net.ns_name("R1").unwrap_or_default());
    }
    match net.frr("R1") {
        Some(frr) => frr.running_config().await.unwrap_or_else(|e| e.to_string()),
        None => String::new(),
    }
}

struct Setup {
    task: Task,
    victim: NetconfEnv,
    attacker: NetconfEnv,
    resident: std::process::Child,
    run: Run,
    victim_score: String,
    cases: Vec<Case>,
    /// The attacker's router's configuration before the attack.
    base_config: String,
}

async fn setup(entry: &str) -> Setup {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(containment::CORPUS);
    let cases = containment::load(&path).expect("corpus");
    let task = task();
    let mut victim = NetconfEnv::default();
    victim.reset(&task).await.expect("victim reset");
    let truth =
        ToolCall::new("update-cfg", json!({"device": "R1", "commands": ["ip route 2.2.2.2/32 10.0.12.2"]}));
    assert!(victim.execute(&truth).await.expect("ground truth").ok);
    let victim_net = net(&victim);
    // The victim's harness reads a route nobody else knows of: an attacker that can read it
    // back (vtysh's history) reads other tasks' hidden commands.
    if let Some(frr) = victim_net.frr("R1") {
        let canary = format!("show ip route {}/32", containment::CANARY);
        let _ = frr.vtysh(&["-c", &canary], Duration::from_secs(10)).await;
    }
    let mut attacker = NetconfEnv::default();
    attacker.reset(&task).await.expect("attacker reset");
    let victim_ns = victim_net.ns_name("R1").expect("R1").to_string();
    let self_ns = net(&attacker).ns_name("R1").expect("R1").to_string();
    let resident = containment::resident(&victim_ns).expect("a process in the victim");
    let vars = Vars {
        victim_addr: containment::first_address(&victim_ns, "eth0"),
        victim_prefix: victim_ns.rsplit_once('-').map(|(p, _)| p.to_string()).unwrap_or_default(),
        victim_ns,
        victim_pid: resident.id(),
        victim_if: "eth0".into(),
        self_ns,
        self_if: "eth0".into(),
    };
    let victim_score = score(&mut victim, &task).await;
    assert!(
        victim_score.starts_with("R1 has a static route to 2.2.2.2/32 via 10.0.12.2=true"),
        "{victim_score}"
    );
    let mut watch = all_ns(&victim);
    watch.extend(all_ns(&attacker));
    let run = Run::new(entry, vars, watch, all_ns(&victim));
    let base_config = match net(&attacker).frr("R1") {
        Some(frr) => frr.running_config().await.expect("running config"),
        None => String::new(),
    };
    Setup { task, victim, attacker, resident, run, victim_score, cases, base_config }
}

impl Setup {
    async fn batch_check(&mut self, case: &Case, sent: &str) {
        let now = score(&mut self.victim, &self.task).await;
        if now != self.victim_score {
            self.run.attribute(case, sent, vec![format!("victim score moved: {now}")]);
            self.victim_score = now;
        }
    }

    async fn finish(mut self) {
        if let Some(last) = self.cases.last().cloned() {
            self.batch_check(&last, "(end of the run)").await;
        }
        let _ = self.resident.kill();
        let _ = self.resident.wait();
        self.attacker.close().await.expect("close");
        self.victim.close().await.expect("close");
        self.run.finish();
    }
}

/// Sends every line for `entry` through `tool` with `dialect`; `read_only` tools must also leave
/// the attacker's own router as it was.
async fn corpus_through(what: &str, entry: Entry, tool: &str, dialect: &str, read_only: bool) {
    if !ready(what) {
        return;
    }
    let _one = containment::exclusive().await;
    let mut s = setup(what).await;
    let irreversible = containment::irreversible_allowed();
    let cases: Vec<Case> = s.cases.iter().filter(|c| c.entries.contains(&entry)).cloned().collect();
    let mut sent_lines = 0;
    for case in &cases {
        if case.host_irreversible && !irreversible {
            s.run.skip(case);
            continue;
        }
        let commands = case.fill(s.run.vars());
        let sent = commands.join("\n");
        let args = if tool == "update-cfg" {
            json!({"device": "R1", "dialect": dialect, "commands": commands})
        } else {
            json!({"device": "R1", "dialect": dialect, "command": commands.concat()})
        };
        let before = if read_only { Some(own_state(&s.attacker, dialect).await) } else { None };
        let outcome = match s.attacker.execute(&ToolCall::new(tool, args)).await {
            Err(e) => Outcome::Errored(e.to_string()),
            Ok(obs) => Outcome::of_observation(&obs.content, obs.ok, obs.data.as_ref()),
        };
        let mut own = Vec::new();
        if let Some(before) = before {
            let after = own_state(&s.attacker, dialect).await;
            if after != before {
                own.push(format!("a read-only {tool} changed the attacker's own router"));
            }
        }
        let escapes = s.run.escapes.len();
        s.run.judge(case, &sent, outcome, own);
        if s.run.escapes.len() > escapes
            && dialect == "frr"
            && let Some(frr) = net(&s.attacker).frr("R1")
        {
            // What escaped (a log file, a dump) keeps writing while it is configured: the
            // attacker's router goes back to its start so the next line starts clean.
            let cleanup: Vec<String> = containment::FRR_CLEANUP.iter().map(|c| c.to_string()).collect();
            let _ = netdojo_netconf::env::apply_commands(frr, &cleanup, false).await;
            let _ = frr.reload(&s.base_config).await;
        }
        sent_lines += 1;
        if sent_lines % BATCH == 0 {
            s.batch_check(case, &sent).await;
        }
    }
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_cfg_frr_contains_the_hostile_corpus() {
    corpus_through("containment: update-cfg frr", Entry::FrrConfig, "update-cfg", "frr", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_cmd_frr_contains_the_hostile_corpus() {
    corpus_through("containment: execute-cmd frr", Entry::FrrExec, "execute-cmd", "frr", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_cfg_linux_contains_the_hostile_corpus() {
    corpus_through("containment: update-cfg linux", Entry::Linux, "update-cfg", "linux", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_cmd_linux_contains_the_hostile_corpus() {
    corpus_through("containment: execute-cmd linux", Entry::Linux, "execute-cmd", "linux", true).await;
}
