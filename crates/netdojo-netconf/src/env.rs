//! The NetConfBench environment: FRRouting routers built from a task's topology and startup
//! configurations, the Agent-Network Interface (seed 001 §4.2) as tools, and the Task
//! Evaluation Interface (§4.3) at the end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};

use netdojo_config::ani;
use netdojo_core::task::parse_link;
use netdojo_core::testcase;
use netdojo_core::{
    Check, ConfigTask, EnvError, Environment, EnvironmentFactory, Observation, Outcome, StateCheck, Task,
    TaskKind, Testcase, ToolCall, ToolSpec,
};
use netdojo_linux::exec;
use netdojo_linux::frr::Frr;
use netdojo_linux::netns;
use netdojo_linux::network::Network;
use netdojo_linux::preflight::Need;
use netdojo_linux::topology::{Body, Link, Node, NodeKind, Topology, indexmap_lite::OrderedMap};
use netdojo_linux::vty;
/// Moved to netdojo-linux (the incident application applies vtysh lines the same way); kept
/// here under their old path for netdojo-mcp and the tests.
pub use netdojo_linux::vty::{CommandResult, apply_commands};

use crate::routes;

pub const ENV: &str = "netconf";

/// The FRR daemons every router runs besides zebra and staticd, so that any protocol an
/// intent asks for can be configured (vtysh drops commands for a daemon that is not running).
pub const ROUTER_DAEMONS: [&str; 3] = ["ospfd", "bgpd", "ripd"];

/// How long testcases may take to all pass together after the agent finishes (routing
/// protocols converge after the last change).
pub const CONVERGENCE: Duration = Duration::from_secs(10);

/// The most commands one `update-cfg` call applies; a longer list is an agent's mistake, answered
/// as a failed step rather than handed to the device.
pub const MAX_COMMANDS: usize = 1000;

fn task_err(task: &Task, message: String) -> EnvError {
    EnvError::task(ENV, task.id.clone(), message)
}

fn config_of(task: &Task) -> Result<&ConfigTask, EnvError> {
    match &task.kind {
        TaskKind::Config(c) => Ok(c),
        _ => Err(task_err(task, "netconf runs configuration tasks (seed 001 §4.1)".into())),
    }
}

/// Commands to run on each node once the network is up (node → commands): what an IOS-style
/// startup configuration holds that is Linux's on the router.
pub type Setup = BTreeMap<String, Vec<String>>;

/// The emulated network of a task: one FRR router per node, linked as the task says, each
/// started with its startup configuration; and the commands to run on each node once it is up.
pub fn topology_of(task: &Task) -> Result<(Topology, Setup), EnvError> {
    let config = config_of(task)?;
    let ios = crate::ios::is_ios(config);
    let numbered =
        if ios { crate::ios::link_addresses(config).map_err(|e| task_err(task, e))? } else { vec![] };
    let mut nodes = Vec::new();
    let mut setup = Setup::new();
    for name in &config.topology.nodes {
        let mut startup = config.startup_configs.get(name).map(|c| c.replace("\r\n", "\n"));
        if ios {
            let (mut frr, linux) = crate::ios::translate(startup.as_deref().unwrap_or_default().lines())
                .map_err(|e| task_err(task, format!("field `startup_configs.{name}`: {e}")))?;
            for (node, interface, address) in &numbered {
                if node == name {
                    frr.extend([
                        format!("interface {interface}"),
                        format!(" ip address {address}"),
                        "exit".into(),
                    ]);
                }
            }
            startup = Some(frr.join("\n") + "\n");
            if !linux.is_empty() {
                setup.insert(name.clone(), linux);
            }
        }
        nodes.push((
            name.clone(),
            Node {
                kind: NodeKind::Frr,
                interfaces: BTreeMap::new(),
                routes: vec![],
                sysctls: Node::ipv4_only_sysctls(),
                daemons: ROUTER_DAEMONS.iter().map(|d| d.to_string()).collect(),
                config: startup,
            },
        ));
    }
    let mut links = Vec::new();
    for (i, link) in config.topology.links.iter().enumerate() {
        let ((a, mut ai), (b, mut bi)) = parse_link(link).ok_or_else(|| {
            task_err(task, format!("field `topology.links[{i}]`: `{link}` is not `A eth0 <-> B eth0`"))
        })?;
        if ios {
            let linux = |n: &str| {
                crate::ios::linux_name(n)
                    .map_err(|e| task_err(task, format!("field `topology.links[{i}]`: {e}")))
            };
            (ai, bi) = (linux(&ai)?, linux(&bi)?);
        }
        links.push(Link { endpoints: [format!("{a}:{ai}"), format!("{b}:{bi}")], mtu: None });
    }
    let topology = Topology { name: task.id.clone(), topology: Body { nodes: OrderedMap(nodes), links } };
    topology.validate(&format!("task {}", task.id)).map_err(|e| task_err(task, e.to_string()))?;
    Ok((topology, setup))
}

/// Builds one network per episode: with fresh routers (daemons started for the episode and
/// killed after it), or with routers from a warm pool (see [`NetconfFactory::pooled`]).
#[derive(Debug, Default)]
pub struct NetconfFactory {
    pool: Option<netdojo_linux::pool::FrrPool>,
}

/// What every router of a task is, as a warm pool's routers are made.
pub fn router_spec() -> netdojo_linux::pool::RouterSpec {
    netdojo_linux::pool::RouterSpec {
        daemons: ROUTER_DAEMONS.iter().map(|d| d.to_string()).collect(),
        sysctls: Node::ipv4_only_sysctls(),
        // An agent configures static routes anywhere.
        staticd_on_demand: false,
    }
}

