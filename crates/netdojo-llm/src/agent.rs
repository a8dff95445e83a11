//! The conversation loop: one [`LlmAgent`] per episode, over any [`ChatModel`].

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use netdojo_core::{
    Agent, AgentError, AgentFactory, AgentTurn, EpisodeStart, Observation, Task, TokenUsage, ToolCall,
    ToolSpec,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::chat::{ChatError, ChatModel, Exchange, Message, ReplyCall, RetryPolicy, Role};
use crate::lookup::{self, CommandReference, LOOKUP_TOOL, Lookup};
use crate::prompt::{self, LookupHint, Strategy, ToolMode};
use crate::text;

/// How an LLM agent prompts and behaves, whatever the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub strategy: Strategy,
    pub tools: ToolMode,
    /// Few-shot examples per episode (strategy `few-shot`).
    pub shots: usize,
    /// Observations longer than this are cut before the model sees them (the trajectory keeps
    /// them whole): small context windows fill fast with command output.
    pub max_observation_chars: usize,
    pub retry: RetryPolicy,
    /// The `lookup-command` tool (seed 001 §3.1 item 3): `Some` offers it, answered by the
    /// agent from the reference given to [`LlmAgentFactory::with_reference`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookup: Option<Lookup>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            strategy: Strategy::React,
            tools: ToolMode::Native,
            shots: 3,
            max_observation_chars: 4000,
            retry: RetryPolicy::default(),
            lookup: None,
        }
    }
}

/// Builds one [`LlmAgent`] per episode. `pool` holds the tasks few-shot examples are drawn
/// from: tasks of the same source generated with another seed than the evaluated ones.
#[derive(Debug, Clone)]
pub struct LlmAgentFactory {
    model: Arc<dyn ChatModel>,
    settings: Settings,
    pool: Arc<Vec<Task>>,
    pool_source: Value,
    reference: Option<Arc<CommandReference>>,
}

impl LlmAgentFactory {
    pub fn new(model: Arc<dyn ChatModel>, settings: Settings) -> Self {
        Self { model, settings, pool: Arc::new(vec![]), pool_source: Value::Null, reference: None }
    }

    /// The command reference `lookup-command` answers from (used when `settings.lookup` is set).
    pub fn with_reference(mut self, reference: Arc<CommandReference>) -> Self {
        self.reference = Some(reference);
        self
    }

    /// The tasks few-shot examples come from, and a description of where they came from (for
    /// the run's configuration).
    pub fn with_examples(mut self, pool: Vec<Task>, source: Value) -> Self {
        self.pool = Arc::new(pool);
        self.pool_source = source;
        self
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }
}

impl AgentFactory for LlmAgentFactory {
    fn name(&self) -> &str {
        self.model.agent()
    }

    /// A seeded model samples with another seed in each epoch ([`ChatModel::for_epoch`]).
    fn create_for_epoch(&self, task: &Task, epoch: u32) -> Result<Box<dyn Agent>, AgentError> {
        match self.model.for_epoch(epoch) {
            Some(model) if epoch > 0 => Self { model, ..self.clone() }.create(task),
            _ => self.create(task),
        }
    }

    fn config(&self) -> Value {
        json!({
            "model": self.model.config(),
            "settings": self.settings,
            "few_shot_pool": self.pool_source,
            "command_reference": self.reference.as_ref().map(|r| r.describe()),
        })
    }

