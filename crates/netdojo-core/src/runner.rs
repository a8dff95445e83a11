//! The episode loop and the run loop.
//!
//! An episode: build the environment → reset → initial state check → agent turns under a step
//! budget, a time limit and optional token and cost limits, each call validated against its
//! tool's schema, executed, and followed by a state check → evaluate (export + goal checks) →
//! close → scorers. The wall time of each part is recorded ([`Timing`]). A run: episodes in
//! parallel (`concurrency`; with `prepare_ahead`, the next ones are named to the environment
//! factory to prepare while these run, and the first prepared starts first), each committed to
//! the [`RunDir`] as it finishes, skipping episodes that a previous attempt of the same run
//! completed. With epochs, each task runs several times: an episode is a (task, epoch), all
//! tasks' epoch 0 first, then epoch 1...

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout_at};

use crate::agent::{AgentFactory, AgentTurn, EpisodeStart};
use crate::env::{Environment, EnvironmentFactory, StateCheck};
use crate::error::{AgentError, EnvError, StoreError, TaskError};
use crate::metric::Metric;
use crate::price::Price;
use crate::schema;
use crate::scorer::Scorer;
use crate::store::RunDir;
use crate::task::{Task, TaskSource};
use crate::tool::{FINISH_TOOL, Observation, ToolSpec};
use crate::trajectory::{EndReason, EpisodeRecord, EpisodeStatus, ErrorCause, Step, Timing, Trajectory};

/// The metric of an episode's cost in US dollars, recorded when the agent's model is priced.
pub const COST_METRIC: &str = "cost_usd";

/// Limits of one episode, and the price of its tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Tool calls the agent may make (`finish` not counted).
    pub max_steps: usize,
    /// Wall-clock time for the agent's part of the episode: from the end of setup (the
    /// environment built and reset) to the end of its last turn, model calls, tool calls and
    /// state checks included.
    pub episode_timeout: Duration,
    /// Time allowed for the final evaluation (testcases can be slow on real devices).
    pub evaluate_timeout: Duration,
    /// Tokens (prompt + completion, summed over the turns) after which the episode ends.
    pub max_tokens: Option<u64>,
    /// Cost in US dollars (the turns' tokens at `price`) after which the episode ends.
    pub max_cost_usd: Option<f64>,
    /// The price of the agent's model: each record gets its cost ([`COST_METRIC`]).
    pub price: Option<Price>,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_steps: 10,
            episode_timeout: Duration::from_secs(300),
            evaluate_timeout: Duration::from_secs(120),
            max_tokens: None,
            max_cost_usd: None,
            price: None,
        }
    }
}

impl Budget {
    /// The limit the tokens spent so far passed, if any. Checked after each turn: the turn
    /// that passes a limit is not played (its calls are not run), as a turn past the time
    /// limit is not.
    fn spent(&self, usage: &crate::TokenUsage) -> Option<EndReason> {
        if self.max_tokens.is_some_and(|max| usage.total() > max) {
            return Some(EndReason::TokenBudget);
        }
        let cost = self.price.map(|p| p.cost_usd(usage));
        match (self.max_cost_usd, cost) {
            (Some(max), Some(cost)) if cost > max => Some(EndReason::CostBudget),
            _ => None,
        }
    }
}

/// Receives progress of a run (the CLI draws a bar with it).
pub trait Progress: Send + Sync {
    fn started(&self, _total: Option<usize>, _already_done: usize) {}
    fn finished(&self, _record: &EpisodeRecord) {}
}

/// No progress reporting.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;
impl Progress for Silent {}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Task(#[from] TaskError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a call of [`Runner::run`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    pub skipped: usize,
    pub completed: usize,
    pub errored: usize,
    /// True when a stop was requested before every task ran.
    pub interrupted: bool,
}