impl NetconfFactory {
    /// Episodes whose routers come from a warm pool: started once, and between episodes reset
    /// to an empty configuration and checked against their fresh state (netdojo_linux::pool);
    /// an episode's setup is then its links and configuration.
    pub fn pooled() -> Result<Self, EnvError> {
        let mut factory = Self::new()?;
        factory.pool = Some(
            netdojo_linux::pool::FrrPool::new(router_spec())
                .map_err(|e| EnvError::setup(ENV, "starting the warm pool of FRR routers").with_source(e))?,
        );
        Ok(factory)
    }

    /// The warm pool, when there is one.
    pub fn pool(&self) -> Option<&netdojo_linux::pool::FrrPool> {
        self.pool.as_ref()
    }

    /// The environment itself (what [`EnvironmentFactory::create`] boxes).
    pub fn env(&self) -> NetconfEnv {
        NetconfEnv { pool: self.pool.as_ref().map(|p| p.handle()), ..NetconfEnv::default() }
    }

    /// Episodes with fresh routers.
    pub fn new() -> Result<Self, EnvError> {
        if !Need::Root.met() {
            return Err(EnvError::Unsupported {
                env: ENV.into(),
                what: "running without root".into(),
                why: "every episode builds network namespaces and FRR routers, which needs root".into(),
            });
        }
        if !Need::Frr.met() {
            return Err(EnvError::Unsupported {
                env: ENV.into(),
                what: "FRRouting".into(),
                why: "it is not installed (apt-get install frr)".into(),
            });
        }
        netns::sweep()
            .map_err(|e| EnvError::setup(ENV, "sweeping namespaces left by earlier runs").with_source(e))?;
        Ok(Self { pool: None })
    }
}

#[async_trait]
impl EnvironmentFactory for NetconfFactory {
    fn name(&self) -> &str {
        ENV
    }

    fn config(&self) -> Value {
        json!({"daemons": ROUTER_DAEMONS, "dialects": ["frr", "linux"], "convergence_s": CONVERGENCE.as_secs(), "warm_pool": self.pool.is_some()})
    }

    async fn create(&self, _task: &Task) -> Result<Box<dyn Environment>, EnvError> {
        Ok(Box::new(self.env()))
    }
}

/// One episode's routers.
#[derive(Debug, Default)]
pub struct NetconfEnv {
    /// Shared so that a front end (the MCP server) can reach the routers between steps; the
    /// environment holds the only strong reference, so closing it tears the network down.
    net: Option<Arc<Network>>,
    /// Each device's running configuration right after reset (for the command score).
    initial: BTreeMap<String, String>,
    /// Each device's Linux-side state (nft ruleset, qdiscs) right after reset.
    initial_linux: BTreeMap<String, String>,
    task_id: String,
    /// An IOS-style task's interfaces (netdojo-ios translates its lines; what FRR prints shows
    /// their IOS names); `None` for an FRR-style task.
    ios: Option<Vec<netdojo_ios::Interface>>,
    /// Where the routers come from, when not started fresh.
    pool: Option<netdojo_linux::pool::PoolHandle>,
    /// How long this episode's phases took so far.
    phases: Phases,
    /// Waits the whole convergence time before a failing verdict (see
    /// [`set_early_verdict`](Self::set_early_verdict)).
    full_wait: bool,
}

/// The verdict round of the testcases: each testcase's result (`None`: not run) or error, and
/// whether the verdict came before the convergence time was up (crate::quiet).
struct Rounds {
    results: Vec<Option<(bool, String)>>,
    errors: Vec<Option<String>>,
    early: bool,
    /// Rounds started, and those abandoned.
    count: u32,
    abandoned: u32,
}

/// How long an episode's phases took (the bench prints them; zero until the phase ran).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases {
    /// Namespaces made (or warm routers taken from the pool).
    pub namespaces: Duration,
    /// Links, addresses and the wait until every link is up.
    pub links: Duration,
    /// FRR daemons started and the startup configuration applied (pooled: configuration only).
    pub routers: Duration,
    /// What one router took of `routers`, on average (they start all at once).
    pub per_router: Duration,
    /// The task's Linux-side setup and the initial export.
    pub setup: Duration,
    /// The final export (running configurations, nft, tc, sysctls).
    pub export: Duration,
    /// Testcase rounds until all pass or the network had its time to converge.
    pub testcases: Duration,
    /// Teardown (pooled: the hand-back; the reset runs in the background).
    pub stop: Duration,
    /// Whether the testcases' verdict was given before the convergence time was up, the
    /// network being quiescent (crate::quiet).
    pub early_verdict: bool,
    /// Rounds of testcases started, and how many of them were abandoned for a new one when
    /// the testcases a daemon answers all passed while the round waited on the others.
    pub rounds: u32,
    pub abandoned_rounds: u32,
}

impl NetconfEnv {
    /// What FRR printed, with an IOS-style task's interfaces under their IOS names.
    fn shown(&self, text: String) -> String {
        match &self.ios {
            Some(interfaces) => netdojo_ios::Translator::names_back(&text, interfaces),
            None => text,
        }
    }

    /// How long this episode's phases took so far.
    pub fn phases(&self) -> Phases {
        self.phases
    }

    /// With `false`, a failing verdict waits the whole convergence time even when the network
    /// is quiescent, as it did before the early verdict (crate::quiet): the test that holds the
    /// two verdicts equal compares them on one network.
    pub fn set_early_verdict(&mut self, on: bool) {
        self.full_wait = !on;
    }

    fn runtime(&self, message: String) -> EnvError {
        EnvError::runtime(ENV, message)
    }

