//! netdojo's statistics against independent implementations: the values in
//! testdata/stats/reference.json come from statsmodels and exact integer arithmetic
//! (testdata/stats/reference.py says which function gave each).

use netdojo_core::{EndReason, EpisodeRecord, EpisodeStatus, Metric};
use netdojo_score::compare::mcnemar_exact;
use netdojo_score::stats::{Z95, pass_at_k, pass_hat_k, wilson};
use netdojo_score::{Proportion, Summary};
use serde_json::Value;

fn reference() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/stats/reference.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).expect("reference.json is JSON")
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

fn u(v: &Value, key: &str) -> usize {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}")) as usize
}

#[test]
fn wilson_intervals_match_statsmodels() {
    let cases = reference()["wilson"].as_array().expect("wilson").clone();
    assert!(cases.len() > 40);
    for case in cases {
        let (lo, hi) = Proportion::new(u(&case, "successes"), u(&case, "n")).ci95;
        assert!(
            (lo - f(&case, "lo")).abs() < 1e-12 && (hi - f(&case, "hi")).abs() < 1e-12,
            "{lo} {hi}: {case}"
        );
    }
    assert_eq!(wilson(0.0, 0.0), (0.0, 1.0), "no trial, no information");
}

#[test]
fn exact_mcnemar_matches_statsmodels() {
    for case in reference()["mcnemar"].as_array().expect("mcnemar") {
        let p = mcnemar_exact(u(case, "a_only"), u(case, "b_only"));
        assert!((p - f(case, "p")).abs() < 1e-12, "{p}: {case}");
    }
}

#[test]
fn cluster_robust_standard_errors_match_statsmodels() {
    for case in reference()["clustered"].as_array().expect("clustered") {
        let tasks: Vec<Vec<u64>> = serde_json::from_value(case["tasks"].clone()).expect("tasks");
        let (mean, se) = (f(case, "mean"), f(case, "se"));
        let per_task: Vec<(usize, usize)> =
            tasks.iter().map(|t| (t.iter().sum::<u64>() as usize, t.len())).collect();
        let p = Proportion::clustered(&per_task);
        assert!((p.rate - mean).abs() < 1e-12 && (p.sem - se).abs() < 1e-12, "{p:?}: {case}");

        // The same values as a value metric of episodes: the summary's interval is ±1.96·se.
        let records: Vec<EpisodeRecord> = tasks
            .iter()
            .enumerate()
            .flat_map(|(task, epochs)| {
                epochs.iter().enumerate().map(move |(epoch, v)| EpisodeRecord {
                    task_id: format!("t{task}"),
                    epoch: epoch as u32,
                    application: "dcgraph".into(),
                    level: 1,
                    label: "add".into(),
                    domain: None,
                    agent: "a".into(),
                    status: EpisodeStatus::Completed,
                    error: None,
                    cause: None,
                    end: EndReason::Finished,
                    steps: 1,
                    invalid_steps: 0,
                    wall_ms: 1,
                    timing: Default::default(),
                    class: None,
                    tokens: Default::default(),
                    metrics: vec![Metric::value("wall_s", *v as f64)],
                })
            })
            .collect();
        let summary = Summary::from_records(&records);
        let all = summary.overall().expect("all");
        let (lo, hi) = all.mean_ci95["wall_s"];
        assert!((all.means["wall_s"] - mean).abs() < 1e-12, "{case}");
        assert!((lo - (mean - Z95 * se)).abs() < 1e-12 && (hi - (mean + Z95 * se)).abs() < 1e-12, "{case}");
    }
}

#[test]
fn pass_at_k_and_pass_hat_k_match_exact_binomials() {
    for case in reference()["pass_k"].as_array().expect("pass_k") {
        let (n, c, k) = (u(case, "n"), u(case, "c"), u(case, "k"));
        assert!((pass_at_k(n, c, k) - f(case, "pass_at_k")).abs() < 1e-12, "{case}");
        assert!((pass_hat_k(n, c, k) - f(case, "pass_hat_k")).abs() < 1e-12, "{case}");
    }
}
