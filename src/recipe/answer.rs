//! `[[answer]]` (recipe-format 1.3): a table the recipe promises to answer
//! with, and the typed items of its `by`, `values` and `sort`.
//!
//! The items are parsed when the recipe is (a wrong item is a type error at
//! its own line:col, with the accepted forms), so nothing downstream handles
//! them as strings. Which events and fields they name is checked against the
//! kernel by `validate::answer`.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `[[answer]]`: one table, computed by the kernel's hist triggers where it
/// has them (and `engine` allows), else from trace.dat.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Answer {
    /// `[a-z0-9_]+`, unique among the recipe's answers: report.json
    /// `answers.NAME`, and `count(NAME:KEY)` in `[[expect]]`.
    pub(crate) name: String,
    /// The heading of the table in summary.txt and report.html.
    pub(crate) question: Option<String>,
    /// One event, aggregated (`"system:event"`); or use `from`/`to`.
    pub(crate) event: Option<String>,
    /// A span's start event: from it to the next `to` event of the same match key.
    pub(crate) from: Option<String>,
    /// A span's end event; `by`, `values` and `where` name its fields.
    pub(crate) to: Option<String>,
    /// Fields equal on both ends of a span (default `["common_pid"]`); e.g.
    /// `["dev", "sector"]` for block_rq_issue -> block_rq_complete.
    #[serde(rename = "match")]
    pub(crate) match_fields: Option<Vec<String>>,
    /// Group rows by: a field of the event (the `to` event of a span) or
    /// `from.FIELD`; `common_comm`, `common_pid`, `cpu`, `stack`;
    /// `errno(F)`, `syscall(F)`, `sym(F)`, `log2(F)` of a field F.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub(crate) by: Vec<AnswerBy>,
    /// The columns: `count`, `sum(F)`, `min(F)`, `max(F)`, `avg(F)`,
    /// `latency` (spans: min, p50, p90, p99, max, total and a power-of-two
    /// histogram). Default `["count"]`, and `["count", "latency"]` for a span.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub(crate) values: Vec<AnswerValue>,
    /// A filter in the recipe's filter syntax on the event (the `to` event of a span).
    #[serde(rename = "where")]
    pub(crate) filter: Option<String>,
    /// A value name (`count`, `sum(bytes)`, `p99`, ...), `-` first for
    /// descending; default the first value, descending.
    #[schemars(with = "Option<String>")]
    pub(crate) sort: Option<AnswerSort>,
    /// Rows kept; the rest are summed into one `(other)` row. Default 20.
    pub(crate) top: Option<u32>,
    /// `auto` (default): hist triggers where the kernel has them and the
    /// answer can be computed there, else from trace.dat; `kernel`: hist
    /// triggers or refuse; `trace`: from trace.dat.
    #[serde(default)]
    pub(crate) engine: AnswerEngine,
}

impl Answer {
    /// Whether the answer is a span (`from`/`to`) rather than one event.
    pub(crate) fn is_span(&self) -> bool {
        self.from.is_some() || self.to.is_some()
    }

    /// `values`, or its default: `count`, and `latency` for a span.
    pub(crate) fn values_or_default(&self) -> Vec<AnswerValue> {
        match (self.values.is_empty(), self.is_span()) {
            (false, _) => self.values.clone(),
            (true, false) => vec![AnswerValue::Count],
            (true, true) => vec![AnswerValue::Count, AnswerValue::Latency],
        }
    }

    /// `match`, or its default `["common_pid"]`.
    pub(crate) fn match_or_default(&self) -> Vec<String> {
        self.match_fields
            .clone()
            .unwrap_or_else(|| vec!["common_pid".to_string()])
    }
}

/// `engine`: where an answer is computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum AnswerEngine {
    /// The kernel's hist triggers where it has them and the answer can be
    /// computed there; else trace.dat.
    #[default]
    Auto,
    /// The kernel's hist triggers; `check` refuses the recipe where they are
    /// missing or cannot compute the answer.
    Kernel,
    /// The pass over trace.dat after the run.
    Trace,
}

/// A field named by an answer: of the event (the `to` event of a span), or
/// of a span's `from` event (`from.FIELD`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct FieldRef {
    /// `from.FIELD`: a field of the span's start event.
    pub(crate) from: bool,
    /// The field's name in the event's format.
    pub(crate) name: String,
}

impl fmt::Display for FieldRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.from {
            f.write_str("from.")?;
        }
        f.write_str(&self.name)
    }
}

impl FromStr for FieldRef {
    type Err = String;
    fn from_str(text: &str) -> Result<FieldRef, String> {
        let (from, name) = match text.strip_prefix("from.") {
            Some(n) => (true, n),
            None => (false, text),
        };
        let ok = !name.is_empty()
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.as_bytes()[0].is_ascii_digit();
        if !ok {
            return Err(format!("`{text}` is not a field name"));
        }
        Ok(FieldRef {
            from,
            name: name.to_string(),
        })
    }
}

