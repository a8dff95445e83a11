//! An incident task as it travels in a suite: `setup` names the lab (and the hash of the lab as
//! it was when the task was drawn, so an edited lab cannot silently change a frozen task) and
//! the health checks that failed once the faults were injected; the ground truth is a reactive
//! task's `faults` (each one's `params` is the whole [`Fault`]) and `repair`, the oracle's
//! calls (the diagnosis, then each fault's repair through the agent's own tools).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use netdojo_core::{Task, TaskKind, ToolCall};

use crate::catalogue::FaultType;
use crate::fault::{Action, Fault};
use crate::lab::{Lab, LabError};

/// The application's name (`--env incident`, a task's `application`).
pub const APPLICATION: &str = "incident";

/// A task's label when it has no fault: a healthy control.
pub const HEALTHY: &str = "healthy";

/// What `setup` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    /// The lab's name: testdata/incident/labs/NAME.yml.
    pub lab: String,
    /// [`lab_hash`] of the lab the task was drawn on.
    pub lab_hash: String,
    /// Names of the health checks that fail with every fault injected, as measured on the live
    /// lab (`generate --env incident`); empty for a healthy control. The environment measures
    /// it again at reset: a task that no longer shows it is not served.
    #[serde(default)]
    pub symptom: Vec<String>,
    /// The order the oracle repairs the faults in, as indices into the task's `faults`: an
    /// order under which no repair step breaks a health check that passed, found on the live
    /// lab by `generate --env incident` ([`crate::verify`]). Absent: the last injected first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repair_order: Vec<usize>,
    /// The faults go in as soon as the routers have their configuration, before the protocols
    /// converge, and the lab is served once exactly the checks of `symptom` fail: verified by
    /// `generate --env incident` for this task (the symptom shows so and holds, and the oracle's
    /// repair from there is safe). Absent: the lab converges healthy first, then the faults go
    /// in and the environment waits for their symptom.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inject_at_start: bool,
}

/// The repair order `order` names for `n` faults, or the default (the last injected first)
/// when `order` is empty or not a permutation of `0..n`.
pub fn repair_order(order: &[usize], n: usize) -> Vec<usize> {
    let mut sorted = order.to_vec();
    sorted.sort_unstable();
    if sorted.len() == n && sorted.iter().enumerate().all(|(i, x)| i == *x) {
        order.to_vec()
    } else {
        (0..n).rev().collect()
    }
}

/// One entry of a diagnosis: a device and a published fault type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Diagnosed {
    pub device: String,
    #[serde(rename = "type")]
    pub fault_type: FaultType,
}

/// SHA-256 of the lab's JSON: the same for two files that differ only in layout or comments.
pub fn lab_hash(lab: &Lab) -> String {
    // A Lab is plain data: serialising it cannot fail.
    let bytes = serde_json::to_vec(lab).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The labs of a directory (every `*.yml`), by name. A file whose `name` is not its stem is
/// refused: tasks name labs, and the name must find the file.
pub fn load_labs(dir: &Path) -> Result<BTreeMap<String, Lab>, LabError> {
    let unreadable =
        |e: std::io::Error| LabError::Parse { path: dir.display().to_string(), message: e.to_string() };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(unreadable)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .collect();
    paths.sort();
    let mut labs = BTreeMap::new();
    for path in paths {
        let lab = Lab::load(&path)?;
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        if lab.name != stem {
            return Err(LabError::Invalid {
                path: path.display().to_string(),
                field: "name".into(),
                message: format!("`{}` must be the file's name, `{stem}`", lab.name),
            });
        }
        labs.insert(lab.name.clone(), lab);
    }
    Ok(labs)
}

/// Where the published labs are: testdata/incident/labs in this repository.
pub fn default_labs_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/incident/labs"))
}

pub fn setup_of(task: &Task) -> Result<Setup, String> {
    serde_json::from_value(task.setup.clone()).map_err(|e| format!("field `setup`: {e}"))
}

/// The task's faults (its ground truth), in injection order.
pub fn faults_of(task: &Task) -> Result<Vec<Fault>, String> {
    let TaskKind::Reactive { faults, .. } = &task.kind else {
        return Err("an incident task is reactive (`kind: reactive`)".into());
    };
    faults
        .iter()
        .enumerate()
        .map(|(i, f)| {
            serde_json::from_value::<Fault>(f.params.clone())
                .map_err(|e| format!("field `faults[{i}].params`: {e}"))
        })
        .collect()
}

/// The right diagnosis of a task: its faults as (device, type), without repeats.
pub fn truth(faults: &[Fault]) -> Vec<Diagnosed> {
    let mut out: Vec<Diagnosed> =
        faults.iter().map(|f| Diagnosed { device: f.device.clone(), fault_type: f.fault_type }).collect();
    out.sort();
    out.dedup();
    out
}

/// The agent's tools by name; the oracle's plan and the environment share them.
pub mod tools {
    pub const SHOW: &str = "show";
    pub const CONFIGURE: &str = "configure";
    pub const PING: &str = "ping";
    pub const TRACEROUTE: &str = "traceroute";
    pub const SERVICE: &str = "service";
    pub const SUBMIT: &str = "submit-diagnosis";
}

/// An operator action as a call of the agent's tools: what the oracle plays to repair.
pub fn action_call(action: &Action) -> ToolCall {
    match action {
        Action::Vtysh { device, lines } => {
            ToolCall::new(tools::CONFIGURE, json!({"device": device, "dialect": "frr", "commands": lines}))
        }
        Action::Linux { device, line } => {
            ToolCall::new(tools::CONFIGURE, json!({"device": device, "dialect": "linux", "commands": [line]}))
        }
        Action::Service { device, service, op } => {
            ToolCall::new(tools::SERVICE, json!({"device": device, "service": service, "op": op}))
        }
    }
}

