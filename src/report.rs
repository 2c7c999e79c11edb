//! Reports: counts computed from a trace.dat (ours or trace-cmd's), rendered as
//! `summary.txt` for a person and `report.json` for a machine.
//!
//! The numbers come from reading the trace.dat back, so they are exactly what
//! `trace-cmd report` shows for the same file. `report.json` is a contract: its
//! layout is [`JsonReport`], versioned by [`JSON_FORMAT_VERSION`].

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::Serialize;
use tracedat::{Record, TraceFile};

use crate::record::lost_from_stats;
use crate::workload::WorkloadExit;

/// Version of the report.json layout; bumped on any incompatible change.
pub const JSON_FORMAT_VERSION: u32 = 1;
/// How many comms and pids the "top" lists keep.
const TOP: usize = 10;

/// Counts over every record of a trace.dat.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    /// All events.
    pub total: u64,
    /// Per `system:event`.
    pub events: BTreeMap<String, u64>,
    /// Per CPU.
    pub cpus: BTreeMap<u32, u64>,
    /// Per comm (from saved cmdlines; `<...>` when unknown).
    pub comms: HashMap<String, u64>,
    /// Per pid (common_pid).
    pub pids: HashMap<i32, u64>,
    /// Lost-event records seen in the pages, per CPU (count when the kernel stored it).
    pub lost_records: BTreeMap<u32, u64>,
    /// First and last timestamp (trace clock units).
    pub span: Option<(u64, u64)>,
}

/// Reads every record of `file`. Errors: a corrupt file.
pub fn count(file: &TraceFile) -> Result<Counts, tracedat::Error> {
    let mut c = Counts::default();
    for rec in file.records() {
        match rec? {
            Record::Event(ev) => {
                c.total += 1;
                *c.events
                    .entry(format!("{}:{}", ev.format.system, ev.format.name))
                    .or_default() += 1;
                *c.cpus.entry(ev.cpu).or_default() += 1;
                let pid = ev.pid();
                *c.pids.entry(pid).or_default() += 1;
                c.span = Some(c.span.map_or((ev.ts, ev.ts), |(a, _)| (a, ev.ts)));
            }
            Record::Lost { cpu, count, .. } => {
                *c.lost_records.entry(cpu).or_default() += count.unwrap_or(0);
            }
        }
    }
    for (pid, n) in &c.pids {
        let comm = comm_of(file, *pid);
        *c.comms.entry(comm).or_default() += n;
    }
    Ok(c)
}

fn comm_of(file: &TraceFile, pid: i32) -> String {
    if pid == 0 {
        return "<idle>".to_string();
    }
    file.comm(pid).unwrap_or("<...>").to_string()
}

/// What a run adds to the counts: recipe, kernel, times and the workload.
#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    /// Recipe name.
    pub recipe: String,
    /// Kernel release (`uname -r`).
    pub kernel_release: String,
    /// Start, RFC 3339.
    pub started: String,
    /// End, RFC 3339.
    pub ended: String,
    /// Seconds between start and end.
    pub duration_s: f64,
    /// Why the run ended: `workload exited`, `duration`, `traceoff`, `max_size_mb`, `signal SIGINT`, ...
    pub stop_reason: String,
    /// The workload, if any.
    pub workload: Option<WorkloadInfo>,
}

/// The workload of a run.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadInfo {
    /// Command line.
    pub command: Vec<String>,
    /// Pid.
    pub pid: u32,
    /// How it ended.
    pub exit: WorkloadExit,
}

/// report.json, version [`JSON_FORMAT_VERSION`].
#[derive(Debug, Serialize)]
pub struct JsonReport {
    /// Layout version.
    pub format_version: u32,
    /// Recipe name (`null` for `report` on a file).
    pub recipe: Option<String>,
    /// Kernel release of the traced machine.
    pub kernel_release: Option<String>,
    /// Start, RFC 3339.
    pub started: Option<String>,
    /// End, RFC 3339.
    pub ended: Option<String>,
    /// Run duration in seconds.
    pub duration_s: Option<f64>,
    /// Why the run ended.
    pub stop_reason: Option<String>,
    /// The workload.
    pub workload: Option<WorkloadInfo>,
    /// Trace clock of the file.
    pub clock: String,
    /// Number of events.
    pub total_events: u64,
    /// Per `system:event`.
    pub events: BTreeMap<String, u64>,
    /// Per CPU (keys are CPU numbers as strings).
    pub cpus: BTreeMap<String, u64>,
    /// Most frequent comms, most first.
    pub top_comms: Vec<CommCount>,
    /// Most frequent pids, most first.
    pub top_pids: Vec<PidCount>,
    /// Lost events per CPU (keys are CPU numbers as strings).
    pub lost_events: BTreeMap<String, Lost>,
    /// Sum of all lost events.
    pub lost_total: u64,
}

/// A comm and its event count.
#[derive(Debug, Serialize)]
pub struct CommCount {
    /// Task name.
    pub comm: String,
    /// Events.
    pub count: u64,
}

/// A pid and its event count.
#[derive(Debug, Serialize)]
pub struct PidCount {
    /// Process id (common_pid).
    pub pid: i32,
    /// Its comm.
    pub comm: String,
    /// Events.
    pub count: u64,
}

