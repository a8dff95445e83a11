//! The OpenAI agent against a real OpenAI-compatible server: llama.cpp's (llama-cpp-python with
//! SmolLM2-135M, started by `.ci/llm-server.sh`, found through `NETDOJO_LLM_BASE_URL`). These
//! test the protocol and the harness, not the tiny model's answers. What a real server will not
//! do on demand (answer garbage, fail with 503) is played by `netdojo_llm::testing`'s stub.

use std::sync::Arc;
use std::time::Duration;

use netdojo_core::{Agent, AgentError, AgentFactory, EpisodeStart, Observation, Task, ToolSpec};
use netdojo_llm::testing::{StubReply, StubServer};
use netdojo_llm::{LlmAgentFactory, RetryPolicy, Sampling, Secret, Settings, Strategy, ToolMode};
use netdojo_openai::{OpenAiChat, OpenAiConfig, ToolChoice};
use serde_json::{Value, json};

const MODEL: &str = "smollm2-135m";

/// The real server's base URL; `None` (with the reason printed) on a developer machine
/// without one. CI starts one, so there its absence fails the test.
fn server(test: &str) -> Option<String> {
    netdojo_testkit::env_or_skip(
        "NETDOJO_LLM_BASE_URL",
        test,
        "start a server with `.ci/llm-server.sh install && .ci/llm-server.sh start`; CI does",
    )
}

fn config(base_url: &str) -> OpenAiConfig {
    OpenAiConfig {
        sampling: Sampling { temperature: Some(0.0), seed: Some(1), max_tokens: Some(48) },
        request_timeout_s: 120,
        ..OpenAiConfig::new(base_url, MODEL)
    }
}

fn fast_retries(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(50),
    }
}

fn agent(config: OpenAiConfig, key: Option<Secret>, strategy: Strategy, tools: ToolMode) -> Box<dyn Agent> {
    let chat = OpenAiChat::with_key(config, key).expect("client");
    let settings = Settings { strategy, tools, retry: fast_retries(2), ..Settings::default() };
    LlmAgentFactory::new(Arc::new(chat), settings).create(&task()).expect("agent")
}

fn task() -> Task {
    netdojo_testkit::constructive_task("t1", "routing", "h1 cannot reach h3")
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "exec",
            "Run one command on one machine.",
            json!({"type": "object", "properties": {"machine": {"type": "string"}, "command": {"type": "string"}},
                   "required": ["machine", "command"], "additionalProperties": false}),
        ),
        ToolSpec::finish(None),
    ]
}

async fn start(agent: &mut Box<dyn Agent>, brief: &str) {
    let task = task();
    let tools = tools();
    let episode = EpisodeStart { task: &task, brief, tools: &tools, max_steps: 5 };
    agent.start(&episode).await.expect("start");
}

const BRIEF: &str = "h1 cannot reach h3. Look at the routes of r0 with `ip route` first.";

