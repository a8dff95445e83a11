//! End-to-end: the `xtask` binary as a user runs it, on temporary run directories.

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{lines, rate, rows, summary};
use netdojo::core::store::RunDir;
use serde_json::Value;

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask")).args(args).output().expect("run xtask")
}

fn ok(args: &[&str]) -> Output {
    let out = xtask(args);
    assert!(out.status.success(), "xtask {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Starts `xtask ARGS OUT` and returns once OUT/episodes.jsonl holds `records` lines.
fn spawn_and_wait(args: &[&str], out: &Path, records: usize) -> (std::process::Child, std::path::PathBuf) {
    let child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let episodes = out.join("episodes.jsonl");
    let start = Instant::now();
    while lines(&episodes) < records {
        assert!(start.elapsed() < Duration::from_secs(120), "the run made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    (child, episodes)
}

const LABELS: [&str; 12] = [
    "add",
    "count",
    "list",
    "rank",
    "remove",
    "update",
    "remove-count",
    "remove-list",
    "remove-rank",
    "add-count",
    "add-list",
    "add-rank",
];

#[test]
fn oracle_is_correct_and_safe_on_every_label_and_the_run_directory_is_complete() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("run");
    let out = ok(&[
        "eval",
        "--env",
        "dcgraph",
        "--agent",
        "oracle",
        "--queries",
        "300",
        "--seed",
        "1",
        "--quiet",
        "--out",
    ]
    .iter()
    .copied()
    .chain([dir.to_str().expect("utf-8 path")])
    .collect::<Vec<_>>());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("correct (95% CI)") && stdout.contains(dir.to_str().expect("path")), "{stdout}");

    let s = summary(&dir);
    let labels: Vec<&str> = rows(&s).iter().filter_map(|r| r["label"].as_str()).collect();
    for label in LABELS {
        assert!(labels.contains(&label), "label {label} missing from {labels:?}");
    }
    for row in rows(&s) {
        assert_eq!(rate(row, "correct"), 1.0, "{row}");
        assert_eq!(rate(row, "safe"), 1.0, "{row}");
        assert_eq!(row["errored"], 0, "{row}");
    }
    let all = rows(&s).last().expect("overall");
    assert_eq!(all["n"], 300);
    // Every episode's class, and where its time went.
    assert_eq!(all["classes"], serde_json::json!({"solved": 300}), "{all}");
    let (sum, spent) = (&all["spent"]["sum"], &all["spent"]);
    assert_eq!(spent["episodes"], 300);
    let part = |name: &str| sum[name].as_f64().unwrap_or_else(|| panic!("no {name} in {spent}"));
    let parts: f64 =
        ["setup_s", "agent_s", "tools_s", "checks_s", "evaluate_s", "close_s"].map(part).iter().sum();
    // Each wall time is cut to whole milliseconds, its parts to microseconds.
    assert!(part("setup_s") > 0.0 && part("checks_s") > 0.0 && parts < part("wall_s") + 0.3, "{spent}");
    assert!(stdout.contains("outcomes: solved 300") && stdout.contains("  state checks s"), "{stdout}");

    assert_eq!(lines(&dir.join("episodes.jsonl")), 300);
    assert_eq!(fs::read_dir(dir.join("trajectories")).expect("trajectories").count(), 300);
    assert!(dir.join("summary.txt").is_file());
    let store = RunDir::open(&dir).expect("open run");
    let config = store.config().expect("config");
    assert_eq!(config["cli"]["seed"], 1);
    assert_eq!(config["runner"]["agent"]["name"], "oracle");
    // A mutating task's trajectory holds the oracle's tool calls and a safe check after each.
    let record =
        store.records().expect("records").into_iter().find(|r| r.label == "add-count").expect("add-count");
    let trajectory = store.trajectory(&record.task_id).expect("trajectory");
    // The add goes in as one `batch` (node + edge), so no step leaves an isolated node.
    assert!(
        trajectory
            .steps
            .iter()
            .any(|s| s.call.name == "batch" && s.call.arguments.to_string().contains("add_node")),
        "{:?}",
        trajectory.steps
    );
    assert!(trajectory.steps.iter().all(|s| s.check.safe && s.observation.ok));
    assert!(trajectory.brief.contains("EK_PACKET_SWITCH"), "{}", trajectory.brief);
    assert!(trajectory.answer.is_some());
}

#[test]
fn noop_is_never_correct_and_never_unsafe() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("run");
    ok(&[
        "eval",
        "--agent",
        "noop",
        "--queries",
        "60",
        "--seed",
        "2",
        "--quiet",
        "--out",
        dir.to_str().expect("path"),
    ]);
    let s = summary(&dir);
    for row in rows(&s) {
        // Every label either changes the graph or asks for an answer.
        assert_eq!(rate(row, "correct"), 0.0, "{row}");
        assert_eq!(rate(row, "safe"), 1.0, "{row}");
    }
}

#[test]
fn random_agent_is_caught_breaking_constraints() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("run");
    ok(&[
        "eval",
        "--agent",
        "random",
        "--random-steps",
        "8",
        "--queries",
        "96",
        "--seed",
        "4",
        "--quiet",
        "--out",
        dir.to_str().expect("path"),
    ]);
    let store = RunDir::open(&dir).expect("open");
    let records = store.records().expect("records");
    let unsafe_ids: Vec<&str> = records
        .iter()
        .filter(|r| r.metric("safe") == Some(netdojo::MetricValue::Pass(false)))
        .map(|r| r.task_id.as_str())
        .collect();
    assert!(!unsafe_ids.is_empty(), "96 episodes of random mutations and not one unsafe");
    for id in unsafe_ids {
        let t = store.trajectory(id).expect("trajectory");
        let first_unsafe = t.steps.iter().find(|s| !s.check.safe).expect("an unsafe step");
        assert!(!first_unsafe.check.violations.is_empty());
        assert!(
            ["add_node", "add_edge", "remove_node", "remove_edge", "update_node", "batch"]
                .contains(&first_unsafe.call.name.as_str()),
            "a read-only tool cannot break the graph: {:?}",
            first_unsafe.call
        );
    }
}

