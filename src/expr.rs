//! The expression language shared by a recipe's `[[expect]] that = "..."` and
//! `diff --fail-if RULE` (`../shared/design/recipe-format.md`, additions in 1.1):
//!
//! ```text
//! EXPR    := METRIC OP VALUE
//! METRIC  := count(SYSTEM:EVENT) | rate(SYSTEM:EVENT) | lost_events
//!          | max_latency | max_stack | hist(SYSTEM:EVENT:VALUE)
//!          | p50(ANALYSIS:KEY) | p90(ANALYSIS:KEY) | p99(ANALYSIS:KEY) | max(ANALYSIS:KEY)
//! OP      := == | != | < | <= | > | >=
//! VALUE   := NUMBER | NUMBER UNIT | (+|-)NUMBER% | METRIC | NUMBER * METRIC
//! UNIT    := ns | us | ms | s
//! ```
//!
//! `count` is the number of events recorded, `rate` that number per second of
//! recording, `lost_events` report.json's `lost_total`, `max_latency` its
//! `tracer.max_latency_us` (a duration), `max_stack` its `stack_tracer.max_stack_bytes`, `hist` a value summed over
//! a hist trigger's table (`hist[].totals`). `pNN` and `max` read the
//! latency analyses of report.json (`p99(syscalls:openat)`: analysis `syscalls`,
//! group `openat`; `max(timerlat:thread)`: the timerlat tracer's thread
//! latency) and take a duration. A relative value (`+10%`) compares with
//! the first run of a `diff` and is refused in `[[expect]]`. A measurement on the
//! right (`count(block:block_rq_complete) == count(block:block_rq_issue)`,
//! `p99(wakeup:x) < 2 * p50(wakeup:x)`) is read from the same run as the left
//! (run B of a `diff`); both sides must be of one kind: counts (`count`,
//! `lost_events`, `hist`), rates, durations (`pNN`, `max`, `max_latency`) or
//! bytes (`max_stack`). Its factor is a positive plain number.
//!
//! This module parses, purely; [`crate::report`] evaluates a parsed expression
//! against a report (`Expr::value`, `measure`, `check_all`).

use std::fmt;
use std::ops::Range;

use crate::compare::Cmp;

/// The latency analyses whose groups `pNN(ANALYSIS:KEY)` can name.
pub(crate) const LATENCY_ANALYSES: &[&str] = &[
    "syscalls",
    "wakeup",
    "kretprobe",
    "funcgraph",
    "irq",
    "hwlat",
    "osnoise",
    "timerlat",
];

/// What an expression measures.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Metric {
    /// `count(SYSTEM:EVENT)`: events recorded.
    Count(String),
    /// `rate(SYSTEM:EVENT)`: events per second of recording.
    Rate(String),
    /// `lost_events`: events the kernel dropped or overwrote.
    LostEvents,
    /// `max_latency`: the latency tracer's `tracing_max_latency` (report.json
    /// `tracer.max_latency_us`), in ns.
    MaxLatency,
    /// `max_stack`: the stack tracer's `stack_max_size` (report.json
    /// `stack_tracer.max_stack_bytes`), in bytes.
    MaxStack,
    /// `hist(SYSTEM:EVENT:VALUE)`: VALUE (`hitcount` or a `vals=` field)
    /// summed over every row of the hist table on SYSTEM:EVENT (report.json
    /// `hist[].totals`).
    Hist {
        /// `SYSTEM:EVENT`.
        event: String,
        /// `hitcount` or a value field.
        value: String,
    },
    /// `p50|p90|p99|max(ANALYSIS:KEY)`: a latency of one group, in ns.
    Latency {
        /// `p50`, `p90`, `p99` or `max`.
        stat: Stat,
        /// `syscalls`, `wakeup`, `kretprobe` or `funcgraph`.
        analysis: String,
        /// The group key (`openat`, a probe or function name, a comm).
        key: String,
    },
}

/// A latency statistic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stat {
    /// Median.
    P50,
    /// 90th percentile.
    P90,
    /// 99th percentile.
    P99,
    /// Largest.
    Max,
}

