//! The task model and where tasks come from.
//!
//! One [`Task`] type covers the three shapes the seeds describe: NetConfBench configuration
//! tasks ([`TaskKind::Config`], seed 001 §4.1), NetPress constructive queries (a goal state or an
//! answer, [`TaskKind::Constructive`]) and reactive queries (a hidden fault to repair,
//! [`TaskKind::Reactive`]). The backend-specific part of a task (which graph, which topology) is
//! its `setup`, read by the environment that runs it.
//!
//! Ground truth travels with the task, and only the oracle agent and the environment's final
//! evaluation may read it: an agent under evaluation sees the brief the environment writes.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::TaskError;
use crate::tool::ToolCall;

// Defined with the code that makes it runnable.
pub use crate::testcase::Testcase;

/// How a manifest's name ends: `suite.jsonl`'s is `suite.manifest.json`. A directory suite
/// skips such files when it reads its tasks.
pub const MANIFEST_SUFFIX: &str = ".manifest.json";

/// One evaluation task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Unique within a suite; also names the task's files in a run directory.
    pub id: String,
    /// The application (environment) that runs it: `dcgraph`, `routing`, `k8s`, `netconf`...
    pub application: String,
    /// Complexity level (1 = single operation or fault).
    pub level: u8,
    /// The action or fault label of the seed's tables (`add`, `remove-count`, `DR+DI`...).
    pub label: String,
    /// The task's domain, where its application has several (NetConfBench: `routing`,
    /// `policy`, `security`, `qos`): summaries report each domain, `eval --domain` selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// The seed the task was generated from, if it was generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The natural-language query, intent or symptom.
    pub query: String,
    /// Backend-specific description of the initial state (graph, topology, workload).
    #[serde(default)]
    pub setup: Value,
    #[serde(flatten)]
    pub kind: TaskKind,
}

/// What the task asks for, with its ground truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TaskKind {
    /// Intent-driven configuration (NetConfBench, seed 001 §4.1).
    Config(ConfigTask),
    /// Reach a goal state or compute an answer (NetPress constructive tasks).
    Constructive {
        /// The ground-truth action sequence, as calls of the environment's own tools.
        actions: Vec<ToolCall>,
        /// The expected answer, for queries that ask for one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<Value>,
        /// A backend-specific description of the goal state (a digest, counts...).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        goal: Option<Value>,
    },
    /// Repair a hidden fault and return to the healthy state (NetPress reactive tasks).
    Reactive {
        /// The injected faults, hidden from the agent.
        faults: Vec<Fault>,
        /// A repair that restores the healthy state, as tool calls.
        repair: Vec<ToolCall>,
    },
}

/// One injected fault of a reactive task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// The fault type of the seed's catalogue (`disable_routing`, `change_port`...).
    pub kind: String,
    /// How it was injected (`ip_forward_off`, `iptables_forward_drop`...).
    pub method: String,
    #[serde(default)]
    pub params: Value,
}

/// A NetConfBench configuration task, field for field as seed 001 §4.1 writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigTask {
    pub task_name: String,
    pub intents: Vec<String>,
    pub topology: ConfigTopology,
    #[serde(default)]
    pub startup_configs: BTreeMap<String, String>,
    /// The ground truth in FRRouting's CLI (vtysh, configuration mode), per device.
    #[serde(default)]
    pub ground_truth_configs: BTreeMap<String, Vec<String>>,
    /// The ground truth in the `linux` dialect (nft, tc, ip), per device: what FRR does not
    /// do (packet filtering, QoS) is configured on the same router as on any Linux router.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ground_truth_linux: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub ground_truth_reasoning: String,
    #[serde(default)]
    pub testcases: Vec<Testcase>,
}

