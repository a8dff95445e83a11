//! End-to-end: `cargo xtask eval --agent openai` against a real OpenAI-compatible server
//! (llama.cpp's, started by `.ci/llm-server.sh`, found through `NETDOJO_LLM_BASE_URL`). The
//! server "dies" half-way through a run: a TCP proxy in front of it stops, so the run sees
//! what a killed server looks like (connections refused and cut), then comes back on the same
//! port for `--resume`.

use std::fs;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{lines, rows, summary};
use netdojo::core::EpisodeClass;
use netdojo::core::store::RunDir;
use netdojo::{EpisodeStatus, MetricValue};

const KEY_VAR: &str = "NETDOJO_TEST_API_KEY";
const KEY: &str = "sk-netdojo-canary-7f3a9c1e5b";

fn server(test: &str) -> Option<String> {
    netdojo_testkit::env_or_skip("NETDOJO_LLM_BASE_URL", test, "see .ci/llm-server.sh; CI starts the server")
}

/// Forwards 127.0.0.1:PORT to the server until stopped; every connection is cut on stop.
struct Proxy {
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    accept: Option<thread::JoinHandle<()>>,
}

impl Proxy {
    fn start(port: u16, upstream: String) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the proxy");
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (s, held) = (stop.clone(), streams.clone());
        let accept = thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let Ok((client, _)) = listener.accept() else {
                    thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let _ = client.set_nonblocking(false);
                let Ok(server) = TcpStream::connect(&upstream) else { continue };
                for (mut from, mut to) in [
                    (client.try_clone().expect("clone"), server.try_clone().expect("clone")),
                    (server.try_clone().expect("clone"), client.try_clone().expect("clone")),
                ] {
                    thread::spawn(move || {
                        let mut buf = [0u8; 16384];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(Shutdown::Write);
                    });
                }
                held.lock().expect("lock").extend([client, server]);
            }
        });
        Self { stop, streams, accept: Some(accept) }
    }

    fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        for s in self.streams.lock().expect("lock").drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Every file under `dir`, as bytes (trajectories are CBOR).
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push((path.display().to_string(), fs::read(&path).expect("read")));
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_run_survives_a_dead_server_resume_finishes_it_and_the_key_is_written_nowhere() {
    let Some(url) = server("openai run with a dying server") else { return };
    let upstream = url.trim_start_matches("http://").split('/').next().expect("host:port").to_string();
    let port = free_port();
    let proxy = Proxy::start(port, upstream.clone());
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("run");
    let queries = 8;
    let args = [
        "eval",
        "--env",
        "dcgraph",
        "--agent",
        "openai",
        "--model",
        "smollm2-135m",
        "--base-url",
        &base_url,
        "--api-key-env",
        KEY_VAR,
        "--temperature",
        "0",
        "--max-tokens",
        "16",
        "--max-steps",
        "1",
        "--max-retries",
        "1",
        "--concurrency",
        "1",
        "--queries",
        "8",
        "--quiet",
        "--out",
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .arg(&dir)
        .env(KEY_VAR, KEY)
        .env("NETDOJO_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let episodes = dir.join("episodes.jsonl");
    let start = Instant::now();
    while lines(&episodes) < 3 {
        assert!(start.elapsed() < Duration::from_secs(600), "no progress");
        assert!(child.try_wait().expect("wait").is_none(), "the run ended early");
        thread::sleep(Duration::from_millis(50));
    }
    proxy.stop();
    let out = child.wait_with_output().expect("the run ends");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "errored episodes do not fail the run:\n{stderr}");
    assert!(stderr.contains("errored") && stderr.contains("--resume"), "{stderr}");

    let store = RunDir::open(&dir).expect("run");
    let records = store.records().expect("records");
    assert_eq!(records.len(), queries);
    let errored: Vec<_> = records.iter().filter(|r| r.status == EpisodeStatus::Errored).collect();
    assert!(errored.len() >= queries - 4 && errored.len() < queries, "{records:?}");
    for r in &errored {
        let e = r.error.as_deref().unwrap_or_default();
        assert!(e.contains("agent `openai`") && e.contains(&format!("127.0.0.1:{port}")), "{e}");
        assert_eq!(r.class(), EpisodeClass::ModelApiFailure, "{r:?}");
    }
    assert_eq!(summary(&dir)["rows"].as_array().map(|r| r.is_empty()), Some(false));

    // The server is back on the same address: the resumed run completes what errored.
    let proxy = Proxy::start(port, upstream);
    let resumed = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["eval", "--quiet", "--resume"])
        .arg(&dir)
        .env(KEY_VAR, KEY)
        .env("NETDOJO_LOG", "debug")
        .output()
        .expect("resume");
    proxy.stop();
    let resumed_err = String::from_utf8_lossy(&resumed.stderr).to_string();
    assert!(resumed.status.success(), "{resumed_err}");
    let latest = RunDir::open(&dir).expect("run").latest().expect("latest");
    assert_eq!(latest.len(), queries);
    assert!(latest.values().all(|r| r.status == EpisodeStatus::Completed), "{latest:?}");
    let s = summary(&dir);
    let all = rows(&s).last().expect("overall row");
    assert_eq!((all["n"].as_u64(), all["errored"].as_u64()), (Some(queries as u64), Some(0)), "{all}");

    // A completed episode keeps the conversation and the token counts.
    let done = latest.values().next().expect("a record");
    assert!(done.tokens.prompt_tokens > 0, "{done:?}");
    let trajectory = store.trajectory(&done.task_id).expect("trajectory");
    assert!(trajectory.transcript.iter().any(|m| m.get("response").is_some()), "{:?}", trajectory.transcript);

    // The key: sent to the server, but in no file of the run and in no log line.
    let config = fs::read_to_string(dir.join("config.json")).expect("config");
    assert!(config.contains(KEY_VAR), "the variable's name is kept, so a resume can read the key");
    for (path, bytes) in files(&dir) {
        assert!(!contains(&bytes, KEY.as_bytes()), "the API key is in {path}");
    }
    for (what, text) in [
        ("stdout", &out.stdout),
        ("stderr", &out.stderr),
        ("resume stdout", &resumed.stdout),
        ("resume stderr", &resumed.stderr),
    ] {
        assert!(!contains(text, KEY.as_bytes()), "the API key is in the {what} of xtask");
    }
}

