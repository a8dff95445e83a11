//! Statistics over a run's records: pass rates with Wilson score 95% intervals, means of
//! value metrics with `mean ± 1.96·SE`, medians of counts, per level and label, per domain
//! (where tasks have one) and overall; with several epochs (`eval --epochs K`) the intervals
//! are clustered by task (the K episodes of a task are not independent) and each row has
//! pass@k and pass^k; and NetConfBench's score tuple (S_reasoning, S_command, S_testcase,
//! seed 001 §3.2). docs/results.md defines every number.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use netdojo_core::runner::COST_METRIC;
use netdojo_core::{EpisodeClass, EpisodeRecord, EpisodeStatus, MetricValue};
use serde::{Deserialize, Serialize};

/// The normal quantile of a two-sided 95% interval.
pub const Z95: f64 = 1.96;

/// A pass rate over `n` episodes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Proportion {
    /// Episodes.
    pub n: usize,
    pub successes: usize,
    pub rate: f64,
    /// Standard error of the rate: `sqrt(p(1-p)/n)`, or the cluster-robust one when the
    /// episodes are clustered by task.
    pub sem: f64,
    /// The Wilson score 95% interval; clustered, at the effective sample size `n_eff`.
    pub ci95: (f64, f64),
    /// Clustered: the number of tasks (clusters) the episodes come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<usize>,
    /// Clustered: the sample size whose Wilson interval has the cluster-robust variance,
    /// `p(1-p)/sem²`, at most `n` (and the number of tasks when every episode agrees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_eff: Option<f64>,
}

impl Proportion {
    /// Independent episodes: the Wilson score interval at `n`.
    pub fn new(successes: usize, n: usize) -> Self {
        if n == 0 {
            return Self { n, successes, rate: 0.0, sem: 0.0, ci95: (0.0, 0.0), clusters: None, n_eff: None };
        }
        let rate = successes as f64 / n as f64;
        let sem = (rate * (1.0 - rate) / n as f64).sqrt();
        Self { n, successes, rate, sem, ci95: wilson(rate, n as f64), clusters: None, n_eff: None }
    }

    /// Episodes clustered by task, one `(successes, episodes)` per task: the rate over all
    /// episodes, its cluster-robust standard error (Liang-Zeger, with the G/(G-1) small-sample
    /// factor) and the Wilson interval at the effective sample size that variance implies.
    /// Where it cannot be estimated (every episode agrees, so the within-task correlation is
    /// unknown), each task counts as one observation.
    pub fn clustered(tasks: &[(usize, usize)]) -> Self {
        let tasks: Vec<(usize, usize)> = tasks.iter().copied().filter(|&(_, n)| n > 0).collect();
        let successes: usize = tasks.iter().map(|t| t.0).sum();
        let n: usize = tasks.iter().map(|t| t.1).sum();
        let g = tasks.len();
        if g < 2 {
            // One task: no spread between tasks to estimate; its episodes as independent.
            return Self { clusters: Some(g), ..Self::new(successes, n) };
        }
        let rate = successes as f64 / n as f64;
        let residuals: f64 = tasks.iter().map(|&(s, m)| (s as f64 - m as f64 * rate).powi(2)).sum();
        let variance = g as f64 / (g as f64 - 1.0) * residuals / (n as f64).powi(2);
        let n_eff = if successes == 0 || successes == n {
            g as f64
        } else if variance > 0.0 {
            (rate * (1.0 - rate) / variance).min(n as f64)
        } else {
            n as f64
        };
        Self {
            n,
            successes,
            rate,
            sem: variance.sqrt(),
            ci95: wilson(rate, n_eff),
            clusters: Some(g),
            n_eff: Some(n_eff),
        }
    }

    /// `rate [lo, hi]` in percent: Wilson intervals are not symmetric about the rate.
    fn render(&self) -> String {
        format!("{:5.1}% [{:5.1}, {:5.1}]", self.rate * 100.0, self.ci95.0 * 100.0, self.ci95.1 * 100.0)
    }
}

