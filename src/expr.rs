//! The expression language shared by a recipe's `[[expect]] that = "..."` and
//! `diff --fail-if RULE` (`../shared/design/recipe-format.md`, additions in 1.1):
//!
//! ```text
//! EXPR    := METRIC OP VALUE
//! METRIC  := count(SYSTEM:EVENT) | rate(SYSTEM:EVENT) | lost_events
//!          | max_latency | max_stack | hist(SYSTEM:EVENT:VALUE)
//!          | p50(ANALYSIS:KEY) | p90(ANALYSIS:KEY) | p99(ANALYSIS:KEY) | max(ANALYSIS:KEY)
//!          | count(NAME:ROW) | p50|p90|p99|min|max|total|mean(NAME:ROW)
//!          | sum|min|max|avg(NAME.FIELD:ROW)
//! ROW     := (all) | (other) | PART[,PART...]      PART := TEXT | "TEXT"
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
//! `NAME` is an `[[answer]]`'s name (recipe-format 1.3) and `ROW` one row of
//! its table: the row's keys, one per `by` item in order, joined by `,` (a key
//! holding `,`, `)`, `"`, `\\` or whitespace is written in double quotes, with
//! `\"` and `\\` inside), `(all)` the table's total, `(other)` the rows past
//! `top`. `count` is the row's events (spans), `sum|min|max|avg(NAME.FIELD:ROW)`
//! the value column `sum(FIELD)` ... of the answer, and `p50` ... `total` the
//! statistics of its `latency` column (durations), `mean` its total over its
//! spans. The parser cannot tell `count(NAME:ROW)` from `count(SYSTEM:EVENT)`,
//! nor `p99(NAME:ROW)` of an answer named like a latency analysis:
//! [`Expr::with_answers`] resolves them against the answers there are (an
//! answer's name wins).
//!
//! This module parses, purely; [`crate::report`] evaluates a parsed expression
//! against a report (`Expr::value`, `measure`, `check_all`).

use std::fmt;
use std::ops::Range;

use crate::compare::Cmp;
use crate::recipe::{AnswerValue, FieldRef, LatencyStat};

/// The latency analyses whose groups `pNN(ANALYSIS:KEY)` can name.
pub(crate) const LATENCY_ANALYSES: &[&str] = &[
    "syscalls",
    "wakeup",
    "kretprobe",
    "funcgraph",
    "irq",
    "softirq",
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
    /// `count|p99|...(NAME:ROW)`, `sum|min|max|avg(NAME.FIELD:ROW)`: one cell
    /// of an `[[answer]]`'s table (a duration in ns for latency statistics).
    Answer(AnswerCell),
}

/// One cell of an answer's table, as an expression names it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AnswerCell {
    /// The answer's `name`.
    pub(crate) answer: String,
    /// Which of the row's values.
    pub(crate) of: CellOf,
    /// Which row.
    pub(crate) row: RowKey,
}

/// Which value of an answer's row a metric reads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CellOf {
    /// `count(NAME:ROW)`: the row's events (spans).
    Count,
    /// `sum|min|max|avg(NAME.FIELD:ROW)`: that `values` column.
    Value(AnswerValue),
    /// `p50|p90|p99|min|max|total(NAME:ROW)`: a statistic of the `latency` column.
    Latency(LatencyStat),
    /// `mean(NAME:ROW)`: the `latency` column's total over its spans.
    Mean,
}

impl CellOf {
    /// The function as written (`count`, `p99`, `sum(len)`, `mean`).
    pub(crate) fn name(&self) -> String {
        match self {
            CellOf::Count => "count".into(),
            CellOf::Value(v) => v.to_string(),
            CellOf::Latency(s) => s.name().into(),
            CellOf::Mean => "mean".into(),
        }
    }

    /// The metric as an expression writes it for answer `answer` and row
    /// `row` (`p99(reads:bash)`, `sum(reads.len:(all))`).
    pub(crate) fn call(&self, answer: &str, row: &str) -> String {
        match self {
            CellOf::Value(
                AnswerValue::Sum(f)
                | AnswerValue::Min(f)
                | AnswerValue::Max(f)
                | AnswerValue::Avg(f),
            ) => {
                let func = self.name();
                let func = func.split('(').next().unwrap_or_default();
                format!("{func}({answer}.{f}:{row})")
            }
            _ => format!("{}({answer}:{row})", self.name()),
        }
    }
}

/// Which row of an answer's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RowKey {
    /// `(all)`: every row summed (`total`).
    All,
    /// `(other)`: the rows past `top`, summed.
    Other,
    /// The row of these keys, one per `by` item.
    Keys(Vec<String>),
}

