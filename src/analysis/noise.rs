//! The samples hwlat, osnoise and timerlat write into the ring buffer as
//! entries of their own (the `ftrace` system's `hwlat`, `osnoise` and
//! `timerlat` formats, kernel/trace/trace_entries.h), per CPU and as latency
//! distributions.
//!
//! * `hwlat`: one entry per window whose largest gap passed the threshold:
//!   `duration` (inner) and `outer_duration` in µs, `nmi_count`. Groups
//!   `inner` and `outer`.
//! * `osnoise`: one entry per period and CPU: `runtime` and `noise` (µs), the
//!   largest single noise `max_sample` (µs) and the interference counts
//!   `hw_count`, `nmi_count`, `irq_count`, `softirq_count`, `thread_count`.
//!   Groups `noise` (a period's total) and `max_single`.
//! * `timerlat`: two entries per period and CPU: `context` 0 (the timer's IRQ)
//!   and 1 (the woken thread), each with `timer_latency` in ns. Groups `irq`
//!   and `thread`.
//!
//! Each group's durations are in ns (µs fields times 1000), so `max(timerlat:thread)`
//! and `p99(osnoise:noise)` compare with durations like any latency analysis;
//! the per-CPU tables go to report.json `tracer`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tracedat::{Field, IntField, TraceFile};

use super::histogram::{Histogram, Seen};
use super::latency::{Groups, uint};
use super::pass::{At, Finish, Pass};
use super::{Analysis, AnalysisName, Selection};

/// report.json `tracer.hwlat[]`: one CPU's hwlat samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct HwlatCpu {
    /// The CPU the sampling thread ran on.
    pub(crate) cpu: u32,
    /// Windows whose largest gap passed the threshold (entries recorded).
    pub(crate) samples: u64,
    /// Largest gap between two time reads inside the sampling loop, µs.
    pub(crate) max_inner_us: u64,
    /// Largest gap between two loop iterations, µs.
    pub(crate) max_outer_us: u64,
    /// Trace timestamp of the entry with the largest inner gap (trace-clock units).
    pub(crate) max_at_ns: u64,
    /// NMIs seen during the recorded windows.
    pub(crate) nmi_count: u64,
}

/// report.json `tracer.osnoise[]`: one CPU's osnoise periods.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct OsnoiseCpu {
    /// The CPU.
    pub(crate) cpu: u32,
    /// Periods recorded.
    pub(crate) samples: u64,
    /// Time the osnoise thread sampled, all periods, µs.
    pub(crate) runtime_us: u64,
    /// Noise it saw, all periods, µs.
    pub(crate) noise_us: u64,
    /// The noisiest period's noise, µs.
    pub(crate) max_noise_us: u64,
    /// Trace timestamp of that period's entry (trace-clock units).
    pub(crate) max_at_ns: u64,
    /// The largest single noise of any period, µs.
    pub(crate) max_single_noise_us: u64,
    /// Interference counts, all periods: hardware (no OS cause; a hypervisor
    /// counts here), NMIs, IRQs, softirqs, threads.
    pub(crate) hw_count: u64,
    /// NMIs.
    pub(crate) nmi_count: u64,
    /// IRQs.
    pub(crate) irq_count: u64,
    /// Softirqs.
    pub(crate) softirq_count: u64,
    /// Threads.
    pub(crate) thread_count: u64,
}

/// report.json `tracer.timerlat[]`: one CPU's timer latencies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct TimerlatCpu {
    /// The CPU.
    pub(crate) cpu: u32,
    /// From the timer's expiry to its IRQ handler.
    pub(crate) irq: LatencyStats,
    /// From the timer's expiry to the timerlat thread running.
    pub(crate) thread: LatencyStats,
}

/// A latency distribution of one CPU (ns).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct LatencyStats {
    /// Samples.
    pub(crate) count: u64,
    /// Median, ns (within 0.8 %).
    pub(crate) p50_ns: u64,
    /// 99th percentile, ns (within 0.8 %).
    pub(crate) p99_ns: u64,
    /// Longest, ns.
    pub(crate) max_ns: u64,
    /// Trace timestamp of the longest (trace-clock units).
    pub(crate) max_at_ns: u64,
}

impl LatencyStats {
    fn of(h: &Histogram) -> LatencyStats {
        LatencyStats {
            count: h.count(),
            p50_ns: h.quantile(0.5),
            p99_ns: h.quantile(0.99),
            max_ns: h.max(),
            max_at_ns: h.max_at().ts,
        }
    }
}

