//! Metrics: what a scorer ([`crate::scorer::Scorer`]) computes from a finished episode.

use serde::{Deserialize, Serialize};

/// A metric's value. Pass/fail metrics are aggregated as proportions with confidence
/// intervals; counts and values as means and medians.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MetricValue {
    Pass(bool),
    Count(u64),
    Value(f64),
}

impl MetricValue {
    pub fn as_f64(self) -> f64 {
        match self {
            MetricValue::Pass(p) => f64::from(u8::from(p)),
            MetricValue::Count(c) => c as f64,
            MetricValue::Value(v) => v,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    pub name: String,
    pub value: MetricValue,
}

impl Metric {
    pub fn pass(name: impl Into<String>, passed: bool) -> Self {
        Self { name: name.into(), value: MetricValue::Pass(passed) }
    }
    pub fn count(name: impl Into<String>, count: u64) -> Self {
        Self { name: name.into(), value: MetricValue::Count(count) }
    }
    pub fn value(name: impl Into<String>, value: f64) -> Self {
        Self { name: name.into(), value: MetricValue::Value(value) }
    }
}
