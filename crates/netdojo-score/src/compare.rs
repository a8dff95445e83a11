//! Is B better than A? Two runs compared episode by episode on the tasks both ran.
//!
//! Episodes are paired by (task, epoch). For each pass/fail metric: the two rates, their
//! difference with a paired 95% interval (Newcombe's hybrid score interval, built from the
//! Wilson intervals the summaries print), the exact McNemar p-value (a two-sided binomial test
//! on the discordant pairs) and the episodes that flipped either way. For each value or count
//! metric: the two means and their difference, with a paired bootstrap interval (tasks
//! resampled, seeded) and a sign-flip randomisation p-value over tasks. With several epochs the
//! pairs of one task are not independent: rates also get Newcombe's interval at the effective
//! number of pairs (from the cluster-robust variance) and the randomisation p-value over
//! tasks, beside McNemar's. docs/results.md defines each number.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use netdojo_core::{EpisodeRecord, EpisodeStatus, MetricValue};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::stats::wilson;

/// How the resampling is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompareOptions {
    /// Bootstrap resamples and randomisation draws.
    pub resamples: usize,
    /// Seed of both: the same runs and options give the same numbers.
    pub seed: u64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self { resamples: 10_000, seed: 0 }
    }
}

/// One episode: a task and its epoch.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Episode {
    pub task: String,
    pub epoch: u32,
}

/// A pass/fail metric in both runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateDiff {
    /// Paired episodes that have the metric in both runs.
    pub n: usize,
    /// The rates in A and in B.
    pub a: f64,
    pub b: f64,
    /// `b - a`.
    pub diff: f64,
    /// Newcombe's hybrid score interval of `b - a` for paired proportions (his method 10).
    pub ci95: (f64, f64),
    /// Exact McNemar: two-sided binomial test of the discordant pairs against 1/2.
    pub p_value: f64,
    /// Failed in A, passed in B.
    pub gained: Vec<Episode>,
    /// Passed in A, failed in B.
    pub lost: Vec<Episode>,
    /// With several epochs: interval and p-value that treat each task as one unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clustered: Option<Clustered>,
}

/// A rate difference's interval and p-value with the pairs clustered by task.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Clustered {
    /// The number of independent pairs the clustered pairs are worth: `n` over the design
    /// effect of the differences (their cluster-robust variance over the naive one), at most
    /// `n`; the number of tasks when every pair differs alike (no variance to compare).
    pub n_eff: f64,
    /// Newcombe's interval with the pairs' table scaled to `n_eff`.
    pub ci95: (f64, f64),
    /// Sign-flip randomisation test over tasks (A and B swapped within a task under H0).
    pub p_value: f64,
}

/// A value or count metric in both runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeanDiff {
    pub n: usize,
    pub a: f64,
    pub b: f64,
    pub diff: f64,
    /// Paired bootstrap percentile interval of `b - a`, tasks resampled with replacement.
    pub ci95: (f64, f64),
    /// Sign-flip randomisation test over tasks.
    pub p_value: f64,
}

/// Two runs compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Episodes completed in both runs.
    pub pairs: usize,
    /// The tasks of those episodes.
    pub tasks: usize,
    /// Epochs among the pairs (the largest epoch + 1).
    pub epochs: u32,
    /// Episodes completed in A whose B record is missing or errored, and the reverse.
    pub only_a: usize,
    pub only_b: usize,
    pub options: CompareOptions,
    pub rates: BTreeMap<String, RateDiff>,
    pub means: BTreeMap<String, MeanDiff>,
}

/// One metric's paired values, per task: `(epoch, a, b)` of each of its epochs.
pub type PerTask = BTreeMap<String, Vec<(u32, f64, f64)>>;

