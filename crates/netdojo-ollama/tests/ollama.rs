//! The Ollama agent against a local server speaking Ollama's documented `/api/chat` shapes
//! (no Ollama can run here; docs/agents.md says how to run it against a real one): a whole
//! reply and a streamed one, with tool calls, options, tool results, errors and a stream that
//! breaks off.

use std::sync::Arc;
use std::time::Duration;

use netdojo_core::{Agent, AgentError, AgentFactory, EpisodeStart, Observation, Task, TokenUsage, ToolSpec};
use netdojo_llm::testing::{StubReply, StubServer};
use netdojo_llm::{LlmAgentFactory, RetryPolicy, Sampling, Settings, Strategy, ToolMode};
use netdojo_ollama::{OllamaChat, OllamaConfig};
use serde_json::{Value, json};

fn task() -> Task {
    netdojo_testkit::constructive_task("t1", "routing", "h1 cannot reach h3")
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "exec",
            "Run one command on one machine.",
            json!({"type": "object", "properties": {"machine": {"type": "string"}, "command": {"type": "string"}},
                   "required": ["machine", "command"]}),
        ),
        ToolSpec::finish(None),
    ]
}

async fn agent(url: &str, stream: bool, strategy: Strategy, mode: ToolMode) -> Box<dyn Agent> {
    let config = OllamaConfig {
        stream,
        num_ctx: Some(8192),
        sampling: Sampling { temperature: Some(0.0), seed: Some(7), max_tokens: Some(256) },
        request_timeout_s: 10,
        ..OllamaConfig::new(url, "qwen2.5:7b")
    };
    let settings = Settings {
        strategy,
        tools: mode,
        retry: RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(20),
        },
        ..Settings::default()
    };
    let factory = LlmAgentFactory::new(Arc::new(OllamaChat::new(config).expect("client")), settings);
    let mut agent = factory.create(&task()).expect("agent");
    let (task, tools) = (task(), tools());
    agent
        .start(&EpisodeStart { task: &task, brief: "h1 cannot reach h3.", tools: &tools, max_steps: 5 })
        .await
        .expect("start");
    agent
}

/// A whole (`stream: false`) reply as Ollama sends it.
fn whole(message: Value) -> Value {
    json!({"model": "qwen2.5:7b", "created_at": "2026-11-23T12:00:00Z", "message": message,
           "done_reason": "stop", "done": true, "total_duration": 1_000_000, "load_duration": 1000,
           "prompt_eval_count": 120, "prompt_eval_duration": 1000, "eval_count": 18, "eval_duration": 1000})
}

fn exec_call(machine: &str, command: &str) -> Value {
    json!({"function": {"name": "exec", "arguments": {"machine": machine, "command": command}}})
}

