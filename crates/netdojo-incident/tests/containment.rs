//! The containment suite on the incident tools: the hostile corpus
//! (`testdata/containment/corpus.txt`), and every spelling iproute2 accepts for the keywords
//! that reach another namespace, a file or a program, sent by `Environment::execute` through
//! `configure` (dialects linux and frr), `show` (vtysh and the Linux read-only forms), `ping`,
//! `traceroute` and `service` of an attacking episode, while a victim episode of the same task
//! (a healthy control of the services lab) runs beside it. Every hostile call must be a failed
//! step (`ok: false`), never an environment error (an errored episode). After every line that
//! ran (a refused line runs nothing; the next check would see what it changed): the
//! host (root namespace, /proc/sys, /tmp, /etc/frr, /root, /run/netns, processes) and the
//! victim's namespaces are unchanged, and a read-only tool left the attacker's own router as it
//! was; after every batch and at the end, the victim's health checks and FRR configurations are.
//! The judge and the counts are `netdojo_linux::containment`'s. `NETDOJO_CONTAINMENT_ONLY=
//! ShowLinux,Ping` narrows a run to some of the ways in.
//!
//! /tmp and /run/netns: the test runs in a mount namespace of its own with a fresh /tmp and
//! /run/netns (see [`private_tmp`]), so every process of both episodes (the FRR daemons, the
//! services, the jailed commands and vtysh) sees those, and the snapshot judges every entry of
//! them: what other work on the machine writes in the host's /tmp (pip, builds) or adds to and
//! deletes from its /run/netns (other test runs) is not in them and cannot be mistaken for an
//! escape, while nothing an episode writes there is left out.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use netdojo_core::{Environment, Task, ToolCall};
use netdojo_incident::env::{IncidentEnv, IncidentOptions};
use netdojo_incident::generate::Draw;
use netdojo_incident::task::{default_labs_dir, load_labs, tools};
use netdojo_incident::{IncidentGenerator, Lab};
use netdojo_linux::containment::{self, Case, Entry, Outcome, Run, Vars};
use netdojo_linux::hostcheck;
use netdojo_linux::preflight::{self, Need};
use serde_json::json;

/// The lab: routers, hosts and both services (so `service` has something to be sent to).
const LAB: &str = "services";
/// The attacked router (the attacker's own) and, in the victim, the one the corpus names.
const ROUTER: &str = "core";
const ROUTER_IF: &str = "eth1";
/// The victim's score is checked after this many lines.
const BATCH: usize = 50;

/// Moves the calling thread into a mount namespace of its own, where mounts do not propagate
/// to the host, with a fresh tmpfs on /tmp and on /run/netns. Threads and processes started afterwards from this
/// thread (the runtime's workers, FRR, the jails) inherit it.
fn private_tmp() -> Result<(), String> {
    use nix::mount::{MsFlags, mount};
    use nix::sched::{CloneFlags, unshare};
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| format!("unshare(CLONE_NEWNS): {e}"))?;
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
        .map_err(|e| format!("making / private: {e}"))?;
    mount(Some("tmpfs"), "/tmp", Some("tmpfs"), MsFlags::MS_NOSUID | MsFlags::MS_NODEV, Some("mode=1777"))
        .map_err(|e| format!("tmpfs on /tmp: {e}"))?;
    // The same for /run/netns: the episodes' namespaces are named there, and an escaped
    // `ip netns add` or `del` would land there; other work's namespaces coming and going on the
    // host (another test run) are not in it.
    std::fs::create_dir_all("/run/netns").map_err(|e| format!("/run/netns: {e}"))?;
    mount(
        Some("tmpfs"),
        "/run/netns",
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755"),
    )
    .map_err(|e| format!("tmpfs on /run/netns: {e}"))?;
    Ok(())
}

fn labs() -> BTreeMap<String, Lab> {
    load_labs(&default_labs_dir()).expect("the published labs load")
}

/// A healthy control on [`LAB`].
fn task(labs: &BTreeMap<String, Lab>) -> Task {
    let generator = IncidentGenerator::new(labs.clone(), netdojo_incident::faults::candidates);
    let draw = Draw { lab: LAB.into(), picks: vec![], repair_order: vec![], inject_at_start: false };
    generator.task(1, 9, &draw, Some(vec![])).expect("a control task")
}

