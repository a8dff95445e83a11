//! An agent behind MCP (the `netdojo.agent` protocol) as a netdojo agent: the oracle served by
//! `netdojo-mcp serve-agent` (stdio) and by the library's HTTP server solves datacenter-planning
//! tasks (dcgraph: no root, no model) with exactly the scores and calls of the in-process
//! oracle; and a misbehaving server gives an errored episode or an invalid step, never a crash.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use netdojo_core::runner::{Budget, Runner};
use netdojo_core::{AgentFactory, EndReason, EpisodeRecord, EpisodeStatus, Task, TaskGenerator, Trajectory};
use netdojo_dcgraph::{DcGraphFactory, GraphSource, QueryGenerator};
use netdojo_mcp::agent::McpAgentFactory;
use netdojo_mcp::agent_server::{self, AgentServer};
use netdojo_scripted::OracleFactory;
use tokio_util::sync::CancellationToken;

fn tasks(count: u64) -> (Arc<DcGraphFactory>, Vec<Task>) {
    let source = GraphSource::Generated(Default::default());
    let factory = DcGraphFactory::new(source.clone()).expect("dcgraph");
    let generator = QueryGenerator::new(factory.graph().clone(), source);
    let tasks = (0..count).map(|i| generator.generate(7, i).expect("task")).collect();
    (Arc::new(factory), tasks)
}

fn runner(env: Arc<DcGraphFactory>, agent: Arc<dyn AgentFactory>) -> Runner {
    Runner {
        env,
        agent,
        scorers: Arc::new(netdojo_score::netpress_scorers()),
        budget: Budget { max_steps: 20, ..Budget::default() },
        concurrency: 1,
        prepare_ahead: 0,
    }
}

async fn run_all(runner: &Runner, tasks: &[Task]) -> Vec<(EpisodeRecord, Trajectory)> {
    let mut out = Vec::new();
    for task in tasks {
        out.push(runner.run_episode(task).await);
    }
    out
}

/// What must be equal between two runs of the same agent: every metric but wall time, the
/// calls (ids, names, arguments), the answer, how each episode ended.
fn essence(runs: &[(EpisodeRecord, Trajectory)]) -> Vec<serde_json::Value> {
    runs.iter()
        .map(|(record, trajectory)| {
            let metrics: Vec<_> = record
                .metrics
                .iter()
                .filter(|m| m.name != "wall_s")
                .map(|m| (m.name.clone(), m.value))
                .collect();
            let calls: Vec<_> =
                trajectory.steps.iter().map(|s| (&s.call, &s.observation.content, s.invalid)).collect();
            serde_json::json!({
                "task": record.task_id, "status": record.status, "end": record.end, "error": record.error,
                "metrics": metrics, "calls": calls, "answer": trajectory.answer,
            })
        })
        .collect()
}

fn suite_file(tasks: &[Task]) -> tempfile::NamedTempFile {
    let mut file = tempfile::Builder::new().suffix(".jsonl").tempfile().expect("tempfile");
    for task in tasks {
        serde_json::to_writer(&mut file, task).expect("write");
        file.write_all(b"\n").expect("write");
    }
    file.flush().expect("flush");
    file
}

