//! Analyses of a trace.dat, computed in one streaming pass over its records
//! (merged in timestamp order, so memory does not grow with the file).
//!
//! | name | needs | gives |
//! |---|---|---|
//! | `counts` | any event | per event, CPU, comm and pid totals, and the same over time (`Timeline`) |
//! | `syscalls` | `syscalls:sys_enter_X` + `sys_exit_X` (or `raw_syscalls:*`) | syscall latency per syscall, paired per task |
//! | `wakeup` | `sched:sched_wakeup`/`sched_waking` + `sched:sched_switch` | wakeup-to-run latency per woken comm |
//! | `kretprobe` | a kprobe (`__probe_ip`) and a kretprobe (`__probe_func`) on one function | entry-to-return latency per function, paired per task |
//! | `funcgraph` | `ftrace:funcgraph_exit` | duration per function (`rettime - calltime`); total and self time per function (`functions`); with `funcgraph_entry`, self time per call path (`funcgraph.folded`) |
//! | `stacks` | `ftrace:kernel_stack` (or `user_stack`) | the most frequent kernel stacks and the event that took them; every stack folded (`stacks.folded`) |
//! | `irq` | `irq:irq_handler_entry` + `irq:irq_handler_exit` | handler time per handler and per interrupted task |
//! | `softirq` | `irq:softirq_entry` + `irq:softirq_exit` | softirq time per vector (`NET_RX`, `TIMER`, ...) and per interrupted task |
//! | `profile` | `sched:sched_switch` (+ wakeups, irq, softirq, page faults) | per task and CPU: running, waiting, sleeping, blocked, interrupts (`profile`) |
//! | `block` | `block:block_rq_issue` + `block:block_rq_complete` | issue-to-complete latency per device and request size (`block`) |
//! | `errno` | `syscalls:sys_exit_X` or `raw_syscalls:sys_exit` | failed syscalls by errno name, per syscall and per task (`errno`) |
//! | `kmem` | `kmem:kmalloc`/`kmem_cache_alloc` (+ `kfree`/`kmem_cache_free`) | slab allocations by symbolized call site and size, waste, outstanding bytes (`kmem`) |
//! | `faults` | `exceptions:page_fault_kernel` or `page_fault_user` | kernel page faults by the function of `ip`; user and kernel faults per task (`faults`) |
//! | `fields` | an event with telling fields (text, `__print_symbolic` enums, `%ps` symbols, `pid_t`, `sig`, ports) that no other analysis or `[[answer]]` takes | per event, the top values of those fields per task, with its parent (`fields`) |
//! | `hwlat` | `ftrace:hwlat` (the hwlat tracer's entries) | inner and outer gaps, and per CPU (`tracer.hwlat`) |
//! | `osnoise` | `ftrace:osnoise` (the osnoise tracer's entries) | noise per period, and per CPU with interference counts (`tracer.osnoise`) |
//! | `timerlat` | `ftrace:timerlat` (the timerlat tracer's entries) | IRQ and thread latency, and per CPU (`tracer.timerlat`) |
//! | `proctree` | `sched:sched_process_fork` or `sched_process_exec` (+ `sched_process_exit`, `syscalls:sys_enter_exit_group`) | the process tree: parent → child, programs exec'd, exit status, lifetime (`process_tree`) |
//!
//! The names and when each applies are in `names.rs`; each analysis is a
//! `pass::Pass` (started when selected, fed only the records of the formats
//! it handles, finished into its section), held in one field of
//! `pass::Passes`, which [`analyze_kept`] drives.
//!
//! By default every analysis whose events the file holds formats for runs
//! (`Selection::for_file`). Durations are in trace-clock units: ns for the
//! nanosecond clocks (`local`, `global`, `mono`, ...), raw ticks otherwise.

mod answer;
mod block;
mod callgraph;
mod errno;
mod faults;
mod funcgraph;
mod functime;
mod histogram;
mod kmem;
mod latency;
mod markers;
mod names;
mod noise;
mod pass;
mod proctree;
mod profile;
mod select;
mod stacks;
mod tasks;
mod telling;
mod timeline;

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use tracedat::{Record, TraceFile};

pub use answer::AnswerError;
pub(crate) use answer::{check_answers, parse_answers};
pub(crate) use block::Block;
pub(crate) use errno::Errno;
pub(crate) use faults::Faults;
pub(crate) use functime::FunctionTimes;
use histogram::Histogram;
pub(crate) use kmem::Kmem;
pub(crate) use latency::{LatencyGroup, LatencyReport, SyscallTable};
pub(crate) use markers::Markers;
#[cfg(test)]
pub(crate) use noise::tests::osnoise_timerlat_trace;
pub(crate) use noise::{HwlatCpu, NoiseTables, OsnoiseCpu, TimerlatCpu};
pub(crate) use proctree::ProcessTree;
pub(crate) use profile::Profile;
pub(crate) use stacks::{Folded, Stacks};
pub(crate) use telling::EventFields;
pub(crate) use timeline::Timeline;

use names::ANSWER_ORDER;
pub use names::{AnalysisName, Selection};
use pass::{At, Finish, Passes};
pub use select::{Select, SelectArgs, SelectError};

/// Totals over every record of a trace.dat.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counts {
    /// All events.
    pub(crate) total: u64,
    /// Per `system:event`.
    pub(crate) events: BTreeMap<String, u64>,
    /// Per CPU.
    pub(crate) cpus: BTreeMap<u32, u64>,
    /// Per comm ([`comm_of`]: saved cmdlines, else learned from the events).
    pub(crate) comms: FxHashMap<String, u64>,
    /// Comms learned from the events for pids the saved cmdlines lack.
    pub(crate) learned: tracedat::Comms,
    /// Per pid (`common_pid`).
    pub(crate) pids: FxHashMap<i32, u64>,
    /// Lost events found in the pages, per CPU (the count the kernel stored, 0
    /// when it stored none).
    pub(crate) lost_records: BTreeMap<u32, u64>,
    /// First and last timestamp (trace-clock units).
    pub(crate) span: Option<(u64, u64)>,
}

/// How many entries the "top" lists keep.
pub(crate) const TOP: usize = 10;