/// The per-CPU tables of one pass; empty vectors for tracers without entries.
#[derive(Debug, Clone, Default)]
pub(crate) struct NoiseTables {
    /// hwlat, by CPU.
    pub(crate) hwlat: Vec<HwlatCpu>,
    /// osnoise, by CPU.
    pub(crate) osnoise: Vec<OsnoiseCpu>,
    /// timerlat, by CPU.
    pub(crate) timerlat: Vec<TimerlatCpu>,
}

/// Field offsets of the three entry formats found in the file.
enum Role {
    Hwlat {
        inner: IntField,
        outer: IntField,
        nmi: IntField,
    },
    Osnoise(Box<OsnoiseFields>),
    Timerlat {
        context: IntField,
        latency: IntField,
    },
}

/// The fields of an osnoise entry.
struct OsnoiseFields {
    noise: IntField,
    runtime: IntField,
    max_sample: IntField,
    /// hw, nmi, irq, softirq, thread.
    counts: [IntField; 5],
}

/// The pass's state.
pub(super) struct Noise {
    roles: BTreeMap<u16, Role>,
    hwlat: BTreeMap<u32, HwlatCpu>,
    osnoise: BTreeMap<u32, OsnoiseCpu>,
    /// Per CPU: the IRQ and thread distributions.
    timerlat: BTreeMap<u32, [Histogram; 2]>,
    hwlat_groups: Groups,
    osnoise_groups: Groups,
    timerlat_groups: Groups,
}

impl Pass for Noise {
    /// `None` when `sel` runs none of the three analyses.
    fn start(file: &TraceFile, sel: &Selection) -> Option<Noise> {
        let mut roles = BTreeMap::new();
        for f in file.formats().filter(|f| f.system == "ftrace") {
            let field = |n: &str| f.field(n).map(Field::int);
            let role = match f.name.as_str() {
                "hwlat" if sel.has(AnalysisName::Hwlat) => (|| {
                    Some(Role::Hwlat {
                        inner: field("duration")?,
                        outer: field("outer_duration")?,
                        nmi: field("nmi_count")?,
                    })
                })(),
                "osnoise" if sel.has(AnalysisName::Osnoise) => (|| {
                    Some(Role::Osnoise(Box::new(OsnoiseFields {
                        noise: field("noise")?,
                        runtime: field("runtime")?,
                        max_sample: field("max_sample")?,
                        counts: [
                            field("hw_count")?,
                            field("nmi_count")?,
                            field("irq_count")?,
                            field("softirq_count")?,
                            field("thread_count")?,
                        ],
                    })))
                })(),
                "timerlat" if sel.has(AnalysisName::Timerlat) => (|| {
                    Some(Role::Timerlat {
                        context: field("context")?,
                        latency: field("timer_latency")?,
                    })
                })(),
                _ => None,
            };
            if let Some(r) = role {
                roles.insert(f.id, r);
            }
        }
        if ![
            AnalysisName::Hwlat,
            AnalysisName::Osnoise,
            AnalysisName::Timerlat,
        ]
        .iter()
        .any(|n| sel.has(*n))
        {
            return None;
        }
        Some(Noise {
            roles,
            hwlat: BTreeMap::new(),
            osnoise: BTreeMap::new(),
            timerlat: BTreeMap::new(),
            hwlat_groups: Groups::default(),
            osnoise_groups: Groups::default(),
            timerlat_groups: Groups::default(),
        })
    }

    /// Whether records of format `id` mean something to this analysis
    /// (the others need not be fed to it).
    fn handles(&self, id: u16) -> bool {
        self.roles.contains_key(&id)
    }