/// The right-hand side.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// A number; durations are converted to ns.
    Absolute(f64),
    /// `+N%` / `-N%`: relative to the first run (diff only).
    Relative(f64),
    /// `[FACTOR *] METRIC`: another measurement of the same run, times `factor`.
    Measure {
        /// The positive factor (1 when none is written).
        factor: f64,
        /// What is measured.
        metric: Metric,
        /// Where the metric's argument is, as [`Expr::metric_span`].
        span: Range<usize>,
    },
}

/// What a measure's values are, for comparing two of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Count,
    Bytes,
    Rate,
    Duration,
}

impl Metric {
    fn kind(&self) -> Kind {
        match self {
            Metric::Count(_) | Metric::LostEvents | Metric::Hist { .. } => Kind::Count,
            Metric::MaxStack => Kind::Bytes,
            Metric::Rate(_) => Kind::Rate,
            Metric::Latency { .. } | Metric::MaxLatency => Kind::Duration,
        }
    }

    /// The metrics of `expr`: its left side and, when the right side is a
    /// measurement, that one, each with the span of its argument.
    pub(crate) fn of(expr: &Expr) -> impl Iterator<Item = (&Metric, &Range<usize>)> {
        let right = match &expr.value {
            Value::Measure { metric, span, .. } => Some((metric, span)),
            _ => None,
        };
        std::iter::once((&expr.metric, &expr.metric_span)).chain(right)
    }
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Count => "a count",
            Kind::Bytes => "a size in bytes",
            Kind::Rate => "a rate (events per second)",
            Kind::Duration => "a duration",
        }
    }
}

/// A parsed expression, with the byte ranges of its parts in the text.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// What is measured.
    pub(crate) metric: Metric,
    /// Where the metric's argument (`SYSTEM:EVENT`, `ANALYSIS:KEY`) is, or the whole
    /// metric for `lost_events`.
    pub(crate) metric_span: Range<usize>,
    /// The comparison.
    pub(crate) op: Cmp,
    /// The value compared with.
    pub(crate) value: Value,
    /// Where the value is.
    pub(crate) value_span: Range<usize>,
}

/// A syntax or type error, with the byte range it refers to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ExprError {
    /// What is wrong, as a lowercase fragment.
    pub(crate) message: String,
    /// Where, in the expression's text.
    pub span: Range<usize>,
}

fn err<T>(message: impl Into<String>, span: Range<usize>) -> Result<T, ExprError> {
    Err(ExprError {
        message: message.into(),
        span,
    })
}

/// Where an expression is used: `[[expect]]` refuses relative values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// `[[expect]] that`.
    Expect,
    /// `diff --fail-if`.
    FailIf,
}

impl Expr {
    /// Parses `text`. Errors name the offending part and its place.
    pub fn parse(text: &str, context: Context) -> Result<Expr, ExprError> {
        let b = text.as_bytes();
        let (metric, metric_span, end) = parse_metric(text, skip_ws(b, 0))?;
        let mut i = skip_ws(b, end);
        let op_start = i;
        let Some(op) = text.get(i..).and_then(Cmp::prefix) else {
            return err(
                "expected a comparison: ==, !=, <, <=, >, >=",
                op_start..(op_start + 1).min(text.len()),
            );
        };
        let len = op.as_str().len();
        i = skip_ws(b, i + len);
        let value_start = i;
        let value_text = text[i..].trim_end();
        let value_span = value_start..value_start + value_text.len();
        if value_text.is_empty() {
            return err(
                "expected a value after the comparison",
                op_start..op_start + len,
            );
        }
        let value = match parse_measure(text, value_start, value_span.end)? {
            Some(value) => {
                if let Value::Measure { metric: right, .. } = &value
                    && right.kind() != metric.kind()
                {
                    return err(
                        format!(
                            "both sides must be of one kind: the left is {}, the right {}",
                            metric.kind().name(),
                            right.kind().name()
                        ),
                        metric_span.start..value_span.end,
                    );
                }
                value
            }
            None => parse_value(value_text, &metric, context).map_err(|message| ExprError {
                message,
                span: value_span.clone(),
            })?,
        };
        if let Some(message) = never_holds(op, &value, value_text, context) {
            return err(message, op_start..value_span.end);
        }
        Ok(Expr {
            metric,
            metric_span,
            op,
            value,
            value_span,
        })
    }

