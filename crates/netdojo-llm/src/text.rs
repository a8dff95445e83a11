//! The text protocol: the model writes its calls as JSON in its answer (for models or servers
//! without tool calling, as NetPress's prompts ask).

use netdojo_core::ToolCall;
use serde_json::Value;

/// What the expected answer looks like, told to the model when it strays.
const FORMAT: &str = r#"reply with one JSON object: {"reasoning": "...", "calls": [{"tool": "<tool name>", "arguments": {...}}]}"#;

/// Reads a reply of the text protocol: its reasoning and its calls. A reply that cannot be read
/// becomes one malformed call (told to the model, counted as an invalid step), so the episode
/// goes on and the model can correct itself.
pub fn parse_reply(content: &str) -> (String, Vec<ToolCall>) {
    let Some(value) = json_object(content) else {
        let why = format!("your reply holds no JSON object; {FORMAT}");
        return (
            content.trim().to_string(),
            vec![ToolCall::malformed("", Value::String(content.into()), why)],
        );
    };
    let reasoning = ["reasoning", "thought"]
        .iter()
        .find_map(|k| value.get(*k).and_then(Value::as_str))
        .unwrap_or_default()
        .to_string();
    let items: Vec<Value> = match (value.get("calls"), value.get("tool").or(value.get("name"))) {
        (Some(Value::Array(calls)), _) => calls.clone(),
        (Some(other), _) => {
            let why = format!("`calls` must be an array, got {other}; {FORMAT}");
            return (reasoning, vec![ToolCall::malformed("", other.clone(), why)]);
        }
        // One call given at the top level: {"tool": ..., "arguments": ...}.
        (None, Some(_)) => vec![value.clone()],
        (None, None) => vec![],
    };
    let calls = items.into_iter().map(call).collect();
    (reasoning, calls)
}

fn call(item: Value) -> ToolCall {
    let name = item.get("tool").or(item.get("name")).and_then(Value::as_str).map(str::to_string);
    let arguments =
        item.get("arguments").or(item.get("args")).cloned().unwrap_or(Value::Object(Default::default()));
    match name {
        Some(name) => match arguments {
            // Some models write the arguments as a JSON string, as OpenAI's wire format does.
            Value::String(s) => match serde_json::from_str::<Value>(&s) {
                Ok(v @ Value::Object(_)) => ToolCall::new(name, v),
                _ => ToolCall::malformed(name, Value::String(s), "`arguments` must be a JSON object"),
            },
            arguments => ToolCall::new(name, arguments),
        },
        None => ToolCall::malformed("", item, format!("a call without a `tool` name; {FORMAT}")),
    }
}

/// The JSON object in a reply: the whole text, or inside a ```json fence, or from the first `{`
/// to the last `}`.
fn json_object(content: &str) -> Option<Value> {
    let trimmed = content.trim();
    let candidates = [
        Some(trimmed),
        fenced(trimmed),
        trimmed.find('{').zip(trimmed.rfind('}')).filter(|(a, b)| a < b).map(|(a, b)| &trimmed[a..=b]),
    ];
    candidates
        .into_iter()
        .flatten()
        .find_map(|c| serde_json::from_str::<Value>(c).ok().filter(Value::is_object))
}

fn fenced(text: &str) -> Option<&str> {
    let start = text.find("```")?;
    let body = &text[start + 3..];
    let body = body.strip_prefix("json").unwrap_or(body);
    let end = body.find("```")?;
    Some(body[..end].trim())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_documented_form_plain_fenced_or_in_prose() {
        let plain = r#"{"reasoning": "look first", "calls": [{"tool": "exec", "arguments": {"machine": "r0", "command": "ip route"}}]}"#;
        for text in [plain.to_string(), format!("```json\n{plain}\n```"), format!("Sure! {plain} Done.")] {
            let (reasoning, calls) = parse_reply(&text);
            assert_eq!(reasoning, "look first");
            assert_eq!(calls, vec![ToolCall::new("exec", json!({"machine": "r0", "command": "ip route"}))]);
        }
    }

    #[test]
    fn a_single_call_at_the_top_level_and_string_arguments() {
        let (_, calls) = parse_reply(r#"{"tool": "finish", "arguments": "{\"answer\": 3}"}"#);
        assert_eq!(calls, vec![ToolCall::new("finish", json!({"answer": 3}))]);
    }

    #[test]
    fn unreadable_replies_become_malformed_calls() {
        let (reasoning, calls) = parse_reply("I think the router is broken.");
        assert_eq!(reasoning, "I think the router is broken.");
        assert_eq!(calls.len(), 1);
        assert!(calls[0].malformed.as_deref().is_some_and(|m| m.contains("no JSON object")), "{calls:?}");

        let (_, calls) = parse_reply(r#"{"calls": [{"arguments": {}}, {"tool": "x", "arguments": "[1"}]}"#);
        assert!(calls[0].malformed.as_deref().is_some_and(|m| m.contains("without a `tool` name")));
        assert_eq!(calls[1].name, "x");
        assert!(calls[1].malformed.is_some());

        let (_, calls) = parse_reply(r#"{"reasoning": "done", "calls": []}"#);
        assert!(calls.is_empty(), "an empty batch means the model stopped");
    }
}

/// The code of a reply in NetPress's code protocol (seed 003 §B.3): the first fenced block
/// (```python or ```) that mentions `process_graph`, whole, so helpers and imports above the
/// function stay; else, as NetPress's `clean_up_llm_output_func` does, the text from
/// `def process_graph` to the next fence or the end (a `def ...process_graph...` variant is
/// renamed). Empty when there is none: the runner then says that no process_graph was defined,
/// as NetPress's evaluator does.
pub fn extract_code(content: &str) -> String {
    let mut rest = content;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
        let body = &after[body_start..];
        let Some(close) = body.find("```") else { break };
        let block = &body[..close];
        if block.contains("process_graph") {
            return rename_process_graph(block).trim().to_string();
        }
        rest = &body[close + 3..];
    }
    let renamed = rename_process_graph(content);
    let Some(start) = renamed.find("def process_graph") else { return String::new() };
    let code = &renamed[start..];
    let end = code.find("```").unwrap_or(code.len());
    code[..end].trim().to_string()
}

/// `def my_process_graph_v2(` → `def process_graph(`.
fn rename_process_graph(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("def ") {
        out.push_str(&rest[..at + 4]);
        let after = &rest[at + 4..];
        let name_len = after.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(after.len());
        let name = &after[..name_len];
        out.push_str(if name.contains("process_graph") { "process_graph" } else { name });
        rest = &after[name_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod code_tests {
    use super::extract_code;

    #[test]
    fn code_comes_from_the_block_that_defines_process_graph() {
        let reply = "Answer:\n```python\nimport math\ndef helper():\n    return 1\n\ndef process_graph(graph_data):\n    return helper()\n```\nDone.";
        assert_eq!(
            extract_code(reply),
            "import math\ndef helper():\n    return 1\n\ndef process_graph(graph_data):\n    return helper()"
        );
        let two = "```\nprint(1)\n```\nthen\n```py\ndef solve_process_graph(g):\n    pass\n```";
        assert_eq!(extract_code(two), "def process_graph(g):\n    pass");
        assert_eq!(extract_code("def process_graph(g): return 1"), "def process_graph(g): return 1");
        assert_eq!(extract_code("Sorry, I cannot help."), "");
        assert_eq!(
            extract_code("```python\ndef process_graph(g):\n    pass"),
            "def process_graph(g):\n    pass"
        );
    }
}
