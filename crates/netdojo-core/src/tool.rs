//! Tools are data: a name, a description and a JSON Schema of the arguments. The same list
//! serves an OpenAI tool call, an Ollama tool call, an MCP `tools/list` and a text prompt.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The tool every episode offers besides the environment's own: the agent calls it to say it
/// is done, with its answer when the task asks for one.
pub const FINISH_TOOL: &str = "finish";

/// One tool an environment offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema (an object schema) of the arguments.
    pub parameters: Value,
}

impl ToolSpec {
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self { name: name.into(), description: description.into(), parameters }
    }

    /// The JSON Schema of a tool's arguments: an object with these `properties`, the
    /// `required` ones, and nothing else (an agent's misspelt argument is an error, not
    /// silently ignored).
    pub fn object_schema(properties: Value, required: &[&str]) -> Value {
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
    }

    /// The tool with `property` held to `values` (a JSON Schema `enum`): once an episode is
    /// reset, the machines, devices or pods it names, so that a model reads the valid names in
    /// the schema and a call naming another fails validation as the agent's own error. Nothing
    /// changes when the tool has no such property or `values` is empty.
    pub fn with_choices<S: AsRef<str>>(mut self, property: &str, values: &[S]) -> Self {
        if values.is_empty() {
            return self;
        }
        if let Some(schema) = self.parameters.get_mut("properties").and_then(|p| p.get_mut(property))
            && let Some(schema) = schema.as_object_mut()
        {
            let values: Vec<Value> = values.iter().map(|v| json!(v.as_ref())).collect();
            schema.insert("enum".into(), Value::Array(values));
        }
        self
    }

    /// The `finish` tool. `answer` is the schema of the answer the task expects, if any.
    pub fn finish(answer: Option<Value>) -> Self {
        let (properties, required) = match answer {
            Some(schema) => (json!({ "answer": schema }), json!(["answer"])),
            None => (json!({}), json!([])),
        };
        Self::new(
            FINISH_TOOL,
            "Call this once you are done. Give your final answer in `answer` when the task asks \
             for one. No further tool calls are accepted after it.",
            json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            }),
        )
    }
}

/// A call of a tool by an agent. Everything in it is untrusted input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The agent's id for the call (the model's `tool_call_id`, or one the agent made up).
    #[serde(default)]
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
    /// Set by an agent that could not read this call from a model's reply (arguments that are
    /// not JSON, an answer that follows no protocol): the runner answers it with this message
    /// and counts an invalid step, without validating or executing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub malformed: Option<String>,
}

impl ToolCall {
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        Self { id: String::new(), name: name.into(), arguments, malformed: None }
    }

    /// A call the agent could not read from the model's reply; `why` is told to the model.
    pub fn malformed(name: impl Into<String>, arguments: Value, why: impl Into<String>) -> Self {
        Self { malformed: Some(why.into()), ..Self::new(name, arguments) }
    }

    pub fn finish(answer: Option<Value>) -> Self {
        let arguments = match answer {
            Some(a) => json!({ "answer": a }),
            None => json!({}),
        };
        Self::new(FINISH_TOOL, arguments)
    }
}

/// What a tool call produced, as the agent sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub call_id: String,
    pub tool: String,
    /// False when the call was refused or failed (bad arguments, unknown node, refused command).
    pub ok: bool,
    /// The text shown to the agent.
    pub content: String,
    /// Structured result, when the tool has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl Observation {
    pub fn ok(call: &ToolCall, content: impl Into<String>, data: Option<Value>) -> Self {
        Self { call_id: call.id.clone(), tool: call.name.clone(), ok: true, content: content.into(), data }
    }

    pub fn error(call: &ToolCall, message: impl Into<String>) -> Self {
        Self {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            ok: false,
            content: format!("error: {}", message.into()),
            data: None,
        }
    }
}
