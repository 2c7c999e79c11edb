//! report.html: one self-contained page (no scripts, fonts or images from
//! anywhere) with the numbers of report.json and inline SVG pictures: a
//! per-CPU timeline of the run (event density per time bucket), per
//! latency analysis a histogram of its first group, and flame graphs
//! ([`super::flame`]) of the recorded stacks, of function_graph's call paths
//! and of the stack tracer's deepest stack.

use std::fmt::Write as _;

use minijinja::context;

use inferno::flamegraph::color::BasicPalette;

use super::JsonReport;
use super::flame;
use super::text::{dur, environment};
use crate::analysis::{LatencyReport, Timeline};
use crate::answer::{AnswerTable, Cell};

const PAGE: &str = include_str!("templates/report.html.j2");
const WIDTH: f64 = 900.0;
const LABEL: f64 = 70.0;
const ROW: f64 = 22.0;

/// Renders the page. The built-in template is part of the binary, so a
/// failure here is a bug; its message says so.
pub fn render_html(report: &JsonReport) -> String {
    let mut env = environment();
    let histograms: Vec<String> = report.latency.iter().map(histogram_svg).collect();
    let answer_histograms: Vec<String> = report.answers.values().map(answer_svg).collect();
    let cpu_timeline = report
        .timeline
        .as_ref()
        .map_or_else(|| "<p>no events</p>".to_string(), timeline_svg);
    let flames = flames(report);
    let page = env
        .add_template("report.html", PAGE)
        .and_then(|()| env.get_template("report.html"))
        .and_then(|t| {
            t.render(context! {
                r => minijinja::Value::from(minijinja::value::Serde(report)),
                cpu_timeline,
                histograms,
                answer_histograms,
                flames => minijinja::Value::from(minijinja::value::Serde(&flames)),
            })
        });
    page.unwrap_or_else(|e| {
        format!("<!DOCTYPE html><p>trace-recipe bug: the built-in HTML template failed: {e}</p>")
    })
}

/// One flame graph of the page.
#[derive(serde::Serialize)]
struct Flame {
    /// Its anchor: `stacks`, `funcgraph`, `stack-tracer`.
    id: &'static str,
    title: &'static str,
    /// What a frame's width is.
    note: String,
    /// The `<svg>` element (inferno's, escaped by it).
    svg: String,
}

/// The page's flame graphs: recorded stacks, function_graph call paths, the
/// stack tracer's deepest stack, each when the report has it.
fn flames(r: &JsonReport) -> Vec<Flame> {
    let mut v = Vec::new();
    if let Some(s) = &r.stacks
        && let Some(svg) = flame::svg(
            "stacks",
            &s.folded,
            "Recorded stacks",
            "records",
            BasicPalette::Hot,
        )
    {
        v.push(Flame {
            id: "stacks",
            title: "recorded stacks",
            note: format!(
                "{} stacks; the root frame is the event that took each; a frame's width is the records whose stack passes through it (stacks.folded in the output folder, or `report --format folded`)",
                s.total
            ),
            svg,
        });
    }
    if let Some(f) = &r.funcgraph_folded
        && let Some(svg) = flame::svg("funcgraph", f, "function_graph", "ns", BasicPalette::Aqua)
    {
        v.push(Flame {
            id: "funcgraph",
            title: "function_graph time",
            note: "a frame's width is the time spent in that call path, its callees included (funcgraph.folded, or `report --format folded-funcgraph`)".into(),
            svg,
        });
    }
    if let Some(s) = &r.stack_tracer
        && let Some(svg) = flame::svg(
            "stack-tracer",
            &flame::stack_tracer_folded(s),
            "Deepest kernel stack",
            "bytes",
            BasicPalette::Orange,
        )
    {
        v.push(Flame {
            id: "stack-tracer",
            title: "the stack tracer's deepest stack",
            note: format!(
                "{} bytes; a frame's width is the stack it and its callees used",
                s.max_stack_bytes
            ),
            svg,
        });
    }
    v
}

