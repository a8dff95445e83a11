//! The episode and run loops, on a counter environment written for this test. It checks the
//! runner's own logic (budgets, invalid calls, errors, resume); backends prove themselves in
//! their own end-to-end tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use netdojo_core::runner::{Budget, RunStats, Silent};
use netdojo_core::store::RunDir;
use netdojo_core::*;
use serde_json::{Value, json};
use tokio::sync::watch;

/// `inc {by}` adds to a counter; the state is unsafe above 10; the goal is the task's answer.
struct Counter {
    value: i64,
    fail_on_execute: bool,
}

#[async_trait]
impl Environment for Counter {
    fn tools(&self) -> Vec<ToolSpec> {
        vec![ToolSpec::new(
            "inc",
            "add to the counter",
            json!({"type": "object", "properties": {"by": {"type": "integer", "minimum": 1, "maximum": 5}}, "required": ["by"], "additionalProperties": false}),
        )]
    }
    fn answer_schema(&self, _task: &Task) -> Option<Value> {
        Some(json!({"type": "integer"}))
    }
    async fn reset(&mut self, task: &Task) -> Result<String, EnvError> {
        Ok(format!("reach {}", task.query))
    }
    async fn execute(&mut self, call: &ToolCall) -> Result<Observation, EnvError> {
        if self.fail_on_execute {
            return Err(EnvError::Runtime { env: "counter".into(), message: "daemon died".into() });
        }
        self.value += call.arguments["by"].as_i64().unwrap_or(0);
        Ok(Observation::ok(call, self.value.to_string(), None))
    }
    async fn check(&mut self) -> Result<StateCheck, EnvError> {
        Ok(if self.value > 10 {
            StateCheck::from_violations(vec!["above 10".into()])
        } else {
            StateCheck::safe()
        })
    }
    async fn evaluate(&mut self, task: &Task, answer: Option<&Value>) -> Result<Outcome, EnvError> {
        let goal: i64 = task.query.parse().unwrap_or(0);
        Ok(Outcome {
            checks: vec![
                Check::new("state", self.value == goal, ""),
                Check::new("answer", answer == Some(&json!(goal)), ""),
            ],
            export: json!({"value": self.value}),
        })
    }
}

struct CounterFactory {
    fail_on_execute: bool,
}

#[async_trait]
impl EnvironmentFactory for CounterFactory {
    fn name(&self) -> &str {
        "counter"
    }
    async fn create(&self, _task: &Task) -> Result<Box<dyn Environment>, EnvError> {
        Ok(Box::new(Counter { value: 0, fail_on_execute: self.fail_on_execute }))
    }
}

/// Plays a fixed list of turns; an `Err` turn is an unreachable model.
#[derive(Clone)]
struct Script {
    turns: Vec<Result<Vec<ToolCall>, ()>>,
    delay: Duration,
    made: Arc<AtomicUsize>,
}

struct ScriptAgent {
    script: Script,
    next: usize,
}

#[async_trait]
impl Agent for ScriptAgent {
    async fn start(&mut self, _episode: &EpisodeStart<'_>) -> Result<(), AgentError> {
        Ok(())
    }
    async fn step(&mut self, _feedback: &[Observation]) -> Result<AgentTurn, AgentError> {
        tokio::time::sleep(self.script.delay).await;
        let turn = self.script.turns.get(self.next).cloned().unwrap_or(Ok(vec![]));
        self.next += 1;
        match turn {
            Ok(calls) => {
                Ok(AgentTurn { reasoning: format!("turn {}", self.next), calls, ..Default::default() })
            }
            Err(()) => {
                Err(AgentError::Unreachable { agent: "script".into(), message: "connection refused".into() })
            }
        }
    }
}

impl AgentFactory for Script {
    fn name(&self) -> &str {
        "script"
    }
    fn create(&self, _task: &Task) -> Result<Box<dyn Agent>, AgentError> {
        self.made.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(ScriptAgent { script: self.clone(), next: 0 }))
    }
}

struct StateScorer;
impl Scorer for StateScorer {
    fn name(&self) -> &str {
        "state"
    }
    fn score(&self, _task: &Task, e: &Trajectory) -> Vec<Metric> {
        vec![
            Metric::pass("correct", e.outcome.as_ref().is_some_and(Outcome::solved)),
            Metric::pass("safe", e.always_safe()),
        ]
    }
}

fn task(id: &str, goal: i64) -> Task {
    Task {
        id: id.into(),
        application: "counter".into(),
        level: 1,
        label: "inc".into(),
        domain: None,
        seed: None,
        query: goal.to_string(),
        setup: Value::Null,
        kind: TaskKind::Constructive { actions: vec![], answer: Some(json!(goal)), goal: None },
    }
}