impl fmt::Display for RowKey {
    /// As an expression writes it: `(all)`, `(other)`, or the keys joined by
    /// `,`, each quoted when it has to be.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowKey::All => f.write_str("(all)"),
            RowKey::Other => f.write_str("(other)"),
            RowKey::Keys(keys) => {
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    let plain = !k.is_empty()
                        && k != "(all)"
                        && k != "(other)"
                        && !k.contains(|c: char| {
                            matches!(c, ',' | '(' | ')' | '"' | '\\') || c.is_whitespace()
                        });
                    if plain {
                        f.write_str(k)?;
                    } else {
                        f.write_str("\"")?;
                        for c in k.chars() {
                            if matches!(c, '"' | '\\') {
                                f.write_str("\\")?;
                            }
                            write!(f, "{c}")?;
                        }
                        f.write_str("\"")?;
                    }
                }
                Ok(())
            }
        }
    }
}

impl RowKey {
    /// Parses a `ROW` of the module doc: `(all)`, `(other)`, or keys joined
    /// by `,`, each plain or in double quotes.
    pub(crate) fn parse(text: &str) -> Result<RowKey, String> {
        match text {
            "(all)" => return Ok(RowKey::All),
            "(other)" => return Ok(RowKey::Other),
            "" => {
                return Err(
                    "the row key is empty: write its keys joined by `,`, or `(all)`".into(),
                );
            }
            _ => {}
        }
        let mut keys = Vec::new();
        let mut chars = text.chars().peekable();
        loop {
            let mut key = String::new();
            if chars.peek() == Some(&'"') {
                chars.next();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => key.push(c),
                            _ => {
                                return Err(format!(
                                    "`{text}`: inside quotes, `\\` escapes only `\"` and `\\`"
                                ));
                            }
                        },
                        Some(c) => key.push(c),
                        None => return Err(format!("`{text}`: a quoted key is not closed")),
                    }
                }
                if !matches!(chars.peek(), None | Some(',')) {
                    return Err(format!("`{text}`: expected `,` after a quoted key"));
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c == ',' {
                        break;
                    }
                    if c == '"' || c.is_whitespace() {
                        return Err(format!(
                            "`{text}`: a key holding `\"` or whitespace is written in double quotes"
                        ));
                    }
                    key.push(c);
                    chars.next();
                }
            }
            keys.push(key);
            if chars.next().is_none() {
                return Ok(RowKey::Keys(keys));
            }
        }
    }
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
            Metric::Answer(c) => match c.of {
                CellOf::Count | CellOf::Value(_) => Kind::Count,
                CellOf::Latency(_) | CellOf::Mean => Kind::Duration,
            },
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
        self.metric.kind() == Kind::Duration
    }

    /// The expression with `count(NAME:ROW)` and `pNN|max(NAME:ROW)` read as
    /// cells of the answer `NAME` wherever `is_answer(NAME)` (an answer's name
    /// wins over an event system or latency analysis of the same name), on
    /// both sides. Errors: a `ROW` that does not parse, at its place.
    pub(crate) fn with_answers(
        mut self,
        is_answer: impl Fn(&str) -> bool,
    ) -> Result<Expr, ExprError> {
        let resolve = |metric: &mut Metric, span: &Range<usize>| -> Result<(), ExprError> {
            let cell = match metric {
                Metric::Count(arg) => match arg.split_once(':') {
                    Some((name, row)) if is_answer(name) => {
                        let row = RowKey::parse(row).map_err(|message| ExprError {
                            message,
                            span: span.start + name.len() + 1..span.end,
                        })?;
                        AnswerCell {
                            answer: name.to_string(),
                            of: CellOf::Count,
                            row,
                        }
                    }
                    _ => return Ok(()),
                },
                Metric::Latency {
                    stat,
                    analysis,
                    key,
                } if is_answer(analysis) => AnswerCell {
                    answer: analysis.clone(),
                    of: CellOf::Latency(stat.latency_stat()),
                    row: RowKey::parse(key).map_err(|message| ExprError {
                        message,
                        span: span.start + analysis.len() + 1..span.end,
                    })?,
                },
                _ => return Ok(()),
            };
            *metric = Metric::Answer(cell);
            Ok(())
        };
        resolve(&mut self.metric, &self.metric_span)?;
        if let Value::Measure { metric, span, .. } = &mut self.value {
            resolve(metric, span)?;
        }
        Ok(self)
    }
}

