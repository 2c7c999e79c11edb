//! Counts over time: per event, CPU, comm and pid, in equal time buckets.
//!
//! The span of a file is not known before its last record, so buckets start
//! 1 ms wide and double (merging pairs) whenever more than [`MAX_BUCKETS`]
//! would be needed: one pass, memory bounded by keys × [`MAX_BUCKETS`].

use rustc_hash::FxHashMap;

use serde::Serialize;
use tracedat::TraceFile;

use super::{TOP, comm_of};

/// Most buckets a timeline has.
pub(crate) const MAX_BUCKETS: usize = 64;
const FIRST_WIDTH_NS: u64 = 1_000_000;

/// Counts over time. Bucket `i` covers `start_ns + i * bucket_ns` up to the next.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct Timeline {
    /// Timestamp of the first event (trace-clock units).
    pub(crate) start_ns: u64,
    /// Width of one bucket (trace-clock units).
    pub(crate) bucket_ns: u64,
    /// Number of buckets (every series has this many values).
    pub(crate) buckets: usize,
    /// Per `system:event`, in name order.
    pub(crate) events: Vec<Series>,
    /// Per CPU (`cpuN`), in CPU order.
    pub(crate) cpus: Vec<Series>,
    /// The most frequent comms (at most 10), most first.
    pub(crate) comms: Vec<Series>,
    /// The most frequent pids (at most 10, named `COMM-PID`), most first.
    pub(crate) pids: Vec<Series>,
}

/// One key's counts per bucket.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct Series {
    /// The key: `system:event`, `cpuN`, a comm, or `COMM-PID`.
    pub(crate) name: String,
    /// Events in the whole file.
    pub(crate) total: u64,
    /// Events per bucket.
    pub(crate) counts: Vec<u64>,
}

/// The running totals of `analyze`'s pass, by counted event index, CPU slot
/// and pid slot (pid, count): the timeline reads its counts from them.
#[derive(Clone, Copy)]
pub(super) struct Totals<'a> {
    pub(super) events: &'a [u64],
    pub(super) cpus: &'a [u64],
    pub(super) pids: &'a [(i32, u64)],
}

/// Builds a [`Timeline`] without a count per record: while records stay in
/// one bucket the pass's own running totals grow, and when a record falls in
/// another bucket what each key's total grew by since the last switch is
/// added to the bucket left. A switch costs one look at every key, so a file
/// whose timestamps jump back and forth (a hostile one: records are merged in
/// time order) would make that quadratic: once switches have cost more than
/// [`SWITCH_BUDGET`] looks plus 8 per record, each record is counted in its
/// bucket as it comes instead.
pub(super) struct Builder {
    start: Option<u64>,
    width: u64,
    events: Vec<Vec<u64>>,
    cpus: Vec<Vec<u64>>,
    /// By pid slot (see `analyze`).
    pids: Vec<Vec<u64>>,
    /// The bucket of the last timestamp and its range `lo..hi` (empty when
    /// the next record must switch): most timestamps fall into the bucket of
    /// the one before.
    cur: usize,
    lo: u64,
    hi: u64,
    /// Per key, its total at the last switch.
    seen_events: Vec<u64>,
    seen_cpus: Vec<u64>,
    seen_pids: Vec<u64>,
    /// Keys looked at by switches so far.
    switch_cost: u64,
    /// Counting each record as it comes (see [`Builder`]).
    per_record: bool,
}

/// Keys switches may look at before the per-record budget applies.
const SWITCH_BUDGET: u64 = 1 << 20;

fn bump(v: &mut Vec<u64>, i: usize, n: u64) {
    if i >= v.len() {
        v.resize(i + 1, 0);
    }
    v[i] += n;
}

fn halve(v: &mut Vec<u64>) {
    let merged: Vec<u64> = v.chunks(2).map(|c| c.iter().sum()).collect();
    *v = merged;
}

/// Adds to bucket `i` of each key's series what its total grew by since
/// `seen`, and records the totals as seen.
fn settle(
    series: &mut Vec<Vec<u64>>,
    seen: &mut Vec<u64>,
    totals: impl ExactSizeIterator<Item = u64>,
    i: usize,
) {
    if series.len() < totals.len() {
        series.resize(totals.len(), Vec::new());
        seen.resize(totals.len(), 0);
    }
    for ((v, seen), total) in series.iter_mut().zip(seen.iter_mut()).zip(totals) {
        if total > *seen {
            bump(v, i, total - *seen);
            *seen = total;
        }
    }
}

