//! Function time from function_graph, part of the `funcgraph` analysis: per
//! function, calls, total time, self time (total less the time of the calls
//! it made) and the longest call, ranked by total time.
//!
//! Each `ftrace:funcgraph_exit` gives one call: `func`, `depth` and
//! `rettime - calltime`. A task's exits come innermost first, so the calls
//! made by a call at depth d are the exits at depth d + 1 of the same task
//! since its previous exit at depth d: per task (the idle tasks, all pid 0,
//! per CPU) the pass adds each exit's duration to its depth's running sum and
//! takes the sum one level deeper as the call's children. Self time is
//! therefore exact when every nested exit was recorded (`max_graph_depth`
//! keeps the deepest calls out, and their time stays in their caller's self
//! time; a lost event lends its time to its caller too).
//!
//! Memory is bounded: [`MAX_KEYS`] functions (more count in `untracked`),
//! [`MAX_TASKS`] tasks and as many idle CPUs, and depths up to [`MAX_DEPTH`] (deeper exits count
//! their time but no children).

use rustc_hash::FxHashMap;
use serde::Serialize;
use tracedat::TraceFile;

use super::errno::MAX_KEYS;
use super::funcgraph::{Decoder, Return};
use super::function_name;
use super::histogram::{Histogram, Seen};
use super::latency::MAX_TASKS;
use super::tasks::TaskSlots;

/// Depths followed per task (function_graph's own limit is 50 on 6.x).
const MAX_DEPTH: usize = 64;
/// Functions the report lists, most total time first.
const MAX_FUNCTIONS: usize = 40;
/// Entries of the cache of recent functions' rows (a power of two).
const RECENT: usize = 256;

/// Time per function from function_graph, most total time first.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct FunctionTimes {
    /// Calls read (funcgraph_exit records).
    pub(crate) calls: u64,
    /// Calls of functions past the key limit (4096 functions), in no row.
    pub(crate) untracked: u64,
    /// Functions there were in all (only the first 40 are listed).
    pub(crate) functions_total: usize,
    /// Per function, most total time first.
    pub(crate) functions: Vec<FunctionTime>,
}

/// One function's calls (ns; trace-clock units for non-nanosecond clocks).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct FunctionTime {
    /// The function `func` falls in, through kallsyms (no offset).
    pub(crate) function: String,
    /// Calls.
    pub(crate) count: u64,
    /// Time in its calls, callees included.
    pub(crate) total_ns: u64,
    /// Time in its calls less the time of the calls they made.
    pub(crate) self_ns: u64,
    /// Longest call.
    pub(crate) max_ns: u64,
    /// Timestamp of the exit that ended the longest call (trace-clock units).
    pub(crate) max_at_ns: u64,
}

#[derive(Default)]
struct Row {
    /// The durations of its calls (count, total, longest and where).
    calls: Histogram,
    /// Self time.
    own: u64,
}

/// The state of one pass.
pub(super) struct FuncTime {
    /// Whether the file has funcgraph_exit records to read.
    present: bool,
    rows: Vec<(u64, Row)>,
    row_of: FxHashMap<u64, usize>,
    /// Recently met functions and their rows, by a hash of the address:
    /// most returns find their row here rather than in `row_of`.
    recent: Box<[(u64, usize); RECENT]>,
    /// Per task (by pid slot; the idle tasks, pid 0, by CPU slot): the
    /// children's time summed per depth.
    open: TaskSlots<Vec<u64>>,
    idle: TaskSlots<Vec<u64>>,
    calls: u64,
    untracked: u64,
}

impl FuncTime {
    pub(super) fn new(calls: &Decoder) -> FuncTime {
        FuncTime::with(calls.has_exit())
    }

    /// A pass with no return seen yet; `present`: whether the file has
    /// funcgraph_exit records to read.
    fn with(present: bool) -> FuncTime {
        FuncTime {
            present,
            rows: Vec::new(),
            row_of: FxHashMap::default(),
            recent: Box::new([(0, usize::MAX); RECENT]),
            open: TaskSlots::new(MAX_TASKS),
            idle: TaskSlots::new(MAX_TASKS),
            calls: 0,
            untracked: 0,
        }
    }