    fn net(&self) -> Result<&Network, EnvError> {
        self.net.as_deref().ok_or_else(|| self.runtime("no network: reset first".into()))
    }

    /// The live network after reset, for front ends that serve its devices (it is gone once
    /// the environment is closed: the upgrade then fails).
    pub fn network(&self) -> Option<std::sync::Weak<Network>> {
        self.net.as_ref().map(Arc::downgrade)
    }

    fn router(&self, device: &str) -> Option<&Frr> {
        self.net.as_ref()?.frr(device)
    }

    fn devices(&self) -> Vec<String> {
        self.net
            .as_ref()
            .map(|n| n.topology().nodes().map(|(n, _)| n.to_string()).collect())
            .unwrap_or_default()
    }

    /// Every device's FRR running configuration and Linux state (nftables ruleset, qdiscs),
    /// read from all devices at once: both are read at reset and again at evaluation.
    async fn export(&self) -> Result<(BTreeMap<String, String>, BTreeMap<String, String>), EnvError> {
        let net = self.net()?;
        let reads = self.devices().into_iter().map(|device| async move {
            let frr = match net.frr(&device) {
                Some(frr) => Some(frr.running_config().await.map_err(|e| e.to_string())?),
                None => None,
            };
            let linux = match net.ns_name(&device) {
                Some(ns) => Some(linux_state(ns).await),
                None => None,
            };
            Ok::<_, String>((device, frr, linux))
        });
        let mut configs = BTreeMap::new();
        let mut linux_states = BTreeMap::new();
        for read in futures::future::join_all(reads).await {
            let (device, frr, linux) = read.map_err(|e| self.runtime(e))?;
            if let Some(config) = frr {
                configs.insert(device.clone(), config);
            }
            if let Some(state) = linux {
                linux_states.insert(device, state);
            }
        }
        Ok((configs, linux_states))
    }

    /// Applies `commands` in configuration mode, in order (see [`apply_commands`]).
    pub async fn update(&self, frr: &Frr, commands: &[String]) -> Result<Vec<CommandResult>, EnvError> {
        apply_commands(frr, commands, false).await.map_err(|e| self.runtime(e.to_string()))
    }

    /// The command score: each device's edits (final against initial configuration, FRR and
    /// Linux sides) against the ground truth's (its commands applied on the initial one).
    fn command_score(
        &self,
        task: &ConfigTask,
        finals: &BTreeMap<String, String>,
        finals_linux: &BTreeMap<String, String>,
    ) -> Result<netdojo_config::score::ScoreReport, EnvError> {
        use netdojo_config::config::{Config, ConfigError, Dialect};
        let parse = |frr: &str, linux: &str| -> Result<Config, EnvError> {
            let mut c =
                Config::parse(frr, Dialect::Frr).map_err(|e| self.runtime(format!("running-config: {e}")))?;
            c.merge(
                Config::parse(linux, Dialect::Linux)
                    .map_err(|e| self.runtime(format!("nft/tc state: {e}")))?,
            );
            Ok(c)
        };
        let mut devices = Vec::new();
        for (device, frr_final) in finals {
            let get = |m: &BTreeMap<String, String>| m.get(device).cloned().unwrap_or_default();
            let initial = parse(&get(&self.initial), &get(&self.initial_linux))?;
            let final_config = parse(frr_final, &get(finals_linux))?;
            let mut expected = initial.clone();
            let truth_err = |e: ConfigError| {
                EnvError::task(ENV, self.task_id.clone(), format!("ground truth of {device}")).with_source(e)
            };
            if let Some(commands) = task.ground_truth_configs.get(device) {
                if self.ios.is_some() {
                    let (frr, linux) = crate::ios::translate(commands.iter().map(String::as_str))
                        .map_err(|e| self.runtime(format!("ground truth of {device}: {e}")))?;
                    expected.apply(&frr, Dialect::Frr).map_err(truth_err)?;
                    expected.apply(&linux, Dialect::Linux).map_err(truth_err)?;
                } else {
                    expected.apply(commands, Dialect::Frr).map_err(truth_err)?;
                }
            }
            if let Some(commands) = task.ground_truth_linux.get(device) {
                expected.apply(commands, Dialect::Linux).map_err(truth_err)?;
            }
            devices.push(netdojo_config::score::DeviceEdits::new(device, &initial, &final_config, &expected));
        }
        Ok(netdojo_config::score::score(&devices))
    }