/// One `by` item: what rows are grouped by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum AnswerBy {
    /// `common_comm`: the name of the task that hit the event.
    Comm,
    /// `common_pid`: the task that hit the event.
    Pid,
    /// `cpu`: the CPU the event fired on.
    Cpu,
    /// `stack`: the kernel stack of the event.
    Stack,
    /// A field's value (a string as is, a number in decimal).
    Field(FieldRef),
    /// `errno(F)`: a return value, its errno name when negative (`-ENOENT`).
    Errno(FieldRef),
    /// `syscall(F)`: a syscall number, by its name.
    Syscall(FieldRef),
    /// `sym(F)`: a kernel address, by its symbol.
    Sym(FieldRef),
    /// `log2(F)`: a number's power-of-two bucket.
    Log2(FieldRef),
}

impl AnswerBy {
    /// The field the item reads, if it reads one.
    pub(crate) fn field(&self) -> Option<&FieldRef> {
        match self {
            AnswerBy::Comm | AnswerBy::Pid | AnswerBy::Cpu | AnswerBy::Stack => None,
            AnswerBy::Field(f)
            | AnswerBy::Errno(f)
            | AnswerBy::Syscall(f)
            | AnswerBy::Sym(f)
            | AnswerBy::Log2(f) => Some(f),
        }
    }
}

/// What a `by` item may be, for messages.
const BY_FORMS: &str = "a field (`prev_comm`, or `from.FIELD` in a span), `common_comm`, `common_pid`, `cpu`, `stack`, `errno(F)`, `syscall(F)`, `sym(F)` or `log2(F)`";

/// `NAME(ARG)` split into its name and argument.
fn call(text: &str) -> Option<(&str, &str)> {
    let (name, rest) = text.split_once('(')?;
    Some((name.trim(), rest.strip_suffix(')')?.trim()))
}

impl FromStr for AnswerBy {
    type Err = String;
    fn from_str(text: &str) -> Result<AnswerBy, String> {
        let text = text.trim();
        let by = match text {
            "common_comm" => AnswerBy::Comm,
            "common_pid" => AnswerBy::Pid,
            "cpu" | "common_cpu" => AnswerBy::Cpu,
            "stack" => AnswerBy::Stack,
            _ => match call(text) {
                Some((name, arg)) => {
                    let f = arg.parse::<FieldRef>()?;
                    match name {
                        "errno" => AnswerBy::Errno(f),
                        "syscall" => AnswerBy::Syscall(f),
                        "sym" => AnswerBy::Sym(f),
                        "log2" => AnswerBy::Log2(f),
                        _ => {
                            return Err(format!(
                                "`{name}(...)` is not a `by` function: `by` takes {BY_FORMS}"
                            ));
                        }
                    }
                }
                None => AnswerBy::Field(
                    text.parse()
                        .map_err(|e| format!("{e}: `by` takes {BY_FORMS}"))?,
                ),
            },
        };
        Ok(by)
    }
}

impl fmt::Display for AnswerBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnswerBy::Comm => f.write_str("common_comm"),
            AnswerBy::Pid => f.write_str("common_pid"),
            AnswerBy::Cpu => f.write_str("cpu"),
            AnswerBy::Stack => f.write_str("stack"),
            AnswerBy::Field(x) => write!(f, "{x}"),
            AnswerBy::Errno(x) => write!(f, "errno({x})"),
            AnswerBy::Syscall(x) => write!(f, "syscall({x})"),
            AnswerBy::Sym(x) => write!(f, "sym({x})"),
            AnswerBy::Log2(x) => write!(f, "log2({x})"),
        }
    }
}

/// One `values` item: a column of the table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum AnswerValue {
    /// `count`: events (spans) per row.
    Count,
    /// `sum(F)`.
    Sum(FieldRef),
    /// `min(F)`.
    Min(FieldRef),
    /// `max(F)`.
    Max(FieldRef),
    /// `avg(F)`: `sum(F) / count`.
    Avg(FieldRef),
    /// `latency` (spans only): the span's duration, as min, p50, p90, p99,
    /// max, total and a power-of-two histogram.
    Latency,
}

/// What a `values` item may be, for messages.
const VALUE_FORMS: &str = "`count`, `sum(F)`, `min(F)`, `max(F)`, `avg(F)` or `latency` (spans)";

impl FromStr for AnswerValue {
    type Err = String;
    fn from_str(text: &str) -> Result<AnswerValue, String> {
        let text = text.trim();
        match text {
            "count" => return Ok(AnswerValue::Count),
            "latency" => return Ok(AnswerValue::Latency),
            _ => {}
        }
        let Some((name, arg)) = call(text) else {
            return Err(format!(
                "`{text}` is not a value: `values` takes {VALUE_FORMS}"
            ));
        };
        let f = arg.parse::<FieldRef>()?;
        Ok(match name {
            "sum" => AnswerValue::Sum(f),
            "min" => AnswerValue::Min(f),
            "max" => AnswerValue::Max(f),
            "avg" => AnswerValue::Avg(f),
            _ => {
                return Err(format!(
                    "`{name}(...)` is not a value function: `values` takes {VALUE_FORMS}"
                ));
            }
        })
    }
}