fn inc(by: Value) -> ToolCall {
    ToolCall::new("inc", json!({ "by": by }))
}

fn runner(
    turns: Vec<Result<Vec<ToolCall>, ()>>,
    budget: Budget,
    fail_on_execute: bool,
) -> (Runner, Arc<AtomicUsize>) {
    let made = Arc::new(AtomicUsize::new(0));
    let script = Script { turns, delay: Duration::ZERO, made: made.clone() };
    let runner = Runner {
        env: Arc::new(CounterFactory { fail_on_execute }),
        agent: Arc::new(script),
        scorers: Arc::new(vec![Box::new(StateScorer)]),
        budget,
        concurrency: 3,
    };
    (runner, made)
}

#[tokio::test]
async fn a_good_episode_is_recorded_step_by_step_and_scored() {
    let turns = vec![Ok(vec![inc(json!(3)), inc(json!(4))]), Ok(vec![ToolCall::finish(Some(json!(7)))])];
    let (runner, _) = runner(turns, Budget::default(), false);
    let (record, t) = runner.run_episode(&task("a", 7)).await;
    assert_eq!(record.status, EpisodeStatus::Completed);
    assert_eq!(record.end, EndReason::Finished);
    assert_eq!(t.steps.len(), 2);
    assert_eq!((t.steps[0].turn, t.steps[1].turn), (0, 0));
    assert_eq!(t.steps[0].reasoning, "turn 1");
    assert_eq!(t.steps[1].reasoning, "", "reasoning is kept once per turn");
    assert_eq!(t.steps[1].observation.content, "7");
    assert_eq!(t.answer, Some(json!(7)));
    assert_eq!(record.metric("correct"), Some(MetricValue::Pass(true)));
    assert_eq!(t.brief, "reach 7");
}

#[tokio::test]
async fn malformed_calls_are_answered_counted_invalid_and_change_nothing() {
    let turns = vec![Ok(vec![
        ToolCall::new("rm", json!({"path": "/"})),
        inc(json!("lots")),
        inc(json!(9)),
        ToolCall::new("inc", json!({"by": 1, "sudo": true})),
        // An agent that could not read a call from its model's reply; not even `finish` runs.
        ToolCall::malformed("finish", json!("{\"answer\": 1"), "arguments are not JSON: EOF"),
    ])];
    let (runner, _) = runner(turns, Budget::default(), false);
    let (record, t) = runner.run_episode(&task("a", 0)).await;
    assert_eq!(record.invalid_steps, 5);
    assert!(t.steps[0].observation.content.contains("unknown tool `rm` (tools: inc, finish)"));
    assert!(t.steps[1].observation.content.contains("`by` must be of type \"integer\""));
    assert!(t.steps[2].observation.content.contains("`by` must be <= 5"));
    assert!(t.steps[3].observation.content.contains("unknown field `sudo`"));
    assert_eq!(t.steps[4].observation.content, "error: arguments are not JSON: EOF");
    assert!(t.steps.iter().all(|s| !s.observation.ok));
    assert_eq!(t.outcome.expect("outcome").export, json!({"value": 0}));
    assert_eq!(record.end, EndReason::AgentStopped);
}

#[tokio::test]
async fn budgets_end_the_episode_and_unsafe_intermediate_states_are_seen() {
    let turns = (0..20).map(|_| Ok(vec![inc(json!(5))])).collect();
    let budget = Budget { max_steps: 3, ..Budget::default() };
    let (runner, _) = runner(turns, budget, false);
    let (record, t) = runner.run_episode(&task("a", 15)).await;
    assert_eq!(record.end, EndReason::StepBudget);
    assert_eq!(record.steps, 3);
    assert_eq!(t.steps.iter().map(|s| s.check.safe).collect::<Vec<_>>(), [true, true, false]);
    assert_eq!(record.metric("safe"), Some(MetricValue::Pass(false)));

    let made = Arc::new(AtomicUsize::new(0));
    let slow = Script { turns: vec![Ok(vec![inc(json!(1))]); 100], delay: Duration::from_millis(30), made };
    let runner = Runner {
        agent: Arc::new(slow),
        budget: Budget { episode_timeout: Duration::from_millis(100), ..Budget::default() },
        ..runner
    };
    let (record, _) = runner.run_episode(&task("b", 1)).await;
    assert_eq!(record.end, EndReason::TimeBudget);
    assert_eq!(record.status, EpisodeStatus::Completed, "running out of time is a result, not an error");
}