impl Builder {
    pub(super) fn new(events: usize) -> Builder {
        Builder {
            start: None,
            width: FIRST_WIDTH_NS,
            events: vec![Vec::new(); events],
            cpus: Vec::new(),
            pids: Vec::new(),
            cur: 0,
            lo: 1,
            hi: 0,
            seen_events: vec![0; events],
            seen_cpus: Vec::new(),
            seen_pids: Vec::new(),
            switch_cost: 0,
            per_record: false,
        }
    }

    /// The bucket of `ts`, doubling the width while it lies beyond the last.
    fn bucket(&mut self, ts: u64) -> usize {
        let start = *self.start.get_or_insert(ts);
        let mut i = (ts.saturating_sub(start) / self.width) as usize;
        while i >= MAX_BUCKETS {
            self.width *= 2;
            self.events.iter_mut().for_each(halve);
            self.cpus.iter_mut().for_each(halve);
            self.pids.iter_mut().for_each(halve);
            i = (ts.saturating_sub(start) / self.width) as usize;
        }
        self.cur = i;
        (self.lo, self.hi) = if ts >= start {
            let lo = start + i as u64 * self.width;
            (lo, lo.saturating_add(self.width))
        } else {
            (1, 0)
        };
        i
    }

    /// Adds what the totals grew by since the last switch to the current bucket.
    fn settle(&mut self, totals: Totals<'_>) {
        let i = self.cur;
        settle(
            &mut self.events,
            &mut self.seen_events,
            totals.events.iter().copied(),
            i,
        );
        settle(
            &mut self.cpus,
            &mut self.seen_cpus,
            totals.cpus.iter().copied(),
            i,
        );
        settle(
            &mut self.pids,
            &mut self.seen_pids,
            totals.pids.iter().map(|p| p.1),
            i,
        );
        let keys = totals.events.len() + totals.cpus.len() + totals.pids.len();
        self.switch_cost = self.switch_cost.saturating_add(keys as u64);
    }

    /// One record at `ts`, of counted event `event` on CPU slot `cpu` by pid
    /// slot `pid`; `totals` are the pass's totals before it is counted.
    #[inline]
    pub(super) fn add(
        &mut self,
        ts: u64,
        event: usize,
        cpu: usize,
        pid: usize,
        totals: Totals<'_>,
    ) {
        if self.lo <= ts && ts < self.hi && !self.per_record {
            return;
        }
        self.switch(ts, event, cpu, pid, totals);
    }

    fn switch(&mut self, ts: u64, event: usize, cpu: usize, pid: usize, totals: Totals<'_>) {
        if !self.per_record {
            self.settle(totals);
            let records: u64 = totals.cpus.iter().sum();
            self.per_record =
                self.switch_cost > SWITCH_BUDGET.saturating_add(records.saturating_mul(8));
        }
        let i = self.bucket(ts);
        if self.per_record {
            if self.events.len() <= event {
                self.events.resize(event + 1, Vec::new());
            }
            bump(&mut self.events[event], i, 1);
            if cpu >= self.cpus.len() {
                self.cpus.resize(cpu + 1, Vec::new());
            }
            bump(&mut self.cpus[cpu], i, 1);
            if pid >= self.pids.len() {
                self.pids.resize(pid + 1, Vec::new());
            }
            bump(&mut self.pids[pid], i, 1);
        }
    }

