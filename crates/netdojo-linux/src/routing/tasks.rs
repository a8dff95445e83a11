//! The routing task generator: a §C.1 topology drawn from the seed, then the faults of one of
//! Table 2's 15 labels, each drawn from its §C.2 methods.
//!
//! A task records, per fault, the method and the exact commands that inject it
//! (`params.inject`); the hidden repair (the inverse commands, last fault first) is what the
//! oracle plays. The environment checks at reset that the faults did break reachability.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use netdojo_core::task::task_seed;
use netdojo_core::{Task, TaskError, TaskGenerator, TaskKind, ToolCall};

use super::faults::{self, LABELS};
use super::layout::{Layout, ROUTER};

pub const APPLICATION: &str = "routing";

/// The symptom every routing task states (§C.3): the agent learns the rest by looking.
pub const SYMPTOM: &str = "The network has problems in the router r0: some nodes cannot ping \
     some others. Find the root cause and fix it so that every node can ping every other one, \
     without breaking any connection that works.";

/// Makes routing tasks; `generate(seed, index)` is pure.
#[derive(Debug, Clone, Default)]
pub struct RoutingGenerator;

impl RoutingGenerator {
    fn draw(&self, seed: u64, index: u64) -> Result<Task, TaskError> {
        let gen_err = |message: String| TaskError::Generate { generator: APPLICATION.into(), message };
        let (label, level, kinds) = LABELS[(index % LABELS.len() as u64) as usize];
        let mut rng = ChaCha8Rng::seed_from_u64(task_seed(seed, index));
        let mut subnets: u8 = rng.random_range(2..=4);
        let hosts: u8 = rng.random_range(2..=4);
        // Two faults must touch disjoint subnets: a route via a host of a subnet whose router
        // interface another fault took down cannot even be added, and the kernel flushes it
        // when that interface goes down, so neither injection nor repair would replay. Faults
        // that collide are redrawn; a topology too small for the pair gets one more subnet
        // (within §C.1's 2-4).
        let (layout, drawn) = loop {
            let layout = Layout::new(subnets, hosts);
            let mut found = None;
            for _ in 0..32 {
                let mut used: Vec<u8> = Vec::new();
                let mut drawn = Vec::new();
                let mut clash = false;
                for kind in kinds.iter().copied() {
                    let d = faults::draw(kind, None, &layout, &used, &mut rng)
                        .map_err(|e| gen_err(format!("task {index} ({label}): {e}")))?;
                    let touched: Vec<u8> = d.subnet().into_iter().chain(d.other_subnet()).collect();
                    clash |= touched.iter().any(|s| used.contains(s));
                    used.extend(touched);
                    drawn.push(d);
                }
                if !clash {
                    found = Some(drawn);
                    break;
                }
            }
            match found {
                Some(drawn) => break (layout, drawn),
                None if subnets < 4 => subnets += 1,
                None => {
                    return Err(gen_err(format!("task {index} ({label}): no disjoint faults on 4 subnets")));
                }
            }
        };
        let mut fault_list = Vec::new();
        for d in &drawn {
            let mut fault = d.fault.clone();
            if let Value::Object(params) = &mut fault.params {
                params.insert("inject".into(), json!(d.inject));
            }
            fault_list.push(fault);
        }
        // Last fault first: each repair then undoes a state its own injection produced.
        let repair = drawn
            .iter()
            .rev()
            .flat_map(|d| d.repair.iter())
            .map(|command| ToolCall::new("exec", json!({"machine": ROUTER, "command": command})))
            .collect();
        Ok(Task {
            id: format!("routing-s{seed}-{index:05}"),
            application: APPLICATION.into(),
            level,
            label: label.into(),
            domain: None,
            seed: Some(seed),
            query: SYMPTOM.into(),
            setup: json!({"subnets": layout.subnets.len(), "hosts_per_subnet": hosts}),
            kind: TaskKind::Reactive { faults: fault_list, repair },
        })
    }
}

impl TaskGenerator for RoutingGenerator {
    fn name(&self) -> &str {
        APPLICATION
    }

    fn params(&self) -> Value {
        json!({"subnets": "2-4", "hosts_per_subnet": "2-4", "labels": LABELS.len()})
    }

    fn generate(&self, seed: u64, index: u64) -> Result<Task, TaskError> {
        self.draw(seed, index)
    }
}

/// The layout a task's `setup` describes.
pub fn layout_of(task: &Task) -> Result<Layout, TaskError> {
    let field = |name: &str, v: Option<u64>| -> Result<u8, TaskError> {
        match v {
            Some(n @ 1..=8) => Ok(n as u8),
            _ => Err(TaskError::Invalid {
                task_id: task.id.clone(),
                field: format!("setup.{name}"),
                message: "expected an integer from 1 to 8".into(),
            }),
        }
    };
    let subnets = field("subnets", task.setup.get("subnets").and_then(Value::as_u64))?;
    let hosts = field("hosts_per_subnet", task.setup.get("hosts_per_subnet").and_then(Value::as_u64))?;
    Ok(Layout::new(subnets, hosts))
}

/// The injection commands of each fault of a task.
pub fn injections(task: &Task) -> Result<Vec<(String, Vec<String>)>, TaskError> {
    let TaskKind::Reactive { faults, .. } = &task.kind else {
        return Err(TaskError::Invalid {
            task_id: task.id.clone(),
            field: "kind".into(),
            message: "routing tasks are reactive (faults and repair)".into(),
        });
    };
    faults
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let commands =
                f.params.get("inject").and_then(Value::as_array).ok_or_else(|| TaskError::Invalid {
                    task_id: task.id.clone(),
                    field: format!("faults[{i}].params.inject"),
                    message: "missing: the commands that inject the fault".into(),
                })?;
            let commands = commands
                .iter()
                .map(|c| c.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| TaskError::Invalid {
                    task_id: task.id.clone(),
                    field: format!("faults[{i}].params.inject"),
                    message: "every command must be a string".into(),
                })?;
            Ok((format!("{} ({})", f.kind, f.method), commands))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fifteen_labels_come_round_in_order_with_their_levels() {
        let g = RoutingGenerator;
        let tasks: Vec<Task> = (0..30).map(|i| g.generate(3, i).expect("task")).collect();
        for (i, t) in tasks.iter().enumerate() {
            let (label, level, kinds) = LABELS[i % 15];
            assert_eq!((t.label.as_str(), t.level), (label, level));
            let TaskKind::Reactive { faults, repair } = &t.kind else { panic!("reactive") };
            assert_eq!(faults.len(), kinds.len());
            assert!(!repair.is_empty());
            let layout = layout_of(t).expect("layout");
            assert!((2..=4).contains(&layout.subnets.len()));
            assert!(injections(t).expect("inject").iter().all(|(_, c)| !c.is_empty()));
        }
    }

    #[test]
    fn generation_is_pure() {
        let g = RoutingGenerator;
        let a = serde_json::to_string(&g.generate(7, 42).expect("task")).expect("json");
        let b = serde_json::to_string(&g.generate(7, 42).expect("task")).expect("json");
        assert_eq!(a, b);
        let c = serde_json::to_string(&g.generate(8, 42).expect("task")).expect("json");
        assert_ne!(a, c);
    }
}
