//! The report's plots as inline SVG, drawn here: no JavaScript library, nothing fetched.
//! One colour per run, in the order the runs were given.

use std::fmt::Write as _;

use crate::escape::esc;
use crate::overview::Rate;

const W: f64 = 440.0;
const H: f64 = 280.0;
const LEFT: f64 = 52.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 44.0;

/// Colour-blind-safe colours (Okabe and Ito), one per run.
const PALETTE: [&str; 8] =
    ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"];

pub fn color(run: usize) -> &'static str {
    PALETTE[run % PALETTE.len()]
}

fn open(out: &mut String, title: &str, x_label: &str, y_label: &str) {
    let _ = write!(
        out,
        r#"<svg class="plot" role="img" viewBox="0 0 {W} {H}" width="{W}" height="{H}" xmlns="http://www.w3.org/2000/svg"><title>{t}</title><text x="{cx}" y="18" text-anchor="middle" class="ptitle">{t}</text><text x="{cx}" y="{xl}" text-anchor="middle" class="axis">{x}</text><text transform="translate(14 {cy}) rotate(-90)" text-anchor="middle" class="axis">{y}</text>"#,
        t = esc(title),
        cx = (LEFT + W - RIGHT) / 2.0,
        xl = H - 6.0,
        cy = (TOP + H - BOTTOM) / 2.0,
        x = esc(x_label),
        y = esc(y_label),
    );
}

fn px(v: f64, max: f64) -> f64 {
    LEFT + (v / max).clamp(0.0, 1.0) * (W - LEFT - RIGHT)
}

fn py(v: f64, max: f64) -> f64 {
    H - BOTTOM - (v / max).clamp(0.0, 1.0) * (H - TOP - BOTTOM)
}

/// Horizontal grid lines and y tick labels from 0 to `max`.
fn y_axis(out: &mut String, max: f64, percent: bool) {
    for i in 0..=4 {
        let v = max * f64::from(i) / 4.0;
        let y = py(v, max);
        let label = if percent { format!("{:.0}%", v * 100.0) } else { short(v) };
        let _ = write!(
            out,
            r#"<line x1="{LEFT}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{lx}" y="{ty:.1}" text-anchor="end" class="tick">{label}</text>"#,
            x2 = W - RIGHT,
            lx = LEFT - 4.0,
            ty = y + 3.5,
        );
    }
}

/// A number short enough for a tick: 1200 → 1.2k.
fn short(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        let s = format!("{v:.1}");
        s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
    } else {
        // Three significant digits at most, trailing zeros dropped (0.005, 0.0125).
        let digits = (2 - v.log10().floor() as i32).clamp(2, 6) as usize;
        let s = format!("{v:.digits$}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Headroom above the largest value: a round number at least `v`.
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * magnitude).find(|m| *m >= v).unwrap_or(10.0 * magnitude)
}

/// The top of a count axis: four whole steps of 1, 2 or 5 × 10^k (4, 8, 20, 40, 80, 200...),
/// so that every tick is a whole number.
fn count_top(max: usize) -> f64 {
    let quarter = max.max(1) as f64 / 4.0;
    let magnitude = 10f64.powf(quarter.log10().floor().max(0.0));
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= quarter)
        .unwrap_or(10.0 * magnitude);
    4.0 * step
}

