//! The NetConfBench suite validates itself on real FRR: the oracle (the ground truth) passes
//! every testcase of every task with command F1 = 1, and the no-op agent fails at least one in every task: a task
//! that does not discriminate is a broken task.

use std::path::Path;
use std::process::Command;

use crate::common::{frr_or_skip, lines};

fn records(agent: &str, dir: &Path) -> Vec<serde_json::Value> {
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/netconf");
    // The no-op agent's episodes spend their time waiting: a failing task's testcases are
    // retried every 250 ms until the network is provably quiescent (netdojo-netconf's `quiet`)
    // or the convergence time (10 s) is up, reading the daemons' vty sockets. More of them at
    // once cost little CPU and cut this test's time; the oracle keeps the default, so its
    // timing testcases (QoS) run on a machine no busier than an ordinary eval's.
    let concurrency = if agent == "noop" { "8" } else { "4" };
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "eval",
            "--env",
            "netconf",
            "--agent",
            agent,
            "--quiet",
            "--concurrency",
            concurrency,
            "--suite",
        ])
        .arg(&suite)
        .arg("--out")
        .arg(dir)
        .output()
        .expect("run xtask");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(dir.join("episodes.jsonl")).expect("episodes");
    let tasks = std::fs::read_dir(&suite)
        .expect("suite")
        .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json")))
        .count();
    assert!(tasks >= 40, "the suite has {tasks} tasks");
    assert_eq!(lines(&dir.join("episodes.jsonl")), tasks);
    text.lines().map(|l| serde_json::from_str(l).expect("record")).collect()
}

fn metric(record: &serde_json::Value, name: &str) -> serde_json::Value {
    record["metrics"]
        .as_array()
        .and_then(|m| m.iter().find(|x| x["name"] == name))
        .map(|x| x["value"].clone())
        .unwrap_or_default()
}

#[test]
fn the_oracle_passes_every_testcase_and_noop_fails_one_in_every_task() {
    if !frr_or_skip("netconf suite") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let oracle = tmp.path().join("oracle");
    let records_of_oracle = records("oracle", &oracle);
    // The summary: a row per domain, and NetConfBench's tuple per domain and overall.
    let summary = crate::common::summary(&oracle);
    for domain in ["routing", "policy", "security", "qos"] {
        let row = crate::common::rows(&summary)
            .iter()
            .find(|r| r["domain"] == domain)
            .unwrap_or_else(|| panic!("no {domain} row: {summary}"));
        let n = records_of_oracle.iter().filter(|r| r["domain"] == domain).count();
        assert!(n > 0 && row["n"] == n, "{domain}: {row}");
        assert_eq!(row["means"]["command_f1"], 1.0, "{row}");
        assert_eq!(row["mean_ci95"]["checks_passed"], serde_json::json!([1.0, 1.0]), "{row}");
    }
    let text = std::fs::read_to_string(oracle.join("summary.txt")).expect("summary.txt");
    for cell in
        ["S_reasoning (reasoning_concat)", "S_command (command_f1)", "S_testcase (checks_passed)", "qos"]
    {
        assert!(text.contains(cell), "{cell} not in:\n{text}");
    }
    for r in records_of_oracle {
        assert_eq!(r["status"], "completed", "{r}");
        assert_eq!(metric(&r, "checks_passed"), 1.0, "{r}");
        assert_eq!(metric(&r, "command_f1"), 1.0, "the ground truth's own edits score F1 = 1: {r}");
        // The oracle tells the ground-truth reasoning as its own.
        assert!(metric(&r, "reasoning_concat").as_f64().unwrap_or(0.0) > 0.99, "{r}");
    }
    for r in records("noop", &tmp.path().join("noop")) {
        assert_eq!(r["status"], "completed", "{r}");
        assert!(
            metric(&r, "checks_passed").as_f64().unwrap_or(1.0) < 1.0,
            "task {} does not discriminate: {r}",
            r["task_id"]
        );
        // Every ground truth changes something the command score reads (FRR's configuration,
        // nft, tc qdiscs, classes and filters, sysctls): an agent that edits nothing scores 0.
        assert_eq!(
            metric(&r, "command_f1"),
            0.0,
            "task {}'s ground truth is invisible to the command score: {r}",
            r["task_id"]
        );
    }
}

/// IOS-style tasks on FRR: the seed's own §4.1 example as the draft prints it (IOS interface
/// names, IOS startup configurations, a §4.1 testcase), and testdata/netconf-ios (OSPF with
/// wildcards and loopbacks; an extended ACL enforced by nftables): translated, the oracle solves
/// every one with command F1 1 and the no-op agent fails each.
#[test]
fn ios_style_tasks_and_the_drafts_own_example_run_as_written() {
    if !frr_or_skip("IOS-style tasks") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    for (suite, tasks) in [("netconf-draft", 1), ("netconf-ios", 2)] {
        let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata").join(suite);
        for (agent, solved) in [("oracle", true), ("noop", false)] {
            let dir = tmp.path().join(format!("{}-{agent}", suite.display()).replace('/', "_"));
            let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
                .args(["eval", "--env", "netconf", "--agent", agent, "--quiet", "--suite"])
                .arg(&suite)
                .arg("--out")
                .arg(&dir)
                .output()
                .expect("run xtask");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let text = std::fs::read_to_string(dir.join("episodes.jsonl")).expect("episodes");
            let records: Vec<serde_json::Value> =
                text.lines().map(|l| serde_json::from_str(l).expect("record")).collect();
            assert_eq!(records.len(), tasks, "{}", suite.display());
            for r in records {
                assert_eq!(r["status"], "completed", "{r}");
                let passed = metric(&r, "checks_passed").as_f64().unwrap_or(-1.0);
                if solved {
                    assert_eq!(passed, 1.0, "{agent}: {r}");
                    assert_eq!(metric(&r, "command_f1"), 1.0, "{agent}: {r}");
                } else {
                    assert!(passed < 1.0, "the no-op agent passes {}: {r}", r["task_id"]);
                    assert_eq!(metric(&r, "command_f1"), 0.0, "{agent}: {r}");
                }
            }
        }
    }
}
