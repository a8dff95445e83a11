//! The incident task generator. `generate(seed, index)` is pure: a lab, a level, faults from
//! the candidates the lab offers, and a brief that reports symptoms only.
//!
//! Tasks are stratified by index, so that a few hundred of them cover every lab, level and
//! fault type: every tenth task (index 9, 19, ...) is a healthy control; of the others, half
//! have one fault (level 1), three in ten two (level 2) and two in ten three (level 3), on
//! different devices; the first fault's type walks the list of types some lab offers, in
//! order, from an offset the seed picks, and the lab and the other faults are drawn from the
//! task's own random stream.
//!
//! What the generator cannot know is whether a fault shows on the live lab: `generate --env
//! incident` starts each task's lab, injects, and replaces a fault that breaks no health
//! check with the [`IncidentGenerator::next_pick`] after it, deterministically; it records the
//! checks that failed ([`Fault::symptom`], `setup.symptom`) and writes the brief from them
//! ([`IncidentGenerator::task`]).

use std::collections::{BTreeMap, BTreeSet};

use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use netdojo_core::task::task_seed;
use netdojo_core::{Task, TaskError, TaskGenerator, TaskKind};

use crate::catalogue::FaultType;
use crate::fault::Fault;
use crate::lab::{Check, Lab, ServiceKind};
use crate::task::{APPLICATION, HEALTHY, Setup, core_fault, lab_hash, oracle_calls, tools};

/// The faults a lab offers for a type (helper `faults`' `faults::candidates`).
pub type Candidates = fn(&Lab, FaultType) -> Vec<Fault>;

/// One fault of a draw: its type and which of the lab's candidates for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pick {
    pub fault_type: FaultType,
    pub candidate: usize,
    pub fault: Fault,
}

/// What a task is made of before its symptom is measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draw {
    pub lab: String,
    /// Empty: a healthy control.
    pub picks: Vec<Pick>,
    /// The order the oracle repairs the picks in (indices into `picks`), as verification found
    /// safe; empty: the last first ([`crate::task::repair_order`]).
    pub repair_order: Vec<usize>,
    /// Verification found the faults can go in before the lab converges
    /// ([`crate::task::Setup::inject_at_start`]).
    pub inject_at_start: bool,
}

/// Makes incident tasks from the labs and the candidates they offer.
#[derive(Debug, Clone)]
pub struct IncidentGenerator {
    labs: BTreeMap<String, Lab>,
    /// Per lab, per type, the candidates (computed once; they are a pure function of the lab).
    offers: BTreeMap<String, BTreeMap<FaultType, Vec<Fault>>>,
    /// The types at least one lab offers, in the catalogue's order.
    types: Vec<FaultType>,
}

/// Every tenth task is a healthy control.
const CONTROL_EVERY: u64 = 10;
/// The level of the k-th task with faults, cycling: 5 of 10 at level 1, 3 at level 2, 2 at 3.
const LEVELS: [u8; 10] = [1, 2, 1, 3, 1, 2, 1, 3, 1, 2];

impl IncidentGenerator {
    pub fn new(labs: BTreeMap<String, Lab>, candidates: Candidates) -> Self {
        let offers: BTreeMap<String, BTreeMap<FaultType, Vec<Fault>>> = labs
            .iter()
            .map(|(name, lab)| {
                let per_type = FaultType::ALL
                    .iter()
                    .map(|t| (*t, candidates(lab, *t)))
                    .filter(|(_, c)| !c.is_empty())
                    .collect();
                (name.clone(), per_type)
            })
            .collect();
        let types =
            FaultType::ALL.iter().copied().filter(|t| offers.values().any(|o| o.contains_key(t))).collect();
        Self { labs, offers, types }
    }

    pub fn labs(&self) -> &BTreeMap<String, Lab> {
        &self.labs
    }

    /// The types some lab offers, in the catalogue's order.
    pub fn types(&self) -> &[FaultType] {
        &self.types
    }

