//! End-to-end: `cargo xtask report --html` opened in a real browser (Debian's headless
//! Chromium), `cargo xtask export` read back by inspect_ai's own `read_eval_log` (a venv from
//! `.ci/inspect-ai`, found through NETDOJO_INSPECT_PYTHON), and `cargo xtask view` answering
//! on 127.0.0.1.
//!
//! The runs checked: the directories in NETDOJO_REPORT_RUNS (`:`-separated; CI passes the
//! 120-episode oracle run of `cargo xtask eval` and its LLM run), else a fresh
//! `cargo xtask eval` (the oracle on 120 queries). A run with one hostile episode is always
//! reported beside them.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use netdojo::core::store::{RunDir, file_stem};
use netdojo::{
    Check, EndReason, EpisodeRecord, EpisodeStatus, ErrorCause, Metric, Observation, Outcome, StateCheck,
    Step, ToolCall, Trajectory,
};
use serde_json::{Value, json};

/// What an agent might send to attack whoever reads its trajectory: any of it that ran would
/// log to the console or change the page.
const HOSTILE: &str = "<script>console.error('pwned');document.title='pwned'</script><img src=x onerror=\"console.error('pwned-img')\">";

fn xtask(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask")).args(args).output().expect("run xtask");
    assert!(out.status.success(), "xtask {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// The runs to check: NETDOJO_REPORT_RUNS's, else a fresh `cargo xtask eval` in `tmp`.
fn runs(tmp: &Path) -> Vec<PathBuf> {
    if let Some(dirs) = std::env::var_os("NETDOJO_REPORT_RUNS").filter(|d| !d.is_empty()) {
        return std::env::split_paths(&dirs).collect();
    }
    let dir = tmp.join("oracle");
    xtask(&["eval", "--quiet", "--out", path(&dir)]);
    vec![dir]
}

/// A run of two episodes, one errored, whose every string an agent or a device controls is
/// hostile.
fn hostile_run(dir: &Path) -> PathBuf {
    let dir = dir.join("hostile");
    let mut store = RunDir::create(&dir, &json!({"cli": {"env": "dcgraph"}})).expect("create");
    let call = ToolCall { id: "c0".into(), ..ToolCall::new("count_nodes", json!({"kind": HOSTILE})) };
    let trajectory = Trajectory {
        task_id: "hostile".into(),
        agent: "noop".into(),
        brief: format!("brief {HOSTILE}"),
        tools: vec![],
        initial_check: StateCheck::safe(),
        steps: vec![Step {
            index: 0,
            turn: 0,
            reasoning: format!("reasoning {HOSTILE}"),
            observation: Observation::ok(
                &call,
                format!("observation {HOSTILE}"),
                Some(json!({"x": HOSTILE})),
            ),
            call,
            invalid: false,
            check: StateCheck::from_violations(vec![format!("violation {HOSTILE}")]),
            at_ms: 0,
            duration_ms: 1,
            usage: None,
        }],
        answer: Some(json!(HOSTILE)),
        end: EndReason::Finished,
        outcome: Some(Outcome {
            checks: vec![Check::new(HOSTILE, false, HOSTILE)],
            export: json!({"s": HOSTILE}),
        }),
        wall_ms: 3,
        timing: Default::default(),
        usage: Default::default(),
        end_detail: None,
        transcript: vec![json!({"role": "assistant", "content": HOSTILE})],
    };
    let record = EpisodeRecord {
        task_id: "hostile".into(),
        epoch: 0,
        application: "dcgraph".into(),
        level: 1,
        label: HOSTILE.into(),
        domain: None,
        agent: "noop".into(),
        status: EpisodeStatus::Completed,
        error: None,
        cause: None,
        end: EndReason::Finished,
        steps: 1,
        invalid_steps: 0,
        wall_ms: 3,
        timing: Default::default(),
        class: None,
        tokens: Default::default(),
        metrics: vec![Metric::pass("correct", false), Metric::pass("safe", false), Metric::count("steps", 1)],
    };
    store.append(&record, &trajectory).expect("append");
    // And an errored episode: its error is the model's (hostile) text.
    let errored = EpisodeRecord {
        task_id: "errored".into(),
        status: EpisodeStatus::Errored,
        error: Some(format!("the model answered {HOSTILE}")),
        cause: Some(ErrorCause::Agent),
        end: EndReason::Error,
        steps: 0,
        metrics: vec![],
        ..record
    };
    let trajectory =
        Trajectory { task_id: "errored".into(), steps: vec![], outcome: None, answer: None, ..trajectory };
    store.append(&errored, &trajectory).expect("append");
    dir
}

fn records(run: &Path) -> Vec<EpisodeRecord> {
    RunDir::inspect(run).expect("a run").episodes().expect("records").into_values().collect()
}

/// Chromium on PATH, or a printed skip (a failure under CI, which installs it).
fn chromium() -> Option<&'static str> {
    let found = Command::new("chromium").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        netdojo_testkit::skip_or_fail_under_ci(
            "the browser test",
            "`chromium` is not installed (apt-get install chromium; .ci/run does)",
        );
        return None;
    }
    Some("chromium")
}

