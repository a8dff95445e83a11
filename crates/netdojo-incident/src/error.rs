//! What can go wrong with a live lab. A lab file's own mistakes are [`LabError`]s; an
//! operator action that the device refuses is [`IncidentError::Apply`] (for an agent's tool, a
//! failed step); the rest is the environment's.

use std::time::Duration;

use crate::lab::LabError;

#[derive(Debug, thiserror::Error)]
pub enum IncidentError {
    #[error(transparent)]
    Lab(#[from] LabError),
    #[error("lab {lab}: building the network: {source}")]
    Network {
        lab: String,
        #[source]
        source: netdojo_linux::network::NetworkError,
    },
    /// `state`, in this and [`IncidentError::NotShowing`]: what the routers' daemons said then
    /// of their interfaces, neighbours and sessions ([`IncidentError::routers_state`]); left out
    /// of the message, and logged where a lab that did not come up is started once more.
    #[error("lab {lab}: not healthy after {waited:?}; failing: {failing}")]
    NotHealthy { lab: String, waited: Duration, failing: String, state: String },
    #[error(
        "lab {lab}: started with its faults, not showing their symptom after {waited:?}; expected failing: {expected}; failing: {failing}"
    )]
    NotShowing { lab: String, waited: Duration, expected: String, failing: String, state: String },
    /// A lab that did not come up, started once more ([`crate::live::start_twice`]), and not
    /// up then either.
    #[error("{second} (the first time: {first})")]
    Twice {
        first: Box<IncidentError>,
        #[source]
        second: Box<IncidentError>,
    },
    #[error("lab {lab}: no node `{node}`")]
    NoNode { lab: String, node: String },
    #[error("lab {lab}: `{node}` is not a router (vtysh runs on `frr` nodes)")]
    NotRouter { lab: String, node: String },
    #[error("lab {lab}: {device}: {message}")]
    Apply { lab: String, device: String, message: String },
    #[error("lab {lab}: service `{service}`: {message}")]
    Service { lab: String, service: String, message: String },
    #[error("lab {lab}: {device}: {source}")]
    Frr {
        lab: String,
        device: String,
        #[source]
        source: netdojo_linux::frr::FrrError,
    },
    #[error("lab {lab}: {device}: {source}")]
    Exec {
        lab: String,
        device: String,
        #[source]
        source: netdojo_linux::exec::ExecError,
    },
}

impl IncidentError {
    /// For a lab that did not come up, what its routers' daemons said of their interfaces,
    /// neighbours and sessions when it was found so.
    pub fn routers_state(&self) -> Option<&str> {
        match self {
            IncidentError::NotHealthy { state, .. } | IncidentError::NotShowing { state, .. } => Some(state),
            _ => None,
        }
    }
}
