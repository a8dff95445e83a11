//! The error codes of draft 002 §7, and the JSON-RPC errors they become.

use rmcp::model::{ErrorCode, ErrorData};
use serde_json::{Value, json};

/// `Network.Timeout`: the device did not answer in time.
pub const TIMEOUT: i32 = -32081;
/// `Network.Unreachable`: the device is gone or none of its daemons answers.
pub const UNREACHABLE: i32 = -32082;
/// `Network.AccessDenied`: the session's role may not do this.
pub const ACCESS_DENIED: i32 = -32083;
/// `Network.ConfigIncompatible`: the device refused the configuration.
pub const CONFIG_INCOMPATIBLE: i32 = -32084;
/// `Network.RollbackFailed`: the configuration could not be restored.
pub const ROLLBACK_FAILED: i32 = -32085;
/// `Network.ConfirmedCommitTimeout`: a confirmed commit was not confirmed in time and was
/// rolled back.
pub const CONFIRMED_COMMIT_TIMEOUT: i32 = -32086;

/// What a network operation can fail with. Every variant but the last two carries one of the
/// §7 codes; bad arguments and the server's own failures keep JSON-RPC's.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NetError {
    #[error("{0}")]
    Timeout(String),
    #[error("{0}")]
    Unreachable(String),
    #[error("{0}")]
    AccessDenied(String),
    #[error("{message}")]
    ConfigIncompatible { message: String, details: Value },
    #[error("{0}")]
    RollbackFailed(String),
    #[error("{0}")]
    ConfirmedCommitTimeout(String),
    #[error("{0}")]
    InvalidParams(String),
    #[error("{0}")]
    Internal(String),
}

impl NetError {
    pub fn code(&self) -> i32 {
        match self {
            Self::Timeout(_) => TIMEOUT,
            Self::Unreachable(_) => UNREACHABLE,
            Self::AccessDenied(_) => ACCESS_DENIED,
            Self::ConfigIncompatible { .. } => CONFIG_INCOMPATIBLE,
            Self::RollbackFailed(_) => ROLLBACK_FAILED,
            Self::ConfirmedCommitTimeout(_) => CONFIRMED_COMMIT_TIMEOUT,
            Self::InvalidParams(_) => ErrorCode::INVALID_PARAMS.0,
            Self::Internal(_) => ErrorCode::INTERNAL_ERROR.0,
        }
    }

    /// The §7 message name (`Network.Timeout` ...), for the error's data.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Timeout(_) => "Network.Timeout",
            Self::Unreachable(_) => "Network.Unreachable",
            Self::AccessDenied(_) => "Network.AccessDenied",
            Self::ConfigIncompatible { .. } => "Network.ConfigIncompatible",
            Self::RollbackFailed(_) => "Network.RollbackFailed",
            Self::ConfirmedCommitTimeout(_) => "Network.ConfirmedCommitTimeout",
            Self::InvalidParams(_) => "InvalidParams",
            Self::Internal(_) => "InternalError",
        }
    }

    /// As JSON (how an error travels inside an episode's observation).
    pub fn to_json(&self) -> Value {
        let mut v = json!({"code": self.code(), "name": self.name(), "message": self.to_string()});
        if let Self::ConfigIncompatible { details, .. } = self {
            v["details"] = details.clone();
        }
        v
    }

    /// Back from [`NetError::to_json`].
    pub fn from_json(v: &Value) -> Option<Self> {
        let code = v.get("code")?.as_i64()?;
        let message = v.get("message").and_then(Value::as_str).unwrap_or_default().to_string();
        Some(match i32::try_from(code).ok()? {
            TIMEOUT => Self::Timeout(message),
            UNREACHABLE => Self::Unreachable(message),
            ACCESS_DENIED => Self::AccessDenied(message),
            CONFIG_INCOMPATIBLE => Self::ConfigIncompatible {
                message,
                details: v.get("details").cloned().unwrap_or(Value::Null),
            },
            ROLLBACK_FAILED => Self::RollbackFailed(message),
            CONFIRMED_COMMIT_TIMEOUT => Self::ConfirmedCommitTimeout(message),
            c if c == ErrorCode::INVALID_PARAMS.0 => Self::InvalidParams(message),
            _ => Self::Internal(message),
        })
    }
}

impl From<NetError> for ErrorData {
    fn from(e: NetError) -> Self {
        // An error goes to whoever called, of either role, and into clients' logs: the
        // commands and device answers it quotes are redacted (§8).
        let data = match &e {
            NetError::ConfigIncompatible { details, .. } => {
                json!({"name": e.name(), "details": crate::redact::redact_json(details)})
            }
            _ => json!({"name": e.name()}),
        };
        ErrorData::new(ErrorCode(e.code()), crate::redact::redact(&e.to_string()), Some(data))
    }
}