/// Runs episodes of one environment with one agent.
#[derive(Clone)]
pub struct Runner {
    pub env: Arc<dyn EnvironmentFactory>,
    pub agent: Arc<dyn AgentFactory>,
    pub scorers: Arc<Vec<Box<dyn Scorer>>>,
    pub budget: Budget,
    pub concurrency: usize,
    /// How many episodes beyond those in flight the environment is asked to prepare
    /// ([`EnvironmentFactory::prepare`]), so that their setup overlaps the running episodes'
    /// waits. 0: none, each episode's environment is built when it starts. At most
    /// `concurrency` episodes run at once either way; up to this many more are being set up.
    /// Of these, the one the factory has ready first starts first
    /// ([`EnvironmentFactory::prepared`]), not necessarily the next in the suite's order.
    pub prepare_ahead: usize,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("env", &self.env.name())
            .field("agent", &self.agent.name())
            .field("budget", &self.budget)
            .field("concurrency", &self.concurrency)
            .field("prepare_ahead", &self.prepare_ahead)
            .finish()
    }
}

impl Runner {
    /// The configuration of this runner, for the run's `config.json`.
    pub fn describe(&self) -> Value {
        serde_json::json!({
            "env": { "name": self.env.name(), "config": self.env.config() },
            "agent": { "name": self.agent.name(), "config": self.agent.config() },
            "scorers": self.scorers.iter().map(|s| s.name()).collect::<Vec<_>>(),
            "budget": {
                "max_steps": self.budget.max_steps,
                "episode_timeout_s": self.budget.episode_timeout.as_secs_f64(),
                "evaluate_timeout_s": self.budget.evaluate_timeout.as_secs_f64(),
                "max_tokens": self.budget.max_tokens,
                "max_cost_usd": self.budget.max_cost_usd,
                "price_per_million_tokens_usd": self.budget.price,
            },
            "concurrency": self.concurrency,
            "prepare_ahead": self.prepare_ahead,
        })
    }

    /// Runs every task of `source` that `store` has not completed yet. Stops launching new
    /// episodes once `stop` turns true, and lets the ones in flight finish.
    pub async fn run(
        &self,
        source: &dyn TaskSource,
        store: &mut RunDir,
        progress: &dyn Progress,
        stop: watch::Receiver<bool>,
    ) -> Result<RunStats, RunError> {
        self.run_epochs(source, store, progress, stop, 1).await
    }

    /// [`Runner::run`], each task `epochs` times (at least once): the episodes (task, epoch)
    /// that `store` has not completed yet, epoch by epoch, so that a run stopped early has
    /// whole epochs rather than some tasks K times and others never.
    pub async fn run_epochs(
        &self,
        source: &dyn TaskSource,
        store: &mut RunDir,
        progress: &dyn Progress,
        mut stop: watch::Receiver<bool>,
        epochs: u32,
    ) -> Result<RunStats, RunError> {
        let epochs = epochs.max(1);
        let done: HashSet<(String, u32)> = store.completed()?;
        let already = done.iter().filter(|(_, e)| *e < epochs).count();
        progress.started(source.len_hint().map(|n| n * epochs as usize), already);
        let mut stats = RunStats::default();
        let mut in_flight: JoinSet<(EpisodeRecord, Trajectory)> = JoinSet::new();
        let mut meta: HashMap<tokio::task::Id, (Task, u32)> = HashMap::new();
        let mut episodes = (0..epochs).flat_map(|epoch| source.tasks().map(move |task| (task, epoch)));
        let concurrency = self.concurrency.max(1);
        // The episodes to run next, in order: with `prepare_ahead`, the environment was asked
        // to prepare each as it joined.
        let mut upcoming: VecDeque<(Task, u32)> = VecDeque::new();
        let mut exhausted = false;
        let mut fill = |upcoming: &mut VecDeque<(Task, u32)>, want: usize, stats: &mut RunStats| {
            while upcoming.len() < want && !exhausted {
                let Some((task, epoch)) = episodes.next() else {
                    exhausted = true;
                    break;
                };
                let task = task?;
                if done.contains(&(task.id.clone(), epoch)) {
                    stats.skipped += 1;
                    continue;
                }
                if self.prepare_ahead > 0 {
                    self.env.prepare(&task);
                }
                upcoming.push_back((task, epoch));
            }
            Ok::<(), RunError>(())
        };

        loop {
            while in_flight.len() < concurrency && !*stop.borrow() {
                fill(&mut upcoming, 1 + self.prepare_ahead, &mut stats)?;
                let Some((task, epoch)) = self.next_ready(&mut upcoming) else { break };
                let runner = self.clone();
                let owned = task.clone();
                let handle = in_flight.spawn(async move { runner.run_attempt(&owned, epoch).await });
                meta.insert(handle.id(), (task, epoch));
            }
            if !*stop.borrow() {
                fill(&mut upcoming, self.prepare_ahead, &mut stats)?;
            }
            if in_flight.is_empty() {
                break;
            }
            let joined = tokio::select! {
                joined = in_flight.join_next_with_id() => joined,
                _ = stop.changed() => continue,
            };
            let Some(joined) = joined else { break };
            let (record, trajectory) = match joined {
                Ok((id, result)) => {
                    meta.remove(&id);
                    result
                }
                Err(join_error) => {
                    let task = meta.remove(&join_error.id());
                    let Some((task, epoch)) = task else { continue };
                    let message = format!("episode panicked: {join_error}");
                    tracing::error!(task = %task.id, epoch, "{message}");
                    let (mut record, trajectory) = panicked(&task, self.agent.name(), message);
                    record.epoch = epoch;
                    (record, trajectory)
                }
            };
            match record.status {
                EpisodeStatus::Completed => stats.completed += 1,
                EpisodeStatus::Errored => stats.errored += 1,
            }
            store.append(&record, &trajectory)?;
            progress.finished(&record);
        }
        if *stop.borrow() {
            fill(&mut upcoming, 1, &mut stats)?;
            stats.interrupted = !upcoming.is_empty();
        }
        Ok(stats)
    }

