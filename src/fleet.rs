//! `fleet INPUT...`: one recipe run on many hosts, summarised.
//!
//! ```text
//! INPUT ─┬─ HOST.tar.zst (a bundle) ──diff::side──► HostRow (events, lost,
//! │      │                                          expectations, stop reason)
//! │      └─ HOST.json (a host status) ───────────► FailedHost (why)
//! rows ──median of each event's rate over the hosts──► largest changes per host
//!      ──► FleetReport ──text | json (schema/fleet.schema.json) | html
//! ```
//!
//! A host whose run never wrote a bundle (unreachable, preflight refused, run
//! killed) comes as a small JSON status file, [`HostStatus`], written by the
//! Ansible module (`ansible/`): `{"host": "db-3", "stage": "run", "reason":
//! "...", "exit_code": 137}`. Rates are events per second of recording, as in
//! `diff` ([`crate::diff::rate`]); a host's change against the fleet median of an
//! event's rate is `(rate - median) / median` in percent, `null` where the
//! median is 0 (an event only a few hosts saw).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::diff::{DiffError, Side, pct, rate, side};
use crate::report::esc;

/// Version of [`FleetReport`]'s layout.
pub const FLEET_FORMAT_VERSION: u32 = 1;

/// How many of a host's largest changes against the fleet median are shown.
pub const LARGEST_CHANGES: usize = 3;

/// A change against the fleet median smaller than this (percent) is not shown.
pub const MIN_CHANGE_PCT: f64 = 1.0;

/// Why a fleet summary could not be made.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// A bundle could not be read.
    #[error(transparent)]
    Run(#[from] DiffError),
    /// A host status file could not be read or is not one.
    #[error("{}: not a host status file: {reason}\n  = help: a host status is JSON like {{\"host\": \"db-3\", \"reason\": \"unreachable\"}}; a run is given as its bundle (.tar.zst)", .path.display())]
    Status {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// A host whose run wrote no bundle, as the Ansible module records it
/// (`HOST.json` beside the fetched bundles).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HostStatus {
    /// The inventory host name.
    pub host: String,
    /// Where it failed: `unreachable`, `facts`, `preflight`, `run`, `fetch`.
    #[serde(default)]
    pub stage: Option<String>,
    /// Why, in a person's words (the error or the tool's last line).
    pub reason: String,
    /// The exit code of `trace-recipe run` there, when it ended.
    #[serde(default)]
    pub exit_code: Option<i32>,
}

/// `fleet --format json`: the whole fleet.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FleetReport {
    /// [`FLEET_FORMAT_VERSION`].
    pub format_version: u32,
    /// The recipes the bundles ran (normally one).
    pub recipes: Vec<String>,
    /// One row per host that wrote a bundle, in input order.
    pub hosts: Vec<HostRow>,
    /// The hosts that wrote none, and why.
    pub failed: Vec<HostStatus>,
    /// Sums over `hosts`.
    pub totals: Totals,
    /// Per `system:event`: the median over the hosts of its rate (events per
    /// second of recording; a host without the event counts as 0).
    pub median_rates: BTreeMap<String, f64>,
}

/// One host's run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HostRow {
    /// Host name from the bundle's manifest; the file name without `.tar.zst`
    /// when the manifest has none (`pack --redact-host`), and `STEM (HOST)` when
    /// two bundles carry the same host name (hosts that share a kernel).
    pub host: String,
    /// The bundle.
    pub path: String,
    /// Recipe name.
    pub recipe: Option<String>,
    /// Kernel release.
    pub kernel_release: Option<String>,
    /// Seconds of recording.
    pub duration_s: Option<f64>,
    /// Events recorded.
    pub events: u64,
    /// Events lost.
    pub lost_events: u64,
    /// `[[expect]]`s that held.
    pub expectations_passed: usize,
    /// `[[expect]]`s that failed, as written.
    pub expectations_failed: Vec<String>,
    /// Why the run ended.
    pub stop_reason: Option<String>,
    /// Up to [`LARGEST_CHANGES`] events whose rate differs most from the fleet
    /// median (by at least [`MIN_CHANGE_PCT`]), largest first (new events, where
    /// the median is 0, first).
    pub largest_changes: Vec<RateChange>,
}

/// One event's rate on a host against the fleet median.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RateChange {
    /// `system:event`.
    pub event: String,
    /// Events per second on this host.
    pub rate: f64,
    /// The fleet median of that rate.
    pub median: f64,
    /// `(rate - median) / median` in percent; `null` when the median is 0.
    pub change_pct: Option<f64>,
}