impl Comparison {
    /// Compares the latest record of each episode of A with B's ([`netdojo_core::store::RunDir::episodes`]).
    pub fn paired(
        a: &BTreeMap<(String, u32), EpisodeRecord>,
        b: &BTreeMap<(String, u32), EpisodeRecord>,
        options: CompareOptions,
    ) -> Self {
        let completed = |r: &&EpisodeRecord| r.status == EpisodeStatus::Completed;
        let mut rates: BTreeMap<String, PerTask> = BTreeMap::new();
        let mut means: BTreeMap<String, PerTask> = BTreeMap::new();
        let (mut pairs, mut only_a, mut epochs) = (0, 0, 0);
        let mut tasks = std::collections::BTreeSet::new();
        for (key, ra) in a.iter().filter(|(_, r)| completed(r)) {
            let Some(rb) = b.get(key).filter(completed) else {
                only_a += 1;
                continue;
            };
            pairs += 1;
            tasks.insert(key.0.clone());
            epochs = epochs.max(key.1 + 1);
            for ma in &ra.metrics {
                let Some(vb) = rb.metric(&ma.name) else { continue };
                let (target, va, vb) = match (ma.value, vb) {
                    (MetricValue::Pass(x), MetricValue::Pass(y)) => {
                        (&mut rates, f64::from(u8::from(x)), f64::from(u8::from(y)))
                    }
                    (MetricValue::Pass(_), _) | (_, MetricValue::Pass(_)) => continue,
                    (x, y) => (&mut means, x.as_f64(), y.as_f64()),
                };
                target
                    .entry(ma.name.clone())
                    .or_default()
                    .entry(key.0.clone())
                    .or_default()
                    .push((key.1, va, vb));
            }
        }
        let only_b =
            b.iter().filter(|(key, r)| completed(r) && !a.get(*key).is_some_and(|ra| completed(&ra))).count();
        let clustered = epochs > 1;
        Self {
            pairs,
            tasks: tasks.len(),
            epochs: epochs.max(1),
            only_a,
            only_b,
            options,
            rates: rates
                .iter()
                .map(|(name, per_task)| (name.clone(), rate_diff(per_task, clustered, options)))
                .collect(),
            means: means
                .iter()
                .map(|(name, per_task)| (name.clone(), mean_diff(per_task, options)))
                .collect(),
        }
    }

    /// The comparison as a text table, then the flips of each pass/fail metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "paired: {} episodes ({} tasks × {} epoch{}); completed in A only: {}, in B only: {}",
            self.pairs,
            self.tasks,
            self.epochs,
            if self.epochs == 1 { "" } else { "s" },
            self.only_a,
            self.only_b
        );
        let _ = writeln!(
            out,
            "{:<22} {:>6} {:>9} {:>9} {:>9}  {:<19} {:>8}  {:>6} {:>6}",
            "metric", "n", "A", "B", "B - A", "95% CI", "p", "gained", "lost"
        );
        for (name, r) in &self.rates {
            let (ci, p) = r.clustered.map_or((r.ci95, r.p_value), |c| (c.ci95, c.p_value));
            let pct = |v: f64| format!("{:.1}%", v * 100.0);
            let _ = writeln!(
                out,
                "{:<22} {:>6} {:>9} {:>9} {:>9}  {:<19} {:>8}  {:>6} {:>6}",
                name,
                r.n,
                pct(r.a),
                pct(r.b),
                format!("{:+.1}", r.diff * 100.0),
                format!("[{:+.1}, {:+.1}]", ci.0 * 100.0, ci.1 * 100.0),
                p_value(p),
                r.gained.len(),
                r.lost.len()
            );
        }
        for (name, m) in &self.means {
            let _ = writeln!(
                out,
                "{:<22} {:>6} {:>9.3} {:>9.3} {:>9}  {:<19} {:>8}",
                format!("{name} (mean)"),
                m.n,
                m.a,
                m.b,
                format!("{:+.3}", m.diff),
                format!("[{:+.3}, {:+.3}]", m.ci95.0, m.ci95.1),
                p_value(m.p_value)
            );
        }
        let _ = writeln!(
            out,
            "rates in percent points: {}; means: paired bootstrap over tasks ({} resamples, seed {}), \
             sign-flip p-value (docs/results.md)",
            if self.epochs > 1 {
                "Newcombe's interval at the effective number of pairs and sign-flip p-value over \
                 tasks (epochs are not independent)"
            } else {
                "Newcombe's paired interval, exact McNemar p-value"
            },
            self.options.resamples,
            self.options.seed
        );
        for (name, r) in &self.rates {
            for (what, list) in [("fail in A, pass in B", &r.gained), ("pass in A, fail in B", &r.lost)] {
                if list.is_empty() {
                    continue;
                }
                // A task once, with its flipped epochs: `TASK#0,2`.
                let mut tasks: Vec<(&str, Vec<u32>)> = Vec::new();
                for e in list {
                    match tasks.last_mut() {
                        Some((task, epochs)) if *task == e.task => epochs.push(e.epoch),
                        _ => tasks.push((&e.task, vec![e.epoch])),
                    }
                }
                let shown: Vec<String> = tasks
                    .iter()
                    .take(FLIPS_SHOWN)
                    .map(|(task, epochs)| match self.epochs {
                        1 => task.to_string(),
                        _ => {
                            let epochs: Vec<String> = epochs.iter().map(u32::to_string).collect();
                            format!("{task}#{}", epochs.join(","))
                        }
                    })
                    .collect();
                let more = tasks.len().saturating_sub(FLIPS_SHOWN);
                let noun = if self.epochs > 1 { " episodes" } else { "" };
                let _ = write!(out, "{name}: {what} ({}{noun}): {}", list.len(), shown.join(", "));
                if more > 0 {
                    let _ = write!(out, " and {more} more{}", if self.epochs > 1 { " tasks" } else { "" });
                }
                out.push('\n');
            }
        }
        out
    }
}

