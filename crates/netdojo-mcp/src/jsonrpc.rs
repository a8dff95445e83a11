//! The JSON-RPC 2.0 checks both transports make before rmcp sees a message, and the batches of
//! the protocol versions that have them.
//!
//! rmcp cannot answer what it cannot read: a line or body that is no JSON, or no JSON-RPC
//! message, is dropped (stdio) or refused with a plain-text 415 (HTTP), and the client never
//! gets the JSON-RPC error it waits for. A request whose params do not fit the typed params of a
//! known method falls back to rmcp's catch-all custom request and is answered "method not
//! found". Both transports therefore read each message here first, and answer -32700, -32600
//! or -32602 themselves.

// rmcp marks logging and resources/subscribe deprecated for the unreleased 2026-07-28 protocol;
// every version served here has them.
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequest, ClientJsonRpcMessage, ClientRequest, CompleteRequest, GetPromptRequest,
    InitializeRequest, ListPromptsRequest, ListResourceTemplatesRequest, ListResourcesRequest,
    ListToolsRequest, PingRequest, ReadResourceRequest, RequestId, SetLevelRequest, SubscribeRequest,
    UnsubscribeRequest,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

pub const PARSE_ERROR: i32 = -32700;
pub const INVALID_REQUEST: i32 = -32600;
pub const INVALID_PARAMS: i32 = -32602;

/// A JSON-RPC error the transport answers itself; `id` is `null` when the message had none
/// that could be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} ({code})")]
pub struct JsonRpcError {
    pub code: i32,
    pub message: String,
    pub id: Value,
}

impl JsonRpcError {
    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self { code: PARSE_ERROR, message: format!("Parse error: {detail}"), id: Value::Null }
    }

    pub fn invalid_request(id: Value, detail: impl std::fmt::Display) -> Self {
        Self { code: INVALID_REQUEST, message: format!("Invalid Request: {detail}"), id }
    }

    pub fn invalid_params(id: Value, detail: impl std::fmt::Display) -> Self {
        Self { code: INVALID_PARAMS, message: format!("Invalid params: {detail}"), id }
    }

    /// The error response.
    pub fn to_message(&self) -> Value {
        json!({"jsonrpc": "2.0", "id": self.id, "error": {"code": self.code, "message": self.message}})
    }
}

/// Why a message does not reach rmcp.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Answered with this error.
    Answer(JsonRpcError),
    /// Not answered: a response or notification rmcp cannot read (JSON-RPC answers neither).
    Drop(String),
}

/// The bytes of one line or body as JSON. Invalid UTF-8 and JSON syntax errors are -32700.
pub fn parse(bytes: &[u8]) -> Result<Value, JsonRpcError> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| JsonRpcError::parse_error(format!("not UTF-8: {e}")))?;
    serde_json::from_str(text.trim()).map_err(JsonRpcError::parse_error)
}

/// The id of `v` when it is one JSON-RPC allows (a string or an integer; MCP forbids null),
/// else `Null`: an error must not echo an id it could not read.
fn readable_id(v: &Value) -> Value {
    match v.get("id") {
        Some(id @ Value::String(_)) => id.clone(),
        Some(id @ Value::Number(n)) if n.is_i64() => id.clone(),
        _ => Value::Null,
    }
}

/// True for a request without `id`: JSON-RPC never answers one, not even with an error about
/// its params.
pub fn is_notification(v: &Value) -> bool {
    v.get("method").is_some() && v.get("id").is_none()
}