#[tokio::test]
async fn a_text_protocol_turn_records_the_exchange_and_the_token_usage() {
    let Some(url) = server("text turn") else { return };
    let mut a = agent(config(&url), None, Strategy::Cot, ToolMode::Text);
    start(&mut a, BRIEF).await;
    let turn = a.step(&[]).await.expect("a turn");
    let request = &turn.transcript[0]["request"];
    assert_eq!(request["model"], MODEL);
    assert!(request.get("tools").is_none(), "text mode sends no tools: {request}");
    let messages = request["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2);
    assert!(messages[0]["content"].as_str().expect("system").contains("- exec: Run one command"));
    assert_eq!(messages[1]["content"], BRIEF);
    let response = &turn.transcript.last().expect("response")["response"];
    let content = response.pointer("/choices/0/message/content").and_then(Value::as_str).expect("content");
    let usage = turn.usage.expect("llama.cpp reports usage");
    assert!(usage.prompt_tokens > 100 && usage.completion_tokens > 0, "{usage:?}");
    // Whatever the model wrote is either read as calls or answered as one malformed call.
    assert!(!turn.calls.is_empty() || content.contains("calls"), "{content:?} gave {:?}", turn.calls);
}

#[tokio::test]
async fn a_forced_tool_call_comes_back_as_a_call_of_that_tool() {
    let Some(url) = server("forced tool call") else { return };
    let cfg = OpenAiConfig { tool_choice: ToolChoice::Function("exec".into()), ..config(&url) };
    let mut a = agent(cfg, None, Strategy::React, ToolMode::Native);
    start(&mut a, BRIEF).await;
    let turn = a.step(&[]).await.expect("a turn");
    assert_eq!(
        turn.transcript[0]["request"]["tool_choice"],
        json!({"type": "function", "function": {"name": "exec"}})
    );
    assert_eq!(turn.transcript[0]["request"]["tools"][0]["function"]["name"], "exec");
    assert_eq!(turn.calls.len(), 1, "{:?}", turn.calls);
    let call = &turn.calls[0];
    assert_eq!(call.name, "exec");
    assert!(call.id.starts_with("call_"), "the server's id is kept: {}", call.id);
    // With 48 tokens the model may be cut mid-arguments: then the call is malformed, not lost.
    match &call.malformed {
        None => assert!(call.arguments.get("machine").is_some(), "{call:?}"),
        Some(why) => assert!(why.contains("not valid JSON"), "{why}"),
    }
}

#[tokio::test]
async fn tool_results_go_back_as_tool_messages_and_the_server_takes_them() {
    let Some(url) = server("multi-turn") else { return };
    let cfg = OpenAiConfig { tool_choice: ToolChoice::Function("exec".into()), ..config(&url) };
    let mut a = agent(cfg, None, Strategy::React, ToolMode::Native);
    start(&mut a, BRIEF).await;
    let first = a.step(&[]).await.expect("turn 1");
    let call = first.calls[0].clone();
    let observation =
        Observation::ok(&call, "10.0.1.0/24 dev r0-eth1 proto kernel scope link src 10.0.1.1", None);
    let second = a.step(&[observation]).await.expect("turn 2: the server accepted the tool message");
    let entry = &second.transcript[0];
    assert_eq!(entry["messages_from"], 2, "only new messages are recorded again");
    let sent = entry["request"]["messages"].as_array().expect("messages");
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0]["role"], "assistant");
    assert_eq!(sent[0]["content"], "", "llama.cpp refuses a null content next to tool calls");
    assert_eq!(sent[0]["tool_calls"][0]["id"], call.id.as_str());
    assert_eq!(
        sent[1],
        json!({"role": "tool", "tool_call_id": call.id, "content": "10.0.1.0/24 dev r0-eth1 proto kernel scope link src 10.0.1.1"})
    );
    let usage = second.usage.expect("usage");
    assert!(usage.prompt_tokens > first.usage.expect("usage").prompt_tokens, "the history grew");
}

#[tokio::test]
async fn a_model_the_server_does_not_serve_is_refused_before_a_run() {
    let Some(url) = server("wrong model") else { return };
    let good = OpenAiChat::with_key(config(&url), None).expect("client");
    assert_eq!(good.check_model().await.expect("served"), vec![MODEL.to_string()]);
    let wrong =
        OpenAiChat::with_key(OpenAiConfig { model: "gpt-99".into(), ..config(&url) }, None).expect("client");
    let e = wrong.check_model().await.expect_err("gpt-99 is not served").to_string();
    assert!(e.contains("--model gpt-99") && e.contains("it serves: smollm2-135m"), "{e}");
}

#[tokio::test]
async fn a_conversation_too_long_for_the_context_ends_the_episode_without_an_error() {
    let Some(url) = server("context window") else { return };
    let mut a = agent(config(&url), None, Strategy::React, ToolMode::Native);
    let brief = "ip route show table all; ".repeat(4000);
    start(&mut a, &brief).await;
    let turn = a.step(&[]).await.expect("a full context is not an outage");
    assert!(turn.calls.is_empty());
    assert!(turn.reasoning.contains("context window"), "{}", turn.reasoning);
}

