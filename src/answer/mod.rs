//! Answers (`[[answer]]`, recipe-format 1.3): the table an answer produces,
//! the same shape whichever engine computed it.
//!
//! - [`AnswerTable`] is report.json `answers.NAME`: rows of the `by` keys and
//!   the `values`, sorted and cut to `top`, the rest summed into `other`, all of
//!   them summed into `total`. The kernel engine ([`kernel`]: hist triggers,
//!   read back from the `hist` files before rollback) and the trace engine (the
//!   pass over trace.dat) both build it with [`TableBuilder`], so that the two
//!   compare cell by cell.
//! - Keys are display strings, one per `by` item, written the same way by both
//!   engines: strings as they are; numbers in decimal, signed as the field is;
//!   `errno(F)` the errno name of a negative value (`-ENOENT`) and the number
//!   otherwise; `syscall(F)` the syscall's name in the ABI's table of the
//!   kernel's machine (`read`; `sendfile` where the kernel's function is
//!   `sys_sendfile64`), `NR n` when unknown; `sym(F)` the function's name
//!   without offset or module; `log2(F)` the power-of-two
//!   bucket as `2^k` (values in `(2^(k-1), 2^k]`, the kernel's `.log2`:
//!   `ilog2(roundup_pow_of_two(v))`); `common_comm` the task's name;
//!   `common_pid` and `cpu` decimal; `stack` the frames by function, joined
//!   by `;`, outermost first (as stacks.folded), at most the innermost 16 (a
//!   hist key's) past ftrace's own frames.
//! - Latencies are microseconds: the kernel measures a span as the
//!   difference of the two events' `common_timestamp.usecs` (each timestamp
//!   rounded to whole microseconds, `ns2usecs`), and its histogram buckets
//!   are the `.log2` of that; the trace engine buckets alike so that both
//!   histograms are equal.

pub(crate) mod kernel;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::recipe::{AnswerSort, AnswerValue, LatencyStat, SortKey};

/// Rows an answer keeps when its recipe gives no `top`.
pub(crate) const DEFAULT_TOP: usize = 20;

/// Which engine computed a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EngineUsed {
    /// The kernel's hist triggers, read back from their `hist` files.
    Kernel,
    /// The pass over trace.dat.
    Trace,
}

/// report.json `answers.NAME`: one answer's table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct AnswerTable {
    /// The answer's `question`, the table's heading.
    pub(crate) question: Option<String>,
    /// The engine that computed it.
    pub(crate) engine: EngineUsed,
    /// The `by` items as the recipe writes them: the key columns.
    pub(crate) keys: Vec<String>,
    /// The `values` items as the recipe writes them: the value columns.
    pub(crate) values: Vec<String>,
    /// The rows kept (at most `top`), in `sort` order.
    pub(crate) rows: Vec<AnswerRow>,
    /// The rows past `top`, summed (empty keys); `None` when every row is kept.
    pub(crate) other: Option<AnswerRow>,
    /// Every row summed (empty keys).
    pub(crate) total: AnswerRow,
    /// Events the table could not count: the kernel's table was full
    /// (`Dropped:`), or the trace engine's key cap was reached.
    pub(crate) dropped: u64,
    /// What is approximate about the table and why (e.g. percentiles from
    /// power-of-two buckets), one sentence each.
    pub(crate) notes: Vec<String>,
}

/// One row: its keys (one per `by` item) and its cells (one per `values` item).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct AnswerRow {
    /// The `by` keys, in the display form of the module doc.
    pub(crate) keys: Vec<String>,
    /// Events (one-event answer) or spans (span) of the row.
    pub(crate) count: u64,
    /// One cell per `values` item, in order.
    pub(crate) cells: Vec<Cell>,
}

/// One value of a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Cell {
    /// `count`, `sum(F)`, `min(F)`, `max(F)`: a whole number.
    Int(i64),
    /// `avg(F)`.
    Float(f64),
    /// `latency`.
    Latency(Latency),
    /// No value (a `min(F)` of a row that saw no event with F).
    None,
}