    /// run-testcases: every round runs them all, until one round passes them all or the
    /// network had time to converge; the last round is the verdict. A testcase that checks an
    /// absence (a route filtered out) passes trivially before routing converges, so a pass
    /// counts only together with the others, in the same round. A testcase that cannot run
    /// fails like one that does not pass: the others still get their time to converge.
    ///
    /// A round that does not pass them all before the time is up also looks at the network:
    /// once it is provably quiescent (crate::quiet, docs/netconf.md), the last round could only
    /// repeat this one, and the verdict is given now.
    ///
    /// While a round runs, the testcases that a daemon answers from its socket (`show`s of
    /// one daemon, route checks) are looked at again every 25 ms, once one of them has failed
    /// in the round: when they all pass, the round (a ping waiting its whole timeout for a
    /// route that was not there when it started) is abandoned and a new one starts at once. An
    /// abandoned round is neither a verdict nor part of a quiet span; every verdict is a round
    /// in which every testcase ran. After the convergence time, rounds are never abandoned.
    async fn testcase_rounds(&self, config: &ConfigTask) -> Rounds {
        use std::sync::atomic::{AtomicBool, Ordering};
        let start = Instant::now();
        let deadline = start + CONVERGENCE;
        let mut watch = crate::quiet::Watch::default();
        let routers: Vec<(&str, &Frr)> = config
            .topology
            .nodes
            .iter()
            .filter_map(|n| self.router(n).map(|frr| (n.as_str(), frr)))
            .collect();
        let cheap: Vec<bool> = config.testcases.iter().map(|tc| self.answered_by_a_daemon(tc)).collect();
        let n = config.testcases.len();
        let (mut count, mut abandoned) = (0, 0);
        loop {
            // Whether a testcase answered by a daemon failed in this round.
            let cheap_failed = AtomicBool::new(false);
            let ahead = deadline.saturating_duration_since(Instant::now());
            let round = async {
                let mut results: Vec<Option<(bool, String)>> = vec![None; n];
                let mut errors: Vec<Option<String>> = vec![None; n];
                let mut clock_free = true;
                for (i, tc) in config.testcases.iter().enumerate() {
                    let passed = match self.run_testcase(tc, &config.topology.nodes, ahead).await {
                        Ok((pass, output, free)) => {
                            results[i] = Some((pass, output));
                            clock_free &= free;
                            pass
                        }
                        Err(e) => {
                            errors[i] = Some(e);
                            false
                        }
                    };
                    if !passed && cheap[i] {
                        cheap_failed.store(true, Ordering::Relaxed);
                    }
                }
                (results, errors, clock_free)
            };
            let look = async {
                if !cheap.contains(&true) {
                    return std::future::pending().await;
                }
                loop {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                    if start.elapsed() >= CONVERGENCE {
                        return std::future::pending().await;
                    }
                    if cheap_failed.load(Ordering::Relaxed) && self.cheap_pass(config, &cheap, ahead).await {
                        return;
                    }
                }
            };
            count += 1;
            let finished = tokio::select! {
                biased;
                r = round => Some(r),
                () = look => None,
            };
            let Some((results, errors, clock_free)) = finished else {
                abandoned += 1;
                tracing::debug!(task = %self.task_id, elapsed = ?start.elapsed(), "testcase round abandoned");
                continue;
            };
            let all_pass = results.iter().all(|r| r.as_ref().is_some_and(|(p, _)| *p));
            tracing::debug!(
                task = %self.task_id,
                elapsed = ?start.elapsed(),
                passed = ?results.iter().map(|r| r.as_ref().is_some_and(|(p, _)| *p)).collect::<Vec<_>>(),
                "testcase round"
            );
            if all_pass || start.elapsed() >= CONVERGENCE {
                return Rounds { results, errors, early: false, count, abandoned };
            }
            if self.full_wait {
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
            let probe = crate::quiet::probe(&routers).await;
            let round = crate::quiet::Round { key: crate::quiet::round_key(&results, &errors), clock_free };
            if watch.quiet(round, probe, deadline) {
                return Rounds { results, errors, early: true, count, abandoned };
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Whether a testcase is answered by a daemon's socket alone (crate::env's rounds look at
    /// such testcases between rounds): a route check, or `show` commands of one daemon each
    /// (netdojo-linux's `daemon_of_show`) on an FRR-style task.
    fn answered_by_a_daemon(&self, tc: &Testcase) -> bool {
        if tc.dialect.as_deref().unwrap_or("frr") != "frr" {
            return false;
        }
        if tc.commands.is_empty() {
            return tc.expected_result.is_some();
        }
        self.ios.is_none() && tc.commands.iter().all(|c| netdojo_linux::frr::daemon_of_show(c).is_some())
    }

    /// Whether every testcase answered by a daemon passes now.
    async fn cheap_pass(&self, config: &ConfigTask, cheap: &[bool], ahead: Duration) -> bool {
        for (tc, _) in config.testcases.iter().zip(cheap).filter(|(_, c)| **c) {
            match self.run_testcase(tc, &config.topology.nodes, ahead).await {
                Ok((true, _, _)) => {}
                _ => return false,
            }
        }
        true
    }

    /// Runs one testcase on its device: its commands, whose output the `expected_output`
    /// regular expression must match (§4.3), and its `expected_result`, which one route of the
    /// routing table must meet (§4.1); both when it has both. `Err` is a testcase that could not
    /// run, which fails it.
    /// The third value says whether the verdict is free of clocks until `ahead` from now
    /// ([`crate::quiet::clock_invariant`]).
    async fn run_testcase(
        &self,
        tc: &Testcase,
        nodes: &[String],
        ahead: Duration,
    ) -> Result<(bool, String, bool), String> {
        let device = testcase::testcase_device(tc, nodes)?;
        let mut passed = true;
        let mut output = String::new();
        let mut clock_free = true;
        if !tc.commands.is_empty() {
            let (pass, out, free) = self.run_commands(tc, &device, ahead).await?;
            passed &= pass;
            clock_free &= free;
            output.push_str(&out);
        }
        if let Some(expected) = &tc.expected_result {
            // An IOS-style task names IOS interfaces; FRR's table has their Linux names.
            let mut expected = expected.clone();
            if self.ios.is_some()
                && let Some(name) = expected.get("interface").and_then(Value::as_str)
            {
                expected["interface"] = json!(crate::ios::linux_name(name).map_err(|e| e.to_string())?);
            }
            let expected = &expected;
            let checks = testcase::route_checks(expected)
                .map_err(|e| format!("expected_result.{}: {}", e.key, e.message))?;
            let frr = self.router(&device).ok_or_else(|| format!("unknown device `{device}`"))?;
            let out = frr
                .show_text(&[routes::show_command(&checks)], Duration::from_secs(10))
                .await
                .map_err(|e| e.to_string())?;
            let table: Value = serde_json::from_str(&out)
                .map_err(|e| format!("{device}'s routing table is not JSON: {e}"))?;
            let (pass, out) = routes::check(&table, &checks);
            passed &= pass;
            output.push_str(&out);
        } else if tc.commands.is_empty() {
            return Err("the testcase has neither commands nor expected_result".into());
        }
        Ok((passed, output, clock_free))
    }

    /// A §4.3 testcase's commands on `device`; the output is what the expected regex is matched on.
    async fn run_commands(
        &self,
        tc: &Testcase,
        device: &str,
        ahead: Duration,
    ) -> Result<(bool, String, bool), String> {
        let expected = tc.expected_output.as_deref().ok_or("the testcase has no expected_output")?;
        let re = regex::Regex::new(expected)
            .map_err(|e| format!("expected_output is not a regular expression: {e}"))?;
        let mut output = String::new();
        match tc.dialect.as_deref().unwrap_or("frr") {
            "frr" => {
                let frr = self.router(device).ok_or_else(|| format!("unknown device `{device}`"))?;
                let commands: Vec<String> = if self.ios.is_some() {
                    tc.commands
                        .iter()
                        .map(|c| netdojo_ios::Translator::show(c).map_err(|e| e.to_string()))
                        .collect::<Result<_, _>>()?
                } else {
                    tc.commands.clone()
                };
                let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
                let out =
                    frr.show_text(&commands, Duration::from_secs(10)).await.map_err(|e| e.to_string())?;
                output = self.shown(out);
            }
            "linux" => {
                let ns = self
                    .net()
                    .map_err(|e| e.to_string())?
                    .ns_name(device)
                    .ok_or(format!("unknown device `{device}`"))?;
                let policy = exec::Policy::default();
                for c in &tc.commands {
                    output.push_str(&run_linux(ns, c, &policy).await?);
                }
            }
            other => return Err(format!("unknown dialect `{other}` (frr, linux)")),
        }
        let free = crate::quiet::clock_invariant(&re, &output, ahead);
        Ok((re.is_match(&output), output, free))
    }
}

/// Runs a testcase's Linux command (trusted: it comes from the task file, so `ping` is allowed
/// here, unlike for agents) in the device's namespace, with the sandbox's limits.
async fn run_linux(ns: &str, line: &str, policy: &exec::Policy) -> Result<String, String> {
    let command = exec::trusted(line).map_err(|e| format!("`{line}`: {e}"))?;
    let out = exec::run(ns, &command, policy).await.map_err(|e| format!("`{line}`: {e}"))?;
    Ok(out.text)
}

/// Applies Linux-dialect commands through the agent's sandbox (allow-list, no shell, timeout),
/// in order; a failing or refused command is reported and the next ones still run.
async fn update_linux(ns: &str, commands: &[String]) -> Result<Vec<CommandResult>, String> {
    let policy = exec::Policy::default();
    let mut results = Vec::new();
    for c in commands {
        let result = match exec::run_line(ns, c, &policy).await.map_err(|e| e.to_string())? {
            Err(refusal) => CommandResult { command: c.clone(), status: "error", error: refusal.to_string() },
            Ok(out) if out.status == Some(0) && !out.timed_out => {
                CommandResult { command: c.clone(), status: "success", error: String::new() }
            }
            Ok(out) => {
                CommandResult { command: c.clone(), status: "error", error: out.text.trim().to_string() }
            }
        };
        results.push(result);
    }
    Ok(results)
}

/// A Linux command that only reads, by the sandbox's own rule ([`exec::read_only`]: the show
/// and list forms of each allowed tool). `Err` is the message for the agent, reading
/// `refused: ...` once.
fn linux_read_only(line: &str) -> Result<exec::Command, String> {
    let parsed = exec::parse(line).map_err(|r| r.to_string())?;
    exec::read_only(&parsed).map_err(|why| {
        format!("refused: {why}; execute-cmd runs read-only commands, use update-cfg with dialect linux to change the router")
    })?;
    Ok(parsed)
}

/// The Linux side of a router's configuration, for export: its nftables ruleset, qdiscs,
/// classes and filters, and the sysctl keys of [`scored_sysctl`].
pub async fn linux_state(ns: &str) -> String {
    const READS: [&str; 2] = ["nft list ruleset", "tc qdisc show"];
    let policy = exec::Policy::default();
    let in_ns = ns.to_string();
    // The sysctls are read from /proc/sys in the router's namespace by this process rather than
    // by a `sysctl` run in the jail (a process that reads every key of both subtrees; about a
    // fifth of an export's time): the same lines, see `scored_sysctls_here`.
    let sysctls = tokio::task::spawn_blocking(move || netns::in_netns(&in_ns, scored_sysctls_here));
    let (outputs, sysctls) =
        tokio::join!(futures::future::join_all(READS.map(|line| exec::run_line(ns, line, &policy))), sysctls);
    let mut out = String::new();
    let mut classful = Vec::new();
    for (line, output) in READS.into_iter().zip(outputs) {
        let Ok(Ok(o)) = output else { continue };
        out.push_str(&format!("# {line}\n{}", o.text));
        if line.starts_with("tc qdisc") {
            classful = classful_devices(&o.text);
        }
    }
    if let Ok(Ok(lines)) = sysctls {
        out.push_str(&format!("# {SYSCTL_READ} (the keys a task may set)\n{lines}"));
    }
    // Classes and filters, for the devices that have a qdisc of their own: `tc class show` and
    // `tc filter show` lines name no device, so each gets its own (`class htb 1:10 dev eth0
    // root ...`) for the reader, and a filter's indented `match` lines join its line.
    for dev in classful {
        let line = format!("tc class show dev {dev}");
        if let Ok(Ok(o)) = exec::run_line(ns, &line, &policy).await {
            out.push_str(&format!("# {line}\n"));
            for class in o.text.lines().filter(|l| l.starts_with("class ")) {
                let mut words: Vec<&str> = class.split_whitespace().collect();
                if words.len() >= 3 {
                    words.splice(3..3, ["dev", dev.as_str()]);
                }
                out.push_str(&words.join(" "));
                out.push('\n');
            }
        }
        let line = format!("tc filter show dev {dev}");
        if let Ok(Ok(o)) = exec::run_line(ns, &line, &policy).await {
            out.push_str(&format!("# {line}\n{}", netdojo_config::config::tc_filter_listing(&dev, &o.text)));
        }
    }
    out
}

/// How the exported sysctls were read before they were read in-process, and what their section
/// of the export is still called: the two subtrees `scored_sysctl` picks from.
pub const SYSCTL_READ: &str = "sysctl net.ipv4 net.ipv6.conf";

/// The [`scored_sysctl`] keys of the calling thread's network namespace, one `key = value` line
/// each, exactly as `sysctl net.ipv4 net.ipv6.conf` prints them: procps walks each directory
/// in the order the kernel lists it (`readdir`, which `read_dir` also follows), names a key by
/// its path with `/` as `.` (and a `.` in an interface name as `/`), and prints each line of a
/// value after ` = `.
fn scored_sysctls_here() -> String {
    fn walk(dir: &std::path::Path, key: &str, out: &mut String) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().replace('.', "/");
            let key = format!("{key}.{name}");
            let path = entry.path();
            // `stat`, as procps does: follows a link.
            if std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
                walk(&path, &key, out);
            } else if scored_sysctl(&key)
                && let Ok(value) = std::fs::read_to_string(&path)
            {
                for line in value.trim_end_matches('\n').split('\n') {
                    out.push_str(&format!("{key} = {line}\n"));
                }
            }
        }
    }
    let mut out = String::new();
    walk(std::path::Path::new("/proc/sys/net/ipv4"), "net.ipv4", &mut out);
    walk(std::path::Path::new("/proc/sys/net/ipv6/conf"), "net.ipv6.conf", &mut out);
    out
}

/// The sysctl keys the command score reads (a task's `sysctl -w` is scored like any other
/// command): per interface, and for `all` and `default`, the keys that filter, redirect or
/// answer for others (`rp_filter`, `accept_source_route`, `proxy_arp`...), and a few for the
/// whole namespace (`net.ipv4.ip_forward`, ICMP echo, SYN cookies). Left out: the keys the
/// kernel writes when another is written (`ip_forward` sets every interface's `forwarding` and
/// `all.accept_redirects`), which would count as edits nobody typed.
pub fn scored_sysctl(key: &str) -> bool {
    const GLOBAL: [&str; 7] = [
        "net.ipv4.ip_forward",
        "net.ipv4.icmp_echo_ignore_all",
        "net.ipv4.icmp_echo_ignore_broadcasts",
        "net.ipv4.icmp_ignore_bogus_error_responses",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ip_default_ttl",
        "net.ipv6.conf.all.forwarding",
    ];
    const V4: [&str; 12] = [
        "rp_filter",
        "accept_redirects",
        "secure_redirects",
        "send_redirects",
        "accept_source_route",
        "log_martians",
        "proxy_arp",
        "arp_ignore",
        "arp_announce",
        "arp_filter",
        "accept_local",
        "route_localnet",
    ];
    const V6: [&str; 3] = ["disable_ipv6", "accept_ra", "accept_redirects"];
    if GLOBAL.contains(&key) {
        return true;
    }
    let per_interface = |prefix: &str, keys: &[&str]| {
        key.strip_prefix(prefix)
            .and_then(|rest| rest.rsplit_once('.'))
            .is_some_and(|(_, name)| keys.contains(&name))
    };
    key != "net.ipv4.conf.all.accept_redirects"
        && (per_interface("net.ipv4.conf.", &V4) || per_interface("net.ipv6.conf.", &V6))
}

/// The devices of a `tc qdisc show` listing with a qdisc that is not the kernel's default
/// (handle `0:`): those that may hold classes.
fn classful_devices(qdiscs: &str) -> Vec<String> {
    let mut devs: Vec<String> = qdiscs
        .lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let dev = words.iter().position(|w| *w == "dev").and_then(|i| words.get(i + 1))?;
            (words.first() == Some(&"qdisc") && words.get(2) != Some(&"0:")).then(|| dev.to_string())
        })
        .collect();
    devs.sort();
    devs.dedup();
    devs
}