    fn create(&self, task: &Task) -> Result<Box<dyn Agent>, AgentError> {
        if self.settings.tools == ToolMode::Code && self.settings.strategy == Strategy::FewShot {
            return Err(AgentError::Config {
                agent: self.name().into(),
                message: "strategy few-shot shows solved examples as tool calls; tool mode code has none (use single-turn or cot)".into(),
            });
        }
        let examples = match self.settings.strategy {
            Strategy::FewShot => {
                let picked = prompt::examples_for(task, &self.pool, self.settings.shots);
                if picked.is_empty() && self.settings.shots > 0 {
                    return Err(AgentError::Config {
                        agent: self.name().into(),
                        message: "strategy few-shot: no example tasks to draw from".into(),
                    });
                }
                prompt::render_examples(&picked)
            }
            _ => String::new(),
        };
        let reference = match (&self.settings.lookup, &self.reference) {
            (None, _) => None,
            (Some(_), Some(r)) => Some(r.clone()),
            (Some(_), None) => {
                return Err(AgentError::Config {
                    agent: self.name().into(),
                    message: "lookup-command is on but no command reference was given".into(),
                });
            }
        };
        Ok(Box::new(LlmAgent {
            model: self.model.clone(),
            settings: self.settings.clone(),
            examples,
            tools: vec![],
            messages: vec![],
            recorded: 0,
            turn: 0,
            answered: false,
            reference,
            dialect: None,
            lookups: 0,
            answered_here: vec![],
        }))
    }
}

/// One episode's conversation.
#[derive(Debug)]
pub struct LlmAgent {
    model: Arc<dyn ChatModel>,
    settings: Settings,
    /// The rendered few-shot examples (empty for other strategies).
    examples: String,
    tools: Vec<ToolSpec>,
    messages: Vec<Message>,
    /// Messages already written to the transcript.
    recorded: usize,
    turn: usize,
    /// A single-turn agent has given its one reply.
    answered: bool,
    /// The command reference, when `lookup-command` is on.
    reference: Option<Arc<CommandReference>>,
    /// The default dialect of lookups in this episode; `None`: the tool is not offered.
    dialect: Option<String>,
    /// Lookups answered so far.
    lookups: usize,
    /// Lookups answered in the last reply whose other calls went to the environment: their
    /// answers join that feedback, in the order of the calls.
    answered_here: Vec<(String, String)>,
}

impl LlmAgent {
    /// Every error that reaches here is the model's API failing (after the retries for those
    /// that retrying can help): a server that answers outside its protocol is no fault of the
    /// agent under evaluation, whose unusable output is a malformed call instead. A full
    /// context never gets here: it ends the agent's turns.
    fn error(&self, e: &ChatError) -> AgentError {
        AgentError::Unreachable { agent: self.model.agent().to_string(), message: e.to_string() }
    }

    /// Appends the results of the last reply's calls, in the order the model made them: tool
    /// messages (native) or one user message (text protocol). `results` are (call id, tool,
    /// ok, content): the environment's observations and the lookups answered here.
    fn push_results(&mut self, mut results: Vec<(String, String, bool, String)>) {
        let order: Vec<String> = self
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(|m| m.calls.iter().map(|c| c.id.clone()).collect())
            .unwrap_or_default();
        // A stable sort: results of calls not in the message (text mode) keep their order.
        results.sort_by_key(|r| order.iter().position(|id| *id == r.0).unwrap_or(usize::MAX));
        let cap = self.settings.max_observation_chars;
        match self.settings.tools {
            ToolMode::Native => {
                for (id, tool, _, content) in results {
                    self.messages.push(Message::tool(&id, &tool, cut(&content, cap)));
                }
            }
            ToolMode::Text | ToolMode::Code => {
                let results = results
                    .iter()
                    .map(|(_, tool, ok, content)| {
                        let status = if *ok { "ok" } else { "failed" };
                        format!("[{tool} {status}]\n{}", cut(content, cap))
                    })
                    .collect::<Vec<_>>()
                    .join("\n\n");
                self.messages.push(Message::new(Role::User, prompt::render_results(&results)));
            }
        }
    }