/// A TCP proxy in front of the real server that can be stopped, as the server itself would be.
struct Proxy {
    url: String,
    task: tokio::task::JoinHandle<()>,
    connections: Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(upstream_url: &str) -> Self {
        let upstream =
            upstream_url.trim_start_matches("http://").split('/').next().expect("host:port").to_string();
        let path = upstream_url.trim_start_matches("http://").split_once('/').map(|x| x.1).unwrap_or("");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/{path}", listener.local_addr().expect("addr"));
        let connections = Arc::new(std::sync::Mutex::new(Vec::new()));
        let held = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let c = tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                held.lock().expect("lock").push(c);
            }
        });
        Self { url, task, connections }
    }

    fn stop(&self) {
        self.task.abort();
        for c in self.connections.lock().expect("lock").drain(..) {
            c.abort();
        }
    }
}

#[tokio::test]
async fn a_server_stopped_mid_episode_is_an_unreachable_model_after_the_retries() {
    let Some(url) = server("server stopped") else { return };
    let proxy = Proxy::start(&url).await;
    let cfg = OpenAiConfig { tool_choice: ToolChoice::Function("exec".into()), ..config(&proxy.url) };
    let mut a = agent(cfg, None, Strategy::React, ToolMode::Native);
    start(&mut a, BRIEF).await;
    let first = a.step(&[]).await.expect("turn 1 through the proxy");
    proxy.stop();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let call = first.calls[0].clone();
    let e = a.step(&[Observation::ok(&call, "ok", None)]).await.expect_err("the server is gone");
    assert!(matches!(e, AgentError::Unreachable { .. }), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("cannot connect") && e.contains("gave up after 3 attempts"), "{e}");
}

fn completion(content: &str) -> Value {
    json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
           "usage": {"prompt_tokens": 7, "completion_tokens": 2}})
}

/// A reply outside the protocol (here a proxy's error page) is the API failing, not the agent:
/// the episode errs as a model API failure (infrastructure, retried by `--resume`).
#[tokio::test]
async fn a_reply_that_is_not_json_is_a_model_api_failure_and_is_not_retried() {
    let stub =
        StubServer::start(vec![StubReply::text(200, "<html>502 from a proxy</html>")]).await.expect("stub");
    let mut a = agent(config(&format!("{}/v1", stub.url)), None, Strategy::React, ToolMode::Native);
    start(&mut a, BRIEF).await;
    let e = a.step(&[]).await.expect_err("garbage");
    assert!(matches!(e, AgentError::Unreachable { .. }), "{e:?}");
    assert!(e.to_string().contains("the reply is not JSON") && e.to_string().contains("<html>"), "{e}");
    assert_eq!(stub.requests().len(), 1);
}

#[tokio::test]
async fn overload_is_retried_and_the_key_is_sent_but_never_recorded() {
    let overloaded = StubReply::Full {
        status: 503,
        headers: vec![("retry-after".into(), "0".into()), ("content-type".into(), "application/json".into())],
        body: json!({"error": {"message": "overloaded; key sk-netdojo-secret-42 is fine"}}).to_string(),
    };
    let stub = StubServer::start(vec![overloaded, StubReply::json(200, &completion("{\"calls\": []}"))])
        .await
        .expect("stub");
    let cfg =
        OpenAiConfig { api_key_env: Some("NETDOJO_TEST_KEY".into()), ..config(&format!("{}/v1", stub.url)) };
    let mut a = agent(cfg, Some(Secret::new("sk-netdojo-secret-42")), Strategy::Cot, ToolMode::Text);
    start(&mut a, BRIEF).await;
    let turn = a.step(&[]).await.expect("the second attempt succeeds");
    let requests = stub.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].path, "/v1/chat/completions");
    assert!(requests[1].headers.contains(&("authorization".into(), "Bearer sk-netdojo-secret-42".into())));
    let transcript = serde_json::to_string(&turn.transcript).expect("json");
    assert!(transcript.contains("HTTP 503") && transcript.contains("[redacted]"), "{transcript}");
    assert!(!transcript.contains("sk-netdojo-secret-42"), "{transcript}");
    assert_eq!(turn.usage.map(|u| u.prompt_tokens), Some(7));
    assert!(turn.calls.is_empty(), "an empty batch: the model stopped");
}

