//! Statistics over a run's records: rates with the standard error of a Bernoulli mean and a
//! 95% confidence interval `p ± 1.96·SEM` (seed 003 §4.1), means of value metrics with theirs
//! (`mean ± 1.96·s/√n`), per level and label, per domain (where tasks have one) and overall;
//! and NetConfBench's score tuple (S_reasoning, S_command, S_testcase, seed 001 §3.2).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use netdojo_core::runner::COST_METRIC;
use netdojo_core::{EpisodeClass, EpisodeRecord, EpisodeStatus, MetricValue};
use serde::{Deserialize, Serialize};

/// A pass rate over `n` episodes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Proportion {
    pub n: usize,
    pub successes: usize,
    pub rate: f64,
    /// Standard error of the mean, `sqrt(p(1-p)/n)`.
    pub sem: f64,
    /// `rate ± 1.96·sem`, clamped to [0, 1].
    pub ci95: (f64, f64),
}

impl Proportion {
    pub fn new(successes: usize, n: usize) -> Self {
        if n == 0 {
            return Self { n, successes, rate: 0.0, sem: 0.0, ci95: (0.0, 0.0) };
        }
        let rate = successes as f64 / n as f64;
        let sem = (rate * (1.0 - rate) / n as f64).sqrt();
        let half = 1.96 * sem;
        Self { n, successes, rate, sem, ci95: ((rate - half).max(0.0), (rate + half).min(1.0)) }
    }

    fn render(&self) -> String {
        format!("{:5.1}% ±{:4.1}", self.rate * 100.0, 1.96 * self.sem * 100.0)
    }
}

/// One row of a summary: a (level, label) group, a domain's episodes, or all episodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    /// `None` for a domain's row and the overall row.
    pub level: Option<u8>,
    /// The group's label; `domain:NAME` for a domain's row, `all` for the overall row.
    pub label: String,
    /// A domain's row: the domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Completed (scored) episodes.
    pub n: usize,
    /// Episodes that could not be run or scored; not in the rates.
    pub errored: usize,
    /// Each pass/fail metric as a rate (`correct`, `safe`...).
    pub rates: BTreeMap<String, Proportion>,
    /// Medians of count metrics (`steps`...).
    pub medians: BTreeMap<String, f64>,
    /// Means of value metrics (`wall_s`, `checks_passed`...).
    pub means: BTreeMap<String, f64>,
    /// The 95% confidence interval of each mean, `mean ± 1.96·s/√n` (s the sample standard
    /// deviation), clamped to the metric's [0, 1] when it is a score.
    #[serde(default)]
    pub mean_ci95: BTreeMap<String, (f64, f64)>,
    /// Episodes per outcome class, errored ones included (docs/results.md, "Outcome classes").
    #[serde(default)]
    pub classes: BTreeMap<EpisodeClass, usize>,
    /// Tokens, cost and time of the row's episodes, errored ones included (they were spent).
    #[serde(default)]
    pub spent: Spent,
}

/// What a group of episodes spent: sums, and means per episode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    /// Episodes counted, errored ones included.
    pub episodes: usize,
    pub sum: Amounts,
    /// `sum / episodes` (cost: over the episodes that have one).
    pub mean: Amounts,
}

/// Tokens, US dollars and seconds (the wall time and its parts, [`netdojo_core::Timing`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Amounts {
    pub prompt_tokens: f64,
    pub completion_tokens: f64,
    pub cached_tokens: f64,
    /// Absent when no episode has a cost (no `--prices`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    pub wall_s: f64,
    pub setup_s: f64,
    pub agent_s: f64,
    pub tools_s: f64,
    pub checks_s: f64,
    pub evaluate_s: f64,
    pub close_s: f64,
}