/// Flipped tasks listed per metric and direction in the text (the JSON has all).
const FLIPS_SHOWN: usize = 20;

fn p_value(p: f64) -> String {
    if p < 0.001 { format!("{p:.1e}") } else { format!("{p:.3}") }
}

fn rate_diff(per_task: &PerTask, clustered: bool, options: CompareOptions) -> RateDiff {
    let (mut both, mut a_only, mut b_only, mut neither) = (0, 0, 0, 0);
    let (mut gained, mut lost) = (Vec::new(), Vec::new());
    for (task, epochs) in per_task {
        for &(epoch, a, b) in epochs {
            let episode = || Episode { task: task.clone(), epoch };
            match (a > 0.5, b > 0.5) {
                (true, true) => both += 1,
                (true, false) => {
                    a_only += 1;
                    lost.push(episode());
                }
                (false, true) => {
                    b_only += 1;
                    gained.push(episode());
                }
                (false, false) => neither += 1,
            }
        }
    }
    let n = both + a_only + b_only + neither;
    let frac = |k: usize| if n == 0 { 0.0 } else { k as f64 / n as f64 };
    RateDiff {
        n,
        a: frac(both + a_only),
        b: frac(both + b_only),
        diff: frac(b_only) - frac(a_only),
        ci95: paired_difference_ci(both, a_only, b_only, neither),
        p_value: mcnemar_exact(a_only, b_only),
        gained,
        lost,
        clustered: clustered.then(|| {
            let n_eff = effective_pairs(per_task);
            let scale = if n == 0 { 0.0 } else { n_eff / n as f64 };
            let cell = |k: usize| k as f64 * scale;
            Clustered {
                n_eff,
                ci95: newcombe(cell(both), cell(a_only), cell(b_only), cell(neither)),
                p_value: sign_flip_p(per_task, options),
            }
        }),
    }
}