#[tokio::test]
async fn errors_that_retrying_cannot_fix_are_not_retried() {
    let stub =
        StubServer::start(vec![StubReply::json(401, &json!({"error": {"message": "invalid api key"}}))])
            .await
            .expect("stub");
    let mut a = agent(config(&format!("{}/v1", stub.url)), None, Strategy::React, ToolMode::Native);
    start(&mut a, BRIEF).await;
    let e = a.step(&[]).await.expect_err("401").to_string();
    assert!(e.contains("HTTP 401: invalid api key"), "{e}");
    assert_eq!(stub.requests().len(), 1);
}

/// Azure OpenAI's classic deployment endpoints: the key in an `api-key` header (not a bearer
/// token) and an `api-version` query parameter on every request, the key in no record.
#[tokio::test]
async fn azure_classic_endpoints_get_the_api_key_header_and_the_api_version() {
    const KEY: &str = "azure-canary-5d1e9b";
    let models = StubReply::json(404, &json!({"error": {"code": "404", "message": "Resource not found"}}));
    let stub = StubServer::start(vec![models, StubReply::json(200, &completion("{\"calls\": []}"))])
        .await
        .expect("stub");
    let cfg = OpenAiConfig {
        api_key_env: Some("AZURE_OPENAI_API_KEY".into()),
        api_key_header: Some("api-key".into()),
        api_version: Some("2024-10-21".into()),
        ..config(&format!("{}/openai/deployments/gpt-4o-mini", stub.url))
    };
    let chat = OpenAiChat::with_key(cfg.clone(), Some(Secret::new(KEY))).expect("client");
    assert_eq!(chat.check_model().await.expect("a 404 on /models passes"), Vec::<String>::new());
    let settings = Settings { strategy: Strategy::Cot, tools: ToolMode::Text, ..Settings::default() };
    let mut a = LlmAgentFactory::new(Arc::new(chat), settings).create(&task()).expect("agent");
    start(&mut a, BRIEF).await;
    let turn = a.step(&[]).await.expect("a turn");
    let requests = stub.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/openai/deployments/gpt-4o-mini/models?api-version=2024-10-21");
    assert_eq!(requests[1].path, "/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21");
    for r in &requests {
        assert!(r.headers.contains(&("api-key".into(), KEY.into())), "{:?}", r.headers);
        assert!(!r.headers.iter().any(|(k, _)| k == "authorization"), "{:?}", r.headers);
    }
    let recorded = serde_json::to_string(&turn.transcript).expect("json");
    assert!(!recorded.contains(KEY), "{recorded}");
    let config = serde_json::to_string(&cfg).expect("json");
    assert!(config.contains("\"api_key_header\":\"api-key\"") && !config.contains(KEY), "{config}");

    for (bad, field) in [
        (OpenAiConfig { api_key_header: Some("api key".into()), ..cfg.clone() }, "--api-key-header"),
        (OpenAiConfig { api_version: Some("2024&x=1".into()), ..cfg.clone() }, "--api-version"),
    ] {
        let e = OpenAiChat::with_key(bad, Some(Secret::new(KEY))).expect_err("refused").to_string();
        assert!(e.contains(field) && !e.contains(KEY), "{e}");
    }
}