/// NetConfBench's reasoning judge (seed 001 §3.1) on the real server: each episode's trace is
/// condensed by the model before the embedding, the metric is `reasoning` and the judge's call
/// and tokens are recorded; a judge that cannot be reached stops the run before any episode.
#[test]
fn the_reasoning_judge_condenses_each_trace_and_records_its_tokens() {
    let Some(url) = server("the reasoning judge") else { return };
    if !crate::common::frr_or_skip("the reasoning judge") {
        return;
    }
    let task = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/netconf/static-route.json");
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = tmp.path().join("run");
    let eval = |base: &str, out: &Path| {
        Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args([
                "eval",
                "--env",
                "netconf",
                "--agent",
                "oracle",
                "--quiet",
                "--judge-model",
                "smollm2-135m",
            ])
            .args(["--judge-base-url", base, "--suite"])
            .arg(&task)
            .arg("--out")
            .arg(out)
            .output()
            .expect("run xtask")
    };
    let out = eval(&url, &run);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let record: serde_json::Value =
        serde_json::from_str(fs::read_to_string(run.join("episodes.jsonl")).expect("episodes").trim())
            .expect("record");
    let metric = |name: &str| {
        record["metrics"]
            .as_array()
            .and_then(|m| m.iter().find(|x| x["name"] == name))
            .map(|x| x["value"].clone())
    };
    let reasoning =
        metric("reasoning").and_then(|v| v.as_f64()).unwrap_or_else(|| panic!("no `reasoning`: {record}"));
    assert!(reasoning > 0.0 && reasoning <= 1.0, "{record}");
    assert_eq!(metric("judge_calls"), Some(serde_json::json!(1)), "{record}");
    assert!(metric("judge_tokens").and_then(|v| v.as_u64()).is_some_and(|t| t > 0), "{record}");
    assert_eq!(metric("reasoning_concat"), None, "{record}");
    let text = fs::read_to_string(run.join("summary.txt")).expect("summary");
    assert!(text.contains("S_reasoning (reasoning)"), "{text}");

    let out = eval("http://127.0.0.1:9/v1", &tmp.path().join("nowhere"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("--judge-model"), "{stderr}");
}

/// NetPress's protocol with a real model (seed 003 §B.3): the prompt asks for a ```python
/// process_graph, the reply's code runs in the jail, and every episode completes, failed or not.
/// The tiny model's scores are low and honest; what must hold is that nothing errors, each
/// episode ran one `run_code` with what the model wrote, and a failure carries its traceback.
#[test]
fn an_llm_writes_netpress_code_and_every_episode_completes() {
    let Some(url) = server("the code interaction with an LLM") else { return };
    if !crate::code::code_or_skip("the code interaction with an LLM") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["eval", "--env", "dcgraph", "--interaction", "code", "--agent", "openai"])
        .args(["--model", "smollm2-135m", "--base-url", &url, "--temperature", "0", "--max-tokens", "192"])
        // Four episodes (update, add, count, remove): each is a CPU-bound model call of ~1,000
        // prompt tokens on CI's shared cores.
        .args(["--strategy", "single-turn", "--queries", "4", "--concurrency", "1", "--quiet", "--out"])
        .arg(&dir)
        .output()
        .expect("run xtask");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = summary(&dir);
    let all = rows(&s).last().expect("overall row");
    assert_eq!((all["n"].as_u64(), all["errored"].as_u64()), (Some(4), Some(0)), "{all}");
    let store = RunDir::open(&dir).expect("run");
    assert_eq!(store.config().expect("config")["runner"]["agent"]["config"]["settings"]["tools"], "code");
    for record in store.records().expect("records") {
        let trajectory = store.trajectory(&record.task_id).expect("trajectory");
        assert_eq!(trajectory.steps.len(), 1, "{:?}", trajectory.steps);
        let step = &trajectory.steps[0];
        assert_eq!(step.call.name, "run_code");
        if !step.observation.ok {
            assert!(!step.check.safe, "failed code fails safety, as in NetPress");
            assert!(
                step.observation.content.contains("Error") || step.observation.content.contains("killed"),
                "{}",
                step.observation.content
            );
        }
        let request = trajectory.transcript.iter().find_map(|m| m.get("request")).expect("the request");
        assert!(request.get("tools").is_none(), "the code protocol sends no tools: {request}");
        assert!(request.to_string().contains("process_graph"), "{request}");
    }
}