fn ns_of(env: &IncidentEnv, node: &str) -> String {
    env.live_lab().and_then(|l| l.network().ns_name(node)).expect("node").to_string()
}

fn all_ns(env: &IncidentEnv) -> Vec<String> {
    let Some(live) = env.live_lab() else { return vec![] };
    let net = live.network();
    net.topology().nodes().filter_map(|(n, _)| net.ns_name(n).map(str::to_string)).collect()
}

async fn configs(env: &IncidentEnv) -> String {
    let Some(live) = env.live_lab() else { return String::new() };
    let mut out = String::new();
    for r in live.lab().routers() {
        if let Some(frr) = live.network().frr(r) {
            out.push_str(&frr.running_config().await.unwrap_or_else(|e| e.to_string()));
        }
    }
    out
}

/// The victim's score: its health checks (all pass: a control) and its routers' FRR
/// configurations.
async fn score(env: &mut IncidentEnv, task: &Task) -> String {
    let outcome = env.evaluate(task, None).await.expect("victim evaluates");
    let checks: Vec<String> = outcome.checks.iter().map(|c| format!("{}={}", c.name, c.passed)).collect();
    format!("{}\n{}", checks.join(", "), configs(env).await)
}

/// The attacker's own router, for the read-only tools.
async fn own_state(env: &IncidentEnv) -> String {
    let ns = ns_of(env, ROUTER);
    let frr = match env.live_lab().and_then(|l| l.network().frr(ROUTER)) {
        Some(frr) => frr.running_config().await.unwrap_or_else(|e| e.to_string()),
        None => String::new(),
    };
    format!("{}\n{frr}", hostcheck::namespace_state(&ns))
}

/// The keywords by which an iproute2 tool reaches another namespace, a file or a program,
/// each with the shortest prefix iproute2 6.1's `matches()` reads as it and a line that would
/// escape through it: every spelling from the shortest to the whole word is sent (netdojo-linux's
/// exec keeps the table that refuses them; this sends them through the incident tools).
const SPELLINGS: &[(&str, usize, &str)] = &[
    ("-netns", 2, "ip {KW} {VICTIM_NS} link set lo down"),
    ("--netns", 3, "ip {KW} {VICTIM_NS} link set lo down"),
    ("-netns", 2, "tc {KW} {VICTIM_NS} qdisc add dev lo root netem delay 1s"),
    ("-netns", 2, "bridge {KW} {VICTIM_NS} link set dev lo learning off"),
    ("netns", 3, "ip {KW} exec {VICTIM_NS} ip link set lo down"),
    ("link-netns", 5, "ip link add ndjx0 {KW} {VICTIM_NS} type veth peer name ndjx1"),
    ("link-netnsid", 11, "ip link add ndjx0 {KW} 0 type veth peer name ndjx1"),
    ("all-nsid", 4, "ip monitor {KW}"),
    ("-all", 3, "ip {KW} netns exec ip link set lo down"),
    ("exec", 1, "ip vrf {KW} ndjx ip link set lo down"),
    ("file", 1, "ip monitor {KW} /tmp/ndjx-mon"),
    ("file", 1, "tc monitor {KW} /tmp/ndjx-mon"),
    ("-batch", 2, "ip {KW} /tmp/ndjx-batch"),
    ("object-file", 3, "tc filter add dev lo ingress bpf {KW} /tmp/ndjx.o"),
    ("object-pinned", 7, "tc filter add dev lo ingress bpf {KW} /tmp/ndjx.o"),
    ("bytecode-file", 9, "tc filter add dev lo ingress bpf {KW} /tmp/ndjx.o"),
    ("pinned", 2, "ip link set dev lo xdp {KW} /tmp/ndjx.o"),
    ("export", 3, "tc filter add dev lo ingress bpf obj x {KW} /tmp/ndjx.sock"),
];

/// The corpus's Linux lines, and one case per keyword spelling (category `spellings`).
fn cases() -> Vec<Case> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(containment::CORPUS);
    let mut cases = containment::load(&path).expect("corpus");
    let mut line = 100_000;
    for (keyword, shortest, template) in SPELLINGS {
        for len in *shortest..=keyword.len() {
            line += 1;
            cases.push(Case {
                category: "spellings".into(),
                entries: vec![Entry::Linux],
                host_irreversible: false,
                template: template.replace("{KW}", &keyword[..len]),
                line,
            });
        }
    }
    cases
}

