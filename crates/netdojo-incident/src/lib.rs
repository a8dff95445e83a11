//! Network incidents (`--env incident`): a multi-router FRR lab ([`lab::Lab`]) that was healthy
//! (every [`lab::Check`] passes), one to three faults from [`catalogue::FaultType`] injected on
//! it as an operator would have typed them ([`fault::Fault`]), and a brief that reports only the
//! symptom. The agent diagnoses (which device, which fault type) and repairs; both are scored.
//!
//! A lab runs as a [`live::LiveLab`]: its network built from real namespaces and FRR, its
//! services ([`services`]) started, its checks run from inside it ([`health`]).

pub mod catalogue;
pub mod docs;
pub mod env;
pub mod error;
pub mod fault;
pub mod faults;
pub mod generate;
pub mod health;
pub mod lab;
pub mod live;
pub mod score;
pub mod services;
pub mod task;
pub mod verify;

pub use catalogue::{Category, FaultType};
pub use env::{IncidentEnv, IncidentFactory, IncidentOptions};
pub use error::IncidentError;
pub use fault::{Action, Fault};
pub use generate::IncidentGenerator;
pub use health::{CheckResult, Health};
pub use lab::{Check, Lab, LabError, Service, ServiceKind};
pub use live::LiveLab;
pub use score::IncidentScore;
pub use task::{APPLICATION, Diagnosed};