/// What this backend's ANI tools say of its devices.
const NETCONF_ANI: ani::Texts<'static> = ani::Texts {
    link_example: "A eth0 <-> B eth0",
    update_cfg: "Apply configuration commands to one device, in order. Dialect `frr` (the default): \
         FRRouting vtysh configuration mode (routing, prefix-lists, route-maps). Dialect \
         `linux`: nft, tc or ip commands on the router itself (packet filtering, QoS), one \
         command each, no shell. Answers each command with `success` or the device's \
         error; commands after a failing one are still applied.",
    execute_cmd: "Run one read-only command on one device and return its output. Dialect `frr` \
         (the default): a vtysh `show ...` command. Dialect `linux`: the read-only form of an \
         nft, tc or ip command on the router itself (`nft list ruleset`, `tc qdisc show`, `ip \
         route show`), one command, no shell.",
    dialects: &["frr", "linux"],
};

#[async_trait]
impl Environment for NetconfEnv {
    fn tools(&self) -> Vec<ToolSpec> {
        // Once reset, `device` lists the routers (a model reads them in the schema).
        let devices: Vec<String> = self
            .net
            .as_ref()
            .map(|n| n.topology().nodes().map(|(name, _)| name.to_string()).collect())
            .unwrap_or_default();
        ani::tool_specs(&NETCONF_ANI).into_iter().map(|t| t.with_choices("device", &devices)).collect()
    }