    /// Whether `actual OP rhs` holds.
    pub(crate) fn holds(&self, actual: f64, rhs: f64) -> bool {
        self.op.holds(&actual, &rhs)
    }

    /// Whether the metric is a latency (its values are ns).
    pub(crate) fn is_duration(&self) -> bool {
        matches!(self.metric, Metric::Latency { .. } | Metric::MaxLatency)
    }
}

/// Parses the metric starting at `start` (after any whitespace): the metric, the
/// span of its argument (of the whole metric for `lost_events`) and where it ends.
fn parse_metric(text: &str, start: usize) -> Result<(Metric, Range<usize>, usize), ExprError> {
    let b = text.as_bytes();
    let mut i = start;
    let name_start = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
        i += 1;
    }
    let name = &text[name_start..i];
    if name.is_empty() {
        return err(
            "expected `count(...)`, `rate(...)`, `lost_events`, `p50|p90|p99|max(...)`",
            name_start..(name_start + 1).min(text.len()).max(name_start),
        );
    }
    let bare = match name {
        "lost_events" => Some(Metric::LostEvents),
        "max_latency" => Some(Metric::MaxLatency),
        "max_stack" => Some(Metric::MaxStack),
        _ => None,
    };
    let (metric, metric_span) = if let Some(metric) = bare {
        (metric, name_start..i)
    } else {
        let j = skip_ws(b, i);
        if b.get(j) != Some(&b'(') {
            return err(format!("expected `(` after `{name}`"), name_start..i);
        }
        let arg_start = skip_ws(b, j + 1);
        // The `)` that balances the `(`: group keys such as `(all)` hold parentheses.
        let mut depth = 0usize;
        let close = text[arg_start..].char_indices().find_map(|(k, c)| match c {
            '(' => {
                depth += 1;
                None
            }
            ')' if depth == 0 => Some(arg_start + k),
            ')' => {
                depth -= 1;
                None
            }
            _ => None,
        });
        let Some(close) = close else {
            return err("missing `)`", j..text.len());
        };
        let arg = text[arg_start..close].trim_end();
        let arg_span = arg_start..arg_start + arg.len();
        let Some((left, right)) = arg.split_once(':') else {
            return err(
                format!("expected `SYSTEM:EVENT` or `ANALYSIS:KEY` in `{name}(...)`"),
                arg_span,
            );
        };
        if left.is_empty() || right.is_empty() || arg.contains(char::is_whitespace) {
            return err(format!("`{arg}` is not `NAME:NAME`"), arg_span);
        }
        let metric = match name {
            "hist" => match right.rsplit_once(':') {
                Some((ev, value)) if !ev.is_empty() && !value.is_empty() => Metric::Hist {
                    event: format!("{left}:{ev}"),
                    value: value.to_string(),
                },
                _ => {
                    return err(
                        format!(
                            "expected `SYSTEM:EVENT:VALUE` in `hist(...)`, e.g. `hist(kmem:kmalloc:bytes_req)`, not `{arg}`"
                        ),
                        arg_span,
                    );
                }
            },
            "count" => Metric::Count(arg.to_string()),
            "rate" => Metric::Rate(arg.to_string()),
            "p50" | "p90" | "p99" | "max" => {
                if !LATENCY_ANALYSES.contains(&left) {
                    return err(
                        format!(
                            "no latency analysis `{left}`; there are {}",
                            LATENCY_ANALYSES.join(", ")
                        ),
                        arg_start..arg_start + left.len(),
                    );
                }
                Metric::Latency {
                    stat: match name {
                        "p50" => Stat::P50,
                        "p90" => Stat::P90,
                        "p99" => Stat::P99,
                        _ => Stat::Max,
                    },
                    analysis: left.to_string(),
                    key: right.to_string(),
                }
            }
            other => {
                return err(
                    format!(
                        "unknown measure `{other}`: use count, rate, lost_events, max_latency, max_stack, hist, p50, p90, p99 or max"
                    ),
                    name_start..i,
                );
            }
        };
        i = close + 1;
        (metric, arg_span)
    };
    Ok((metric, metric_span, i))
}

