//! `diff A B`: what changed between two runs, each given as a bundle, an output
//! folder or a trace.dat.
//!
//! ```text
//! A, B ──bundle::resolve_input──► trace.dat (+ report.json, recipe.toml, manifest)
//!      ──side──► Side { report: JsonReport, recipe, kernel facts }
//! Side A, Side B ──compare──► DiffReport ──text | json | html
//!                 ──rules (--fail-if, crate::expr)──► which rules hold
//! ```
//!
//! Counts and rates (events per second of recording) are compared per event,
//! latencies per analysis group (count, p50, p90, p99, max), top stacks as sets
//! (gained, lost), lost events, the rendered recipes key by key, and the kernel
//! facts the bundles carry. A `--fail-if` rule holds when B's value satisfies it;
//! a relative value (`+10%`) is taken relative to A's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Serialize;

use crate::analysis::{Selection, analyze};
use crate::bundle::{BundleError, Opened, resolve_input};
use crate::expr::{Context, Expr, ExprError, Metric};
use crate::report::{JsonReport, RunReport, esc, lookup, measure, show};

/// Version of [`DiffReport`]'s layout.
pub const DIFF_FORMAT_VERSION: u32 = 1;

/// Why a diff could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// An input could not be opened (a refused bundle, a missing folder).
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// An input's trace.dat could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    TraceDat {
        /// The file.
        path: PathBuf,
        /// Why.
        source: tracedat::Error,
    },
    /// A `--fail-if` rule does not parse.
    #[error("--fail-if `{rule}`: {source}")]
    Rule {
        /// The rule as given.
        rule: String,
        /// Where and what.
        source: ExprError,
    },
    /// A `--fail-if` rule names an event or latency group that neither run has:
    /// never a silent pass.
    #[error("--fail-if `{rule}`: {what} is in neither run\n  = help: {help}")]
    Unknown {
        /// The rule as given.
        rule: String,
        /// What is missing.
        what: String,
        /// What the runs have.
        help: String,
    },
}

/// One run as `diff` and `fleet` read it: its report (counts from the
/// trace.dat; recipe, duration, stop reason and expectations from the run's
/// report.json), rendered recipe, kernel facts, and the bundle it came from.
#[derive(Debug)]
pub(crate) struct Side {
    pub(crate) path: PathBuf,
    pub(crate) report: JsonReport,
    pub(crate) recipe: Option<toml::Table>,
    pub(crate) facts: Option<serde_json::Value>,
    /// The checked bundle (its temporary folder lives as long as the side).
    pub(crate) opened: Option<Opened>,
}

/// Events per second of recording of `count` events of `r` (`None` without a
/// positive duration).
pub(crate) fn rate(r: &JsonReport, count: u64) -> Option<f64> {
    r.duration_s.filter(|d| *d > 0.0).map(|d| count as f64 / d)
}

/// Reads one run given as a bundle, an output folder or a trace.dat. Errors:
/// the input cannot be opened or its trace.dat read.
pub(crate) fn side(path: &Path) -> Result<Side, DiffError> {
    let (dat, opened) = resolve_input(path)?;
    let folder = dat.parent().map(Path::to_path_buf).unwrap_or_default();
    let is_folder = opened.is_some() || path.is_dir();
    use crate::untrusted::{Kind, read_optional_in};
    let member = |name: &str, kind: Kind| -> Result<Option<Vec<u8>>, DiffError> {
        match is_folder {
            true => Ok(read_optional_in(&folder, name, kind).map_err(BundleError::from)?),
            false => Ok(None),
        }
    };
    let report = member("report.json", Kind::Report)?.and_then(|b| RunReport::parse(&b));
    let file = tracedat::TraceFile::open(&dat).map_err(|source| DiffError::TraceDat {
        path: dat.clone(),
        source,
    })?;
    let analysis =
        analyze(&file, &Selection::for_file(&file)).map_err(|source| DiffError::TraceDat {
            path: dat.clone(),
            source,
        })?;
    let mut r = JsonReport::new(&file, &analysis, None);
    // The run's own report knows how long it recorded and how it ended.
    if let Some(run) = &report {
        let j = &run.json;
        r.recipe = j["recipe"].as_str().map(str::to_string);
        r.duration_s = j["duration_s"].as_f64();
        r.stop_reason = j["stop_reason"].as_str().map(str::to_string);
        // What the kernel kept outside the trace (a tracer's max latency, the
        // deepest stack, hist tables) is in report.json only.
        r.add_run_results(run);
        r.kernel_release = j["kernel_release"]
            .as_str()
            .map(str::to_string)
            .or(r.kernel_release);
    }
    if r.duration_s.is_none()
        && let Some(t) = &r.timeline
    {
        r.duration_s = Some((t.bucket_ns * t.buckets as u64) as f64 / 1e9);
    }
    let recipe = member("recipe.toml", Kind::Recipe)?
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| t.parse::<toml::Table>().ok());
    let facts = match opened
        .as_ref()
        .and_then(|o| o.manifest.kernel_facts.clone())
    {
        Some(f) => Some(f),
        None => member("facts.json", Kind::Facts)?
            .and_then(|b| crate::untrusted::parse_json(&b, Kind::Facts).ok()),
    };
    Ok(Side {
        path: path.to_path_buf(),
        report: r,
        recipe,
        facts,
        opened,
    })
}