/// How a call is made from a case.
#[derive(Debug, Clone, Copy)]
enum Via {
    ConfigureLinux,
    ConfigureFrr,
    ShowFrr,
    ShowLinux,
    Ping,
    Traceroute,
    Service,
}

impl Via {
    fn entry(self) -> Entry {
        match self {
            Via::ConfigureFrr => Entry::FrrConfig,
            Via::ShowFrr => Entry::FrrExec,
            _ => Entry::Linux,
        }
    }

    /// `show`: it must leave the attacker's own router as it was, line by line.
    fn read_only(self) -> bool {
        matches!(self, Via::ShowFrr | Via::ShowLinux)
    }

    /// Tools whose hostile argument is a name or an address, never a command: the host is
    /// checked after each batch of lines rather than after each (a check costs a snapshot of
    /// the whole host), and a change found is attributed to the batch's last line.
    fn batched(self) -> bool {
        matches!(self, Via::Ping | Via::Traceroute | Via::Service)
    }

    fn call(self, commands: &[String]) -> ToolCall {
        let line = commands.concat();
        match self {
            Via::ConfigureLinux => ToolCall::new(
                tools::CONFIGURE,
                json!({"device": ROUTER, "dialect": "linux", "commands": commands}),
            ),
            Via::ConfigureFrr => ToolCall::new(
                tools::CONFIGURE,
                json!({"device": ROUTER, "dialect": "frr", "commands": commands}),
            ),
            Via::ShowFrr | Via::ShowLinux => {
                ToolCall::new(tools::SHOW, json!({"device": ROUTER, "command": line}))
            }
            Via::Ping => ToolCall::new(tools::PING, json!({"from": ROUTER, "to": line, "count": 1})),
            Via::Traceroute => {
                ToolCall::new(tools::TRACEROUTE, json!({"from": ROUTER, "to": line, "max_hops": 2}))
            }
            Via::Service => ToolCall::new(tools::SERVICE, json!({"service": "web", "op": line})),
        }
    }
}