    async fn reset(&mut self, task: &Task) -> Result<String, EnvError> {
        self.task_id = task.id.clone();
        let config = config_of(task)?;
        let (topology, setup) = topology_of(task)?;
        let (net, times) = Network::build_with(topology, self.pool.as_ref())
            .await
            .map_err(|e| EnvError::setup(ENV, "building the network").with_source(e))?;
        self.phases = Phases {
            namespaces: times.namespaces,
            links: times.links + times.ready,
            routers: times.frr,
            per_router: times.frr_per_router,
            ..Phases::default()
        };
        let setup_start = Instant::now();
        self.net = Some(Arc::new(net));
        self.ios = crate::ios::is_ios(config).then(|| crate::ios::interfaces(config));
        // A loopback's interface, an ACL's nftables chain: trusted (they come from the task).
        for (name, linux) in &setup {
            let ns = self.net()?.ns_name(name).map(str::to_string).unwrap_or_default();
            for line in linux {
                let failed = |message: String| EnvError::setup(ENV, format!("{name}: `{line}`: {message}"));
                let command = exec::trusted(line).map_err(|e| failed(e.to_string()))?;
                let out = exec::run(&ns, &command, &exec::Policy::default())
                    .await
                    .map_err(|e| failed(e.to_string()))?;
                if out.status != Some(0) {
                    return Err(failed(out.text));
                }
            }
        }
        (self.initial, self.initial_linux) = self.export().await?;
        self.phases.setup = setup_start.elapsed();
        let intents: String = config.intents.iter().map(|i| format!("- {i}\n")).collect();
        let syntax = if self.ios.is_some() {
            "Cisco IOS syntax, translated for FRRouting: interfaces by their IOS names, `ip address A \
             MASK`, `network A WILDCARD area N`"
        } else {
            "FRRouting, vtysh syntax"
        };
        Ok(format!(
            "You are a network engineer. Configure the routers of this network ({syntax}) so that it \
             meets these intents:\n{intents}\nDevices: {}. Links:\n{}\n\nUse \
             get-topology, get-running-cfg and execute-cmd (read-only: `show` commands, or nft, tc \
             and ip reads with dialect linux) to look, \
             update-cfg to change a device's configuration, and call `finish` when every intent is met.",
            config.topology.nodes.join(", "),
            config.topology.links.iter().map(|l| format!("- {}", l.trim())).collect::<Vec<_>>().join("\n")
        ))
    }