/// `diff --format json`: everything that differs between run A and run B.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DiffReport {
    /// [`DIFF_FORMAT_VERSION`].
    pub format_version: u32,
    /// Run A (the baseline).
    pub a: SideInfo,
    /// Run B.
    pub b: SideInfo,
    /// Recipe keys whose values differ (the rendered recipes, flattened to dotted keys).
    pub recipe: Vec<Change>,
    /// Kernel facts that differ (release, and the facts bundles carry).
    pub kernel: Vec<Change>,
    /// Every event of either run: counts, rates and their relative change.
    pub events: Vec<EventDelta>,
    /// Every latency group of either run.
    pub latency: Vec<LatencyDelta>,
    /// Top stacks of B that A does not have (`event: frame <- frame ...`).
    pub stacks_gained: Vec<String>,
    /// Top stacks of A that B does not have.
    pub stacks_lost: Vec<String>,
    /// `--fail-if` rules and whether each held.
    pub rules: Vec<RuleResult>,
}

/// What is known of one run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SideInfo {
    /// The path given.
    pub path: String,
    /// Recipe name, when the input carries one.
    pub recipe: Option<String>,
    /// Kernel release.
    pub kernel_release: Option<String>,
    /// Seconds of recording.
    pub duration_s: Option<f64>,
    /// Events recorded.
    pub total_events: u64,
    /// Events lost.
    pub lost_events: u64,
}

/// A key whose value differs (`null` where a side lacks it).
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Change {
    /// Dotted key (`buffer.size_kb`, `events[0].filter`).
    pub key: String,
    /// A's value as text.
    pub a: Option<String>,
    /// B's value as text.
    pub b: Option<String>,
}

/// One event in both runs.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EventDelta {
    /// `system:event`.
    pub event: String,
    /// Count in A.
    pub count_a: u64,
    /// Count in B.
    pub count_b: u64,
    /// Events per second of recording in A (`null` without a duration).
    pub rate_a: Option<f64>,
    /// In B.
    pub rate_b: Option<f64>,
    /// Relative change of the count in percent (`null` when A has none).
    pub count_change_pct: Option<f64>,
    /// Relative change of the rate in percent.
    pub rate_change_pct: Option<f64>,
}

/// One latency group in both runs (ns; `null` where a side lacks the group).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LatencyDelta {
    /// `syscalls`, `wakeup`, `kretprobe`, `funcgraph`.
    pub analysis: String,
    /// The group key.
    pub key: String,
    /// `[A, B]` sample counts.
    pub count: [Option<u64>; 2],
    /// `[A, B]` medians.
    pub p50_ns: [Option<u64>; 2],
    /// `[A, B]` 90th percentiles.
    pub p90_ns: [Option<u64>; 2],
    /// `[A, B]` 99th percentiles.
    pub p99_ns: [Option<u64>; 2],
    /// `[A, B]` maxima.
    pub max_ns: [Option<u64>; 2],
    /// Relative change of p99 in percent.
    pub p99_change_pct: Option<f64>,
}

/// A `--fail-if` rule's outcome.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RuleResult {
    /// The rule as given.
    pub rule: String,
    /// Whether it held (then `diff` exits 6).
    pub held: bool,
    /// A's value as text.
    pub a: Option<String>,
    /// B's value as text.
    pub b: Option<String>,
}

/// The relative change from `a` to `b` in percent (`None` when `a` is 0).
pub(crate) fn pct(a: f64, b: f64) -> Option<f64> {
    (a != 0.0).then(|| (b - a) / a * 100.0)
}

