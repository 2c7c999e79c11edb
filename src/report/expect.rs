//! Evaluating the expression language of [`crate::expr`] (`[[expect]]`,
//! `diff --fail-if`) against the report it reads: each metric's value in a
//! [`JsonReport`], the right-hand side's bound, and the results report.json,
//! summary.txt and `--junit` show.

use super::{ExpectResult, JsonReport};
use crate::answer::Cell;
use crate::expr::{AnswerCell, CellOf, Expr, Metric, RowKey, Stat, Value};
use crate::recipe::AnswerValue;

impl Expr {
    /// The measured value in `report` (ns for latencies); `None` when a latency
    /// group does not exist there. An event the report never saw counts 0.
    pub(crate) fn value(&self, report: &JsonReport) -> Option<f64> {
        measure(&self.metric, report)
    }

    /// The right-hand side's value in `report`; `base` is the first run's value
    /// for a relative rule (`+10%` is `base * 1.10`). `None` when it cannot be
    /// known (no first run, or a latency group missing from `report`).
    pub(crate) fn bound(&self, report: &JsonReport, base: Option<f64>) -> Option<f64> {
        match &self.value {
            Value::Absolute(v) => Some(*v),
            Value::Relative(pct) => base.map(|b| b * (1.0 + pct / 100.0)),
            Value::Measure { factor, metric, .. } => measure(metric, report).map(|v| v * factor),
        }
    }
}

/// The value of `metric` in `report`; see [`Expr::value`].
pub(crate) fn measure(metric: &Metric, report: &JsonReport) -> Option<f64> {
    lookup(metric, report).ok()
}

/// The value of `metric` in `report` (ns for durations), or what `report`
/// lacks to know it, as a sentence fragment (`answer `x` has no row `bash``).
/// An event the report never saw counts 0, and so does a row missing from an
/// answer that kept every row (no `(other)`) for `count` and `sum(F)`.
pub(crate) fn lookup(metric: &Metric, report: &JsonReport) -> Result<f64, String> {
    match metric {
        Metric::Count(ev) => Ok(*report.events.get(ev).unwrap_or(&0) as f64),
        Metric::Rate(ev) => {
            let n = *report.events.get(ev).unwrap_or(&0) as f64;
            let secs = report
                .duration_s
                .filter(|d| *d > 0.0)
                .ok_or("the run's duration is unknown")?;
            Ok(n / secs)
        }
        Metric::LostEvents => Ok(report.lost_total as f64),
        Metric::MaxLatency => report
            .tracer
            .as_ref()
            .and_then(|t| t.max_latency_us)
            .map(|us| us as f64 * 1000.0)
            .ok_or_else(|| "the report has no tracer's max latency".into()),
        Metric::MaxStack => report
            .stack_tracer
            .as_ref()
            .map(|s| s.max_stack_bytes as f64)
            .ok_or_else(|| "the report has no stack tracer's result".into()),
        Metric::Hist { event, value } => report
            .hist
            .iter()
            .find(|h| h.event == *event)
            .map(|h| *h.totals.get(value).unwrap_or(&0) as f64)
            .ok_or_else(|| format!("the report has no hist table on `{event}`")),
        Metric::Latency {
            stat,
            analysis,
            key,
        } => {
            let group = report
                .latency
                .iter()
                .filter(|l| l.analysis == *analysis)
                .flat_map(|l| &l.groups)
                .find(|g| g.key == *key)
                .ok_or_else(|| format!("no such latency group `{analysis}:{key}`"))?;
            Ok(match stat {
                Stat::P50 => group.p50_ns,
                Stat::P90 => group.p90_ns,
                Stat::P99 => group.p99_ns,
                Stat::Max => group.max_ns,
            } as f64)
        }
        Metric::Answer(cell) => answer_cell(cell, report),
    }
}