/// The pairs' effective number: N / design effect, the design effect being the
/// cluster-robust variance of the mean difference over the G tasks (Liang-Zeger, G/(G-1)
/// factor) over its variance as if the N pairs were independent; at most N. Where the
/// differences do not vary, each task counts once.
fn effective_pairs(per_task: &PerTask) -> f64 {
    let diffs: Vec<f64> = per_task.values().flatten().map(|&(_, a, b)| b - a).collect();
    let n = diffs.len() as f64;
    let g = per_task.len() as f64;
    if diffs.len() < 2 || g < 2.0 {
        return n;
    }
    let mean = diffs.iter().sum::<f64>() / n;
    let naive = diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1.0) / n;
    if naive <= 0.0 {
        return g;
    }
    let residuals: f64 =
        per_task.values().map(|e| e.iter().map(|&(_, a, b)| b - a - mean).sum::<f64>().powi(2)).sum();
    let robust = g / (g - 1.0) * residuals / (n * n);
    if robust <= 0.0 { n } else { (n * naive / robust).min(n) }
}

fn mean_diff(per_task: &PerTask, options: CompareOptions) -> MeanDiff {
    let pairs: Vec<(f64, f64)> = per_task.values().flatten().map(|&(_, a, b)| (a, b)).collect();
    let n = pairs.len();
    let mean = |f: fn(&(f64, f64)) -> f64| pairs.iter().map(f).sum::<f64>() / n.max(1) as f64;
    let (a, b) = (mean(|p| p.0), mean(|p| p.1));
    MeanDiff {
        n,
        a,
        b,
        diff: mean(|p| p.1 - p.0),
        ci95: bootstrap_ci(per_task, options),
        p_value: sign_flip_p(per_task, options),
    }
}

/// Each task's sum of `b - a` over its epochs, and its number of pairs.
fn task_sums(per_task: &PerTask) -> Vec<(f64, usize)> {
    per_task.values().map(|e| (e.iter().map(|&(_, a, b)| b - a).sum(), e.len())).collect()
}