/// A span's duration over the spans of a row, in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct Latency {
    /// Shortest span.
    pub(crate) min_us: f64,
    /// Median.
    pub(crate) p50_us: f64,
    /// 90th percentile.
    pub(crate) p90_us: f64,
    /// 99th percentile.
    pub(crate) p99_us: f64,
    /// Longest span.
    pub(crate) max_us: f64,
    /// Every span's duration summed.
    pub(crate) total_us: f64,
    /// Whether min, percentiles and max are exact; `false` when they come
    /// from the power-of-two buckets (each the upper bound of the bucket the
    /// rank falls in).
    pub(crate) exact: bool,
    /// Spans per power-of-two bucket, by `log2`, ascending.
    pub(crate) buckets: Vec<Bucket>,
}

/// One power-of-two bucket of a latency histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct Bucket {
    /// `k`: spans of `d` µs with `ilog2(roundup_pow_of_two(d)) == k`, i.e.
    /// `d` in `(2^(k-1), 2^k]` (0 and 1 µs in bucket 0).
    pub(crate) log2: u32,
    /// Spans in it.
    pub(crate) count: u64,
}

/// The bucket of a duration of `us` microseconds, as the kernel's `.log2`
/// (for the trace engine, to bucket as the kernel does).
pub(crate) fn log2_bucket(us: u64) -> u32 {
    if us <= 1 {
        0
    } else {
        u64::BITS - (us - 1).leading_zeros()
    }
}

impl Latency {
    /// The latency of spans known only by their buckets and their summed
    /// duration `total_us`: min, percentiles and max are the upper bounds
    /// of the buckets their rank falls in (approximate, `exact: false`).
    pub(crate) fn from_buckets(mut buckets: Vec<Bucket>, total_us: f64) -> Option<Latency> {
        buckets.retain(|b| b.count > 0);
        buckets.sort_by_key(|b| b.log2);
        let n: u64 = buckets.iter().map(|b| b.count).sum();
        if n == 0 {
            return None;
        }
        let upper = |k: u32| 2f64.powi(k as i32);
        let at = |q: f64| {
            // The rank of the q-quantile, 1-based (nearest rank).
            let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
            let mut seen = 0;
            for b in &buckets {
                seen += b.count;
                if seen >= rank {
                    return upper(b.log2);
                }
            }
            upper(buckets.last().map_or(0, |b| b.log2))
        };
        Some(Latency {
            min_us: upper(buckets[0].log2),
            p50_us: at(0.50),
            p90_us: at(0.90),
            p99_us: at(0.99),
            max_us: at(1.0),
            total_us,
            exact: false,
            buckets,
        })
    }

    /// The statistic `s`.
    pub(crate) fn stat(&self, s: LatencyStat) -> f64 {
        match s {
            LatencyStat::Min => self.min_us,
            LatencyStat::P50 => self.p50_us,
            LatencyStat::P90 => self.p90_us,
            LatencyStat::P99 => self.p99_us,
            LatencyStat::Max => self.max_us,
            LatencyStat::Total => self.total_us,
        }
    }

    /// Two rows' latencies as one: buckets and totals add; min and max are
    /// kept when both are exact, and percentiles come from the buckets.
    fn merge(&self, other: &Latency) -> Latency {
        let mut buckets = self.buckets.clone();
        for b in &other.buckets {
            match buckets.iter_mut().find(|x| x.log2 == b.log2) {
                Some(x) => x.count += b.count,
                None => buckets.push(*b),
            }
        }
        let mut out = Latency::from_buckets(buckets, self.total_us + other.total_us)
            .unwrap_or_else(|| self.clone());
        if self.exact && other.exact {
            out.min_us = self.min_us.min(other.min_us);
            out.max_us = self.max_us.max(other.max_us);
        }
        out
    }
}

/// Builds an [`AnswerTable`] from rows in any order, merging rows whose keys
/// are equal, then sorting, cutting to `top` and summing `other` and `total`.
#[derive(Debug)]
pub(crate) struct TableBuilder {
    /// The `values` items, in order: how each cell merges.
    values: Vec<AnswerValue>,
    /// Rows by keys, in the order first seen.
    rows: indexmap::IndexMap<Vec<String>, AnswerRow>,
}