    /// The timeline; `totals` are the pass's final totals (`pids` is
    /// `analyze`'s pid list, (pid, events) by slot), `cpu_ids` the CPU id of
    /// each CPU slot.
    pub(super) fn finish(
        mut self,
        totals: Totals<'_>,
        file: &TraceFile,
        learned: &tracedat::Comms,
        event_names: &[String],
        cpu_ids: &[u32],
    ) -> Timeline {
        if !self.per_record {
            self.settle(totals);
        }
        let pids = totals.pids;
        // The buckets actually filled: never more than MAX_BUCKETS, whatever
        // the first and last timestamps are (a file may run backwards).
        let n = self
            .events
            .iter()
            .chain(&self.cpus)
            .chain(&self.pids)
            .map(Vec::len)
            .max()
            .unwrap_or(0)
            .min(MAX_BUCKETS);
        let series = |name: String, counts: &[u64]| {
            let mut v = counts.to_vec();
            v.resize(n, 0);
            Series {
                name,
                total: v.iter().sum(),
                counts: v,
            }
        };
        let mut events: Vec<Series> = self
            .events
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_empty())
            .map(|(i, v)| {
                let name = if i == 0 {
                    "[UNKNOWN EVENT]"
                } else {
                    &event_names[i]
                };
                series(name.to_string(), v)
            })
            .collect();
        events.sort_by(|a, b| a.name.cmp(&b.name));
        let mut cpus: Vec<(u32, Series)> = self
            .cpus
            .iter()
            .zip(cpu_ids)
            .filter(|(v, _)| !v.is_empty())
            .map(|(v, id)| (*id, series(format!("cpu{id}"), v)))
            .collect();
        cpus.sort_by_key(|(id, _)| *id);
        let cpus = cpus.into_iter().map(|(_, s)| s).collect();
        let mut by_comm: FxHashMap<String, Vec<u64>> = FxHashMap::default();
        for ((pid, _), v) in pids.iter().zip(&self.pids) {
            let acc = by_comm.entry(comm_of(file, learned, *pid)).or_default();
            if acc.len() < v.len() {
                acc.resize(v.len(), 0);
            }
            for (a, x) in acc.iter_mut().zip(v) {
                *a += x;
            }
        }
        let top = |mut v: Vec<Series>| {
            v.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
            v.truncate(TOP);
            v
        };
        let comms = top(by_comm.iter().map(|(k, v)| series(k.clone(), v)).collect());
        let pids = top(pids
            .iter()
            .zip(&self.pids)
            .map(|((pid, _), v)| series(format!("{}-{pid}", comm_of(file, learned, *pid)), v))
            .collect());
        Timeline {
            start_ns: self.start.unwrap_or(0),
            bucket_ns: self.width,
            buckets: n,
            events,
            cpus,
            comms,
            pids,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `records` (ts, event, cpu, pid slot) as `analyze` does and
    /// settles the end; `per_record` counts each record from the start.
    fn run(records: &[(u64, usize, usize, usize)], per_record: bool) -> Builder {
        let mut b = Builder::new(4);
        b.per_record = per_record;
        let (mut events, mut cpus, mut pids) = (vec![0u64; 4], Vec::new(), Vec::new());
        for &(ts, e, c, p) in records {
            if c >= cpus.len() {
                cpus.resize(c + 1, 0);
            }
            if p >= pids.len() {
                pids.resize(p + 1, (0, 0));
            }
            let totals = Totals {
                events: &events,
                cpus: &cpus,
                pids: &pids,
            };
            b.add(ts, e, c, p, totals);
            events[e] += 1;
            cpus[c] += 1;
            pids[p].1 += 1;
        }
        if !b.per_record {
            b.settle(Totals {
                events: &events,
                cpus: &cpus,
                pids: &pids,
            });
        }
        b
    }

    fn series(b: &Builder) -> Vec<Vec<u64>> {
        let trim = |v: &Vec<u64>| {
            let mut v = v.clone();
            while v.last() == Some(&0) {
                v.pop();
            }
            v
        };
        b.events
            .iter()
            .chain(&b.cpus)
            .chain(&b.pids)
            .map(trim)
            .collect()
    }

    #[test]
    fn buckets_stay_bounded_for_wild_and_backward_timestamps() {
        let ts = [10, u64::MAX, 0, 1 << 40, 3, u64::MAX - 5];
        let records: Vec<_> = ts.iter().map(|t| (*t, 1, 0, 0)).collect();
        for per_record in [false, true] {
            let b = run(&records, per_record);
            assert!(b.width > FIRST_WIDTH_NS);
            let lens: Vec<usize> = b.events.iter().chain(&b.cpus).map(Vec::len).collect();
            assert!(lens.iter().all(|l| *l <= MAX_BUCKETS), "{lens:?}");
            assert_eq!(b.events[1].iter().sum::<u64>(), 6);
        }
    }

    #[test]
    fn counts_read_from_the_totals_are_the_counts_of_each_record() {
        // Several keys over 200 ms, so that the buckets double twice.
        let records: Vec<_> = (0..20_000u64)
            .map(|i| {
                let ts = 5_000 + i * 10_000 + (i % 7) * 300;
                (
                    ts,
                    (i % 3) as usize + 1,
                    (i % 2) as usize,
                    (i % 5 + i / 4000) as usize,
                )
            })
            .collect();
        let by_total = run(&records, false);
        assert!(!by_total.per_record);
        assert!(by_total.width > 2 * FIRST_WIDTH_NS);
        assert_eq!(series(&by_total), series(&run(&records, true)));
    }

    #[test]
    fn timestamps_that_jump_back_and_forth_are_counted_per_record() {
        // Every record in another bucket than the one before, over many pids:
        // switches would look at every key per record.
        let records: Vec<_> = (0..40_000u64)
            .map(|i| ((i % 2) * 50_000_000 + i, 1, 0, (i % 2_000) as usize))
            .collect();
        let b = run(&records, false);
        assert!(b.per_record, "switch cost {}", b.switch_cost);
        assert!(b.switch_cost < SWITCH_BUDGET + 8 * 40_000 + 4_000);
        assert_eq!(series(&b), series(&run(&records, true)));
        assert_eq!(b.events[1].iter().sum::<u64>(), 40_000);
    }
}
