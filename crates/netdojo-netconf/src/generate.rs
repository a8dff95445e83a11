//! A seeded generator of configuration tasks in the seed's schema: a random chain (or, for
//! OSPF, a ring) of 2-5 FRR routers with loopbacks, and an intent for static routing or OSPF,
//! with its ground-truth commands, reasoning and behavioural testcases.
//!
//! `generate` is pure; `cargo xtask generate --env netconf` runs every task's oracle on real
//! FRR and emits only tasks whose ground truth passes all their testcases.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use netdojo_core::task::task_seed;
use netdojo_core::{ConfigTask, ConfigTopology, Task, TaskError, TaskGenerator, TaskKind, Testcase};

use crate::env::ENV;

/// The intents the generator draws, by index.
pub const LABELS: [(&str, u8); 2] = [("static", 1), ("ospf", 2)];

/// Every OSPF link: point-to-point, hellos every 100 ms, a neighbour dead after 1 s.
const P2P: &str = " ip ospf network point-to-point\n ip ospf dead-interval minimal hello-multiplier 10\n";

/// An OSPF task's routers start with an OSPF instance that has fast timers and nothing else: no
/// delay or hold before an SPF run, no wait between LSA originations, no minimum LSA arrival
/// interval (FRR's defaults hold SPF runs up to 5 s and drop an LSA arriving within 1 s of the
/// previous copy). The agent's part, as in the seed's tasks, is the router ID and the networks.
const OSPF_TIMERS: &str =
    "router ospf\n timers throttle spf 0 0 0\n timers throttle lsa all 0\n timers lsa min-arrival 0\nexit\n";

#[derive(Debug, Clone, Default)]
pub struct NetconfGenerator;

/// One link of a generated topology: the routers (0-based) and their interface names.
#[derive(Debug, Clone)]
struct GenLink {
    a: usize,
    b: usize,
    a_if: String,
    b_if: String,
    /// Third octet of the link's /30: 10.0.N.0/30, `a` at .1, `b` at .2.
    net: usize,
}

impl GenLink {
    fn addr(&self, router: usize) -> String {
        format!("10.0.{}.{}", self.net, if router == self.a { 1 } else { 2 })
    }
    fn other(&self, router: usize) -> usize {
        if router == self.a { self.b } else { self.a }
    }
}

fn name(i: usize) -> String {
    format!("R{}", i + 1)
}

fn lo(i: usize) -> String {
    let n = i + 1;
    format!("{n}.{n}.{n}.{n}")
}

fn testcase(name: String, device: &str, command: String, expected: &str, linux: bool) -> Testcase {
    Testcase {
        name: Some(name),
        device: Some(device.to_string()),
        commands: vec![command],
        expected_output: Some(expected.to_string()),
        expected_result: None,
        dialect: linux.then(|| "linux".to_string()),
    }
}