/// The diagnosis call naming `diagnosis`.
pub fn submit_call(diagnosis: &[Diagnosed]) -> ToolCall {
    ToolCall::new(tools::SUBMIT, json!({ "faults": diagnosis }))
}

/// A fault's repair as the oracle's steps: consecutive actions on one device in one dialect
/// form one step (one `configure` call), as an operator pastes them: a repair that deletes a
/// wrong address and adds the right one is one step, not a step that leaves the interface
/// without an address. Verification ([`crate::verify`]) judges the safety of exactly these.
pub fn repair_steps(fault: &Fault) -> Vec<Vec<Action>> {
    let mut steps: Vec<Vec<Action>> = Vec::new();
    for action in &fault.repair {
        if let Some(last) = steps.last_mut().and_then(|s| s.last())
            && same_call(last, action)
            && let Some(step) = steps.last_mut()
        {
            step.push(action.clone());
            continue;
        }
        steps.push(vec![action.clone()]);
    }
    steps
}

/// Two actions one `configure` call can carry: same device, same dialect.
fn same_call(a: &Action, b: &Action) -> bool {
    match (a, b) {
        (Action::Vtysh { device: x, .. }, Action::Vtysh { device: y, .. })
        | (Action::Linux { device: x, .. }, Action::Linux { device: y, .. }) => x == y,
        _ => false,
    }
}

/// One step's actions as one call of the agent's tools.
pub fn step_call(step: &[Action]) -> Option<ToolCall> {
    let mut call = action_call(step.first()?);
    for action in &step[1..] {
        let more = action_call(action);
        if let (Some(into), Some(more)) =
            (call.arguments["commands"].as_array().cloned(), more.arguments["commands"].as_array())
        {
            let mut into = into;
            into.extend(more.iter().cloned());
            call.arguments["commands"] = Value::Array(into);
        }
    }
    Some(call)
}

/// The oracle's calls for `faults`: the diagnosis, then each fault's [`repair_steps`], the
/// faults in `order` ([`repair_order`]; empty: the last injected first).
pub fn oracle_calls(faults: &[Fault], order: &[usize]) -> Vec<ToolCall> {
    let mut calls = vec![submit_call(&truth(faults))];
    for i in repair_order(order, faults.len()) {
        calls.extend(repair_steps(&faults[i]).iter().filter_map(|s| step_call(s)));
    }
    calls
}

/// A task's faults as core's reactive faults: the type's id, the way the first injection goes
/// (`vtysh`, `linux`, `service`), the whole fault as `params`.
pub fn core_fault(fault: &Fault) -> netdojo_core::Fault {
    let method = match fault.inject.first() {
        Some(Action::Vtysh { .. }) => "vtysh",
        Some(Action::Linux { .. }) => "linux",
        Some(Action::Service { .. }) => "service",
        None => "none",
    };
    netdojo_core::Fault {
        kind: fault.fault_type.id().to_string(),
        method: method.to_string(),
        params: serde_json::to_value(fault).unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(device: &str, repair: Vec<Action>) -> Fault {
        Fault {
            fault_type: FaultType::InterfaceDown,
            device: device.into(),
            detail: String::new(),
            inject: vec![],
            repair,
            symptom: vec![],
        }
    }

    fn linux(device: &str, line: &str) -> Action {
        Action::Linux { device: device.into(), line: line.into() }
    }

    #[test]
    fn the_oracle_repairs_in_the_recorded_order_one_step_per_pasted_block() {
        let a = fault(
            "r1",
            vec![
                linux("r1", "ip addr del 10.0.0.9/24 dev eth1"),
                linux("r1", "ip addr add 10.0.0.1/24 dev eth1"),
                Action::Service { device: "r1".into(), service: "web".into(), op: "start".into() },
            ],
        );
        let b =
            fault("r2", vec![Action::Vtysh { device: "r2".into(), lines: vec!["interface eth1".into()] }]);
        let faults = [a, b];
        assert_eq!(repair_steps(&faults[0]).iter().map(Vec::len).collect::<Vec<_>>(), vec![2, 1]);
        let devices = |calls: &[ToolCall]| -> Vec<String> {
            calls[1..].iter().map(|c| c.arguments["device"].as_str().unwrap_or("").to_string()).collect()
        };
        // No order recorded: the last injected first.
        let calls = oracle_calls(&faults, &[]);
        assert_eq!(calls[0].name, tools::SUBMIT);
        assert_eq!(devices(&calls), ["r2", "r1", "r1"]);
        let calls = oracle_calls(&faults, &[0, 1]);
        assert_eq!(devices(&calls), ["r1", "r1", "r2"]);
        assert_eq!(calls[1].arguments["commands"].as_array().map(Vec::len), Some(2));
        // An order that is not a permutation of the faults falls back to the default.
        assert_eq!(repair_order(&[0, 0], 2), vec![1, 0]);
        assert_eq!(repair_order(&[1], 2), vec![1, 0]);
    }

    #[test]
    fn a_setup_says_inject_at_start_only_when_true_and_older_tasks_read_as_after_convergence() {
        let old = json!({"lab": "campus", "lab_hash": "sha256:x", "symptom": ["reach a -> b"]});
        let setup: Setup = serde_json::from_value(old.clone()).expect("a task drawn before the field");
        assert!(!setup.inject_at_start);
        assert_eq!(serde_json::to_value(&setup).ok(), Some(old.clone()), "false is not written");
        let mut at_start = setup;
        at_start.inject_at_start = true;
        let written = serde_json::to_value(&at_start).unwrap_or_default();
        assert_eq!(written["inject_at_start"], json!(true));
        let back: Setup = serde_json::from_value(written).expect("reads back");
        assert_eq!(back, at_start);
    }
}