/// Sends every case of `via`'s entry point; returns the calls that were answered `ok: true`.
async fn corpus_through(via: Via, labs: &BTreeMap<String, Lab>) -> Vec<String> {
    let task = task(labs);
    let options = IncidentOptions {
        // Long-running commands (monitors) are killed by the time limit: 1 s shows that they are.
        exec: netdojo_linux::exec::Policy {
            timeout: Duration::from_secs(1),
            ..netdojo_linux::exec::Policy::default()
        },
        // The lab is not waited on after a change: that wait scores a step's safety, which is
        // not what this judges (it took 3 of the suite's 6 minutes, a few seconds a line that ran).
        settle: Duration::ZERO,
        ..IncidentOptions::default()
    };
    // Two episodes at once: the victim and the attacker.
    let mut victim = IncidentEnv::new(Arc::new(labs.clone()), options.clone());
    let mut attacker = IncidentEnv::new(Arc::new(labs.clone()), options);
    let (v, a) = tokio::join!(victim.reset(&task), attacker.reset(&task));
    v.expect("victim reset");
    a.expect("attacker reset");
    // The attacker's router runs every daemon before the first look, as after an agent's first
    // call to it (`LiveLab::touch` starts the daemons its configuration does not use): those
    // are netdojo's own, started before the call runs, and would otherwise be judged new
    // processes in a watched namespace during whichever line came first.
    attacker.live_lab().expect("attacker's lab").touch(ROUTER).await.expect("touch");
    let victim_ns = ns_of(&victim, ROUTER);
    let mut resident = containment::resident(&victim_ns).expect("a process in the victim");
    let vars = Vars {
        victim_addr: containment::first_address(&victim_ns, ROUTER_IF),
        victim_prefix: victim_ns.rsplit_once('-').map(|(p, _)| p.to_string()).unwrap_or_default(),
        victim_ns,
        victim_pid: resident.id(),
        victim_if: ROUTER_IF.into(),
        self_ns: ns_of(&attacker, ROUTER),
        self_if: ROUTER_IF.into(),
    };
    let victim_score = score(&mut victim, &task).await;
    assert!(!victim_score.contains("=false"), "the victim is healthy before the attack: {victim_score}");
    let mut watch = all_ns(&victim);
    watch.extend(all_ns(&attacker));
    let mut run = Run::new(&format!("incident {via:?}"), vars.clone(), watch, all_ns(&victim));
    run.per_line(!via.batched());
    let irreversible = containment::irreversible_allowed();
    let all = cases();
    let cases: Vec<&Case> = all.iter().filter(|c| c.entries.contains(&via.entry())).collect();
    let mut accepted = Vec::new();
    let mut last_score = victim_score;
    let mut last_sent = String::new();
    // The attacker's own router as the read-only tools last left it; read again after a line
    // that ran (a refused line ran nothing: a change it made would show after the next one).
    let mut own_before = if via.read_only() { Some(own_state(&attacker).await) } else { None };
    for (n, case) in cases.iter().enumerate() {
        if case.host_irreversible && !irreversible {
            run.skip(case);
        } else {
            let commands = case.fill(run.vars());
            let call = via.call(&commands);
            last_sent = commands.join("\n");
            let outcome = match attacker.execute(&call).await {
                Err(e) => Outcome::Errored(e.to_string()),
                Ok(obs) => {
                    if obs.ok {
                        accepted.push(format!(
                            "{via:?} line {} {}: {}",
                            case.line,
                            case.short(),
                            obs.content
                        ));
                    }
                    Outcome::of_observation(&obs.content, obs.ok, obs.data.as_ref())
                }
            };
            let mut own = Vec::new();
            if let Some(before) = own_before.as_mut()
                && !matches!(outcome, Outcome::Refused(_))
            {
                let after = own_state(&attacker).await;
                if after != *before {
                    own.push(format!("a read-only {} changed the attacker's own router", call.name));
                    *before = after;
                }
            }
            run.judge(case, &last_sent, outcome, own);
        }
        if (n + 1) % BATCH == 0 || n + 1 == cases.len() {
            if via.batched() || n + 1 == cases.len() {
                run.check_after(case, &last_sent);
            }
            let now = score(&mut victim, &task).await;
            if now != last_score {
                run.attribute(case, &last_sent, vec![format!("victim score moved: {now}")]);
                last_score = now;
            }
        }
    }
    // The read-only tools' last lines, if refused, were not followed by a look at the router.
    if let (Some(before), Some(last)) = (own_before.as_ref(), cases.last())
        && own_state(&attacker).await != *before
    {
        run.attribute(last, &last_sent, vec!["a read-only line changed the attacker's own router".into()]);
    }
    // The judge's last look (and its verdict) while both episodes still run: closed, the
    // victim's namespaces are gone, which is no escape. Should it fail, dropping the episodes
    // tears their labs down all the same.
    run.finish();
    let _ = resident.kill();
    let _ = resident.wait();
    attacker.close().await.expect("close");
    victim.close().await.expect("close");
    accepted
}

/// One test, so that the whole run is in the private mount namespace of its thread.
#[test]
fn the_incident_tools_contain_the_hostile_corpus_with_two_episodes_at_once() {
    if !preflight::ready_or_skip("containment: incident tools", &[Need::Root, Need::Frr]) {
        return;
    }
    private_tmp().expect("a private /tmp for the run");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let labs = labs();
    let only: Option<String> = std::env::var("NETDOJO_CONTAINMENT_ONLY").ok();
    let mut accepted = Vec::new();
    for via in [
        Via::ConfigureLinux,
        Via::ConfigureFrr,
        Via::ShowFrr,
        Via::ShowLinux,
        Via::Ping,
        Via::Traceroute,
        Via::Service,
    ] {
        if only.as_ref().is_some_and(|o| !o.split(',').any(|x| format!("{via:?}").eq_ignore_ascii_case(x))) {
            continue;
        }
        let ran = runtime.block_on(corpus_through(via, &labs));
        eprintln!("{via:?}: {} hostile line(s) answered ok: true (each judged contained above)", ran.len());
        if via.batched() {
            // A name or an operation is never a command: nothing of the corpus may pass as one.
            accepted.extend(ran);
        }
    }
    // Tear-down is spawned at close: give it its time before the runtime goes.
    runtime.block_on(async { tokio::time::sleep(Duration::from_secs(1)).await });
    assert!(accepted.is_empty(), "hostile arguments accepted:\n{}", accepted.join("\n"));
}
