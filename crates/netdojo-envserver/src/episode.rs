//! One episode driven by a remote client: netdojo-core's [`Runner`] runs it (schema validation,
//! execution, the state check after each step, evaluation, scorers), with a [`ChannelAgent`]
//! whose turns are the client's tool calls, as netdojo-mcp does for external MCP agents. So an
//! episode served here is validated, checked, scored and recorded by the same code as any
//! `eval` episode.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use netdojo_core::runner::Runner;
use netdojo_core::{
    Agent, AgentError, AgentFactory, AgentTurn, EnvError, Environment, EnvironmentFactory, EpisodeRecord,
    EpisodeStart, Observation, Outcome, StateCheck, Task, ToolCall, ToolSpec, Trajectory,
};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// The name of the agent in records of served episodes.
pub const AGENT: &str = "openenv";

/// One tool call from the client, with where its observation goes.
#[derive(Debug)]
struct Turn {
    call: ToolCall,
    reply: oneshot::Sender<Observation>,
}

/// What the runner told the agent at the start.
#[derive(Debug)]
struct Started {
    brief: String,
    tools: Vec<ToolSpec>,
}

/// The runner's agent: each turn is the client's next call. The observation of a call reaches
/// the agent as the feedback of its next turn, and goes back to the client from there.
#[derive(Debug)]
struct ChannelAgent {
    started: Option<oneshot::Sender<Started>>,
    calls: mpsc::Receiver<Turn>,
    waiting: Option<oneshot::Sender<Observation>>,
}

#[async_trait]
impl Agent for ChannelAgent {
    async fn start(&mut self, episode: &EpisodeStart<'_>) -> Result<(), AgentError> {
        if let Some(started) = self.started.take() {
            let _ = started.send(Started { brief: episode.brief.to_string(), tools: episode.tools.to_vec() });
        }
        Ok(())
    }

    async fn step(&mut self, feedback: &[Observation]) -> Result<AgentTurn, AgentError> {
        if let (Some(reply), Some(obs)) = (self.waiting.take(), feedback.first()) {
            let _ = reply.send(obs.clone());
        }
        // No call: the client closed the session, reset, or went idle; the episode ends here
        // and is evaluated and recorded like any other.
        let Some(Turn { call, reply }) = self.calls.recv().await else { return Ok(AgentTurn::default()) };
        self.waiting = Some(reply);
        Ok(AgentTurn { calls: vec![call], ..AgentTurn::default() })
    }
}

/// Hands the one agent of an episode to the runner.
#[derive(Debug)]
struct OneAgent(Mutex<Option<ChannelAgent>>);

impl AgentFactory for OneAgent {
    fn name(&self) -> &str {
        AGENT
    }
    fn config(&self) -> Value {
        json!({"kind": "OpenEnv client (netdojo-envserver)"})
    }
    fn create(&self, _task: &Task) -> Result<Box<dyn Agent>, AgentError> {
        let agent = self.0.lock().ok().and_then(|mut slot| slot.take());
        agent.map(|a| Box::new(a) as Box<dyn Agent>).ok_or_else(|| AgentError::Config {
            agent: AGENT.into(),
            message: "an episode's channel agent is made once".into(),
        })
    }
}

/// The latest state check of an episode, kept where the session can read it: a step's reward
/// needs it before the runner has written the step into the trajectory.
type CheckSlot = Arc<Mutex<Option<StateCheck>>>;

/// The environment factory with its environments' checks tapped.
struct Tapped {
    inner: Arc<dyn EnvironmentFactory>,
    checks: CheckSlot,
}

#[async_trait]
impl EnvironmentFactory for Tapped {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn config(&self) -> Value {
        self.inner.config()
    }
    async fn create(&self, task: &Task) -> Result<Box<dyn Environment>, EnvError> {
        let env = self.inner.create(task).await?;
        Ok(Box::new(TappedEnv { inner: env, checks: self.checks.clone() }))
    }
}

struct TappedEnv {
    inner: Box<dyn Environment>,
    checks: CheckSlot,
}

#[async_trait]
impl Environment for TappedEnv {
    fn tools(&self) -> Vec<ToolSpec> {
        self.inner.tools()
    }
    fn answer_schema(&self, task: &Task) -> Option<Value> {
        self.inner.answer_schema(task)
    }
    async fn reset(&mut self, task: &Task) -> Result<String, EnvError> {
        self.inner.reset(task).await
    }
    async fn execute(&mut self, call: &ToolCall) -> Result<Observation, EnvError> {
        self.inner.execute(call).await
    }
    async fn check(&mut self) -> Result<StateCheck, EnvError> {
        let check = self.inner.check().await?;
        if let Ok(mut slot) = self.checks.lock() {
            *slot = Some(check.clone());
        }
        Ok(check)
    }
    async fn evaluate(&mut self, task: &Task, answer: Option<&Value>) -> Result<Outcome, EnvError> {
        self.inner.evaluate(task, answer).await
    }
    async fn close(&mut self) -> Result<(), EnvError> {
        self.inner.close().await
    }
}

