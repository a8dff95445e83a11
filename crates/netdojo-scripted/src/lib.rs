//! Deterministic agents. They need no model and no key, and they validate the rest of the
//! system: the oracle must score 100% correct and safe on every generated task (which checks
//! the generator, the tools and the scorers together), the no-op agent must fail every task
//! that asks for a change or an answer, and the random agent makes well-formed but arbitrary
//! calls that the safety check must catch when they break the network.

use async_trait::async_trait;
use netdojo_core::{
    Agent, AgentError, AgentFactory, AgentTurn, EpisodeStart, Observation, Task, TaskKind, ToolCall,
    ToolSpec, task::epoch_seed,
};
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value, json};

/// Solves each task from its ground truth, one call a turn, through the same tools an LLM uses:
/// a constructive task's actions then `finish` with the expected answer; a reactive task's repair;
/// a configuration task's ground-truth commands through `update-cfg`, one call per device.
#[derive(Debug, Default)]
pub struct Oracle {
    plan: std::vec::IntoIter<ToolCall>,
    /// What the oracle says it reasoned: a configuration task's ground-truth reasoning, told
    /// once on the first turn (so a reasoning score compares it with itself), else a marker.
    reasoning: Option<String>,
}

/// The calls the oracle makes for `task`, `finish` included.
pub fn oracle_plan(task: &Task) -> Vec<ToolCall> {
    let mut plan: Vec<ToolCall> = match &task.kind {
        TaskKind::Constructive { actions, .. } => actions.clone(),
        TaskKind::Reactive { repair, .. } => repair.clone(),
        TaskKind::Config(config) => {
            let frr = config.ground_truth_configs.iter().map(|(device, commands)| {
                ToolCall::new("update-cfg", json!({ "device": device, "commands": commands }))
            });
            let linux = config.ground_truth_linux.iter().map(|(device, commands)| {
                ToolCall::new(
                    "update-cfg",
                    json!({ "device": device, "commands": commands, "dialect": "linux" }),
                )
            });
            frr.chain(linux).collect()
        }
    };
    let answer = match &task.kind {
        TaskKind::Constructive { answer, .. } => answer.clone(),
        _ => None,
    };
    plan.push(ToolCall::finish(answer));
    for (i, call) in plan.iter_mut().enumerate() {
        call.id = format!("oracle-{i}");
    }
    plan
}

#[async_trait]
impl Agent for Oracle {
    async fn start(&mut self, episode: &EpisodeStart<'_>) -> Result<(), AgentError> {
        self.plan = oracle_plan(episode.task).into_iter();
        self.reasoning = match &episode.task.kind {
            TaskKind::Config(c) if !c.ground_truth_reasoning.is_empty() => {
                Some(c.ground_truth_reasoning.clone())
            }
            _ => None,
        };
        Ok(())
    }

    async fn step(&mut self, _feedback: &[Observation]) -> Result<AgentTurn, AgentError> {
        let calls = self.plan.next().into_iter().collect();
        let reasoning = match &mut self.reasoning {
            Some(r) => std::mem::take(r),
            None => "ground truth".into(),
        };
        Ok(AgentTurn { reasoning, calls, ..AgentTurn::default() })
    }
}

/// Does nothing: calls `finish` at once, with no answer.
#[derive(Debug, Default, Clone, Copy)]
pub struct Noop;

#[async_trait]
impl Agent for Noop {
    async fn start(&mut self, _episode: &EpisodeStart<'_>) -> Result<(), AgentError> {
        Ok(())
    }

    async fn step(&mut self, _feedback: &[Observation]) -> Result<AgentTurn, AgentError> {
        Ok(AgentTurn {
            reasoning: "no-op".into(),
            calls: vec![ToolCall::finish(None)],
            ..AgentTurn::default()
        })
    }
}

/// Makes `steps` random calls whose arguments satisfy each tool's schema, then `finish` with
/// a random answer of the right shape. String arguments are drawn from the words it has seen
/// (the brief, then every observation), so names it uses exist in the network; enums from
/// their values (the machines and devices an environment names once reset); a command from
/// the property's JSON Schema `examples`, mostly, with its names and addresses swapped for
/// seen ones, so that it runs and may change the network. Seeded per task: the same seed and
/// task give the same calls.
#[derive(Debug)]
pub struct RandomAgent {
    rng: ChaCha8Rng,
    steps: usize,
    made: usize,
    tools: Vec<ToolSpec>,
    words: Vec<String>,
}