/// `lookup-command` against the real server: forced, the model calls it; the agent answers it
/// from the shipped reference and sends the answer back in the next request, which the server
/// takes; nothing of it reaches the environment.
#[tokio::test]
async fn a_forced_lookup_is_answered_by_the_agent_in_the_next_request() {
    let Some(url) = server("forced lookup-command") else { return };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/commands");
    let reference = netdojo_llm::CommandReference::load(&dir).expect("the shipped command reference");
    let cfg = OpenAiConfig {
        tool_choice: ToolChoice::Function(netdojo_llm::LOOKUP_TOOL.into()),
        sampling: Sampling { max_tokens: Some(96), ..config(&url).sampling },
        ..config(&url)
    };
    let chat = OpenAiChat::with_key(cfg, None).expect("client");
    // One lookup: the forced second request's lookup is then refused and ends the turn.
    let settings = Settings {
        strategy: Strategy::React,
        retry: fast_retries(1),
        lookup: Some(netdojo_llm::Lookup { max_lookups: 1, ..Default::default() }),
        ..Settings::default()
    };
    let mut a = LlmAgentFactory::new(Arc::new(chat), settings)
        .with_reference(Arc::new(reference))
        .create(&task())
        .expect("agent");
    start(&mut a, "h1 cannot reach h3. Look up how to add a route with lookup-command first.").await;
    let turn = a.step(&[]).await.expect("a turn");
    let tools: Vec<&str> = turn.transcript[0]["request"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
        .collect();
    assert_eq!(tools, ["exec", "lookup-command", "finish"]);
    let system = turn.transcript[0]["request"]["messages"][0]["content"].as_str().expect("system");
    assert!(system.contains("`lookup-command`") && system.contains("default `linux`"), "{system}");
    let lookup = turn.transcript.iter().find_map(|e| e.get("lookup")).unwrap_or_else(|| {
        panic!("the model's lookup was answered (arguments cut by max_tokens?): {:?}", turn.transcript)
    });
    let answer = lookup["answer"].as_str().expect("answer");
    assert!(answer.contains("command reference"), "{answer}");
    // The next request carries the answer as the tool message of that call, and the server took it.
    let next =
        turn.transcript.iter().filter(|e| e.get("request").is_some()).nth(1).expect("a second request");
    let sent = next["request"]["messages"].as_array().expect("messages");
    assert_eq!(
        sent.last().map(|m| (&m["role"], &m["tool_call_id"], &m["content"])),
        Some((&json!("tool"), &lookup["call_id"], &json!(answer)))
    );
    assert_eq!(turn.transcript.iter().filter(|e| e.get("response").is_some()).count(), 2);
    // The forced second lookup is over the limit: it goes on as a malformed call (an invalid step).
    assert_eq!(turn.calls.len(), 1, "{:?}", turn.calls);
    assert_eq!(turn.calls[0].name, "lookup-command");
    assert!(
        turn.calls[0]
            .malformed
            .as_deref()
            .is_some_and(|m| m.contains("no lookups left") || m.contains("not valid JSON")),
        "{:?}",
        turn.calls[0]
    );
}

/// `--tool-choice none` reaches the real server as the API spells it, and the server answers
/// in text, without a call. (`required` is not tested here: llama-cpp-python 0.3.36 answers it
/// with an empty HTTP 500; OpenAI and vLLM take it.)
#[tokio::test]
async fn tool_choice_none_reaches_the_server() {
    let Some(url) = server("tool choice") else { return };
    for (choice, wire) in [(ToolChoice::None, "none")] {
        let cfg = OpenAiConfig { tool_choice: choice.clone(), ..config(&url) };
        let mut a = agent(cfg, None, Strategy::React, ToolMode::Native);
        start(&mut a, BRIEF).await;
        let turn = a.step(&[]).await.unwrap_or_else(|e| panic!("tool_choice {wire}: {e}"));
        assert_eq!(turn.transcript[0]["request"]["tool_choice"], wire);
        let response = &turn.transcript.last().expect("response")["response"];
        if choice == ToolChoice::None {
            assert!(turn.calls.is_empty(), "tool_choice none: {:?}", turn.calls);
            assert!(
                response.pointer("/choices/0/message/tool_calls").is_none_or(Value::is_null),
                "{response}"
            );
        }
    }
    assert_eq!("required".parse::<ToolChoice>(), Ok(ToolChoice::Required));
    assert!("any".parse::<ToolChoice>().is_err_and(|e| e.contains("auto, required, none")));
}