    /// Answers a lookup here, or says why it is refused (the call then goes to the runner as
    /// malformed: told to the model, counted as an invalid step).
    fn lookup(&mut self, call: &ToolCall) -> Result<String, String> {
        let (Some(reference), Some(settings), Some(dialect)) =
            (&self.reference, &self.settings.lookup, &self.dialect)
        else {
            return Err(format!("tool `{LOOKUP_TOOL}` is not offered in this episode"));
        };
        let schema = self.tools.iter().find(|t| t.name == LOOKUP_TOOL).map(|t| &t.parameters);
        if let Some(schema) = schema {
            netdojo_core::schema::validate(schema, &call.arguments)
                .map_err(|e| format!("tool `{LOOKUP_TOOL}`: {e}"))?;
        }
        if self.lookups >= settings.max_lookups {
            return Err(format!(
                "tool `{LOOKUP_TOOL}`: no lookups left (at most {} per episode)",
                settings.max_lookups
            ));
        }
        let text = lookup::answer(reference, settings, dialect, &call.arguments)?;
        self.lookups += 1;
        Ok(text)
    }

    /// Sends `body`, retrying as the policy says; every failed attempt goes to `transcript`.
    async fn send(&self, body: &Value, transcript: &mut Vec<Value>) -> Result<Exchange, ChatError> {
        let policy = self.settings.retry;
        let mut attempt = 0;
        loop {
            let started = Instant::now();
            match self.model.send(body).await {
                Ok(exchange) => return Ok(exchange),
                Err(e) if e.retryable() && attempt < policy.max_retries => {
                    let wait = policy.backoff(attempt, &e);
                    tracing::warn!(agent = self.model.agent(), attempt, "{e}; retrying in {wait:?}");
                    transcript.push(json!({
                        "error": e.to_string(),
                        "attempt": attempt,
                        "elapsed_ms": started.elapsed().as_millis() as u64,
                        "retry_in_ms": wait.as_millis() as u64,
                    }));
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(e) => {
                    let e = if attempt > 0 { e.gave_up(attempt + 1) } else { e };
                    transcript.push(json!({ "error": e.to_string(), "attempt": attempt }));
                    return Err(e);
                }
            }
        }
    }

    /// The calls of a native reply, with ids for those the server left without one.
    fn native_calls(&self, calls: &[ReplyCall]) -> Vec<ToolCall> {
        calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut call = match &c.arguments {
                    Ok(arguments) => ToolCall::new(&c.name, arguments.clone()),
                    Err(bad) => ToolCall::malformed(
                        &c.name,
                        Value::String(bad.raw.clone()),
                        format!("the arguments of `{}` are not valid JSON: {}", c.name, bad.error),
                    ),
                };
                call.id = if c.id.is_empty() { self.call_id(i) } else { c.id.clone() };
                call
            })
            .collect()
    }

    fn call_id(&self, i: usize) -> String {
        format!("call_{}_{i}", self.turn)
    }
}

/// `text` cut to at most `cap` characters, saying how much was cut.
fn cut(text: &str, cap: usize) -> String {
    match text.char_indices().nth(cap) {
        None => text.to_string(),
        Some((at, _)) => {
            let rest = text[at..].chars().count();
            format!("{}\n[... {rest} more characters not shown]", &text[..at])
        }
    }
}

#[async_trait]
impl Agent for LlmAgent {
    async fn start(&mut self, episode: &EpisodeStart<'_>) -> Result<(), AgentError> {
        self.tools = episode.tools.to_vec();
        let dialects = self.reference.as_ref().map(|r| r.dialects()).unwrap_or_default();
        // Offered only where the reference covers the devices' command line, and never in
        // place of an environment's tool of the same name.
        self.dialect = match (&self.reference, &self.settings.lookup) {
            (Some(_), Some(_)) if !episode.tools.iter().any(|t| t.name == LOOKUP_TOOL) => {
                lookup::default_dialect(&episode.task.application, episode.tools, &dialects)
            }
            _ => None,
        };
        let mut hint = None;
        if let (Some(dialect), Some(settings)) = (&self.dialect, &self.settings.lookup) {
            // Before `finish`, which the environment's list ends with.
            let at = self
                .tools
                .iter()
                .position(|t| t.name == netdojo_core::FINISH_TOOL)
                .unwrap_or(self.tools.len());
            self.tools.insert(at, lookup::lookup_tool(&dialects, dialect));
            hint =
                Some(LookupHint { dialects: &dialects, default: dialect, max_lookups: settings.max_lookups });
        }
        let system = prompt::system_prompt(
            self.settings.strategy,
            self.settings.tools,
            &self.tools,
            episode.max_steps,
            &self.examples,
            hint,
        );
        self.messages = vec![Message::new(Role::System, system), Message::new(Role::User, episode.brief)];
        Ok(())
    }

