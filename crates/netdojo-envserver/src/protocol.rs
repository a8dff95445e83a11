//! OpenEnv's WebSocket messages, as openenv-core 0.3.0 defines them
//! (`openenv/core/env_server/types.py`, `mcp_types.py`, `http_server.py`'s `/ws` endpoint) and
//! its `MCPToolClient` reads them (`openenv/core/mcp_client.py`: `_step_payload`,
//! `_parse_result`, `_parse_state`).
//!
//! In: `{"type": "reset", "data": {...}}`, `{"type": "step", "data": ACTION}`,
//! `{"type": "state"}`, `{"type": "close"}`; an ACTION is `{"type": "list_tools"}` or
//! `{"type": "call_tool", "tool_name": NAME, "arguments": {...}}`.
//! Out: `{"type": "observation", "data": {"observation": {...}, "reward": R, "done": D}}`,
//! `{"type": "state", "data": {...}}`, `{"type": "error", "data": {"message": M, "code": C}}`.

use serde_json::{Map, Value, json};

/// OpenEnv's `WSErrorCode` values that this server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidJson,
    UnknownType,
    ValidationError,
    ExecutionError,
    CapacityReached,
    FactoryError,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "INVALID_JSON",
            ErrorCode::UnknownType => "UNKNOWN_TYPE",
            ErrorCode::ValidationError => "VALIDATION_ERROR",
            ErrorCode::ExecutionError => "EXECUTION_ERROR",
            ErrorCode::CapacityReached => "CAPACITY_REACHED",
            ErrorCode::FactoryError => "FACTORY_ERROR",
        }
    }
}

/// An error answer: the client raises `RuntimeError("Server error: MESSAGE (code: CODE)")`.
#[derive(Debug, Clone, PartialEq)]
pub struct WsError {
    pub code: ErrorCode,
    pub message: String,
}

impl WsError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ValidationError, message)
    }

    pub fn execution(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ExecutionError, message)
    }

    pub fn to_json(&self) -> Value {
        json!({"type": "error", "data": {"message": self.message, "code": self.code.as_str()}})
    }
}

/// One message from a client.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Reset(ResetRequest),
    Step(Action),
    State,
    Close,
}

/// What `reset` may ask for (OpenEnv's `ResetRequest`: `seed`, `episode_id`; netdojo adds
/// `task_id` and `index`). Precedence: `task_id`, then `index`, then `seed`; with none, the next
/// task in turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResetRequest {
    pub task_id: Option<String>,
    pub index: Option<u64>,
    pub seed: Option<u64>,
    pub episode_id: Option<String>,
}

/// A step's action: the two MCP actions of OpenEnv's `mcp_types.py`.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    ListTools,
    CallTool { tool_name: String, arguments: Value },
}

/// The reset fields this server reads; any other is refused by name (OpenEnv's reference
/// server drops what its environment's `reset` does not take, silently).
const RESET_FIELDS: &[&str] = &["task_id", "index", "seed", "episode_id"];

/// Parses one text frame.
pub fn parse(text: &str) -> Result<Incoming, WsError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| WsError::new(ErrorCode::InvalidJson, format!("Invalid JSON: {e}")))?;
    let Some(object) = value.as_object() else {
        return Err(WsError::validation("a message is a JSON object with a `type`"));
    };
    let kind = object.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "reset" => parse_reset(object.get("data")).map(Incoming::Reset),
        "step" => {
            let data = object
                .get("data")
                .ok_or_else(|| WsError::validation("step: `data` (the action) is missing"))?;
            parse_action(data).map(Incoming::Step)
        }
        "state" => Ok(Incoming::State),
        "close" => Ok(Incoming::Close),
        other => Err(WsError::new(
            ErrorCode::UnknownType,
            format!("Unknown message type: {other} (this server takes reset, step, state, close)"),
        )),
    }
}

fn parse_reset(data: Option<&Value>) -> Result<ResetRequest, WsError> {
    let empty = Map::new();
    let data = match data {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(map)) => map,
        Some(_) => return Err(WsError::validation("reset: `data` must be an object")),
    };
    if let Some(unknown) = data.keys().find(|k| !RESET_FIELDS.contains(&k.as_str())) {
        return Err(WsError::validation(format!(
            "reset: unknown field `{unknown}` (fields: {})",
            RESET_FIELDS.join(", ")
        )));
    }
    let text = |name: &str| -> Result<Option<String>, WsError> {
        match data.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(WsError::validation(format!("reset: `{name}` must be a string"))),
        }
    };
    let number = |name: &str| -> Result<Option<u64>, WsError> {
        match data.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| WsError::validation(format!("reset: `{name}` must be an integer ≥ 0"))),
        }
    };
    Ok(ResetRequest {
        task_id: text("task_id")?,
        index: number("index")?,
        seed: number("seed")?,
        episode_id: text("episode_id")?,
    })
}