impl fmt::Display for AnswerValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnswerValue::Count => f.write_str("count"),
            AnswerValue::Latency => f.write_str("latency"),
            AnswerValue::Sum(x) => write!(f, "sum({x})"),
            AnswerValue::Min(x) => write!(f, "min({x})"),
            AnswerValue::Max(x) => write!(f, "max({x})"),
            AnswerValue::Avg(x) => write!(f, "avg({x})"),
        }
    }
}

/// A statistic of `latency` a table can be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum LatencyStat {
    /// `min`.
    Min,
    /// `p50`.
    P50,
    /// `p90`.
    P90,
    /// `p99`.
    P99,
    /// `max`.
    Max,
    /// `total`: the spans' durations summed.
    Total,
}

impl LatencyStat {
    /// Every statistic, with its name.
    pub(crate) const ALL: [(LatencyStat, &'static str); 6] = [
        (LatencyStat::Min, "min"),
        (LatencyStat::P50, "p50"),
        (LatencyStat::P90, "p90"),
        (LatencyStat::P99, "p99"),
        (LatencyStat::Max, "max"),
        (LatencyStat::Total, "total"),
    ];

    /// Its name (`p99`).
    pub(crate) fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(s, _)| *s == self)
            .map_or("?", |(_, n)| n)
    }
}

/// What `sort` names: a value, or a statistic of `latency`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SortKey {
    /// One of the answer's `values` (not `latency`, which sorts by a statistic).
    Value(AnswerValue),
    /// A statistic of the answer's `latency` (`p99`; `latency` alone is `p50`).
    Latency(LatencyStat),
}

/// `sort`: the column rows are ordered by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AnswerSort {
    /// The column.
    pub(crate) key: SortKey,
    /// Written with a leading `-`: largest first.
    pub(crate) descending: bool,
}

impl FromStr for AnswerSort {
    type Err = String;
    fn from_str(text: &str) -> Result<AnswerSort, String> {
        let text = text.trim();
        let (descending, name) = match text.strip_prefix('-') {
            Some(n) => (true, n.trim()),
            None => (false, text),
        };
        let key = match LatencyStat::ALL.iter().find(|(_, n)| *n == name) {
            Some((s, _)) => SortKey::Latency(*s),
            None => match name.parse::<AnswerValue>() {
                Ok(AnswerValue::Latency) => SortKey::Latency(LatencyStat::P50),
                Ok(v) => SortKey::Value(v),
                Err(_) => {
                    return Err(format!(
                        "`{text}` names no value: `sort` takes one of the answer's values (`count`, `sum(F)`, ...) or a latency statistic (min, p50, p90, p99, max, total), with `-` first for descending"
                    ));
                }
            },
        };
        Ok(AnswerSort { key, descending })
    }
}

impl fmt::Display for AnswerSort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.descending {
            f.write_str("-")?;
        }
        match &self.key {
            SortKey::Value(v) => write!(f, "{v}"),
            SortKey::Latency(s) => f.write_str(s.name()),
        }
    }
}

/// Serde as a string through `Display` / `FromStr`.
macro_rules! serde_as_string {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    )*};
}
serde_as_string!(AnswerBy, AnswerValue, AnswerSort);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_items_parse_into_their_kinds_and_print_back() {
        let cases = [
            ("common_comm", AnswerBy::Comm),
            ("common_pid", AnswerBy::Pid),
            ("cpu", AnswerBy::Cpu),
            ("stack", AnswerBy::Stack),
            (
                "prev_comm",
                AnswerBy::Field(FieldRef {
                    from: false,
                    name: "prev_comm".into(),
                }),
            ),
            (
                "errno(ret)",
                AnswerBy::Errno(FieldRef {
                    from: false,
                    name: "ret".into(),
                }),
            ),
            (
                "sym(from.call_site)",
                AnswerBy::Sym(FieldRef {
                    from: true,
                    name: "call_site".into(),
                }),
            ),
        ];
        for (text, want) in cases {
            let got: AnswerBy = text.parse().unwrap();
            assert_eq!(got, want, "{text}");
            assert_eq!(got.to_string(), text);
        }
        assert!("log3(x)".parse::<AnswerBy>().unwrap_err().contains("log3"));
        assert!("a b".parse::<AnswerBy>().is_err());
        assert!("errno(1x)".parse::<AnswerBy>().is_err());
    }

    #[test]
    fn values_and_sort_parse() {
        assert_eq!("count".parse::<AnswerValue>().unwrap(), AnswerValue::Count);
        assert_eq!(
            "avg(bytes)".parse::<AnswerValue>().unwrap().to_string(),
            "avg(bytes)"
        );
        assert!("median(x)".parse::<AnswerValue>().is_err());
        let s: AnswerSort = "-p99".parse().unwrap();
        assert_eq!(
            (s.key, s.descending),
            (SortKey::Latency(LatencyStat::P99), true)
        );
        let s: AnswerSort = "sum(len)".parse().unwrap();
        assert!(!s.descending);
        assert_eq!(s.to_string(), "sum(len)");
        assert!("-nothing".parse::<AnswerSort>().is_err());
    }
}