impl Spent {
    fn of(records: &[&EpisodeRecord]) -> Self {
        let s = |ms: u64| ms as f64 / 1000.0;
        let mut sum = Amounts::default();
        let mut priced = 0usize;
        for r in records {
            sum.prompt_tokens += r.tokens.prompt_tokens as f64;
            sum.completion_tokens += r.tokens.completion_tokens as f64;
            sum.cached_tokens += r.tokens.cached_tokens as f64;
            if let Some(cost) = r.metric(COST_METRIC) {
                sum.cost_usd = Some(sum.cost_usd.unwrap_or(0.0) + cost.as_f64());
                priced += 1;
            }
            sum.wall_s += s(r.wall_ms);
            sum.setup_s += s(r.timing.setup_ms);
            sum.agent_s += s(r.timing.agent_ms);
            sum.tools_s += s(r.timing.tools_ms);
            sum.checks_s += s(r.timing.checks_ms);
            sum.evaluate_s += s(r.timing.evaluate_ms);
            sum.close_s += s(r.timing.close_ms);
        }
        let n = records.len().max(1) as f64;
        let mean = Amounts {
            prompt_tokens: sum.prompt_tokens / n,
            completion_tokens: sum.completion_tokens / n,
            cached_tokens: sum.cached_tokens / n,
            cost_usd: sum.cost_usd.map(|c| c / priced.max(1) as f64),
            wall_s: sum.wall_s / n,
            setup_s: sum.setup_s / n,
            agent_s: sum.agent_s / n,
            tools_s: sum.tools_s / n,
            checks_s: sum.checks_s / n,
            evaluate_s: sum.evaluate_s / n,
            close_s: sum.close_s / n,
        };
        Self { episodes: records.len(), sum, mean }
    }
}

/// NetConfBench's score tuple (seed 001 §3.2): each score's metric, first found first.
pub const NETCONFBENCH_TUPLE: [(&str, &[&str]); 3] = [
    // The judge-condensed trace's similarity, else the concatenated turns' (named for what it is).
    ("S_reasoning", &["reasoning", "reasoning_concat"]),
    ("S_command", &["command_f1"]),
    ("S_testcase", &["checks_passed"]),
];

/// A run's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub rows: Vec<SummaryRow>,
}