/// A link as the seed writes it, `"A eth0 <-> B eth1"`, as its two ends ((A, eth0), (B, eth1)).
pub fn parse_link(link: &str) -> Option<((String, String), (String, String))> {
    let (a, b) = link.split_once("<->")?;
    let end = |s: &str| {
        let mut words = s.split_whitespace();
        let (node, iface) = (words.next()?, words.next()?);
        words.next().is_none().then(|| (node.to_string(), iface.to_string()))
    };
    Some((end(a)?, end(b)?))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigTopology {
    pub nodes: Vec<String>,
    /// Links as the seed writes them: `"A eth0 <-> B eth0"`.
    #[serde(default)]
    pub links: Vec<String>,
}

/// A source of tasks: a static suite or a seeded generator.
pub trait TaskSource: Send + Sync {
    /// How to rebuild this source (written into the run's configuration).
    fn describe(&self) -> Value;
    /// The number of tasks, when known in advance.
    fn len_hint(&self) -> Option<usize>;
    /// The tasks, in a stable order.
    fn tasks(&self) -> Box<dyn Iterator<Item = Result<Task, TaskError>> + Send + '_>;
}

/// Makes tasks from a seed. `generate(seed, index)` must be a pure function of its arguments:
/// the same seed gives the same tasks, byte for byte, on any machine, in any order.
pub trait TaskGenerator: Send + Sync {
    fn name(&self) -> &str;
    /// Generator parameters, for the run's configuration.
    fn params(&self) -> Value {
        Value::Null
    }
    fn generate(&self, seed: u64, index: u64) -> Result<Task, TaskError>;
}

impl<T: TaskGenerator + ?Sized> TaskGenerator for std::sync::Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn params(&self) -> Value {
        (**self).params()
    }
    fn generate(&self, seed: u64, index: u64) -> Result<Task, TaskError> {
        (**self).generate(seed, index)
    }
}

/// The seed of task `index` of a suite seeded with `seed`: what a generator seeds its random
/// number generator with, so that every task is independent of the others (splitmix64).
pub fn task_seed(seed: u64, index: u64) -> u64 {
    fn splitmix64(mut x: u64) -> u64 {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }
    splitmix64(seed ^ splitmix64(index))
}

/// The seed of attempt `epoch` at a task (`eval --epochs`) for an agent seeded with `seed`:
/// `seed` itself for epoch 0 (what the agent does without epochs), an independent one for
/// each later epoch.
pub fn epoch_seed(seed: u64, epoch: u32) -> u64 {
    if epoch == 0 { seed } else { task_seed(seed, u64::from(epoch)) }
}

/// `count` tasks from a generator and a seed.
pub struct GeneratedSuite<G> {
    pub generator: G,
    pub seed: u64,
    pub count: u64,
}

impl<G> std::fmt::Debug for GeneratedSuite<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratedSuite").field("seed", &self.seed).field("count", &self.count).finish()
    }
}

impl<G: TaskGenerator> TaskSource for GeneratedSuite<G> {
    fn describe(&self) -> Value {
        serde_json::json!({
            "generator": self.generator.name(),
            "params": self.generator.params(),
            "seed": self.seed,
            "count": self.count,
        })
    }

    fn len_hint(&self) -> Option<usize> {
        usize::try_from(self.count).ok()
    }

    fn tasks(&self) -> Box<dyn Iterator<Item = Result<Task, TaskError>> + Send + '_> {
        Box::new((0..self.count).map(move |i| self.generator.generate(self.seed, i)))
    }
}

/// Which tasks of a source to run (`eval --domain`, `--level`, `--label`): a task is kept when
/// it matches every criterion given (within one, any of its values). No criterion keeps all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskFilter {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<u8>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
}

impl TaskFilter {
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty() && self.levels.is_empty() && self.labels.is_empty()
    }

    pub fn keeps(&self, task: &Task) -> bool {
        (self.domains.is_empty() || task.domain.as_ref().is_some_and(|d| self.domains.contains(d)))
            && (self.levels.is_empty() || self.levels.contains(&task.level))
            && (self.labels.is_empty() || self.labels.contains(&task.label))
    }
}

/// The tasks of `source` that `filter` keeps, in the source's order.
pub struct Filtered {
    pub source: Box<dyn TaskSource>,
    pub filter: TaskFilter,
}

impl std::fmt::Debug for Filtered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filtered")
            .field("source", &self.source.describe())
            .field("filter", &self.filter)
            .finish()
    }
}