/// The 2.5% and 97.5% percentiles of the mean difference over `resamples` resamples of the
/// tasks with replacement (each task with all its epochs): the paired bootstrap, clustered by
/// task. Seeded: the same input gives the same interval.
pub fn bootstrap_ci(per_task: &PerTask, options: CompareOptions) -> (f64, f64) {
    let sums = task_sums(per_task);
    let total: usize = sums.iter().map(|s| s.1).sum();
    if sums.is_empty() || total == 0 {
        return (0.0, 0.0);
    }
    let point = sums.iter().map(|s| s.0).sum::<f64>() / total as f64;
    if options.resamples == 0 {
        return (point, point);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut stats: Vec<f64> = (0..options.resamples)
        .map(|_| {
            let (mut sum, mut n) = (0.0, 0);
            for _ in 0..sums.len() {
                let (s, k) = sums[rng.random_range(0..sums.len())];
                sum += s;
                n += k;
            }
            sum / n as f64
        })
        .collect();
    stats.sort_by(f64::total_cmp);
    (quantile(&stats, 0.025), quantile(&stats, 0.975))
}

/// Linear interpolation between the order statistics of sorted `values`.
fn quantile(values: &[f64], q: f64) -> f64 {
    let pos = q * (values.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    values[lo] + (values[hi] - values[lo]) * (pos - lo as f64)
}

/// Two-sided p-value of "A and B do as well", swapping A and B within each task at random
/// (each task's summed difference changes sign with probability 1/2): `(1 + #{|T*| ≥ |T|}) /
/// (1 + R)` over `R = resamples` draws, T the total difference. Tasks are the unit, so the
/// epochs of a task move together.
pub fn sign_flip_p(per_task: &PerTask, options: CompareOptions) -> f64 {
    let sums: Vec<f64> = task_sums(per_task).into_iter().map(|s| s.0).collect();
    let observed = sums.iter().sum::<f64>().abs();
    if sums.iter().all(|d| *d == 0.0) || options.resamples == 0 {
        return 1.0;
    }
    // Sums of the same terms in another order differ in their last bits.
    let tolerance = 1e-9 * sums.iter().map(|d| d.abs()).sum::<f64>();
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let extreme = (0..options.resamples)
        .filter(|_| {
            let t: f64 = sums.iter().map(|d| if rng.random_bool(0.5) { *d } else { -*d }).sum();
            t.abs() >= observed - tolerance
        })
        .count();
    (1 + extreme) as f64 / (1 + options.resamples) as f64
}

/// The exact McNemar test: of the `a_only + b_only` discordant pairs, `b_only` ~ Binomial(n,
/// 1/2) under "A and B pass as often"; two-sided p-value `min(1, 2·P(X ≤ min(a_only,
/// b_only)))`. No discordant pair: 1.
pub fn mcnemar_exact(a_only: usize, b_only: usize) -> f64 {
    let n = a_only + b_only;
    if n == 0 {
        return 1.0;
    }
    let k = a_only.min(b_only);
    // In logarithms: 0.5^n underflows past n = 1074.
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_choose = 0.0; // ln C(n, 0)
    let mut terms = Vec::with_capacity(k + 1);
    for i in 0..=k {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        terms.push(ln_choose + ln_half_n);
    }
    let max = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let tail = max.exp() * terms.iter().map(|t| (t - max).exp()).sum::<f64>();
    (2.0 * tail).min(1.0)
}

/// The 95% interval of `p_B - p_A` for paired pass/fail outcomes: Newcombe's hybrid score
/// interval (1998, method 10) from the Wilson intervals of both rates and the phi correlation
/// of the pairs. Unlike an interval built on the discordant pairs alone, it does not collapse
/// to a point when no pair is discordant (both runs at 100% on 20 tasks: about ±16 points).
pub fn paired_difference_ci(both: usize, a_only: usize, b_only: usize, neither: usize) -> (f64, f64) {
    newcombe(both as f64, a_only as f64, b_only as f64, neither as f64)
}

/// [`paired_difference_ci`] of a table whose cells may be fractional (scaled to an effective
/// number of pairs).
fn newcombe(a: f64, b: f64, c: f64, d: f64) -> (f64, f64) {
    let nf = a + b + c + d;
    if nf <= 0.0 {
        return (-1.0, 1.0);
    }
    let (p1, p2) = ((a + b) / nf, (a + c) / nf);
    let ((l1, u1), (l2, u2)) = (wilson(p1, nf), wilson(p2, nf));
    let denominator = ((a + b) * (c + d) * (a + c) * (b + d)).sqrt();
    let phi = if denominator > 0.0 { (a * d - b * c) / denominator } else { 0.0 };
    // Newcombe's θ = p1 - p2 = A - B; B - A is its negation.
    let theta = p1 - p2;
    let delta = ((p1 - l1).powi(2) - 2.0 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2).powi(2)).max(0.0).sqrt();
    let epsilon = ((u1 - p1).powi(2) - 2.0 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2).powi(2)).max(0.0).sqrt();
    let (lo, hi) = (theta - delta, theta + epsilon);
    ((-hi).max(-1.0), (-lo).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netdojo_core::{EndReason, Metric};

    fn rec(task: usize, epoch: u32, correct: bool, steps: u64) -> ((String, u32), EpisodeRecord) {
        let record = EpisodeRecord {
            task_id: format!("t{task}"),
            epoch,
            application: "dcgraph".into(),
            level: 1,
            label: "add".into(),
            domain: None,
            agent: "a".into(),
            status: EpisodeStatus::Completed,
            error: None,
            cause: None,
            end: EndReason::Finished,
            steps: steps as usize,
            invalid_steps: 0,
            wall_ms: 1,
            timing: Default::default(),
            class: None,
            tokens: Default::default(),
            metrics: vec![Metric::pass("correct", correct), Metric::count("steps", steps)],
        };
        ((record.task_id.clone(), epoch), record)
    }

    fn run(passes: &[usize], tasks: usize) -> BTreeMap<(String, u32), EpisodeRecord> {
        (0..tasks).map(|t| rec(t, 0, passes.contains(&t), 2)).collect()
    }

    #[test]
    fn mcnemar_exact_matches_hand_computation() {
        // 1 and 7 discordant pairs: 2·(C(8,0) + C(8,1))/2⁸ = 18/256.
        assert!((mcnemar_exact(1, 7) - 18.0 / 256.0).abs() < 1e-15);
        assert_eq!(mcnemar_exact(7, 1), mcnemar_exact(1, 7), "two-sided");
        // 12 flips one way, none back: 2/2¹².
        assert!((mcnemar_exact(0, 12) - 2.0 / 4096.0).abs() < 1e-15);
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        assert_eq!(mcnemar_exact(5, 5), 1.0, "2·P(X ≤ 5) > 1 is capped");
        // 3 and 5: 2·(1 + 8 + 28 + 56)/256 = 186/256.
        assert!((mcnemar_exact(3, 5) - 186.0 / 256.0).abs() < 1e-15);
        let big = mcnemar_exact(900, 1100);
        assert!(big > 0.0 && big < 1e-4, "no underflow past 1074 pairs: {big}");
    }

    #[test]
    fn a_known_flip_pattern_gives_the_hand_computed_differences() {
        // A passes t0-t3 and t9, B passes t0-t8: t4-t8 gained, t9 lost.
        let a = run(&[0, 1, 2, 3, 9], 10);
        let b = run(&[0, 1, 2, 3, 4, 5, 6, 7, 8], 10);
        let c = Comparison::paired(&a, &b, CompareOptions::default());
        assert_eq!((c.pairs, c.tasks, c.epochs, c.only_a, c.only_b), (10, 10, 1, 0, 0));
        let r = &c.rates["correct"];
        assert_eq!((r.n, r.a, r.b), (10, 0.5, 0.9));
        assert!((r.diff - 0.4).abs() < 1e-12);
        // 6 discordant pairs, 1 against: 2·(C(6,0) + C(6,1))/2⁶ = 14/64.
        assert!((r.p_value - 14.0 / 64.0).abs() < 1e-15, "{}", r.p_value);
        let ids = |v: &[Episode]| v.iter().map(|e| e.task.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&r.gained), ["t4", "t5", "t6", "t7", "t8"]);
        assert_eq!(ids(&r.lost), ["t9"]);
        assert!(r.ci95.0 < r.diff && r.diff < r.ci95.1, "{:?}", r.ci95);
        assert!(r.clustered.is_none(), "one epoch: McNemar's pairs are independent");
        let steps = &c.means["steps"];
        assert_eq!((steps.n, steps.diff, steps.ci95, steps.p_value), (10, 0.0, (0.0, 0.0), 1.0));
        insta::assert_snapshot!(c.render());
    }

    #[test]
    fn newcombe_interval_holds_without_discordant_pairs() {
        // Both runs pass all 20: the difference is 0, but 20 tasks cannot show it is exactly 0.
        let (lo, hi) = paired_difference_ci(20, 0, 0, 0);
        let wilson_hi = 1.0 - wilson(1.0, 20.0).0;
        assert!((hi - wilson_hi).abs() < 1e-12 && (lo + wilson_hi).abs() < 1e-12, "{lo} {hi}");
        assert!((hi - 0.1611).abs() < 1e-3);
        // Hand computation of method 10 for (both, A only, B only, neither) = (3, 1, 4, 2), n = 10:
        // p1 = 0.4, p2 = 0.7, phi = (3·2 - 1·4)/sqrt(4·6·7·3) = 2/sqrt(504).
        let (l1, u1) = wilson(0.4, 10.0);
        let (l2, u2) = wilson(0.7, 10.0);
        let phi = 2.0 / 504f64.sqrt();
        let delta = ((0.4 - l1).powi(2) - 2.0 * phi * (0.4 - l1) * (u2 - 0.7) + (u2 - 0.7).powi(2)).sqrt();
        let eps = ((u1 - 0.4).powi(2) - 2.0 * phi * (u1 - 0.4) * (0.7 - l2) + (0.7 - l2).powi(2)).sqrt();
        let (lo, hi) = paired_difference_ci(3, 1, 4, 2);
        assert!((lo - (0.3 - eps)).abs() < 1e-12 && (hi - (0.3 + delta)).abs() < 1e-12, "{lo} {hi}");
        assert!(lo < 0.3 && 0.3 < hi && lo >= -1.0 && hi <= 1.0);
    }

    #[test]
    fn bootstrap_and_sign_flip_are_seeded_and_cluster_by_task() {
        // 10 tasks × 3 epochs; B is better by one step on every epoch of every task.
        let a: BTreeMap<_, _> = (0..10).flat_map(|t| (0..3).map(move |e| rec(t, e, t < 5, 4))).collect();
        let b: BTreeMap<_, _> = (0..10).flat_map(|t| (0..3).map(move |e| rec(t, e, t < 8, 3))).collect();
        let options = CompareOptions { resamples: 2000, seed: 7 };
        let c = Comparison::paired(&a, &b, options);
        assert_eq!((c.pairs, c.tasks, c.epochs), (30, 10, 3));
        assert_eq!(c, Comparison::paired(&a, &b, options), "same seed, same numbers");
        let steps = &c.means["steps"];
        assert_eq!((steps.diff, steps.ci95), (-1.0, (-1.0, -1.0)), "every pair differs by 1");
        // |T*| = |T| only when every task keeps or every task flips its sign: 2/2¹⁰ of draws.
        assert!(steps.p_value < 0.01, "{}", steps.p_value);
        let r = &c.rates["correct"];
        assert_eq!((r.gained.len(), r.lost.len()), (9, 0));
        let clustered = r.clustered.expect("epochs: clustered");
        // McNemar counts 9 independent flips; only 3 tasks flipped, so over tasks the evidence
        // is weaker: 3 tasks of 10 flipping the same way.
        assert!(clustered.p_value > r.p_value, "{} vs {}", clustered.p_value, r.p_value);
        // Epochs agree within tasks: 30 pairs are worth about 10. By hand: d = 1 on 9 pairs,
        // mean 0.3; naive variance 0.21·30/29/30, robust 10/9·(3·2.1² + 7·0.9²)/900.
        let naive = 0.21 * 30.0 / 29.0 / 30.0;
        let robust = 10.0 / 9.0 * (3.0 * 2.1f64.powi(2) + 7.0 * 0.9f64.powi(2)) / 900.0;
        assert!((clustered.n_eff - 30.0 * naive / robust).abs() < 1e-9, "{}", clustered.n_eff);
        assert!(clustered.n_eff > 8.0 && clustered.n_eff < 11.0, "{}", clustered.n_eff);
        assert!(clustered.ci95.0 < r.ci95.0 && r.ci95.1 < clustered.ci95.1, "wider: {clustered:?} {r:?}");
        let other = Comparison::paired(&a, &b, CompareOptions { resamples: 2000, seed: 8 });
        assert_ne!(other.rates["correct"].clustered, r.clustered, "another seed, other draws");
        // Every pair differs alike: the tasks are the units.
        let none: BTreeMap<_, _> = (0..10).flat_map(|t| (0..3).map(move |e| rec(t, e, false, 4))).collect();
        let all: BTreeMap<_, _> = (0..10).flat_map(|t| (0..3).map(move |e| rec(t, e, true, 4))).collect();
        let c = Comparison::paired(&none, &all, options);
        let clustered = c.rates["correct"].clustered.expect("clustered");
        assert_eq!((clustered.n_eff, clustered.ci95), (10.0, paired_difference_ci(0, 0, 10, 0)));
        assert!(clustered.ci95.0 < 0.8, "not a point at +100: {:?}", clustered.ci95);
    }

    #[test]
    fn unpaired_and_errored_episodes_are_counted_not_paired() {
        let a = run(&[0], 4);
        let mut b = run(&[0, 1], 3);
        b.get_mut(&("t2".to_string(), 0)).expect("t2").status = EpisodeStatus::Errored;
        let c = Comparison::paired(&a, &b, CompareOptions::default());
        assert_eq!((c.pairs, c.only_a, c.only_b), (2, 2, 0));
        assert_eq!(c.rates["correct"].gained.len(), 1);
    }
}