/// Everything one pass computes.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// The analyses that ran.
    pub(crate) selected: Vec<AnalysisName>,
    /// Totals (always computed).
    pub(crate) counts: Counts,
    /// Counts over time (`counts`).
    pub(crate) timeline: Option<Timeline>,
    /// Latency analyses, in [`AnalysisName::ALL`] order.
    pub(crate) latencies: Vec<LatencyReport>,
    /// Top stacks (`stacks`).
    pub(crate) stacks: Option<Stacks>,
    /// function_graph self time per call path (`funcgraph`, with entries recorded).
    pub(crate) funcgraph_folded: Option<Folded>,
    /// Where each task's time went (`profile`).
    pub(crate) profile: Option<Profile>,
    /// Failed syscalls by errno (`errno`).
    pub(crate) errno: Option<Errno>,
    /// Block I/O latency (`block`).
    pub(crate) block: Option<Block>,
    /// Slab allocations by call site and size (`kmem`).
    pub(crate) kmem: Option<Kmem>,
    /// Page faults, the kernel's by function (`faults`).
    pub(crate) faults: Option<Faults>,
    /// Per event no other analysis or answer takes, its telling fields'
    /// top values per task (`fields`).
    pub(crate) fields: Vec<EventFields>,
    /// Total and self time per function (`funcgraph`).
    pub(crate) functions: Option<FunctionTimes>,
    /// What was written to `trace_marker` (always collected); `None` without markers.
    pub(crate) markers: Option<Markers>,
    /// The process tree (`proctree`).
    pub(crate) proctree: Option<ProcessTree>,
    /// hwlat's, osnoise's and timerlat's per-CPU tables (`hwlat`, `osnoise`, `timerlat`).
    pub(crate) noise: NoiseTables,
    /// Per-task distributions of the latency analyses that keep them, by analysis name.
    task_latency: Vec<(String, FxHashMap<i32, Histogram>)>,
    /// Child pid → parent pid, as the trace's fork events tell.
    forks: FxHashMap<i32, i32>,
    /// The `[[answer]]` tables, in the order the answers were given.
    pub(crate) answers: Vec<(String, crate::answer::AnswerTable)>,
    /// The analyses whose section is reported ([`Analysis::section`]).
    sections: Vec<AnalysisName>,
    /// The analyses with something to show ([`Analysis::answer`]).
    shows: Vec<AnalysisName>,
}

impl Analysis {
    /// The analysis that answers the question the recorded events ask (a
    /// recipe records the events its question needs): the first in
    /// [`ANSWER_ORDER`] that ran and has something to show (a latency
    /// analysis at least one paired sample; the others a result). `counts`
    /// when none has. The summary shows it first.
    pub(crate) fn answer(&self) -> AnalysisName {
        ANSWER_ORDER
            .into_iter()
            .find(|n| {
                self.selected.contains(n) && (*n == AnalysisName::Counts || self.shows.contains(n))
            })
            .unwrap_or(AnalysisName::Counts)
    }

    /// Whether task `pid` is one of `roots` (a run's workload, `[scope] pids`)
    /// or a descendant of one, as far as the trace's
    /// `sched_process_fork`/`sched_wakeup_new` records tell.
    pub(crate) fn in_scope(&self, pid: i32, roots: &[i32]) -> bool {
        let mut p = pid;
        // Bounded walk: fork records of a hostile file may form a cycle.
        for _ in 0..64 {
            if roots.contains(&p) {
                return true;
            }
            match self.forks.get(&p) {
                Some(parent) => p = *parent,
                None => return false,
            }
        }
        false
    }

    /// The `(scope)` group of each per-task latency analysis: the samples of
    /// the tasks `in_scope` says yes to (a run's, see `report::json`), by
    /// analysis name. Analyses without a sample of such a task have none.
    pub(crate) fn scoped(&self, in_scope: &dyn Fn(i32) -> bool) -> Vec<(String, LatencyGroup)> {
        self.task_latency
            .iter()
            .filter_map(|(name, tasks)| {
                let mut h = Histogram::default();
                let mut pids: Vec<&i32> = tasks.keys().filter(|p| in_scope(**p)).collect();
                pids.sort_unstable();
                for p in pids {
                    h.merge(&tasks[p]);
                }
                (h.count() > 0).then(|| (name.clone(), LatencyGroup::of("(scope)".into(), &h)))
            })
            .collect()
    }
}

/// What a format id means to the pass.
#[derive(Default)]
struct Slot {
    /// Index into the per-event counts.
    counted: usize,
    /// Where its records name tasks, when they do ([`tracedat::Learner`]).
    learner: Option<tracedat::Learner>,
    /// The passes its records go to, decided once per format from each
    /// pass's `handles`: the others never see them.
    feeds: pass::Feeds,
}

/// CPU ids mapped to dense slots in order of first event, so that per-CPU
/// state is sized by the CPUs that have events, whatever ids a file claims.
#[derive(Debug, Default)]
struct CpuSlots {
    /// Slot of CPU id `i` below [`DIRECT_CPUS`] (`u32::MAX`: none yet).
    direct: Vec<u32>,
    /// Slot of a larger CPU id.
    other: FxHashMap<u32, usize>,
    /// The CPU id of each slot.
    ids: Vec<u32>,
}

/// CPU ids looked up without hashing: Linux's largest `NR_CPUS`.
const DIRECT_CPUS: usize = 8192;

impl CpuSlots {
    /// The slot of CPU `cpu`, given one when it is new.
    fn slot(&mut self, cpu: u32) -> usize {
        let ids = &mut self.ids;
        let c = cpu as usize;
        if c < DIRECT_CPUS {
            if c >= self.direct.len() {
                self.direct.resize(c + 1, u32::MAX);
            }
            if self.direct[c] == u32::MAX {
                self.direct[c] = ids.len() as u32;
                ids.push(cpu);
            }
            self.direct[c] as usize
        } else {
            *self.other.entry(cpu).or_insert_with(|| {
                ids.push(cpu);
                ids.len() - 1
            })
        }
    }
}

/// Runs the `selection` over every record of `file` in one pass.
/// Errors: a corrupt page or chunk ([`tracedat::Error`]).
pub fn analyze(file: &TraceFile, selection: &Selection) -> Result<Analysis, tracedat::Error> {
    analyze_kept(file, selection, None)
}

/// [`analyze`] over the records `keep` keeps (every record when `None`).
pub fn analyze_kept(
    file: &TraceFile,
    selection: &Selection,
    keep: Option<&mut Select>,
) -> Result<Analysis, tracedat::Error> {
    pass(file, &[], selection, keep)
}

/// [`analyze`] over the pieces of one rotating run (`[output] rotate`), in
/// recording order: one pass over the records of every piece, as over one
/// file. The pieces share their formats (one run wrote them); the last gives
/// the formats, task names and symbols. `None` for no pieces.
pub(crate) fn analyze_pieces(
    pieces: &[TraceFile],
    selection: &Selection,
) -> Option<Result<Analysis, tracedat::Error>> {
    let (last, before) = pieces.split_last()?;
    Some(pass(last, before, selection, None))
}