/// The envelope (JSON-RPC 2.0 §4, §5): `"jsonrpc": "2.0"`, an id that is a string or an
/// integer, a string `method` (a request or notification) or one of `result` and `error` with an
/// id (a response), params an object. Then, for a request, [`check_params`].
pub fn check_request(v: &Value) -> Result<(), JsonRpcError> {
    let Some(obj) = v.as_object() else {
        return Err(JsonRpcError::invalid_request(
            Value::Null,
            format!("a message is an object, not {}", kind(v)),
        ));
    };
    let id = readable_id(v);
    match obj.get("jsonrpc") {
        Some(Value::String(s)) if s == "2.0" => {}
        Some(other) => {
            return Err(JsonRpcError::invalid_request(
                id,
                format!("\"jsonrpc\" must be \"2.0\", not {other}"),
            ));
        }
        None => return Err(JsonRpcError::invalid_request(id, "\"jsonrpc\": \"2.0\" is missing")),
    }
    if let Some(raw) = obj.get("id")
        && id.is_null()
    {
        return Err(JsonRpcError::invalid_request(
            Value::Null,
            format!("\"id\" must be a string or an integer, not {}", short(raw)),
        ));
    }
    let (result, error) = (obj.contains_key("result"), obj.contains_key("error"));
    let Some(method) = obj.get("method") else {
        return match (obj.contains_key("id"), result, error) {
            (true, true, false) | (true, false, true) => Ok(()),
            (true, true, true) => {
                Err(JsonRpcError::invalid_request(id, "a response has \"result\" or \"error\", not both"))
            }
            _ => Err(JsonRpcError::invalid_request(id, "a request needs a \"method\"")),
        };
    };
    let Some(method) = method.as_str() else {
        return Err(JsonRpcError::invalid_request(
            id,
            format!("\"method\" must be a string, not {}", short(method)),
        ));
    };
    if result || error {
        return Err(JsonRpcError::invalid_request(id, "a request has no \"result\" or \"error\""));
    }
    if is_notification(v) {
        // Nothing is answered to a notification; rmcp ignores one it cannot read.
        return Ok(());
    }
    check_params(method, obj.get("params"), &id)
}

/// The params of the MCP methods rmcp types, field by field: a wrong type is -32602 naming the
/// field, where rmcp would fall back to a custom request and answer "method not found".
fn check_params(method: &str, params: Option<&Value>, id: &Value) -> Result<(), JsonRpcError> {
    let bad = |detail: String| Err(JsonRpcError::invalid_params(id.clone(), format!("{method}: {detail}")));
    let params = match params {
        None | Some(Value::Null) => None,
        Some(Value::Object(p)) => Some(p),
        Some(other) => return bad(format!("params must be an object, not {}", kind(other))),
    };
    let empty = Map::new();
    let p = params.unwrap_or(&empty);
    let required = [
        "initialize",
        "tools/call",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/get",
        "logging/setLevel",
        "completion/complete",
    ];
    if params.is_none() && required.contains(&method) {
        return bad("params are required".into());
    }
    let string = |field: &str| match p.get(field) {
        Some(Value::String(_)) => Ok(()),
        Some(other) => bad(format!("params.{field} must be a string, not {}", short(other))),
        None => bad(format!("params.{field} is required")),
    };
    let object = |field: &str, needed: bool| match p.get(field) {
        Some(Value::Object(_)) => Ok(()),
        None | Some(Value::Null) if !needed => Ok(()),
        None => bad(format!("params.{field} is required")),
        Some(other) => bad(format!("params.{field} must be an object, not {}", short(other))),
    };
    match method {
        "initialize" => {
            string("protocolVersion")?;
            object("capabilities", true)?;
            object("clientInfo", true)?;
        }
        "tools/call" => {
            string("name")?;
            object("arguments", false)?;
        }
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => string("uri")?,
        "prompts/get" => {
            string("name")?;
            object("arguments", false)?;
        }
        "logging/setLevel" => match p.get("level") {
            Some(Value::String(l)) if LEVELS.contains(&l.as_str()) => {}
            Some(other) => {
                return bad(format!(
                    "params.level must be one of {}, not {}",
                    LEVELS.join(", "),
                    short(other)
                ));
            }
            None => return bad("params.level is required".into()),
        },
        "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => {
            if let Some(cursor) = p.get("cursor")
                && !(cursor.is_string() || cursor.is_null())
            {
                return bad(format!("params.cursor must be a string, not {}", short(cursor)));
            }
        }
        _ => {}
    }
    if let Some(meta) = p.get("_meta")
        && !(meta.is_object() || meta.is_null())
    {
        return bad(format!("params._meta must be an object, not {}", short(meta)));
    }
    Ok(())
}

/// MCP's logging levels.
const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// The typed request of each MCP method whose params rmcp checks: what [`check_params`] does
/// not catch still gets -32602, with serde's reason.
type Typed = fn(Value) -> Result<(), serde_json::Error>;

fn typed<T: DeserializeOwned>(request: Value) -> Result<(), serde_json::Error> {
    serde_json::from_value::<T>(request).map(drop)
}