impl NetconfGenerator {
    fn draw(&self, seed: u64, index: u64) -> Result<Task, TaskError> {
        let (label, level) = LABELS[(index % LABELS.len() as u64) as usize];
        let mut rng = ChaCha8Rng::seed_from_u64(task_seed(seed, index));
        let n: usize = rng.random_range(2..=5);
        let ospf = label == "ospf";
        // A chain R1-R2-...-Rn; OSPF tasks on 3+ routers close it into a ring half the time.
        let mut pairs: Vec<(usize, usize)> = (0..n - 1).map(|i| (i, i + 1)).collect();
        if ospf && n >= 3 && rng.random_bool(0.5) {
            pairs.push((n - 1, 0));
        }
        let mut next_if = vec![0usize; n];
        let links: Vec<GenLink> = pairs
            .iter()
            .enumerate()
            .map(|(k, &(a, b))| {
                let (a_if, b_if) = (format!("eth{}", next_if[a]), format!("eth{}", next_if[b]));
                next_if[a] += 1;
                next_if[b] += 1;
                GenLink { a, b, a_if, b_if, net: 10 + k }
            })
            .collect();
        let ifs_of = |r: usize| links.iter().filter(move |l| l.a == r || l.b == r);

        let mut startup = std::collections::BTreeMap::new();
        for r in 0..n {
            let mut cfg = String::new();
            for l in ifs_of(r) {
                let ifname = if l.a == r { &l.a_if } else { &l.b_if };
                cfg.push_str(&format!("interface {ifname}\n ip address {}/30\n", l.addr(r)));
                if ospf {
                    cfg.push_str(P2P);
                }
                cfg.push_str("exit\n");
            }
            cfg.push_str(&format!("interface lo\n ip address {}/32\nexit\n", lo(r)));
            if ospf {
                cfg.push_str(OSPF_TIMERS);
            }
            startup.insert(name(r), cfg);
        }

        let (src, dst) = if ospf {
            (0, links.iter().map(|l| l.b).max().unwrap_or(n - 1).max(1))
        } else {
            let src = rng.random_range(0..n);
            let mut dst = rng.random_range(0..n - 1);
            if dst >= src {
                dst += 1;
            }
            (src, dst)
        };
        let mut ground_truth = std::collections::BTreeMap::new();
        let (intents, reasoning) = if ospf {
            for r in 0..n {
                let mut cmds = vec!["router ospf".to_string(), format!(" ospf router-id {}", lo(r))];
                for l in ifs_of(r) {
                    cmds.push(format!(" network 10.0.{}.0/30 area 0", l.net));
                }
                cmds.push(format!(" network {}/32 area 0", lo(r)));
                cmds.push("exit".to_string());
                ground_truth.insert(name(r), cmds);
            }
            (
                vec![
                    format!(
                        "{}: run OSPF in area 0 on every link and on each router's loopback, with the loopback address as router ID, so that every loopback reaches every other.",
                        (0..n).map(name).collect::<Vec<_>>().join(", ")
                    ),
                    "All routers: react to topology changes at once (LSA throttling and minimum arrival at 0).".to_string(),
                ],
                format!(
                    "Each of the {n} routers enables OSPF with its loopback as router ID and advertises its point-to-point links and its loopback into area 0; throttling at 0 makes it converge at once. Every router then learns every other loopback, for example {} learns {}/32 from {}.",
                    name(src),
                    lo(dst),
                    name(dst)
                ),
            )
        } else {
            // The chain path between src and dst, one hop at a time, static routes both ways.
            let path: Vec<usize> =
                if src < dst { (src..=dst).collect() } else { (dst..=src).rev().collect() };
            let mut add = |from: usize, to: usize, target: usize| {
                let link = links.iter().find(|l| (l.a == from && l.b == to) || (l.a == to && l.b == from));
                if let Some(l) = link {
                    ground_truth.entry(name(from)).or_insert_with(Vec::new).push(format!(
                        "ip route {}/32 {}",
                        lo(target),
                        l.addr(l.other(from))
                    ));
                }
            };
            for w in path.windows(2) {
                add(w[0], w[1], dst);
            }
            for w in path.windows(2).rev() {
                add(w[1], w[0], src);
            }
            (
                vec![format!(
                    "{}, and every router between: use static routes so that {}'s loopback ({}/32) and {}'s loopback ({}/32) reach each other.",
                    name(src),
                    name(src),
                    lo(src),
                    name(dst),
                    lo(dst)
                )],
                format!(
                    "No routing protocol runs, so every router on the path between {} and {} needs a static route toward the far loopback with the next hop on the link toward it, and the routers on the way back need one toward {}/32: {} hop(s) each way.",
                    name(src),
                    name(dst),
                    lo(src),
                    path.len() - 1
                ),
            )
        };
        let protocol = if ospf { "ospf" } else { "static" };
        let testcases = vec![
            testcase(
                format!("{} learns {}/32 by {protocol}", name(src), lo(dst)),
                &name(src),
                format!("show ip route {}/32", lo(dst)),
                &format!("Known via \"{protocol}\""),
                false,
            ),
            testcase(
                format!("{} learns {}/32 by {protocol}", name(dst), lo(src)),
                &name(dst),
                format!("show ip route {}/32", lo(src)),
                &format!("Known via \"{protocol}\""),
                false,
            ),
            testcase(
                format!("{}'s loopback reaches {}'s", name(src), name(dst)),
                &name(src),
                format!("ping -c 1 -W 1 -I {} {}", lo(src), lo(dst)),
                " 1 received",
                true,
            ),
        ];
        let config = ConfigTask {
            task_name: format!("{} ({n} routers)", if ospf { "OSPF Single Area" } else { "Static Routing" }),
            intents,
            topology: ConfigTopology {
                nodes: (0..n).map(name).collect(),
                links: links
                    .iter()
                    .map(|l| format!("{} {} <-> {} {}", name(l.a), l.a_if, name(l.b), l.b_if))
                    .collect(),
            },
            startup_configs: startup,
            ground_truth_configs: ground_truth,
            ground_truth_linux: Default::default(),
            ground_truth_reasoning: reasoning,
            testcases,
        };
        Ok(Task {
            id: format!("netconf-s{seed}-{index:05}"),
            application: ENV.into(),
            level,
            label: label.into(),
            domain: Some("routing".into()),
            seed: Some(seed),
            query: config.intents.join("\n"),
            setup: Value::Null,
            kind: TaskKind::Config(config),
        })
    }
}

impl TaskGenerator for NetconfGenerator {
    fn name(&self) -> &str {
        ENV
    }

    fn params(&self) -> Value {
        json!({"routers": "2-5", "labels": LABELS.iter().map(|(l, _)| *l).collect::<Vec<_>>()})
    }

    fn generate(&self, seed: u64, index: u64) -> Result<Task, TaskError> {
        self.draw(seed, index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tasks_are_pure_and_well_formed() {
        let g = NetconfGenerator;
        for i in 0..40 {
            let t = g.generate(5, i).expect("task");
            assert_eq!(
                serde_json::to_string(&t).ok(),
                serde_json::to_string(&g.generate(5, i).expect("again")).ok()
            );
            let TaskKind::Config(c) = &t.kind else { panic!("config task") };
            assert!((2..=5).contains(&c.topology.nodes.len()));
            assert!(!c.ground_truth_configs.is_empty(), "{}", t.id);
            assert_eq!(c.testcases.len(), 3);
            for link in &c.topology.links {
                assert!(netdojo_core::task::parse_link(link).is_some(), "{link}");
            }
            netdojo_core::task::validate_task(&t).expect("valid");
        }
    }
}