/// Sums over the hosts that wrote a bundle.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Totals {
    /// Hosts given (bundles plus status files).
    pub hosts: usize,
    /// Hosts with a bundle.
    pub ran: usize,
    /// Hosts without one.
    pub failed: usize,
    /// Events recorded.
    pub events: u64,
    /// Events lost.
    pub lost_events: u64,
    /// `[[expect]]`s that held.
    pub expectations_passed: usize,
    /// `[[expect]]`s that failed.
    pub expectations_failed: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn status(path: &Path) -> Result<HostStatus, FleetError> {
    let err = |reason: String| FleetError::Status {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = crate::untrusted::read(path, crate::untrusted::Kind::Report)
        .map_err(|e| err(e.reason()))?;
    serde_json::from_slice(&bytes).map_err(|e| err(e.to_string()))
}

/// The manifest's host name and the file's name without `.tar.zst` (the
/// inventory name, as the Ansible module fetches to `fleet/HOST.tar.zst`).
fn names_of(s: &Side) -> (Option<String>, String) {
    let name = s.path.file_name().unwrap_or_default().to_string_lossy();
    let stem = name.strip_suffix(".tar.zst").unwrap_or(&name).to_string();
    (
        s.opened.as_ref().and_then(|o| o.manifest.host.clone()),
        stem,
    )
}

/// Summarises `inputs`: bundles (or output folders) of one recipe's runs, and
/// host status files (`*.json`) of hosts that wrote none. Errors: an input
/// cannot be read.
pub fn fleet(inputs: &[PathBuf]) -> Result<FleetReport, FleetError> {
    let mut sides = Vec::new();
    let mut failed = Vec::new();
    for p in inputs {
        if p.extension().is_some_and(|e| e == "json") {
            failed.push(status(p)?);
        } else {
            sides.push(side(p)?);
        }
    }
    let names: BTreeSet<&String> = sides.iter().flat_map(|s| s.report.events.keys()).collect();
    let rates = |s: &Side, ev: &str| rate(&s.report, s.report.events.get(ev).copied().unwrap_or(0));
    let median_rates: BTreeMap<String, f64> = names
        .iter()
        .map(|ev| {
            let v = sides.iter().filter_map(|s| rates(s, ev)).collect();
            ((*ev).clone(), median(v))
        })
        .collect();
    let labels: Vec<(Option<String>, String)> = sides.iter().map(names_of).collect();
    let hosts: Vec<HostRow> = sides
        .iter()
        .zip(&labels)
        .map(|(s, (host, stem))| {
            let r = &s.report;
            let mut changes: Vec<RateChange> = median_rates
                .iter()
                .filter_map(|(ev, &median)| {
                    let rate = rates(s, ev)?;
                    let change_pct = pct(median, rate);
                    let large = change_pct.is_none_or(|p| p.abs() >= MIN_CHANGE_PCT);
                    (rate != median && large).then(|| RateChange {
                        event: ev.clone(),
                        rate,
                        median,
                        change_pct,
                    })
                })
                .collect();
            let key = |c: &RateChange| c.change_pct.map_or(f64::INFINITY, f64::abs);
            changes.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.event.cmp(&b.event)));
            changes.truncate(LARGEST_CHANGES);
            HostRow {
                host: match host {
                    Some(h) if labels.iter().filter(|n| n.0.as_ref() == Some(h)).count() > 1 => {
                        format!("{stem} ({h})")
                    }
                    Some(h) => h.clone(),
                    None => stem.clone(),
                },
                path: s.path.display().to_string(),
                recipe: r.recipe.clone(),
                kernel_release: r.kernel_release.clone(),
                duration_s: r.duration_s,
                events: r.total_events,
                lost_events: r.lost_total,
                expectations_passed: r.expectations.iter().filter(|e| e.passed).count(),
                expectations_failed: r
                    .expectations
                    .iter()
                    .filter(|e| !e.passed)
                    .map(|e| e.that.clone())
                    .collect(),
                stop_reason: r.stop_reason.clone(),
                largest_changes: changes,
            }
        })
        .collect();
    let totals = Totals {
        hosts: hosts.len() + failed.len(),
        ran: hosts.len(),
        failed: failed.len(),
        events: hosts.iter().map(|h| h.events).sum(),
        lost_events: hosts.iter().map(|h| h.lost_events).sum(),
        expectations_passed: hosts.iter().map(|h| h.expectations_passed).sum(),
        expectations_failed: hosts.iter().map(|h| h.expectations_failed.len()).sum(),
    };
    let recipes: BTreeSet<String> = hosts.iter().filter_map(|h| h.recipe.clone()).collect();
    Ok(FleetReport {
        format_version: FLEET_FORMAT_VERSION,
        recipes: recipes.into_iter().collect(),
        hosts,
        failed,
        totals,
        median_rates,
    })
}