/// An episode in flight.
#[derive(Debug)]
pub struct Live {
    pub task: Arc<Task>,
    pub epoch: u32,
    pub brief: String,
    pub tools: Vec<ToolSpec>,
    pub initial_check: StateCheck,
    calls: Option<mpsc::Sender<Turn>>,
    checks: CheckSlot,
    handle: JoinHandle<(EpisodeRecord, Trajectory)>,
}

/// What a call did.
#[derive(Debug)]
pub enum Stepped {
    /// The call ran; the episode goes on. The observation and the check after it.
    Continues(Box<(Observation, StateCheck)>),
    /// The episode is over (`finish`, a budget, or it errored): its record and trajectory.
    Ended(Box<(EpisodeRecord, Trajectory)>),
}

/// Why an episode could not start.
#[derive(Debug)]
pub struct NotStarted(pub Box<(EpisodeRecord, Trajectory)>);

impl Live {
    /// Starts `task` on `runner`'s budget and scorers with a fresh environment of `factory`,
    /// and waits until it is reset and checked.
    pub async fn start(
        runner: &Runner,
        factory: Arc<dyn EnvironmentFactory>,
        task: Arc<Task>,
        epoch: u32,
    ) -> Result<Self, NotStarted> {
        let (started_tx, started_rx) = oneshot::channel();
        let (calls_tx, calls_rx) = mpsc::channel(1);
        let checks: CheckSlot = Arc::default();
        let agent = ChannelAgent { started: Some(started_tx), calls: calls_rx, waiting: None };
        let runner = Runner {
            env: Arc::new(Tapped { inner: factory, checks: checks.clone() }),
            agent: Arc::new(OneAgent(Mutex::new(Some(agent)))),
            concurrency: 1,
            prepare_ahead: 0,
            ..runner.clone()
        };
        let owned = task.clone();
        let mut handle = tokio::spawn(async move { runner.run_attempt(&owned, epoch).await });
        tokio::select! {
            started = started_rx => match started {
                Ok(Started { brief, tools }) => {
                    let initial_check = latest(&checks).unwrap_or_default();
                    Ok(Self { task, epoch, brief, tools, initial_check, calls: Some(calls_tx), checks, handle })
                }
                // The runner dropped the agent before starting it: it failed; its record says why.
                Err(_) => Err(NotStarted(Box::new(join(&mut handle, &task, epoch).await))),
            },
            ended = &mut handle => Err(NotStarted(Box::new(joined(ended, &task, epoch)))),
        }
    }

    /// Runs one call through the runner.
    pub async fn call(&mut self, call: ToolCall) -> Stepped {
        let (reply_tx, reply_rx) = oneshot::channel();
        let sent = match &self.calls {
            Some(calls) => calls.send(Turn { call, reply: reply_tx }).await.is_ok(),
            None => false,
        };
        if sent && let Ok(observation) = reply_rx.await {
            let check = latest(&self.checks).unwrap_or_default();
            return Stepped::Continues(Box::new((observation, check)));
        }
        // The runner asked for no further turn: `finish`, a budget, or an error ended it.
        Stepped::Ended(Box::new(self.finish().await))
    }

    /// Ends the episode (the agent stops if it is still asked for turns) and returns its
    /// record and trajectory, evaluated and scored.
    pub async fn finish(&mut self) -> (EpisodeRecord, Trajectory) {
        self.calls = None;
        join(&mut self.handle, &self.task, self.epoch).await
    }
}

fn latest(checks: &CheckSlot) -> Option<StateCheck> {
    checks.lock().ok().and_then(|slot| slot.clone())
}

async fn join(
    handle: &mut JoinHandle<(EpisodeRecord, Trajectory)>,
    task: &Task,
    epoch: u32,
) -> (EpisodeRecord, Trajectory) {
    joined(handle.await, task, epoch)
}

/// The runner's result, or the record of an episode that panicked.
fn joined(
    result: Result<(EpisodeRecord, Trajectory), tokio::task::JoinError>,
    task: &Task,
    epoch: u32,
) -> (EpisodeRecord, Trajectory) {
    match result {
        Ok(done) => done,
        Err(e) => {
            tracing::error!(task = %task.id, "served episode panicked: {e}");
            let trajectory = Trajectory::new(&task.id, AGENT);
            let record = EpisodeRecord {
                task_id: task.id.clone(),
                epoch,
                application: task.application.clone(),
                level: task.level,
                label: task.label.clone(),
                domain: task.domain.clone(),
                agent: AGENT.into(),
                status: netdojo_core::EpisodeStatus::Errored,
                error: Some(format!("episode panicked: {e}")),
                cause: Some(netdojo_core::ErrorCause::Infrastructure),
                end: netdojo_core::EndReason::Error,
                steps: 0,
                invalid_steps: 0,
                wall_ms: 0,
                timing: Default::default(),
                tokens: Default::default(),
                class: None,
                metrics: vec![],
            };
            (record, trajectory)
        }
    }
}

/// The agent of the server's template runner: every episode replaces it with its own
/// [`ChannelAgent`].
#[derive(Debug)]
pub struct NoAgent;

impl AgentFactory for NoAgent {
    fn name(&self) -> &str {
        AGENT
    }
    fn create(&self, _task: &Task) -> Result<Box<dyn Agent>, AgentError> {
        Err(AgentError::Config {
            agent: AGENT.into(),
            message: "the server's template runner has no agent".into(),
        })
    }
}
