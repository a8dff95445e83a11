//! The numbers behind the report's overview: per run, one row overall, one per level, one per
//! (level, label) and one per domain. Rates and their intervals are `netdojo_score`'s
//! [`Proportion`]s as the summary computes them (a change of estimator there shows here);
//! tokens, wall time and cost are sums over the row's episodes.

use std::collections::BTreeMap;

use netdojo_core::{EpisodeRecord, EpisodeStatus, MetricValue};
use netdojo_score::{Proportion, Summary, SummaryRow};
use serde::Serialize;

use crate::{COST_METRIC, Run};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overview {
    pub runs: Vec<RunOverview>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunOverview {
    pub name: String,
    pub agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Tasks with a record (the latest of each).
    pub episodes: usize,
    pub errored: usize,
    /// Completed episodes whose `correct` passed.
    pub solved: usize,
    pub tokens: Tokens,
    /// The episodes' wall time, summed (they may have run in parallel).
    pub wall_s: f64,
    /// Present only when some episode recorded [`COST_METRIC`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_solved_usd: Option<f64>,
    /// Present only when the agent reported tokens and something was solved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_solved: Option<f64>,
    pub rows: Vec<Row>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    All,
    Level,
    Label,
    Domain,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub kind: RowKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Completed (scored) episodes.
    pub n: usize,
    pub errored: usize,
    pub rates: BTreeMap<String, Rate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_steps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_wall_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_wall_s_ci95: Option<(f64, f64)>,
    /// The means of the other value metrics (NetConfBench's scores: `checks_passed`,
    /// `command_f1`, `reasoning`...) with their 95% intervals, as the summary computed them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub scores: BTreeMap<String, Mean>,
    pub tokens: Tokens,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Row {
    /// The row's name in a table: `all`, `level 2`, `2 / add`, `domain routing`.
    pub fn name(&self) -> String {
        match self.kind {
            RowKind::All => "all".into(),
            RowKind::Level => format!("level {}", self.level.unwrap_or_default()),
            RowKind::Label => {
                format!("{} / {}", self.level.unwrap_or_default(), self.label.as_deref().unwrap_or_default())
            }
            RowKind::Domain => format!("domain {}", self.domain.as_deref().unwrap_or_default()),
        }
    }
}

/// A mean as the summary computed it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Mean {
    pub mean: f64,
    pub ci95: (f64, f64),
}

/// A pass rate as the summary computed it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rate {
    pub successes: usize,
    pub n: usize,
    pub rate: f64,
    pub ci95: (f64, f64),
}

impl From<&Proportion> for Rate {
    fn from(p: &Proportion) -> Self {
        Self { successes: p.successes, n: p.n, rate: p.rate, ci95: p.ci95 }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    pub prompt: u64,
    pub completion: u64,
}

impl Tokens {
    pub fn total(&self) -> u64 {
        self.prompt + self.completion
    }

    fn of<'a>(records: impl IntoIterator<Item = &'a EpisodeRecord>) -> Self {
        records.into_iter().fold(Tokens::default(), |t, r| Tokens {
            prompt: t.prompt + r.tokens.prompt_tokens,
            completion: t.completion + r.tokens.completion_tokens,
        })
    }
}

/// The sum of [`COST_METRIC`] over the records, `None` when no record has it.
fn cost<'a>(records: impl IntoIterator<Item = &'a EpisodeRecord>) -> Option<f64> {
    let costs: Vec<f64> =
        records.into_iter().filter_map(|r| r.metric(COST_METRIC)).map(MetricValue::as_f64).collect();
    (!costs.is_empty()).then(|| costs.iter().sum())
}

/// True when the record is completed and its `correct` passed.
pub fn solved(record: &EpisodeRecord) -> bool {
    record.status == EpisodeStatus::Completed && record.metric("correct") == Some(MetricValue::Pass(true))
}

impl Overview {
    pub fn of(runs: &[Run]) -> Self {
        Self { runs: runs.iter().map(RunOverview::of).collect() }
    }
}

impl RunOverview {
    pub fn of(run: &Run) -> Self {
        let records = &run.records;
        let row = |kind, s: &SummaryRow, pick: &dyn Fn(&EpisodeRecord) -> bool| {
            let mine: Vec<&EpisodeRecord> = records.iter().filter(|r| pick(r)).collect();
            Row {
                kind,
                level: s.level,
                label: (kind == RowKind::Label).then(|| s.label.clone()),
                domain: s.domain.clone(),
                n: s.n,
                errored: s.errored,
                rates: s.rates.iter().map(|(k, p)| (k.clone(), Rate::from(p))).collect(),
                median_steps: s.medians.get("steps").copied(),
                mean_wall_s: s.means.get("wall_s").copied(),
                mean_wall_s_ci95: s.mean_ci95.get("wall_s").copied(),
                scores: s
                    .means
                    .iter()
                    .filter(|(k, _)| k.as_str() != "wall_s" && k.as_str() != crate::COST_METRIC)
                    .map(|(k, m)| {
                        (k.clone(), Mean { mean: *m, ci95: s.mean_ci95.get(k).copied().unwrap_or((*m, *m)) })
                    })
                    .collect(),
                tokens: Tokens::of(mine.iter().copied()),
                cost_usd: cost(mine.iter().copied()),
            }
        };
        let mut rows = Vec::new();
        if let Some(all) = run.summary.overall() {
            rows.push(row(RowKind::All, all, &|_| true));
        }
        // Per level: the same statistics over the records relabelled by their level alone.
        let by_level: Vec<EpisodeRecord> = records
            .iter()
            .map(|r| EpisodeRecord { label: format!("level {}", r.level), ..r.clone() })
            .collect();
        for s in Summary::from_records(&by_level).rows.iter().filter(|s| s.level.is_some()) {
            let level = s.level;
            rows.push(row(RowKind::Level, s, &|r| Some(r.level) == level));
        }
        for s in run.summary.rows.iter().filter(|s| s.level.is_some()) {
            let (level, label) = (s.level, s.label.clone());
            rows.push(row(RowKind::Label, s, &|r| Some(r.level) == level && r.label == label));
        }
        for s in run.summary.rows.iter().filter(|s| s.level.is_none() && s.domain.is_some()) {
            let domain = s.domain.clone();
            rows.push(row(RowKind::Domain, s, &|r| r.domain == domain));
        }

        let solved = records.iter().filter(|r| solved(r)).count();
        let tokens = Tokens::of(records);
        let cost_usd = cost(records);
        let per_solved = |total: f64| (solved > 0).then(|| total / solved as f64);
        Self {
            name: run.name.clone(),
            agent: run.agent(),
            env: run.env(),
            model: run.model(),
            episodes: records.len(),
            errored: records.iter().filter(|r| r.status == EpisodeStatus::Errored).count(),
            solved,
            tokens,
            wall_s: records.iter().map(|r| r.wall_ms as f64 / 1000.0).sum(),
            cost_usd,
            cost_per_solved_usd: cost_usd.and_then(per_solved),
            tokens_per_solved: (tokens.total() > 0).then(|| per_solved(tokens.total() as f64)).flatten(),
            rows,
        }
    }
}