#[allow(deprecated)]
const TYPED: [(&str, Typed); 13] = [
    ("initialize", typed::<InitializeRequest>),
    ("ping", typed::<PingRequest>),
    ("tools/call", typed::<CallToolRequest>),
    ("tools/list", typed::<ListToolsRequest>),
    ("resources/read", typed::<ReadResourceRequest>),
    ("resources/list", typed::<ListResourcesRequest>),
    ("resources/templates/list", typed::<ListResourceTemplatesRequest>),
    ("resources/subscribe", typed::<SubscribeRequest>),
    ("resources/unsubscribe", typed::<UnsubscribeRequest>),
    ("prompts/get", typed::<GetPromptRequest>),
    ("prompts/list", typed::<ListPromptsRequest>),
    ("logging/setLevel", typed::<SetLevelRequest>),
    ("completion/complete", typed::<CompleteRequest>),
];

/// A message as rmcp will handle it, or why it will not reach rmcp.
pub fn admit(v: Value) -> Result<ClientJsonRpcMessage, Refusal> {
    if let Err(e) = check_request(&v) {
        return Err(Refusal::Answer(e));
    }
    let id = readable_id(&v);
    let request = v.get("id").is_some() && v.get("method").is_some();
    let method = v.get("method").and_then(Value::as_str).map(str::to_string);
    let params = v.get("params").cloned();
    match serde_json::from_value::<ClientJsonRpcMessage>(v) {
        Ok(ClientJsonRpcMessage::Request(r))
            if matches!(r.request, ClientRequest::CustomRequest(_))
                && let Some(method) = method.as_deref()
                && let Some((_, check)) = TYPED.iter().find(|(m, _)| *m == method) =>
        {
            let mut typed = json!({"method": method});
            if let Some(params) = params {
                typed["params"] = params;
            }
            let detail = match check(typed) {
                Err(e) => e.to_string(),
                Ok(()) => "rmcp could not read them".to_string(),
            };
            Err(Refusal::Answer(JsonRpcError::invalid_params(id, format!("{method}: {detail}"))))
        }
        Ok(m) => Ok(m),
        Err(e) if request => Err(Refusal::Answer(JsonRpcError::invalid_request(id, e))),
        Err(e) => Err(Refusal::Drop(e.to_string())),
    }
}

/// Protocol versions whose messages may be JSON-RPC batches: 2025-03-26 requires servers to
/// accept them, 2024-11-05 inherits them from JSON-RPC 2.0; 2025-06-18 removed them.
pub fn batches_allowed(version: &str) -> bool {
    matches!(version, "2024-11-05" | "2025-03-26")
}

/// The answer to a batch that cannot be split: an empty one (JSON-RPC 2.0 §6), one before a
/// version was negotiated, one in a version without batches.
pub fn refuse_batch(items: &[Value], version: Option<&str>) -> Option<JsonRpcError> {
    if items.is_empty() {
        return Some(JsonRpcError::invalid_request(Value::Null, "an empty batch"));
    }
    match version {
        None => Some(JsonRpcError::invalid_request(
            Value::Null,
            "a batch before initialize (initialize is never part of a batch)",
        )),
        Some(v) if !batches_allowed(v) => Some(JsonRpcError::invalid_request(
            Value::Null,
            format!(
                "batches are not supported in protocol version {v} (JSON-RPC batching was removed in 2025-06-18)"
            ),
        )),
        Some(_) => None,
    }
}

/// One message of a batch: initialize is never part of one (2025-03-26, lifecycle).
pub fn admit_in_batch(v: Value) -> Result<ClientJsonRpcMessage, Refusal> {
    if v.get("method").and_then(Value::as_str) == Some("initialize") {
        return Err(Refusal::Answer(JsonRpcError::invalid_request(
            readable_id(&v),
            "initialize must not be part of a JSON-RPC batch",
        )));
    }
    admit(v)
}

/// The id of a request rmcp will answer, as JSON (to match its answer).
pub fn request_id(m: &ClientJsonRpcMessage) -> Option<Value> {
    match m {
        ClientJsonRpcMessage::Request(r) => Some(id_json(&r.id)),
        _ => None,
    }
}

pub fn id_json(id: &RequestId) -> Value {
    id.clone().into_json_value()
}