    async fn step(&mut self, feedback: &[Observation]) -> Result<AgentTurn, AgentError> {
        if self.answered {
            // Single-turn: the one reply has been played; the episode ends here.
            return Ok(AgentTurn {
                reasoning: "single-turn: no further reply".into(),
                ..AgentTurn::default()
            });
        }
        let mut results: Vec<(String, String, bool, String)> = std::mem::take(&mut self.answered_here)
            .into_iter()
            .map(|(id, text)| (id, LOOKUP_TOOL.to_string(), true, text))
            .collect();
        results.extend(feedback.iter().map(|o| (o.call_id.clone(), o.tool.clone(), o.ok, o.content.clone())));
        if !results.is_empty() {
            self.push_results(results);
        }
        let mut transcript = Vec::new();
        let mut reasonings = Vec::new();
        let mut usage: Option<TokenUsage> = None;
        // One request, or more when the model's reply held only lookups: they are answered
        // here and the model asked again, within the same turn of the episode.
        loop {
            let tools = (self.settings.tools == ToolMode::Native).then_some(self.tools.as_slice());
            let body = self.model.request(&self.messages, tools);
            // The transcript holds the request as sent, with only the messages it has not
            // recorded yet (`messages_from` says where they start): replaying the entries in
            // order gives back every request whole.
            let mut sent = body.clone();
            if let Some(Value::Array(all)) = sent.get_mut("messages") {
                all.drain(..self.recorded.min(all.len()));
            }
            transcript.push(json!({ "turn": self.turn, "messages_from": self.recorded, "request": sent }));
            self.recorded = self.messages.len();

            let exchange = match self.send(&body, &mut transcript).await {
                Ok(exchange) => exchange,
                Err(e @ ChatError::ContextFull { .. }) => {
                    // Not an outage: the model has no room left, as a person runs out of time.
                    self.turn += 1;
                    reasonings.push(format!("stopped: {e}"));
                    return Ok(AgentTurn {
                        reasoning: reasonings.join("\n\n"),
                        transcript,
                        usage,
                        ..AgentTurn::default()
                    });
                }
                Err(e) => return Err(self.error(&e)),
            };
            transcript.push(json!({ "turn": self.turn, "response": exchange.response }));
            let reply = exchange.reply;
            if let Some(u) = reply.usage {
                *usage.get_or_insert_with(TokenUsage::default) += u;
            }

            let (reasoning, mut calls) = match self.settings.tools {
                ToolMode::Native => (reply.content.trim().to_string(), self.native_calls(&reply.calls)),
                ToolMode::Text => {
                    let (reasoning, mut calls) = text::parse_reply(&reply.content);
                    for (i, call) in calls.iter_mut().enumerate() {
                        call.id = self.call_id(i);
                    }
                    (reasoning, calls)
                }
                ToolMode::Code => {
                    // The paper's protocol: the reply's code runs once, and that is the answer.
                    self.answered = true;
                    let tool = self
                        .tools
                        .iter()
                        .find(|t| t.name != netdojo_core::FINISH_TOOL)
                        .map_or_else(|| "run_code".to_string(), |t| t.name.clone());
                    let mut run = ToolCall::new(tool, json!({"code": text::extract_code(&reply.content)}));
                    run.id = self.call_id(0);
                    let mut finish = ToolCall::finish(None);
                    finish.id = self.call_id(1);
                    (reply.content.trim().to_string(), vec![run, finish])
                }
            };
            if !reasoning.is_empty() {
                reasonings.push(reasoning);
            }
            if self.settings.strategy == Strategy::React && self.settings.tools != ToolMode::Code {
                for extra in calls.iter_mut().skip(1) {
                    extra.malformed = Some("one action per turn: this call was not run".into());
                }
            }

            let mut message = Message::new(Role::Assistant, reply.content);
            if self.settings.tools == ToolMode::Native {
                message.calls = reply
                    .calls
                    .into_iter()
                    .zip(&calls)
                    .map(|(c, call)| ReplyCall { id: call.id.clone(), ..c })
                    .collect();
            }
            self.messages.push(message);

            // Lookups are answered here and never reach the environment; a refused one goes
            // on as a malformed call, so the runner counts it as an invalid step.
            let mut answered = Vec::new();
            let mut outgoing = Vec::new();
            for mut call in calls {
                if call.name == LOOKUP_TOOL && call.malformed.is_none() && self.dialect.is_some() {
                    match self.lookup(&call) {
                        Ok(text) => {
                            transcript.push(json!({
                                "turn": self.turn,
                                "lookup": {"call_id": call.id, "arguments": call.arguments, "answer": text},
                            }));
                            answered.push((call.id.clone(), text));
                            continue;
                        }
                        Err(why) => call.malformed = Some(why),
                    }
                }
                outgoing.push(call);
            }
            self.turn += 1;
            if outgoing.is_empty() && !answered.is_empty() {
                let results = answered
                    .into_iter()
                    .map(|(id, text)| (id, LOOKUP_TOOL.to_string(), true, text))
                    .collect();
                self.push_results(results);
                continue;
            }
            self.answered_here = answered;
            if self.settings.strategy == Strategy::SingleTurn {
                self.answered = true;
            }
            return Ok(AgentTurn { reasoning: reasonings.join("\n\n"), calls: outgoing, usage, transcript });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use netdojo_core::{TaskKind, TokenUsage};

    use super::*;
    use crate::chat::Reply;

    /// A model that plays scripted replies and keeps the requests: for the agent's own logic
    /// (the lookups answered here); the wire crates test real servers.
    #[derive(Debug, Default)]
    struct Scripted {
        replies: Mutex<Vec<Reply>>,
        requests: Mutex<Vec<Value>>,
    }

    #[async_trait]
    impl ChatModel for Scripted {
        fn agent(&self) -> &str {
            "scripted"
        }
        fn request(&self, messages: &[Message], tools: Option<&[ToolSpec]>) -> Value {
            let messages: Vec<Value> = messages
                .iter()
                .map(|m| json!({"role": m.role.as_str(), "content": m.content, "call_id": m.call_id}))
                .collect();
            let tools: Vec<&str> = tools.unwrap_or_default().iter().map(|t| t.name.as_str()).collect();
            json!({"messages": messages, "tools": tools})
        }
        async fn send(&self, body: &Value) -> Result<Exchange, ChatError> {
            self.requests.lock().expect("lock").push(body.clone());
            let mut replies = self.replies.lock().expect("lock");
            let reply = if replies.is_empty() { Reply::default() } else { replies.remove(0) };
            Ok(Exchange { response: json!({"content": reply.content}), reply })
        }
        fn config(&self) -> Value {
            Value::Null
        }
    }

    fn call(id: &str, name: &str, arguments: Value) -> ReplyCall {
        ReplyCall { id: id.into(), name: name.into(), arguments: Ok(arguments) }
    }

    fn reply(calls: Vec<ReplyCall>) -> Reply {
        Reply {
            content: "thinking".into(),
            calls,
            usage: Some(TokenUsage { prompt_tokens: 10, completion_tokens: 1, cached_tokens: 0 }),
            finish_reason: None,
        }
    }

    fn reference() -> Arc<CommandReference> {
        Arc::new(CommandReference::from_texts([
            (
                "frr",
                "config",
                "## ip route A.B.C.D/M A.B.C.D\nmode: configure terminal\n\n## ip prefix-list WORD\n",
            ),
            ("linux", "ip-route", "## ip route add\nadd a route\n"),
        ]))
    }

    fn task(application: &str) -> Task {
        Task {
            id: "t".into(),
            application: application.into(),
            level: 1,
            label: "l".into(),
            domain: None,
            seed: None,
            query: "q".into(),
            setup: Value::Null,
            kind: TaskKind::Constructive { actions: vec![], answer: None, goal: None },
        }
    }

    async fn agent(model: Arc<Scripted>, application: &str, max_lookups: usize) -> Box<dyn Agent> {
        let settings =
            Settings { lookup: Some(Lookup { max_lookups, ..Lookup::default() }), ..Settings::default() };
        let factory = LlmAgentFactory::new(model, settings).with_reference(reference());
        let task = task(application);
        let mut agent = factory.create(&task).expect("agent");
        let tools = [ToolSpec::new("exec", "run", json!({"type": "object"})), ToolSpec::finish(None)];
        agent
            .start(&EpisodeStart { task: &task, brief: "b", tools: &tools, max_steps: 5 })
            .await
            .expect("start");
        agent
    }

    #[tokio::test]
    async fn a_lookup_is_answered_here_and_the_model_asked_again() {
        let model = Arc::new(Scripted::default());
        *model.replies.lock().expect("lock") = vec![
            reply(vec![call("a", LOOKUP_TOOL, json!({"query": "ip route"}))]),
            reply(vec![call("b", "exec", json!({"command": "show ip route"}))]),
        ];
        let mut agent = agent(model.clone(), "netconf", 5).await;
        let turn = agent.step(&[]).await.expect("turn");
        assert_eq!(turn.calls.len(), 1, "{:?}", turn.calls);
        assert_eq!(turn.calls[0].name, "exec", "the lookup never reaches the environment");
        assert_eq!(
            turn.usage,
            Some(TokenUsage { prompt_tokens: 20, completion_tokens: 2, cached_tokens: 0 })
        );
        let requests = model.requests.lock().expect("lock").clone();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0]["tools"], json!(["exec", LOOKUP_TOOL, "finish"]));
        assert!(requests[0]["messages"][0]["content"].as_str().expect("system").contains("default `frr`"));
        let last = requests[1]["messages"].as_array().and_then(|m| m.last()).expect("a message");
        assert_eq!(last["call_id"], "a");
        let answer = last["content"].as_str().expect("answer");
        assert!(answer.starts_with("2 entries of the `frr` command reference for `ip route`"), "{answer}");
        assert!(answer.contains("## ip route A.B.C.D/M A.B.C.D (config)"), "{answer}");
        // The transcript: request, response, the lookup, request, response.
        assert_eq!(turn.transcript.len(), 5, "{:?}", turn.transcript);
        assert_eq!(turn.transcript[2]["lookup"]["answer"], answer);
        assert_eq!(turn.transcript[3]["messages_from"], 2, "the new messages: the reply and the answer");
    }

