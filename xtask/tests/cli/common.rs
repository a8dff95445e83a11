//! Shared by the end-to-end tests: what the machine must offer, reading a run directory's
//! summary and records.
#![allow(dead_code)]

use std::fs;
use std::path::Path;

use netdojo::linux::preflight::{self, Need};
use serde_json::Value;

/// True when a test of a root environment can run, or a printed skip (a failure under CI).
pub fn root_or_skip(what: &str) -> bool {
    preflight::ready_or_skip(what, &[Need::Root])
}

/// The same, for environments of FRR routers.
pub fn frr_or_skip(what: &str) -> bool {
    preflight::ready_or_skip(what, &[Need::Root, Need::Frr])
}

pub fn summary(dir: &Path) -> Value {
    let text = fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    serde_json::from_str(&text).expect("summary is JSON")
}

pub fn rows(summary: &Value) -> &Vec<Value> {
    summary["rows"].as_array().expect("rows")
}

pub fn rate(row: &Value, metric: &str) -> f64 {
    row["rates"][metric]["rate"].as_f64().unwrap_or_else(|| panic!("no {metric} in {row}"))
}

pub fn lines(path: &Path) -> usize {
    fs::read_to_string(path).map(|t| t.lines().count()).unwrap_or(0)
}

/// The namespaces a netdojo process with this PID made (its prefixes are `ndj{pid:x}x{n:x}`).
pub fn namespaces_of(pid: u32) -> Vec<String> {
    let stem = format!("ndj{pid:x}x");
    fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(&stem))
                .collect()
        })
        .unwrap_or_default()
}
