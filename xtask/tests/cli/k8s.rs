//! End-to-end on real namespaces and nftables: `cargo xtask eval --env k8s` as a user runs it
//! (root).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::{namespaces_of, rate, root_or_skip, rows, summary};

/// Runs `xtask eval --env k8s` into `dir`; returns the PID it ran under.
fn eval(agent: &str, queries: &str, dir: &Path) -> u32 {
    let child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "eval",
            "--env",
            "k8s",
            "--agent",
            agent,
            "--queries",
            queries,
            "--seed",
            "5",
            "--quiet",
            "--out",
        ])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    pid
}

const LABELS: [&str; 15] = [
    "RI", "AI", "CP", "CPR", "AE", "RI+AI", "RI+CP", "RI+CPR", "AI+CP", "AI+CPR", "CP+CPR", "CP+AE",
    "CPR+AE", "RI+AE", "AI+AE",
];

#[test]
fn oracle_repairs_every_label_safely_and_noop_repairs_nothing() {
    if !root_or_skip("k8s oracle") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("oracle");
    let pid = eval("oracle", "15", &dir);
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

    let dir = tmp.path().join("noop");
    let pid = eval("noop", "15", &dir);
    assert!(namespaces_of(pid).is_empty(), "namespaces left behind: {:?}", namespaces_of(pid));
    for row in rows(&summary(&dir)) {
        assert_eq!(row["errored"], 0, "{row}");
        assert_eq!(rate(row, "correct"), 0.0, "{row}");
    }
}
