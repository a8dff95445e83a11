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
            return Err(EnvError::runtime("counter", "daemon died")
                .with_source(std::io::Error::other("vtysh: connection refused")));
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

/// How a scripted turn fails.
#[derive(Debug, Clone, Copy)]
enum Fail {
    /// The model's API is down (after retries).
    Api,
    /// The agent answers something that is not a turn.
    Garbled,
    /// The agent is misconfigured.
    Config,
}

/// Plays a fixed list of turns, each reporting `usage`; an `Err` turn fails as it says.
#[derive(Clone)]
struct Script {
    turns: Vec<Result<Vec<ToolCall>, Fail>>,
    delay: Duration,
    usage: Option<TokenUsage>,
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
        let agent = "script".to_string();
        match turn {
            Ok(calls) => Ok(AgentTurn {
                reasoning: format!("turn {}", self.next),
                calls,
                usage: self.script.usage,
                ..Default::default()
            }),
            Err(Fail::Api) => Err(AgentError::Unreachable { agent, message: "connection refused".into() }),
            Err(Fail::Garbled) => Err(AgentError::Protocol { agent, message: "the turn is not JSON".into() }),
            Err(Fail::Config) => Err(AgentError::Config { agent, message: "no examples".into() }),
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
    turns: Vec<Result<Vec<ToolCall>, Fail>>,
    budget: Budget,
    fail_on_execute: bool,
) -> (Runner, Arc<AtomicUsize>) {
    let made = Arc::new(AtomicUsize::new(0));
    let script = Script { turns, delay: Duration::ZERO, usage: None, made: made.clone() };
    let runner = Runner {
        env: Arc::new(CounterFactory { fail_on_execute }),
        agent: Arc::new(script),
        scorers: Arc::new(vec![Box::new(StateScorer)]),
        budget,
        concurrency: 3,
        prepare_ahead: 0,
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
    assert_eq!(record.class, Some(EpisodeClass::Solved));

    let wrong = vec![Ok(vec![inc(json!(3)), ToolCall::finish(Some(json!(3)))])];
    let (wrong, _) = crate::runner(wrong, Budget::default(), false);
    let (record, _) = wrong.run_episode(&task("a", 7)).await;
    assert_eq!(record.class, Some(EpisodeClass::Failed));
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
    assert_eq!(record.class, Some(EpisodeClass::UnusableOutput), "nothing it sent could be used");
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
    assert_eq!(record.class, Some(EpisodeClass::StepBudget));

    let made = Arc::new(AtomicUsize::new(0));
    let slow = Script {
        turns: vec![Ok(vec![inc(json!(1))]); 100],
        delay: Duration::from_millis(30),
        usage: None,
        made,
    };
    let runner = Runner {
        agent: Arc::new(slow),
        budget: Budget { episode_timeout: Duration::from_millis(100), ..Budget::default() },
        ..runner
    };
    let (record, _) = runner.run_episode(&task("b", 1)).await;
    assert_eq!(record.end, EndReason::TimeBudget);
    assert_eq!(record.status, EpisodeStatus::Completed, "running out of time is a result, not an error");
    assert_eq!(record.class, Some(EpisodeClass::TimeBudget));
    assert!(record.class().in_rates());
}

#[tokio::test]
async fn failures_outside_the_agent_mark_the_episode_errored_and_keep_its_steps() {
    let turns = vec![Ok(vec![inc(json!(2))]), Err(Fail::Api)];
    let (runner, _) = runner(turns, Budget::default(), false);
    let (record, t) = runner.run_episode(&task("a", 2)).await;
    assert_eq!(record.status, EpisodeStatus::Errored);
    assert!(record.error.as_deref().unwrap_or("").contains("connection refused"), "{:?}", record.error);
    assert_eq!(record.cause, Some(ErrorCause::ModelApi));
    assert_eq!(record.class, Some(EpisodeClass::ModelApiFailure));
    assert!(!EpisodeClass::ModelApiFailure.in_rates());
    assert_eq!(t.steps.len(), 1, "the step before the failure is kept");
    assert!(record.metrics.is_empty(), "an errored episode is not scored");

    let (runner, _) = runner_failing();
    let (record, _) = runner.run_episode(&task("b", 2)).await;
    assert_eq!(record.status, EpisodeStatus::Errored);
    assert!(
        record
            .error
            .as_deref()
            .unwrap_or("")
            .contains("environment `counter`: daemon died: vtysh: connection refused"),
        "the record keeps the cause under the environment's error: {:?}",
        record.error
    );
    assert_eq!(record.cause, Some(ErrorCause::Infrastructure));
    assert_eq!(record.class, Some(EpisodeClass::EnvironmentFailure));
    let line = serde_json::to_value(&record).expect("record as JSON");
    assert_eq!(line["cause"], "infrastructure");
    assert_eq!(line["class"], "environment_failure");

    let (misconfigured, _) = crate::runner(vec![Err(Fail::Config)], Budget::default(), false);
    let (record, _) = misconfigured.run_episode(&task("c", 2)).await;
    assert_eq!((record.cause, record.class), (Some(ErrorCause::Agent), Some(EpisodeClass::InvalidSetup)));
}

#[tokio::test]
async fn an_unusable_answer_ends_the_episode_as_the_agent_s_failure_and_is_scored() {
    let turns = vec![Ok(vec![inc(json!(2))]), Err(Fail::Garbled)];
    let (runner, _) = runner(turns, Budget::default(), false);
    let (record, t) = runner.run_episode(&task("a", 2)).await;
    assert_eq!(record.status, EpisodeStatus::Completed, "the agent's fault: in the rates");
    assert_eq!(record.end, EndReason::UnusableOutput);
    assert_eq!(record.class, Some(EpisodeClass::UnusableOutput));
    assert_eq!(t.end_detail.as_deref(), Some("the turn is not JSON"));
    assert_eq!(record.metric("correct"), Some(MetricValue::Pass(false)), "scored like any episode");
    assert_eq!(t.steps.len(), 1);
}

fn usage(prompt: u64, completion: u64) -> TokenUsage {
    TokenUsage { prompt_tokens: prompt, completion_tokens: completion, cached_tokens: prompt / 2 }
}

fn metered(turns: Vec<Result<Vec<ToolCall>, Fail>>, budget: Budget) -> Runner {
    let (runner, made) = runner(vec![], budget, false);
    let script = Script { turns, delay: Duration::from_millis(5), usage: Some(usage(100, 10)), made };
    Runner { agent: Arc::new(script), ..runner }
}

#[tokio::test]
async fn every_turn_s_tokens_are_counted_and_time_is_split_by_part() {
    // The second turn's only call is `finish`: no step carries its tokens.
    let turns = vec![Ok(vec![inc(json!(3))]), Ok(vec![ToolCall::finish(Some(json!(3)))])];
    let (record, t) = metered(turns, Budget::default()).run_episode(&task("a", 3)).await;
    assert_eq!(t.steps.len(), 1);
    assert_eq!(t.steps[0].usage, Some(usage(100, 10)));
    assert_eq!(t.tokens(), TokenUsage { prompt_tokens: 200, completion_tokens: 20, cached_tokens: 100 });
    assert_eq!(record.tokens, t.tokens());
    assert_eq!(record.metric("cost_usd"), None, "no price, no cost");
    // Two turns of at least 5 ms each are the agent's; every part is within the wall time.
    assert!(record.timing.agent_us >= 10_000, "{:?}", record.timing);
    // wall_ms is cut to whole milliseconds, the parts to microseconds.
    assert!(
        record.timing.sum_us() < (record.wall_ms + 1) * 1000,
        "{:?} > {} ms",
        record.timing,
        record.wall_ms
    );
    assert_eq!(record.timing, t.timing);
    // A trajectory written before `usage` existed: the steps' tokens.
    let mut old = serde_json::to_value(&t).expect("json");
    old.as_object_mut().expect("object").remove("usage");
    let old: Trajectory = serde_json::from_value(old).expect("an old trajectory reads");
    assert_eq!(old.tokens(), usage(100, 10));
}

#[tokio::test]
async fn token_and_cost_limits_end_the_episode_with_their_own_outcome() {
    let turns: Vec<_> = (0..10).map(|_| Ok(vec![inc(json!(1))])).collect();
    // 110 tokens a turn: the third turn passes 250 and is not played.
    let budget = Budget { max_tokens: Some(250), ..Budget::default() };
    let (record, t) = metered(turns.clone(), budget).run_episode(&task("a", 9)).await;
    assert_eq!((record.end, record.class), (EndReason::TokenBudget, Some(EpisodeClass::TokenBudget)));
    assert_eq!(t.steps.len(), 2, "the turn past the limit ran no call");
    assert_eq!(record.tokens.total(), 330);
    assert_eq!(record.status, EpisodeStatus::Completed);

    // $10 (input; $5 cached) and $30 (output) per million: a turn costs (50·10 + 50·5 + 10·30)/1e6.
    let price = Price { input: 10.0, cached_input: Some(5.0), output: 30.0 };
    let budget = Budget { max_cost_usd: Some(0.003), price: Some(price), ..Budget::default() };
    let (record, t) = metered(turns.clone(), budget).run_episode(&task("a", 9)).await;
    assert_eq!((record.end, record.class), (EndReason::CostBudget, Some(EpisodeClass::CostBudget)));
    assert_eq!(t.steps.len(), 2);
    let cost = record.metric("cost_usd").map(MetricValue::as_f64).expect("a priced run records its cost");
    assert!((cost - 3.0 * 1050.0 / 1e6).abs() < 1e-12, "{cost}");

    // Priced with no limit: the episode runs to its end and its cost is recorded.
    let budget = Budget { price: Some(price), ..Budget::default() };
    let turns = vec![Ok(vec![inc(json!(1))]), Ok(vec![ToolCall::finish(Some(json!(1)))])];
    let (record, _) = metered(turns, budget).run_episode(&task("a", 1)).await;
    assert_eq!(record.class, Some(EpisodeClass::Solved));
    let cost = record.metric("cost_usd").map(MetricValue::as_f64).expect("cost");
    assert!((cost - 2.0 * 1050.0 / 1e6).abs() < 1e-12, "{cost}");
}

#[tokio::test]
async fn a_model_api_failure_is_left_for_resume_to_retry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = Tasks((0..2).map(|i| task(&format!("t{i}"), 1)).collect());
    let (_never, stop) = watch::channel(false);
    let (down, _) = runner(vec![Err(Fail::Api)], Budget::default(), false);
    let mut store = RunDir::create(dir.path(), &json!({})).expect("create");
    let stats = down.run(&source, &mut store, &Silent, stop.clone()).await.expect("run");
    assert_eq!(stats, RunStats { errored: 2, ..RunStats::default() });
    assert!(store.completed().expect("completed").is_empty());

    let (up, made) =
        runner(vec![Ok(vec![inc(json!(1)), ToolCall::finish(Some(json!(1)))])], Budget::default(), false);
    let stats = up.run(&source, &mut store, &Silent, stop).await.expect("run");
    assert_eq!(stats, RunStats { completed: 2, ..RunStats::default() });
    assert_eq!(made.load(Ordering::SeqCst), 2, "both retried");
    let latest = store.latest().expect("latest");
    assert!(latest.values().all(|r| r.class() == EpisodeClass::Solved));
}

#[test]
fn errors_say_whose_they_are_and_old_records_still_read() {
    let task = EnvError::task("e", "t", "bad topology");
    assert_eq!(task.cause(), ErrorCause::Task);
    let down = EnvError::setup("e", "no FRR");
    assert_eq!(down.cause(), ErrorCause::Infrastructure);
    // A record written before `cause` existed.
    let old = json!({"task_id": "a", "application": "x", "level": 1, "label": "l", "agent": "a",
        "status": "errored", "error": "boom", "end": "error", "steps": 0, "invalid_steps": 0,
        "wall_ms": 1, "metrics": []});
    let record: EpisodeRecord = serde_json::from_value(old).expect("an old record reads");
    assert_eq!(record.cause, None);
    assert_eq!(record.class, None);
    assert_eq!(record.class(), EpisodeClass::EnvironmentFailure, "derived from the record");
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

/// [`CounterFactory`] that logs the runner's `prepare` hints and its `create` calls, in order.
struct Preparing {
    inner: CounterFactory,
    log: Arc<std::sync::Mutex<Vec<String>>>,
}

#[async_trait]
impl EnvironmentFactory for Preparing {
    fn name(&self) -> &str {
        "counter"
    }
    fn prepare(&self, task: &Task) {
        self.log.lock().expect("log").push(format!("prepare {}", task.id));
    }
    async fn create(&self, task: &Task) -> Result<Box<dyn Environment>, EnvError> {
        self.log.lock().expect("log").push(format!("create {}", task.id));
        self.inner.create(task).await
    }
}

#[tokio::test]
async fn episodes_are_prepared_ahead_in_order_and_completed_ones_never() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_never, stop) = watch::channel(false);
    let turns = vec![Ok(vec![inc(json!(3)), ToolCall::finish(Some(json!(3)))])];
    let (good, _) = runner(turns, Budget::default(), false);
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let with = |ahead: usize, concurrency: usize| Runner {
        env: Arc::new(Preparing { inner: CounterFactory { fail_on_execute: false }, log: log.clone() }),
        prepare_ahead: ahead,
        concurrency,
        ..good.clone()
    };
    let mut store = RunDir::create(dir.path(), &json!({})).expect("create");
    let first = Tasks((0..3).map(|i| task(&format!("t{i}"), 3)).collect());
    let stats = with(0, 2).run(&first, &mut store, &Silent, stop.clone()).await.expect("run");
    assert_eq!(stats.completed, 3);
    let logged = std::mem::take(&mut *log.lock().expect("log"));
    assert!(logged.iter().all(|l| l.starts_with("create")), "no hint without prepare_ahead: {logged:?}");