    /// The episode to start next, out of `upcoming`: the first whose environment the factory
    /// has ready ([`EnvironmentFactory::prepared`]), so that a lab slow to prepare (one whose
    /// fault takes seconds to show) holds up no episode behind it; when none is ready, the
    /// first, which then waits for its own (waiting here instead for whichever is ready first
    /// was measured slower: the episodes waited for stayed among the upcoming ones, and fewer
    /// were being prepared at once). Episodes are independent and recorded by (task, epoch),
    /// so the order they start in changes no result.
    fn next_ready(&self, upcoming: &mut VecDeque<(Task, u32)>) -> Option<(Task, u32)> {
        let ready = upcoming.iter().position(|(task, _)| self.env.prepared(task) == Some(true));
        upcoming.remove(ready.unwrap_or(0))
    }

    /// Runs one episode from start to scores. Never fails: what goes wrong is in the record,
    /// and the steps made before it went wrong stay in the trajectory.
    pub async fn run_episode(&self, task: &Task) -> (EpisodeRecord, Trajectory) {
        self.run_attempt(task, 0).await
    }

    /// [`Runner::run_episode`] as attempt `epoch` at the task: the agent is made for that
    /// epoch ([`AgentFactory::create_for_epoch`]) and the record says which it was.
    pub async fn run_attempt(&self, task: &Task, epoch: u32) -> (EpisodeRecord, Trajectory) {
        let started = Instant::now();
        let mut trajectory = Trajectory::new(&task.id, self.agent.name());
        let created = timed(&mut trajectory.timing.setup_us, self.env.create(task)).await;
        let result = match created {
            Ok(mut env) => {
                let result = self.drive(task, epoch, env.as_mut(), started, &mut trajectory).await;
                if let Err(e) = timed(&mut trajectory.timing.close_us, env.close()).await {
                    tracing::warn!(task = %task.id, "closing the environment failed: {}", e.chain());
                }
                result
            }
            Err(e) => Err(env_failure(e)),
        };
        trajectory.wall_ms = ms(started);
        let mut record = record_of(task, &trajectory);
        record.epoch = epoch;
        match result {
            Ok(()) => record.metrics = self.scorers.iter().flat_map(|s| s.score(task, &trajectory)).collect(),
            Err((cause, message)) => {
                tracing::warn!(task = %task.id, ?cause, "episode errored: {message}");
                trajectory.end = EndReason::Error;
                record.end = EndReason::Error;
                record.status = EpisodeStatus::Errored;
                record.error = Some(message);
                record.cause = Some(cause);
            }
        }
        if let Some(price) = self.budget.price {
            // Errored episodes too: their tokens were paid for.
            record.metrics.push(Metric::value(COST_METRIC, price.cost_usd(&record.tokens)));
        }
        record.class = Some(record.derive_class());
        (record, trajectory)
    }