/// The analysis pass over the records of `before` (earlier pieces of the
/// same run, with the same formats), then those of `file` that `keep` keeps.
fn pass(
    file: &TraceFile,
    before: &[TraceFile],
    selection: &Selection,
    keep: Option<&mut Select>,
) -> Result<Analysis, tracedat::Error> {
    let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
    let mut slots: Vec<Slot> = (0..=max_id).map(|_| Slot::default()).collect();
    let mut passes = Passes::new(file, selection);
    // Counted index 0 is "an id with no format".
    let mut event_names = vec![String::new()];
    for f in file.formats() {
        let s = &mut slots[f.id as usize];
        s.counted = event_names.len();
        event_names.push(format!("{}:{}", f.system, f.name));
        s.learner = tracedat::Learner::of(f);
        s.feeds = passes.feeds(Some(f.id));
    }
    let unknown_feeds = passes.feeds(None);
    let mut per_event = vec![0u64; event_names.len()];
    // Per-CPU state is indexed by slot (CPUs in order of their first event),
    // never by CPU id: a file may claim CPU 0xFFFFFFF0.
    let mut cpu_slots = CpuSlots::default();
    let mut per_cpu: Vec<u64> = Vec::new();
    // Pids in order of first event, with their counts; `pid_slots` finds a pid's place.
    let mut pids: Vec<(i32, u64)> = Vec::new();
    let mut pid_slots: FxHashMap<i32, usize> = FxHashMap::default();
    let mut counts = Counts::default();
    let mut timeline = selection
        .has(AnalysisName::Counts)
        .then(|| timeline::Builder::new(event_names.len()));
    // Per CPU, the pid of its last event and that pid's slot.
    let mut cpu_pid: Vec<Option<(i32, usize)>> = Vec::new();

    // The timestamps of the first and last events (`counts.span`).
    let (mut first_ts, mut last_ts) = (None, 0);

    // The file the records come from (an earlier piece's, then `file`'s).
    let source = std::cell::Cell::new(file);
    let mut on_record = |rec: &Record<'_>| -> Result<(), tracedat::Error> {
        let ev = match rec {
            Record::Event(ev) => ev,
            Record::Lost { cpu, count, .. } => {
                *counts.lost_records.entry(*cpu).or_default() += count.unwrap_or(0);
                return Ok(());
            }
        };
        // An event's format is the one of its `common_type`, or the
        // placeholder of an unknown one.
        let slot = if source.get().is_unknown(ev.format) {
            None
        } else {
            slots.get(usize::from(ev.format.id))
        };
        let counted = slot.map_or(0, |s| s.counted);
        let feeds = slot.map_or(unknown_feeds, |s| s.feeds);
        let pid = ev.pid();
        let cpu = cpu_slots.slot(ev.cpu);
        if cpu >= per_cpu.len() {
            per_cpu.resize(cpu + 1, 0);
            cpu_pid.resize(cpu + 1, None);
        }
        // Consecutive events of a CPU are mostly of one task: the pid map is
        // asked only when the CPU's task changes.
        let pid_slot = match cpu_pid[cpu] {
            Some((p, s)) if p == pid => s,
            _ => {
                let s = *pid_slots.entry(pid).or_insert_with(|| {
                    pids.push((pid, 0));
                    pids.len() - 1
                });
                cpu_pid[cpu] = Some((pid, s));
                s
            }
        };
        if let Some(t) = timeline.as_mut() {
            let totals = timeline::Totals {
                events: &per_event,
                cpus: &per_cpu,
                pids: &pids,
            };
            t.add(ev.ts, counted, cpu, pid_slot, totals);
        }
        pids[pid_slot].1 += 1;
        per_event[counted] += 1;
        per_cpu[cpu] += 1;
        first_ts.get_or_insert(ev.ts);
        last_ts = ev.ts;
        if !feeds.none() {
            let at = At {
                file,
                ev,
                pid,
                task: pid_slot,
                cpu,
                counted,
                learned: &counts.learned,
            };
            passes.add(feeds, &at);
        }
        if let Some(l) = slot.and_then(|s| s.learner.as_ref())
            && !counts.learned.knows(l, ev)
        {
            counts.learned.learn_with(l, file, ev);
        }
        Ok(())
    };
    for piece in before {
        source.set(piece);
        piece.records().try_for_each_record(&mut on_record)?;
    }
    source.set(file);
    match keep {
        Some(k) => k.records(file).try_for_each_record(&mut on_record)?,
        None => file.records().try_for_each_record(&mut on_record)?,
    }

    counts.span = first_ts.map(|first| (first, last_ts));
    counts.total = per_cpu.iter().sum();
    for (i, n) in per_event.iter().enumerate() {
        if *n > 0 {
            let name = if i == 0 {
                "[UNKNOWN EVENT]"
            } else {
                &event_names[i]
            };
            counts.events.insert(name.to_string(), *n);
        }
    }
    for (slot, n) in per_cpu.iter().enumerate() {
        if *n > 0 {
            counts.cpus.insert(cpu_slots.ids[slot], *n);
        }
    }
    counts.pids = pids.iter().copied().collect();
    for (pid, n) in &counts.pids {
        *counts
            .comms
            .entry(comm_of(file, &counts.learned, *pid))
            .or_default() += n;
    }
    let mut out = Analysis {
        timeline: timeline.map(|t| {
            let totals = timeline::Totals {
                events: &per_event,
                cpus: &per_cpu,
                pids: &pids,
            };
            t.finish(totals, file, &counts.learned, &event_names, &cpu_slots.ids)
        }),
        ..Analysis::default()
    };
    let cx = Finish {
        file,
        sel: selection,
        learned: &counts.learned,
        event_names: &event_names,
    };
    passes.finish(&cx, &mut out);
    // In report order, whichever pass made them.
    out.latencies.sort_by_key(|l| {
        AnalysisName::ALL
            .iter()
            .position(|n| n.as_str() == l.analysis)
    });
    out.selected = (selection.names().iter().copied())
        .filter(|n| selection.explicit() || *n == AnalysisName::Counts || out.sections.contains(n))
        .collect();
    out.counts = counts;
    Ok(out)
}

/// `symbol+0xoff` through kallsyms, else `0xADDR`.
pub(crate) fn symbolize(file: &TraceFile, addr: u64) -> String {
    match file.symbol(addr) {
        Some((name, 0)) => name.to_string(),
        Some((name, off)) => format!("{name}+0x{off:x}"),
        None => format!("0x{addr:x}"),
    }
}

/// The function `addr` falls in, through kallsyms (no offset: a call site or
/// a function_graph `func`, which on kernels with IBT is the function's
/// address + 4), else `0xADDR`.
pub(crate) fn function_name(file: &TraceFile, addr: u64) -> String {
    match file.symbol(addr) {
        Some((name, _)) => name.to_string(),
        None => format!("0x{addr:x}"),
    }
}