/// The right-hand side `[FACTOR *] METRIC` in `text[start..end]`, or `None`
/// when it is a plain value.
fn parse_measure(text: &str, start: usize, end: usize) -> Result<Option<Value>, ExprError> {
    let v = &text[start..end];
    let (factor, metric_start) = if v.starts_with(|c: char| c.is_ascii_alphabetic()) {
        (1.0, start)
    } else if let Some((f, _)) = v.split_once('*') {
        let factor = f
            .trim()
            .parse()
            .ok()
            .filter(|n: &f64| n.is_finite() && *n > 0.0)
            .ok_or_else(|| ExprError {
                message: format!("`{}` is not a positive factor", f.trim()),
                span: start..start + f.trim_end().len(),
            })?;
        (factor, skip_ws(text.as_bytes(), start + f.len() + 1))
    } else {
        return Ok(None);
    };
    let (metric, span, after) = parse_metric(text, metric_start)?;
    if after < end {
        return err(
            format!(
                "unexpected `{}` after the measurement",
                text[after..end].trim()
            ),
            skip_ws(text.as_bytes(), after)..end,
        );
    }
    Ok(Some(Value::Measure {
        factor,
        metric,
        span,
    }))
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Why `METRIC OP value` can never hold, if it cannot: every measure is a count,
/// a rate or a duration, never negative, and a relative value of -100% or less
/// puts the bound at or under zero.
fn never_holds(op: Cmp, value: &Value, text: &str, context: Context) -> Option<String> {
    let (bound, zero_bound) = match *value {
        Value::Absolute(v) => (v, v == 0.0),
        Value::Relative(pct) => (pct + 100.0, pct == -100.0),
        Value::Measure { .. } => return None,
    };
    let never = match op {
        Cmp::Lt => bound < 0.0 || zero_bound,
        Cmp::Le | Cmp::Eq => bound < 0.0,
        _ => false,
    };
    if !never {
        return None;
    }
    let relative_hint = match (value, context) {
        (Value::Absolute(_), Context::FailIf) if !text.ends_with(['s', '%']) => {
            format!("; for a change relative to the first run write `{text}%`")
        }
        _ => String::new(),
    };
    Some(format!(
        "this can never hold: the measure is never negative, and `{} {text}` asks for less{relative_hint}",
        op.as_str()
    ))
}

fn parse_value(text: &str, metric: &Metric, context: Context) -> Result<Value, String> {
    if let Some(pct) = text.strip_suffix('%') {
        if context == Context::Expect {
            return Err(format!(
                "`{text}` is relative to a first run, which only `diff --fail-if` has; write an absolute value"
            ));
        }
        let signed = pct.starts_with('+') || pct.starts_with('-');
        let n: f64 = pct
            .parse()
            .ok()
            .filter(|n: &f64| n.is_finite() && signed)
            .ok_or_else(|| format!("`{text}` is not a relative change like `+10%` or `-5%`"))?;
        return Ok(Value::Relative(n));
    }
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(digits_end);
    let n: f64 = num
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite())
        .ok_or_else(|| format!("`{text}` is not a number"))?;
    let is_latency = matches!(metric, Metric::Latency { .. } | Metric::MaxLatency);
    let scale = match unit.trim() {
        "" if is_latency => {
            return Err(format!(
                "`{text}` needs a unit: latencies are durations (ns, us, ms, s)"
            ));
        }
        "" => 1.0,
        u @ ("ns" | "us" | "ms" | "s") if !is_latency => {
            return Err(format!(
                "the unit `{u}` does not fit a {}: compare it with a plain number",
                match metric {
                    Metric::Rate(_) => "rate (events per second)",
                    Metric::LostEvents => "count of lost events",
                    Metric::MaxStack => "stack size (bytes)",
                    Metric::Hist { .. } => "hist value",
                    _ => "count",
                }
            ));
        }
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => return Err(format!("unknown unit `{other}`: use ns, us, ms or s")),
    };
    Ok(Value::Absolute(n * scale))
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Absolute(v) => write!(f, "{v}"),
            Value::Relative(p) => write!(f, "{p:+}%"),
            Value::Measure { factor, .. } => write!(f, "{factor} * a measurement"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(t: &str) -> Expr {
        Expr::parse(t, Context::FailIf).unwrap_or_else(|e| panic!("{t}: {e}"))
    }

    fn bad(t: &str, context: Context) -> ExprError {
        Expr::parse(t, context).expect_err(t)
    }

    #[test]
    fn parses_every_form_of_the_contract() {
        let e = ok("lost_events == 0");
        assert_eq!(
            (e.metric, e.op, e.value),
            (Metric::LostEvents, Cmp::Eq, Value::Absolute(0.0))
        );
        let e = ok("count(sched:sched_process_exec) >= 3");
        assert_eq!(e.metric, Metric::Count("sched:sched_process_exec".into()));
        assert_eq!(e.metric_span, 6..30);
        let e = ok("p99(syscalls:openat) < 2ms");
        assert_eq!(e.value, Value::Absolute(2e6));
        assert_eq!(
            e.metric,
            Metric::Latency {
                stat: Stat::P99,
                analysis: "syscalls".into(),
                key: "openat".into()
            }
        );
        assert_eq!(
            ok("rate(sched:sched_switch) < -5%").value,
            Value::Relative(-5.0)
        );
        assert_eq!(
            ok("p99(syscalls:openat) > +10%").value,
            Value::Relative(10.0)
        );
        assert_eq!(ok("max(wakeup:bash)<=1.5us").value, Value::Absolute(1500.0));
        assert_eq!(
            ok("p99(wakeup:(scope)) < 1ms").metric,
            Metric::Latency {
                stat: Stat::P99,
                analysis: "wakeup".into(),
                key: "(scope)".into()
            }
        );
    }

    #[test]
    fn refuses_rules_that_can_never_hold() {
        let e = bad("count(sched:x) < -10", Context::FailIf);
        assert!(e.message.contains("can never hold"), "{e}");
        assert!(e.message.contains("write `-10%`"), "{e}");
        assert_eq!(e.span, 15..20);
        for never in [
            "count(sched:x) < 0",
            "lost_events <= -1",
            "rate(sched:x) == -2",
            "p99(syscalls:openat) < -150%",
            "p99(syscalls:openat) < -100%",
        ] {
            assert!(Expr::parse(never, Context::FailIf).is_err(), "{never}");
        }
        let e = bad("count(sched:x) < 0", Context::Expect);
        assert!(!e.message.contains('%'), "{e}");
        for fine in [
            "count(sched:x) <= 0",
            "count(sched:x) > -1",
            "p99(syscalls:openat) < -10%",
        ] {
            assert!(Expr::parse(fine, Context::FailIf).is_ok(), "{fine}");
        }
    }

    #[test]
    fn refuses_what_does_not_fit_with_its_place() {
        let e = bad("count(sched:x) >= 3ms", Context::Expect);
        assert!(e.message.contains("does not fit a count"), "{e}");
        assert_eq!(e.span, 18..21);
        let e = bad("p99(syscalls:openat) < 2", Context::Expect);
        assert!(e.message.contains("needs a unit"), "{e}");
        let e = bad("p99(sched:openat) < 2ms", Context::Expect);
        assert!(e.message.contains("no latency analysis `sched`"), "{e}");
        assert_eq!(e.span, 4..9);
        let e = bad("count(sched:x) > +10%", Context::Expect);
        assert!(e.message.contains("only `diff --fail-if`"), "{e}");
        assert!(
            bad("count(sched) > 1", Context::FailIf)
                .message
                .contains("SYSTEM:EVENT")
        );
        assert!(
            bad("cnt(a:b) > 1", Context::FailIf)
                .message
                .contains("unknown measure")
        );
        assert!(
            bad("count(a:b) = 1", Context::FailIf)
                .message
                .contains("comparison")
        );
        assert!(
            bad("count(a:b) > ", Context::FailIf)
                .message
                .contains("expected a value")
        );
        assert!(
            bad("count(a:b > 1", Context::FailIf)
                .message
                .contains("missing `)`")
        );
        assert!(bad("", Context::FailIf).message.contains("expected"));
    }

    #[test]
    fn relative_values_compare_with_the_first_run() {
        let bound = |e: &Expr, base: f64| match e.value {
            Value::Relative(pct) => base * (1.0 + pct / 100.0),
            _ => panic!("{e:?}"),
        };
        let e = ok("count(a:b) > +10%");
        assert!(e.holds(111.0, bound(&e, 100.0)));
        assert!(!e.holds(110.0, bound(&e, 100.0)));
        let e = ok("rate(a:b) < -50%");
        assert!(e.holds(49.0, bound(&e, 100.0)));
        assert!(!e.holds(51.0, bound(&e, 100.0)));
    }

    #[test]
    fn a_measurement_on_the_right_with_an_optional_factor() {
        let t = "count(block:block_rq_complete) == count(block:block_rq_issue)";
        let e = ok(t);
        assert_eq!(e.metric, Metric::Count("block:block_rq_complete".into()));
        let Value::Measure {
            factor,
            metric,
            span,
        } = &e.value
        else {
            panic!("{e:?}")
        };
        assert_eq!(*factor, 1.0);
        assert_eq!(*metric, Metric::Count("block:block_rq_issue".into()));
        assert_eq!(&t[span.clone()], "block:block_rq_issue");
        let e = Expr::parse("p99(wakeup:x) < 2.5 * p50(wakeup:(all))", Context::Expect).unwrap();
        assert!(matches!(
            e.value,
            Value::Measure { factor, metric: Metric::Latency { stat: Stat::P50, ref key, .. }, .. }
                if factor == 2.5 && key == "(all)"
        ));
        assert!(Expr::parse("lost_events <= count(a:b)", Context::Expect).is_ok());
        assert!(matches!(
            ok("rate(a:b) >= 0.5*rate(c:d)").value,
            Value::Measure { factor, .. } if factor == 0.5
        ));
        let m: Vec<_> = Metric::of(&ok("count(a:b) > count(c:d)"))
            .map(|(m, _)| m.clone())
            .collect();
        assert_eq!(
            m,
            [Metric::Count("a:b".into()), Metric::Count("c:d".into())]
        );
    }

    #[test]
    fn refuses_measurements_of_different_kinds_and_bad_factors() {
        let t = "p99(syscalls:openat) < count(a:b)";
        let e = bad(t, Context::Expect);
        assert!(
            e.message
                .contains("the left is a duration, the right a count"),
            "{e}"
        );
        assert_eq!(e.span, 4..t.len());
        let e = bad("count(a:b) < rate(a:b)", Context::Expect);
        assert!(e.message.contains("the right a rate"), "{e}");
        let e = bad("count(a:b) < -2 * count(c:d)", Context::Expect);
        assert!(e.message.contains("`-2` is not a positive factor"), "{e}");
        assert_eq!(e.span, 13..15);
        let e = bad("count(a:b) < count(c:d) + 1", Context::Expect);
        assert!(e.message.contains("unexpected `+ 1`"), "{e}");
        assert!(
            bad("count(a:b) < 2 * cnt(c:d)", Context::Expect)
                .message
                .contains("unknown measure")
        );
        assert!(
            bad("count(a:b) < 2 * p99(nosuch:x)", Context::Expect)
                .message
                .contains("no latency analysis")
        );
    }
}