/// A priced run on the real server: each episode's cost is its tokens at the table's prices,
/// and a token limit that the first turn passes ends every episode as `token_budget`, its
/// calls unplayed (one model call per episode: cheap).
#[test]
fn a_priced_run_records_each_episode_s_cost_and_a_token_limit_ends_it() {
    let Some(url) = server("a priced run") else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let prices = tmp.path().join("prices.json");
    fs::write(&prices, r#"{"smollm2-135m": {"input": 1, "output": 2}}"#).expect("prices");
    let dir = tmp.path().join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "eval",
            "--env",
            "dcgraph",
            "--agent",
            "openai",
            "--model",
            "smollm2-135m",
            "--base-url",
            &url,
        ])
        .args(["--temperature", "0", "--max-tokens", "16", "--queries", "1", "--quiet"])
        .args(["--time-limit", "600", "--max-tokens-per-episode", "1", "--prices"])
        .arg(&prices)
        .arg("--out")
        .arg(&dir)
        .output()
        .expect("run xtask");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let records = RunDir::open(&dir).expect("run").records().expect("records");
    assert_eq!(records.len(), 1);
    for r in &records {
        assert_eq!(r.class(), EpisodeClass::TokenBudget, "{r:?}");
        assert_eq!(r.steps, 0, "the turn past the limit is not played: {r:?}");
        assert!(r.tokens.prompt_tokens > 0 && r.timing.agent_us > 0, "{r:?}");
        let expected = (r.tokens.prompt_tokens + 2 * r.tokens.completion_tokens) as f64 / 1e6;
        let cost = r.metric("cost_usd").map(MetricValue::as_f64).expect("a cost");
        assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}: {r:?}");
    }
    assert!(stdout.contains("token_budget 1") && stdout.contains("cost USD"), "{stdout}");
}