#[test]
fn a_killed_run_resumes_to_the_summary_of_an_uninterrupted_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (full, killed) = (tmp.path().join("full"), tmp.path().join("killed"));
    let args = ["eval", "--queries", "600", "--seed", "9", "--quiet", "--concurrency", "2", "--out"];
    ok(&args.iter().copied().chain([full.to_str().expect("path")]).collect::<Vec<_>>());

    let (mut child, episodes) = spawn_and_wait(&args, &killed, 30);
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let done_when_killed = lines(&episodes);
    assert!(done_when_killed < 600, "the run finished before it could be killed");

    ok(&["eval", "--quiet", "--resume", killed.to_str().expect("path")]);
    assert_eq!(lines(&episodes), 600, "resume must redo nothing and lose nothing");
    let strip = |mut s: Value| {
        for row in s["rows"].as_array_mut().expect("rows") {
            // Wall-clock times, and so their means and intervals and the time spent, differ
            // between runs.
            row["means"].take();
            row["mean_ci95"].take();
            row["spent"].take();
        }
        s
    };
    assert_eq!(strip(summary(&killed)), strip(summary(&full)));
}

#[test]
fn generated_suites_are_reproducible_and_run_like_the_generator() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = |name: &str| tmp.path().join(name).to_str().expect("path").to_string();
    ok(&["generate", "--queries", "24", "--seed", "5", "--out", &path("a.jsonl")]);
    ok(&["generate", "--queries", "24", "--seed", "5", "--out", &path("b.jsonl")]);
    ok(&["generate", "--queries", "24", "--seed", "6", "--out", &path("c.jsonl")]);
    // --stats: the answer distribution per label, beside the same tasks.
    let stats = ok(&["generate", "--queries", "24", "--seed", "5", "--stats", "--out", &path("d.jsonl")]);
    let text = String::from_utf8_lossy(&stats.stderr);
    let rank =
        text.lines().find(|l| l.starts_with("rank ")).unwrap_or_else(|| panic!("no rank line:\n{text}"));
    assert!(rank.contains("ordered: 2") && rank.contains("EK_"), "{text}");
    let read = |name: &str| fs::read(tmp.path().join(name)).expect("read");
    assert_eq!(read("a.jsonl"), read("d.jsonl"), "--stats changes no task");
    assert_eq!(read("a.jsonl"), read("b.jsonl"), "same seed, same bytes");
    assert_ne!(read("a.jsonl"), read("c.jsonl"));
    assert_eq!(lines(&tmp.path().join("a.jsonl")), 24);

    ok(&["eval", "--suite", &path("a.jsonl"), "--quiet", "--out", &path("run")]);
    let s = summary(&tmp.path().join("run"));
    let all = rows(&s).last().expect("overall");
    assert_eq!((all["n"].as_u64(), rate(all, "correct")), (Some(24), 1.0));
}