impl TableBuilder {
    /// An empty table of columns `values`.
    pub(crate) fn new(values: &[AnswerValue]) -> TableBuilder {
        TableBuilder {
            values: values.to_vec(),
            rows: Default::default(),
        }
    }

    /// Adds `row` (cells in the order of `values`), merged into the row of
    /// the same keys if there is one.
    pub(crate) fn add(&mut self, row: AnswerRow) {
        match self.rows.get_mut(&row.keys) {
            Some(old) => *old = merge_rows(&self.values, old, &row),
            None => {
                self.rows.insert(row.keys.clone(), row);
            }
        }
    }

    /// The table: rows sorted by `sort` (default: the first value,
    /// descending; ties by keys), the first `top` kept.
    pub(crate) fn finish(
        self,
        sort: Option<&AnswerSort>,
        top: usize,
        head: TableHead,
    ) -> AnswerTable {
        let values = self.values;
        let mut rows: Vec<AnswerRow> = self.rows.into_values().collect();
        let (column, stat, descending) = sort_column(&values, sort);
        rows.sort_by(|a, b| {
            let (x, y) = (sort_value(a, column, stat), sort_value(b, column, stat));
            let order = x.total_cmp(&y);
            let order = if descending { order.reverse() } else { order };
            order.then_with(|| a.keys.cmp(&b.keys))
        });
        let empty = AnswerRow {
            keys: Vec::new(),
            count: 0,
            cells: values.iter().map(|_| Cell::None).collect(),
        };
        let sum = |rows: &[AnswerRow]| {
            rows.iter().fold(empty.clone(), |acc, r| {
                let mut m = merge_rows(&values, &acc, r);
                m.keys.clear();
                m
            })
        };
        let total = sum(&rows);
        let other = (rows.len() > top).then(|| sum(&rows[top..]));
        rows.truncate(top);
        AnswerTable {
            question: head.question,
            engine: head.engine,
            keys: head.keys,
            values: values.iter().map(ToString::to_string).collect(),
            rows,
            other,
            total,
            dropped: head.dropped,
            notes: head.notes,
        }
    }
}

/// What an [`AnswerTable`] says besides its rows.
#[derive(Debug, Clone)]
pub(crate) struct TableHead {
    /// The answer's `question`.
    pub(crate) question: Option<String>,
    /// The engine.
    pub(crate) engine: EngineUsed,
    /// The `by` items as written.
    pub(crate) keys: Vec<String>,
    /// Events not counted.
    pub(crate) dropped: u64,
    /// What is approximate, and why.
    pub(crate) notes: Vec<String>,
}

/// The column index, latency statistic and direction rows sort by.
fn sort_column(
    values: &[AnswerValue],
    sort: Option<&AnswerSort>,
) -> (Option<usize>, LatencyStat, bool) {
    let Some(sort) = sort else {
        let stat = LatencyStat::P50;
        return ((!values.is_empty()).then_some(0), stat, true);
    };
    match &sort.key {
        SortKey::Value(v) => (
            values.iter().position(|x| x == v),
            LatencyStat::P50,
            sort.descending,
        ),
        SortKey::Latency(s) => (
            values.iter().position(|x| *x == AnswerValue::Latency),
            *s,
            sort.descending,
        ),
    }
}

/// The number row `r` sorts by.
fn sort_value(r: &AnswerRow, column: Option<usize>, stat: LatencyStat) -> f64 {
    match column.and_then(|c| r.cells.get(c)) {
        Some(Cell::Int(n)) => *n as f64,
        Some(Cell::Float(f)) => *f,
        Some(Cell::Latency(l)) => l.stat(stat),
        Some(Cell::None) => f64::NEG_INFINITY,
        None => r.count as f64,
    }
}

