//! A latency histogram of fixed memory: log-linear buckets (exact below 256,
//! then 128 buckets per power of two), so percentiles are within 1/128 (0.8 %)
//! of the exact value whatever the number of samples, while count, min, max
//! and mean are exact. The largest sample keeps where it was seen (the
//! timestamp and CPU of the event that ended it), to jump to in the trace.

use serde::Serialize;

/// Values below this are counted exactly, one bucket each.
const EXACT: u64 = 256;
/// Sub-buckets per power of two above [`EXACT`] (7 bits of mantissa).
const SUB: u64 = 128;

/// Samples of one latency (durations in trace-clock units: ns for ns clocks).
#[derive(Debug, Clone, Default)]
pub(crate) struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
    max_at: Seen,
}

/// Where a sample was taken: the timestamp (trace-clock units) and CPU of the
/// event that ended it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    /// Timestamp of the ending event.
    pub(crate) ts: u64,
    /// Its CPU.
    pub(crate) cpu: u32,
}

fn index(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let e = 63 - u64::from(v.leading_zeros()); // >= 8
    let shift = e - 7;
    let m = v >> shift; // 128..=255
    (EXACT + (e - 8) * SUB + (m - SUB)) as usize
}

/// Lowest value and width of bucket `i`.
fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < EXACT {
        return (i, 1);
    }
    let e = 8 + (i - EXACT) / SUB;
    let m = SUB + (i - EXACT) % SUB;
    (m << (e - 7), 1 << (e - 7))
}

/// One row of a power-of-two text histogram: samples in `lo_ns..hi_ns`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct HistRow {
    /// Lowest duration of the row (inclusive), ns.
    pub(crate) lo_ns: u64,
    /// Highest duration of the row (exclusive), ns.
    pub(crate) hi_ns: u64,
    /// Samples in the row.
    pub(crate) count: u64,
}

impl Histogram {
    /// Adds one duration, taken at `at`.
    pub(crate) fn add(&mut self, v: u64, at: Seen) {
        let i = index(v);
        if i >= self.buckets.len() {
            self.buckets.resize(i + 1, 0);
        }
        self.buckets[i] += 1;
        if self.count == 0 || v < self.min {
            self.min = v;
        }
        if self.count == 0 || v > self.max {
            self.max = v;
            self.max_at = at;
        }
        self.count += 1;
        self.sum += u128::from(v);
    }

    /// Adds every sample of `other` (the max keeps the earlier place on a tie).
    pub(crate) fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        if other.buckets.len() > self.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        if self.count == 0 || other.min < self.min {
            self.min = other.min;
        }
        if self.count == 0
            || other.max > self.max
            || (other.max == self.max && other.max_at.ts < self.max_at.ts)
        {
            self.max = other.max;
            self.max_at = other.max_at;
        }
        self.count += other.count;
        self.sum += other.sum;
    }

    /// Where the largest sample was seen.
    pub(crate) fn max_at(&self) -> Seen {
        self.max_at
    }

    /// Number of samples.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Smallest sample (0 when empty).
    pub(crate) fn min(&self) -> u64 {
        self.min
    }

    /// Largest sample (0 when empty).
    pub(crate) fn max(&self) -> u64 {
        self.max
    }

    /// Sum of the samples.
    pub(crate) fn sum(&self) -> u128 {
        self.sum
    }

    /// Mean, rounded down (0 when empty).
    pub(crate) fn mean(&self) -> u64 {
        self.sum.checked_div(u128::from(self.count)).unwrap_or(0) as u64
    }

    /// The nearest-rank `q` quantile (`q` in 0..=1): the value of the sample of
    /// rank ceil(q * count), as the middle of its bucket clamped to min..=max;
    /// 0 when empty.
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (lo, w) = bounds(i);
                return (lo + (w - 1) / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// Rows of powers of two from the row of min to the row of max (a row
    /// `0..1` holds zero durations).
    pub(crate) fn rows(&self) -> Vec<HistRow> {
        if self.count == 0 {
            return Vec::new();
        }
        let row = |v: u64| if v == 0 { 0 } else { 64 - v.leading_zeros() };
        let (first, last) = (row(self.min), row(self.max));
        let mut rows: Vec<HistRow> = (first..=last)
            .map(|r| HistRow {
                lo_ns: if r == 0 { 0 } else { 1u64 << (r - 1) },
                hi_ns: if r == 0 {
                    1
                } else {
                    1u64.checked_shl(r).unwrap_or(u64::MAX)
                },
                count: 0,
            })
            .collect();
        for (i, n) in self.buckets.iter().enumerate() {
            if *n > 0 {
                let r = row(bounds(i).0);
                rows[(r - first) as usize].count += n;
            }
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut prev = (0, 0);
        for v in (0..5000u64).chain([u64::MAX / 3, u64::MAX]) {
            let i = index(v);
            let (lo, w) = bounds(i);
            assert!(lo <= v && v - lo < w, "{v} in bucket {i} = {lo}+{w}");
            assert!(i >= prev.0 && (i > prev.0 || v >= prev.1));
            prev = (i, v);
        }
    }

    #[test]
    fn quantiles_are_within_one_percent_of_exact() {
        let mut h = Histogram::default();
        let mut values: Vec<u64> = (0..10_000u64).map(|i| (i * 7919) % 3_000_017).collect();
        let mut halves = [Histogram::default(), Histogram::default()];
        for (i, v) in values.iter().enumerate() {
            let at = Seen {
                ts: i as u64,
                cpu: 0,
            };
            h.add(*v, at);
            halves[i % 2].add(*v, at);
        }
        let [mut merged, odd] = halves;
        merged.merge(&odd);
        assert_eq!(merged.quantile(0.9), h.quantile(0.9));
        assert_eq!((merged.count(), merged.mean()), (h.count(), h.mean()));
        assert_eq!(merged.max_at(), h.max_at());
        values.sort_unstable();
        for q in [0.5, 0.9, 0.99] {
            let exact = values[((q * values.len() as f64).ceil() as usize).max(1) - 1];
            let got = h.quantile(q);
            assert!(
                got.abs_diff(exact) <= exact / 128 + 1,
                "{q}: {got} vs {exact}"
            );
        }
        assert_eq!(h.min(), values[0]);
        assert_eq!(h.max(), *values.last().unwrap());
        assert_eq!(h.rows().iter().map(|r| r.count).sum::<u64>(), h.count());
    }
}