fn parse_action(data: &Value) -> Result<Action, WsError> {
    // Without a `type`, the action is a `CallToolAction` (whose `type` defaults to
    // `call_tool`), as OpenEnv's server validates it for an MCP environment.
    let kind = match data.get("type") {
        None => "call_tool",
        Some(kind) => kind.as_str().unwrap_or(""),
    };
    match kind {
        "list_tools" => Ok(Action::ListTools),
        "call_tool" => {
            let tool_name = data
                .get("tool_name")
                .and_then(Value::as_str)
                .ok_or_else(|| WsError::validation("call_tool: `tool_name` (a string) is missing"))?
                .to_string();
            let arguments = match data.get("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(v @ Value::Object(_)) => v.clone(),
                Some(_) => return Err(WsError::validation("call_tool: `arguments` must be an object")),
            };
            Ok(Action::CallTool { tool_name, arguments })
        }
        other => Err(WsError::validation(format!(
            "step: unknown action type `{other}` (actions: list_tools, call_tool)"
        ))),
    }
}

/// `{"type": "observation", "data": {"observation": OBS, "reward": R, "done": D}}`.
pub fn observation(observation: Value, reward: Option<f64>, done: bool) -> Value {
    json!({"type": "observation", "data": {"observation": observation, "reward": reward, "done": done}})
}

/// `{"type": "state", "data": STATE}`.
pub fn state(data: Value) -> Value {
    json!({"type": "state", "data": data})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_messages_parse() {
        assert_eq!(parse(r#"{"type":"reset","data":{}}"#), Ok(Incoming::Reset(ResetRequest::default())));
        assert_eq!(
            parse(r#"{"type":"reset","data":{"task_id":"q-1","seed":4}}"#),
            Ok(Incoming::Reset(ResetRequest {
                task_id: Some("q-1".into()),
                seed: Some(4),
                ..ResetRequest::default()
            }))
        );
        assert_eq!(
            parse(r#"{"type":"step","data":{"type":"list_tools"}}"#),
            Ok(Incoming::Step(Action::ListTools))
        );
        assert_eq!(
            parse(r#"{"type":"step","data":{"type":"call_tool","tool_name":"count","arguments":{"a":1}}}"#),
            Ok(Incoming::Step(Action::CallTool { tool_name: "count".into(), arguments: json!({"a": 1}) }))
        );
        // No `type`: a CallToolAction, whose type defaults to call_tool.
        assert_eq!(
            parse(r#"{"type":"step","data":{"tool_name":"count"}}"#),
            Ok(Incoming::Step(Action::CallTool { tool_name: "count".into(), arguments: json!({}) }))
        );
        assert_eq!(parse(r#"{"type":"state"}"#), Ok(Incoming::State));
        assert_eq!(parse(r#"{"type":"close"}"#), Ok(Incoming::Close));
    }

    #[test]
    fn bad_messages_are_named() {
        assert_eq!(parse("{").map_err(|e| e.code), Err(ErrorCode::InvalidJson));
        assert_eq!(parse(r#"{"type":"mcp","data":{}}"#).map_err(|e| e.code), Err(ErrorCode::UnknownType));
        let err = parse(r#"{"type":"reset","data":{"sead":1}}"#).expect_err("typo");
        assert!(err.message.contains("`sead`"), "{}", err.message);
        let err = parse(r#"{"type":"reset","data":{"seed":-1}}"#).expect_err("negative");
        assert!(err.message.contains("`seed`"), "{}", err.message);
        let err = parse(r#"{"type":"step","data":{"type":"call_tool"}}"#).expect_err("no name");
        assert!(err.message.contains("tool_name"), "{}", err.message);
        let err = parse(r#"{"type":"step","data":{"type":"call_tool","tool_name":"x","arguments":[1]}}"#)
            .expect_err("array");
        assert!(err.message.contains("arguments"), "{}", err.message);
    }
}
