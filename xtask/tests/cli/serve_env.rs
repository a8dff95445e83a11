//! `cargo xtask serve-env` against the real OpenEnv client: openenv-core 0.3.0's
//! `MCPToolClient`, unmodified, from a venv (.ci/openenv-core; NETDOJO_OPENENV_PYTHON). The
//! oracle's calls, computed here from each task's ground truth, are replayed through the client:
//! every episode must earn reward 1.0, and an episode that only finishes must earn 0.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use netdojo::StaticSuite;
use netdojo::TaskSource;
use serde_json::{Value, json};

use crate::common::{lines, namespaces_of, root_or_skip};

/// The venv's python, or a printed skip (a failure under CI).
fn python_or_skip(what: &str) -> Option<String> {
    netdojo_testkit::env_or_skip(
        "NETDOJO_OPENENV_PYTHON",
        what,
        "bash .ci/openenv-core prints a python with openenv-core 0.3.0; .ci/run sets it",
    )
}

fn xtask(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask")).args(args).output().expect("run xtask");
    assert!(out.status.success(), "xtask {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

/// The oracle's calls for each task of `suite` (netdojo-scripted's plan, `finish` included).
fn oracle_plans(suite: &Path) -> Vec<Value> {
    let suite = StaticSuite::load(suite).expect("suite");
    suite
        .tasks()
        .map(|task| {
            let task = task.expect("task");
            let calls: Vec<Value> = netdojo::scripted::oracle_plan(&task)
                .into_iter()
                .map(|c| json!({"name": c.name, "arguments": c.arguments}))
                .collect();
            json!({"task_id": task.id, "calls": calls})
        })
        .collect()
}

/// A running `serve-env`, stopped as Ctrl-C stops it when dropped (a failed assertion too).
struct Served(Option<Child>);

impl Served {
    /// Stops it and checks that it exited cleanly.
    fn stop(mut self) {
        let status = stop(self.0.take().expect("running"));
        assert!(status.success(), "serve-env exited with {status}");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(child) = self.0.take() {
            stop(child);
        }
    }
}

/// `serve-env` on a free port; returns it and its URL (its first line of output).
fn serve(env: &str, suite: &Path, run: &Path) -> (Served, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["serve-env", "--env", env, "--port", "0", "--suite"])
        .arg(suite)
        .arg("--out")
        .arg(run)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn serve-env");
    let stdout = child.stdout.take().expect("stdout");
    let mut url = String::new();
    BufReader::new(stdout).read_line(&mut url).expect("read the URL");
    let served = Served(Some(child));
    assert!(url.starts_with("http://127.0.0.1:"), "serve-env printed {url:?}");
    (served, url.trim().to_string())
}

/// Stops `serve-env` as Ctrl-C does: it ends its sessions' episodes, then exits.
fn stop(mut child: Child) -> std::process::ExitStatus {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGINT);
    }
    child.wait().expect("wait for serve-env")
}

/// Runs the driver through the real client; one JSON line per episode.
fn drive(python: &str, url: &str, plans: &[Value], workers: usize, dir: &Path) -> Vec<Value> {
    let path = dir.join(format!("plans-{}.json", plans.len()));
    std::fs::write(&path, serde_json::to_vec(plans).expect("plans")).expect("write plans");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cli/openenv_client.py");
    let out = Command::new(python)
        .arg(script)
        .arg(url)
        .arg(&path)
        .arg(workers.to_string())
        .output()
        .expect("run the OpenEnv client");
    assert!(out.status.success(), "the OpenEnv client failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// 20 oracle episodes through the client, then one that only calls `finish`.
fn oracle_and_noop(env: &str, workers: usize) -> (u32, PathBuf) {
    let python = python_or_skip(&format!("serve-env {env}")).expect("checked by the caller");
    let dir = tempfile::tempdir().expect("tempdir").keep();
    let suite = dir.join("suite.jsonl");
    let suite_arg = suite.to_str().expect("utf-8 path");
    xtask(&["generate", "--env", env, "--queries", "20", "--seed", "11", "--out", suite_arg]);
    let plans = oracle_plans(&suite);
    assert_eq!(plans.len(), 20);
    let run = dir.join("run");
    let (served, url) = serve(env, &suite, &run);
    let pid = served.0.as_ref().map_or(0, Child::id);

    let episodes = drive(&python, &url, &plans, workers, &dir);
    assert_eq!(episodes.len(), 20, "{episodes:?}");
    for e in &episodes {
        assert_eq!(e["done"], json!(true), "{e}");
        assert_eq!(e["reward"], json!(1.0), "the oracle's episode earned less than 1: {e}");
        assert_eq!(e["info"]["correctness"], json!(1.0), "{e}");
        assert_eq!(e["info"]["truncated"], json!(false), "{e}");
        assert_eq!(e["state"]["episode_id"], e["episode_id"], "{e}");
    }
    let noop = json!([{"task_id": plans[0]["task_id"], "calls": [{"name": "finish", "arguments": {}}]}]);
    let noop = drive(&python, &url, noop.as_array().expect("array"), 1, &dir);
    assert_eq!(noop.len(), 1);
    assert_eq!(noop[0]["reward"], json!(0.0), "an episode that did nothing earned a reward: {}", noop[0]);
    assert_eq!(noop[0]["done"], json!(true));

    served.stop();
    // Every episode recorded, as eval records them.
    assert_eq!(lines(&run.join("episodes.jsonl")), 21);
    (pid, dir)
}

#[test]
fn the_openenv_client_replays_the_oracle_on_dcgraph() {
    if python_or_skip("serve-env dcgraph").is_none() {
        return;
    }
    let (_, dir) = oracle_and_noop("dcgraph", 4);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_openenv_client_replays_the_oracle_on_routing() {
    if !root_or_skip("serve-env routing") || python_or_skip("serve-env routing").is_none() {
        return;
    }
    let (pid, dir) = oracle_and_noop("routing", 2);
    assert!(namespaces_of(pid).is_empty(), "serve-env left namespaces: {:?}", namespaces_of(pid));
    let _ = std::fs::remove_dir_all(dir);
}

/// `generate --with-oracle-trajectories`: the oracle's solved episodes as chat fine-tuning data.
#[test]
fn generate_writes_the_oracles_trajectories_as_chat_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let suite = dir.path().join("suite.jsonl");
    let chat = dir.path().join("chat.jsonl");
    xtask(&[
        "generate",
        "--env",
        "dcgraph",
        "--queries",
        "12",
        "--seed",
        "4",
        "--out",
        suite.to_str().expect("utf-8"),
        "--with-oracle-trajectories",
        chat.to_str().expect("utf-8"),
    ]);
    let text = std::fs::read_to_string(&chat).expect("chat.jsonl");
    let episodes: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(episodes.len(), 12, "the oracle solves every task");
    for line in &episodes {
        assert_eq!(line["metadata"]["outcome"], json!("solved"), "{line}");
        let messages = line["messages"].as_array().expect("messages");
        assert_eq!(messages[0]["role"], json!("system"));
        assert_eq!(messages[1]["role"], json!("user"));
        let last = messages.last().expect("a last message");
        assert_eq!(last["tool_calls"][0]["function"]["name"], json!("finish"), "{line}");
        let tools: Vec<&str> = line["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        assert!(tools.contains(&"finish") && tools.len() > 1, "{tools:?}");
    }
    assert_eq!(lines(&dir.path().join("chat.jsonl.run/episodes.jsonl")), 12);
}