/// The request a `notifications/cancelled` cancels: rmcp then sends no answer to it.
pub fn cancelled_id(m: &ClientJsonRpcMessage) -> Option<Value> {
    match m {
        ClientJsonRpcMessage::Notification(n) => match &n.notification {
            rmcp::model::ClientNotification::CancelledNotification(c) => {
                c.params.request_id.as_ref().map(id_json)
            }
            _ => None,
        },
        _ => None,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A value in an error message, cut short: the client sent it, it may be large.
fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(60) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(v: Value) -> (i32, Value, String) {
        match admit(v) {
            Err(Refusal::Answer(e)) => (e.code, e.id, e.message),
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    #[test]
    fn envelopes_that_are_not_json_rpc_are_invalid_requests() {
        assert_eq!(parse(b"{not json").map_err(|e| e.code), Err(PARSE_ERROR));
        assert_eq!(parse(b"{\"a\": \"\xff\"}").map_err(|e| e.code), Err(PARSE_ERROR));
        let cases = [
            (json!({"jsonrpc": "1.0", "id": 3, "method": "ping"}), json!(3)),
            (json!({"id": "x", "method": "ping"}), json!("x")),
            (json!({"jsonrpc": "2.0", "id": 4}), json!(4)),
            (json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}), Value::Null),
            (json!({"jsonrpc": "2.0", "id": null, "method": "ping"}), Value::Null),
            (json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}), Value::Null),
            (json!({"jsonrpc": "2.0", "id": 5, "method": 7}), json!(5)),
            (json!({"jsonrpc": "2.0", "method": 7}), Value::Null),
            (json!(5), Value::Null),
        ];
        for (msg, id) in cases {
            let (c, got, m) = code(msg.clone());
            assert_eq!((c, got), (INVALID_REQUEST, id), "{msg}: {m}");
        }
    }

    #[test]
    fn params_of_the_wrong_type_name_their_field() {
        let req = |method: &str, params: Value| json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
        let cases = [
            (req("tools/call", json!({"name": 5})), "params.name"),
            (req("tools/call", json!({"name": "x", "arguments": "x"})), "params.arguments"),
            (req("resources/read", json!({"uri": 5})), "params.uri"),
            (req("resources/subscribe", json!({"uri": 5})), "params.uri"),
            (req("resources/unsubscribe", json!({})), "params.uri"),
            (req("prompts/get", json!({"name": null})), "params.name"),
            (req("logging/setLevel", json!({"level": "loud"})), "params.level"),
            (req("initialize", json!("x")), "params must be an object"),
            (req("tools/list", json!({"cursor": 3})), "params.cursor"),
        ];
        for (msg, field) in cases {
            let (c, id, m) = code(msg.clone());
            assert_eq!((c, id), (INVALID_PARAMS, json!(9)), "{msg}: {m}");
            assert!(m.contains(field), "{msg}: {m}");
        }
        // What the field checks let through, rmcp's typed params still catch.
        let (c, _, m) = code(req(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}}),
        ));
        assert_eq!(c, INVALID_PARAMS, "{m}");
    }

    /// Why the field checks exist: rmcp reads a known method with params it cannot type as its
    /// catch-all custom request (answered -32601), and has no batch.
    #[test]
    fn rmcp_alone_reads_bad_params_as_a_custom_request_and_no_batch() {
        let bad = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 5}});
        let m = serde_json::from_value::<ClientJsonRpcMessage>(bad).expect("rmcp reads it");
        assert!(
            matches!(m, ClientJsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::CustomRequest(_)))
        );
        let batch = json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]);
        assert!(serde_json::from_value::<ClientJsonRpcMessage>(batch).is_err());
    }

    #[test]
    fn well_formed_messages_pass_and_unknown_methods_stay_rmcps() {
        let ok = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "x", "arguments": null, "_meta": {"progressToken": 1}}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": null}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "no/such/method", "params": {"x": 1}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
        ];
        for msg in ok {
            assert!(admit(msg.clone()).is_ok(), "{msg}: {:?}", admit(msg.clone()));
        }
        // A notification is never answered, not even when rmcp cannot read it.
        let odd = json!({"jsonrpc": "2.0", "method": "notifications/whatever", "params": 5});
        assert!(matches!(admit(odd), Err(Refusal::Drop(_))));
    }

    #[test]
    fn batches_follow_the_negotiated_version() {
        let one = [json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})];
        assert_eq!(refuse_batch(&[], Some("2025-03-26")).map(|e| e.code), Some(INVALID_REQUEST));
        assert!(refuse_batch(&one, Some("2025-03-26")).is_none());
        assert!(refuse_batch(&one, Some("2024-11-05")).is_none());
        for v in ["2025-06-18", "2025-11-25"] {
            let e = refuse_batch(&one, Some(v)).expect("refused");
            assert!(e.message.contains(v), "{}", e.message);
        }
        assert!(refuse_batch(&one, None).is_some());
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
        assert!(matches!(admit_in_batch(init), Err(Refusal::Answer(e)) if e.code == INVALID_REQUEST));
    }
}