/// Correctness (y) against safety (x), one point per run with its 95% intervals as bars.
pub fn correct_vs_safe(points: &[(String, Option<Rate>, Option<Rate>)]) -> String {
    let mut out = String::new();
    open(&mut out, "correctness vs safety (95% CI)", "safe", "correct");
    y_axis(&mut out, 1.0, true);
    for i in 0..=4 {
        let v = f64::from(i) / 4.0;
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{y}" text-anchor="middle" class="tick">{p:.0}%</text>"#,
            x = px(v, 1.0),
            y = H - BOTTOM + 14.0,
            p = v * 100.0
        );
    }
    for (i, (name, safe, correct)) in points.iter().enumerate() {
        let (Some(safe), Some(correct)) = (safe, correct) else { continue };
        let (x, y) = (px(safe.rate, 1.0), py(correct.rate, 1.0));
        let c = color(i);
        let _ = write!(
            out,
            r#"<g><title>{n}: correct {cr:.1}% [{cl:.1}, {ch:.1}], safe {sr:.1}% [{sl:.1}, {sh:.1}]</title><line x1="{x:.1}" x2="{x:.1}" y1="{y1:.1}" y2="{y2:.1}" stroke="{c}" stroke-width="2"/><line x1="{x1:.1}" x2="{x2:.1}" y1="{y:.1}" y2="{y:.1}" stroke="{c}" stroke-width="2"/><circle cx="{x:.1}" cy="{y:.1}" r="5" fill="{c}"/></g>"#,
            n = esc(name),
            cr = correct.rate * 100.0,
            cl = correct.ci95.0 * 100.0,
            ch = correct.ci95.1 * 100.0,
            sr = safe.rate * 100.0,
            sl = safe.ci95.0 * 100.0,
            sh = safe.ci95.1 * 100.0,
            y1 = py(correct.ci95.0, 1.0),
            y2 = py(correct.ci95.1, 1.0),
            x1 = px(safe.ci95.0, 1.0),
            x2 = px(safe.ci95.1, 1.0),
        );
    }
    out.push_str("</svg>");
    out
}

/// Rates (or scores in [0, 1]) per group (a level, a score), one bar per run, each with its 95% interval as a whisker.
pub fn rate_bars(title: &str, x_label: &str, groups: &[String], series: &[Vec<Option<Rate>>]) -> String {
    let mut out = String::new();
    open(&mut out, title, x_label, "rate");
    y_axis(&mut out, 1.0, true);
    let slot = (W - LEFT - RIGHT) / groups.len().max(1) as f64;
    let bar = (slot * 0.8) / series.len().max(1) as f64;
    // Labels wider than their slot (score names) alternate between two lines.
    let stagger = groups.iter().any(|g| g.chars().count() as f64 * 5.5 > slot);
    for (g, group) in groups.iter().enumerate() {
        let x0 = LEFT + slot * g as f64 + slot * 0.1;
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{y}" text-anchor="middle" class="tick">{l}</text>"#,
            x = x0 + slot * 0.4,
            y = H - BOTTOM + if stagger && g % 2 == 1 { 25.0 } else { 14.0 },
            l = esc(group)
        );
        for (s, rates) in series.iter().enumerate() {
            let Some(Some(r)) = rates.get(g) else { continue };
            let x = x0 + bar * s as f64;
            let y = py(r.rate, 1.0);
            let mid = x + bar / 2.0;
            let _ = write!(
                out,
                r#"<g><title>{l}: {p:.1}% [{lo:.1}, {hi:.1}] of {n}</title><rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{c}"/><line x1="{mid:.1}" x2="{mid:.1}" y1="{y1:.1}" y2="{y2:.1}" class="whisker"/></g>"#,
                l = esc(group),
                p = r.rate * 100.0,
                lo = r.ci95.0 * 100.0,
                hi = r.ci95.1 * 100.0,
                n = r.n,
                w = (bar - 2.0).max(1.0),
                h = (H - BOTTOM - y).max(0.0),
                c = color(s),
                y1 = py(r.ci95.0, 1.0),
                y2 = py(r.ci95.1, 1.0),
            );
        }
    }
    out.push_str("</svg>");
    out
}