/// The value of one cell of an answer's table in `report`; see [`lookup`].
fn answer_cell(cell: &AnswerCell, report: &JsonReport) -> Result<f64, String> {
    let name = &cell.answer;
    let table = report
        .answers
        .get(name)
        .ok_or_else(|| format!("the report has no answer `{name}`"))?;
    let zero_if_absent = matches!(cell.of, CellOf::Count | CellOf::Value(AnswerValue::Sum(_)));
    let row = match &cell.row {
        RowKey::All => &table.total,
        RowKey::Other => match &table.other {
            Some(o) => o,
            None if zero_if_absent => return Ok(0.0),
            None => {
                return Err(format!(
                    "answer `{name}` has no `(other)` row: it kept all its {} rows",
                    table.rows.len()
                ));
            }
        },
        RowKey::Keys(keys) if keys.len() != table.keys.len() => {
            return Err(format!(
                "answer `{name}` has {} keys per row ({}), and `{}` gives {}",
                table.keys.len(),
                table.keys.join(", "),
                cell.row,
                keys.len()
            ));
        }
        RowKey::Keys(keys) => match table.rows.iter().find(|r| r.keys == *keys) {
            Some(r) => r,
            None if zero_if_absent && table.other.is_none() => return Ok(0.0),
            None => {
                let shown: Vec<String> = table
                    .rows
                    .iter()
                    .take(10)
                    .map(|r| RowKey::Keys(r.keys.clone()).to_string())
                    .collect();
                let more = match table.rows.len() > shown.len() {
                    true => ", ...",
                    false => "",
                };
                let cut = match &table.other {
                    Some(o) => format!(
                        " (the rows past its top {} are summed in `(other)`: {} more events)",
                        table.rows.len(),
                        o.count
                    ),
                    None => String::new(),
                };
                return Err(format!(
                    "answer `{name}` has no row `{}`{cut}; its rows: {}{more}",
                    cell.row,
                    if shown.is_empty() {
                        "none".to_string()
                    } else {
                        shown.join("; ")
                    }
                ));
            }
        },
    };
    let column = |want: &AnswerValue| {
        let want = want.to_string();
        table
            .values
            .iter()
            .position(|v| *v == want)
            .and_then(|i| row.cells.get(i))
            .ok_or_else(|| format!("answer `{name}` has no value `{want}`"))
    };
    let latency = || match column(&AnswerValue::Latency)? {
        Cell::Latency(l) => Ok(l),
        _ => Err(format!("answer `{name}` row `{}` has no latency", cell.row)),
    };
    match &cell.of {
        CellOf::Count => Ok(row.count as f64),
        CellOf::Value(v) => match column(v)? {
            Cell::Int(n) => Ok(*n as f64),
            Cell::Float(f) => Ok(*f),
            _ => Err(format!(
                "answer `{name}` row `{}` has no `{v}` (no event of it had the field)",
                cell.row
            )),
        },
        CellOf::Latency(stat) => Ok(latency()?.stat(*stat) * 1000.0),
        CellOf::Mean => {
            let l = latency()?;
            let spans: u64 = l.buckets.iter().map(|b| b.count).sum();
            match spans {
                0 => Err(format!("answer `{name}` row `{}` has no span", cell.row)),
                n => Ok(l.total_us * 1000.0 / n as f64),
            }
        }
    }
}

/// Checks each `(that, expr)` against `report`: the results report.json,
/// summary.txt and `--junit` show.
pub(crate) fn check_all<'a>(
    expectations: impl IntoIterator<Item = (&'a str, &'a Expr)>,
    report: &JsonReport,
) -> Vec<ExpectResult> {
    expectations
        .into_iter()
        .map(|(that, expr)| {
            let actual = expr.value(report);
            let bound = expr.bound(report, None);
            let duration = expr.is_duration();
            // What the report lacks to know either side, first the left's.
            let missing = Metric::of(expr)
                .find_map(|(m, _)| lookup(m, report).err())
                .filter(|_| actual.is_none() || bound.is_none());
            ExpectResult {
                that: that.to_string(),
                missing,
                passed: actual.zip(bound).is_some_and(|(v, rhs)| expr.holds(v, rhs)),
                actual: match (&expr.value, actual, bound) {
                    (Value::Measure { .. }, Some(v), Some(rhs)) => {
                        Some(format!("{} vs {}", show(v, duration), show(rhs, duration)))
                    }
                    (Value::Measure { .. }, _, _) => None,
                    (_, v, _) => v.map(|v| show(v, duration)),
                },
            }
        })
        .collect()
}

/// A measured value as text: ns become µs/ms/s for latencies.
pub(crate) fn show(value: f64, duration: bool) -> String {
    if !duration {
        return if value.fract() == 0.0 {
            format!("{value:.0}")
        } else {
            format!("{value:.3}")
        };
    }
    match value {
        v if v >= 1e9 => format!("{:.3}s", v / 1e9),
        v if v >= 1e6 => format!("{:.3}ms", v / 1e6),
        v if v >= 1e3 => format!("{:.3}us", v / 1e3),
        v => format!("{v:.0}ns"),
    }
}
