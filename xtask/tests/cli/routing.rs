//! End-to-end on real namespaces: `cargo xtask eval --env routing` as a user runs it (root).

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{lines, namespaces_of, rate, root_or_skip, rows, summary};

fn run(args: &[&str], out: &Path) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask")).args(args).arg(out).output().expect("run xtask");
    assert!(out.status.success(), "xtask {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Starts a routing run into `dir` and returns once `records` episodes are written and
/// episodes are in flight (the process holds namespaces).
fn spawn_in_flight(seed: &str, dir: &Path, records: usize) -> (std::process::Child, u32) {
    let args = [
        "eval",
        "--env",
        "routing",
        "--agent",
        "oracle",
        "--queries",
        "40",
        "--seed",
        seed,
        "--quiet",
        "--out",
    ];
    let child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let start = Instant::now();
    while lines(&dir.join("episodes.jsonl")) < records || namespaces_of(pid).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(120), "the run made no progress");
        std::thread::sleep(Duration::from_millis(2));
    }
    (child, pid)
}

const LABELS: [&str; 15] = [
    "DR", "DI", "RI", "DT", "WR", "DR+DI", "DR+RI", "DR+DT", "DR+WR", "RI+WR", "DT+WR", "DI+DT", "DI+WR",
    "RI+DT", "DI+RI",
];

#[test]
fn oracle_repairs_every_label_safely_and_noop_repairs_nothing() {
    if !root_or_skip("routing oracle") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("oracle");
    let args = [
        "eval",
        "--env",
        "routing",
        "--agent",
        "oracle",
        "--queries",
        "30",
        "--seed",
        "3",
        "--quiet",
        "--out",
    ];
    let child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(namespaces_of(pid).is_empty(), "namespaces left behind: {:?}", namespaces_of(pid));
    let s = summary(&dir);
    let labels: Vec<&str> = rows(&s).iter().filter_map(|r| r["label"].as_str()).collect();
    for label in LABELS {
        assert!(labels.contains(&label), "label {label} missing from {labels:?}");
    }
    for row in rows(&s) {
        assert_eq!(row["errored"], 0, "{row}");
        assert_eq!(rate(row, "correct"), 1.0, "{row}");
        assert_eq!(rate(row, "safe"), 1.0, "{row}");
    }
    // The agent's view: the brief shows a broken pingall in Mininet's format.
    let trajectory = fs::read_dir(dir.join("trajectories")).expect("trajectories").count();
    assert_eq!(trajectory, 30);

    let dir = tmp.path().join("noop");
    run(
        &[
            "eval",
            "--env",
            "routing",
            "--agent",
            "noop",
            "--queries",
            "15",
            "--seed",
            "3",
            "--quiet",
            "--out",
        ],
        &dir,
    );
    for row in rows(&summary(&dir)) {
        assert_eq!(row["errored"], 0, "{row}");
        assert_eq!(rate(row, "correct"), 0.0, "{row}");
        assert_eq!(rate(row, "safe"), 1.0, "{row}");
    }
}

#[test]
fn a_killed_routing_run_leaves_namespaces_that_the_next_run_sweeps_before_resuming() {
    if !root_or_skip("routing kill and resume") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("killed");
    let episodes = dir.join("episodes.jsonl");
    let (mut child, pid) = spawn_in_flight("5", &dir, 3);
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let leftovers = namespaces_of(pid);
    assert!(!leftovers.is_empty(), "a SIGKILLed run cannot clean up, so its namespaces must still be there");
    let done = lines(&episodes);
    assert!(done < 40, "the run finished before it could be killed");

    let out = run(&["eval", "--quiet", "--resume"], &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("removed") && stderr.contains("killed run"), "{stderr}");
    assert!(namespaces_of(pid).is_empty(), "the sweep must remove {leftovers:?}");
    assert_eq!(lines(&episodes), 40);
    for row in rows(&summary(&dir)) {
        assert_eq!(rate(row, "correct"), 1.0, "{row}");
    }
}

#[test]
fn ctrl_c_lets_episodes_finish_and_tears_every_namespace_down() {
    if !root_or_skip("routing Ctrl-C") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("interrupted");
    let (child, pid) = spawn_in_flight("7", &dir, 2);
    // SIGINT, as Ctrl-C sends it.
    let sent = Command::new("sh").args(["-c", &format!("kill -INT {pid}")]).status().expect("sh");
    assert!(sent.success());
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(namespaces_of(pid).is_empty(), "left behind after Ctrl-C: {:?}", namespaces_of(pid));
    assert!(
        !Path::new("/run/netdojo/episodes").read_dir().is_ok_and(|mut d| {
            d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with(&format!("ndj{pid:x}x"))))
        }),
        "markers left behind"
    );
}

/// `cargo xtask mcp serve --env routing`: a routing task's nodes behind MCP on stdio, spoken to
/// line by line as any MCP client would; `done` scores the episode into the run directory.
#[test]
fn a_routing_task_served_over_mcp_is_scored_into_its_run_directory() {
    use std::io::{BufRead, BufReader, Write};
    if !root_or_skip("mcp serve --env routing") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("served");
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["mcp", "serve", "--env", "routing", "--seed", "1", "--index", "8", "--out"])
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut call = |id: u64, method: &str, params: serde_json::Value| -> serde_json::Value {
        let request = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{request}").expect("write");
        stdin.flush().expect("flush");
        loop {
            let line = lines.next().expect("an answer").expect("read");
            let message: serde_json::Value = serde_json::from_str(&line).expect("JSON-RPC");
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    };
    let init = call(
        1,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "routing_cli", "version": "0"}}),
    );
    let network = &init["capabilities"]["experimental"]["network"];
    assert_eq!(network["cliDialect"], "linux-iproute2", "{init}");
    let shown = call(
        2,
        "tools/call",
        serde_json::json!({"name": "network.cli.exec", "arguments": {"device": "r0", "command": "ip -br addr"}}),
    );
    assert!(shown["structuredContent"]["output"].as_str().is_some_and(|o| o.contains("r0-eth1")), "{shown}");
    let done = call(3, "tools/call", serde_json::json!({"name": "done", "arguments": {}}));
    assert!(done["structuredContent"]["record"].is_object(), "{done}");
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(namespaces_of(pid).is_empty(), "namespaces left behind: {:?}", namespaces_of(pid));

    // Nothing was repaired: not correct, but safe, and recorded like an eval episode.
    let store = netdojo::core::store::RunDir::open(&dir).expect("run directory");
    let records = store.records().expect("records");
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!((record.application.as_str(), record.agent.as_str()), ("routing", "mcp"), "{record:?}");
    assert_eq!(record.steps, 1, "{record:?}");
    let pass = |name: &str| match record.metric(name) {
        Some(netdojo::core::MetricValue::Pass(p)) => p,
        other => panic!("{name}: {other:?}"),
    };
    assert!(!pass("correct") && pass("safe"), "{record:?}");
}