/// The largest rate changes of a host, event names
/// [escaped](crate::untrusted::escape).
fn changes_text(h: &HostRow) -> String {
    if h.largest_changes.is_empty() {
        return "-".into();
    }
    h.largest_changes
        .iter()
        .map(|c| {
            let pct = c
                .change_pct
                .map_or_else(|| "new".to_string(), |p| format!("{p:+.1}%"));
            format!(
                "{} {pct} ({:.1}/s vs {:.1}/s)",
                crate::untrusted::escape(&c.event),
                c.rate,
                c.median
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn expect_text(h: &HostRow) -> String {
    let all = h.expectations_passed + h.expectations_failed.len();
    if all == 0 {
        "-".into()
    } else {
        format!("{}/{all}", h.expectations_passed)
    }
}

/// A host that wrote no bundle, as its status file says (each field
/// [escaped](crate::untrusted::escape)).
fn failed_text(f: &HostStatus) -> String {
    use crate::untrusted::escape;
    format!(
        "{}: {}{}{}",
        escape(&f.host),
        f.stage
            .as_deref()
            .map_or(String::new(), |s| format!("{}: ", escape(s))),
        escape(&f.reason),
        f.exit_code
            .map_or(String::new(), |c| format!(" (exit {c})"))
    )
}

/// The fleet for a person: one line per host, totals, failed hosts. Every
/// name and value from the bundles and status files is shown
/// [escaped](crate::untrusted::escape).
pub fn render_text(f: &FleetReport) -> String {
    use crate::untrusted::escape;
    use std::fmt::Write as _;
    let mut o = String::new();
    let t = &f.totals;
    let _ = writeln!(
        o,
        "fleet: {} hosts, {} ran, {} failed (recipe {})",
        t.hosts,
        t.ran,
        t.failed,
        if f.recipes.is_empty() {
            "-".into()
        } else {
            f.recipes
                .iter()
                .map(|r| escape(r))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let w = f
        .hosts
        .iter()
        .map(|h| escape(&h.host).chars().count())
        .chain([5])
        .max()
        .unwrap_or(5);
    let _ = writeln!(
        o,
        "\n{:w$}  {:>10}  {:>6}  {:>6}  {:<22}  largest changes vs fleet median rate",
        "HOST", "EVENTS", "LOST", "EXPECT", "STOP"
    );
    for h in &f.hosts {
        let _ = writeln!(
            o,
            "{:w$}  {:>10}  {:>6}  {:>6}  {:<22}  {}",
            escape(&h.host),
            h.events,
            h.lost_events,
            expect_text(h),
            escape(h.stop_reason.as_deref().unwrap_or("-")),
            changes_text(h)
        );
        for e in &h.expectations_failed {
            let _ = writeln!(o, "{:w$}  expectation failed: {}", "", escape(e));
        }
    }
    let _ = writeln!(
        o,
        "{:w$}  {:>10}  {:>6}  {:>6}",
        "total",
        t.events,
        t.lost_events,
        format!(
            "{}/{}",
            t.expectations_passed,
            t.expectations_passed + t.expectations_failed
        )
    );
    if !f.failed.is_empty() {
        let _ = writeln!(o, "\nfailed hosts:");
        for h in &f.failed {
            let _ = writeln!(o, "  {}", failed_text(h));
        }
    }
    o
}

/// The fleet as one self-contained HTML page (tables; no scripts).
pub fn render_html(f: &FleetReport) -> String {
    let mut rows = String::new();
    for h in &f.hosts {
        let cls = if h.expectations_failed.is_empty() {
            ""
        } else {
            " class=\"bad\""
        };
        rows.push_str(&format!(
            "<tr{cls}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&h.host),
            h.events,
            h.lost_events,
            esc(&expect_text(h)),
            esc(h.stop_reason.as_deref().unwrap_or("-")),
            esc(&changes_text(h))
        ));
    }
    let t = &f.totals;
    rows.push_str(&format!(
        "<tr><th>total</th><th>{}</th><th>{}</th><th>{}/{}</th><th></th><th></th></tr>\n",
        t.events,
        t.lost_events,
        t.expectations_passed,
        t.expectations_passed + t.expectations_failed
    ));
    let failed: String = f
        .failed
        .iter()
        .map(|h| format!("<li>{}</li>\n", esc(&failed_text(h))))
        .collect();
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>trace-recipe fleet</title>\n<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}td:first-child,td:last-child{{text-align:left}}tr.bad td{{background:#fee}}</style></head>\n<body><h1>trace-recipe fleet</h1>\n<p>{} hosts, {} ran, {} failed; recipe {}</p>\n<table><tr><th>host</th><th>events</th><th>lost</th><th>expect</th><th>stop</th><th>largest changes vs fleet median rate</th></tr>\n{rows}</table>\n<h2>Failed hosts</h2><ul>\n{failed}</ul></body></html>\n",
        t.hosts,
        t.ran,
        t.failed,
        esc(&f.recipes.join(", "))
    )
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(vec![]), 0.0);
    }
}