impl Summary {
    /// Summarises one record per task (pass the latest record of each task).
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a EpisodeRecord>) -> Self {
        let mut groups: BTreeMap<(u8, String), Vec<&EpisodeRecord>> = BTreeMap::new();
        let mut all = Vec::new();
        for r in records {
            groups.entry((r.level, r.label.clone())).or_default().push(r);
            all.push(r);
        }
        let mut rows: Vec<SummaryRow> =
            groups.into_iter().map(|((level, label), rs)| row(Some(level), label, &rs)).collect();
        let mut domains: BTreeMap<String, Vec<&EpisodeRecord>> = BTreeMap::new();
        for r in &all {
            if let Some(d) = &r.domain {
                domains.entry(d.clone()).or_default().push(r);
            }
        }
        for (domain, rs) in domains {
            let mut r = row(None, format!("domain:{domain}"), &rs);
            r.domain = Some(domain);
            rows.push(r);
        }
        rows.push(row(None, "all".into(), &all));
        Self { rows }
    }

    /// NetConfBench's tuple as a text table, per domain and overall, when the run has its
    /// metrics (`None` otherwise).
    pub fn render_tuple(&self) -> Option<String> {
        let metric_of = |names: &[&str]| {
            names.iter().find(|n| self.rows.iter().any(|r| r.means.contains_key(**n))).map(|n| n.to_string())
        };
        let columns: Vec<(&str, String)> = NETCONFBENCH_TUPLE
            .iter()
            .filter_map(|(score, names)| Some((*score, metric_of(names)?)))
            .collect();
        if columns.is_empty() {
            return None;
        }
        let mut out = String::new();
        let _ = write!(out, "{:<18} {:>5}", "NetConfBench", "n");
        for (score, metric) in &columns {
            let _ = write!(out, "  {:>24}", format!("{score} ({metric})"));
        }
        out.push('\n');
        for r in self.rows.iter().filter(|r| r.level.is_none()) {
            let name = r.domain.clone().unwrap_or_else(|| r.label.clone());
            let _ = write!(out, "{name:<18} {:>5}", r.n);
            for (_, metric) in &columns {
                let cell = match (r.means.get(metric), r.mean_ci95.get(metric)) {
                    (Some(m), Some((lo, hi))) => format!("{m:.3} [{lo:.3}, {hi:.3}]"),
                    _ => "-".into(),
                };
                let _ = write!(out, "  {cell:>24}");
            }
            out.push('\n');
        }
        Some(out)
    }

    pub fn overall(&self) -> Option<&SummaryRow> {
        self.rows.iter().find(|r| r.level.is_none() && r.domain.is_none())
    }

    /// The summary as a text table (summary.txt, what `eval` and `report` print), followed by
    /// NetConfBench's tuple when the run has its metrics.
    pub fn render(&self) -> String {
        let rate_names: Vec<String> = {
            let mut names: Vec<String> = self.rows.iter().flat_map(|r| r.rates.keys().cloned()).collect();
            names.sort();
            names.dedup();
            // correctness first, then safety, then the rest: the order the seeds report them
            names.sort_by_key(|n| match n.as_str() {
                "correct" => 0,
                "safe" => 1,
                _ => 2,
            });
            names
        };
        let mut out = String::new();
        let _ = write!(out, "{:<6} {:<14} {:>6} {:>4}", "level", "label", "n", "err");
        let headers: Vec<String> = rate_names.iter().map(|n| format!("{n} (95% CI)")).collect();
        for header in &headers {
            let _ = write!(out, "  {header:>13}");
        }
        let _ = writeln!(out, "  {:>9}  {:>11}", "med steps", "mean wall s");
        for r in &self.rows {
            let level = r.level.map(|l| l.to_string()).unwrap_or_default();
            let _ = write!(out, "{:<6} {:<14} {:>6} {:>4}", level, r.label, r.n, r.errored);
            for (name, header) in rate_names.iter().zip(&headers) {
                let cell = r.rates.get(name).map(Proportion::render).unwrap_or_else(|| "-".into());
                let _ = write!(out, "  {cell:>width$}", width = header.len().max(13));
            }
            let steps = r.medians.get("steps").map(|s| format!("{s}")).unwrap_or_else(|| "-".into());
            let wall = r.means.get("wall_s").map(|s| format!("{s:.3}")).unwrap_or_else(|| "-".into());
            let _ = writeln!(out, "  {steps:>9}  {wall:>11}");
        }
        if let Some(spent) = self.render_spent() {
            out.push('\n');
            out.push_str(&spent);
        }
        if let Some(tuple) = self.render_tuple() {
            out.push('\n');
            out.push_str(&tuple);
        }
        out
    }

    /// The overall row's outcome classes, and its tokens, cost and time summed and averaged.
    pub fn render_spent(&self) -> Option<String> {
        let all = self.overall().filter(|r| r.spent.episodes > 0)?;
        let mut out = String::new();
        let classes: Vec<String> = EpisodeClass::ALL
            .iter()
            .filter_map(|c| {
                let n = *all.classes.get(c)?;
                let mark = if c.in_rates() { "" } else { "*" };
                (n > 0).then(|| format!("{c}{mark} {n}"))
            })
            .collect();
        let _ = writeln!(out, "outcomes: {}", classes.join(", "));
        if classes.iter().any(|c| c.contains('*')) {
            let _ = writeln!(out, "  * errored: not in the rates; `--resume` retries them");
        }
        let (sum, mean) = (&all.spent.sum, &all.spent.mean);
        let _ = writeln!(
            out,
            "{:<22} {:>14} {:>12}",
            format!("spent ({} episodes)", all.spent.episodes),
            "sum",
            "mean"
        );
        let mut line = |name: &str, s: f64, m: f64, decimals: usize| {
            let _ = writeln!(out, "{name:<22} {s:>14.decimals$} {m:>12.decimals$}");
        };
        line("prompt tokens", sum.prompt_tokens, mean.prompt_tokens, 0);
        line("  of them cached", sum.cached_tokens, mean.cached_tokens, 0);
        line("completion tokens", sum.completion_tokens, mean.completion_tokens, 0);
        if let (Some(s), Some(m)) = (sum.cost_usd, mean.cost_usd) {
            line("cost USD", s, m, 4);
        }
        line("wall s", sum.wall_s, mean.wall_s, 3);
        line("  setup s", sum.setup_s, mean.setup_s, 3);
        line("  agent s", sum.agent_s, mean.agent_s, 3);
        line("  tools s", sum.tools_s, mean.tools_s, 3);
        line("  state checks s", sum.checks_s, mean.checks_s, 3);
        line("  evaluation s", sum.evaluate_s, mean.evaluate_s, 3);
        line("  close s", sum.close_s, mean.close_s, 3);
        Some(out)
    }
}

fn row(level: Option<u8>, label: String, records: &[&EpisodeRecord]) -> SummaryRow {
    let completed: Vec<&&EpisodeRecord> =
        records.iter().filter(|r| r.status == EpisodeStatus::Completed).collect();
    let mut passes: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut counts: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in &completed {
        for m in &r.metrics {
            match m.value {
                MetricValue::Pass(p) => {
                    let e = passes.entry(m.name.clone()).or_default();
                    e.0 += usize::from(p);
                    e.1 += 1;
                }
                MetricValue::Count(c) => counts.entry(m.name.clone()).or_default().push(c as f64),
                MetricValue::Value(v) => values.entry(m.name.clone()).or_default().push(v),
            }
        }
    }
    SummaryRow {
        level,
        label,
        domain: None,
        n: completed.len(),
        errored: records.len() - completed.len(),
        rates: passes.into_iter().map(|(k, (s, n))| (k, Proportion::new(s, n))).collect(),
        medians: counts.into_iter().map(|(k, v)| (k, median(v))).collect(),
        mean_ci95: values.iter().map(|(k, v)| (k.clone(), mean_ci95(k, v))).collect(),
        means: values.into_iter().map(|(k, v)| (k, v.iter().sum::<f64>() / v.len() as f64)).collect(),
        classes: records.iter().fold(BTreeMap::new(), |mut m, r| {
            *m.entry(r.class()).or_default() += 1;
            m
        }),
        spent: Spent::of(records),
    }
}