    async fn execute(&mut self, call: &ToolCall) -> Result<Observation, EnvError> {
        let args = &call.arguments;
        let device = args.get("device").and_then(Value::as_str).unwrap_or_default();
        let unknown = || {
            Observation::error(
                call,
                format!("unknown device `{device}`; devices: {}", self.devices().join(", ")),
            )
        };
        match call.name.as_str() {
            ani::GET_TOPOLOGY => {
                let net = self.net()?;
                let wanted: Vec<String> = args
                    .get("devices")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                    .unwrap_or_default();
                let all = self.devices();
                let nodes: Vec<String> = if wanted.is_empty() {
                    all
                } else {
                    all.into_iter().filter(|d| wanted.contains(d)).collect()
                };
                let links: Vec<String> = net
                    .topology()
                    .topology
                    .links
                    .iter()
                    .filter(|l| {
                        l.endpoints
                            .iter()
                            .any(|e| nodes.iter().any(|n| e.split_once(':').is_some_and(|(a, _)| a == n)))
                    })
                    .map(|l| {
                        let side = |e: &str| e.replacen(':', " ", 1);
                        format!("{} <-> {}", side(&l.endpoints[0]), side(&l.endpoints[1]))
                    })
                    .collect();
                let links: Vec<String> = links.into_iter().map(|l| self.shown(l)).collect();
                let topology = json!({"topology": {"nodes": nodes, "links": links}});
                Ok(Observation::ok(call, topology.to_string(), Some(topology)))
            }
            ani::GET_RUNNING_CFG => {
                let Some(frr) = self.router(device) else { return Ok(unknown()) };
                let running = frr.running_config().await.map_err(|e| self.runtime(e.to_string()))?;
                let running = self.shown(running);
                Ok(Observation::ok(call, running.clone(), Some(json!({"running_config": running}))))
            }
            ani::UPDATE_CFG => {
                let Some(frr) = self.router(device) else { return Ok(unknown()) };
                let commands: Vec<String> = args
                    .get("commands")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                    .unwrap_or_default();
                if commands.len() > MAX_COMMANDS {
                    return Ok(Observation::error(
                        call,
                        format!(
                            "refused: {} commands in one call; the limit is {MAX_COMMANDS}",
                            commands.len()
                        ),
                    ));
                }
                let results = match args.get("dialect").and_then(Value::as_str).unwrap_or("frr") {
                    "linux" => {
                        let ns = self.net()?.ns_name(device).map(str::to_string).unwrap_or_default();
                        update_linux(&ns, &commands).await.map_err(|e| self.runtime(e))?
                    }
                    "frr" if self.ios.is_some() => {
                        // An IOS-style task: the agent's IOS lines, translated; one with no
                        // translation is refused whole, naming the line, before anything runs.
                        let (frr_lines, linux) =
                            match crate::ios::translate(commands.iter().map(String::as_str)) {
                                Ok(t) => t,
                                Err(e) => return Ok(Observation::error(call, format!("refused: {e}"))),
                            };
                        let mut results = self.update(frr, &frr_lines).await?;
                        if !linux.is_empty() {
                            let ns = self.net()?.ns_name(device).map(str::to_string).unwrap_or_default();
                            results.extend(update_linux(&ns, &linux).await.map_err(|e| self.runtime(e))?);
                        }
                        results
                    }
                    "frr" => self.update(frr, &commands).await?,
                    other => {
                        return Ok(Observation::error(
                            call,
                            format!("unknown dialect `{other}`; dialects: frr, linux"),
                        ));
                    }
                };
                let all_ok = results.iter().all(|r| r.status == "success");
                let data = json!({"results": results});
                let mut obs = Observation::ok(call, data.to_string(), Some(data));
                obs.ok = all_ok;
                Ok(obs)
            }
            ani::EXECUTE_CMD => {
                let Some(frr) = self.router(device) else { return Ok(unknown()) };
                let command = args.get("command").and_then(Value::as_str).unwrap_or_default().trim();
                if args.get("dialect").and_then(Value::as_str) == Some("linux") {
                    let ns = self.net()?.ns_name(device).map(str::to_string).unwrap_or_default();
                    return Ok(match linux_read_only(command) {
                        Err(why) => Observation::error(call, why),
                        Ok(parsed) => {
                            let out = exec::run(&ns, &parsed, &exec::Policy::default())
                                .await
                                .map_err(|e| self.runtime(e.to_string()))?;
                            let mut obs =
                                Observation::ok(call, out.text.clone(), Some(json!({"output": out.text})));
                            obs.ok = out.status == Some(0);
                            obs
                        }
                    });
                }
                let translated;
                let command = if self.ios.is_some() {
                    translated = match netdojo_ios::Translator::show(command) {
                        Ok(c) => c,
                        Err(e) => return Ok(Observation::error(call, format!("refused: {e}"))),
                    };
                    translated.as_str()
                } else {
                    command
                };
                // Checked before vtysh is spawned: a NUL byte or a huge line is the agent's
                // failed step, not a broken environment.
                let command = match vty::check_show_command(command) {
                    Ok(command) => command,
                    Err(refusal) => {
                        return Ok(Observation::error(
                            call,
                            format!(
                                "{refusal}; execute-cmd runs read-only `show` commands, update-cfg changes the configuration"
                            ),
                        ));
                    }
                };
                let out = frr
                    .vtysh(&["-c", command], Duration::from_secs(10))
                    .await
                    .map_err(|e| self.runtime(e.to_string()))?;
                let text = self.shown(out.text());
                let mut obs = Observation::ok(call, text.clone(), Some(json!({"output": text})));
                obs.ok = out.success();
                Ok(obs)
            }
            other => Ok(Observation::error(call, format!("unknown tool `{other}`"))),
        }
    }