fn flatten(prefix: &str, v: &toml::Value, out: &mut BTreeMap<String, String>) {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        toml::Value::Array(a) if a.iter().any(|v| v.is_table()) => {
            for (i, v) in a.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), v, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

fn changes(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<Change> {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| Change {
            key: k.clone(),
            a: a.get(k).cloned(),
            b: b.get(k).cloned(),
        })
        .collect()
}

fn stacks(r: &JsonReport) -> BTreeSet<String> {
    r.stacks
        .iter()
        .flat_map(|s| &s.top)
        .map(|s| format!("{}: {}", s.event, s.frames.join(" <- ")))
        .collect()
}

fn facts_flat(s: &Side) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(r) = &s.report.kernel_release {
        out.insert("release".into(), r.clone());
    }
    if let Some(serde_json::Value::Object(m)) = &s.facts {
        for (k, v) in m {
            match v {
                serde_json::Value::Array(items) => {
                    out.insert(format!("{k} (count)"), items.len().to_string());
                }
                serde_json::Value::Object(o) => {
                    out.insert(format!("{k} (count)"), o.len().to_string());
                }
                scalar => {
                    out.insert(k.clone(), scalar.to_string());
                }
            }
        }
    }
    out
}

/// Compares run `a` with run `b` and checks each `--fail-if` rule. Errors: an
/// input cannot be read, a rule does not parse, a rule names an event or latency
/// group neither run has.
pub fn diff(a: &Path, b: &Path, rules: &[String]) -> Result<DiffReport, DiffError> {
    let parsed: Vec<(String, Expr)> = rules
        .iter()
        .map(|r| {
            Expr::parse(r, Context::FailIf)
                .map(|e| (r.clone(), e))
                .map_err(|source| DiffError::Rule {
                    rule: r.clone(),
                    source,
                })
        })
        .collect::<Result<_, _>>()?;
    let (sa, sb) = (side(a)?, side(b)?);
    let (ra, rb) = (&sa.report, &sb.report);
    // `count(NAME:ROW)` and `p99(NAME:ROW)` of an answer either run has.
    let parsed: Vec<(String, Expr)> = parsed
        .into_iter()
        .map(|(rule, e)| {
            let is_answer = |n: &str| ra.answers.contains_key(n) || rb.answers.contains_key(n);
            match e.with_answers(is_answer) {
                Ok(e) => Ok((rule, e)),
                Err(source) => Err(DiffError::Rule { rule, source }),
            }
        })
        .collect::<Result<_, _>>()?;

    let names: BTreeSet<&String> = ra.events.keys().chain(rb.events.keys()).collect();
    let events: Vec<EventDelta> = names
        .iter()
        .map(|ev| {
            let (ca, cb) = (
                ra.events.get(*ev).copied().unwrap_or(0),
                rb.events.get(*ev).copied().unwrap_or(0),
            );
            let (rta, rtb) = (rate(ra, ca), rate(rb, cb));
            EventDelta {
                event: (*ev).clone(),
                count_a: ca,
                count_b: cb,
                rate_a: rta,
                rate_b: rtb,
                count_change_pct: pct(ca as f64, cb as f64),
                rate_change_pct: rta.zip(rtb).and_then(|(x, y)| pct(x, y)),
            }
        })
        .collect();

    let mut groups: BTreeMap<(String, String), [Option<&crate::analysis::LatencyGroup>; 2]> =
        BTreeMap::new();
    for (i, r) in [ra, rb].into_iter().enumerate() {
        for l in &r.latency {
            for g in &l.groups {
                groups
                    .entry((l.analysis.clone(), g.key.clone()))
                    .or_default()[i] = Some(g);
            }
        }
    }
    let latency = groups
        .into_iter()
        .map(|((analysis, key), [ga, gb])| {
            let two = |f: fn(&crate::analysis::LatencyGroup) -> u64| [ga.map(f), gb.map(f)];
            let p99 = two(|g| g.p99_ns);
            LatencyDelta {
                analysis,
                key,
                count: two(|g| g.count),
                p50_ns: two(|g| g.p50_ns),
                p90_ns: two(|g| g.p90_ns),
                p99_ns: p99,
                max_ns: two(|g| g.max_ns),
                p99_change_pct: p99[0]
                    .zip(p99[1])
                    .and_then(|(x, y)| pct(x as f64, y as f64)),
            }
        })
        .collect::<Vec<_>>();

    let mut results = Vec::new();
    for (rule, expr) in &parsed {
        for (metric, span) in Metric::of(expr) {
            let known = match metric {
                Metric::Count(ev) | Metric::Rate(ev) => names.contains(ev),
                Metric::LostEvents | Metric::MaxLatency | Metric::MaxStack => true,
                Metric::Hist { event, .. } => {
                    ra.hist.iter().chain(&rb.hist).any(|h| h.event == *event)
                }
                Metric::Latency { analysis, key, .. } => latency
                    .iter()
                    .any(|l| l.analysis == *analysis && l.key == *key),
                Metric::Answer(_) => lookup(metric, ra).is_ok() || lookup(metric, rb).is_ok(),
            };
            if known {
                continue;
            }
            let (what, help) = match metric {
                Metric::Answer(cell) => {
                    let names: Vec<&str> = ra
                        .answers
                        .keys()
                        .chain(rb.answers.keys())
                        .map(String::as_str)
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect();
                    (
                        format!("`{}`", cell.of.call(&cell.answer, &cell.row.to_string())),
                        match lookup(metric, rb).err() {
                            Some(why) if !names.is_empty() => {
                                format!("{why} (the runs' answers: {})", names.join(", "))
                            }
                            _ => "neither run has an answer: name one of a recipe's `[[answer]]` tables".into(),
                        },
                    )
                }
                Metric::Latency { analysis, key, .. } => (
                    format!("latency group `{analysis}:{key}`"),
                    format!(
                        "the runs have: {}",
                        latency
                            .iter()
                            .map(|l| format!("{}:{}", l.analysis, l.key))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
                _ => (
                    format!("event `{}`", &rule[span.clone()]),
                    format!(
                        "the runs recorded: {}",
                        names
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
            };
            return Err(DiffError::Unknown {
                rule: rule.clone(),
                what,
                help,
            });
        }
        let (va, vb) = (measure(&expr.metric, ra), measure(&expr.metric, rb));
        results.push(RuleResult {
            rule: rule.clone(),
            held: vb
                .zip(expr.bound(rb, va))
                .is_some_and(|(b, rhs)| expr.holds(b, rhs)),
            a: va.map(|v| show(v, expr.is_duration())),
            b: vb.map(|v| show(v, expr.is_duration())),
        });
    }

    let flat = |s: &Side| {
        let mut m = BTreeMap::new();
        if let Some(t) = &s.recipe {
            flatten("", &toml::Value::Table(t.clone()), &mut m);
        }
        m
    };
    let (sta, stb) = (stacks(ra), stacks(rb));
    let info = |s: &Side| SideInfo {
        path: s.path.display().to_string(),
        recipe: s.report.recipe.clone(),
        kernel_release: s.report.kernel_release.clone(),
        duration_s: s.report.duration_s,
        total_events: s.report.total_events,
        lost_events: s.report.lost_total,
    };
    Ok(DiffReport {
        format_version: DIFF_FORMAT_VERSION,
        a: info(&sa),
        b: info(&sb),
        recipe: changes(&flat(&sa), &flat(&sb)),
        kernel: changes(&facts_flat(&sa), &facts_flat(&sb)),
        events,
        latency,
        stacks_gained: stb.difference(&sta).cloned().collect(),
        stacks_lost: sta.difference(&stb).cloned().collect(),
        rules: results,
    })
}

fn opt_pct(p: Option<f64>) -> String {
    p.map_or_else(|| "new".to_string(), |p| format!("{p:+.1}%"))
}

fn opt_ns(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| show(v as f64, true))
}

/// The diff for a person. Every name, key and value from the runs (their
/// report.json, recipe, facts and trace.dat) is shown
/// [escaped](crate::untrusted::escape): no control character, a newline
/// neither, reaches the terminal from them.
pub fn render_text(d: &DiffReport) -> String {
    use crate::untrusted::escape;
    use std::fmt::Write as _;
    let mut o = String::new();
    for (tag, s) in [("A", &d.a), ("B", &d.b)] {
        let _ = writeln!(
            o,
            "{tag}: {} (recipe {}, kernel {}, {} events in {}, {} lost)",
            escape(&s.path),
            escape(s.recipe.as_deref().unwrap_or("-")),
            escape(s.kernel_release.as_deref().unwrap_or("-")),
            s.total_events,
            s.duration_s
                .map_or_else(|| "-".into(), |d| format!("{d:.3} s")),
            s.lost_events
        );
    }
    let mut section = |title: &str, rows: &[Change]| {
        let _ = writeln!(o, "\n{title}:");
        if rows.is_empty() {
            let _ = writeln!(o, "  (no difference)");
        }
        for c in rows {
            let _ = writeln!(
                o,
                "  {}: {} -> {}",
                escape(&c.key),
                escape(c.a.as_deref().unwrap_or("(none)")),
                escape(c.b.as_deref().unwrap_or("(none)"))
            );
        }
    };
    section("recipe", &d.recipe);
    section("kernel", &d.kernel);
    let _ = writeln!(
        o,
        "\nevents (count A -> B, change; rate per second A -> B, change):"
    );
    let w = d
        .events
        .iter()
        .map(|e| escape(&e.event).chars().count())
        .max()
        .unwrap_or(0);
    for e in &d.events {
        let rate = |r: Option<f64>| r.map_or_else(|| "-".into(), |r| format!("{r:.1}"));
        let _ = writeln!(
            o,
            "  {:w$}  {:>9} -> {:<9} {:>8}   {:>10} -> {:<10} {:>8}",
            escape(&e.event),
            e.count_a,
            e.count_b,
            opt_pct(e.count_change_pct),
            rate(e.rate_a),
            rate(e.rate_b),
            e.rate_change_pct
                .map_or_else(|| "-".into(), |p| format!("{p:+.1}%")),
        );
    }
    if !d.latency.is_empty() {
        let _ = writeln!(o, "\nlatency (A -> B):");
        for l in &d.latency {
            let _ = writeln!(
                o,
                "  {}:{}  count {} -> {}  p50 {} -> {}  p90 {} -> {}  p99 {} -> {} ({})  max {} -> {}",
                l.analysis,
                escape(&l.key),
                l.count[0].map_or("-".into(), |c| c.to_string()),
                l.count[1].map_or("-".into(), |c| c.to_string()),
                opt_ns(l.p50_ns[0]),
                opt_ns(l.p50_ns[1]),
                opt_ns(l.p90_ns[0]),
                opt_ns(l.p90_ns[1]),
                opt_ns(l.p99_ns[0]),
                opt_ns(l.p99_ns[1]),
                l.p99_change_pct
                    .map_or_else(|| "-".into(), |p| format!("{p:+.1}%")),
                opt_ns(l.max_ns[0]),
                opt_ns(l.max_ns[1]),
            );
        }
    }
    for (title, list) in [
        ("stacks gained in B", &d.stacks_gained),
        ("stacks lost in B", &d.stacks_lost),
    ] {
        if !list.is_empty() {
            let _ = writeln!(o, "\n{title}:");
            for s in list {
                let _ = writeln!(o, "  {}", escape(s));
            }
        }
    }
    let _ = writeln!(
        o,
        "\nlost events: {} -> {}",
        d.a.lost_events, d.b.lost_events
    );
    if !d.rules.is_empty() {
        let _ = writeln!(o, "\nrules:");
        for r in &d.rules {
            let _ = writeln!(
                o,
                "  {}  {}  (A {}, B {})",
                if r.held { "HELD" } else { "ok  " },
                escape(&r.rule),
                escape(r.a.as_deref().unwrap_or("-")),
                escape(r.b.as_deref().unwrap_or("-"))
            );
        }
    }
    o
}

/// The diff as one self-contained HTML page (tables; no scripts).
pub fn render_html(d: &DiffReport) -> String {
    let text = render_text(d);
    let mut rows = String::new();
    for e in &d.events {
        let cls = match e.count_change_pct {
            Some(p) if p > 0.0 => "up",
            Some(p) if p < 0.0 => "down",
            _ => "",
        };
        rows.push_str(&format!(
            "<tr class=\"{cls}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&e.event),
            e.count_a,
            e.count_b,
            esc(&opt_pct(e.count_change_pct))
        ));
    }
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>trace-recipe diff</title>\n<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}td:first-child{{text-align:left}}tr.up td{{background:#fee}}tr.down td{{background:#efe}}pre{{background:#f6f6f6;padding:1em}}</style></head>\n<body><h1>trace-recipe diff</h1>\n<p>A: {} &mdash; B: {}</p>\n<h2>Events</h2><table><tr><th>event</th><th>A</th><th>B</th><th>change</th></tr>\n{rows}</table>\n<h2>Everything</h2><pre>{}</pre></body></html>\n",
        esc(&d.a.path),
        esc(&d.b.path),
        esc(&text)
    )
}