/// Runs headless Chromium on `url` with `args`; returns stdout, and stderr's console lines.
fn browse(profile: &Path, args: &[&str], url: &str) -> (String, Vec<String>) {
    let mut child = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.display()))
        // Its crash database and caches go in the test's directory too, not the user's.
        .env("XDG_CONFIG_HOME", profile)
        .env("XDG_CACHE_HOME", profile)
        .args(["--enable-logging=stderr", "--v=0"])
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let (mut stdout, mut stderr) =
        (child.stdout.take().expect("stdout"), child.stderr.take().expect("stderr"));
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut out = String::new();
    let _ = stdout.read_to_string(&mut out);
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("chromium {args:?} {url} took over a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let console =
        err.join().expect("stderr").lines().filter(|l| l.contains(":CONSOLE")).map(str::to_string).collect();
    (out, console)
}

#[test]
fn the_html_report_opens_in_chromium_with_every_episode_and_no_console_message() {
    let Some(_) = chromium() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut dirs = runs(tmp.path());
    dirs.push(hostile_run(tmp.path()));
    let site = tmp.path().join("site");
    let mut args = vec!["report"];
    args.extend(dirs.iter().map(|d| path(d)));
    args.extend(["--html", path(&site)]);
    let out = xtask(&args);
    assert!(String::from_utf8_lossy(&out.stdout).contains("index.html"));
    let profile = tmp.path().join("chromium-profile");
    let url = |rel: &str| format!("file://{}/{rel}", site.display());

    // The list: its filter script ran (it writes the count) and saw every episode.
    let total: usize = dirs.iter().map(|d| records(d).len()).sum();
    let (dom, console) = browse(&profile, &["--dump-dom"], &url("index.html"));
    assert!(console.is_empty(), "console messages on the index: {console:#?}");
    assert!(
        dom.contains(&format!("{total} of {total} episodes shown")),
        "the filter did not count {total} episodes"
    );
    assert!(dom.contains("correctness vs safety"), "the plots are missing");
    // The filter, set from the URL: one label's episodes, across the runs.
    let label = records(&dirs[0]).first().map(|r| r.label.clone()).expect("a record");
    let want: usize = dirs.iter().map(|d| records(d).iter().filter(|r| r.label == label).count()).sum();
    let (dom, console) = browse(&profile, &["--dump-dom"], &format!("{}#label={label}", url("index.html")));
    assert!(console.is_empty(), "console messages on the filtered index: {console:#?}");
    assert!(dom.contains(&format!("{want} of {total} episodes shown")), "label {label}: {want} expected");

    // One episode page per run given: every step rendered with its state check.
    for (i, dir) in dirs.iter().enumerate() {
        let Some(record) = records(dir).into_iter().find(|r| r.steps > 0) else { continue };
        let page = format!("r{i}/{}.html", file_stem(&record.task_id).replace('%', "%25"));
        let (dom, console) = browse(&profile, &["--dump-dom"], &url(&page));
        assert!(console.is_empty(), "console messages on {page}: {console:#?}");
        assert_eq!(
            dom.matches("<section class=\"step").count(),
            record.steps,
            "{page}: one section per step"
        );
        assert_eq!(dom.matches("state check").count(), record.steps, "{page}: a state check per step");
    }

    // The hostile episode: its text is shown, none of it ran.
    let hostile = format!("r{}/hostile.html", dirs.len() - 1);
    let (dom, console) = browse(&profile, &["--dump-dom"], &url(&hostile));
    assert!(console.is_empty(), "the agent's markup ran: {console:#?}");
    assert!(!dom.contains("<title>pwned") && !dom.contains("<img"), "the agent's markup became markup");
    assert!(dom.contains("observation &lt;script&gt;console.error("), "the observation is shown as text");

    // A screenshot for whoever reads CI's artifacts.
    let artifacts = std::env::var_os("NETDOJO_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/artifacts"));
    fs::create_dir_all(&artifacts).expect("artifacts dir");
    let name = dirs[0].file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let shot = artifacts.join(format!("report-{name}.png"));
    let _ = fs::remove_file(&shot);
    browse(
        &profile,
        &[&format!("--screenshot={}", shot.display()), "--window-size=1280,2400"],
        &url("index.html"),
    );
    let png = fs::read(&shot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{}: not a screenshot", shot.display());
    println!("screenshot of the report: {}", shot.display());
}