/// The Wilson score interval of a rate `p` over `n` (possibly effective, fractional) trials:
/// `(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)`. Unlike `p ± z·SE` it is never
/// empty at 0% or 100% and never leaves [0, 1].
pub fn wilson(p: f64, n: f64) -> (f64, f64) {
    if n <= 0.0 {
        return (0.0, 1.0);
    }
    let z2 = Z95 * Z95;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    ((centre - half).max(0.0), (centre + half).min(1.0))
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
    /// The tasks those episodes ran (`n` is `tasks × epochs` when none errored).
    #[serde(default)]
    pub tasks: usize,
    /// Episodes that could not be run or scored; not in the rates.
    pub errored: usize,
    /// Each pass/fail metric as a rate (`correct`, `safe`...).
    pub rates: BTreeMap<String, Proportion>,
    /// Medians of count metrics (`steps`...).
    pub medians: BTreeMap<String, f64>,
    /// Means of value metrics (`wall_s`, `checks_passed`...).
    pub means: BTreeMap<String, f64>,
    /// The 95% confidence interval of each mean, `mean ± 1.96·SE`: with one episode per task
    /// `SE = s/√n` (s the sample standard deviation), with epochs the cluster-robust standard
    /// error over tasks; clamped to the metric's [0, 1] when it is a score.
    #[serde(default)]
    pub mean_ci95: BTreeMap<String, (f64, f64)>,
    /// With epochs: k, the number of epochs of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<u32>,
    /// With epochs: the probability that at least one of k attempts at a task is `correct`,
    /// averaged over tasks (the unbiased estimator of Chen et al. 2021).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_at_k: Option<f64>,
    /// With epochs: the probability that all k attempts at a task are `correct`, averaged over
    /// tasks (pass^k of tau-bench, Yao et al. 2024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_hat_k: Option<f64>,
    /// With epochs: the 95% intervals of `pass_at_k` and `pass_hat_k` over tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_at_k_ci95: Option<(f64, f64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_hat_k_ci95: Option<(f64, f64)>,
    /// With epochs: the tasks pass@k and pass^k average over (those with k completed
    /// episodes; a task with an errored epoch has too few to estimate either).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_k_tasks: Option<usize>,
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
        let s = |us: u64| us as f64 / 1e6;
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
            sum.wall_s += r.wall_ms as f64 / 1000.0;
            sum.setup_s += s(r.timing.setup_us);
            sum.agent_s += s(r.timing.agent_us);
            sum.tools_s += s(r.timing.tools_us);
            sum.checks_s += s(r.timing.checks_us);
            sum.evaluate_s += s(r.timing.evaluate_us);
            sum.close_s += s(r.timing.close_us);
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
    /// Episodes per task (`eval --epochs`); absent for one.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub epochs: u32,
    pub rows: Vec<SummaryRow>,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl Summary {
    /// Summarises one record per episode, an episode being a (task, epoch) (pass the latest
    /// record of each). The run's epochs are counted from the records' `epoch`.
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a EpisodeRecord>) -> Self {
        let mut groups: BTreeMap<(u8, String), Vec<&EpisodeRecord>> = BTreeMap::new();
        let mut all = Vec::new();
        for r in records {
            groups.entry((r.level, r.label.clone())).or_default().push(r);
            all.push(r);
        }
        let epochs = all.iter().map(|r| r.epoch.saturating_add(1)).max().unwrap_or(1);
        let mut rows: Vec<SummaryRow> =
            groups.into_iter().map(|((level, label), rs)| row(Some(level), label, &rs, epochs)).collect();
        let mut domains: BTreeMap<String, Vec<&EpisodeRecord>> = BTreeMap::new();
        for r in &all {
            if let Some(d) = &r.domain {
                domains.entry(d.clone()).or_default().push(r);
            }
        }
        for (domain, rs) in domains {
            let mut r = row(None, format!("domain:{domain}"), &rs, epochs);
            r.domain = Some(domain);
            rows.push(r);
        }
        rows.push(row(None, "all".into(), &all, epochs));
        Self { epochs, rows }
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
        // A rate's cell, `100.0% [ 83.9, 100.0]`, is wider than its header.
        const RATE_WIDTH: usize = 21;
        let k = (self.epochs > 1).then_some(self.epochs);
        let mut out = String::new();
        let _ = write!(out, "{:<6} {:<14} {:>6} {:>4}", "level", "label", "n", "err");
        let headers: Vec<String> = rate_names.iter().map(|n| format!("{n} (95% CI)")).collect();
        for header in &headers {
            let _ = write!(out, "  {header:>RATE_WIDTH$}");
        }
        if let Some(k) = k {
            let _ = write!(out, "  {:>7}  {:>7}", format!("pass@{k}"), format!("pass^{k}"));
        }
        let _ = writeln!(out, "  {:>9}  {:>11}", "med steps", "mean wall s");
        let percent = |v: Option<f64>| v.map(|v| format!("{:5.1}%", v * 100.0)).unwrap_or_else(|| "-".into());
        for r in &self.rows {
            let level = r.level.map(|l| l.to_string()).unwrap_or_default();
            let _ = write!(out, "{:<6} {:<14} {:>6} {:>4}", level, r.label, r.n, r.errored);
            for (name, header) in rate_names.iter().zip(&headers) {
                let cell = r.rates.get(name).map(Proportion::render).unwrap_or_else(|| "-".into());
                let _ = write!(out, "  {cell:>width$}", width = header.len().max(RATE_WIDTH));
            }
            if k.is_some() {
                let _ = write!(out, "  {:>7}  {:>7}", percent(r.pass_at_k), percent(r.pass_hat_k));
            }
            let steps = r.medians.get("steps").map(|s| format!("{s}")).unwrap_or_else(|| "-".into());
            let wall = r.means.get("wall_s").map(|s| format!("{s:.3}")).unwrap_or_else(|| "-".into());
            let _ = writeln!(out, "  {steps:>9}  {wall:>11}");
        }
        if let Some(k) = k {
            let _ = writeln!(
                out,
                "{k} epochs: n counts episodes; intervals are clustered by task; pass@{k} and \
                 pass^{k} are of `correct` (docs/results.md)"
            );
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

fn row(level: Option<u8>, label: String, records: &[&EpisodeRecord], epochs: u32) -> SummaryRow {
    let completed: Vec<&&EpisodeRecord> =
        records.iter().filter(|r| r.status == EpisodeStatus::Completed).collect();
    // Per metric, per task: (successes, episodes) of a pass/fail metric, the values of a value
    // metric. Counts have medians, which need no clustering.
    let mut passes: BTreeMap<String, BTreeMap<&str, (usize, usize)>> = BTreeMap::new();
    let mut counts: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut values: BTreeMap<String, BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    let mut tasks: BTreeMap<&str, ()> = BTreeMap::new();
    for r in &completed {
        tasks.insert(&r.task_id, ());
        for m in &r.metrics {
            match m.value {
                MetricValue::Pass(p) => {
                    let e = passes.entry(m.name.clone()).or_default().entry(&r.task_id).or_default();
                    e.0 += usize::from(p);
                    e.1 += 1;
                }
                MetricValue::Count(c) => counts.entry(m.name.clone()).or_default().push(c as f64),
                MetricValue::Value(v) => {
                    values.entry(m.name.clone()).or_default().entry(&r.task_id).or_default().push(v)
                }
            }
        }
    }
    let rate = |per_task: &BTreeMap<&str, (usize, usize)>| {
        let per_task: Vec<(usize, usize)> = per_task.values().copied().collect();
        if epochs > 1 {
            Proportion::clustered(&per_task)
        } else {
            Proportion::new(per_task.iter().map(|t| t.0).sum(), per_task.iter().map(|t| t.1).sum())
        }
    };
    let mut out = SummaryRow {
        level,
        label,
        domain: None,
        n: completed.len(),
        tasks: tasks.len(),
        errored: records.len() - completed.len(),
        rates: passes.iter().map(|(k, v)| (k.clone(), rate(v))).collect(),
        medians: counts.into_iter().map(|(k, v)| (k, median(v))).collect(),
        mean_ci95: values.iter().map(|(k, v)| (k.clone(), mean_ci95(k, v))).collect(),
        means: values
            .iter()
            .map(|(k, v)| {
                let all: Vec<f64> = v.values().flatten().copied().collect();
                (k.clone(), all.iter().sum::<f64>() / all.len() as f64)
            })
            .collect(),
        k: None,
        pass_at_k: None,
        pass_hat_k: None,
        pass_at_k_ci95: None,
        pass_hat_k_ci95: None,
        pass_k_tasks: None,
        classes: records.iter().fold(BTreeMap::new(), |mut m, r| {
            *m.entry(r.class()).or_default() += 1;
            m
        }),
        spent: Spent::of(records),
    };
    if epochs > 1 {
        let k = epochs as usize;
        let eligible: Vec<(usize, usize)> = passes
            .get("correct")
            .map(|t| t.values().copied().filter(|&(_, n)| n >= k).collect())
            .unwrap_or_default();
        let at: Vec<f64> = eligible.iter().map(|&(c, n)| pass_at_k(n, c, k)).collect();
        let hat: Vec<f64> = eligible.iter().map(|&(c, n)| pass_hat_k(n, c, k)).collect();
        out.k = Some(epochs);
        out.pass_k_tasks = Some(eligible.len());
        if !eligible.is_empty() {
            let (m_at, m_hat) = (mean(&at), mean(&hat));
            out.pass_at_k = Some(m_at);
            out.pass_hat_k = Some(m_hat);
            out.pass_at_k_ci95 = Some(unit(mean_interval(&at)));
            out.pass_hat_k_ci95 = Some(unit(mean_interval(&hat)));
        }
    }
    out
}

/// pass@k of one task from `n` attempts of which `c` passed: the probability that a draw of
/// `k` of them without replacement holds a pass, `1 - C(n-c, k)/C(n, k)` (Chen et al. 2021,
/// eq. 1), as the product `1 - Π_{i=n-c+1}^{n} (1 - k/i)` that stays exact for large n.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> f64 {
    if n < k || k == 0 {
        return f64::NAN;
    }
    if n - c < k {
        return 1.0;
    }
    1.0 - (n - c + 1..=n).map(|i| 1.0 - k as f64 / i as f64).product::<f64>()
}

/// pass^k of one task from `n` attempts of which `c` passed: the probability that `k` drawn
/// without replacement all pass, `C(c, k)/C(n, k)` (tau-bench, Yao et al. 2024).
pub fn pass_hat_k(n: usize, c: usize, k: usize) -> f64 {
    if n < k || k == 0 {
        return f64::NAN;
    }
    if c < k {
        return 0.0;
    }
    (0..k).map(|i| (c - i) as f64 / (n - i) as f64).product()
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// `mean ± 1.96·s/√n` over independent values; one value has no spread: its interval is it.
fn mean_interval(values: &[f64]) -> (f64, f64) {
    let clusters: Vec<Vec<f64>> = values.iter().map(|v| vec![*v]).collect();
    clustered_mean_interval(&clusters)
}

fn unit((lo, hi): (f64, f64)) -> (f64, f64) {
    (lo.max(0.0), hi.min(1.0))
}

/// `mean ± 1.96·SE` of values clustered by task, SE the cluster-robust standard error
/// `sqrt(G/(G-1) · Σ_g (Σ_i (x_gi - mean))² / N²)` over G tasks and N values. With one value
/// per task it is `s/√N` exactly. One task: the spread of its values, as if independent; one
/// value: no spread, the interval is the value.
fn clustered_mean_interval(clusters: &[Vec<f64>]) -> (f64, f64) {
    let all: Vec<f64> = clusters.iter().flatten().copied().collect();
    let n = all.len() as f64;
    let m = mean(&all);
    if all.len() < 2 {
        return (m, m);
    }
    let g = clusters.iter().filter(|c| !c.is_empty()).count();
    let variance = if g < 2 {
        all.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0) / n
    } else {
        let residuals: f64 = clusters.iter().map(|c| c.iter().map(|v| v - m).sum::<f64>().powi(2)).sum();
        g as f64 / (g as f64 - 1.0) * residuals / (n * n)
    };
    let half = Z95 * variance.sqrt();
    (m - half, m + half)
}

/// The value metrics that are scores in [0, 1]: their intervals are clamped to it.
const UNIT_SCORES: [&str; 6] =
    ["checks_passed", "command_f1", "command_precision", "command_recall", "reasoning", "reasoning_concat"];

/// A value metric's interval, clustered by task ([`clustered_mean_interval`]), clamped to
/// [0, 1] for a score ([`UNIT_SCORES`]).
fn mean_ci95(name: &str, per_task: &BTreeMap<&str, Vec<f64>>) -> (f64, f64) {
    let clusters: Vec<Vec<f64>> = per_task.values().cloned().collect();
    let interval = clustered_mean_interval(&clusters);
    if UNIT_SCORES.contains(&name) { unit(interval) } else { interval }
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
            epoch: 0,
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
    fn proportion_has_the_wilson_interval() {
        let p = Proportion::new(80, 100);
        assert!((p.rate - 0.8).abs() < 1e-12);
        assert!((p.sem - 0.04).abs() < 1e-12);
        // By hand: (0.8 + z²/200 ± z·sqrt(0.0016 + z²/40000)) / (1 + z²/100), z = 1.96.
        let z2 = 1.96f64 * 1.96;
        let centre = (0.8 + z2 / 200.0) / (1.0 + z2 / 100.0);
        let half = 1.96 * (0.0016 + z2 / 40_000.0f64).sqrt() / (1.0 + z2 / 100.0);
        assert!((p.ci95.0 - (centre - half)).abs() < 1e-12 && (p.ci95.1 - (centre + half)).abs() < 1e-12);
        assert!((p.ci95.0 - 0.7112).abs() < 1e-4 && (p.ci95.1 - 0.8666).abs() < 1e-4, "{:?}", p.ci95);
        // The extremes: not a point. 0 of 20 is [0, z²/(n + z²)] ≈ [0, 16.1%].
        let zero = Proportion::new(0, 20);
        assert_eq!(zero.ci95.0, 0.0);
        assert!((zero.ci95.1 - z2 / (20.0 + z2)).abs() < 1e-12 && (zero.ci95.1 - 0.1611).abs() < 1e-4);
        let all = Proportion::new(20, 20);
        assert!((all.ci95.0 - (1.0 - zero.ci95.1)).abs() < 1e-12 && all.ci95.1 == 1.0);
        assert_eq!(Proportion::new(0, 0).rate, 0.0);
    }

    fn epochs(pattern: &[&[bool]]) -> Vec<EpisodeRecord> {
        let mut records = Vec::new();
        for (task, outcomes) in pattern.iter().enumerate() {
            for (epoch, correct) in outcomes.iter().enumerate() {
                let mut r = rec(task, 1, "add", *correct, 2, EpisodeStatus::Completed);
                r.epoch = epoch as u32;
                r.metrics.push(Metric::value("checks_passed", if *correct { 1.0 } else { 0.0 }));
                records.push(r);
            }
        }
        records
    }

    #[test]
    fn clustered_interval_is_wider_than_the_naive_one_when_epochs_agree() {
        // 10 tasks × 3 epochs, each task's epochs agree: 15 of 30 episodes pass, but there are
        // only 10 independent outcomes.
        let per_task: Vec<(usize, usize)> = (0..10).map(|t| (if t < 5 { 3 } else { 0 }, 3)).collect();
        let clustered = Proportion::clustered(&per_task);
        let naive = Proportion::new(15, 30);
        assert_eq!((clustered.rate, clustered.n, clustered.clusters), (0.5, 30, Some(10)));
        // By hand: 10/9 · 10·1.5² / 30² = 1/36, so n_eff = 0.25·36 = 9.
        assert!((clustered.sem.powi(2) - 1.0 / 36.0).abs() < 1e-12);
        assert!((clustered.n_eff.expect("n_eff") - 9.0).abs() < 1e-9);
        assert_eq!(clustered.ci95, wilson(0.5, 9.0));
        assert!(
            clustered.ci95.0 < naive.ci95.0 && clustered.ci95.1 > naive.ci95.1,
            "{clustered:?} {naive:?}"
        );
        // Epochs that disagree within tasks as much as between: about as wide as the naive.
        let mixed: Vec<(usize, usize)> = (0..10).map(|t| (1 + t % 2, 3)).collect();
        let mixed = Proportion::clustered(&mixed);
        assert!(mixed.n_eff.expect("n_eff") > 20.0, "{mixed:?}");
        // Every episode passes: each task counts once.
        let all = Proportion::clustered(&[(3, 3); 10]);
        assert_eq!((all.n_eff, all.ci95), (Some(10.0), wilson(1.0, 10.0)));

        let s = Summary::from_records(&epochs(&[&[true; 3], &[true; 3], &[false; 3], &[false; 3]]));
        let row = s.overall().expect("all");
        let one = Summary::from_records(&epochs(&[&[true], &[true], &[false], &[false]]));
        let (lo, hi) = row.mean_ci95["checks_passed"];
        let (lo1, hi1) = one.overall().expect("all").mean_ci95["checks_passed"];
        assert!((lo - lo1).abs() < 1e-12 && (hi - hi1).abs() < 1e-12, "3 agreeing epochs add nothing");
        let naive_half = 1.96 * (0.5f64 * 0.5 * 12.0 / 11.0 / 12.0).sqrt();
        assert!(hi - 0.5 > naive_half, "wider than s/√n over 12 episodes");
    }

    #[test]
    fn pass_at_k_and_pass_hat_k_match_their_definitions() {
        // 1 - C(n-c, k)/C(n, k) and C(c, k)/C(n, k), by hand.
        assert_eq!(pass_at_k(5, 2, 3), 1.0 - 1.0 / 10.0);
        assert!((pass_at_k(10, 3, 1) - 0.3).abs() < 1e-12);
        assert_eq!(pass_at_k(3, 1, 3), 1.0, "k > n - c: some draw always holds the pass");
        assert_eq!(pass_at_k(3, 0, 3), 0.0);
        assert!((pass_hat_k(5, 4, 3) - 4.0 / 10.0).abs() < 1e-12);
        assert_eq!(pass_hat_k(5, 2, 3), 0.0);
        assert_eq!(pass_hat_k(3, 3, 3), 1.0);
        assert!(pass_at_k(2, 1, 3).is_nan(), "fewer attempts than k");

        let records = epochs(&[&[true, true, true], &[true, false, false], &[false, false, false]]);
        let s = Summary::from_records(&records);
        assert_eq!(s.epochs, 3);
        let all = s.overall().expect("all");
        assert_eq!((all.n, all.tasks, all.k, all.pass_k_tasks), (9, 3, Some(3), Some(3)));
        assert!((all.pass_at_k.expect("pass@k") - 2.0 / 3.0).abs() < 1e-12);
        assert!((all.pass_hat_k.expect("pass^k") - 1.0 / 3.0).abs() < 1e-12);
        assert!((all.rates["correct"].rate - 4.0 / 9.0).abs() < 1e-12);
        let json = serde_json::to_value(&s).expect("json");
        assert_eq!(json["epochs"], 3);
        assert_eq!(json["rows"][1]["k"], 3);
        assert!(json["rows"][1]["pass_at_k"].is_f64() && json["rows"][1]["pass_hat_k"].is_f64());
        insta::assert_snapshot!(s.render());
        // A task with an errored epoch has too few attempts: left out of pass@k, counted as such.
        let mut records = records;
        records[3].status = EpisodeStatus::Errored;
        let all = Summary::from_records(&records).rows.pop().expect("all");
        assert_eq!((all.pass_k_tasks, all.pass_at_k), (Some(2), Some(0.5)));
        // One epoch: no k, and the JSON is as before epochs.
        let one = Summary::from_records(&epochs(&[&[true], &[false]]));
        let json = serde_json::to_value(&one).expect("json");
        assert!(json.get("epochs").is_none() && json["rows"][0].get("pass_at_k").is_none(), "{json}");
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
            r.timing = Timing {
                setup_us: 100_000,
                agent_us: agent_ms * 1000,
                tools_us: 20_000,
                checks_us: 10_000,
                evaluate_us: 5_000,
                close_us: 1_000,
            };
            r.wall_ms = r.timing.sum_us() / 1000 + 4;
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