/// Rows `a` and `b` as one (keys of `a`): counts and sums add, min and max
/// keep the extreme, an average is weighted by the counts.
fn merge_rows(values: &[AnswerValue], a: &AnswerRow, b: &AnswerRow) -> AnswerRow {
    let count = a.count + b.count;
    let cells = values
        .iter()
        .zip(a.cells.iter().zip(&b.cells))
        .map(|(v, pair)| match (v, pair) {
            (_, (Cell::None, x) | (x, Cell::None)) => x.clone(),
            (AnswerValue::Count | AnswerValue::Sum(_), (Cell::Int(x), Cell::Int(y))) => {
                Cell::Int(x.wrapping_add(*y))
            }
            (AnswerValue::Min(_), (Cell::Int(x), Cell::Int(y))) => Cell::Int(*x.min(y)),
            (AnswerValue::Max(_), (Cell::Int(x), Cell::Int(y))) => Cell::Int(*x.max(y)),
            (AnswerValue::Avg(_), (Cell::Float(x), Cell::Float(y))) if count > 0 => {
                Cell::Float((x * a.count as f64 + y * b.count as f64) / count as f64)
            }
            (AnswerValue::Latency, (Cell::Latency(x), Cell::Latency(y))) => {
                Cell::Latency(x.merge(y))
            }
            (_, (x, _)) => x.clone(),
        })
        .collect();
    AnswerRow {
        keys: a.keys.clone(),
        count,
        cells,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_buckets_are_the_kernels() {
        // ilog2(roundup_pow_of_two(v)).
        let cases = [
            (0, 0),
            (1, 0),
            (2, 1),
            (3, 2),
            (4, 2),
            (5, 3),
            (1024, 10),
            (1025, 11),
        ];
        for (us, k) in cases {
            assert_eq!(log2_bucket(us), k, "{us}");
        }
    }

    #[test]
    fn percentiles_from_buckets_are_upper_bounds() {
        let b = |log2, count| Bucket { log2, count };
        let l = Latency::from_buckets(vec![b(3, 90), b(2, 0), b(10, 9), b(12, 1)], 5000.0).unwrap();
        assert_eq!(
            (l.min_us, l.p50_us, l.p90_us, l.p99_us, l.max_us),
            (8.0, 8.0, 8.0, 1024.0, 4096.0)
        );
        assert!(!l.exact);
        assert_eq!(l.buckets.len(), 3);
        assert!(Latency::from_buckets(vec![b(1, 0)], 0.0).is_none());
    }

    #[test]
    fn rows_merge_sort_and_cut_into_other_and_total() {
        let values = [AnswerValue::Count, "sum(len)".parse().unwrap()];
        let mut t = TableBuilder::new(&values);
        let row = |k: &str, n: i64, s: i64| AnswerRow {
            keys: vec![k.into()],
            count: n as u64,
            cells: vec![Cell::Int(n), Cell::Int(s)],
        };
        t.add(row("a", 1, 10));
        t.add(row("b", 5, 1));
        t.add(row("c", 2, 7));
        t.add(row("a", 3, 10));
        let head = TableHead {
            question: None,
            engine: EngineUsed::Kernel,
            keys: vec!["comm".into()],
            dropped: 0,
            notes: Vec::new(),
        };
        let table = t.finish(None, 2, head.clone());
        let keys: Vec<&str> = table.rows.iter().map(|r| r.keys[0].as_str()).collect();
        // a: 4 events, b: 5, c: 2 → b, a, then c in (other).
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(table.rows[1].cells, vec![Cell::Int(4), Cell::Int(20)]);
        let other = table.other.unwrap();
        assert_eq!((other.count, other.cells[1].clone()), (2, Cell::Int(7)));
        assert_eq!(table.total.cells, vec![Cell::Int(11), Cell::Int(28)]);
        assert!(table.total.keys.is_empty());

        let mut t = TableBuilder::new(&values);
        t.add(row("a", 1, 10));
        t.add(row("b", 5, 1));
        let sort: AnswerSort = "-sum(len)".parse().unwrap();
        let table = t.finish(Some(&sort), 20, head);
        assert_eq!(table.rows[0].keys[0], "a");
        assert!(table.other.is_none());
    }
}
