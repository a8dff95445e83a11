//! The static report: `index.html` (runs, overview tables, plots, the episode list with its
//! filters) and one page per episode (`rN/TASK.html`: the brief, every step with the state
//! check after it, the final checks, the metrics, the model's messages).
//!
//! Every string that comes from a run is written through [`esc`]; the only script is the
//! list's filter, written here, and it reads the rows' `data-` attributes, never HTML.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use netdojo_core::store::file_stem;
use netdojo_core::{EpisodeRecord, EpisodeStatus, MetricValue, StateCheck, Trajectory};
use serde_json::Value;

use crate::overview::{Overview, Rate, Row, RunOverview, solved};
use crate::{COST_METRIC, ReportError, Run, Site, svg};

// Shared with `svg`, which sits below this module.
pub use crate::escape::esc;

/// Text longer than this (lines or characters) is folded: shown whole, behind a click.
const FOLD_LINES: usize = 40;
const FOLD_CHARS: usize = 4000;

/// A block of text, folded when large (never cut).
fn block(text: &str) -> String {
    let lines = text.lines().count();
    if lines > FOLD_LINES || text.len() > FOLD_CHARS {
        format!(
            "<details class=\"fold\"><summary>{lines} lines, {} characters: unfold</summary><pre>{}</pre></details>",
            text.chars().count(),
            esc(text)
        )
    } else {
        format!("<pre>{}</pre>", esc(text))
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn pct(r: &Rate) -> String {
    format!(
        "{:.1}% <span class=\"ci\">[{:.1}, {:.1}]</span>",
        r.rate * 100.0,
        r.ci95.0 * 100.0,
        r.ci95.1 * 100.0
    )
}

/// An episode as people read it: its task, and its epoch when the run has several.
fn episode_name(record: &EpisodeRecord) -> String {
    match record.epoch {
        0 => record.task_id.clone(),
        e => format!("{} (epoch {e})", record.task_id),
    }
}

/// The page's path for an episode, relative to the report's root, and its link from there
/// (a `%` of the file name is a literal in the link); an epoch after the first is `ID~E`, as
/// its trajectory's file.
fn episode_path(run: usize, task_id: &str, epoch: u32) -> (String, String) {
    let stem = match epoch {
        0 => file_stem(task_id),
        e => format!("{}~{e}", file_stem(task_id)),
    };
    (format!("r{run}/{stem}.html"), format!("r{run}/{}.html", stem.replace('%', "%25")))
}

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 18px 40px;color:#1b1b1b}
h1{margin:18px 0 4px}h2{margin-top:32px;border-bottom:1px solid #ccc}h3{margin:20px 0 6px}
table{border-collapse:collapse;margin:6px 0}th,td{padding:3px 8px;border-bottom:1px solid #e3e3e3;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.ci{color:#666;font-size:12px}.muted{color:#666}
pre{background:#f7f7f7;padding:6px 8px;margin:4px 0;white-space:pre-wrap;word-break:break-word;max-width:100%}
.plots{display:flex;flex-wrap:wrap;gap:12px}.plot{border:1px solid #e3e3e3;background:#fff}
.ptitle{font-size:13px;font-weight:600}.axis{font-size:12px;fill:#333}.tick{font-size:10px;fill:#555}
.grid{stroke:#eee}.whisker{stroke:#222;stroke-width:1.5}
.swatch{display:inline-block;width:11px;height:11px;margin-right:5px;vertical-align:middle}
.filters{display:flex;flex-wrap:wrap;gap:10px;align-items:center;margin:8px 0}
.ok{color:#16702e;font-weight:600}.bad{color:#b3261e;font-weight:600}.err{color:#8a5a00;font-weight:600}
.step{border:1px solid #ddd;border-left:4px solid #7aa7d6;padding:4px 12px 8px;margin:12px 0}
.step.unsafe{border-left-color:#b3261e}.step.invalid{border-left-color:#8a5a00}
.label{font-weight:600;margin-top:6px}
table.mesh td{padding:0;width:18px;height:18px;text-align:center;font-size:11px;border:1px solid #fff}
table.mesh th{font-size:11px;padding:1px 4px}
td.up{background:#cfe8d4}td.down{background:#f3c5c1}td.self{background:#eee}
td.changed,tr.changed td{outline:2px solid #222;outline-offset:-2px;font-weight:700}
details.fold>summary{cursor:pointer;color:#0b57d0}
nav a{margin-right:12px}
"#;

/// The list's filter: each control names a row attribute; the text box searches `data-text`;
/// the URL's fragment may set the controls (`#label=add&outcome=failed`).
const FILTER_SCRIPT: &str = r#"(function () {
  var rows = Array.prototype.slice.call(document.querySelectorAll('#episodes tbody tr'));
  var controls = Array.prototype.slice.call(document.querySelectorAll('[data-filter]'));
  var shown = document.getElementById('shown');
  function apply() {
    var n = 0;
    rows.forEach(function (row) {
      var keep = controls.every(function (c) {
        var want = c.value.trim().toLowerCase();
        if (!want) { return true; }
        var field = c.getAttribute('data-filter');
        var have = (row.getAttribute('data-' + field) || '').toLowerCase();
        return field === 'text' ? have.indexOf(want) >= 0 : have === want;
      });
      row.hidden = !keep;
      if (keep) { n += 1; }
    });
    shown.textContent = n + ' of ' + rows.length + ' episodes shown';
  }
  // A link can carry filters: index.html#label=add&outcome=failed.
  var hash = decodeURIComponent(location.hash.slice(1));
  if (hash.indexOf('=') > 0) {
    hash.split('&').forEach(function (pair) {
      var at = pair.indexOf('=');
      controls.forEach(function (c) {
        if (c.getAttribute('data-filter') === pair.slice(0, at)) { c.value = pair.slice(at + 1); }
      });
    });
  }
  controls.forEach(function (c) { c.addEventListener('input', apply); });
  apply();
})();"#;

fn page(title: &str, body: &str, script: Option<&str>) -> String {
    let script = script.map(|s| format!("<script>{s}</script>")).unwrap_or_default();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><link rel=\"icon\" href=\"data:,\"><title>{}</title><style>{STYLE}</style></head><body>{body}{script}</body></html>\n",
        esc(title)
    )
}

/// The whole report for these runs, side by side.
pub fn render(runs: &[Run]) -> Result<Site, ReportError> {
    if runs.is_empty() {
        return Err(ReportError::Invalid("no run to report on".into()));
    }
    let overview = Overview::of(runs);
    let mut site = Site::default();
    let mut list = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        for record in &run.records {
            let trajectory = run.trajectory(record).ok();
            let (path, href) = episode_path(i, &record.task_id, record.epoch);
            let html = episode_page(run, record, trajectory.as_ref());
            site.files.insert(path, html.into_bytes());
            list.push(ListRow {
                run: i,
                href,
                record,
                brief: trajectory.map(|t| t.brief).unwrap_or_default(),
            });
        }
    }
    site.files.insert("index.html".into(), index_page(runs, &overview, &list).into_bytes());
    Ok(site)
}

struct ListRow<'a> {
    run: usize,
    href: String,
    record: &'a EpisodeRecord,
    brief: String,
}

fn outcome(record: &EpisodeRecord) -> &'static str {
    if record.status == EpisodeStatus::Errored {
        "errored"
    } else if solved(record) {
        "solved"
    } else {
        "failed"
    }
}

fn outcome_html(record: &EpisodeRecord) -> String {
    let o = outcome(record);
    let class = match o {
        "solved" => "ok",
        "failed" => "bad",
        _ => "err",
    };
    format!("<span class=\"{class}\">{o}</span>")
}

fn safe_html(record: &EpisodeRecord) -> &'static str {
    match record.metric("safe") {
        Some(MetricValue::Pass(true)) => "<span class=\"ok\">safe</span>",
        Some(MetricValue::Pass(false)) => "<span class=\"bad\">unsafe</span>",
        _ => "<span class=\"muted\">-</span>",
    }
}

/// Rate names, correctness first then safety (the order the seeds report them).
fn rate_names(rows: &[&RunOverview]) -> Vec<String> {
    netdojo_score::stats::rate_order(
        rows.iter().flat_map(|r| r.rows.iter().flat_map(|row| row.rates.keys().cloned())),
    )
}

fn index_page(runs: &[Run], overview: &Overview, list: &[ListRow<'_>]) -> String {
    let mut b = String::new();
    let episodes: usize = overview.runs.iter().map(|r| r.episodes).sum();
    let _ = write!(
        b,
        "<h1>netdojo report</h1><p class=\"muted\">{} run(s), {episodes} episode(s). <nav><a href=\"#overview\">overview</a><a href=\"#plots\">plots</a><a href=\"#episodes-list\">episodes</a></nav></p>",
        runs.len()
    );
    let any_cost = overview.runs.iter().any(|r| r.cost_usd.is_some());

    // The runs.
    b.push_str("<h2 id=\"overview\">Runs</h2><table><thead><tr><th>run</th><th>env</th><th>agent</th><th>model</th><th class=\"num\">episodes</th><th class=\"num\">errored</th><th class=\"num\">solved</th><th class=\"num\">tokens (prompt + completion)</th><th class=\"num\">wall time, summed</th>");
    if any_cost {
        b.push_str("<th class=\"num\">cost</th><th class=\"num\">cost per solved task</th>");
    }
    b.push_str("</tr></thead><tbody>");
    for (i, (run, o)) in runs.iter().zip(&overview.runs).enumerate() {
        let _ = write!(
            b,
            "<tr><td><span class=\"swatch\" style=\"background:{c}\"></span>{name}<div class=\"muted\">{path}</div></td><td>{env}</td><td>{agent}</td><td>{model}</td><td class=\"num\">{n}</td><td class=\"num\">{err}</td><td class=\"num\">{solved}</td><td class=\"num\">{tokens}</td><td class=\"num\">{wall:.1} s</td>",
            c = svg::color(i),
            name = esc(&o.name),
            path = esc(&run.store.path().display().to_string()),
            env = esc(o.env.as_deref().unwrap_or("-")),
            agent = esc(&o.agent),
            model = esc(o.model.as_deref().unwrap_or("-")),
            n = o.episodes,
            err = o.errored,
            solved = o.solved,
            tokens = tokens(o.tokens),
            wall = o.wall_s,
        );
        if any_cost {
            let money = |v: Option<f64>| v.map(|v| format!("${v:.4}")).unwrap_or_else(|| "-".into());
            let _ = write!(
                b,
                "<td class=\"num\">{}</td><td class=\"num\">{}</td>",
                money(o.cost_usd),
                money(o.cost_per_solved_usd)
            );
        }
        b.push_str("</tr>");
    }
    b.push_str("</tbody></table>");

    plots(&mut b, overview, runs);

    let all: Vec<&RunOverview> = overview.runs.iter().collect();
    let names = rate_names(&all);
    if overview.runs.len() > 1 {
        side_by_side(&mut b, overview);
    }
    // Per run: every row with its rates.
    for (i, o) in overview.runs.iter().enumerate() {
        let _ = write!(
            b,
            "<h3><span class=\"swatch\" style=\"background:{}\"></span>{}: per level, label and domain</h3>",
            svg::color(i),
            esc(&o.name)
        );
        b.push_str("<table class=\"summary\"><thead><tr><th>group</th><th class=\"num\">n</th><th class=\"num\">errored</th>");
        for n in &names {
            let _ = write!(b, "<th class=\"num\">{} (95% CI)</th>", esc(n));
        }
        let scores: Vec<String> = {
            let mut names: Vec<String> = o.rows.iter().flat_map(|r| r.scores.keys().cloned()).collect();
            names.sort();
            names.dedup();
            names
        };
        for n in &scores {
            let _ = write!(b, "<th class=\"num\">mean {} (95% CI)</th>", esc(n));
        }
        b.push_str("<th class=\"num\">median steps</th><th class=\"num\">mean wall s (95% CI)</th><th class=\"num\">tokens</th>");
        let has_cost = o.cost_usd.is_some();
        if has_cost {
            b.push_str("<th class=\"num\">cost</th>");
        }
        b.push_str("</tr></thead><tbody>");
        for row in &o.rows {
            summary_row(&mut b, row, &names, &scores, has_cost);
        }
        b.push_str("</tbody></table>");
    }

    episode_list(&mut b, runs, list);
    page("netdojo report", &b, Some(FILTER_SCRIPT))
}

/// The runs compared group by group (the groups of any run, in the order they first appear):
/// correctness and safety with their intervals, one column pair per run.
fn side_by_side(b: &mut String, overview: &Overview) {
    let mut groups: Vec<String> = Vec::new();
    for o in &overview.runs {
        for row in &o.rows {
            if !groups.contains(&row.name()) {
                groups.push(row.name());
            }
        }
    }
    b.push_str("<h3>Side by side</h3><table class=\"compare\"><thead><tr><th>group</th>");
    for (i, o) in overview.runs.iter().enumerate() {
        let _ = write!(
            b,
            "<th class=\"num\" colspan=\"2\"><span class=\"swatch\" style=\"background:{}\"></span>{}</th>",
            svg::color(i),
            esc(&o.name)
        );
    }
    b.push_str("</tr><tr><th></th>");
    for _ in &overview.runs {
        b.push_str("<th class=\"num\">correct (95% CI)</th><th class=\"num\">safe (95% CI)</th>");
    }
    b.push_str("</tr></thead><tbody>");
    for group in &groups {
        let _ = write!(b, "<tr><td>{}</td>", esc(group));
        for o in &overview.runs {
            let row = o.rows.iter().find(|r| &r.name() == group);
            for rate in ["correct", "safe"] {
                let cell = row.and_then(|r| r.rates.get(rate)).map(pct).unwrap_or_else(|| "-".into());
                let _ = write!(b, "<td class=\"num\">{cell}</td>");
            }
        }
        b.push_str("</tr>");
    }
    b.push_str("</tbody></table>");
}

fn summary_row(b: &mut String, row: &Row, names: &[String], scores: &[String], has_cost: bool) {
    let _ = write!(
        b,
        "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
        esc(&row.name()),
        row.n,
        row.errored
    );
    for n in names {
        let cell = row.rates.get(n).map(pct).unwrap_or_else(|| "-".into());
        let _ = write!(b, "<td class=\"num\">{cell}</td>");
    }
    for n in scores {
        let cell = row
            .scores
            .get(n)
            .map(|m| format!("{:.3} <span class=\"ci\">[{:.3}, {:.3}]</span>", m.mean, m.ci95.0, m.ci95.1))
            .unwrap_or_else(|| "-".into());
        let _ = write!(b, "<td class=\"num\">{cell}</td>");
    }
    let steps = row.median_steps.map(|s| format!("{s}")).unwrap_or_else(|| "-".into());
    let wall = match (row.mean_wall_s, row.mean_wall_s_ci95) {
        (Some(m), Some((lo, hi))) => format!("{m:.3} <span class=\"ci\">[{lo:.3}, {hi:.3}]</span>"),
        (Some(m), None) => format!("{m:.3}"),
        _ => "-".into(),
    };
    let _ = write!(
        b,
        "<td class=\"num\">{steps}</td><td class=\"num\">{wall}</td><td class=\"num\">{}</td>",
        tokens(row.tokens)
    );
    if has_cost {
        let cost = row.cost_usd.map(|c| format!("${c:.4}")).unwrap_or_else(|| "-".into());
        let _ = write!(b, "<td class=\"num\">{cost}</td>");
    }
    b.push_str("</tr>");
}

/// `prompt + completion`, or `-` when the agent reported none.
fn tokens(t: crate::overview::Tokens) -> String {
    if t.total() == 0 { "-".into() } else { format!("{} + {}", t.prompt, t.completion) }
}

fn plots(b: &mut String, overview: &Overview, runs: &[Run]) {
    b.push_str("<h2 id=\"plots\">Plots</h2><p>");
    for (i, o) in overview.runs.iter().enumerate() {
        let _ = write!(
            b,
            "<span class=\"swatch\" style=\"background:{}\"></span>{} &nbsp; ",
            svg::color(i),
            esc(&o.name)
        );
    }
    b.push_str("</p><div class=\"plots\">");
    let overall = |o: &RunOverview, rate: &str| {
        o.rows
            .iter()
            .find(|r| r.kind == crate::overview::RowKind::All)
            .and_then(|r| r.rates.get(rate).copied())
    };
    let points: Vec<(String, Option<Rate>, Option<Rate>)> =
        overview.runs.iter().map(|o| (o.name.clone(), overall(o, "safe"), overall(o, "correct"))).collect();
    // Safety is not measured everywhere (NetConfBench's tasks have no constraints to keep).
    let has_safe = points.iter().any(|(_, safe, _)| safe.is_some());
    if has_safe {
        b.push_str(&svg::correct_vs_safe(&points));
    }

    let levels: BTreeSet<u8> = overview
        .runs
        .iter()
        .flat_map(|o| o.rows.iter().filter(|r| r.kind == crate::overview::RowKind::Level))
        .filter_map(|r| r.level)
        .collect();
    let groups: Vec<String> = levels.iter().map(|l| l.to_string()).collect();
    for &rate in if has_safe { &["correct", "safe"][..] } else { &["correct"][..] } {
        let series: Vec<Vec<Option<Rate>>> = overview
            .runs
            .iter()
            .map(|o| {
                levels
                    .iter()
                    .map(|l| {
                        o.rows
                            .iter()
                            .find(|r| r.kind == crate::overview::RowKind::Level && r.level == Some(*l))
                            .and_then(|r| r.rates.get(rate).copied())
                    })
                    .collect()
            })
            .collect();
        b.push_str(&svg::rate_bars(&format!("{rate} by level (95% CI)"), "level", &groups, &series));
    }

    // The means of scores in [0, 1] (NetConfBench's tuple), each run's overall with its interval.
    let scores: BTreeSet<String> = overview
        .runs
        .iter()
        .flat_map(|o| o.rows.iter().filter(|r| r.kind == crate::overview::RowKind::All))
        .flat_map(|r| r.scores.iter())
        .filter(|(_, m)| (0.0..=1.0).contains(&m.ci95.0) && (0.0..=1.0).contains(&m.ci95.1))
        .map(|(k, _)| k.clone())
        .collect();
    if !scores.is_empty() {
        let names: Vec<String> = scores.iter().cloned().collect();
        let series: Vec<Vec<Option<Rate>>> = overview
            .runs
            .iter()
            .map(|o| {
                let all = o.rows.iter().find(|r| r.kind == crate::overview::RowKind::All);
                names
                    .iter()
                    .map(|n| {
                        let m = all?.scores.get(n)?;
                        Some(Rate { successes: 0, n: all?.n, rate: m.mean, ci95: m.ci95 })
                    })
                    .collect()
            })
            .collect();
        b.push_str(&svg::rate_bars("mean scores (95% CI)", "score", &names, &series));
    }

    fn completed(run: &Run) -> Vec<&EpisodeRecord> {
        run.records.iter().filter(|r| r.status == EpisodeStatus::Completed).collect()
    }
    let steps: Vec<Vec<f64>> =
        runs.iter().map(|r| completed(r).iter().map(|e| e.steps as f64).collect()).collect();
    b.push_str(&svg::histogram("steps per episode", "steps", &steps, true));
    // Milliseconds when every episode took less than a second (the scripted agents).
    let fast = runs.iter().flat_map(|r| &r.records).all(|e| e.wall_ms < 1000);
    let (scale, unit) = if fast { (1.0, "milliseconds") } else { (1000.0, "seconds") };
    let wall: Vec<Vec<f64>> =
        runs.iter().map(|r| completed(r).iter().map(|e| e.wall_ms as f64 / scale).collect()).collect();
    b.push_str(&svg::histogram("wall time per episode", unit, &wall, false));

    if overview.runs.iter().any(|o| o.cost_per_solved_usd.is_some()) {
        let v: Vec<(String, Option<f64>)> =
            overview.runs.iter().map(|o| (o.name.clone(), o.cost_per_solved_usd)).collect();
        b.push_str(&svg::value_bars("cost per solved task", "USD", &v));
    } else if overview.runs.iter().any(|o| o.tokens_per_solved.is_some()) {
        let v: Vec<(String, Option<f64>)> =
            overview.runs.iter().map(|o| (o.name.clone(), o.tokens_per_solved)).collect();
        b.push_str(&svg::value_bars("tokens per solved task (no cost recorded)", "tokens", &v));
    }
    b.push_str("</div>");
    if overview.runs.iter().all(|o| o.cost_usd.is_none()) {
        let _ = write!(
            b,
            "<p class=\"muted\">No run recorded a cost (metric <code>{COST_METRIC}</code>); cost columns are left out.</p>"
        );
    }
}

fn select(b: &mut String, field: &str, label: &str, values: &BTreeSet<String>) {
    let _ = write!(b, "<label>{label} <select data-filter=\"{field}\"><option value=\"\">all</option>");
    for v in values {
        let _ = write!(b, "<option value=\"{0}\">{0}</option>", esc(v));
    }
    b.push_str("</select></label>");
}

fn episode_list(b: &mut String, runs: &[Run], list: &[ListRow<'_>]) {
    b.push_str("<h2 id=\"episodes-list\">Episodes</h2><div class=\"filters\">");
    let set = |f: &dyn Fn(&ListRow<'_>) -> String| list.iter().map(f).collect::<BTreeSet<String>>();
    if runs.len() > 1 {
        select(b, "run", "run", &set(&|r| runs[r.run].name.clone()));
    }
    select(b, "level", "level", &set(&|r| r.record.level.to_string()));
    select(b, "label", "label", &set(&|r| r.record.label.clone()));
    let domains = set(&|r| r.record.domain.clone().unwrap_or_default());
    if domains.iter().any(|d| !d.is_empty()) {
        select(b, "domain", "domain", &domains);
    }
    select(b, "outcome", "outcome", &set(&|r| outcome(r.record).to_string()));
    // The finer class of each episode (docs/results.md, "Outcome classes").
    select(b, "class", "class", &set(&|r| r.record.class().as_str().to_string()));
    select(b, "agent", "agent", &set(&|r| r.record.agent.clone()));
    let _ = write!(
        b,
        "<label>search <input type=\"search\" data-filter=\"text\" placeholder=\"task, label, brief, error\"></label></div><p id=\"shown\">{} episodes</p>",
        list.len()
    );
    b.push_str("<table id=\"episodes\"><thead><tr>");
    if runs.len() > 1 {
        b.push_str("<th>run</th>");
    }
    b.push_str("<th>task</th><th class=\"num\">level</th><th>label</th><th>domain</th><th>agent</th><th>outcome</th><th>safety</th><th class=\"num\">steps</th><th class=\"num\">wall s</th><th class=\"num\">tokens</th></tr></thead><tbody>");
    for row in list {
        let r = row.record;
        let brief: String = row.brief.chars().take(500).collect();
        let text = format!(
            "{} {} {} {} {}",
            r.task_id,
            r.label,
            r.domain.as_deref().unwrap_or_default(),
            brief,
            r.error.as_deref().unwrap_or_default()
        )
        .to_lowercase();
        let _ = write!(
            b,
            "<tr data-run=\"{run}\" data-level=\"{level}\" data-label=\"{label}\" data-domain=\"{domain}\" data-outcome=\"{outcome}\" data-class=\"{class}\" data-agent=\"{agent}\" data-text=\"{text}\">",
            run = esc(&runs[row.run].name),
            level = r.level,
            label = esc(&r.label),
            domain = esc(r.domain.as_deref().unwrap_or_default()),
            outcome = outcome(r),
            class = r.class().as_str(),
            agent = esc(&r.agent),
            text = esc(&text),
        );
        if runs.len() > 1 {
            let _ = write!(
                b,
                "<td><span class=\"swatch\" style=\"background:{}\"></span>{}</td>",
                svg::color(row.run),
                esc(&runs[row.run].name)
            );
        }
        let _ = write!(
            b,
            "<td><a href=\"{href}\">{id}</a></td><td class=\"num\">{level}</td><td>{label}</td><td>{domain}</td><td>{agent}</td><td>{outcome}</td><td>{safe}</td><td class=\"num\">{steps}</td><td class=\"num\">{wall:.2}</td><td class=\"num\">{tokens}</td></tr>",
            href = esc(&row.href),
            id = esc(&episode_name(r)),
            level = r.level,
            label = esc(&r.label),
            domain = esc(r.domain.as_deref().unwrap_or("")),
            agent = esc(&r.agent),
            outcome = outcome_html(r),
            safe = safe_html(r),
            steps = r.steps,
            wall = r.wall_ms as f64 / 1000.0,
            tokens = tokens(crate::overview::Tokens {
                prompt: r.tokens.prompt_tokens,
                completion: r.tokens.completion_tokens
            }),
        );
    }
    b.push_str("</tbody></table>");
}

fn episode_page(run: &Run, record: &EpisodeRecord, trajectory: Option<&Trajectory>) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<p><a href=\"../index.html#episodes-list\">← all episodes</a></p><h1>{id}</h1><p class=\"muted\">run {run} · {app} · level {level} · label {label}{domain} · agent {agent}</p>",
        id = esc(&episode_name(record)),
        run = esc(&run.name),
        app = esc(&record.application),
        level = record.level,
        label = esc(&record.label),
        domain = record.domain.as_deref().map(|d| format!(" · domain {}", esc(d))).unwrap_or_default(),
        agent = esc(&record.agent),
    );
    let tokens = trajectory.map(Trajectory::tokens).unwrap_or(record.tokens);
    let _ = write!(
        b,
        "<table><tr><th>outcome</th><td>{outcome} ({class})</td><th>safety</th><td>{safe}</td><th>end</th><td>{end}</td></tr><tr><th>steps</th><td>{steps} ({invalid} invalid)</td><th>wall time</th><td>{wall:.3} s</td><th>tokens</th><td>{tp} prompt + {tc} completion</td></tr></table>",
        outcome = outcome_html(record),
        class = record.class().as_str(),
        safe = safe_html(record),
        end = esc(&serde_json::to_value(record.end)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()),
        steps = record.steps,
        invalid = record.invalid_steps,
        wall = record.wall_ms as f64 / 1000.0,
        tp = tokens.prompt_tokens,
        tc = tokens.completion_tokens,
    );
    let t = &record.timing;
    let s = |us: u64| us as f64 / 1e6;
    let _ = write!(
        b,
        "<p class=\"muted\">time: setup {:.3} s · agent {:.3} s · tools {:.3} s · checks after steps {:.3} s · evaluation {:.3} s · close {:.3} s</p>",
        s(t.setup_us),
        s(t.agent_us),
        s(t.tools_us),
        s(t.checks_us),
        s(t.evaluate_us),
        s(t.close_us)
    );
    if let Some(error) = &record.error {
        let cause = record
            .cause
            .and_then(|c| serde_json::to_value(c).ok())
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = write!(b, "<h2>Error ({})</h2>{}", esc(&cause), block(error));
    }
    let Some(t) = trajectory else {
        b.push_str("<p class=\"bad\">This episode's trajectory could not be read.</p>");
        metrics(&mut b, record);
        return page(&record.task_id, &b, None);
    };
    let _ = write!(b, "<h2>Brief</h2>{}", block(&t.brief));
    let _ = write!(b, "<h2>Initial state</h2>{}", check_html(&t.initial_check, None));

    let _ = write!(b, "<h2>Steps ({})</h2>", t.steps.len());
    let mut previous = &t.initial_check;
    for step in &t.steps {
        let class = if step.invalid {
            "step invalid"
        } else if !step.check.safe {
            "step unsafe"
        } else {
            "step"
        };
        let _ = write!(
            b,
            "<section class=\"{class}\" id=\"step-{i}\"><h3>step {i} · turn {turn} · <code>{tool}</code> · {ok}{invalid}</h3><p class=\"muted\">at {at} ms, took {took} ms{usage}</p>",
            i = step.index,
            turn = step.turn,
            tool = esc(&step.call.name),
            ok = if step.observation.ok {
                "<span class=\"ok\">ok</span>"
            } else {
                "<span class=\"bad\">failed</span>"
            },
            invalid = if step.invalid { " · <span class=\"err\">invalid call</span>" } else { "" },
            at = step.at_ms,
            took = step.duration_ms,
            usage = step
                .usage
                .map(|u| format!(
                    ", turn tokens {} prompt + {} completion",
                    u.prompt_tokens, u.completion_tokens
                ))
                .unwrap_or_default(),
        );
        if !step.reasoning.is_empty() {
            let _ = write!(b, "<div class=\"label\">reasoning</div>{}", block(&step.reasoning));
        }
        let _ = write!(b, "<div class=\"label\">call</div>{}", block(&pretty(&step.call.arguments)));
        if let Some(m) = &step.call.malformed {
            let _ = write!(b, "<div class=\"label\">unreadable call</div>{}", block(m));
        }
        let _ = write!(b, "<div class=\"label\">observation</div>{}", block(&step.observation.content));
        if let Some(data) = &step.observation.data {
            let _ = write!(
                b,
                "<details class=\"fold\"><summary>structured result</summary>{}</details>",
                block(&pretty(data))
            );
        }
        let _ = write!(
            b,
            "<div class=\"label\">state check</div>{}</section>",
            check_html(&step.check, Some(previous))
        );
        previous = &step.check;
    }

    b.push_str("<h2>Final checks</h2>");
    match &t.outcome {
        Some(outcome) => {
            b.push_str("<table><thead><tr><th>check</th><th>result</th><th>detail</th></tr></thead><tbody>");
            for c in &outcome.checks {
                let _ = write!(
                    b,
                    "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&c.name),
                    if c.passed {
                        "<span class=\"ok\">passed</span>"
                    } else {
                        "<span class=\"bad\">failed</span>"
                    },
                    if c.detail.is_empty() { String::new() } else { block(&c.detail) }
                );
            }
            b.push_str("</tbody></table>");
            if let Some(grid) = matrix_of(&outcome.export["matrix"]) {
                let _ = write!(b, "<div class=\"label\">final pingmesh</div>{}", grid.html(None));
            }
            if !outcome.export.is_null() {
                let _ = write!(
                    b,
                    "<details class=\"fold\"><summary>exported final state</summary>{}</details>",
                    block(&pretty(&outcome.export))
                );
            }
        }
        None => b.push_str("<p class=\"muted\">No final evaluation.</p>"),
    }
    if let Some(answer) = &t.answer {
        let _ = write!(b, "<div class=\"label\">answer</div>{}", block(&pretty(answer)));
    }
    metrics(&mut b, record);

    let _ = write!(b, "<h2>Model messages ({})</h2>", t.transcript.len());
    if t.transcript.is_empty() {
        b.push_str("<p class=\"muted\">This agent keeps no model conversation.</p>");
    }
    for (i, message) in t.transcript.iter().enumerate() {
        let _ = write!(
            b,
            "<div class=\"label\">#{i} {}</div>{}",
            esc(&message_label(message)),
            block(&pretty(message))
        );
    }
    page(&record.task_id, &b, None)
}

/// What a transcript entry is: a chat message's role, or an LLM agent's exchange
/// (`turn 2 · request`, `turn 2 · response`, `error`).
fn message_label(message: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(role) = message["role"].as_str() {
        parts.push(role.to_string());
    }
    if let Some(turn) = message["turn"].as_u64() {
        parts.push(format!("turn {turn}"));
    }
    parts.extend(
        ["request", "response", "error"].iter().filter(|k| message.get(**k).is_some()).map(|k| k.to_string()),
    );
    if parts.is_empty() { "entry".into() } else { parts.join(" · ") }
}

fn metrics(b: &mut String, record: &EpisodeRecord) {
    b.push_str("<h2>Metrics</h2><table><tbody>");
    for m in &record.metrics {
        let value = match m.value {
            MetricValue::Pass(p) => {
                if p {
                    "<span class=\"ok\">pass</span>".into()
                } else {
                    "<span class=\"bad\">fail</span>".into()
                }
            }
            MetricValue::Count(c) => c.to_string(),
            MetricValue::Value(v) => format!("{v:.4}"),
        };
        let _ = write!(b, "<tr><th>{}</th><td class=\"num\">{value}</td></tr>", esc(&m.name));
    }
    b.push_str("</tbody></table>");
}

/// A reachability matrix: `reach[i][j]`, node `i` reached node `j`.
struct Mesh {
    nodes: Vec<String>,
    reach: Vec<Vec<bool>>,
}

impl Mesh {
    fn reached(&self, a: &str, b: &str) -> Option<bool> {
        let i = self.nodes.iter().position(|n| n == a)?;
        let j = self.nodes.iter().position(|n| n == b)?;
        self.reach.get(i)?.get(j).copied()
    }

    /// The grid, each pair whose reachability differs from `before` outlined.
    fn html(&self, before: Option<&Mesh>) -> String {
        let mut out = String::from("<table class=\"mesh\"><tr><th>from \\ to</th>");
        for n in &self.nodes {
            let _ = write!(out, "<th>{}</th>", esc(n));
        }
        out.push_str("</tr>");
        for (i, a) in self.nodes.iter().enumerate() {
            let _ = write!(out, "<tr><th>{}</th>", esc(a));
            for (j, b) in self.nodes.iter().enumerate() {
                if i == j {
                    out.push_str("<td class=\"self\"></td>");
                    continue;
                }
                let now = self.reach.get(i).and_then(|r| r.get(j)).copied().unwrap_or(false);
                let was = before.and_then(|m| m.reached(a, b));
                let changed = was.is_some_and(|w| w != now);
                let _ = write!(
                    out,
                    "<td class=\"{}{}\" title=\"{} → {}: {}{}\">{}</td>",
                    if now { "up" } else { "down" },
                    if changed { " changed" } else { "" },
                    esc(a),
                    esc(b),
                    if now { "reached" } else { "not reached" },
                    if changed { " (changed by this step)" } else { "" },
                    if now { "✓" } else { "✗" }
                );
            }
            out.push_str("</tr>");
        }
        out.push_str("</table>");
        out
    }
}

/// A pingmesh as a state check summarises it (`nodes` and the `unreachable` pairs `a->b`).
fn mesh_of_summary(summary: &Value) -> Option<Mesh> {
    let nodes: Vec<String> =
        summary["nodes"].as_array()?.iter().filter_map(|n| n.as_str().map(str::to_string)).collect();
    let down: BTreeSet<(String, String)> = summary["unreachable"]
        .as_array()?
        .iter()
        .filter_map(|p| p.as_str()?.split_once("->").map(|(a, b)| (a.to_string(), b.to_string())))
        .collect();
    let reach = nodes
        .iter()
        .map(|a| nodes.iter().map(|b| a != b && !down.contains(&(a.clone(), b.clone()))).collect())
        .collect();
    Some(Mesh { nodes, reach })
}

/// A pingmesh as exported (`{"nodes": [...], "reach": [[bool]]}`).
fn matrix_of(v: &Value) -> Option<Mesh> {
    let nodes: Vec<String> =
        v["nodes"].as_array()?.iter().filter_map(|n| n.as_str().map(str::to_string)).collect();
    let reach: Vec<Vec<bool>> = v["reach"]
        .as_array()?
        .iter()
        .map(|row| {
            row.as_array()
                .map(|r| r.iter().map(|b| b.as_bool().unwrap_or(false)).collect())
                .unwrap_or_default()
        })
        .collect();
    Some(Mesh { nodes, reach })
}

/// A state check: safe or not, the broken constraints, and its summary: a pingmesh as a grid,
/// anything else as a table; what changed since the check before is outlined.
fn check_html(check: &StateCheck, before: Option<&StateCheck>) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<p>{}</p>",
        if check.safe { "<span class=\"ok\">safe</span>" } else { "<span class=\"bad\">unsafe</span>" }
    );
    if check.unproductive {
        out.push_str(
            "<p class=\"bad\">unproductive change: the network changed and came no closer to the goal (NetPress §C.4, §D.4)</p>",
        );
    }
    if !check.violations.is_empty() {
        out.push_str("<ul>");
        for v in &check.violations {
            let _ = write!(out, "<li class=\"bad\">{}</li>", esc(v));
        }
        out.push_str("</ul>");
    }
    let Some(summary) = &check.summary else { return out };
    let prior = before.and_then(|c| c.summary.as_ref());
    if let Some(mesh) = mesh_of_summary(summary) {
        let was = prior.and_then(mesh_of_summary);
        let _ = write!(
            out,
            "<p class=\"muted\">pingmesh: {} of {} pairs reached</p>{}",
            summary["received"],
            summary["sent"],
            mesh.html(was.as_ref())
        );
        return out;
    }
    match summary.as_object() {
        Some(fields) => {
            out.push_str("<table class=\"check\"><tbody>");
            for (k, v) in fields {
                let changed = prior.is_some_and(|p| p.get(k) != Some(v));
                let _ = write!(
                    out,
                    "<tr{}><th>{}</th><td>{}</td></tr>",
                    if changed { " class=\"changed\" title=\"changed by this step\"" } else { "" },
                    esc(k),
                    match v {
                        Value::String(s) if s.len() < 200 && !s.contains('\n') => esc(s),
                        Value::Number(_) | Value::Bool(_) | Value::Null => esc(&v.to_string()),
                        Value::String(s) => block(s),
                        v => block(&pretty(v)),
                    }
                );
            }
            out.push_str("</tbody></table>");
        }
        None => out.push_str(&block(&pretty(summary))),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_text_and_both_quotes() {
        assert_eq!(
            esc(r#"<a href="x" onclick='y'>&</a>"#),
            "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;"
        );
    }

    #[test]
    fn large_text_is_folded_whole() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let html = block(&text);
        assert!(html.starts_with("<details"), "{html}");
        assert!(html.contains("line 0\n") && html.contains("line 99\n"), "nothing is cut");
        assert!(block("short").starts_with("<pre>"));
    }

    #[test]
    fn a_pingmesh_step_outlines_the_pairs_it_changed() {
        let before = StateCheck {
            safe: true,
            violations: vec![],
            summary: Some(
                serde_json::json!({"nodes": ["h1", "h2", "h3"], "unreachable": ["h1->h3"], "received": 5, "sent": 6}),
            ),
            ..Default::default()
        };
        let after = StateCheck {
            safe: false,
            violations: vec!["h2 -> h3 was reachable before this step and is not after it".into()],
            summary: Some(
                serde_json::json!({"nodes": ["h1", "h2", "h3"], "unreachable": ["h2->h3"], "received": 5, "sent": 6}),
            ),
            ..Default::default()
        };
        let html = check_html(&after, Some(&before));
        // h1->h3 came back, h2->h3 went away: two outlined cells, no more.
        assert_eq!(html.matches(" changed\"").count(), 2, "{html}");
        assert!(html.contains("title=\"h2 → h3: not reached (changed by this step)\""), "{html}");
        assert!(html.contains("title=\"h1 → h3: reached (changed by this step)\""), "{html}");
        // Other summaries: the changed field outlined.
        let a = StateCheck {
            safe: true,
            violations: vec![],
            summary: Some(serde_json::json!({"nodes": 3, "edges": 2})),
            ..Default::default()
        };
        let b = StateCheck {
            safe: true,
            violations: vec![],
            summary: Some(serde_json::json!({"nodes": 3, "edges": 3})),
            ..Default::default()
        };
        let html = check_html(&b, Some(&a));
        assert_eq!(html.matches("class=\"changed\"").count(), 1, "{html}");
    }
}