/// The comm of `pid`: saved cmdlines, else learned from the events
/// (`learned`), `<idle>` for pid 0, else `<...>`.
pub(crate) fn comm_of(file: &TraceFile, learned: &tracedat::Comms, pid: i32) -> String {
    match learned.get(file, pid) {
        Some(c) => c.to_string(),
        None if pid == 0 => "<idle>".to_string(),
        None => "<...>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    //! kretprobe and function_graph cannot be recorded on this workplace's
    //! kernel; these tests write a trace.dat with the tracedat writer from
    //! hand-made pages instead.

    use super::*;
    use tracedat::testing::{Endian, Page, event_format};
    use tracedat::{CaptureMeta, CpuData};

    const E: Endian = Endian::LITTLE64;

    fn format(name: &str, id: u16, fields: &str) -> Vec<u8> {
        event_format(name, id, fields, "\"\"").into_bytes()
    }

    /// One page of CPU 0 holding `events` (time delta in ns, payload), written
    /// to `dir`/cpu0.raw.
    fn cpu0_raw(dir: &std::path::Path, events: &[(u32, Vec<u8>)]) -> std::path::PathBuf {
        let raw = dir.join("cpu0.raw");
        let mut page = Page::new(E, 4096, 1_000_000);
        for (delta, p) in events {
            page.event(*delta, p);
        }
        std::fs::write(&raw, page.finish(None)).unwrap();
        raw
    }

    fn payload(id: u16, pid: i32, words: &[u64]) -> Vec<u8> {
        tracedat::testing::payload(E, id, pid, words)
    }

    /// Capture facts of a test file of `cpus` CPUs: `event_formats` by
    /// system and the saved `cmdlines`; no kallsyms, printk formats or
    /// ftrace formats.
    fn meta(event_formats: Vec<(String, Vec<Vec<u8>>)>, cmdlines: &[u8], cpus: u32) -> CaptureMeta {
        CaptureMeta {
            header_page: E.header_page(4096).into_bytes(),
            event_formats,
            cmdlines: cmdlines.to_vec(),
            cpu_count: cpus,
            trace_clock: "[local] global".into(),
            uname: "Linux t 6.0 x86_64".into(),
            version: "test".into(),
            cpu_stats: vec![String::new(); cpus as usize],
            ..CaptureMeta::default()
        }
    }

    #[test]
    fn per_cpu_state_is_sized_by_the_cpus_that_have_events() {
        let mut s = super::CpuSlots::default();
        assert_eq!(s.slot(0xFFFF_FFF0), 0);
        assert_eq!(s.slot(3), 1);
        assert_eq!(s.slot(0xFFFF_FFF0), 0);
        assert_eq!(s.ids, [0xFFFF_FFF0, 3]);
        assert!(s.direct.len() <= 4);
    }

    /// The profile keeps per-CPU state by dense slot and reports each CPU by
    /// its id: a switch on CPU 8999 (past the directly indexed ids) and one
    /// on CPU 1 give two rows, CPU 1 first.
    #[test]
    fn the_profile_reports_cpus_by_id_whatever_their_slot() {
        let dir = tempfile::tempdir().unwrap();
        let switch = |prev: u64, next: u64| payload(20, prev as i32, &[prev, 1, next]);
        let mut cpus = Vec::new();
        for (cpu, ts) in [(8999u32, 1_000_000u64), (1, 2_000_000)] {
            let raw = dir.path().join(format!("cpu{cpu}.raw"));
            let mut page = Page::new(E, 4096, ts);
            page.event(10, &switch(7, 8));
            page.event(100, &switch(8, 7));
            std::fs::write(&raw, page.finish(None)).unwrap();
            cpus.push(CpuData { cpu, path: raw });
        }
        let meta = meta(
            vec![(
                "sched".into(),
                vec![format(
                    "sched_switch",
                    20,
                    "\tfield:int prev_pid;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:long prev_state;\toffset:16;\tsize:8;\tsigned:1;\n\tfield:int next_pid;\toffset:24;\tsize:4;\tsigned:1;\n",
                )],
            )],
            b"7 a\n8 b\n",
            9000,
        );
        let dat = dir.path().join("t.dat");
        tracedat::write_v6(std::fs::File::create(&dat).unwrap(), &meta, &cpus).unwrap();
        let file = TraceFile::open(&dat).unwrap();
        let a = analyze(&file, &Selection::for_file(&file)).unwrap();
        let p = a.profile.as_ref().expect("a profile from sched_switch");
        let ids: Vec<u32> = p.cpus.iter().map(|c| c.cpu).collect();
        assert_eq!(ids, [1, 8999]);
        assert!(p.cpus.iter().all(|c| c.switches == 2), "{:?}", p.cpus);
    }

    /// A task switched out twice with no switch in between lost that switch
    /// in (the kernel's pid list drops some): the profile counts it, and the
    /// summary says so in the profile and wakeup sections and marks the
    /// task's running time as a lower bound instead of printing it bare.
    #[test]
    fn a_switch_out_without_its_switch_in_is_said_not_hidden() {
        let dir = tempfile::tempdir().unwrap();
        let switch = |prev: u64, state: u64, next: u64| {
            let comm: &[u8; 8] = if next == 7 {
                b"worker\0\0"
            } else {
                b"other\0\0\0"
            };
            let comm = u64::from_le_bytes(*comm);
            payload(20, prev as i32, &[prev, state, next, comm, 0])
        };
        let raw = dir.path().join("cpu0.raw");
        let mut page = Page::new(E, 4096, 1_000_000);
        page.event(10, &switch(8, 0, 7)); // 7 in
        page.event(100, &switch(7, 1, 8)); // 7 out, sleeping
        page.event(40, &payload(21, 8, &[7])); // 7 woken
        // 7's switch in here is lost.
        page.event(60, &switch(7, 1, 8)); // 7 out again
        page.event(50, &switch(8, 0, 7)); // 7 in
        page.event(50, &switch(7, 1, 8)); // 7 out
        page.event(20, &payload(21, 8, &[7])); // 7 woken
        page.event(30, &switch(8, 0, 7)); // 7 in: a wakeup latency
        std::fs::write(&raw, page.finish(None)).unwrap();
        let meta = meta(
            vec![(
                "sched".into(),
                vec![
                    format(
                        "sched_switch",
                        20,
                        "\tfield:int prev_pid;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:long prev_state;\toffset:16;\tsize:8;\tsigned:1;\n\tfield:int next_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:char next_comm[16];\toffset:32;\tsize:16;\tsigned:0;\n",
                    ),
                    format(
                        "sched_wakeup",
                        21,
                        "\tfield:int pid;\toffset:8;\tsize:4;\tsigned:1;\n",
                    ),
                ],
            )],
            b"7 worker\n8 other\n",
            1,
        );
        let file = one_cpu_file(dir.path(), &meta, raw);
        let a = analyze(&file, &Selection::for_file(&file)).unwrap();
        let p = a.profile.as_ref().unwrap().listed(None);
        let missing = |pid: i32| {
            p.tasks
                .iter()
                .find(|t| t.pid == pid)
                .map(|t| t.switch_ins_missing)
        };
        assert_eq!((missing(7), missing(8)), (Some(1), Some(0)), "{p:?}");
        assert_eq!((p.switch_ins_missing, p.tasks_missing_switch_ins), (1, 1));
        // A scoped run judges its own tasks only.
        let scoped = a.profile.as_ref().unwrap().listed(Some(&|pid| pid == 8));
        assert_eq!(scoped.switch_ins_missing, 0, "{scoped:?}");
        let r = crate::report::JsonReport::new(&file, &a, None);
        let summary = crate::recipe::Template::builtin().render(&r).unwrap();
        let note = "note: 1 switch out of 1 task came with no switch in since the one before";
        let section = |name: &str| {
            summary
                .split("\n\n")
                .find(|s| s.starts_with(name))
                .unwrap_or_else(|| panic!("no {name} section: {summary}"))
        };
        assert!(section("profile:").contains(note), "{summary}");
        assert!(section("wakeup:").contains(note), "{summary}");
        assert!(
            section("profile:")
                .lines()
                .any(|l| l.contains(" worker ") && l.contains(">150ns")),
            "{summary}"
        );
    }

    /// `meta` with CPU 0's records `raw`, written as `t.dat` in `dir` and opened.
    fn one_cpu_file(
        dir: &std::path::Path,
        meta: &CaptureMeta,
        raw: std::path::PathBuf,
    ) -> TraceFile {
        let dat = dir.join("t.dat");
        tracedat::write_v6(
            std::fs::File::create(&dat).unwrap(),
            meta,
            &[CpuData { cpu: 0, path: raw }],
        )
        .unwrap();
        TraceFile::open(&dat).unwrap()
    }

    /// A file of `raw_syscalls:sys_exit` records (id 21: `long id`, `long
    /// ret`) of pid 7 on CPU 0, one per (id, ret), 10 ns apart.
    fn raw_exits(dir: &std::path::Path, exits: &[(i64, i64)]) -> TraceFile {
        let raw = dir.join("cpu0.raw");
        let mut page = Page::new(E, 4096, 1_000_000);
        for (nr, ret) in exits {
            page.event(10, &payload(21, 7, &[*nr as u64, *ret as u64]));
        }
        std::fs::write(&raw, page.finish(None)).unwrap();
        let meta = meta(
            vec![(
                "raw_syscalls".into(),
                vec![format(
                    "sys_exit",
                    21,
                    "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n",
                )],
            )],
            b"7 worker\n",
            1,
        );
        one_cpu_file(dir, &meta, raw)
    }

    /// Raw syscall ids find their rows by index below 1024 and in a map
    /// otherwise (negative ones too); either way a syscall's exits and
    /// failures add up in one row, and at most `MAX_KEYS` syscalls get one.
    #[test]
    fn errno_rows_by_raw_syscall_id() {
        let dir = tempfile::tempdir().unwrap();
        let exits = [
            (2, -2),
            (5000, -13),
            (2, 3),
            (-1, -1),
            (2, -2),
            (5000, 0),
            (-1, -1),
        ];
        let file = raw_exits(dir.path(), &exits);
        let a = analyze(&file, &Selection::for_file(&file)).unwrap();
        let e = a.errno.expect("errno from raw_syscalls:sys_exit");
        assert_eq!((e.exits, e.failed, e.untracked), (7, 5, 0));
        let rows: Vec<(&str, u64, u64)> = (e.syscalls.iter())
            .map(|s| (s.syscall.as_str(), s.calls, s.failed))
            .collect();
        assert_eq!(rows, [("NR -1", 2, 2), ("open", 3, 2), ("NR 5000", 2, 1)]);

        let mut errors = errno::Errors::new(&file);
        let raw = |nr: usize| {
            if nr.is_multiple_of(2) {
                nr as i64
            } else {
                -(nr as i64)
            }
        };
        for nr in 0..errno::MAX_KEYS + 10 {
            let row = errors.row((u32::MAX, raw(nr))).map(|r| r.0);
            let want = (nr < errno::MAX_KEYS).then_some((u32::MAX, raw(nr)));
            assert_eq!(row, want, "{nr}");
        }
        assert!(
            errors.row((u32::MAX, raw(1))).is_some(),
            "a row once made stays"
        );
        assert!(
            errors.row((21, 0)).is_none(),
            "no room for a sys_exit_X either"
        );
    }

    /// `by = ["stack"]` over a file of switches, each followed by the
    /// kernel_stack its stacktrace trigger wrote: keyed as the kernel's hist
    /// `stacktrace` prints it (ftrace's own frames skipped, the innermost 16
    /// kept, by function, outermost first), past an interrupt's record in
    /// between; a switch with no stack after it is not counted, and said.
    #[test]
    fn answers_key_by_the_kernel_stack_after_the_event() {
        let dir = tempfile::tempdir().unwrap();
        let base = 0xffff_ffff_8100_0000u64;
        // Functions 0..=4: ftrace's two, __schedule, schedule, do_nanosleep;
        // 5..=22: f0 (innermost) .. f17 of a deep stack.
        let mut names: Vec<String> = [
            "trace_event_raw_event_sched_switch",
            "__traceiter_sched_switch",
            "__schedule",
            "schedule",
            "do_nanosleep",
        ]
        .map(String::from)
        .to_vec();
        names.extend((0..18).map(|i| format!("f{i}")));
        let at = |i: usize, off: u64| base + 0x100 * i as u64 + off;
        let kallsyms: String = (names.iter().enumerate())
            .map(|(i, n)| format!("{:016x} T {n}\n", at(i, 0)))
            .collect();
        let switch = |pid: i32| payload(40, pid, &[pid as u64]);
        let stack = |frames: &[u64]| {
            let mut w = vec![frames.len() as u64];
            w.extend(frames);
            payload(12, 0, &w)
        };
        let short =
            |off: u64| stack(&[at(0, 0x10), at(1, 0x8), at(2, off), at(3, 0x4), at(4, 0x8)]);
        let deep: Vec<u64> = (0..23).map(|i| at(i, 0x4)).collect();
        // A hard irq's record between a switch and its stack (the stack is
        // written in the switch's context): the stack is still the switch's.
        let mut irq = payload(41, 7, &[0]);
        irq[2] = 0x08;
        let events = vec![
            (1_000, switch(7)),
            (0, irq),
            (0, short(0x20)),
            (1_000, switch(8)),
            // Another call site in __schedule: the same functions, the same row.
            (0, short(0x40)),
            (1_000, switch(9)),
            (1_000, switch(10)),
            (0, stack(&deep)),
        ];
        let raw = cpu0_raw(dir.path(), &events);
        let meta = CaptureMeta {
            ftrace_formats: vec![format(
                "kernel_stack",
                12,
                "\tfield:int size;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;\n",
            )],
            kallsyms: kallsyms.into_bytes(),
            ..meta(
                vec![(
                    "sched".into(),
                    vec![
                        format(
                            "sched_switch",
                            40,
                            "\tfield:long prev_pid;\toffset:8;\tsize:8;\tsigned:1;\n",
                        ),
                        format(
                            "irq_like",
                            41,
                            "\tfield:long irq;\toffset:8;\tsize:8;\tsigned:1;\n",
                        ),
                    ],
                )],
                b"",
                1,
            )
        };
        let file = one_cpu_file(dir.path(), &meta, raw);
        let text =
            "[[answer]]\nname = \"stacks\"\nevent = \"sched:sched_switch\"\nby = [\"stack\"]\n";
        let answers = parse_answers(std::path::Path::new("a.toml"), text).unwrap();
        assert!(check_answers(&file, &answers).is_empty());
        let a = analyze(&file, &Selection::for_file(&file).with_answers(answers)).unwrap();
        let t = &a.answers[0].1;
        let rows: Vec<(String, u64)> = (t.rows.iter())
            .map(|r| (r.keys[0].clone(), r.count))
            .collect();
        // 16 frames: __schedule, schedule, do_nanosleep and f0..=f12.
        let deep_key: Vec<String> = (0..13).rev().map(|i| format!("f{i}")).collect();
        let deep_key = format!("{};do_nanosleep;schedule;__schedule", deep_key.join(";"));
        assert_eq!(
            rows,
            [
                ("do_nanosleep;schedule;__schedule".to_string(), 2),
                (deep_key, 1)
            ]
        );
        assert!(
            t.notes
                .iter()
                .any(|n| n.starts_with("1 events had no kernel stack")),
            "{:?}",
            t.notes
        );
    }

    /// The syscall table answers which syscall costs the most time: each
    /// group has its total, and the groups come by total time, not by count
    /// (three 1 µs openat calls after one 10 µs read).
    #[test]
    fn syscalls_come_by_total_time_with_their_total() {
        let dir = tempfile::tempdir().unwrap();
        let call = |id: u16| payload(id, 7, &[0]);
        let mut events = vec![(1_000, call(30)), (10_000, call(31))];
        for _ in 0..3 {
            events.extend([(1_000, call(32)), (1_000, call(33))]);
        }
        let raw = cpu0_raw(dir.path(), &events);
        let long = |n: &str| format!("\tfield:long {n};\toffset:8;\tsize:8;\tsigned:1;\n");
        let meta = meta(
            vec![(
                "syscalls".into(),
                vec![
                    format("sys_enter_read", 30, &long("fd")),
                    format("sys_exit_read", 31, &long("ret")),
                    format("sys_enter_openat", 32, &long("dfd")),
                    format("sys_exit_openat", 33, &long("ret")),
                ],
            )],
            b"7 worker\n",
            1,
        );
        let file = one_cpu_file(dir.path(), &meta, raw);
        let a = analyze(&file, &Selection::for_file(&file)).unwrap();
        let l = (a.latencies.iter())
            .find(|l| l.analysis == "syscalls")
            .expect("syscall latency");
        let groups: Vec<(&str, u64, u64)> = (l.groups.iter())
            .map(|g| (g.key.as_str(), g.count, g.total_ns))
            .collect();
        assert_eq!(groups, [("read", 1, 10_000), ("openat", 3, 3_000)]);
    }

    /// `[[answer]]` over a file of openat enters and exits: a span keyed by
    /// `errno(ret)` with its latency, and one event by comm with a sum and a
    /// `where` naming an errno, as the records below add up by hand.
    #[test]
    fn answers_pair_spans_per_task_and_aggregate_one_event() {
        let dir = tempfile::tempdir().unwrap();
        let enter = |pid: i32| payload(30, pid, &[3]);
        let exit = |pid: i32, ret: i64| payload(31, pid, &[ret as u64]);
        let events = vec![
            (1_000, enter(7)),
            (2_000, exit(7, 3)),
            (1_000, enter(7)),
            (1_000, enter(8)),
            (1_000, exit(8, -2)),
            (4_000, exit(7, -2)),
            (1_000, exit(8, -13)),
            (1_000, enter(9)),
            (3_000, exit(9, -13)),
        ];
        let raw = cpu0_raw(dir.path(), &events);
        let long = |n: &str| format!("\tfield:long {n};\toffset:8;\tsize:8;\tsigned:1;\n");
        let meta = meta(
            vec![(
                "syscalls".into(),
                vec![
                    format("sys_enter_openat", 30, &long("dfd")),
                    format("sys_exit_openat", 31, &long("ret")),
                ],
            )],
            b"7 worker\n8 other\n9 other\n",
            1,
        );
        let file = one_cpu_file(dir.path(), &meta, raw);
        let text = r#"
            [[answer]]
            name = "opens"
            question = "How long do openat calls take, by result?"
            from = "syscalls:sys_enter_openat"
            to = "syscalls:sys_exit_openat"
            by = ["errno(ret)"]

            [[answer]]
            name = "failures"
            event = "syscalls:sys_exit_openat"
            by = ["common_comm"]
            values = ["count", "sum(ret)"]
            where = "ret < 0"

            [[answer]]
            name = "missing"
            event = "syscalls:sys_exit_openat"
            where = "ret == -ENOENT"
        "#;
        let answers = parse_answers(std::path::Path::new("a.toml"), text).unwrap();
        assert!(check_answers(&file, &answers).is_empty());
        let sel = Selection::for_file(&file).with_answers(answers);
        let a = analyze(&file, &sel).unwrap();
        let table = |n: &str| &a.answers.iter().find(|(name, _)| name == n).unwrap().1;
        let cell = |c: &crate::answer::Cell| match c {
            crate::answer::Cell::Int(n) => *n,
            other => panic!("{other:?}"),
        };

        let opens = table("opens");
        let rows: Vec<(Vec<String>, u64)> = (opens.rows.iter())
            .map(|r| (r.keys.clone(), r.count))
            .collect();
        assert_eq!(
            rows,
            [
                (vec!["-ENOENT".to_string()], 2),
                (vec!["-EACCES".to_string()], 1),
                (vec!["3".to_string()], 1)
            ]
        );
        // ENOENT: pid 8's 1 µs and pid 7's 6 µs (from its second enter);
        // pid 8's -13 has no open enter.
        let crate::answer::Cell::Latency(l) = &opens.rows[0].cells[1] else {
            panic!("{:?}", opens.rows[0].cells)
        };
        assert_eq!((l.min_us, l.max_us, l.total_us), (1.0, 6.0, 7.0));
        let buckets: Vec<(u32, u64)> = l.buckets.iter().map(|b| (b.log2, b.count)).collect();
        assert_eq!(buckets, [(0, 1), (3, 1)]);
        assert_eq!(opens.total.count, 4);
        assert_eq!(
            opens.question.as_deref(),
            Some("How long do openat calls take, by result?")
        );
        assert!(
            opens.notes.iter().any(|n| n.starts_with("1 `to` events")),
            "{:?}",
            opens.notes
        );

        let failures = table("failures");
        let rows: Vec<(Vec<String>, u64, i64)> = (failures.rows.iter())
            .map(|r| (r.keys.clone(), r.count, cell(&r.cells[1])))
            .collect();
        assert_eq!(
            rows,
            [
                (vec!["other".to_string()], 3, -28),
                (vec!["worker".to_string()], 1, -2)
            ]
        );
        assert_eq!(table("missing").total.count, 2);
    }

    #[test]
    fn kretprobe_and_funcgraph_durations_pair_per_task_and_function() {
        let dir = tempfile::tempdir().unwrap();
        let f = 0xffff_ffff_8100_1000u64;
        // pid 7: entry, nested entry, return (inner: 100), return (outer: 400);
        // pid 8: entry, return (250); a return with no entry; funcgraph 30 and 50 ns
        // in a 1200 ns call of next_fn.
        let events = vec![
            (10, payload(300, 7, &[f])),
            (100, payload(300, 7, &[f])),
            (100, payload(301, 7, &[f, 0x1234, (-2i64) as u64])),
            (0, payload(300, 8, &[f])),
            (200, payload(301, 7, &[f, 0x1234, (-2i64) as u64])),
            (50, payload(301, 8, &[f, 0x1234, 3])),
            (10, payload(301, 9, &[f, 0x1234, 4])),
            // function_graph of pid 7: next_fn { do_sys_open (30); do_sys_open (50) } 1200.
            // Its `func` is the function's patch site, as on arm64 (and x86
            // with IBT): the address + 4, named without the offset.
            (1, payload(11, 7, &[f + 0x104, 0])),
            (1, payload(11, 7, &[f + 4, 1])),
            (5, payload(10, 7, &[f + 4, 1, 1000, 1030])),
            (1, payload(11, 7, &[f + 4, 1])),
            (5, payload(10, 7, &[f + 4, 1, 2000, 2050])),
            (5, payload(10, 7, &[f + 0x104, 0, 900, 2100])),
            // pid 8 returns from a call whose entry was before the trace.
            (5, payload(10, 8, &[f + 4, 2, 3000, 3010])),
        ];
        let raw = cpu0_raw(dir.path(), &events);
        let meta = CaptureMeta {
            ftrace_formats: vec![
                format(
                    "funcgraph_exit",
                    10,
                    "\tfield:unsigned long func;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:unsigned int depth;\toffset:16;\tsize:4;\tsigned:0;\n\tfield:unsigned int overrun;\toffset:20;\tsize:4;\tsigned:0;\n\tfield:unsigned long long calltime;\toffset:24;\tsize:8;\tsigned:0;\n\tfield:unsigned long long rettime;\toffset:32;\tsize:8;\tsigned:0;\n",
                ),
                format(
                    "funcgraph_entry",
                    11,
                    "\tfield:unsigned long func;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:unsigned int depth;\toffset:16;\tsize:4;\tsigned:0;\n",
                ),
            ],
            kallsyms: format!(
                "{f:016x} T do_sys_open\n{:016x} T next_fn\n{:016x} T after_next_fn\n",
                f + 0x100,
                f + 0x200
            )
            .into_bytes(),
            ..meta(
                vec![(
                    "kprobes".into(),
                    vec![
                        format(
                            "open_entry",
                            300,
                            "\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n",
                        ),
                        format(
                            "open_return",
                            301,
                            "\tfield:unsigned long __probe_func;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:unsigned long __probe_ret_ip;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:s64 ret;\toffset:24;\tsize:8;\tsigned:1;\n",
                        ),
                    ],
                )],
                b"7 worker\n8 other\n",
                1,
            )
        };
        let file = one_cpu_file(dir.path(), &meta, raw);
        let a = analyze(&file, &Selection::for_file(&file)).unwrap();
        // The call paths come out the same when the path tree fills up at
        // once (only the root, or one node): the paths it has no node for
        // are found by their functions. The pids (7, 8) serve as pid slots.
        for nodes in [1, 2] {
            let calls = funcgraph::Decoder::new(&file);
            let mut c = callgraph::CallPaths::new(&calls)
                .unwrap()
                .with_node_limit(nodes);
            file.records()
                .try_for_each_record(|r| -> Result<(), tracedat::Error> {
                    if let Record::Event(ev) = r
                        && let Some(call) = calls.decode(ev)
                    {
                        c.add(&call, ev.pid() as usize);
                    }
                    Ok(())
                })
                .unwrap();
            assert_eq!(
                c.finish(&file).text(),
                "[unknown];[unknown];do_sys_open 10\nnext_fn 1120\nnext_fn;do_sys_open 80\n",
                "a tree of {nodes} nodes"
            );
        }
        assert_eq!(
            a.selected,
            [
                AnalysisName::Counts,
                AnalysisName::Kretprobe,
                AnalysisName::Funcgraph,
                AnalysisName::Errno
            ]
        );
        // The kretprobe's `ret` (a `fetch` of `$retval`): pid 7's two -2.
        let e = a.errno.as_ref().unwrap();
        assert_eq!((e.exits, e.failed), (4, 2));
        let s = &e.syscalls[0];
        assert_eq!(
            (s.syscall.as_str(), s.calls, s.failed),
            ("open_return", 4, 2)
        );
        assert_eq!(
            (s.errors[0].errno.as_str(), s.errors[0].count),
            ("ENOENT", 2)
        );
        assert_eq!((e.tasks[0].pid, e.tasks[0].count), (7, 2));
        assert_eq!(a.answer(), AnalysisName::Errno);
        let kret = &a.latencies[0];
        assert_eq!(kret.analysis, "kretprobe");
        assert_eq!(kret.unpaired, 1);
        let g = &kret.groups[0];
        assert_eq!((g.key.as_str(), g.count), ("do_sys_open", 3));
        assert_eq!((g.min_ns, g.p50_ns, g.max_ns), (100, 250, 400));
        let fg = &a.latencies[1];
        assert_eq!(fg.analysis, "funcgraph");
        let g = &fg.groups[0];
        assert_eq!(
            (g.key.as_str(), g.count, g.min_ns, g.max_ns),
            ("do_sys_open", 3, 10, 50)
        );
        // The call paths: each return's self time (its callees' time taken
        // out) on the path its task's entries built.
        assert_eq!(
            a.funcgraph_folded.unwrap().text(),
            "[unknown];[unknown];do_sys_open 10\nnext_fn 1120\nnext_fn;do_sys_open 80\n"
        );
        let t = a.functions.as_ref().unwrap();
        let rows: Vec<(&str, u64, u64, u64, u64)> = t
            .functions
            .iter()
            .map(|f| {
                (
                    f.function.as_str(),
                    f.count,
                    f.total_ns,
                    f.self_ns,
                    f.max_ns,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("next_fn", 1, 1200, 1120, 1200),
                ("do_sys_open", 3, 90, 90, 50)
            ]
        );
        assert_eq!((t.calls, t.untracked), (4, 0));
        assert_eq!(a.counts.total, 14);
    }

    /// A task missing from saved_cmdlines is named by task_newtask, then
    /// task_rename: in the text, in the counts, and (through the cmdlines
    /// the recorder adds) in `trace-cmd report` of the file.
    #[test]
    fn comms_are_learned_from_events_that_name_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let comm = |s: &str| {
            let mut b = s.as_bytes().to_vec();
            b.resize(16, 0);
            b
        };
        let mut newtask = payload(20, 7, &[]);
        newtask.extend(42i32.to_le_bytes());
        newtask.extend(comm("newkid"));
        newtask.resize(32, 0);
        let mut rename = payload(21, 42, &[]);
        rename.extend(42i32.to_le_bytes());
        rename.extend(comm("newkid"));
        rename.extend(comm("renamed"));
        rename.resize(48, 0);
        // A task_newtask by `parent` naming `child`.
        let named = |parent: i32, child: i32, name: &str| {
            let mut p = payload(20, parent, &[]);
            p.extend(child.to_le_bytes());
            p.extend(comm(name));
            p.resize(32, 0);
            p
        };
        let big = 5_000_000; // past the pids settled by a bit
        let events = vec![
            (10, payload(22, 42, &[0])),
            (10, newtask),
            (10, payload(22, 42, &[0])),
            (10, rename),
            (10, payload(22, 42, &[0])),
            (10, payload(22, 42, &[0])),
            // Names that change nothing: the saved cmdlines' pid 7, a pid
            // learned already; a big pid keeps its first name too.
            (10, named(7, 7, "imposter")),
            (10, named(42, 42, "again")),
            (10, named(42, big, "big")),
            (10, named(42, big, "bigger")),
            (10, payload(22, big, &[0])),
            (10, payload(22, 7, &[0])),
        ];
        let raw = cpu0_raw(dir.path(), &events);
        let meta = meta(
            vec![
                (
                    "task".into(),
                    vec![
                        format(
                            "task_newtask",
                            20,
                            "\tfield:pid_t pid;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:char comm[16];\toffset:12;\tsize:16;\tsigned:0;\n",
                        ),
                        format(
                            "task_rename",
                            21,
                            "\tfield:pid_t pid;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:char oldcomm[16];\toffset:12;\tsize:16;\tsigned:0;\n\tfield:char newcomm[16];\toffset:28;\tsize:16;\tsigned:0;\n",
                        ),
                    ],
                ),
                (
                    "x".into(),
                    vec![format(
                        "tick",
                        22,
                        "\tfield:unsigned long n;\toffset:8;\tsize:8;\tsigned:0;\n",
                    )],
                ),
            ],
            b"7 worker\n",
            1,
        );
        let cpus = [CpuData { cpu: 0, path: raw }];
        let write = |path: &std::path::Path, meta: &CaptureMeta| {
            tracedat::write_v6(std::fs::File::create(path).unwrap(), meta, &cpus).unwrap();
            TraceFile::open(path).unwrap()
        };
        let file = write(&dir.path().join("t.dat"), &meta);
        // The text listing names tasks as trace-cmd does: saved cmdlines, then
        // sched_switch/sched_wakeup* only, so newtask and rename leave pid 42
        // and the big pid unnamed there.
        let heads = |file: &TraceFile| -> Vec<String> {
            let mut printer = tracedat::Printer::new(file);
            let mut text = Vec::new();
            for rec in file.records() {
                printer.write(&rec.unwrap(), &mut text).unwrap();
            }
            printer.finish(&mut text).unwrap();
            String::from_utf8(text)
                .unwrap()
                .lines()
                .map(|l| l.split(" [").next().unwrap().trim().to_string())
                .collect()
        };
        let trace_cmd_heads = |path: &std::path::Path| -> Vec<String> {
            let out = std::process::Command::new("trace-cmd")
                .arg("report")
                .arg(path)
                .output()
                .expect("trace-cmd is installed");
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.contains(": tick:") || l.contains(": task_"))
                .map(|l| l.split(" [").next().unwrap().trim().to_string())
                .collect()
        };
        let ours = heads(&file);
        assert_eq!(ours, trace_cmd_heads(&dir.path().join("t.dat")));
        assert_eq!(ours.iter().filter(|h| *h == "worker-7").count(), 3);
        assert!(
            ours.iter()
                .all(|h| h == "worker-7" || h.starts_with("<...>-"))
        );
        let a = analyze(&file, &Selection::for_file(&file)).unwrap();
        assert_eq!(a.counts.comms.get("renamed"), Some(&8));
        assert_eq!(a.counts.comms.get("worker"), Some(&3));
        assert_eq!(a.counts.comms.get("big"), Some(&1));
        assert_eq!(a.counts.comms.get("<...>"), None);

        let learned = tracedat::Comms::of_file(&file).unwrap();
        let cmdlines = learned.extend_cmdlines(&meta.cmdlines);
        assert_eq!(cmdlines, b"7 worker\n42 renamed\n5000000 big\n");
        // The recorder's trace.dat writer adds them to the cmdlines section.
        let out = crate::output::OutputDir::create(
            &dir.path().join("out"),
            std::path::Path::new("/sys/kernel/tracing"),
        )
        .unwrap();
        let merged = out
            .write_trace_dat("trace.dat", &meta, &cpus, false)
            .unwrap();
        // With those comms in its cmdlines, both listings name them.
        let theirs = trace_cmd_heads(&merged);
        assert_eq!(theirs.iter().filter(|h| *h == "renamed-42").count(), 8);
        assert_eq!(theirs.iter().filter(|h| *h == "big-5000000").count(), 1);
        assert_eq!(heads(&TraceFile::open(&merged).unwrap()), theirs);
    }
}
