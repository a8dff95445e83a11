//! What building and running a network can fail with: below `network` and `pool`, which both
//! return it, so that they import one way (`pool`, then `network`).

use std::time::Duration;

use crate::frr::FrrError;
use crate::netns::NetnsError;

#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error("building `{what}`: {message}")]
    Build { what: String, message: String },
    #[error("network not ready after {waited:?}: {down}")]
    NotReady { waited: Duration, down: String },
    #[error("no tokio runtime: networks are built from async code")]
    NoRuntime,
    #[error(transparent)]
    Frr(#[from] FrrError),
}