    async fn check(&mut self) -> Result<StateCheck, EnvError> {
        // Configuration tasks set no per-step constraint (the seed scores the result).
        Ok(StateCheck::safe())
    }

    async fn evaluate(&mut self, task: &Task, _answer: Option<&Value>) -> Result<Outcome, EnvError> {
        let config = config_of(task)?;
        self.phases.early_verdict = false;
        // export-final-cfg and run-testcases at once: both only read (configurations on one
        // side, routes and pings on the other), and the configuration no longer changes.
        let export = async {
            let t = Instant::now();
            let finals = self.export().await;
            (finals, t.elapsed())
        };
        let ((finals, export_time), (rounds, testcase_time)) = tokio::join!(export, async {
            let t = Instant::now();
            let rounds = self.testcase_rounds(config).await;
            (rounds, t.elapsed())
        });
        let (finals, finals_linux) = finals?;
        let Rounds { results, errors, early, count, abandoned } = rounds;
        self.phases.export = export_time;
        self.phases.testcases = testcase_time;
        self.phases.early_verdict = early;
        self.phases.rounds = count;
        self.phases.abandoned_rounds = abandoned;
        let command_score = self.command_score(config, &finals, &finals_linux)?;
        let mut checks = Vec::new();
        let mut testcase_results = Vec::new();
        for (i, tc) in config.testcases.iter().enumerate() {
            let name = tc.name.clone().unwrap_or_else(|| format!("testcase {}", i + 1));
            let (passed, detail) = match (&errors[i], &results[i]) {
                (Some(e), _) => (false, e.clone()),
                (None, Some((pass, output))) => (*pass, output.clone()),
                (None, None) => (false, "not run".into()),
            };
            testcase_results.push(
                json!({"name": name, "status": if passed { "pass" } else { "fail" }, "output": detail}),
            );
            checks.push(Check::new(name, passed, detail));
        }
        Ok(Outcome {
            checks,
            export: json!({
                "configs": finals,
                "initial_configs": self.initial,
                "linux_configs": finals_linux,
                "initial_linux_configs": self.initial_linux,
                "testcases": testcase_results,
                "command_score": command_score,
            }),
        })
    }

    async fn close(&mut self) -> Result<(), EnvError> {
        let stop_start = Instant::now();
        if let Some(net) = self.net.take() {
            // A front end's call in flight holds the network a moment longer; it is torn down
            // when that call lets go (Network's Drop).
            if let Ok(mut net) = Arc::try_unwrap(net) {
                net.teardown();
            }
        }
        self.phases.stop = stop_start.elapsed();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ani_tools_name_frr_and_linux() {
        insta::assert_json_snapshot!(NetconfEnv::default().tools());
    }
}