impl TaskSource for Filtered {
    fn describe(&self) -> Value {
        if self.filter.is_empty() {
            return self.source.describe();
        }
        serde_json::json!({"source": self.source.describe(), "filter": self.filter})
    }

    fn len_hint(&self) -> Option<usize> {
        // Counted: the sources whose length is known make their tasks cheaply.
        let known = self.source.len_hint()?;
        if self.filter.is_empty() { Some(known) } else { Some(self.tasks().count()) }
    }

    fn tasks(&self) -> Box<dyn Iterator<Item = Result<Task, TaskError>> + Send + '_> {
        // A task that does not load is kept: its error is the run's to report.
        Box::new(self.source.tasks().filter(|t| t.as_ref().map_or(true, |t| self.filter.keeps(t))))
    }
}

/// A suite read from files: a JSON-lines file (one task a line, as `cargo xtask generate`
/// writes), a single `.json` task, or a directory of `.json` tasks read in name order.
#[derive(Debug, Clone)]
pub struct StaticSuite {
    path: PathBuf,
    tasks: Vec<Task>,
}

impl StaticSuite {
    /// Reads and validates every task now, so a bad file fails before any episode runs.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, TaskError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| TaskError::Io { path: path.clone(), source };
        let meta = fs::metadata(&path).map_err(io)?;
        let mut tasks = Vec::new();
        if meta.is_dir() {
            let mut files: Vec<PathBuf> = fs::read_dir(&path)
                .map_err(io)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("json" | "jsonl")))
                // The suite's manifest (`generate`'s, crate::suite) is not a task.
                .filter(|p| !p.to_string_lossy().ends_with(MANIFEST_SUFFIX))
                .collect();
            files.sort();
            for file in files {
                tasks.extend(read_valid(&file)?);
            }
        } else {
            tasks = read_valid(&path)?;
        }
        let mut seen = std::collections::HashSet::new();
        for task in &tasks {
            if !seen.insert(task.id.clone()) {
                return Err(TaskError::Invalid {
                    task_id: task.id.clone(),
                    field: "id".into(),
                    message: format!("appears more than once in {}", path.display()),
                });
            }
        }
        Ok(Self { path, tasks })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl TaskSource for StaticSuite {
    fn describe(&self) -> Value {
        serde_json::json!({ "suite": self.path.display().to_string(), "count": self.tasks.len() })
    }

    fn len_hint(&self) -> Option<usize> {
        Some(self.tasks.len())
    }

    fn tasks(&self) -> Box<dyn Iterator<Item = Result<Task, TaskError>> + Send + '_> {
        Box::new(self.tasks.iter().cloned().map(Ok))
    }
}

/// The tasks of one file, validated; an invalid one names the file, where the author fixes it.
fn read_valid(path: &Path) -> Result<Vec<Task>, TaskError> {
    let tasks = read_file(path)?;
    for task in &tasks {
        validate_task(task).map_err(|e| match e {
            TaskError::Invalid { task_id, field, message } => {
                TaskError::InvalidIn { path: path.to_path_buf(), task_id, field, message }
            }
            other => other,
        })?;
    }
    Ok(tasks)
}

fn read_file(path: &Path) -> Result<Vec<Task>, TaskError> {
    let file = fs::File::open(path).map_err(|source| TaskError::Io { path: path.to_path_buf(), source })?;
    let parse_err = |line: Option<usize>, e: serde_json::Error| TaskError::Parse {
        path: path.to_path_buf(),
        line: line.or(Some(e.line())),
        message: e.to_string(),
    };
    if path.extension().and_then(|e| e.to_str()) == Some("jsonl") {
        let mut tasks = Vec::new();
        for (n, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|source| TaskError::Io { path: path.to_path_buf(), source })?;
            if line.trim().is_empty() {
                continue;
            }
            tasks.push(serde_json::from_str(&line).map_err(|e| parse_err(Some(n + 1), e))?);
        }
        Ok(tasks)
    } else {
        let value: Value = serde_json::from_reader(BufReader::new(file)).map_err(|e| parse_err(None, e))?;
        let task = if value.get("task_name").is_some() && value.get("kind").is_none() {
            netconf_task(path, value)?
        } else {
            serde_json::from_value(value).map_err(|e| parse_err(None, e))?
        };
        Ok(vec![task])
    }
}