    /// The agent loop, recording into `trajectory` as it goes.
    async fn drive(
        &self,
        task: &Task,
        epoch: u32,
        env: &mut dyn Environment,
        started: Instant,
        trajectory: &mut Trajectory,
    ) -> Result<(), Failure> {
        let timing: &mut Timing = &mut trajectory.timing;
        trajectory.brief = timed(&mut timing.setup_us, env.reset(task)).await.map_err(env_failure)?;
        // The time limit is the agent's: it starts once the environment is ready.
        let deadline = Instant::now() + self.budget.episode_timeout;
        let mut tools: Vec<ToolSpec> = env.tools();
        tools.push(ToolSpec::finish(env.answer_schema(task)));
        let schemas: HashMap<String, Value> =
            tools.iter().map(|t| (t.name.clone(), t.parameters.clone())).collect();
        trajectory.tools = tools.clone();

        let mut agent = timed_sync(&mut timing.agent_us, || self.agent.create_for_epoch(task, epoch))
            .map_err(agent_failure)?;
        trajectory.initial_check = timed(&mut timing.checks_us, env.check()).await.map_err(env_failure)?;
        let episode =
            EpisodeStart { task, brief: &trajectory.brief, tools: &tools, max_steps: self.budget.max_steps };
        timed(&mut timing.agent_us, agent.start(&episode)).await.map_err(agent_failure)?;

        let mut feedback: Vec<Observation> = Vec::new();
        let mut turn_index = 0;
        let steps = &mut trajectory.steps;
        let end = 'episode: loop {
            if steps.len() >= self.budget.max_steps {
                break EndReason::StepBudget;
            }
            let turn: AgentTurn =
                match timed(&mut timing.agent_us, timeout_at(deadline, agent.step(&feedback))).await {
                    Err(_) => break EndReason::TimeBudget,
                    Ok(Err(AgentError::Protocol { message, .. })) => {
                        // The agent answered, but not a turn: its failure, scored as one.
                        tracing::warn!(task = %task.id, "the agent's answer is unusable: {message}");
                        trajectory.end_detail = Some(message);
                        break EndReason::UnusableOutput;
                    }
                    Ok(Err(e)) => return Err(agent_failure(e)),
                    Ok(Ok(turn)) => turn,
                };
            trajectory.transcript.extend(turn.transcript);
            if let Some(u) = turn.usage {
                trajectory.usage += u;
            }
            if let Some(limit) = self.budget.spent(&trajectory.usage) {
                break limit;
            }
            if turn.calls.is_empty() {
                break EndReason::AgentStopped;
            }
            feedback.clear();
            let mut reasoning = Some(turn.reasoning);
            let mut usage = turn.usage;
            for call in turn.calls {
                if call.name == FINISH_TOOL && call.malformed.is_none() {
                    trajectory.answer = call.arguments.get("answer").cloned();
                    break 'episode EndReason::Finished;
                }
                if steps.len() >= self.budget.max_steps {
                    break 'episode EndReason::StepBudget;
                }
                let step_start = Instant::now();
                let (observation, invalid) = match schemas.get(&call.name) {
                    _ if call.malformed.is_some() => {
                        let why = call.malformed.clone().unwrap_or_default();
                        (Observation::error(&call, why), true)
                    }
                    None => {
                        let known: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
                        let msg = format!("unknown tool `{}` (tools: {})", call.name, known.join(", "));
                        (Observation::error(&call, msg), true)
                    }
                    Some(schema) => match schema::validate(schema, &call.arguments) {
                        Err(msg) => (Observation::error(&call, format!("tool `{}`: {msg}", call.name)), true),
                        Ok(()) => match timed(&mut timing.tools_us, timeout_at(deadline, env.execute(&call)))
                            .await
                        {
                            Err(_) => break 'episode EndReason::TimeBudget,
                            Ok(Err(e)) => return Err(env_failure(e)),
                            Ok(Ok(obs)) => (obs, false),
                        },
                    },
                };
                let check: StateCheck =
                    timed(&mut timing.checks_us, env.check()).await.map_err(env_failure)?;
                steps.push(Step {
                    index: steps.len(),
                    turn: turn_index,
                    reasoning: reasoning.take().unwrap_or_default(),
                    call,
                    observation: observation.clone(),
                    invalid,
                    check,
                    at_ms: (step_start - started).as_millis() as u64,
                    duration_ms: step_start.elapsed().as_millis() as u64,
                    usage: usage.take(),
                });
                feedback.push(observation);
            }
            turn_index += 1;
        };
        trajectory.end = end;