impl RandomAgent {
    pub fn new(seed: u64, task_id: &str, steps: usize) -> Self {
        // FNV-1a of the task id, so each task gets its own stream from one run seed.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in task_id.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Self { rng: ChaCha8Rng::seed_from_u64(seed ^ h), steps, made: 0, tools: vec![], words: vec![] }
    }

    fn learn(&mut self, text: &str) {
        for word in text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '/'))) {
            let word = word.trim_end_matches(['.', ':']);
            if word.len() >= 2
                && word.chars().any(|c| c.is_ascii_alphabetic())
                && !self.words.iter().any(|w| w == word)
            {
                self.words.push(word.to_string());
            }
        }
    }

    fn value(&mut self, schema: &Value, depth: usize) -> Value {
        if let Some(Value::Array(options)) = schema.get("enum")
            && let Some(v) = options.choose(&mut self.rng)
        {
            return v.clone();
        }
        let ty = match schema.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) => {
                ts.choose(&mut self.rng).and_then(Value::as_str).unwrap_or("string").to_string()
            }
            _ => "string".to_string(),
        };
        match ty.as_str() {
            "integer" | "number" => {
                let lo = schema.get("minimum").and_then(Value::as_i64).unwrap_or(0);
                let hi =
                    schema.get("maximum").and_then(Value::as_i64).unwrap_or(lo.saturating_add(100)).max(lo);
                json!(self.rng.random_range(lo..=hi))
            }
            "boolean" => json!(self.rng.random_bool(0.5)),
            "array" if depth < 3 => {
                let n = self.rng.random_range(0..=2);
                let items = schema.get("items").cloned().unwrap_or(json!({}));
                Value::Array((0..n).map(|_| self.value(&items, depth + 1)).collect())
            }
            "object" if depth < 3 => self.object(schema, depth + 1),
            "null" => Value::Null,
            _ => {
                if let Some(Value::Array(examples)) = schema.get("examples")
                    && let Some(example) = examples.choose(&mut self.rng).and_then(Value::as_str)
                    && self.rng.random_bool(0.8)
                {
                    return json!(self.vary(example));
                }
                let word = self.words.choose(&mut self.rng).cloned().unwrap_or_else(|| "x".to_string());
                json!(word)
            }
        }
    }

    /// An example command line with some of its arguments swapped for seen words of the same
    /// shape (an address for an address, an interface name for one), so that it names this
    /// network's things; the program and its first word stay, so it is a command the tool
    /// runs.
    fn vary(&mut self, example: &str) -> String {
        let shape = |w: &str| -> u8 {
            let digits = w.chars().any(|c| c.is_ascii_digit());
            match (w.contains('/') && digits, w.contains('.') && digits, w.contains('-') && digits) {
                (true, _, _) => 0,
                (_, true, _) => 1,
                (_, _, true) => 2,
                _ => 3,
            }
        };
        let words: Vec<&str> = example.split_whitespace().collect();
        let mut out = Vec::with_capacity(words.len());
        for (i, w) in words.iter().enumerate() {
            let same: Vec<&String> = self.words.iter().filter(|s| shape(s) == shape(w)).collect();
            // Quoted arguments (a JSON patch) and options stay as they are; names and addresses
            // are swapped often, other words (a policy's name) now and then.
            let odds = match shape(w) {
                _ if w.starts_with('-') || w.contains(['\'', '"', '[', '{']) => 0.0,
                3 => 0.3,
                _ => 0.7,
            };
            let swap = i >= 2 && !same.is_empty() && self.rng.random_bool(odds);
            match same.choose(&mut self.rng) {
                Some(seen) if swap => out.push(seen.to_string()),
                _ => out.push(w.to_string()),
            }
        }
        out.join(" ")
    }

    fn object(&mut self, schema: &Value, depth: usize) -> Value {
        let required: Vec<String> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).map(String::from).collect())
            .unwrap_or_default();
        let mut out = Map::new();
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                if required.contains(name) || self.rng.random_bool(0.3) {
                    let v = self.value(prop, depth);
                    out.insert(name.clone(), v);
                }
            }
        }
        Value::Object(out)
    }
}

#[async_trait]
impl Agent for RandomAgent {
    async fn start(&mut self, episode: &EpisodeStart<'_>) -> Result<(), AgentError> {
        self.tools = episode.tools.to_vec();
        self.learn(episode.brief);
        Ok(())
    }

