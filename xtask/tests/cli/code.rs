//! End-to-end: `cargo xtask eval --env dcgraph --interaction code`, NetPress's protocol (the agent
//! writes Python over the networkx graph, run in the jail). Needs root and the venv of
//! `cargo xtask setup python`; without them the tests print why and pass, unless CI is set.

use std::process::{Command, Output};

use crate::common::{rate, rows, summary};
use netdojo::core::store::RunDir;

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask")).args(args).output().expect("run xtask")
}

/// True when the code interaction can run here, or a printed skip (a failure under CI).
pub fn code_or_skip(what: &str) -> bool {
    use netdojo::linux::preflight::{self, Need};
    if !preflight::ready_or_skip(what, &[Need::Root]) {
        return false;
    }
    let venv = netdojo::dcgraph::code::default_venv();
    if let Err(e) = netdojo::dcgraph::code::Python::from_venv(&venv) {
        netdojo_testkit::skip_or_fail_under_ci(what, e);
        return false;
    }
    true
}

fn eval(args: &[&str], dir: &std::path::Path) -> Output {
    let mut all = vec!["eval", "--env", "dcgraph", "--interaction", "code", "--quiet", "--out"];
    let dir = dir.to_str().expect("utf-8 path");
    all.push(dir);
    all.extend_from_slice(args);
    let out = xtask(&all);
    assert!(out.status.success(), "xtask {all:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

#[test]
fn the_ground_truth_code_is_correct_and_safe_on_every_label_in_both_keyings() {
    if !code_or_skip("the code oracle") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    // NetPress's keying, on the default 120 queries.
    let dir = tmp.path().join("name");
    eval(&["--agent", "oracle"], &dir);
    let s = summary(&dir);
    assert_eq!(rows(&s).len(), 13, "12 labels and the overall row: {s}");
    for row in rows(&s) {
        assert_eq!((rate(row, "correct"), rate(row, "safe")), (1.0, 1.0), "{row}");
        assert_eq!(row["errored"], 0, "{row}");
    }
    assert_eq!(rows(&s).last().expect("overall")["n"], 120);
    let store = RunDir::open(&dir).expect("run");
    assert_eq!(store.config().expect("config")["cli"]["interaction"], "code");
    let records = store.records().expect("records");
    // Latency is the code's run time.
    assert!(records.iter().all(|r| r.metric("code_s").is_some()), "{:?}", records[0]);
    let record = records.iter().find(|r| r.label == "remove").expect("a remove");
    let trajectory = store.trajectory(&record.task_id).expect("trajectory");
    assert_eq!(trajectory.steps.len(), 1);
    assert_eq!(trajectory.steps[0].call.name, "run_code");
    assert!(trajectory.brief.starts_with("Generate the Python code"), "{}", trajectory.brief);

    // The (kind, name) keying, one query per label.
    let dir = tmp.path().join("kind-name");
    eval(&["--agent", "oracle", "--keying", "kind-name", "--queries", "12"], &dir);
    let s = summary(&dir);
    let all = rows(&s).last().expect("overall");
    assert_eq!((rate(all, "correct"), rate(all, "safe"), all["n"].as_u64()), (1.0, 1.0, Some(12)), "{all}");
}

#[test]
fn writing_no_code_is_never_correct() {
    if !code_or_skip("the code interaction's no-op") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("noop");
    eval(&["--agent", "noop", "--queries", "12"], &dir);
    let s = summary(&dir);
    let all = rows(&s).last().expect("overall");
    assert_eq!((rate(all, "correct"), all["errored"].as_u64()), (0.0, Some(0)), "{all}");
}

#[test]
fn the_code_interaction_is_refused_where_it_does_not_exist() {
    let out = xtask(&["eval", "--env", "routing", "--interaction", "code", "--quiet"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("only environment `dcgraph` offers it"), "{err}");
    let out = xtask(&["eval", "--interaction", "code", "--keying", "id", "--quiet"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown graph keying `id` (known: name, kind-name)")
    );
    let out = xtask(&["eval", "--interaction", "scripts", "--quiet"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--interaction scripts: unknown interaction"));
}