fn serve_agent_command(suite: &std::path::Path) -> McpAgentFactory {
    McpAgentFactory::stdio(
        env!("CARGO_BIN_EXE_netdojo-mcp"),
        vec![
            "serve-agent".into(),
            "--agent".into(),
            "oracle".into(),
            "--suite".into(),
            suite.display().to_string(),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oracle_behind_mcp_scores_like_the_oracle_in_process() {
    let (env, tasks) = tasks(12);
    let local = run_all(&runner(env.clone(), Arc::new(OracleFactory)), &tasks).await;
    let expected = essence(&local);
    assert!(
        local.iter().all(|(r, _)| r.metric("correct") == Some(netdojo_core::MetricValue::Pass(true))),
        "the in-process oracle solves every task"
    );

    // stdio: `netdojo-mcp serve-agent --agent oracle --suite FILE`, one process per episode.
    let suite = suite_file(&tasks);
    let stdio = run_all(&runner(env.clone(), Arc::new(serve_agent_command(suite.path()))), &tasks).await;
    assert_eq!(essence(&stdio), expected, "stdio");
    assert!(stdio.iter().all(|(r, _)| r.agent == "mcp"));

    // streamable HTTP: one server, many episodes.
    let server = AgentServer::new(Arc::new(OracleFactory)).with_tasks(tasks.clone());
    let cancel = CancellationToken::new();
    let (addr, handle) = agent_server::serve_http(server.clone(), 0, cancel.clone()).await.expect("bind");
    let http = McpAgentFactory::http(format!("http://{addr}/mcp")).expect("url");
    let over_http = run_all(&runner(env.clone(), Arc::new(http)), &tasks).await;
    assert_eq!(essence(&over_http), expected, "http");
    // The client ends each episode when it drops its agent (in the background).
    for _ in 0..50 {
        if server.episodes() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(server.episodes(), 0, "every episode was ended");
    cancel.cancel();
    handle.await.expect("join").expect("serve");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_missing_from_the_oracle_servers_suite_errs_instead_of_scoring_zero() {
    let (env, tasks) = tasks(2);
    let suite = suite_file(&tasks[..1]);
    let runs = run_all(&runner(env, Arc::new(serve_agent_command(suite.path()))), &tasks).await;
    assert_eq!(runs[0].0.status, EpisodeStatus::Completed);
    assert_eq!(runs[1].0.status, EpisodeStatus::Errored);
    let error = runs[1].0.error.as_deref().expect("error");
    assert!(error.contains("is not in this agent server's suite"), "{error}");
}

/// A run of one task against `tests/agent_stub.py MODE`.
async fn stub(mode: &str, timeout: Duration) -> (EpisodeRecord, Trajectory) {
    let python = std::env::var("NETDOJO_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/agent_stub.py");
    let agent = McpAgentFactory::stdio(python, vec![script.into(), mode.into()]).with_timeout(timeout);
    let (env, tasks) = tasks(1);
    runner(env, Arc::new(agent)).run_episode(&tasks[0]).await
}

fn errored_with(run: &(EpisodeRecord, Trajectory), needle: &str) {
    let (record, trajectory) = run;
    assert_eq!(record.status, EpisodeStatus::Errored, "{record:?}");
    assert_eq!(trajectory.end, EndReason::Error);
    let error = record.error.as_deref().expect("error");
    assert!(error.contains(needle), "expected {needle:?} in {error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_mid_episode_errs_the_episode_with_its_stderr() {
    let run = stub("exit", Duration::from_secs(30)).await;
    errored_with(&run, "it exited or closed its stdout");
    errored_with(&run, "agent-stub: giving up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_answered_with_prose_is_an_invalid_step_not_a_crash() {
    let (record, trajectory) = stub("garbage", Duration::from_secs(30)).await;
    assert_eq!(record.status, EpisodeStatus::Completed, "{record:?}");
    assert_eq!(trajectory.end, EndReason::Finished, "the agent's next turn finished");
    assert_eq!(record.invalid_steps, 1);
    let step = &trajectory.steps[0];
    assert!(step.invalid && step.call.malformed.is_some());
    assert!(!step.observation.ok);
    assert!(step.observation.content.contains("is not a turn"), "{}", step.observation.content);
    assert!(step.observation.content.contains("I would configure the network now."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_answer_errs_the_episode_after_the_timeout() {
    let started = std::time::Instant::now();
    let run = stub("hang", Duration::from_secs(2)).await;
    errored_with(&run, "no answer to netdojo.agent.step in 2 s");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_fails_its_turn_errs_the_episode() {
    errored_with(&stub("error", Duration::from_secs(30)).await, "the model server is unreachable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_the_protocol_is_refused_by_name() {
    errored_with(
        &stub("not-agent", Duration::from_secs(30)).await,
        "is not a netdojo agent server: it has no tool `netdojo.agent.start`",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_servers_err_the_episode() {
    let (env, tasks) = tasks(1);
    let missing = McpAgentFactory::stdio("/nonexistent/agent-server", vec![]);
    errored_with(&runner(env.clone(), Arc::new(missing)).run_episode(&tasks[0]).await, "cannot start it");

    // A port nobody listens on: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let nobody = McpAgentFactory::http(format!("http://127.0.0.1:{port}/mcp"))
        .expect("url")
        .with_timeout(Duration::from_secs(10));
    errored_with(&runner(env, Arc::new(nobody)).run_episode(&tasks[0]).await, "connecting");
}