    /// How many candidates each lab offers per type.
    pub fn offers(&self) -> BTreeMap<&str, BTreeMap<FaultType, usize>> {
        self.offers
            .iter()
            .map(|(lab, o)| (lab.as_str(), o.iter().map(|(t, c)| (*t, c.len())).collect()))
            .collect()
    }

    fn gen_err(message: String) -> TaskError {
        TaskError::Generate { generator: APPLICATION.into(), message }
    }

    /// The lab, level and faults of task `index` (see the module's stratification).
    pub fn draw(&self, seed: u64, index: u64) -> Result<Draw, TaskError> {
        if self.labs.is_empty() {
            return Err(Self::gen_err("no labs (testdata/incident/labs is empty)".into()));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(task_seed(seed, index));
        let names: Vec<&String> = self.labs.keys().collect();
        if index % CONTROL_EVERY == CONTROL_EVERY - 1 || self.types.is_empty() {
            // A control's lab walks the labs, so that each has its controls.
            let lab = names[((index / CONTROL_EVERY) as usize + (seed as usize)) % names.len()];
            return Ok(Draw {
                lab: lab.clone(),
                picks: vec![],
                repair_order: vec![],
                inject_at_start: false,
            });
        }
        let k = index - index / CONTROL_EVERY;
        let level = LEVELS[(k % LEVELS.len() as u64) as usize] as usize;
        let first = self.types[((k + seed) % self.types.len() as u64) as usize];
        // Labs offering the first type with enough devices for the level; the level drops to
        // what the best lab allows rather than failing (small labs, few types).
        let mut labs: Vec<&String> =
            names.iter().copied().filter(|l| self.offers[*l].contains_key(&first)).collect();
        labs.sort_by_key(|l| std::cmp::Reverse(self.fault_devices(l).len().min(level)));
        let best = labs.first().map(|l| self.fault_devices(l).len().min(level)).unwrap_or(1);
        labs.retain(|l| self.fault_devices(l).len().min(level) == best);
        labs.sort();
        let lab = *labs.choose(&mut rng).ok_or_else(|| Self::gen_err(format!("no lab offers {first}")))?;
        let offers = &self.offers[lab];
        let mut picks: Vec<Pick> = Vec::new();
        let mut used: BTreeSet<String> = BTreeSet::new();
        for i in 0..best {
            let fault_type = if i == 0 {
                first
            } else {
                let open: Vec<FaultType> = offers
                    .iter()
                    .filter(|(t, c)| {
                        !picks.iter().any(|p| p.fault_type == **t)
                            && c.iter().any(|f| !used.contains(&f.device))
                    })
                    .map(|(t, _)| *t)
                    .collect();
                match open.choose(&mut rng) {
                    Some(t) => *t,
                    None => break,
                }
            };
            let free: Vec<usize> = (0..offers[&fault_type].len())
                .filter(|c| !used.contains(&offers[&fault_type][*c].device))
                .collect();
            let Some(&candidate) = free.choose(&mut rng) else { break };
            let fault = offers[&fault_type][candidate].clone();
            used.insert(fault.device.clone());
            picks.push(Pick { fault_type, candidate, fault });
        }
        Ok(Draw { lab: lab.clone(), picks, repair_order: vec![], inject_at_start: false })
    }

    /// The devices a lab's candidates are on.
    fn fault_devices(&self, lab: &str) -> BTreeSet<&str> {
        self.offers
            .get(lab)
            .into_iter()
            .flat_map(|o| o.values().flatten().map(|f| f.device.as_str()))
            .collect()
    }

    /// The pick that replaces `after` when it showed no symptom: the next candidate of its type
    /// on a device no other fault of the task uses, then the candidates of the types after it
    /// (cyclically, in the catalogue's order), skipping what was `tried`. `None`: the lab has
    /// nothing left.
    pub fn next_pick(
        &self,
        lab: &str,
        after: &Pick,
        taken_devices: &BTreeSet<String>,
        tried: &BTreeSet<(FaultType, usize)>,
    ) -> Option<Pick> {
        let offers = self.offers.get(lab)?;
        let types: Vec<FaultType> = offers.keys().copied().collect();
        let start = types.iter().position(|t| *t == after.fault_type).unwrap_or(0);
        for step in 0..=types.len() {
            let fault_type = types[(start + step) % types.len()];
            let candidates = &offers[&fault_type];
            let first = if step == 0 { after.candidate + 1 } else { 0 };
            let order: Vec<usize> = if step == 0 {
                (first..candidates.len()).chain(0..after.candidate).collect()
            } else {
                (0..candidates.len()).collect()
            };
            for candidate in order {
                let fault = &candidates[candidate];
                if !taken_devices.contains(&fault.device) && !tried.contains(&(fault_type, candidate)) {
                    return Some(Pick { fault_type, candidate, fault: fault.clone() });
                }
            }
        }
        None
    }

    /// The task of a draw. `symptom`: the checks that failed with every fault injected, as
    /// measured; `None` uses the faults' own recorded symptoms (the generator's pure answer).
    pub fn task(
        &self,
        seed: u64,
        index: u64,
        draw: &Draw,
        symptom: Option<Vec<String>>,
    ) -> Result<Task, TaskError> {
        let lab = self.labs.get(&draw.lab).ok_or_else(|| Self::gen_err(format!("no lab {}", draw.lab)))?;
        let faults: Vec<Fault> = draw.picks.iter().map(|p| p.fault.clone()).collect();
        let symptom = symptom.unwrap_or_else(|| {
            let mut s: Vec<String> = faults.iter().flat_map(|f| f.symptom.iter().cloned()).collect();
            s.sort();
            s.dedup();
            s
        });
        let mut rng = ChaCha8Rng::seed_from_u64(task_seed(seed, index) ^ 0x0062_7269_6566);
        let label = if faults.is_empty() {
            HEALTHY.to_string()
        } else {
            faults.iter().map(|f| f.fault_type.id()).collect::<Vec<_>>().join("+")
        };
        let reported = if faults.is_empty() { control_report(lab, &mut rng) } else { symptom.clone() };
        Ok(Task {
            id: format!("incident-s{seed}-{index:04}"),
            application: APPLICATION.into(),
            level: faults.len().max(1) as u8,
            label,
            domain: None,
            seed: Some(seed),
            query: brief(lab, &reported, &mut rng),
            setup: serde_json::to_value(Setup {
                lab: lab.name.clone(),
                lab_hash: lab_hash(lab),
                symptom,
                repair_order: draw.repair_order.clone(),
                inject_at_start: draw.inject_at_start,
            })
            .unwrap_or(Value::Null),
            kind: TaskKind::Reactive {
                faults: faults.iter().map(core_fault).collect(),
                repair: oracle_calls(&faults, &draw.repair_order),
            },
        })
    }
}

impl TaskGenerator for IncidentGenerator {
    fn name(&self) -> &str {
        APPLICATION
    }