/// A distribution per run, as bars side by side in shared bins. Integer data (steps) gets a
/// bin per value up to 20 values; the rest 12 equal bins from 0.
pub fn histogram(title: &str, x_label: &str, series: &[Vec<f64>], integer: bool) -> String {
    let mut out = String::new();
    open(&mut out, title, x_label, "episodes");
    let max = series.iter().flatten().copied().fold(0.0, f64::max);
    let (bins, width) = if integer && max < 20.0 {
        (max as usize + 1, 1.0)
    } else {
        let width = nice_max(max / 12.0);
        (((max / width).floor() as usize + 1).max(1), width)
    };
    let counts: Vec<Vec<usize>> = series
        .iter()
        .map(|values| {
            let mut c = vec![0; bins];
            for v in values {
                let b = ((v / width).floor().max(0.0) as usize).min(bins - 1);
                c[b] += 1;
            }
            c
        })
        .collect();
    let top = count_top(counts.iter().flatten().copied().max().unwrap_or(0));
    y_axis(&mut out, top, false);
    let slot = (W - LEFT - RIGHT) / bins as f64;
    let bar = (slot * 0.9) / series.len().max(1) as f64;
    let every = bins.div_ceil(10);
    for b in 0..bins {
        let x0 = LEFT + slot * b as f64;
        let range = if integer && width == 1.0 {
            format!("{b}")
        } else {
            format!("{}–{}", short(width * b as f64), short(width * (b + 1) as f64))
        };
        if b % every == 0 {
            let label = if integer && width == 1.0 { range.clone() } else { short(width * b as f64) };
            let _ = write!(
                out,
                r#"<text x="{x:.1}" y="{y}" text-anchor="middle" class="tick">{label}</text>"#,
                x = if integer && width == 1.0 { x0 + slot / 2.0 } else { x0 },
                y = H - BOTTOM + 14.0,
            );
        }
        for (s, c) in counts.iter().enumerate() {
            if c[b] == 0 {
                continue;
            }
            let y = py(c[b] as f64, top);
            let _ = write!(
                out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{col}"><title>{range}: {n}</title></rect>"#,
                x = x0 + slot * 0.05 + bar * s as f64,
                w = (bar - 1.0).max(1.0),
                h = (H - BOTTOM - y).max(0.0),
                col = color(s),
                n = c[b],
            );
        }
    }
    out.push_str("</svg>");
    out
}

/// One value per run (cost or tokens per solved task); runs without one are left out.
pub fn value_bars(title: &str, unit: &str, values: &[(String, Option<f64>)]) -> String {
    let mut out = String::new();
    open(&mut out, title, "run", unit);
    let top = nice_max(values.iter().filter_map(|(_, v)| *v).fold(0.0, f64::max));
    y_axis(&mut out, top, false);
    let slot = (W - LEFT - RIGHT) / values.len().max(1) as f64;
    for (i, (name, v)) in values.iter().enumerate() {
        let Some(v) = v else { continue };
        let x = LEFT + slot * i as f64 + slot * 0.2;
        let y = py(*v, top);
        let _ = write!(
            out,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{c}"><title>{n}: {v:.4} {u}</title></rect>"#,
            w = slot * 0.6,
            h = (H - BOTTOM - y).max(0.0),
            c = color(i),
            n = esc(name),
            u = esc(unit),
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_maxima_are_round_and_above() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.0), 10.0);
        assert_eq!(nice_max(120.0), 200.0);
        assert_eq!(nice_max(0.3), 0.5);
    }

    #[test]
    fn count_axes_have_whole_ticks() {
        assert_eq!(count_top(0), 4.0);
        assert_eq!(count_top(3), 4.0);
        assert_eq!(count_top(5), 8.0);
        assert_eq!(count_top(60), 80.0);
        assert_eq!(count_top(120), 200.0);
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(short(0.005), "0.005");
        assert_eq!(short(0.0125), "0.0125");
        assert_eq!(short(0.5), "0.5");
        assert_eq!(short(2.5), "2.5");
        assert_eq!(short(4.0), "4");
        assert_eq!(short(1200.0), "1.2k");
    }

    #[test]
    fn a_histogram_counts_every_value_once() {
        let svg = histogram("steps", "steps", &[vec![0.0, 1.0, 1.0, 3.0]], true);
        // Bins 0..=3; bin 2 is empty and draws nothing.
        assert_eq!(svg.matches("<rect").count(), 3, "{svg}");
        assert!(svg.contains("<title>1: 2</title>"), "{svg}");
        let svg = histogram("wall", "s", &[vec![0.01, 25.0, 100.0]], false);
        assert_eq!(svg.matches("<rect").count(), 3, "{svg}");
    }

    #[test]
    fn plot_text_is_escaped() {
        let svg = value_bars("t", "u", &[("<b>run</b>".into(), Some(1.0))]);
        assert!(!svg.contains("<b>") && svg.contains("&lt;b&gt;run"), "{svg}");
    }
}
