//! The task generator of the policy-troubleshooting application: one of Table 3's labels per
//! task (in turn), each fault applied to a different policy of the Online Boutique, each drawn
//! again until it changes at least one verdict of the truth table.
//!
//! A task records per fault the policy it edited and that policy's faulty YAML
//! (`params.inject`); the hidden repair is `kubectl apply` of each original policy, which is
//! what the oracle plays.

use k8s_openapi::api::networking::v1::NetworkPolicy;
use rand::SeedableRng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use netdojo_core::task::task_seed;
use netdojo_core::{Fault, Task, TaskError, TaskGenerator, TaskKind, ToolCall};

use crate::faults::{self, LABELS};
use crate::{boutique, engine, policy};

pub const APPLICATION: &str = "k8s";
/// The agent's kubectl tool.
pub const KUBECTL_TOOL: &str = "kubectl";
/// The connectivity report tool.
pub const CONNECTIVITY_TOOL: &str = "connectivity";

/// The symptom every task states (§D.3): the agent learns the rest by looking.
pub const SYMPTOM: &str = "Some NetworkPolicies of the Online Boutique microservices were changed by mistake: \
     some services cannot reach the services they call, or can reach services they must not. Find \
     the misconfigured policies and fix them so that the connectivity matches the application's \
     communication pattern, without breaking any connection that works.";

/// Makes k8s tasks; `generate(seed, index)` is pure.
#[derive(Debug, Clone, Default)]
pub struct K8sGenerator;

impl TaskGenerator for K8sGenerator {
    fn name(&self) -> &str {
        APPLICATION
    }

    fn params(&self) -> Value {
        json!({"workload": "online-boutique", "labels": LABELS.len()})
    }

    fn generate(&self, seed: u64, index: u64) -> Result<Task, TaskError> {
        let gen_err = |message: String| TaskError::Generate { generator: APPLICATION.into(), message };
        let (label, level, kinds) = LABELS[(index % LABELS.len() as u64) as usize];
        let mut rng = ChaCha8Rng::seed_from_u64(task_seed(seed, index));
        let workload = boutique::workload().map_err(|e| gen_err(e.to_string()))?;
        let original = boutique::policies().map_err(|e| gen_err(e.to_string()))?;
        let targets = engine::targets(&workload);
        // A pair whose second fault cannot change a verdict after the first (a changed port on
        // the frontend closes the one door an added egress rule opens) is drawn again whole.
        let mut drawn = None;
        for _ in 0..64 {
            if let Some(d) = draw_faults(kinds, &original, &workload, &targets, &mut rng) {
                drawn = Some(d);
                break;
            }
        }
        let Some((current, touched, fault_list)) = drawn else {
            return Err(gen_err(format!("task {index} ({label}): no draw of its faults changes a verdict")));
        };
        let expected = engine::truth_table(&original, &workload, &targets);
        if engine::truth_table(&current, &workload, &targets) == expected {
            return Err(gen_err(format!("task {index} ({label}): the faults cancel out")));
        }
        // Last edited first (each restore is independent: two different policies).
        let repair = touched
            .iter()
            .rev()
            .map(|&i| {
                ToolCall::new(
                    KUBECTL_TOOL,
                    json!({"command": "apply -f -", "manifest": policy::to_yaml(&original[i])}),
                )
            })
            .collect();
        Ok(Task {
            id: format!("k8s-s{seed}-{index:05}"),
            application: APPLICATION.into(),
            level,
            label: label.into(),
            domain: None,
            seed: Some(seed),
            query: SYMPTOM.into(),
            setup: json!({"workload": "online-boutique"}),
            kind: TaskKind::Reactive { faults: fault_list, repair },
        })
    }
}

type Drawn = (Vec<NetworkPolicy>, Vec<usize>, Vec<Fault>);