/// `s` escaped for HTML text and attribute values (the report, `diff --html`,
/// `fleet --html`).
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One row per CPU; each time bucket a rectangle whose darkness is its event
/// count relative to the busiest bucket of any CPU.
fn timeline_svg(t: &Timeline) -> String {
    let n = t.buckets.max(1);
    let max = t
        .cpus
        .iter()
        .flat_map(|s| s.counts.iter().copied())
        .max()
        .unwrap_or(0)
        .max(1);
    let height = ROW * t.cpus.len() as f64 + 30.0;
    let cell = (WIDTH - LABEL) / n as f64;
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="events per CPU over time">"#
    );
    for (row, s) in t.cpus.iter().enumerate() {
        let y = row as f64 * ROW;
        let _ = write!(
            o,
            r##"<text x="0" y="{}">{} ({})</text><rect x="{LABEL}" y="{y}" width="{}" height="{}" fill="#f0f0f0"/>"##,
            y + 15.0,
            esc(&s.name),
            s.total,
            WIDTH - LABEL,
            ROW - 4.0
        );
        for (i, c) in s.counts.iter().enumerate().filter(|(_, c)| **c > 0) {
            let opacity = 0.15 + 0.85 * (*c as f64 / max as f64);
            let _ = write!(
                o,
                r##"<rect x="{:.2}" y="{y}" width="{:.2}" height="{}" fill="#1f5fbf" fill-opacity="{opacity:.3}"><title>{c} events</title></rect>"##,
                LABEL + i as f64 * cell,
                cell.max(1.0),
                ROW - 4.0
            );
        }
    }
    let y = ROW * t.cpus.len() as f64 + 16.0;
    let span = t.bucket_ns.saturating_mul(n as u64);
    let _ = write!(
        o,
        r#"<text x="{LABEL}" y="{y}">0</text><text x="{}" y="{y}" text-anchor="end">+{} ({} buckets of {})</text></svg>"#,
        WIDTH,
        dur(span),
        n,
        dur(t.bucket_ns)
    );
    o
}

/// Bars per power-of-two row of the report's first group.
fn histogram_svg(l: &LatencyReport) -> String {
    let Some(g) = l.groups.first() else {
        return String::new();
    };
    let rows = (g.histogram.iter())
        .map(|r| (dur(r.lo_ns), dur(r.hi_ns), r.count))
        .collect();
    bars_svg(&g.key, g.count, rows)
}

/// The histogram of all spans of an answer with `latency` (its total row's
/// power-of-two buckets, bucket `k` holding durations in `(2^(k-1), 2^k]`
/// µs); empty without one.
fn answer_svg(a: &AnswerTable) -> String {
    let Some(l) = a.total.cells.iter().find_map(|c| match c {
        Cell::Latency(l) => Some(l),
        _ => None,
    }) else {
        return String::new();
    };
    let us = |k: u32| 1000u64.saturating_mul(1u64.checked_shl(k).unwrap_or(u64::MAX));
    let rows = (l.buckets.iter())
        .map(|b| {
            let lo = if b.log2 == 0 { 0 } else { us(b.log2 - 1) };
            (dur(lo), dur(us(b.log2)), b.count)
        })
        .collect();
    bars_svg("all spans", a.total.count, rows)
}

/// A horizontal bar per row (`lo .. hi`, count), titled `key` (`count` samples).
fn bars_svg(key: &str, count: u64, rows: Vec<(String, String, u64)>) -> String {
    let max = rows.iter().map(|r| r.2).max().unwrap_or(0).max(1);
    let label = 180.0;
    let height = ROW * rows.len() as f64 + 24.0;
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="histogram" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="histogram of {}"><text x="0" y="12">{} ({} samples)</text>"#,
        esc(key),
        esc(key),
        count
    );
    for (i, (lo, hi, n)) in rows.iter().enumerate() {
        let y = 20.0 + i as f64 * ROW;
        let w = (WIDTH - label - 80.0) * *n as f64 / max as f64;
        let _ = write!(
            o,
            r##"<text x="0" y="{}">{} .. {}</text><rect x="{label}" y="{y}" width="{w:.2}" height="{}" fill="#d0702a"/><text x="{:.2}" y="{}">{}</text>"##,
            y + 14.0,
            lo,
            hi,
            ROW - 4.0,
            label + w + 4.0,
            y + 14.0,
            n
        );
    }
    o.push_str("</svg>");
    o
}