        let eval_deadline = Instant::now() + self.budget.evaluate_timeout;
        let evaluated = timed(
            &mut timing.evaluate_us,
            timeout_at(eval_deadline, env.evaluate(task, trajectory.answer.as_ref())),
        )
        .await;
        let outcome = match evaluated {
            Err(_) => return Err((ErrorCause::Infrastructure, "the final evaluation timed out".into())),
            Ok(Err(e)) => return Err(env_failure(e)),
            Ok(Ok(outcome)) => outcome,
        };
        trajectory.outcome = Some(outcome);
        Ok(())
    }
}

/// Awaits `work`, adding the microseconds it took to `slot` (microseconds: parts of a
/// millisecond, added up over an episode's steps, are not lost).
async fn timed<T>(slot: &mut u64, work: impl Future<Output = T>) -> T {
    let start = Instant::now();
    let out = work.await;
    *slot += start.elapsed().as_micros() as u64;
    out
}

fn timed_sync<T>(slot: &mut u64, work: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = work();
    *slot += start.elapsed().as_micros() as u64;
    out
}

fn ms(since: Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

/// The record of a trajectory, as completed and not yet scored.
fn record_of(task: &Task, trajectory: &Trajectory) -> EpisodeRecord {
    EpisodeRecord {
        task_id: task.id.clone(),
        epoch: 0,
        application: task.application.clone(),
        level: task.level,
        label: task.label.clone(),
        domain: task.domain.clone(),
        agent: trajectory.agent.clone(),
        status: EpisodeStatus::Completed,
        error: None,
        cause: None,
        end: trajectory.end,
        steps: trajectory.steps.len(),
        invalid_steps: trajectory.steps.iter().filter(|s| s.invalid).count(),
        wall_ms: trajectory.wall_ms,
        timing: trajectory.timing,
        tokens: trajectory.tokens(),
        class: None,
        metrics: vec![],
    }
}

/// Why an episode errored, and whose failure it was.
type Failure = (ErrorCause, String);

fn env_failure(e: EnvError) -> Failure {
    (e.cause(), e.chain())
}

/// A model API that failed after the agent's retries is infrastructure (`--resume` retries it);
/// an agent that cannot be set up is a configuration to fix.
fn agent_failure(e: AgentError) -> Failure {
    let cause = match e {
        AgentError::Unreachable { .. } => ErrorCause::ModelApi,
        AgentError::Protocol { .. } | AgentError::Config { .. } => ErrorCause::Agent,
    };
    (cause, e.to_string())
}

/// The record of an episode that panicked (nothing of its trajectory survives).
fn panicked(task: &Task, agent: &str, error: String) -> (EpisodeRecord, Trajectory) {
    let trajectory = Trajectory::new(&task.id, agent);
    let mut record = record_of(task, &trajectory);
    record.status = EpisodeStatus::Errored;
    record.error = Some(error);
    record.cause = Some(ErrorCause::Infrastructure);
    record.class = Some(record.derive_class());
    (record, trajectory)
}
