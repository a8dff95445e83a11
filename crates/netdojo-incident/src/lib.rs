//! Network incidents (`--env incident`): a multi-router FRR lab ([`lab::Lab`]) that was healthy
//! (every [`lab::Check`] passes), one to three faults from [`catalogue::FaultType`] injected on
//! it as an operator would have typed them ([`fault::Fault`]), and a brief that reports only the
//! symptom. The agent diagnoses (which device, which fault type) and repairs; both are scored.

pub mod catalogue;
pub mod fault;
pub mod faults;
pub mod generate;
pub mod lab;
pub mod score;
pub mod task;

pub use catalogue::{Category, FaultType};
pub use fault::{Action, Fault};
pub use generate::IncidentGenerator;
pub use lab::{Check, Lab, LabError, Service, ServiceKind};
pub use score::IncidentScore;
pub use task::{APPLICATION, Diagnosed};