/// Draws the faults of one label, each on a policy of its own, each redrawn until it changes a
/// verdict; `None` when some fault found no such draw.
fn draw_faults(
    kinds: &[faults::FaultKind],
    original: &[NetworkPolicy],
    workload: &crate::model::Workload,
    targets: &[engine::Target],
    rng: &mut ChaCha8Rng,
) -> Option<Drawn> {
    let mut current = original.to_vec();
    let mut touched: Vec<usize> = Vec::new();
    let mut fault_list = Vec::new();
    for kind in kinds.iter().copied() {
        let mut done = false;
        for _ in 0..256 {
            let candidates: Vec<usize> = (0..current.len()).filter(|i| !touched.contains(i)).collect();
            let &i = candidates.choose(rng)?;
            let mut edited = current[i].clone();
            let Some(detail) = faults::apply(kind, &mut edited, workload, rng) else { continue };
            let mut next = current.clone();
            next[i] = edited;
            // A fault that changes no verdict is redrawn.
            if engine::truth_table(&current, workload, targets)
                == engine::truth_table(&next, workload, targets)
            {
                continue;
            }
            fault_list.push(Fault {
                kind: kind.name().into(),
                method: "yaml_edit".into(),
                params: json!({
                    "policy": policy::name(&next[i]),
                    "edit": detail,
                    "inject": policy::to_yaml(&next[i]),
                }),
            });
            current = next;
            touched.push(i);
            done = true;
            break;
        }
        if !done {
            return None;
        }
    }
    Some((current, touched, fault_list))
}

/// The faulty policies of a task: (policy name, its YAML), one per fault.
pub fn injections(task: &Task) -> Result<Vec<(String, String)>, TaskError> {
    let invalid = |field: String, message: &str| TaskError::Invalid {
        task_id: task.id.clone(),
        field,
        message: message.into(),
    };
    let TaskKind::Reactive { faults, .. } = &task.kind else {
        return Err(invalid("kind".into(), "k8s tasks are reactive (faults and repair)"));
    };
    if task.setup.get("workload").and_then(Value::as_str) != Some("online-boutique") {
        return Err(invalid("setup.workload".into(), "the only workload is `online-boutique`"));
    }
    faults
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let get = |k: &str| {
                f.params
                    .get(k)
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| invalid(format!("faults[{i}].params.{k}"), "missing or not a string"))
            };
            Ok((get("policy")?, get("inject")?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fifteen_labels_come_round_in_order_and_every_fault_changes_a_verdict() {
        let g = K8sGenerator;
        let w = boutique::workload().expect("workload");
        let original = boutique::policies().expect("policies");
        let targets = engine::targets(&w);
        let healthy = engine::truth_table(&original, &w, &targets);
        for i in 0..30 {
            let t = g.generate(5, i).expect("task");
            let (label, level, kinds) = LABELS[(i % 15) as usize];
            assert_eq!((t.label.as_str(), t.level), (label, level));
            let inj = injections(&t).expect("injections");
            assert_eq!(inj.len(), kinds.len());
            if inj.len() == 2 {
                assert_ne!(inj[0].0, inj[1].0, "two faults, two policies");
            }
            let mut ps = original.clone();
            for (name, yaml) in &inj {
                let p = policy::parse_yaml(yaml, "inject").expect("yaml").remove(0);
                policy::validate(&p).expect("a fault keeps the object valid");
                let at = ps.iter().position(|q| policy::name(q) == name).expect("policy");
                ps[at] = p;
            }
            let faulty = engine::truth_table(&ps, &w, &targets);
            assert!(!faulty.mismatches(&healthy).is_empty(), "{label}");
        }
    }

    #[test]
    fn generation_is_pure() {
        let g = K8sGenerator;
        let a = serde_json::to_string(&g.generate(7, 42).expect("task")).expect("json");
        let b = serde_json::to_string(&g.generate(7, 42).expect("task")).expect("json");
        assert_eq!(a, b);
        assert_ne!(a, serde_json::to_string(&g.generate(8, 42).expect("task")).expect("json"));
    }
}
