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

pub(super) struct Builder {
    start: Option<u64>,
    width: u64,
    events: Vec<Vec<u64>>,
    cpus: Vec<Vec<u64>>,
    /// By pid slot (see `analyze`).
    pids: Vec<Vec<u64>>,
    /// The bucket of the last timestamp and its range `lo..hi` (empty at
    /// first): most timestamps fall into the bucket of the one before.
    cur: usize,
    lo: u64,
    hi: u64,
}

fn bump(v: &mut Vec<u64>, i: usize) {
    if i >= v.len() {
        v.resize(i + 1, 0);
    }
    v[i] += 1;
}

fn halve(v: &mut Vec<u64>) {
    let merged: Vec<u64> = v.chunks(2).map(|c| c.iter().sum()).collect();
    *v = merged;
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
        if ts >= start {
            self.cur = i;
            self.lo = start + i as u64 * self.width;
            self.hi = self.lo.saturating_add(self.width);
        }
        i
    }

    /// Counts one event; `cpu` and `pid` are slots in `analyze`'s CPU and pid lists.
    pub(super) fn add(&mut self, ts: u64, event: usize, cpu: usize, pid: usize) {
        let i = if self.lo <= ts && ts < self.hi {
            self.cur
        } else {
            self.bucket(ts)
        };
        bump(&mut self.events[event], i);
        if cpu >= self.cpus.len() {
            self.cpus.resize(cpu + 1, Vec::new());
        }
        bump(&mut self.cpus[cpu], i);
        if pid >= self.pids.len() {
            self.pids.resize(pid + 1, Vec::new());
        }
        bump(&mut self.pids[pid], i);
    }

    /// The timeline; `pids` is `analyze`'s pid list (pid, events) by slot,
    /// `cpu_ids` the CPU id of each CPU slot.
    pub(super) fn finish(
        self,
        file: &TraceFile,
        learned: &tracedat::Comms,
        event_names: &[String],
        pids: &[(i32, u64)],
        cpu_ids: &[u32],
    ) -> Timeline {
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

    #[test]
    fn buckets_stay_bounded_for_wild_and_backward_timestamps() {
        let mut b = Builder::new(2);
        for ts in [10, u64::MAX, 0, 1 << 40, 3, u64::MAX - 5] {
            b.add(ts, 1, 0, 0);
        }
        assert!(b.width > FIRST_WIDTH_NS);
        let lens: Vec<usize> = b.events.iter().chain(&b.cpus).map(Vec::len).collect();
        assert!(lens.iter().all(|l| *l <= MAX_BUCKETS), "{lens:?}");
        assert_eq!(b.events[1].iter().sum::<u64>(), 6);
    }
}