    let all = Tasks((0..8).map(|i| task(&format!("t{i}"), 3)).collect());
    let stats = with(2, 2).run(&all, &mut store, &Silent, stop).await.expect("run");
    assert_eq!(stats, RunStats { completed: 5, skipped: 3, ..RunStats::default() });
    let logged = log.lock().expect("log").clone();
    let prepared: Vec<&String> = logged.iter().filter(|l| l.starts_with("prepare")).collect();
    assert_eq!(prepared, ["prepare t3", "prepare t4", "prepare t5", "prepare t6", "prepare t7"]);
    // The first episode starts with itself and the next two asked for.
    assert_eq!(logged[..3], ["prepare t3", "prepare t4", "prepare t5"]);
    for id in 3..8 {
        let at = |what: &str| logged.iter().position(|l| *l == format!("{what} t{id}"));
        assert!(at("prepare") < at("create"), "t{id} prepared before it is created: {logged:?}");
    }
}

/// [`CounterFactory`] whose prepared environments are ready only for the tasks of `ready`;
/// logs its `create` calls.
struct ReadyFor {
    inner: CounterFactory,
    ready: Vec<String>,
    log: Arc<std::sync::Mutex<Vec<String>>>,
}

#[async_trait]
impl EnvironmentFactory for ReadyFor {
    fn name(&self) -> &str {
        "counter"
    }
    fn prepared(&self, task: &Task) -> Option<bool> {
        Some(self.ready.contains(&task.id))
    }
    async fn create(&self, task: &Task) -> Result<Box<dyn Environment>, EnvError> {
        self.log.lock().expect("log").push(task.id.clone());
        self.inner.create(task).await
    }
}