    #[tokio::test]
    async fn bad_lookups_go_on_as_malformed_calls_and_their_answers_keep_the_call_order() {
        let model = Arc::new(Scripted::default());
        *model.replies.lock().expect("lock") = vec![
            Reply {
                content: String::new(),
                ..reply(vec![
                    call("a", LOOKUP_TOOL, json!({"dialect": "ios", "query": "x"})),
                    call("b", LOOKUP_TOOL, json!({"query": "ip route add"})),
                    call("c", LOOKUP_TOOL, json!({"query": "prefix-list"})),
                    call("d", LOOKUP_TOOL, json!({})),
                ])
            },
            reply(vec![]),
        ];
        // A cot agent (several calls per reply), one lookup allowed.
        let settings = Settings {
            strategy: Strategy::Cot,
            lookup: Some(Lookup { max_lookups: 1, ..Lookup::default() }),
            ..Settings::default()
        };
        let factory = LlmAgentFactory::new(model.clone(), settings).with_reference(reference());
        let task = task("routing");
        let mut agent = factory.create(&task).expect("agent");
        let tools = [ToolSpec::finish(None)];
        agent
            .start(&EpisodeStart { task: &task, brief: "b", tools: &tools, max_steps: 5 })
            .await
            .expect("start");
        let turn = agent.step(&[]).await.expect("a bad call is no crash");
        let why: Vec<&str> = turn.calls.iter().map(|c| c.malformed.as_deref().unwrap_or("")).collect();
        assert_eq!(turn.calls.len(), 3, "{why:?}");
        assert!(why[0].contains("`ios`") || why[0].contains("dialect"), "{why:?}");
        assert!(why[1].contains("no lookups left (at most 1 per episode)"), "{why:?}");
        assert!(why[2].contains("query"), "{why:?}");
        // The runner answers the malformed calls; the answered lookup joins them in call order.
        let feedback: Vec<Observation> = turn
            .calls
            .iter()
            .map(|c| Observation::error(c, c.malformed.clone().unwrap_or_default()))
            .collect();
        agent.step(&feedback).await.expect("turn 2");
        let requests = model.requests.lock().expect("lock").clone();
        let sent = requests[1]["messages"].as_array().expect("messages");
        let ids: Vec<&str> =
            sent.iter().rev().take(4).rev().map(|m| m["call_id"].as_str().unwrap_or("")).collect();
        assert_eq!(ids, ["a", "b", "c", "d"]);
        assert!(
            sent[sent.len() - 3]["content"].as_str().is_some_and(|c| c.contains("`linux` command reference"))
        );
    }