    /// Feeds one event.
    #[inline]
    fn add(&mut self, at: &At<'_, '_>) {
        let ev = at.ev;
        if ev.format.id != ev.type_id() {
            return;
        }
        let Some(role) = self.roles.get(&ev.format.id) else {
            return;
        };
        let at = Seen {
            ts: ev.ts,
            cpu: ev.cpu,
        };
        let v = |f: &IntField| uint(f, ev).unwrap_or(0);
        match role {
            Role::Hwlat { inner, outer, nmi } => {
                let (i, o) = (v(inner), v(outer));
                let c = self.hwlat.entry(ev.cpu).or_insert_with(|| HwlatCpu {
                    cpu: ev.cpu,
                    ..HwlatCpu::default()
                });
                c.samples += 1;
                if i > c.max_inner_us || c.samples == 1 {
                    c.max_inner_us = i;
                    c.max_at_ns = ev.ts;
                }
                c.max_outer_us = c.max_outer_us.max(o);
                c.nmi_count += v(nmi);
                let g = &mut self.hwlat_groups;
                for (key, us) in [("inner", i), ("outer", o)] {
                    let id = g.id(key);
                    g.add(id, us.saturating_mul(1000), at, None);
                }
            }
            Role::Osnoise(o) => {
                let OsnoiseFields {
                    noise,
                    runtime,
                    max_sample,
                    counts,
                } = &**o;
                let (n, single) = (v(noise), v(max_sample));
                let c = self.osnoise.entry(ev.cpu).or_insert_with(|| OsnoiseCpu {
                    cpu: ev.cpu,
                    ..OsnoiseCpu::default()
                });
                c.samples += 1;
                c.runtime_us = c.runtime_us.saturating_add(v(runtime));
                c.noise_us = c.noise_us.saturating_add(n);
                if n > c.max_noise_us || c.samples == 1 {
                    c.max_noise_us = n;
                    c.max_at_ns = ev.ts;
                }
                c.max_single_noise_us = c.max_single_noise_us.max(single);
                let [hw, nmi, irq, softirq, thread] = counts;
                c.hw_count += v(hw);
                c.nmi_count += v(nmi);
                c.irq_count += v(irq);
                c.softirq_count += v(softirq);
                c.thread_count += v(thread);
                let g = &mut self.osnoise_groups;
                for (key, us) in [("noise", n), ("max_single", single)] {
                    let id = g.id(key);
                    g.add(id, us.saturating_mul(1000), at, None);
                }
            }
            Role::Timerlat { context, latency } => {
                // 0: the IRQ, 1: the thread (2, a user-space thread on
                // newer kernels, counts as a thread).
                let ctx = usize::from(v(context) != 0);
                let ns = v(latency);
                self.timerlat.entry(ev.cpu).or_default()[ctx].add(ns, at);
                let g = &mut self.timerlat_groups;
                let id = g.id(["irq", "thread"][ctx]);
                g.add(id, ns, at, None);
            }
        }
    }

    /// The latency reports (for the selected analyses, in report order) and
    /// the per-CPU tables.
    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        for (name, groups, title, by) in [
            (
                AnalysisName::Hwlat,
                self.hwlat_groups,
                "hwlat: largest gap per sampling window with interrupts off (inner, outer)",
                "gap",
            ),
            (
                AnalysisName::Osnoise,
                self.osnoise_groups,
                "osnoise: noise per period (total, largest single)",
                "measure",
            ),
            (
                AnalysisName::Timerlat,
                self.timerlat_groups,
                "timerlat: timer expiry to IRQ handler and to thread",
                "context",
            ),
        ] {
            if cx.sel.has(name) {
                let (report, tasks) = groups.report(name, title, by, &|pid| cx.comm(pid));
                out.latency(cx, name, report, tasks);
            }
        }
        out.noise = NoiseTables {
            hwlat: self.hwlat.into_values().collect(),
            osnoise: self.osnoise.into_values().collect(),
            timerlat: self
                .timerlat
                .into_iter()
                .map(|(cpu, [irq, thread])| TimerlatCpu {
                    cpu,
                    irq: LatencyStats::of(&irq),
                    thread: LatencyStats::of(&thread),
                })
                .collect(),
        };
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! osnoise and timerlat do not run on this workplace's kernel: a trace.dat
    //! with their entries, as the RT lab kernel's formats lay them out, is
    //! written from hand-made pages.

    use tracedat::testing::{Endian, Page, event_format};
    use tracedat::{CaptureMeta, CpuData, TraceFile};

    use super::super::{AnalysisName, Selection, analyze};

    const E: Endian = Endian::LITTLE64;

