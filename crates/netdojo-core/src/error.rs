//! Error types of the core traits. Each says which file, field, tool or server is at fault.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A task that cannot be read, parsed or generated.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Parse { path: PathBuf, line: Option<usize>, message: String },
    #[error("task {task_id}: field `{field}`: {message}")]
    Invalid { task_id: String, field: String, message: String },
    /// An invalid task as read from its file: the file and the field name where to fix it.
    #[error("{path}: {field}: {message}")]
    InvalidIn { path: PathBuf, task_id: String, field: String, message: String },
    #[error("task generator `{generator}`: {message}")]
    Generate { generator: String, message: String },
}

/// An environment that failed for reasons outside the agent's control (a crashed daemon, a
/// missing kernel feature, an unreachable server). Bad input from the agent is never an
/// `EnvError`: it is answered with an [`crate::Observation`] whose `ok` is false.
///
/// `message` says what was being done; `source`, when there is one, is the error that stopped
/// it, kept whole so that its chain ([`EnvError::chain`]) reaches the log and the record.
/// Build with [`EnvError::setup`], [`EnvError::runtime`] or [`EnvError::task`], then
/// [`EnvError::with_source`].
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("environment `{env}`: {message}")]
    Setup {
        env: String,
        message: String,
        #[source]
        source: Option<Cause>,
    },
    #[error("environment `{env}`: task {task_id}: {message}")]
    Task {
        env: String,
        task_id: String,
        message: String,
        #[source]
        source: Option<Cause>,
    },
    #[error("environment `{env}`: {what} is not supported here: {why}")]
    Unsupported { env: String, what: String, why: String },
    #[error("environment `{env}`: {message}")]
    Runtime {
        env: String,
        message: String,
        #[source]
        source: Option<Cause>,
    },
}

/// The error under an [`EnvError`].
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An agent that could not produce a turn (model unreachable, API error after retries).
/// The episode is recorded as errored, not failed, and a resumed run retries it.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("agent `{agent}`: {message}")]
    Unreachable { agent: String, message: String },
    #[error("agent `{agent}`: {message}")]
    Protocol { agent: String, message: String },
    #[error("agent `{agent}`: {message}")]
    Config { agent: String, message: String },
}

/// A price table (`--prices FILE`) that cannot be read, or that has no price for the model.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "{path}: no price for model `{model}` (the table prices: {known}); add it, prices are never guessed"
    )]
    UnknownModel { path: PathBuf, model: String, known: String },
}

/// The results store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },
}

impl StoreError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| StoreError::Io { path, source }
    }
}

impl EnvError {
    /// The environment could not be set up (a daemon, a namespace, a server).
    pub fn setup(env: impl Into<String>, message: impl Into<String>) -> Self {
        EnvError::Setup { env: env.into(), message: message.into(), source: None }
    }

    /// The environment failed while the episode ran.
    pub fn runtime(env: impl Into<String>, message: impl Into<String>) -> Self {
        EnvError::Runtime { env: env.into(), message: message.into(), source: None }
    }

    /// The task cannot run: its file is at fault.
    pub fn task(env: impl Into<String>, task_id: impl Into<String>, message: impl Into<String>) -> Self {
        EnvError::Task { env: env.into(), task_id: task_id.into(), message: message.into(), source: None }
    }

    /// Keeps `cause` as the error's source (an `Unsupported` has none and stays as it is).
    pub fn with_source(mut self, cause: impl Into<Cause>) -> Self {
        match &mut self {
            EnvError::Setup { source, .. }
            | EnvError::Task { source, .. }
            | EnvError::Runtime { source, .. } => {
                *source = Some(cause.into());
            }
            EnvError::Unsupported { .. } => {}
        }
        self
    }

    /// The error and every cause under it, joined with ": " (what the log and the record show).
    pub fn chain(&self) -> String {
        let mut out = self.to_string();
        let mut next = std::error::Error::source(self);
        while let Some(cause) = next {
            out.push_str(": ");
            out.push_str(&cause.to_string());
            next = cause.source();
        }
        out
    }

    /// Whose failure this is: a task file's (`Task`, `Unsupported`) or the machine's.
    pub fn cause(&self) -> ErrorCause {
        match self {
            EnvError::Task { .. } | EnvError::Unsupported { .. } => ErrorCause::Task,
            EnvError::Setup { .. } | EnvError::Runtime { .. } => ErrorCause::Infrastructure,
        }
    }
}

/// Whose failure made an episode errored: says whether a retry can help and whom to tell.
/// An agent's bad input is never one of these: it is a failed step (`ok: false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCause {
    /// The machine or a backend failed (namespaces, daemons, a server, a timeout of the
    /// evaluation, a panic): `--resume` retries it.
    Infrastructure,
    /// The task file is wrong or asks for what the environment cannot do: a retry gives the
    /// same error; fix the task.
    Task,
    /// The agent could not be set up (its configuration, e.g. few-shot with no examples, or an
    /// agent server that broke its protocol before the first turn). In records written before
    /// `model_api` existed, also a model API failure.
    Agent,
    /// The model's API failed (rate limit, 5xx, timeout, unreachable, an answer not in its
    /// protocol) after the agent's retries with backoff: `--resume` retries it.
    ModelApi,
}