/// The venv's python with inspect_ai, or a printed skip (a failure under CI).
fn inspect_python() -> Option<String> {
    netdojo_testkit::env_or_skip(
        "NETDOJO_INSPECT_PYTHON",
        "the inspect_ai test",
        "a python with inspect_ai: NETDOJO_INSPECT_PYTHON=$(bash .ci/inspect-ai); .ci/run sets it",
    )
}

/// Reads the logs of a directory back the way `inspect view` lists and opens them.
const READ_BACK: &str = r#"
import json, sys
from inspect_ai.log import list_eval_logs, read_eval_log
logs = list_eval_logs(sys.argv[1])
assert len(logs) == 1, logs
log = read_eval_log(logs[0].name)
print(json.dumps({
    "status": log.status,
    "samples": len(log.samples),
    "ids": sorted(str(s.id) for s in log.samples),
    "scores": {s.name: s.metrics["accuracy"].value for s in log.results.scores},
    "messages": sum(len(s.messages) for s in log.samples),
}))
"#;

#[test]
fn the_inspect_export_is_read_back_by_inspect_ai_and_the_jsonl_has_a_line_per_episode() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut dirs = runs(tmp.path());
    dirs.push(hostile_run(tmp.path()));
    // A run with epochs: every (task, epoch) is a line and a sample of its own.
    let epochs = tmp.path().join("epochs");
    xtask(&["eval", "--quiet", "--queries", "6", "--epochs", "2", "--out", path(&epochs)]);
    let site = tmp.path().join("epochs-report");
    xtask(&["report", path(&epochs), "--html", path(&site)]);
    let pages = fs::read_dir(site.join("r0")).expect("episode pages").count();
    assert_eq!(pages, 12, "a page per (task, epoch)");
    dirs.push(epochs);
    for dir in &dirs {
        let recs = records(dir);
        let jsonl = tmp.path().join("export.jsonl");
        xtask(&["export", "--format", "jsonl", path(dir), "--out", path(&jsonl)]);
        let lines: Vec<Value> = fs::read_to_string(&jsonl)
            .expect("jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON object"))
            .collect();
        assert_eq!(lines.len(), recs.len());
        assert!(lines.iter().all(|l| l["task_id"].is_string() && l["outcome"].is_string()));

        let Some(python) = inspect_python() else { continue };
        let logs = tmp.path().join(format!("inspect-{}", file_stem(&dir.display().to_string())));
        let out = xtask(&["export", "--format", "inspect", path(dir), "--out", path(&logs)]);
        assert!(String::from_utf8_lossy(&out.stdout).contains(".json"));
        let read = Command::new(&python).args(["-c", READ_BACK, path(&logs)]).output().expect("run python");
        assert!(
            read.status.success(),
            "inspect_ai could not read the log of {}:\n{}",
            dir.display(),
            String::from_utf8_lossy(&read.stderr)
        );
        let got: Value = serde_json::from_slice(&read.stdout).expect("the script's JSON");
        assert_eq!(got["status"], "success");
        assert_eq!(got["samples"], recs.len());
        let mut ids: Vec<String> = recs.iter().map(|r| r.task_id.clone()).collect();
        ids.sort();
        assert_eq!(got["ids"], json!(ids));
        assert!(got["scores"]["correct"].is_number(), "{got}");
        let steps: usize = recs.iter().map(|r| r.steps).sum();
        assert!(
            got["messages"].as_u64().unwrap_or(0) as usize >= 2 * steps,
            "a call and an answer per step: {got}"
        );
    }
}

#[test]
fn view_serves_the_report_on_localhost_and_prints_its_url() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = tmp.path().join("run");
    xtask(&["eval", "--queries", "12", "--quiet", "--out", path(&run)]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["view", path(&run)])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn view");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&line).to_string();
    let url = line.split_whitespace().find(|w| w.starts_with("http://127.0.0.1:")).map(str::to_string);
    let get = |url: &str, path: &str| {
        let host = url.trim_start_matches("http://").trim_end_matches('/');
        let mut s = TcpStream::connect(host).expect("connect");
        write!(s, "GET /{path} HTTP/1.1\r\nHost: {host}\r\n\r\n").expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    };
    let result =
        url.as_deref().map(|u| (get(u, ""), get(u, &format!("r0/{}.html", records(&run)[0].task_id))));
    let _ = child.kill();
    let _ = child.wait();
    let (index, episode) = result.unwrap_or_else(|| panic!("no URL printed: {line:?}"));
    assert!(index.starts_with("HTTP/1.1 200") && index.contains("12 episodes"), "{index:.300}");
    assert!(episode.starts_with("HTTP/1.1 200") && episode.contains("<h2>Steps"), "{episode:.300}");
}