    /// Writes, into `dir`, a trace.dat of osnoise and timerlat entries on two
    /// CPUs (osnoise on CPU 0 only) and returns its path.
    pub(crate) fn osnoise_timerlat_trace(dir: &std::path::Path) -> std::path::PathBuf {
        let osnoise = |noise: u64, single: u64, irq: u64| {
            // noise, runtime, max_sample, hw|nmi, irq|softirq, thread.
            tracedat::testing::payload(E, 17, 50, &[noise, 1000, single, 2, irq, 1])
        };
        // seqnum | context << 32, timer_latency (ns).
        let timerlat = |ctx: u64, ns: u64| tracedat::testing::payload(E, 18, 60, &[ctx << 32, ns]);
        let mut raws = Vec::new();
        for (cpu, events) in [
            (
                0u32,
                vec![
                    osnoise(30, 10, 4),
                    osnoise(70, 40, 1),
                    timerlat(0, 5000),
                    timerlat(1, 9000),
                ],
            ),
            (
                1,
                vec![
                    timerlat(0, 3000),
                    timerlat(1, 7000),
                    timerlat(0, 4000),
                    timerlat(1, 12000),
                ],
            ),
        ] {
            let mut page = Page::new(E, 4096, 1_000_000);
            for p in &events {
                page.event(100, p);
            }
            let raw = dir.join(format!("cpu{cpu}.raw"));
            std::fs::write(&raw, page.finish(None)).unwrap();
            raws.push(CpuData { cpu, path: raw });
        }
        let meta = CaptureMeta {
            header_page: E.header_page(4096).into_bytes(),
            header_event: Vec::new(),
            ftrace_formats: vec![
                event_format(
                    "osnoise",
                    17,
                    "\tfield:u64 noise;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:u64 runtime;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:u64 max_sample;\toffset:24;\tsize:8;\tsigned:0;\n\tfield:unsigned int hw_count;\toffset:32;\tsize:4;\tsigned:0;\n\tfield:unsigned int nmi_count;\toffset:36;\tsize:4;\tsigned:0;\n\tfield:unsigned int irq_count;\toffset:40;\tsize:4;\tsigned:0;\n\tfield:unsigned int softirq_count;\toffset:44;\tsize:4;\tsigned:0;\n\tfield:unsigned int thread_count;\toffset:48;\tsize:4;\tsigned:0;\n",
                    "\"\"",
                )
                .into_bytes(),
                event_format(
                    "timerlat",
                    18,
                    "\tfield:unsigned int seqnum;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:int context;\toffset:12;\tsize:4;\tsigned:1;\n\tfield:u64 timer_latency;\toffset:16;\tsize:8;\tsigned:0;\n",
                    "\"\"",
                )
                .into_bytes(),
            ],
            event_formats: Vec::new(),
            kallsyms: Vec::new(),
            printk_formats: Vec::new(),
            cmdlines: Vec::new(),
            cpu_count: 2,
            trace_clock: "[local] global".into(),
            uname: "Linux t 6.1 x86_64".into(),
            version: "test".into(),
            cpu_stats: vec![String::new(), String::new()],
        };
        let dat = dir.join("t.dat");
        tracedat::write_v6(std::fs::File::create(&dat).unwrap(), &meta, &raws).unwrap();
        dat
    }

    #[test]
    fn osnoise_periods_sum_per_cpu_and_timerlat_splits_irq_from_thread() {
        let dir = tempfile::tempdir().unwrap();
        let dat = osnoise_timerlat_trace(dir.path());
        let file = TraceFile::open(&dat).unwrap();
        let a = analyze(&file, &Selection::for_file(&file)).unwrap();
        assert!(
            a.selected.contains(&AnalysisName::Osnoise)
                && a.selected.contains(&AnalysisName::Timerlat),
            "{:?}",
            a.selected
        );
        let o = &a.noise.osnoise;
        assert_eq!(o.len(), 1);
        let c = &o[0];
        assert_eq!(
            (
                c.cpu,
                c.samples,
                c.runtime_us,
                c.noise_us,
                c.max_noise_us,
                c.max_single_noise_us
            ),
            (0, 2, 2000, 100, 70, 40)
        );
        assert_eq!(
            (
                c.hw_count,
                c.nmi_count,
                c.irq_count,
                c.softirq_count,
                c.thread_count
            ),
            (4, 0, 5, 0, 2)
        );
        let t = &a.noise.timerlat;
        assert_eq!(t.len(), 2);
        assert_eq!(
            (t[0].irq.count, t[0].irq.max_ns, t[0].thread.max_ns),
            (1, 5000, 9000)
        );
        assert_eq!(
            (
                t[1].irq.count,
                t[1].irq.max_ns,
                t[1].thread.count,
                t[1].thread.max_ns
            ),
            (2, 4000, 2, 12000)
        );
        assert!(t[1].thread.max_at_ns > t[1].irq.max_at_ns);
        // The latency analyses, in µs-to-ns for osnoise, over all CPUs.
        let group = |analysis: &str, key: &str| {
            a.latencies
                .iter()
                .find(|l| l.analysis == analysis)
                .and_then(|l| l.groups.iter().find(|g| g.key == key))
                .map(|g| (g.count, g.max_ns))
        };
        assert_eq!(group("osnoise", "noise"), Some((2, 70_000)));
        assert_eq!(group("osnoise", "max_single"), Some((2, 40_000)));
        assert_eq!(group("timerlat", "irq"), Some((3, 5000)));
        assert_eq!(group("timerlat", "thread"), Some((3, 12000)));
        assert!(a.noise.hwlat.is_empty() && !a.selected.contains(&AnalysisName::Hwlat));
        // The tracer's own samples answer first (osnoise before timerlat).
        assert_eq!(a.answer(), AnalysisName::Osnoise);
    }
}