impl Stat {
    /// The same statistic of an answer's `latency` column.
    fn latency_stat(self) -> LatencyStat {
        match self {
            Stat::P50 => LatencyStat::P50,
            Stat::P90 => LatencyStat::P90,
            Stat::P99 => LatencyStat::P99,
            Stat::Max => LatencyStat::Max,
        }
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
        // The `)` that balances the `(`: group keys such as `(all)` hold
        // parentheses, and a quoted key anything.
        let Some(close) = closing_paren(text, arg_start) else {
            return err("missing `)`", j..text.len());
        };
        let arg = text[arg_start..close].trim_end();
        let arg_span = arg_start..arg_start + arg.len();
        let Some((left, right)) = arg.split_once(':') else {
            return err(
                format!("expected `SYSTEM:EVENT`, `ANALYSIS:KEY` or `ANSWER:ROW` in `{name}(...)`"),
                arg_span,
            );
        };
        if left.is_empty() || right.is_empty() || has_unquoted_space(arg) {
            return err(format!("`{arg}` is not `NAME:NAME`"), arg_span);
        }
        let key_span = arg_start + left.len() + 1..arg_span.end;
        // `NAME.FIELD`: a value column of an answer.
        let (answer, field) = match left.split_once('.') {
            Some((answer, field)) => {
                let field = field.parse::<FieldRef>().map_err(|message| ExprError {
                    message,
                    span: arg_start + answer.len() + 1..arg_start + left.len(),
                })?;
                (answer, Some(field))
            }
            None => (left, None),
        };
        let cell = |of: CellOf| -> Result<Metric, ExprError> {
            Ok(Metric::Answer(AnswerCell {
                answer: answer.to_string(),
                of,
                row: RowKey::parse(right).map_err(|message| ExprError {
                    message,
                    span: key_span.clone(),
                })?,
            }))
        };
        let stat = |s: LatencyStat| match s {
            LatencyStat::P50 => Some(Stat::P50),
            LatencyStat::P90 => Some(Stat::P90),
            LatencyStat::P99 => Some(Stat::P99),
            LatencyStat::Max => Some(Stat::Max),
            LatencyStat::Min | LatencyStat::Total => None,
        };
        let latency = LatencyStat::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(s, _)| *s);
        let metric = match (name, field) {
            ("hist", _) => match right.rsplit_once(':') {
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
            ("count", None) => Metric::Count(arg.to_string()),
            ("rate", None) => Metric::Rate(arg.to_string()),
            ("sum", Some(f)) => cell(CellOf::Value(AnswerValue::Sum(f)))?,
            ("min", Some(f)) => cell(CellOf::Value(AnswerValue::Min(f)))?,
            ("max", Some(f)) => cell(CellOf::Value(AnswerValue::Max(f)))?,
            ("avg", Some(f)) => cell(CellOf::Value(AnswerValue::Avg(f)))?,
            ("mean", None) => cell(CellOf::Mean)?,
            (_, None) if latency.is_some() => match latency.and_then(stat) {
                Some(stat) if LATENCY_ANALYSES.contains(&left) => Metric::Latency {
                    stat,
                    analysis: left.to_string(),
                    key: right.to_string(),
                },
                _ => cell(CellOf::Latency(latency.unwrap_or(LatencyStat::P50)))?,
            },
            ("count" | "rate" | "p50" | "p90" | "p99" | "total" | "mean", Some(_)) => {
                return err(
                    format!("`{name}` takes no field: write `{name}(NAME:ROW)`"),
                    arg_span,
                );
            }
            ("sum" | "avg", None) => {
                return err(
                    format!(
                        "`{name}` is of an answer's field: write `{name}(NAME.FIELD:ROW)`, e.g. `{name}(reads.count:bash)`"
                    ),
                    arg_span,
                );
            }
            (other, _) => {
                return err(
                    format!(
                        "unknown measure `{other}`: use count, rate, lost_events, max_latency, max_stack, hist, p50, p90, p99, min, max, total, mean, sum or avg"
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

/// The `)` closing a metric's `(`, its argument starting at `start`: nested
/// parentheses balance, and a double-quoted part (with `\"` and `\\`
/// escapes) is skipped.
fn closing_paren(text: &str, start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut quoted = false;
    let mut escaped = false;
    for (k, c) in text[start..].char_indices() {
        match (quoted, c) {
            (true, _) if escaped => escaped = false,
            (true, '\\') => escaped = true,
            (_, '"') => quoted = !quoted,
            (true, _) => {}
            (false, '(') => depth += 1,
            (false, ')') if depth == 0 => return Some(start + k),
            (false, ')') => depth -= 1,
            (false, _) => {}
        }
    }
    None
}

/// Whether `arg` has whitespace outside double quotes.
fn has_unquoted_space(arg: &str) -> bool {
    let mut quoted = false;
    let mut escaped = false;
    arg.chars().any(|c| {
        match (quoted, c) {
            (true, _) if escaped => escaped = false,
            (true, '\\') => escaped = true,
            (_, '"') => quoted = !quoted,
            (false, c) if c.is_whitespace() => return true,
            _ => {}
        }
        false
    })
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
    let is_latency = metric.kind() == Kind::Duration;
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
                    Metric::Answer(_) => "answer's count or field value",
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
        let e = bad("sum(reads:bash) < 2", Context::Expect);
        assert!(e.message.contains("`sum(NAME.FIELD:ROW)`"), "{e}");
        assert_eq!(e.span, 4..14);
        let e = bad("p99(reads.len:bash) < 2ms", Context::Expect);
        assert!(e.message.contains("`p99` takes no field"), "{e}");
        let e = bad("count(reads:\"a b) > 1", Context::Expect);
        assert!(e.message.contains("missing `)`"), "{e}");
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
    }

    #[test]
    fn answer_cells_by_value_and_row() {
        let cell = |t: &str| match Expr::parse(t, Context::Expect)
            .and_then(|e| e.with_answers(|n| n == "reads" || n == "syscalls"))
        {
            Ok(Expr {
                metric: Metric::Answer(c),
                ..
            }) => c,
            other => panic!("{t}: {other:?}"),
        };
        let keys = |k: &[&str]| RowKey::Keys(k.iter().map(|s| s.to_string()).collect());
        let c = cell("count(reads:bash,-ENOENT) >= 3");
        assert_eq!(
            (c.answer.as_str(), &c.of, &c.row),
            ("reads", &CellOf::Count, &keys(&["bash", "-ENOENT"]))
        );
        assert_eq!(
            cell("p99(reads:(all)) < 1ms").of,
            CellOf::Latency(LatencyStat::P99)
        );
        assert_eq!(cell("p99(reads:(all)) < 1ms").row, RowKey::All);
        assert_eq!(cell("total(reads:(other)) < 1s").row, RowKey::Other);
        assert_eq!(cell("mean(reads:x) < 1s").of, CellOf::Mean);
        assert_eq!(
            cell("min(reads.from.len:x) > 0").of,
            CellOf::Value("min(from.len)".parse().unwrap())
        );
        assert_eq!(
            cell("min(reads:x) > 1ns").of,
            CellOf::Latency(LatencyStat::Min)
        );
        assert_eq!(
            cell("avg(reads.len:x) > 0").of,
            CellOf::Value("avg(len)".parse().unwrap())
        );
        // An answer's name wins over a latency analysis of the same name.
        assert_eq!(cell("max(syscalls:openat) < 1ms").answer, "syscalls");
        // A quoted key holds what a plain one cannot.
        let c = cell(r#"count(reads:"Web Content","a,b(\"c\")") > 0"#);
        assert_eq!(c.row, keys(&["Web Content", r#"a,b("c")"#]));
        assert_eq!(c.row.to_string(), r#""Web Content","a,b(\"c\")""#);
        assert_eq!(RowKey::parse(&c.row.to_string()), Ok(c.row));
        // Not an answer: an event and a latency analysis, as before.
        let e = ok("count(sched:x) > 1")
            .with_answers(|n| n == "reads")
            .unwrap();
        assert_eq!(e.metric, Metric::Count("sched:x".into()));
        let e = ok("p99(wakeup:x) < 1ms").with_answers(|_| false).unwrap();
        assert!(matches!(e.metric, Metric::Latency { .. }), "{e:?}");
        // An unknown analysis is an answer's name for `check` to judge.
        let e = ok("p99(nosuch:x) < 1ms");
        assert!(
            matches!(e.metric, Metric::Answer(ref c) if c.answer == "nosuch"),
            "{e:?}"
        );
        for bad_row in [
            r#"count(reads:"a) > 1"#,
            r#"count(reads:"a"b) > 1"#,
            "count(reads:a,\"b) > 1",
        ] {
            assert!(
                Expr::parse(bad_row, Context::Expect)
                    .and_then(|e| e.with_answers(|n| n == "reads"))
                    .is_err(),
                "{bad_row}"
            );
        }
        // Durations and counts do not mix.
        assert!(Expr::parse("p99(reads:x) < count(reads:x)", Context::Expect).is_err());
        assert!(Expr::parse("count(reads:x) < 2ms", Context::Expect).is_err());
    }
}