/// Lost events of one CPU.
#[derive(Debug, Default, Serialize)]
pub struct Lost {
    /// `overrun` from per_cpu/cpuN/stats: events overwritten.
    pub overrun: u64,
    /// `dropped events` from stats: events dropped because the buffer was full.
    pub dropped: u64,
    /// Lost-event markers found in the recorded pages.
    pub in_pages: u64,
}

impl JsonReport {
    /// Builds the report from counts, the file (for stats and clock) and run info.
    pub fn new(file: &TraceFile, c: &Counts, run: Option<&RunInfo>) -> JsonReport {
        let mut comms: Vec<(&String, &u64)> = c.comms.iter().collect();
        comms.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut pids: Vec<(&i32, &u64)> = c.pids.iter().collect();
        pids.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut lost: BTreeMap<String, Lost> = BTreeMap::new();
        for (cpu, stats) in file.cpu_stats().iter().enumerate() {
            let (overrun, dropped) = lost_from_stats(stats);
            let cpu_no = stats_cpu(stats).unwrap_or(cpu as u32);
            let l = lost.entry(cpu_no.to_string()).or_default();
            l.overrun += overrun;
            l.dropped += dropped;
        }
        for (cpu, n) in &c.lost_records {
            lost.entry(cpu.to_string()).or_default().in_pages += n;
        }
        let lost_total = lost
            .values()
            .map(|l| l.overrun + l.dropped + l.in_pages)
            .sum();
        JsonReport {
            format_version: JSON_FORMAT_VERSION,
            recipe: run.map(|r| r.recipe.clone()),
            kernel_release: run.map(|r| r.kernel_release.clone()).or_else(|| {
                file.uname()
                    .and_then(|u| u.split_whitespace().nth(2))
                    .map(str::to_string)
            }),
            started: run.map(|r| r.started.clone()),
            ended: run.map(|r| r.ended.clone()),
            duration_s: run.map(|r| r.duration_s),
            stop_reason: run.map(|r| r.stop_reason.clone()),
            workload: run.and_then(|r| r.workload.clone()),
            clock: file.clock().to_string(),
            total_events: c.total,
            events: c.events.clone(),
            cpus: c.cpus.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            top_comms: comms
                .into_iter()
                .take(TOP)
                .map(|(comm, n)| CommCount {
                    comm: comm.clone(),
                    count: *n,
                })
                .collect(),
            top_pids: pids
                .into_iter()
                .take(TOP)
                .map(|(pid, n)| PidCount {
                    pid: *pid,
                    comm: comm_of(file, *pid),
                    count: *n,
                })
                .collect(),
            lost_events: lost,
            lost_total,
        }
    }

    /// The report for a person (summary.txt).
    pub fn summary_text(&self) -> String {
        let mut o = String::new();
        if let Some(r) = &self.recipe {
            let _ = writeln!(o, "recipe:   {r}");
        }
        if let Some(k) = &self.kernel_release {
            let _ = writeln!(o, "kernel:   {k}");
        }
        if let (Some(s), Some(e), Some(d)) = (&self.started, &self.ended, self.duration_s) {
            let _ = writeln!(o, "run:      {s} .. {e} ({d:.3} s)");
        }
        if let Some(reason) = &self.stop_reason {
            let _ = writeln!(o, "ended by: {reason}");
        }
        if let Some(w) = &self.workload {
            let _ = writeln!(
                o,
                "workload: {} (pid {}): {}",
                w.command.join(" "),
                w.pid,
                w.exit
            );
        }
        let _ = writeln!(o, "events:   {} (clock {})", self.total_events, self.clock);
        let lost: Vec<String> = self
            .lost_events
            .iter()
            .filter(|(_, l)| l.overrun + l.dropped + l.in_pages > 0)
            .map(|(cpu, l)| format!("cpu{cpu} {}", l.overrun + l.dropped + l.in_pages))
            .collect();
        let _ = writeln!(
            o,
            "lost events: {}{}",
            self.lost_total,
            if lost.is_empty() {
                String::new()
            } else {
                format!(" ({})", lost.join(", "))
            }
        );
        let _ = writeln!(o, "\nper event:");
        let width = self.events.keys().map(String::len).max().unwrap_or(0);
        for (name, n) in &self.events {
            let _ = writeln!(o, "  {name:<width$}  {n:>10}");
        }
        let _ = writeln!(o, "\nper CPU:");
        for (cpu, n) in &self.cpus {
            let _ = writeln!(o, "  cpu{cpu:<4} {n:>10}");
        }
        let _ = writeln!(o, "\ntop comms:");
        for c in &self.top_comms {
            let _ = writeln!(o, "  {:<16} {:>10}", c.comm, c.count);
        }
        let _ = writeln!(o, "\ntop pids:");
        for p in &self.top_pids {
            let _ = writeln!(o, "  {:>8} {:<16} {:>10}", p.pid, p.comm, p.count);
        }
        o
    }
}

/// The CPU number a CPUSTAT text names (`CPU: N` on its first line), if any.
fn stats_cpu(stats: &str) -> Option<u32> {
    stats
        .lines()
        .find_map(|l| l.trim().strip_prefix("CPU:")?.trim().parse().ok())
}