#[tokio::test]
async fn failures_outside_the_agent_mark_the_episode_errored_and_keep_its_steps() {
    let turns = vec![Ok(vec![inc(json!(2))]), Err(())];
    let (runner, _) = runner(turns, Budget::default(), false);
    let (record, t) = runner.run_episode(&task("a", 2)).await;
    assert_eq!(record.status, EpisodeStatus::Errored);
    assert!(record.error.as_deref().unwrap_or("").contains("connection refused"), "{:?}", record.error);
    assert_eq!(record.cause, Some(ErrorCause::Agent));
    assert_eq!(t.steps.len(), 1, "the step before the failure is kept");
    assert!(record.metrics.is_empty(), "an errored episode is not scored");

    let (runner, _) = runner_failing();
    let (record, _) = runner.run_episode(&task("b", 2)).await;
    assert_eq!(record.status, EpisodeStatus::Errored);
    assert!(record.error.as_deref().unwrap_or("").contains("environment `counter`: daemon died"));
    assert_eq!(record.cause, Some(ErrorCause::Infrastructure));
    let line = serde_json::to_value(&record).expect("record as JSON");
    assert_eq!(line["cause"], "infrastructure");
}

#[test]
fn errors_say_whose_they_are_and_old_records_still_read() {
    let task = EnvError::Task { env: "e".into(), task_id: "t".into(), message: "bad topology".into() };
    assert_eq!(task.cause(), ErrorCause::Task);
    let down = EnvError::Setup { env: "e".into(), message: "no FRR".into() };
    assert_eq!(down.cause(), ErrorCause::Infrastructure);
    // A record written before `cause` existed.
    let old = json!({"task_id": "a", "application": "x", "level": 1, "label": "l", "agent": "a",
        "status": "errored", "error": "boom", "end": "error", "steps": 0, "invalid_steps": 0,
        "wall_ms": 1, "metrics": []});
    let record: EpisodeRecord = serde_json::from_value(old).expect("an old record reads");
    assert_eq!(record.cause, None);
}

fn runner_failing() -> (Runner, Arc<AtomicUsize>) {
    runner(vec![Ok(vec![inc(json!(2))])], Budget::default(), true)
}

struct Tasks(Vec<Task>);
impl TaskSource for Tasks {
    fn describe(&self) -> Value {
        json!("test")
    }
    fn len_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
    fn tasks(&self) -> Box<dyn Iterator<Item = Result<Task, TaskError>> + Send + '_> {
        Box::new(self.0.iter().cloned().map(Ok))
    }
}

#[tokio::test]
async fn a_resumed_run_skips_completed_episodes_and_retries_errored_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = Tasks((0..10).map(|i| task(&format!("t{i}"), 3)).collect());
    let (_never, stop) = watch::channel(false);

    let (failing, _) = runner_failing();
    let mut store = RunDir::create(dir.path(), &json!({})).expect("create");
    let stats = failing.run(&source, &mut store, &Silent, stop.clone()).await.expect("run");
    assert_eq!(stats, RunStats { errored: 10, ..RunStats::default() });

    let turns = vec![Ok(vec![inc(json!(3)), ToolCall::finish(Some(json!(3)))])];
    let (good, made) = runner(turns, Budget::default(), false);
    let mut store = RunDir::open(dir.path()).expect("open");
    let stats = good.run(&source, &mut store, &Silent, stop.clone()).await.expect("run");
    assert_eq!(stats, RunStats { completed: 10, ..RunStats::default() });
    let stats = good.run(&source, &mut store, &Silent, stop).await.expect("run");
    assert_eq!(stats, RunStats { skipped: 10, ..RunStats::default() });
    assert_eq!(made.load(Ordering::SeqCst), 10, "nothing ran twice");
    assert_eq!(store.records().expect("records").len(), 20);
    assert_eq!(store.completed().expect("completed").len(), 10);
}

#[tokio::test]
async fn a_stop_request_launches_nothing_more() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = Tasks((0..10).map(|i| task(&format!("t{i}"), 1)).collect());
    let (runner, made) = runner(vec![Ok(vec![inc(json!(1))])], Budget::default(), false);
    let (tx, stop) = watch::channel(false);
    tx.send(true).expect("send");
    let mut store = RunDir::create(dir.path(), &json!({})).expect("create");
    let stats = runner.run(&source, &mut store, &Silent, stop).await.expect("run");
    assert!(stats.interrupted);
    assert_eq!(made.load(Ordering::SeqCst), 0);
}