    async fn step(&mut self, feedback: &[Observation]) -> Result<AgentTurn, AgentError> {
        for obs in feedback {
            self.learn(&obs.content);
        }
        let finishing = self.made >= self.steps || self.tools.len() <= 1;
        let tool = if finishing {
            self.tools.iter().find(|t| t.name == netdojo_core::FINISH_TOOL).cloned()
        } else {
            let others: Vec<ToolSpec> =
                self.tools.iter().filter(|t| t.name != netdojo_core::FINISH_TOOL).cloned().collect();
            others.choose(&mut self.rng).cloned()
        };
        let Some(tool) = tool else {
            return Ok(AgentTurn { calls: vec![ToolCall::finish(None)], ..AgentTurn::default() });
        };
        let arguments = self.object(&tool.parameters, 0);
        let mut call = ToolCall::new(tool.name, arguments);
        call.id = format!("random-{}", self.made);
        self.made += 1;
        Ok(AgentTurn { reasoning: "random".into(), calls: vec![call], ..AgentTurn::default() })
    }
}

/// `--agent oracle`
#[derive(Debug, Default, Clone, Copy)]
pub struct OracleFactory;

impl AgentFactory for OracleFactory {
    fn name(&self) -> &str {
        "oracle"
    }
    fn create(&self, _task: &Task) -> Result<Box<dyn Agent>, AgentError> {
        Ok(Box::new(Oracle::default()))
    }
}

/// `--agent noop`
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopFactory;

impl AgentFactory for NoopFactory {
    fn name(&self) -> &str {
        "noop"
    }
    fn create(&self, _task: &Task) -> Result<Box<dyn Agent>, AgentError> {
        Ok(Box::new(Noop))
    }
}

/// `--agent random`: `steps` random calls per episode, seeded.
#[derive(Debug, Clone, Copy)]
pub struct RandomFactory {
    pub seed: u64,
    pub steps: usize,
}