#[tokio::test]
async fn a_whole_reply_with_a_tool_call_then_the_tool_result_goes_back_with_its_name() {
    let first = whole(json!({"role": "assistant", "content": "Look at the routes first.",
                             "tool_calls": [exec_call("r0", "ip route")]}));
    let second = whole(json!({"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "finish", "arguments": {}}}]}));
    let stub = StubServer::start(vec![StubReply::json(200, &first), StubReply::json(200, &second)])
        .await
        .expect("stub");
    let mut a = agent(&stub.url, false, Strategy::React, ToolMode::Native).await;

    let turn = a.step(&[]).await.expect("turn 1");
    assert_eq!(turn.reasoning, "Look at the routes first.");
    assert_eq!(turn.calls.len(), 1);
    assert_eq!(turn.calls[0].name, "exec");
    assert_eq!(turn.calls[0].arguments, json!({"machine": "r0", "command": "ip route"}));
    assert_eq!(turn.calls[0].id, "call_0_0", "Ollama gives no ids; the agent makes them");
    assert_eq!(turn.usage, Some(TokenUsage { prompt_tokens: 120, completion_tokens: 18, cached_tokens: 0 }));

    let requests = stub.requests();
    assert_eq!((requests[0].method.as_str(), requests[0].path.as_str()), ("POST", "/api/chat"));
    let body = requests[0].json();
    assert_eq!(body["model"], "qwen2.5:7b");
    assert_eq!(body["stream"], false);
    assert_eq!(body["options"], json!({"num_ctx": 8192, "temperature": 0.0, "seed": 7, "num_predict": 256}));
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "exec");
    assert_eq!(body["messages"][0]["role"], "system");

    let observation = Observation::ok(&turn.calls[0], "10.0.1.0/24 dev r0-eth1", None);
    let turn = a.step(&[observation]).await.expect("turn 2");
    assert_eq!(turn.calls[0].name, "finish");
    let body = stub.requests()[1].json();
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[2]["tool_calls"][0], exec_call("r0", "ip route"));
    assert_eq!(
        messages[3],
        json!({"role": "tool", "content": "10.0.1.0/24 dev r0-eth1", "tool_name": "exec"})
    );
}

#[tokio::test]
async fn a_streamed_reply_is_put_together_from_its_lines() {
    let chunk = |content: &str| {
        json!({"model": "qwen2.5:7b", "created_at": "2026-11-23T12:00:00Z",
               "message": {"role": "assistant", "content": content}, "done": false})
    };
    let lines = vec![
        chunk("The route "),
        chunk("to h3 is missing."),
        json!({"model": "qwen2.5:7b", "created_at": "2026-11-23T12:00:01Z",
               "message": {"role": "assistant", "content": "", "tool_calls": [exec_call("r0", "ip route add 10.0.3.0/24 dev r0-eth3")]},
               "done": false}),
        json!({"model": "qwen2.5:7b", "created_at": "2026-11-23T12:00:01Z",
               "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": true,
               "prompt_eval_count": 300, "eval_count": 40}),
    ];
    let stub = StubServer::start(vec![StubReply::ndjson(&lines)]).await.expect("stub");
    let mut a = agent(&stub.url, true, Strategy::Cot, ToolMode::Native).await;
    let turn = a.step(&[]).await.expect("turn");
    assert_eq!(turn.reasoning, "The route to h3 is missing.");
    assert_eq!(turn.calls[0].arguments["command"], "ip route add 10.0.3.0/24 dev r0-eth3");
    assert_eq!(turn.usage, Some(TokenUsage { prompt_tokens: 300, completion_tokens: 40, cached_tokens: 0 }));
    assert_eq!(stub.requests()[0].json()["stream"], true);
    let response = &turn.transcript.last().expect("response")["response"];
    assert_eq!(response.as_array().map(Vec::len), Some(4), "every streamed line is kept: {response}");
}

#[tokio::test]
async fn the_text_protocol_sends_no_tools_and_reads_json_from_the_content() {
    let reply = whole(json!({"role": "assistant",
        "content": "{\"reasoning\": \"check\", \"calls\": [{\"tool\": \"exec\", \"arguments\": {\"machine\": \"h1\", \"command\": \"ip addr\"}}]}"}));
    let stub = StubServer::start(vec![StubReply::json(200, &reply)]).await.expect("stub");
    let mut a = agent(&stub.url, false, Strategy::SingleTurn, ToolMode::Text).await;
    let turn = a.step(&[]).await.expect("turn");
    assert_eq!(turn.reasoning, "check");
    assert_eq!(turn.calls[0].arguments, json!({"machine": "h1", "command": "ip addr"}));
    let body = stub.requests()[0].json();
    assert!(body.get("tools").is_none());
    assert!(
        body["messages"][0]["content"].as_str().expect("system").contains("ending with the `finish` call")
    );
    // Single-turn: the one reply is all; the next step ends the episode without a request.
    let next = a.step(&[]).await.expect("turn 2");
    assert!(next.calls.is_empty());
    assert_eq!(stub.requests().len(), 1);
}

#[tokio::test]
async fn an_unknown_model_is_a_clear_error() {
    let stub = StubServer::start(vec![StubReply::json(
        404,
        &json!({"error": "model \"qwen2.5:7b\" not found, try pulling it first"}),
    )])
    .await
    .expect("stub");
    let mut a = agent(&stub.url, true, Strategy::React, ToolMode::Native).await;
    let e = a.step(&[]).await.expect_err("404").to_string();
    assert!(e.contains("HTTP 404") && e.contains("not found, try pulling it first"), "{e}");
    assert_eq!(stub.requests().len(), 1, "a 404 is not retried");
}

#[tokio::test]
async fn a_stream_that_breaks_off_is_retried_then_reported_unreachable() {
    let cut = vec![json!({"model": "m", "message": {"role": "assistant", "content": "The"}, "done": false})];
    let failed = vec![json!({"error": "llama runner process has terminated"})];
    let stub =
        StubServer::start(vec![StubReply::ndjson(&cut), StubReply::ndjson(&failed), StubReply::ndjson(&cut)])
            .await
            .expect("stub");
    let mut a = agent(&stub.url, true, Strategy::React, ToolMode::Native).await;
    let e = a.step(&[]).await.expect_err("no complete reply");
    assert!(matches!(e, AgentError::Unreachable { .. }), "{e:?}");
    assert!(
        e.to_string().contains("without `done: true`") && e.to_string().contains("gave up after 3 attempts"),
        "{e}"
    );
    assert_eq!(stub.requests().len(), 3);
}

#[tokio::test]
async fn nothing_listening_is_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    let mut a = agent(&url, true, Strategy::React, ToolMode::Native).await;
    let e = a.step(&[]).await.expect_err("nobody there").to_string();
    assert!(e.contains("/api/chat: cannot connect"), "{e}");
}