/// NetConfBench's task domains (seed 001 §3: routing, policy, security, QoS).
pub const DOMAINS: [&str; 4] = ["routing", "policy", "security", "qos"];

/// A task file exactly as NetConfBench writes one (seed 001 §4.1: `task_name`, `intents`,
/// `topology`, ...), run by the `netconf` application. Its id is the file name; its label the
/// task name; its query the intents, one a line; its level the `level` field if present.
fn netconf_task(path: &Path, value: Value) -> Result<Task, TaskError> {
    let id = path.file_stem().and_then(|s| s.to_str()).unwrap_or("task").to_string();
    let level = value.get("level").and_then(Value::as_u64).map_or(1, |l| l.clamp(1, 255) as u8);
    // netdojo's extension: what a backend needs to build the topology (GNS3 templates...).
    let setup = value.get("setup").cloned().unwrap_or(Value::Null);
    // netdojo's extension: the seed's task domain (routing, policy, security, QoS).
    let domain = match value.get("domain") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) if DOMAINS.contains(&d.as_str()) => Some(d.clone()),
        Some(other) => {
            return Err(TaskError::Parse {
                path: path.to_path_buf(),
                line: None,
                message: format!("field `domain`: {other} is not one of {}", DOMAINS.join(", ")),
            });
        }
    };
    let config: ConfigTask = serde_json::from_value(value).map_err(|e| TaskError::Parse {
        path: path.to_path_buf(),
        line: None,
        message: format!("not a NetConfBench task (seed 001 §4.1): {e}"),
    })?;
    Ok(Task {
        id,
        application: "netconf".into(),
        level,
        label: config.task_name.clone(),
        domain,
        seed: None,
        query: config.intents.join("\n"),
        setup,
        kind: TaskKind::Config(config),
    })
}