#[test]
fn bad_input_gives_one_clear_line_and_a_failure_code() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bad_suite = tmp.path().join("bad.jsonl");
    fs::write(&bad_suite, "{\"id\": \"x\"}\n").expect("write");
    let bad = bad_suite.to_str().expect("path");
    let cases: [(&[&str], &str); 13] = [
        (
            &["eval", "--env", "nope"],
            "unknown environment `nope` (known: dcgraph, routing, netconf, k8s, incident, gns3)",
        ),
        (
            &["eval", "--agent", "gpt"],
            "unknown agent `gpt` (known: oracle, noop, random, openai, ollama, mcp)",
        ),
        (&["eval", "--agent", "mcp"], "--agent mcp needs the agent server: --agent-command"),
        (&["eval", "--agent", "mcp", "--agent-command", "\"unbalanced"], "unbalanced quotes"),
        (&["eval", "--suite", "/nonexistent/suite.jsonl"], "/nonexistent/suite.jsonl"),
        (&["eval", "--suite", bad], "bad.jsonl:1"),
        (&["eval", "--resume", "/nonexistent/run"], "/nonexistent/run"),
        (&["eval", "--queries", "many"], "invalid value 'many' for '--queries"),
        (&["eval", "--epochs", "0"], "invalid value '0' for '--epochs <K>'"),
        (&["compare", "/nonexistent/a", "/nonexistent/b"], "compare /nonexistent/a"),
        (
            &["eval", "--domain", "routing,bgp"],
            "--domain bgp: unknown domain (domains: routing, policy, security, qos)",
        ),
        // dcgraph's queries have no domain: a domain filter keeps none, and says so.
        (&["eval", "--domain", "qos", "--queries", "3"], "no task of 3 generated queries matches the filter"),
        // --env gns3 looks the task up in the GNS3 suite (relative: not there from the test's
        // directory).
        (&["mcp", "serve", "--env", "gns3", "--task", "nope"], "--suite testdata/gns3: "),
    ];
    for (args, expected) in cases {
        let out = xtask(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(stderr.contains(expected), "{args:?}: expected {expected:?} in:\n{stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn level_and_label_filters_select_the_generated_queries_they_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let all = tmp.path().join("all");
    ok(&["eval", "--queries", "36", "--quiet", "--out", all.to_str().expect("path")]);
    let records = |dir: &Path| -> Vec<Value> {
        fs::read_to_string(dir.join("episodes.jsonl"))
            .expect("episodes")
            .lines()
            .map(|l| serde_json::from_str(l).expect("record"))
            .collect()
    };
    let everything = records(&all);
    let dir = tmp.path().join("filtered");
    ok(&[
        "eval",
        "--queries",
        "36",
        "--level",
        "2",
        "--label",
        "remove-count,add-rank",
        "--quiet",
        "--out",
        dir.to_str().expect("path"),
    ]);
    let kept = records(&dir);
    let expected: Vec<&Value> = everything
        .iter()
        .filter(|r| {
            r["level"] == 2 && ["remove-count", "add-rank"].contains(&r["label"].as_str().unwrap_or(""))
        })
        .collect();
    assert!(!expected.is_empty(), "36 queries hold some of these labels");
    // Episodes finish in any order (four run at once): compare the sets of tasks.
    let ids = |rs: &[&Value]| {
        let mut ids: Vec<String> = rs.iter().map(|r| r["task_id"].to_string()).collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&kept.iter().collect::<Vec<_>>()), ids(&expected));
}

#[test]
fn a_run_written_before_the_format_field_reports_exports_and_resumes_and_an_unknown_major_is_refused() {
    // testdata/runs/before-format: `cargo xtask eval --queries 4` of the commit before the run
    // format's version, killed after three episodes (its fourth record, trajectory and summary
    // removed).
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/runs/before-format");
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = tmp.path().join("run");
    fs::create_dir_all(run.join("trajectories")).expect("mkdir");
    for entry in fs::read_dir(fixture.join("trajectories")).expect("the fixture's trajectories") {
        let entry = entry.expect("entry");
        fs::copy(entry.path(), run.join("trajectories").join(entry.file_name())).expect("copy");
    }
    for name in ["config.json", "episodes.jsonl"] {
        fs::copy(fixture.join(name), run.join(name)).expect("copy");
    }
    let path = run.to_str().expect("path");
    let report = ok(&["report", path]);
    assert!(String::from_utf8_lossy(&report.stdout).contains("correct (95% CI)"));
    ok(&["export", "--format", "jsonl", path]);
    assert_eq!(lines(&run.join("episodes.export.jsonl")), 3);

    ok(&["eval", "--quiet", "--resume", path]);
    let episodes = fs::read_to_string(run.join("episodes.jsonl")).expect("episodes");
    assert_eq!(episodes.lines().count(), 4, "the resumed run adds the missing episode");
    assert!(episodes.lines().last().is_some_and(|l| l.starts_with(r#"{"format":"1.0","#)), "{episodes}");
    assert_eq!(rows(&summary(&run)).last().expect("the overall row")["n"], 4);

    // A run of a major version this netdojo does not know: every reader refuses, naming it.
    let config = fs::read_to_string(run.join("config.json")).expect("config");
    fs::write(run.join("config.json"), config.replacen('{', r#"{"format": "2.0","#, 1)).expect("write");
    for args in [
        &["report", path][..],
        &["export", "--format", "jsonl", path],
        &["eval", "--quiet", "--resume", path],
    ] {
        let out = xtask(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} read a run of format 2.0");
        assert!(stderr.contains("config.json: this run is in run format 2.0"), "{args:?}: {stderr}");
    }
}

#[test]
fn ctrl_c_finishes_the_episodes_in_flight_and_says_how_to_resume() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("run");
    let (child, episodes) =
        spawn_and_wait(&["eval", "--queries", "600", "--seed", "11", "--quiet", "--out"], &dir, 20);
    // SIGINT, as Ctrl-C sends it (the shell's builtin kill: /bin/kill is not on every Debian).
    let sent = Command::new("sh").args(["-c", &format!("kill -INT {}", child.id())]).status().expect("sh");
    assert!(sent.success());
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains(&format!("cargo xtask eval --resume {}", dir.display())), "{stderr}");
    let text = fs::read_to_string(&episodes).expect("episodes");
    assert!(text.ends_with('\n'), "a clean stop leaves no torn line");
    let done = lines(&episodes);
    assert!(done < 600, "the run finished before the signal");

    ok(&["eval", "--quiet", "--resume", dir.to_str().expect("path")]);
    assert_eq!(lines(&episodes), 600);
}

#[test]
fn an_agent_behind_mcp_scores_like_the_same_agent_in_process() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = |name: &str| tmp.path().join(name).to_str().expect("path").to_string();
    ok(&["generate", "--queries", "24", "--seed", "13", "--out", &path("s.jsonl")]);
    ok(&["eval", "--suite", &path("s.jsonl"), "--quiet", "--out", &path("local")]);
    // The agent server is this same binary, started per episode on stdio, without a shell.
    let command = format!(
        "'{}' mcp serve-agent --agent oracle --suite '{}'",
        env!("CARGO_BIN_EXE_xtask"),
        path("s.jsonl")
    );
    ok(&[
        "eval",
        "--suite",
        &path("s.jsonl"),
        "--agent",
        "mcp",
        "--agent-command",
        &command,
        "--quiet",
        "--out",
        &path("remote"),
    ]);
    let per_task = |dir: &str| {
        let store = RunDir::open(Path::new(&path(dir))).expect("open");
        let mut records: Vec<Value> = store
            .records()
            .expect("records")
            .into_iter()
            .map(|r| {
                let metrics: Vec<_> = r.metrics.iter().filter(|m| m.name != "wall_s").collect();
                serde_json::json!({
                    "task": r.task_id, "status": r.status, "end": r.end, "error": r.error, "metrics": metrics,
                })
            })
            .collect();
        records.sort_by_key(|r| r["task"].to_string());
        records
    };
    let (local, remote) = (per_task("local"), per_task("remote"));
    assert_eq!(local.len(), 24);
    assert_eq!(remote, local);
    let config = RunDir::open(Path::new(&path("remote"))).expect("open").config().expect("config");
    assert_eq!(config["runner"]["agent"]["name"], "mcp");
    assert_eq!(config["runner"]["agent"]["config"]["endpoint"]["transport"], "stdio");
    assert_eq!(rate(rows(&summary(Path::new(&path("remote")))).last().expect("overall"), "correct"), 1.0);
}

#[test]
fn prices_and_episode_limits_are_checked_before_any_episode() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let prices = tmp.path().join("prices.json");
    fs::write(&prices, r#"{"gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.6}}"#)
        .expect("write");
    let prices = prices.to_str().expect("path");
    let bad = tmp.path().join("bad.json");
    fs::write(&bad, r#"{"m": {"input": "cheap", "output": 1}}"#).expect("write");
    let bad = bad.to_str().expect("path");
    // No server listens on port 9: each error comes before the agent would call one.
    let openai = ["eval", "--agent", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model"];
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec!["eval", "--prices", "/nonexistent/prices.json"], "--prices: /nonexistent/prices.json".into()),
        (vec!["eval", "--prices", bad], format!("--prices: {bad}: not a price table")),
        (vec!["eval", "--prices", prices], "agent `oracle` calls no model: there is nothing to price".into()),
        (
            [&openai[..], &["gpt-5", "--prices", prices]].concat(),
            format!("{prices}: no price for model `gpt-5` (the table prices: gpt-4o-mini)"),
        ),
        (vec!["eval", "--max-cost-per-episode", "1"], "--prices <FILE>".into()),
        (
            vec!["eval", "--max-cost-per-episode", "0", "--prices", prices],
            "--max-cost-per-episode 0: give a positive".into(),
        ),
        (vec!["eval", "--max-tokens-per-episode", "0"], "--max-tokens-per-episode 0".into()),
    ];
    for (args, expected) in cases {
        let out = xtask(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(stderr.contains(&expected), "{args:?}: expected {expected:?} in:\n{stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// Every (task, epoch) of a run's episodes.jsonl, in file order.
fn episode_keys(dir: &Path) -> Vec<(String, u64)> {
    fs::read_to_string(dir.join("episodes.jsonl"))
        .expect("episodes")
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).expect("record");
            (r["task_id"].as_str().expect("id").to_string(), r["epoch"].as_u64().expect("epoch"))
        })
        .collect()
}

#[test]
fn epochs_give_pass_at_k_and_pass_hat_k_and_resume_by_task_and_epoch() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("run");
    let out =
        ok(&["eval", "--queries", "12", "--epochs", "3", "--quiet", "--out", dir.to_str().expect("path")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("pass@3") && stdout.contains("pass^3") && stdout.contains("3 epochs"),
        "{stdout}"
    );
    let mut keys = episode_keys(&dir);
    assert_eq!(keys.len(), 36);
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 36, "each (task, epoch) once");
    assert_eq!(fs::read_dir(dir.join("trajectories")).expect("trajectories").count(), 36);
    let s = summary(&dir);
    assert_eq!(s["epochs"], 3);
    let all = rows(&s).last().expect("overall");
    assert_eq!((all["n"].as_u64(), all["tasks"].as_u64(), all["k"].as_u64()), (Some(36), Some(12), Some(3)));
    // The oracle solves every task on every attempt.
    assert_eq!((all["pass_at_k"].as_f64(), all["pass_hat_k"].as_f64()), (Some(1.0), Some(1.0)), "{all}");
    for row in rows(&s) {
        assert!(row["pass_at_k"].is_f64() && row["pass_hat_k"].is_f64(), "per label too: {row}");
    }
    // Clustered: with every epoch agreeing, the 12 tasks count once each, not 36 times.
    let lo = all["rates"]["correct"]["ci95"][0].as_f64().expect("lo");
    assert!((lo - 12.0 / (12.0 + 1.96 * 1.96)).abs() < 1e-9, "{all}");

    // A run cut short: the first 20 episodes and a torn line. Resume redoes exactly the rest.
    let text = fs::read_to_string(dir.join("episodes.jsonl")).expect("episodes");
    let kept: String = text.split_inclusive('\n').take(20).collect();
    fs::write(dir.join("episodes.jsonl"), format!("{kept}{{\"task_id\":\"dcgr")).expect("cut");
    ok(&["eval", "--quiet", "--resume", dir.to_str().expect("path")]);
    let mut resumed = episode_keys(&dir);
    assert_eq!(resumed.len(), 36, "nothing redone, nothing lost");
    resumed.sort();
    assert_eq!(resumed, keys);

    // A random agent draws anew each epoch: its attempts at a task differ.
    let random = tmp.path().join("random");
    ok(&[
        "eval",
        "--agent",
        "random",
        "--queries",
        "4",
        "--epochs",
        "2",
        "--quiet",
        "--out",
        random.to_str().expect("path"),
    ]);
    let store = RunDir::open(&random).expect("open");
    let id = &episode_keys(&random)[0].0;
    let calls = |epoch| {
        let t = store.trajectory_of(id, epoch).expect("trajectory");
        t.steps.iter().map(|s| s.call.clone()).collect::<Vec<_>>()
    };
    assert_ne!(calls(0), calls(1));
}

#[test]
fn compare_pairs_two_runs_of_a_frozen_suite() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = |name: &str| tmp.path().join(name).to_str().expect("path").to_string();
    ok(&["generate", "--queries", "12", "--seed", "5", "--name", "tiny", "--out", &path("s.jsonl")]);
    let manifest: Value =
        serde_json::from_str(&fs::read_to_string(tmp.path().join("s.manifest.json")).expect("manifest"))
            .expect("manifest is JSON");
    assert_eq!((manifest["suite"].as_str(), manifest["version"].as_str()), (Some("tiny"), Some("1")));
    assert_eq!((manifest["seed"].as_u64(), manifest["count"].as_u64()), (Some(5), Some(12)));
    assert_eq!(manifest["generator"]["name"], "dcgraph");
    assert_eq!(manifest["tasks"].as_array().map(Vec::len), Some(12));

    ok(&["eval", "--suite", &path("s.jsonl"), "--agent", "noop", "--quiet", "--out", &path("a")]);
    let out = ok(&["eval", "--suite", &path("s.jsonl"), "--quiet", "--out", &path("b")]);
    let config: Value =
        serde_json::from_str(&fs::read_to_string(tmp.path().join("b/config.json")).expect("config"))
            .expect("config is JSON");
    assert_eq!(config["suite"]["hash"], manifest["hash"], "eval records the frozen suite's hash");
    assert_eq!(config["suite"]["frozen"], true);
    assert!(String::from_utf8_lossy(&out.stdout).contains("suite: tiny v1, 12 tasks, sha256:"));
    let report = ok(&["report", &path("a")]);
    assert!(String::from_utf8_lossy(&report.stdout).contains("suite: tiny v1"));

    // noop (A) fails all 12, the oracle (B) solves all 12: 12 flips, none back.
    let out = ok(&["compare", &path("a"), &path("b"), "--json", &path("c.json")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("paired: 12 episodes") && stdout.contains("+100.0"), "{stdout}");
    let c: Value =
        serde_json::from_str(&fs::read_to_string(tmp.path().join("c.json")).expect("json")).expect("json");
    let correct = &c["rates"]["correct"];
    assert_eq!(
        (correct["a"].as_f64(), correct["b"].as_f64(), correct["diff"].as_f64()),
        (Some(0.0), Some(1.0), Some(1.0))
    );
    // Exact McNemar on 12 discordant pairs, all one way: 2·(1/2)¹².
    let p = correct["p_value"].as_f64().expect("p_value");
    assert!((p - 2.0 / 4096.0).abs() < 1e-15, "{p}");
    assert_eq!(
        (correct["gained"].as_array().map(Vec::len), correct["lost"].as_array().map(Vec::len)),
        (Some(12), Some(0))
    );
    assert_eq!(c["rates"]["safe"]["diff"].as_f64(), Some(0.0));

    // Another suite: refused unless asked for.
    ok(&["generate", "--queries", "12", "--seed", "6", "--out", &path("t.jsonl")]);
    ok(&["eval", "--suite", &path("t.jsonl"), "--quiet", "--out", &path("other")]);
    let refused = xtask(&["compare", &path("a"), &path("other")]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("different suites"), "{stderr}");
    assert!(stderr.contains("--allow-different-suites"), "{stderr}");
    // Allowed, they still share no task id.
    let allowed = xtask(&["compare", &path("a"), &path("other"), "--allow-different-suites"]);
    assert!(String::from_utf8_lossy(&allowed.stderr).contains("no episode completed in both runs"));

    // A frozen suite edited after the fact runs with a warning, and says so.
    let text = fs::read_to_string(tmp.path().join("s.jsonl")).expect("suite");
    fs::write(tmp.path().join("s.jsonl"), text.replacen("\"query\":\"", "\"query\":\"Please: ", 1))
        .expect("edit");
    let out = ok(&["eval", "--suite", &path("s.jsonl"), "--quiet", "--out", &path("edited")]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("has changed since it was frozen"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("(changed since it was frozen)"));
}