    fn params(&self) -> Value {
        let labs: BTreeMap<&str, String> = self.labs.iter().map(|(n, l)| (n.as_str(), lab_hash(l))).collect();
        json!({"labs": labs, "control_every": CONTROL_EVERY, "levels": LEVELS})
    }

    fn generate(&self, seed: u64, index: u64) -> Result<Task, TaskError> {
        let draw = self.draw(seed, index)?;
        self.task(seed, index, &draw, None)
    }
}

/// What a user reports on a healthy lab (a control): one or two of its end-to-end checks, as
/// a fault's brief would state them, so that the brief alone does not tell a control apart.
fn control_report(lab: &Lab, rng: &mut ChaCha8Rng) -> Vec<String> {
    let user: Vec<&Check> = lab.checks.iter().filter(|c| user_visible(c)).collect();
    let pool: Vec<&Check> = if user.is_empty() { lab.checks.iter().collect() } else { user };
    let n = rng.random_range(1..=2usize).min(pool.len());
    let mut chosen: Vec<String> = pool.choose_multiple(rng, n).map(|c| c.name()).collect();
    chosen.sort();
    chosen
}

/// A check a user notices (reachability, a path, a name, a web site), as against one only
/// monitoring sees (an adjacency, a session, a route).
fn user_visible(check: &Check) -> bool {
    matches!(check, Check::Reach { .. } | Check::Path { .. } | Check::Dns { .. } | Check::Http { .. })
}

/// How a user names an address: the service a host runs there, or the host.
fn describe_target(lab: &Lab, to: &str) -> String {
    let host = lab.topology.nodes.iter().find(|(name, node)| {
        *name == to || node.interfaces.values().any(|a| a.split('/').next() == Some(to))
    });
    let address = if host.is_some_and(|(name, _)| name == to) { None } else { Some(to) };
    let Some((name, _)) = host else { return to.to_string() };
    let role = lab.services.iter().find(|s| s.node == *name).map(|s| match s.kind {
        ServiceKind::Http => "the web server",
        ServiceKind::Dns => "the DNS server",
    });
    match (role, address) {
        (Some(role), Some(a)) => format!("{role} at {a}"),
        (Some(role), None) => format!("{role} ({name})"),
        (None, Some(a)) => format!("{a} ({name})"),
        (None, None) => name.to_string(),
    }
}

/// One line of the report for one failing check: a user's words for what users see, a
/// monitoring alert for the rest, never the device at fault or the fault.
fn report_line(lab: &Lab, check: &Check) -> String {
    match check {
        Check::Reach { from, to } => format!("Users on {from} cannot reach {}.", describe_target(lab, to)),
        Check::Path { from, to, .. } => format!(
            "Traffic from {from} to {} no longer takes its usual path; users there complain of slowness.",
            describe_target(lab, to)
        ),
        Check::Dns { from, name, .. } => {
            format!("On {from}, the name {name} does not resolve to the right address.")
        }
        Check::Http { from, address, port } => {
            format!("The web site at http://{address}:{port}/ does not load on {from}.")
        }
        Check::Ospf { .. } => "Monitoring raised an alert: an OSPF adjacency went down.".into(),
        Check::Ospf6 { .. } => "Monitoring raised an alert: an OSPFv3 (IPv6) adjacency went down.".into(),
        Check::Bgp { .. } => "Monitoring raised an alert: a BGP session is not established.".into(),
        Check::Route { prefix, .. } => {
            format!("Monitoring raised an alert: the route to {prefix} is missing or changed on some router.")
        }
    }
}

const SINCE: [&str; 4] = [
    "since this morning",
    "for about an hour",
    "since the change window last night",
    "since a few minutes ago",
];

/// The brief: the lab in one sentence, what is reported (the user-visible complaints first,
/// at most four lines, then at most two alerts, without repeats), the devices, the task and
/// the published fault types.
pub fn brief(lab: &Lab, reported: &[String], rng: &mut ChaCha8Rng) -> String {
    let checks: Vec<&Check> =
        reported.iter().filter_map(|name| lab.checks.iter().find(|c| &c.name() == name)).collect();
    let mut users: Vec<String> = Vec::new();
    let mut alerts: Vec<String> = Vec::new();
    for check in checks {
        let line = report_line(lab, check);
        let list = if user_visible(check) { &mut users } else { &mut alerts };
        if !list.contains(&line) {
            list.push(line);
        }
    }
    users.truncate(4);
    alerts.truncate(2);
    let since = SINCE.choose(rng).copied().unwrap_or(SINCE[0]);
    let mut report: Vec<String> = users.into_iter().chain(alerts).collect();
    if report.is_empty() {
        report.push("Users report that parts of the network misbehave.".into());
    }
    let report = report.iter().map(|l| format!("- {l}")).collect::<Vec<_>>().join("\n");
    let types = FaultType::ALL
        .iter()
        .map(|t| format!("- {}: {}", t.id(), t.describe()))
        .collect::<Vec<_>>()
        .join("\n");
    format!(
        "You are the network engineer on call. {description}\n\n\
         The help desk forwards these reports ({since}):\n{report}\n\n\
         Routers (FRRouting): {routers}. Hosts: {hosts}.\n\n\
         Find the root cause: which device, and which fault type from the list below; there may \
         be more than one fault, each on its own device, or none at all (a report can be \
         mistaken). Report what you found with `{submit}` (an empty list if nothing is wrong), \
         repair the network so that everything works as before without breaking anything that \
         works, and call `finish`. If nothing is wrong, change nothing.\n\n\
         Look with `{show}` (vtysh `show ...` on a router, read-only `ip`/`nft`/`sysctl`... on \
         any node), `{ping}` and `{traceroute}` from a node, `{service}` status on a host; \
         change with `{configure}` (vtysh configuration lines on a router, or the linux dialect \
         on any node) and `{service}` start/stop/set.\n\n\
         Fault types:\n{types}",
        description = lab.description.trim(),
        routers = lab.routers().join(", "),
        hosts = lab.hosts().join(", "),
        submit = tools::SUBMIT,
        show = tools::SHOW,
        ping = tools::PING,
        traceroute = tools::TRACEROUTE,
        service = tools::SERVICE,
        configure = tools::CONFIGURE,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::Action;

    const LAB: &str = r#"
name: two
description: Two routers, a host each, and a web server.
topology:
  nodes:
    r1: { kind: frr, daemons: [ospfd], interfaces: { eth1: 10.0.12.1/30, eth2: 10.1.1.1/24 } }
    r2: { kind: frr, daemons: [ospfd], interfaces: { eth1: 10.0.12.2/30, eth2: 10.2.2.1/24, eth3: 10.3.3.1/24 } }
    h1: { kind: host, interfaces: { eth0: 10.1.1.10/24 }, routes: [ { dst: default, via: 10.1.1.1 } ] }
    h2: { kind: host, interfaces: { eth0: 10.2.2.10/24 }, routes: [ { dst: default, via: 10.2.2.1 } ] }
    h3: { kind: host, interfaces: { eth0: 10.3.3.10/24 }, routes: [ { dst: default, via: 10.3.3.1 } ] }
  links:
    - endpoints: ["r1:eth1", "r2:eth1"]
    - endpoints: ["r1:eth2", "h1:eth0"]
    - endpoints: ["r2:eth2", "h2:eth0"]
    - endpoints: ["r2:eth3", "h3:eth0"]
services:
  - { name: web, node: h2, kind: http }
checks:
  - { check: reach, from: h1, to: 10.2.2.10 }
  - { check: reach, from: h1, to: h3 }
  - { check: ospf, device: r1, neighbor: 2.2.2.2 }
  - { check: http, from: h1, address: 10.2.2.10, port: 80 }
"#;

    fn lab() -> Lab {
        Lab::from_str_named(LAB, "two.yml").expect("the test lab parses")
    }

    /// Stand-in candidates: one per device for three types, with a symptom each.
    fn candidates(lab: &Lab, t: FaultType) -> Vec<Fault> {
        let devices: Vec<&str> = match t {
            FaultType::InterfaceDown => lab.routers(),
            FaultType::HostWrongGateway => lab.hosts(),
            FaultType::ForwardingOff => lab.routers(),
            _ => vec![],
        };
        devices
            .into_iter()
            .map(|d| Fault {
                fault_type: t,
                device: d.to_string(),
                detail: format!("{t} on {d}"),
                inject: vec![Action::Linux { device: d.into(), line: "ip link set eth1 down".into() }],
                repair: vec![Action::Linux { device: d.into(), line: "ip link set eth1 up".into() }],
                symptom: vec!["reach h1 -> 10.2.2.10".into(), "ospf r1 ~ 2.2.2.2".into()],
            })
            .collect()
    }

    fn generator() -> IncidentGenerator {
        IncidentGenerator::new(BTreeMap::from([("two".to_string(), lab())]), candidates)
    }

    #[test]
    fn generation_is_pure_and_stratified() {
        let g = generator();
        let tasks: Vec<Task> = (0..40).map(|i| g.generate(7, i).expect("generates")).collect();
        let again: Vec<Task> = (0..40).rev().map(|i| g.generate(7, i).expect("generates")).collect();
        assert!(tasks.iter().eq(again.iter().rev()), "the same (seed, index), the same task");
        let controls: Vec<&Task> = tasks.iter().filter(|t| t.label == HEALTHY).collect();
        assert_eq!(controls.len(), 4, "every tenth task is a control");
        for t in &tasks {
            let faults = crate::task::faults_of(t).expect("faults read back");
            let devices: BTreeSet<&str> = faults.iter().map(|f| f.device.as_str()).collect();
            assert_eq!(devices.len(), faults.len(), "{}: faults on different devices", t.id);
            assert_eq!(t.level as usize, faults.len().max(1));
        }
        let levels: BTreeSet<u8> = tasks.iter().filter(|t| t.label != HEALTHY).map(|t| t.level).collect();
        assert_eq!(levels, BTreeSet::from([1, 2, 3]));
        let first_types: BTreeSet<String> =
            tasks.iter().filter_map(|t| t.label.split('+').next().map(str::to_string)).collect();
        for t in g.types() {
            assert!(first_types.contains(t.id()), "{t} is never drawn in 40 tasks");
        }
    }

    #[test]
    fn the_oracle_plan_diagnoses_then_repairs() {
        let g = generator();
        let task = g.generate(1, 0).expect("generates");
        let TaskKind::Reactive { repair, .. } = &task.kind else { panic!("reactive") };
        assert_eq!(repair[0].name, tools::SUBMIT);
        assert!(repair[1..].iter().all(|c| c.name == tools::CONFIGURE), "{repair:?}");
    }

    #[test]
    fn a_redraw_moves_to_the_next_candidate_then_the_next_type() {
        let g = generator();
        let offers = &g.offers["two"];
        let first = Pick {
            fault_type: FaultType::InterfaceDown,
            candidate: 0,
            fault: offers[&FaultType::InterfaceDown][0].clone(),
        };
        let none = BTreeSet::new();
        let next = g.next_pick("two", &first, &none, &BTreeSet::new()).expect("a next one");
        assert_eq!((next.fault_type, next.candidate), (FaultType::InterfaceDown, 1));
        // Both interface candidates tried: the next type in the catalogue's order.
        let tried = BTreeSet::from([(FaultType::InterfaceDown, 0), (FaultType::InterfaceDown, 1)]);
        let next = g.next_pick("two", &first, &none, &tried).expect("a next one");
        assert_eq!(next.fault_type, FaultType::HostWrongGateway);
        // A taken device is skipped.
        let taken = BTreeSet::from(["r2".to_string()]);
        let next = g
            .next_pick("two", &first, &taken, &BTreeSet::from([(FaultType::InterfaceDown, 0)]))
            .expect("next");
        assert_ne!(next.fault.device, "r2");
    }

    #[test]
    fn the_brief_reports_symptoms_never_the_fault() {
        let g = generator();
        for i in 0..20 {
            let task = g.generate(3, i).expect("generates");
            let faults = crate::task::faults_of(&task).expect("faults");
            let report = task.query.split("Routers (FRRouting)").next().unwrap_or_default();
            for f in &faults {
                assert!(!report.contains(f.fault_type.id()), "{}: the brief names {}", task.id, f.fault_type);
                // Users report from their host (which may be the one at fault); a router is
                // never named.
                if f.device.starts_with('r') {
                    assert!(!report.contains(&f.device), "{}: the brief names {}", task.id, f.device);
                }
            }
        }
        let draw = g.draw(3, 0).expect("draws");
        let symptom = vec![
            "reach h1 -> 10.2.2.10".to_string(),
            "ospf r1 ~ 2.2.2.2".to_string(),
            "http h1 -> 10.2.2.10:80".into(),
        ];
        let task = g.task(3, 0, &draw, Some(symptom)).expect("a task");
        insta::assert_snapshot!(task.query);
    }
}