#[tokio::test]
async fn a_prepared_episode_starts_before_one_still_being_prepared() {
    let (_never, stop) = watch::channel(false);
    let turns = vec![Ok(vec![inc(json!(3)), ToolCall::finish(Some(json!(3)))])];
    let (good, _) = runner(turns, Budget::default(), false);
    let all = Tasks((0..4).map(|i| task(&format!("t{i}"), 3)).collect());
    let started = |ahead: usize| {
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let runner = Runner {
            env: Arc::new(ReadyFor {
                inner: CounterFactory { fail_on_execute: false },
                ready: vec!["t2".into()],
                log: log.clone(),
            }),
            prepare_ahead: ahead,
            concurrency: 1,
            ..good.clone()
        };
        let stop = stop.clone();
        let all = &all;
        async move {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut store = RunDir::create(dir.path(), &json!({})).expect("create");
            let stats = runner.run(all, &mut store, &Silent, stop).await.expect("run");
            assert_eq!(stats.completed, 4, "every episode runs, whatever its order");
            let order = log.lock().expect("log").clone();
            assert_eq!(store.completed().expect("completed").len(), 4);
            order
        }
    };
    // t2, ready, goes first; the others, still being prepared, in the suite's order.
    assert_eq!(started(2).await, ["t2", "t0", "t1", "t3"]);
    // Without preparation one episode is upcoming at a time: the suite's order.
    assert_eq!(started(0).await, ["t0", "t1", "t2", "t3"]);
}