/// The value metrics that are scores in [0, 1]: their intervals are clamped to it.
const UNIT_SCORES: [&str; 6] =
    ["checks_passed", "command_f1", "command_precision", "command_recall", "reasoning", "reasoning_concat"];

/// `mean ± 1.96·s/√n`, clamped to [0, 1] for a score ([`UNIT_SCORES`]). One value has no
/// spread to estimate: its interval is the value.
fn mean_ci95(name: &str, values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, mean);
    }
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let half = 1.96 * (variance / n).sqrt();
    let (lo, hi) = (mean - half, mean + half);
    if UNIT_SCORES.contains(&name) { (lo.max(0.0), hi.min(1.0)) } else { (lo, hi) }
}

/// The median (mean of the two middle values for an even count).
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) { (values[mid - 1] + values[mid]) / 2.0 } else { values[mid] }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netdojo_core::{EndReason, Metric};

    fn rec(
        id: usize,
        level: u8,
        label: &str,
        correct: bool,
        steps: u64,
        status: EpisodeStatus,
    ) -> EpisodeRecord {
        EpisodeRecord {
            task_id: format!("t{id}"),
            application: "dcgraph".into(),
            level,
            label: label.into(),
            domain: None,
            agent: "a".into(),
            status,
            error: None,
            cause: None,
            end: EndReason::Finished,
            steps: steps as usize,
            invalid_steps: 0,
            wall_ms: 10,
            timing: Default::default(),
            class: None,
            tokens: Default::default(),
            metrics: vec![
                Metric::pass("correct", correct),
                Metric::pass("safe", true),
                Metric::count("steps", steps),
                Metric::value("wall_s", 0.01),
            ],
        }
    }

    #[test]
    fn proportion_matches_the_seed_formula() {
        let p = Proportion::new(80, 100);
        assert!((p.rate - 0.8).abs() < 1e-12);
        assert!((p.sem - 0.04).abs() < 1e-12);
        assert!((p.ci95.0 - (0.8 - 1.96 * 0.04)).abs() < 1e-12);
        assert!((p.ci95.1 - (0.8 + 1.96 * 0.04)).abs() < 1e-12);
        assert_eq!(Proportion::new(10, 10).ci95, (1.0, 1.0));
        assert_eq!(Proportion::new(0, 0).rate, 0.0);
    }

    #[test]
    fn groups_by_level_and_label_and_keeps_errored_out_of_rates() {
        let records = vec![
            rec(0, 1, "add", true, 2, EpisodeStatus::Completed),
            rec(1, 1, "add", false, 4, EpisodeStatus::Completed),
            rec(2, 2, "remove-count", true, 3, EpisodeStatus::Completed),
            rec(3, 2, "remove-count", false, 9, EpisodeStatus::Errored),
        ];
        let s = Summary::from_records(&records);
        assert_eq!(s.rows.len(), 3);
        let add = &s.rows[0];
        assert_eq!((add.level, add.label.as_str(), add.n), (Some(1), "add", 2));
        assert_eq!(add.rates["correct"].rate, 0.5);
        assert_eq!(add.medians["steps"], 3.0);
        let rc = &s.rows[1];
        assert_eq!((rc.n, rc.errored), (1, 1));
        assert_eq!(rc.rates["correct"].rate, 1.0);
        let all = s.overall().expect("overall row");
        assert_eq!((all.n, all.errored), (3, 1));
        assert!((all.rates["correct"].rate - 2.0 / 3.0).abs() < 1e-12);
        insta::assert_snapshot!(s.render());
        assert!(s.render_tuple().is_none(), "no NetConfBench metric, no tuple");
    }

    #[test]
    fn classes_are_counted_and_tokens_cost_and_time_summed_and_averaged() {
        use netdojo_core::{EpisodeClass, ErrorCause, Timing, TokenUsage};
        let spend = |mut r: EpisodeRecord, prompt: u64, cost: f64, agent_ms: u64| {
            r.tokens = TokenUsage {
                prompt_tokens: prompt,
                completion_tokens: prompt / 10,
                cached_tokens: prompt / 2,
            };
            r.timing =
                Timing { setup_ms: 100, agent_ms, tools_ms: 20, checks_ms: 10, evaluate_ms: 5, close_ms: 1 };
            r.wall_ms = r.timing.sum_ms() + 4;
            r.metrics.push(Metric::value("cost_usd", cost));
            r
        };
        let mut budget = rec(2, 1, "add", false, 10, EpisodeStatus::Completed);
        budget.end = EndReason::StepBudget;
        let mut api = rec(3, 1, "add", false, 1, EpisodeStatus::Errored);
        (api.cause, api.metrics) = (Some(ErrorCause::ModelApi), vec![]);
        let records = vec![
            spend(rec(0, 1, "add", true, 2, EpisodeStatus::Completed), 1000, 0.01, 300),
            spend(rec(1, 1, "add", false, 4, EpisodeStatus::Completed), 2000, 0.02, 500),
            spend(budget, 3000, 0.03, 700),
            spend(api, 600, 0.006, 100),
        ];
        let s = Summary::from_records(&records);
        let all = s.overall().expect("overall");
        let count = |c| all.classes.get(&c).copied().unwrap_or(0);
        assert_eq!(count(EpisodeClass::Solved), 1);
        assert_eq!(count(EpisodeClass::Failed), 1);
        assert_eq!(count(EpisodeClass::StepBudget), 1);
        assert_eq!(count(EpisodeClass::ModelApiFailure), 1);
        assert_eq!((all.n, all.errored), (3, 1), "the API failure is not in the rates");
        assert!((all.rates["correct"].rate - 1.0 / 3.0).abs() < 1e-12);
        // Spending counts every episode, the errored one too: its tokens were paid for.
        assert_eq!(all.spent.episodes, 4);
        assert_eq!(all.spent.sum.prompt_tokens, 6600.0);
        assert_eq!(all.spent.sum.cached_tokens, 3300.0);
        assert_eq!(all.spent.mean.completion_tokens, 165.0);
        assert!((all.spent.sum.cost_usd.expect("cost") - 0.066).abs() < 1e-12);
        assert!((all.spent.mean.cost_usd.expect("cost") - 0.0165).abs() < 1e-12);
        assert!((all.spent.sum.agent_s - 1.6).abs() < 1e-12 && (all.spent.mean.setup_s - 0.1).abs() < 1e-12);
        let json = serde_json::to_value(&s).expect("json");
        assert_eq!(json["rows"][1]["classes"]["model_api_failure"], 1, "{json}");
        insta::assert_snapshot!(s.render_spent().expect("spent"));
    }

    fn netconf(id: usize, domain: &str, testcases: f64, f1: f64, reasoning: f64) -> EpisodeRecord {
        let mut r = rec(id, 1, &format!("task {id}"), testcases == 1.0, 3, EpisodeStatus::Completed);
        r.domain = Some(domain.into());
        r.metrics.extend([
            Metric::value("checks_passed", testcases),
            Metric::value("command_f1", f1),
            Metric::value("reasoning_concat", reasoning),
        ]);
        r
    }

    #[test]
    fn netconfbench_tuple_per_domain_with_confidence_intervals() {
        let records = vec![
            netconf(0, "routing", 1.0, 1.0, 0.8),
            netconf(1, "routing", 0.5, 0.6, 0.6),
            netconf(2, "routing", 0.0, 0.2, 0.4),
            netconf(3, "security", 1.0, 0.9, 0.7),
        ];
        let s = Summary::from_records(&records);
        let routing = s.rows.iter().find(|r| r.domain.as_deref() == Some("routing")).expect("routing row");
        assert_eq!((routing.level, routing.n), (None, 3));
        assert!((routing.means["checks_passed"] - 0.5).abs() < 1e-12);
        // s = 0.5, n = 3: 0.5 ± 1.96·0.5/√3, clamped to [0, 1].
        let (lo, hi) = routing.mean_ci95["checks_passed"];
        let half = 1.96 * 0.5 / 3f64.sqrt();
        assert!((lo - (0.5 - half).max(0.0)).abs() < 1e-12 && (hi - (0.5 + half).min(1.0)).abs() < 1e-12);
        let security = s.rows.iter().find(|r| r.domain.as_deref() == Some("security")).expect("security");
        assert_eq!(security.mean_ci95["command_f1"], (0.9, 0.9), "one value: no spread");
        assert_eq!(s.overall().map(|r| r.n), Some(4));
        insta::assert_snapshot!(s.render_tuple().expect("the tuple"));
    }
}