/// Checks what every task needs whatever its backend.
pub fn validate_task(task: &Task) -> Result<(), TaskError> {
    let invalid = |field: &str, message: &str| TaskError::Invalid {
        task_id: task.id.clone(),
        field: field.into(),
        message: message.into(),
    };
    if task.id.trim().is_empty() {
        return Err(invalid("id", "is empty"));
    }
    if task.application.trim().is_empty() {
        return Err(invalid("application", "is empty"));
    }
    if task.level == 0 {
        return Err(invalid("level", "must be 1 or more"));
    }
    if let TaskKind::Config(config) = &task.kind {
        let known = |d: &str| config.topology.nodes.iter().any(|n| n == d);
        for (field, devices) in [
            ("startup_configs", config.startup_configs.keys().collect::<Vec<_>>()),
            ("ground_truth_configs", config.ground_truth_configs.keys().collect()),
            ("ground_truth_linux", config.ground_truth_linux.keys().collect()),
        ] {
            if let Some(device) = devices.into_iter().find(|d| !known(d)) {
                return Err(invalid(field, &format!("device `{device}` is not in topology.nodes")));
            }
        }
        for (i, link) in config.topology.links.iter().enumerate() {
            let field = format!("topology.links[{i}]");
            let Some(((a, _), (b, _))) = parse_link(link) else {
                return Err(invalid(&field, &format!("`{link}` is not `A eth0 <-> B eth0`")));
            };
            if let Some(device) = [a, b].into_iter().find(|d| !known(d)) {
                return Err(invalid(&field, &format!("device `{device}` is not in topology.nodes")));
            }
        }
        for (i, tc) in config.testcases.iter().enumerate() {
            let field = |name: &str| format!("testcases[{i}].{name}");
            if let Some(device) = &tc.device
                && !known(device)
            {
                return Err(invalid(
                    &field("device"),
                    &format!("device `{device}` is not in topology.nodes"),
                ));
            }
            if let Some(expected) = &tc.expected_result {
                crate::testcase::route_checks(expected).map_err(|e| {
                    let key = if e.key.is_empty() { String::new() } else { format!(".{}", e.key) };
                    invalid(&field(&format!("expected_result{key}")), &e.message)
                })?;
            }
            if !tc.commands.is_empty() && tc.expected_output.is_none() {
                return Err(invalid(
                    &field("expected_output"),
                    "commands need an expected_output to match their output against",
                ));
            }
            if let Some(dialect) = &tc.dialect
                && !matches!(dialect.as_str(), "frr" | "linux")
            {
                return Err(invalid(&field("dialect"), &format!("`{dialect}` is not `frr` or `linux`")));
            }
            let runnable = !tc.commands.is_empty() && tc.expected_output.is_some();
            if !runnable && tc.expected_result.is_none() {
                return Err(invalid(
                    &field("expected_output"),
                    "a testcase needs commands and expected_output (§4.3), or expected_result (§4.1)",
                ));
            }
            if tc.device.is_none() {
                crate::testcase::testcase_device(tc, &config.topology.nodes)
                    .map_err(|why| invalid(&field("name"), &why))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configuration_tasks_are_checked_field_by_field() {
        let good = json!({
            "task_name": "t", "intents": ["i"],
            "topology": {"nodes": ["R1", "R2"], "links": ["R1 eth0 <-> R2 eth0"]},
            "testcases": [{"device": "R1", "commands": ["show ip route"], "expected_output": "x"}]
        });
        let check = |v: serde_json::Value| {
            let config: ConfigTask = serde_json::from_value(v).expect("shape");
            let mut t = task("t1");
            t.kind = TaskKind::Config(config);
            validate_task(&t).map_err(|e| e.to_string())
        };
        assert_eq!(check(good.clone()), Ok(()));
        let mut bad = good.clone();
        bad["topology"]["links"] = json!(["R1 eth0 <-> R9 eth0"]);
        assert_eq!(
            check(bad).expect_err("invalid"),
            "task t1: field `topology.links[0]`: device `R9` is not in topology.nodes"
        );
        let mut bad = good.clone();
        bad["topology"]["links"] = json!(["R1 eth0 -- R2 eth0"]);
        assert!(check(bad).expect_err("invalid").contains("is not `A eth0 <-> B eth0`"));
        let mut bad = good.clone();
        bad["testcases"][0]["dialect"] = json!("ios");
        assert_eq!(
            check(bad).expect_err("invalid"),
            "task t1: field `testcases[0].dialect`: `ios` is not `frr` or `linux`"
        );
        let mut bad = good.clone();
        bad["testcases"][0] = json!({"name": "no way to run it"});
        assert!(check(bad).expect_err("invalid").contains("testcases[0].expected_output"));
        let mut bad = good;
        bad["ground_truth_linux"] = json!({"R3": ["nft add table inet t"]});
        assert!(check(bad).expect_err("invalid").contains("field `ground_truth_linux`: device `R3`"));
    }

    fn task(id: &str) -> Task {
        Task {
            id: id.into(),
            application: "dcgraph".into(),
            level: 1,
            label: "count".into(),
            domain: None,
            seed: Some(1),
            query: "Count the EK_PORT in ju1.a1.m1.".into(),
            setup: json!({"graph": "generated"}),
            kind: TaskKind::Constructive { actions: vec![], answer: Some(json!(64)), goal: None },
        }
    }

    #[test]
    fn task_round_trips_through_json() {
        let t = task("t1");
        let text = serde_json::to_string(&t).expect("serialise");
        assert!(text.contains("\"kind\":\"constructive\""), "{text}");
        let back: Task = serde_json::from_str(&text).expect("parse");
        assert_eq!(back, t);
    }

    #[test]
    fn loads_jsonl_and_reports_the_bad_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("suite.jsonl");
        let good = serde_json::to_string(&task("a")).expect("json");
        fs::write(&file, format!("{good}\n{{\"id\": \"b\"}}\n")).expect("write");
        let err = StaticSuite::load(&file).expect_err("second line is not a task").to_string();
        assert!(err.contains("suite.jsonl:2"), "{err}");
        assert!(err.contains("missing field"), "{err}");
    }

    #[test]
    fn rejects_duplicate_ids_and_config_devices_outside_the_topology() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("suite.jsonl");
        let good = serde_json::to_string(&task("a")).expect("json");
        fs::write(&file, format!("{good}\n{good}\n")).expect("write");
        let err = StaticSuite::load(&file).expect_err("duplicate").to_string();
        assert!(err.contains("task a: field `id`"), "{err}");

        let mut t = task("c");
        t.kind = TaskKind::Config(ConfigTask {
            task_name: "Static Routing".into(),
            intents: vec!["R1: add a route".into()],
            topology: ConfigTopology { nodes: vec!["R1".into()], links: vec![] },
            startup_configs: [("R2".to_string(), "!".to_string())].into(),
            ground_truth_configs: BTreeMap::new(),
            ground_truth_linux: BTreeMap::new(),
            ground_truth_reasoning: String::new(),
            testcases: vec![],
        });
        let err = validate_task(&t).expect_err("R2 unknown").to_string();
        assert!(err.contains("device `R2` is not in topology.nodes"), "{err}");
    }

    #[test]
    fn a_netconfbench_domain_is_read_and_a_bad_one_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let task = |domain: &str| {
            format!(
                r#"{{"task_name": "t", {domain} "intents": ["i"], "topology": {{"nodes": ["R1"], "links": []}}}}"#
            )
        };
        let file = dir.path().join("t.json");
        fs::write(&file, task(r#""domain": "policy","#)).expect("write");
        let t = StaticSuite::load(&file).expect("loads").tasks().next().expect("one").expect("ok");
        assert_eq!(t.domain.as_deref(), Some("policy"));
        fs::write(&file, task("")).expect("write");
        let t = StaticSuite::load(&file).expect("loads").tasks().next().expect("one").expect("ok");
        assert_eq!(t.domain, None);
        fs::write(&file, task(r#""domain": "Routing","#)).expect("write");
        let err = StaticSuite::load(&file).expect_err("not a domain").to_string();
        assert!(
            err.contains("t.json") && err.contains("field `domain`") && err.contains("routing, policy"),
            "{err}"
        );
    }

    #[test]
    fn a_filter_keeps_tasks_that_match_every_criterion_given() {
        let mut a = task("a");
        a.domain = Some("routing".into());
        a.level = 2;
        a.label = "x".into();
        let mut b = task("b");
        b.domain = Some("qos".into());
        b.label = "y".into();
        let mut c = task("c");
        c.label = "x".into();
        struct Three(Vec<Task>);
        impl TaskSource for Three {
            fn describe(&self) -> Value {
                Value::Null
            }
            fn len_hint(&self) -> Option<usize> {
                Some(self.0.len())
            }
            fn tasks(&self) -> Box<dyn Iterator<Item = Result<Task, TaskError>> + Send + '_> {
                Box::new(self.0.iter().cloned().map(Ok))
            }
        }
        let ids = |filter: TaskFilter| {
            let f = Filtered { source: Box::new(Three(vec![a.clone(), b.clone(), c.clone()])), filter };
            let ids: Vec<String> = f.tasks().map(|t| t.expect("ok").id).collect();
            assert_eq!(f.len_hint(), Some(ids.len()));
            ids
        };
        assert_eq!(ids(TaskFilter::default()), ["a", "b", "c"]);
        assert_eq!(
            ids(TaskFilter { domains: vec!["routing".into(), "qos".into()], ..Default::default() }),
            ["a", "b"]
        );
        assert_eq!(
            ids(TaskFilter { domains: vec!["qos".into()], levels: vec![2], ..Default::default() }),
            Vec::<String>::new()
        );
        assert_eq!(ids(TaskFilter { levels: vec![2], ..Default::default() }), ["a"]);
        assert_eq!(ids(TaskFilter { labels: vec!["x".into()], ..Default::default() }), ["a", "c"]);
    }
}