    /// One return seen `at` of task `pid`, in pid slot `task`, on CPU slot `cpu`.
    pub(super) fn add(&mut self, ret: &Return, at: Seen, pid: i32, task: usize, cpu: usize) {
        let Return {
            func,
            depth,
            time: d,
        } = *ret;
        self.calls += 1;
        let depth = usize::try_from(depth).unwrap_or(usize::MAX);
        let sums = if depth >= MAX_DEPTH {
            None
        } else if pid == 0 {
            self.idle.get(cpu)
        } else {
            self.open.get(task)
        };
        let children = match sums {
            None => 0,
            Some(sums) => {
                if sums.len() < depth + 2 {
                    sums.resize(depth + 2, 0);
                }
                sums[depth] = sums[depth].saturating_add(d);
                std::mem::take(&mut sums[depth + 1])
            }
        };
        let recent = &mut self.recent[((func >> 4) ^ (func >> 12)) as usize % RECENT];
        let r = if recent.0 == func && recent.1 != usize::MAX {
            recent.1
        } else {
            let n = self.rows.len();
            let r = match self.row_of.get(&func) {
                Some(r) => *r,
                None if n < MAX_KEYS => {
                    self.rows.push((func, Row::default()));
                    self.row_of.insert(func, n);
                    n
                }
                None => {
                    self.untracked += 1;
                    return;
                }
            };
            *recent = (func, r);
            r
        };
        let Some((_, row)) = self.rows.get_mut(r) else {
            return;
        };
        row.calls.add(d, at);
        row.own = row.own.saturating_add(d.saturating_sub(children));
    }

    /// Per function with a row (in the order of their first returns), its
    /// address and the durations of its calls.
    pub(super) fn durations(&self) -> impl Iterator<Item = (u64, &Histogram)> {
        self.rows.iter().map(|(func, row)| (*func, &row.calls))
    }

    /// The table, or `None` when the file has no funcgraph_exit format.
    pub(super) fn finish(self, file: &TraceFile) -> Option<FunctionTimes> {
        if !self.present {
            return None;
        }
        let total = |r: &Row| u64::try_from(r.calls.sum()).unwrap_or(u64::MAX);
        let mut rows = self.rows;
        rows.sort_by(|a, b| total(&b.1).cmp(&total(&a.1)).then(a.0.cmp(&b.0)));
        let functions_total = rows.len();
        Some(FunctionTimes {
            calls: self.calls,
            untracked: self.untracked,
            functions_total,
            functions: rows
                .into_iter()
                .take(MAX_FUNCTIONS)
                .map(|(func, r)| FunctionTime {
                    function: function_name(file, func),
                    count: r.calls.count(),
                    total_ns: total(&r),
                    self_ns: r.own,
                    max_ns: r.calls.max(),
                    max_at_ns: r.calls.max_at().ts,
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Functions that share an entry of the cache of recent rows, returning
    /// in turn, each keep their own row.
    #[test]
    fn functions_sharing_a_recent_entry_keep_their_rows() {
        let slot = |f: u64| ((f >> 4) ^ (f >> 12)) as usize % RECENT;
        let a = 0xffff_ffff_8100_1000u64;
        let b = (a + 16..)
            .step_by(16)
            .find(|&f| slot(f) == slot(a))
            .unwrap();
        let mut t = FuncTime::with(true);
        let at = |ts: u64| Seen { ts, cpu: 0 };
        for (i, (func, time)) in [(a, 10), (b, 20), (a, 30), (b, 40), (b, 50), (0, 1)]
            .into_iter()
            .enumerate()
        {
            let ret = Return {
                func,
                depth: 0,
                time,
            };
            t.add(&ret, at(i as u64), 7, 0, 0);
        }
        let rows: Vec<(u64, u64, u128)> = (t.durations())
            .map(|(f, h)| (f, h.count(), h.sum()))
            .collect();
        assert_eq!(rows, [(a, 2, 40), (b, 3, 110), (0, 1, 1)]);
    }
}
