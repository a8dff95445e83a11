//! The server on dcgraph's real environment, through its WebSocket: sessions, errors, limits,
//! rewards and the run directory. (The independent client, openenv-core's MCPToolClient, is
//! xtask's `serve_env` test.)

use std::sync::Arc;
use std::time::Duration;

use netdojo_core::store::RunDir;
use netdojo_core::{GeneratedSuite, Task, TaskSource};
use netdojo_dcgraph::{DcGraphFactory, GraphSource, QueryGenerator};
use netdojo_envserver::client::{Client, ClientError};
use netdojo_envserver::{EnvServer, Options, Shaping};
use serde_json::{Value, json};

fn tasks(factory: &DcGraphFactory, n: u64) -> Vec<Task> {
    let generator = QueryGenerator::new(factory.graph().clone(), GraphSource::Generated(Default::default()));
    let suite = GeneratedSuite { generator: Arc::new(generator), seed: 5, count: n };
    suite.tasks().collect::<Result<_, _>>().expect("tasks")
}

/// A server of `n` dcgraph tasks on a free port; returns its URL, its tasks and its stopper.
async fn start(
    n: u64,
    options: Options,
) -> (String, Vec<Task>, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let factory = DcGraphFactory::new(GraphSource::Generated(Default::default())).expect("graph");
    let tasks = tasks(&factory, n);
    let server = EnvServer::new(
        Arc::new(factory),
        netdojo_score::netpress_scorers(),
        tasks.clone(),
        options,
        json!({}),
    )
    .expect("server");
    let listener = netdojo_envserver::bind(([127, 0, 0, 1], 0).into()).await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        netdojo_envserver::serve(Arc::new(server), listener, async {
            let _ = stopped.await;
        })
        .await
        .expect("serve");
    });
    (url, tasks, stop, handle)
}

/// A plain HTTP GET; the body.
async fn get(url: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response.split("\r\n\r\n").nth(1).unwrap_or_default().to_string()
}

async fn play(client: &mut Client, task: &Task) -> Value {
    let mut last = Value::Null;
    for call in netdojo_scripted::oracle_plan(task) {
        last = client.call(&call.name, call.arguments).await.expect("call");
        if last["done"] == json!(true) {
            break;
        }
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oracle_episode_earns_1_and_is_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    let options =
        Options { record: Some(run.clone()), shaping: Some(Shaping::default()), ..Options::default() };
    let (url, tasks, stop, handle) = start(3, options).await;
    // OpenEnv's HTTP side: health, and the schema generic clients read the action from.
    assert!(get(&url, "/health").await.contains("healthy"));
    let schema: Value = serde_json::from_str(&get(&url, "/schema").await).expect("JSON");
    assert_eq!(schema["action"]["title"], json!("CallToolAction"));

    let mut client = Client::connect(&url).await.expect("connect");

    // Before a reset, a step is an error that says what to do.
    match client.call("finish", json!({})).await {
        Err(ClientError::Server { code, message }) => {
            assert_eq!(code, "EXECUTION_ERROR");
            assert!(message.contains("reset"), "{message}");
        }
        other => panic!("a step before reset: {other:?}"),
    }

    let reset = client.reset(json!({"task_id": tasks[1].id})).await.expect("reset");
    let info = &reset["observation"]["metadata"];
    assert_eq!(info["task_id"], json!(tasks[1].id));
    assert!(info["brief"].as_str().is_some_and(|b| !b.is_empty()));
    assert_eq!(reset["done"], json!(false));
    let tools = client.list_tools().await.expect("tools");
    let names: Vec<&str> = tools["observation"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"finish"), "{names:?}");

    // A call the environment refuses is a failed step, never a transport error.
    let refused = client.call("no_such_tool", json!({})).await.expect("a step");
    assert_eq!(refused["observation"]["result"]["is_error"], json!(true));
    assert_eq!(refused["observation"]["error"], Value::Null);
    assert_eq!(refused["observation"]["metadata"]["shaping"]["failed"], json!(true));
    assert_eq!(refused["reward"], json!(-0.05));

    let last = play(&mut client, &tasks[1]).await;
    assert_eq!(last["done"], json!(true));
    assert_eq!(last["observation"]["metadata"]["correctness"], json!(1.0));
    assert_eq!(last["reward"], json!(1.0), "{last}");
    let state = client.state().await.expect("state");
    assert_eq!(state["done"], json!(true));
    assert_eq!(state["task_id"], json!(tasks[1].id));
    assert!((state["return"].as_f64().expect("return") - 0.95).abs() < 1e-9, "{state}");
    // After done, a step is refused until the next reset.
    assert!(client.call("finish", json!({})).await.is_err());

    // A seed picks a task reproducibly; an unknown field or task is named.
    let a = client.reset(json!({"seed": 7})).await.expect("reset");
    let b = client.reset(json!({"seed": 7})).await.expect("reset");
    assert_eq!(a["observation"]["metadata"]["task_id"], b["observation"]["metadata"]["task_id"]);
    let err = client.reset(json!({"task": "x"})).await.expect_err("unknown field");
    assert!(err.to_string().contains("`task`"), "{err}");
    let err = client.reset(json!({"task_id": "nope"})).await.expect_err("unknown task");
    assert!(err.to_string().contains("nope"), "{err}");
    client.close().await;

    let _ = stop.send(());
    handle.await.expect("server");
    // The oracle's episode and the two abandoned by resets (ended when the next began).
    let records = RunDir::inspect(&run).expect("run").records().expect("records");
    assert_eq!(records.len(), 3, "{records:?}");
    assert_eq!(records[0].metric("correct"), Some(netdojo_core::MetricValue::Pass(true)));
    assert_eq!(records[0].task_id, tasks[1].id);
    assert_eq!(records[0].agent, "openenv");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_past_the_limit_are_refused_and_idle_ones_reclaimed() {
    let options = Options { max_sessions: 2, idle_timeout: Duration::from_millis(300), ..Options::default() };
    let (url, _, stop, handle) = start(2, options).await;
    let mut a = Client::connect(&url).await.expect("a");
    let mut b = Client::connect(&url).await.expect("b");
    a.reset(json!({})).await.expect("reset a");
    b.reset(json!({})).await.expect("reset b");
    let mut c = Client::connect(&url).await.expect("c");
    match c.state().await {
        Err(ClientError::Server { code, .. }) => assert_eq!(code, "CAPACITY_REACHED"),
        other => panic!("a third session: {other:?}"),
    }
    // Idle past the timeout: the server closes both sessions and frees their seats.
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(a.state().await.is_err(), "an idle session stayed open");
    let mut d = Client::connect(&url).await.expect("d");
    d.reset(json!({})).await.expect("a seat is free again");
    d.close().await;
    let _ = stop.send(());
    handle.await.expect("server");
}