impl AgentFactory for RandomFactory {
    fn name(&self) -> &str {
        "random"
    }
    fn config(&self) -> Value {
        json!({ "seed": self.seed, "steps": self.steps })
    }
    fn create(&self, task: &Task) -> Result<Box<dyn Agent>, AgentError> {
        Ok(Box::new(RandomAgent::new(self.seed, &task.id, self.steps)))
    }
    /// Each epoch its own stream (epoch 0 the run seed's, as without epochs): K attempts of a
    /// random agent are K different attempts.
    fn create_for_epoch(&self, task: &Task, epoch: u32) -> Result<Box<dyn Agent>, AgentError> {
        Ok(Box::new(RandomAgent::new(epoch_seed(self.seed, epoch), &task.id, self.steps)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netdojo_core::schema::validate;

    fn task(kind: TaskKind) -> Task {
        Task {
            id: "t1".into(),
            application: "test".into(),
            level: 1,
            label: "x".into(),
            domain: None,
            seed: None,
            query: "q".into(),
            setup: Value::Null,
            kind,
        }
    }

    fn tools() -> Vec<ToolSpec> {
        vec![
            ToolSpec::new(
                "remove_node",
                "",
                json!({"type": "object", "properties": {"name": {"type": "string"}, "kind": {"type": "string", "enum": ["EK_PORT", "EK_RACK"]}, "limit": {"type": "integer", "minimum": 1, "maximum": 5}}, "required": ["name"], "additionalProperties": false}),
            ),
            ToolSpec::finish(Some(json!({"type": "array", "items": {"type": "string"}}))),
        ]
    }

    #[tokio::test]
    async fn oracle_plays_the_ground_truth_then_finishes_with_the_answer() {
        let t = task(TaskKind::Constructive {
            actions: vec![ToolCall::new("remove_node", json!({"name": "ju1.a1.m1.s2c1"}))],
            answer: Some(json!(["a"])),
            goal: None,
        });
        let mut oracle = Oracle::default();
        let tools = tools();
        oracle
            .start(&EpisodeStart { task: &t, brief: "b", tools: &tools, max_steps: 10 })
            .await
            .expect("start");
        let first = oracle.step(&[]).await.expect("step");
        assert_eq!(first.calls[0].name, "remove_node");
        let second = oracle.step(&[]).await.expect("step");
        assert_eq!(
            second.calls[0],
            ToolCall { id: "oracle-1".into(), ..ToolCall::finish(Some(json!(["a"]))) }
        );
        assert!(oracle.step(&[]).await.expect("step").calls.is_empty());
    }

    #[test]
    fn oracle_configures_each_device_of_a_config_task() {
        let t = task(TaskKind::Config(netdojo_core::ConfigTask {
            task_name: "Static".into(),
            intents: vec![],
            topology: netdojo_core::ConfigTopology { nodes: vec!["R1".into()], links: vec![] },
            startup_configs: Default::default(),
            ground_truth_configs: [("R1".to_string(), vec!["ip route 2.2.2.0/30 192.168.1.2".to_string()])]
                .into(),
            ground_truth_linux: [("R1".to_string(), vec!["nft add table inet filter".to_string()])].into(),
            ground_truth_reasoning: String::new(),
            testcases: vec![],
        }));
        let plan = oracle_plan(&t);
        assert_eq!(plan[0].name, "update-cfg");
        assert_eq!(plan[0].arguments["commands"][0], "ip route 2.2.2.0/30 192.168.1.2");
        assert_eq!(
            plan[1].arguments["dialect"], "linux",
            "the Linux-side ground truth follows, in its dialect"
        );
        assert_eq!(plan[2].name, "finish");
    }

    #[tokio::test]
    async fn random_calls_satisfy_the_schemas_use_seen_words_and_are_reproducible() {
        let t = task(TaskKind::Constructive { actions: vec![], answer: None, goal: None });
        let tools = tools();
        let (t, tools) = (&t, &tools);
        let run = |seed| async move {
            let mut agent = RandomAgent::new(seed, "t1", 20);
            agent
                .start(&EpisodeStart { task: t, brief: "Remove ju1.a1.m1.s2c1 now.", tools, max_steps: 10 })
                .await
                .expect("start");
            let mut calls = vec![];
            for _ in 0..21 {
                calls.extend(agent.step(&[]).await.expect("step").calls);
            }
            calls
        };
        let calls = run(7).await;
        assert_eq!(calls, run(7).await, "same seed, same calls");
        assert_ne!(calls, run(8).await, "another seed, other calls");
        assert_eq!(calls.len(), 21);
        for call in &calls {
            let spec = tools.iter().find(|s| s.name == call.name).expect("known tool");
            validate(&spec.parameters, &call.arguments).expect("valid arguments");
        }
        assert!(calls[..20].iter().all(|c| c.name == "remove_node"));
        assert!(calls.iter().any(|c| c.arguments["name"] == "ju1.a1.m1.s2c1"), "names come from the brief");
        assert_eq!(calls[20].name, "finish");
    }

    /// A machine given as an enum (an environment's nodes once reset) and a command with
    /// `examples`: every call names a real machine, and most run an example's program with the
    /// network's own interface names and addresses swapped in.
    #[tokio::test]
    async fn random_commands_come_from_the_examples_with_seen_names() {
        let t = task(TaskKind::Constructive { actions: vec![], answer: None, goal: None });
        let exec = ToolSpec::new(
            "exec",
            "run",
            json!({"type": "object", "properties": {
                "machine": {"type": "string"},
                "command": {"type": "string", "examples": ["ip link set dev r0-eth1 up", "ip addr add 10.0.1.1/24 dev r0-eth1"]}
            }, "required": ["machine", "command"], "additionalProperties": false}),
        )
        .with_choices("machine", &["r0", "h1"]);
        let tools = vec![exec, ToolSpec::finish(None)];
        let mut agent = RandomAgent::new(3, "t1", 40);
        agent
            .start(&EpisodeStart {
                task: &t,
                brief: "r0 has r0-eth2 and r0-eth3 with 10.0.9.1/24; hosts h1 h2.",
                tools: &tools,
                max_steps: 50,
            })
            .await
            .expect("start");
        let mut calls = vec![];
        for _ in 0..40 {
            calls.extend(agent.step(&[]).await.expect("step").calls);
        }
        assert!(calls.iter().all(|c| c.arguments["machine"] == "r0" || c.arguments["machine"] == "h1"));
        let commands: Vec<&str> = calls.iter().filter_map(|c| c.arguments["command"].as_str()).collect();
        let real =
            commands.iter().filter(|c| c.starts_with("ip link set") || c.starts_with("ip addr add")).count();
        assert!(real * 2 > commands.len(), "most commands are examples: {commands:?}");
        assert!(
            commands
                .iter()
                .any(|c| c.contains("r0-eth2") || c.contains("r0-eth3") || c.contains("10.0.9.1/24")),
            "seen names swapped in: {commands:?}"
        );
    }
}
