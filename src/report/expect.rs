//! Evaluating the expression language of [`crate::expr`] (`[[expect]]`,
//! `diff --fail-if`) against the report it reads: each metric's value in a
//! [`JsonReport`], the right-hand side's bound, and the results report.json,
//! summary.txt and `--junit` show.

use super::{ExpectResult, JsonReport};
use crate::expr::{Expr, Metric, Stat, Value};

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
    match metric {
        Metric::Count(ev) => Some(*report.events.get(ev).unwrap_or(&0) as f64),
        Metric::Rate(ev) => {
            let n = *report.events.get(ev).unwrap_or(&0) as f64;
            let secs = report.duration_s.filter(|d| *d > 0.0)?;
            Some(n / secs)
        }
        Metric::LostEvents => Some(report.lost_total as f64),
        Metric::MaxLatency => Some(report.tracer.as_ref()?.max_latency_us? as f64 * 1000.0),
        Metric::MaxStack => Some(report.stack_tracer.as_ref()?.max_stack_bytes as f64),
        Metric::Hist { event, value } => report
            .hist
            .iter()
            .find(|h| h.event == *event)
            .map(|h| *h.totals.get(value).unwrap_or(&0) as f64),
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
                .find(|g| g.key == *key)?;
            Some(match stat {
                Stat::P50 => group.p50_ns,
                Stat::P90 => group.p90_ns,
                Stat::P99 => group.p99_ns,
                Stat::Max => group.max_ns,
            } as f64)
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
            ExpectResult {
                that: that.to_string(),
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
