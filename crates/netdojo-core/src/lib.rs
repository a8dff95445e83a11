//! netdojo's vocabulary, shared by every backend and agent.
//!
//! An [`Environment`] publishes its tools as data ([`ToolSpec`]); an [`Agent`] answers each turn
//! with reasoning and [`ToolCall`]s; the [`runner`] drives one episode per [`Task`], checks the
//! state after every step, asks the environment for the final [`Outcome`], lets [`Scorer`]s turn
//! the episode into metrics and appends one record per episode to a [`store::RunDir`].
//!
//! Core knows no backend: backends depend on this crate and nothing else of netdojo.

pub mod agent;
pub mod env;
pub mod error;
pub mod metric;
pub mod price;
pub mod runner;
pub mod schema;
pub mod scorer;
pub mod store;
pub mod suite;
pub mod task;
pub mod testcase;
pub mod tool;
pub mod trajectory;

pub use agent::{Agent, AgentFactory, AgentTurn, EpisodeStart, TokenUsage};
pub use env::{Check, Environment, EnvironmentFactory, Outcome, StateCheck};
pub use error::{AgentError, EnvError, PriceError, StoreError, TaskError};
pub use metric::{Metric, MetricValue};
pub use price::{Price, PriceTable};
pub use runner::{Budget, Progress, Runner};
pub use scorer::Scorer;
pub use task::{
    ConfigTask, ConfigTopology, Fault, Filtered, GeneratedSuite, StaticSuite, Task, TaskFilter,
    TaskGenerator, TaskKind, TaskSource, Testcase,
};
pub use tool::{FINISH_TOOL, Observation, ToolCall, ToolSpec};
pub use trajectory::{
    EndReason, EpisodeClass, EpisodeRecord, EpisodeStatus, ErrorCause, Step, Timing, Trajectory,
};