    #[tokio::test]
    async fn no_dialect_no_tool() {
        let model = Arc::new(Scripted::default());
        *model.replies.lock().expect("lock") =
            vec![reply(vec![call("a", LOOKUP_TOOL, json!({"query": "x"}))])];
        let mut agent = agent(model.clone(), "dcgraph", 5).await;
        let turn = agent.step(&[]).await.expect("turn");
        assert_eq!(model.requests.lock().expect("lock")[0]["tools"], json!(["exec", "finish"]));
        // Not offered: the call goes to the runner, which answers an unknown tool.
        assert_eq!(turn.calls[0].name, LOOKUP_TOOL);
        assert!(turn.calls[0].malformed.is_none());
        let factory =
            LlmAgentFactory::new(model, Settings { lookup: Some(Lookup::default()), ..Settings::default() });
        assert!(
            factory.create(&task("netconf")).is_err_and(|e| e.to_string().contains("no command reference"))
        );
    }

    #[tokio::test]
    async fn in_code_mode_the_reply_is_run_once_then_finished() {
        let model = Arc::new(Scripted::default());
        *model.replies.lock().expect("lock") = vec![Reply {
            content: "Answer:\n```python\ndef process_graph(graph_data):\n    return 1\n```".into(),
            ..Reply::default()
        }];
        let settings = Settings { tools: ToolMode::Code, strategy: Strategy::React, ..Settings::default() };
        let factory = LlmAgentFactory::new(model.clone(), settings.clone());
        let task = task("dcgraph");
        let mut agent = factory.create(&task).expect("agent");
        let tools = [ToolSpec::new("run_code", "run", json!({"type": "object"})), ToolSpec::finish(None)];
        agent
            .start(&EpisodeStart { task: &task, brief: "b", tools: &tools, max_steps: 5 })
            .await
            .expect("start");
        let turn = agent.step(&[]).await.expect("turn");
        let names: Vec<&str> = turn.calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["run_code", "finish"]);
        assert_eq!(turn.calls[0].arguments, json!({"code": "def process_graph(graph_data):\n    return 1"}));
        assert!(turn.calls.iter().all(|c| c.malformed.is_none()));
        // No tools go to the server; one reply is all there is.
        assert_eq!(model.requests.lock().expect("lock")[0]["tools"], json!([]));
        assert!(agent.step(&[]).await.expect("turn").calls.is_empty());
        let few_shot = LlmAgentFactory::new(model, Settings { strategy: Strategy::FewShot, ..settings });
        assert!(few_shot.create(&task).is_err_and(|e| e.to_string().contains("tool mode code")));
    }

    #[test]
    fn cut_counts_characters_not_bytes() {
        assert_eq!(cut("héllo", 10), "héllo");
        assert_eq!(cut("héllo", 2), "hé\n[... 3 more characters not shown]");
    }
}
