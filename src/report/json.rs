//! report.json: the numbers of one trace.dat (ours or trace-cmd's) plus what
//! the run knew, for a machine. Every other format (summary.txt through its
//! template, report.html) renders this same value, so they show the same numbers.
//!
//! The layout is a contract, versioned by [`JSON_FORMAT_VERSION`] and described
//! field by field by `schema/report.schema.json` (`trace-recipe schema --report`).
//! Fields are only ever added; a rename or removal bumps the version.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tracedat::TraceFile;

use crate::analysis::{Analysis, LatencyReport, Profile, Stacks, TOP, Timeline, comm_of};
use crate::tracefs::lost_from_stats;
use crate::workload::WorkloadExit;

/// Version of the report.json layout; bumped on any incompatible change.
pub const JSON_FORMAT_VERSION: u32 = 1;

/// What a run adds to the counts: recipe, kernel, times and the workload.
#[derive(Debug, Clone, Serialize, JsonSchema, Deserialize)]
pub struct RunInfo {
    /// Recipe name.
    pub(crate) recipe: String,
    /// Kernel release (`uname -r`).
    pub(crate) kernel_release: String,
    /// Start, RFC 3339.
    pub(crate) started: String,
    /// End, RFC 3339.
    pub(crate) ended: String,
    /// Seconds recorded: from tracing on to the stop (less than `started` ..
    /// `ended`, which also spans validation, setup and teardown).
    pub(crate) duration_s: f64,
    /// Why the run ended: `workload exited`, `duration`, `traceoff`, `max_size_mb`, `signal SIGINT`, ...
    pub(crate) stop_reason: String,
    /// The workload, if any.
    pub(crate) workload: Option<WorkloadInfo>,
    /// Which tasks the run recorded.
    pub(crate) scope: ScopeInfo,
    /// What the recorder read.
    pub(crate) recorder: RecorderInfo,
}

/// Which tasks a run recorded, by the scoping rule of recipe-format 1.2
/// (`validate::scope`): the events of these tasks. An analysis that answers
/// for "the run's tasks" keeps those whose task is one of `pids` (and, with
/// `follow_forks`, their descendants) or is named one of `comms`; with
/// `system_wide` or nothing scoped, every task is the run's.
#[derive(Debug, Clone, Default, Serialize, JsonSchema, Deserialize)]
pub(crate) struct ScopeInfo {
    /// `[scope] system_wide`: every task was recorded while the workload ran.
    pub(crate) system_wide: bool,
    /// Scoped process ids: `[scope] pids`, then the workload's (unless `system_wide`).
    pub(crate) pids: Vec<u32>,
    /// `[scope] comms`: scoped task names.
    pub(crate) comms: Vec<String>,
    /// `[scope] follow_forks`: children of scoped pids were recorded too.
    pub(crate) follow_forks: bool,
}

impl ScopeInfo {
    /// The scope of a run of `recipe` whose workload (if any) has pid `workload`.
    pub(crate) fn of(recipe: &crate::recipe::Recipe, workload: Option<u32>) -> ScopeInfo {
        let s = &recipe.scope;
        let mut pids = s.pids.clone();
        pids.extend(workload.filter(|_| !s.system_wide));
        ScopeInfo {
            system_wide: s.system_wide,
            pids,
            comms: s.comms.clone(),
            follow_forks: s.follow_forks,
        }
    }
}

/// What the per-CPU readers of a run read, and what it cost them.
#[derive(Debug, Clone, Serialize, JsonSchema, Deserialize)]
pub(crate) struct RecorderInfo {
    /// Raw ring-buffer bytes read from trace_pipe_raw, all CPUs.
    pub(crate) bytes: u64,
    /// CPU time of the reader threads together (user + system), seconds.
    pub(crate) cpu_s: f64,
    /// Thread ids of the run itself (main thread, guard, per-CPU readers),
    /// kept out of the trace; empty with `[scope] include_self`.
    pub(crate) excluded_tids: Vec<u32>,
}

/// The workload of a run.
#[derive(Debug, Clone, Serialize, JsonSchema, Deserialize)]
pub(crate) struct WorkloadInfo {
    /// Command line.
    pub(crate) command: Vec<String>,
    /// Pid.
    pub(crate) pid: u32,
    /// How it ended.
    pub(crate) exit: WorkloadExit,
}

/// report.json, version [`JSON_FORMAT_VERSION`].
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct JsonReport {
    /// Layout version.
    pub(crate) format_version: u32,
    /// Recipe name (`null` for `report` on a file).
    pub(crate) recipe: Option<String>,
    /// Kernel release of the traced machine.
    pub(crate) kernel_release: Option<String>,
    /// Start, RFC 3339.
    pub(crate) started: Option<String>,
    /// End, RFC 3339.
    pub(crate) ended: Option<String>,
    /// Seconds recorded: from tracing on to the stop (less than `started` ..
    /// `ended`, which also spans validation, setup and teardown).
    pub(crate) duration_s: Option<f64>,
    /// Why the run ended.
    pub(crate) stop_reason: Option<String>,
    /// The workload.
    pub(crate) workload: Option<WorkloadInfo>,
    /// Which tasks the run recorded (`null` for `report` on a file).
    pub(crate) scope: Option<ScopeInfo>,
    /// What the recorder read and its CPU time (`null` for `report` on a file).
    pub(crate) recorder: Option<RecorderInfo>,
    /// Trace clock of the file.
    pub(crate) clock: String,
    /// Number of events.
    pub(crate) total_events: u64,
    /// Per `system:event`.
    pub(crate) events: BTreeMap<String, u64>,
    /// Per CPU (keys are CPU numbers as strings).
    pub(crate) cpus: BTreeMap<String, u64>,
    /// Most frequent comms, most first.
    pub(crate) top_comms: Vec<CommCount>,
    /// Most frequent pids, most first.
    pub(crate) top_pids: Vec<PidCount>,
    /// Lost events per CPU (keys are CPU numbers as strings).
    pub(crate) lost_events: BTreeMap<String, Lost>,
    /// Sum of all lost events, each counted once (the per-CPU `total`s).
    pub(crate) lost_total: u64,
    /// `lost_total` as a percentage of recorded plus lost events (0 when none).
    pub(crate) lost_percent: f64,
    /// The recording was cut short because the output file system filled up:
    /// trace.dat holds what fitted (marked in its CPU stats,
    /// [`tracedat::TRUNCATED_STAT`]), and events after it are neither recorded
    /// nor counted as lost.
    pub(crate) truncated: bool,
    /// A rotating run's pieces (`[output] rotate`): which were kept (the
    /// report covers them all) and how many were dropped. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pieces: Option<crate::run::Pieces>,
    /// The analyses that ran (`counts`, `syscalls`, `wakeup`, `kretprobe`,
    /// `funcgraph`, `stacks`).
    pub(crate) analyses: Vec<String>,
    /// The analysis that answers the question the recorded events ask, which
    /// the summary shows first: the first of `hwlat`, `osnoise`, `timerlat`,
    /// `kmem`, `block`, `syscalls`,
    /// `errno`, `softirq`, `irq`, `wakeup`, `kretprobe`, `funcgraph`, `stacks`,
    /// `profile`, `faults`, `fields`, `proctree` that ran and has a result (a
    /// latency analysis: a paired sample), else `counts`.
    #[serde(default)]
    pub(crate) answer: String,
    /// Counts over time (analysis `counts`).
    pub(crate) timeline: Option<Timeline>,
    /// Latency distributions (analyses `syscalls`, `wakeup`, `kretprobe`,
    /// `funcgraph`, `irq`, `softirq`, and the noise tracers').
    pub(crate) latency: Vec<LatencyReport>,
    /// Top kernel stacks (analysis `stacks`).
    pub(crate) stacks: Option<Stacks>,
    /// function_graph self time per call path (analysis `funcgraph` with
    /// `funcgraph_entry` recorded); not in report.json: `funcgraph.folded`.
    #[serde(skip)]
    pub(crate) funcgraph_folded: Option<crate::analysis::Folded>,
    /// Where each task's and CPU's time went (analysis `profile`).
    #[serde(default)]
    pub(crate) profile: Option<Profile>,
    /// Failed syscalls by errno name, per syscall and per task (analysis `errno`).
    pub(crate) errno: Option<crate::analysis::Errno>,
    /// Block I/O issue-to-complete latency per device and request size (analysis `block`).
    pub(crate) block: Option<crate::analysis::Block>,
    /// Slab allocations by symbolized call site and size, with what was not
    /// freed in the trace (analysis `kmem`).
    #[serde(default)]
    pub(crate) kmem: Option<crate::analysis::Kmem>,
    /// Page faults: kernel-mode ones by the function their `ip` falls in,
    /// user- and kernel-mode ones per task (analysis `faults`).
    #[serde(default)]
    pub(crate) faults: Option<crate::analysis::Faults>,
    /// Per recorded event that no other analysis and no `[[answer]]` takes:
    /// the top values of its telling fields (text, enums, symbols, task ids,
    /// signals, ports) per task, with the task's parent (analysis `fields`).
    #[serde(default)]
    pub(crate) fields: Vec<crate::analysis::EventFields>,
    /// Per function, calls, total and self time and the longest call, most
    /// total time first (analysis `funcgraph`).
    #[serde(default)]
    pub(crate) functions: Option<crate::analysis::FunctionTimes>,
    /// The process tree, depth first: each process's parent, programs
    /// exec'd, exit status and lifetime (analysis `proctree`); absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) process_tree: Option<crate::analysis::ProcessTree>,
    /// The recipe's `[[expect]]` results, in recipe order (empty for `report` on a file).
    pub(crate) expectations: Vec<ExpectResult>,
    /// Kernel effects of the run that no undo reverses (declared before it,
    /// or observed afterwards); empty for `report` on a file.
    #[serde(default)]
    pub(crate) irreversible: Vec<crate::tracefs::Irreversible>,
    /// The `[collect]` commands of the run and how each ended (empty for
    /// `report` on a file).
    #[serde(default)]
    pub(crate) collected: Vec<crate::collect::Collected>,
    /// The value of every `[params]` entry the run's recipe was rendered with
    /// (after `--set`); empty for `report` on a file.
    #[serde(default)]
    pub(crate) params: BTreeMap<String, crate::recipe::ParamValue>,
    /// The run's tracer's own result (a latency tracer's max latency and its
    /// trace); absent for tracers that keep none and for `report` on a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tracer: Option<crate::report::tracer::TracerReport>,
    /// The stack tracer's deepest stack (`[stack]`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) stack_tracer: Option<crate::report::tracer::StackTracerReport>,
    /// The table of each hist trigger of the run, parsed; empty without one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) hist: Vec<crate::report::tracer::HistTable>,
    /// Each `[[answer]]`'s table by its name (recipe-format 1.3), whichever
    /// engine computed it, in the order the recipe (or `--answer` file)
    /// declares the answers; empty without answers.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub(crate) answers: IndexMap<String, crate::answer::AnswerTable>,
    /// What user space wrote to the run's `trace_marker` (`ftrace:print`
    /// records): the count and the first 100, time, CPU, task and text (escaped,
    /// at most 256 characters); absent without markers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) markers: Option<crate::analysis::Markers>,
    /// The function profiler's table (`[tracer] function_profile`), merged
    /// over CPUs, the most total time first; empty without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) function_profile: Vec<crate::report::tracer::ProfiledFunction>,
}

/// One `[[expect]]` checked against this report.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub(crate) struct ExpectResult {
    /// The expression as written, e.g. `count(sched:sched_process_exec) >= 3`.
    pub(crate) that: String,
    /// Whether it held.
    pub(crate) passed: bool,
    /// The measured value as text (`12`, `1.250ms`); `null` when the report
    /// cannot know it (see `missing`).
    pub(crate) actual: Option<String>,
    /// Why the value is unknown, when it is (`answer `reads` has no row
    /// `bash``, `no such latency group `syscalls:openat``); the expectation
    /// then failed. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) missing: Option<String>,
}

/// A comm and its event count.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct CommCount {
    /// Task name.
    pub(crate) comm: String,
    /// Events.
    pub(crate) count: u64,
}

/// A pid and its event count.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct PidCount {
    /// Process id (common_pid).
    pub(crate) pid: i32,
    /// Its comm.
    pub(crate) comm: String,
    /// Events.
    pub(crate) count: u64,
}

/// Lost events of one CPU, as the kernel counts them in each of its three places.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub(crate) struct Lost {
    /// `overrun` from per_cpu/cpuN/stats: events overwritten (overwrite mode).
    pub(crate) overrun: u64,
    /// `dropped events` from stats: events dropped because the buffer was full
    /// (drop-newest mode, `options/overwrite` = 0).
    pub(crate) dropped: u64,
    /// Lost-event counts found in the headers of the recorded sub-buffers.
    pub(crate) in_pages: u64,
    /// Events lost on this CPU, each counted once: [`Lost::total`].
    pub(crate) total: u64,
}

impl Lost {
    /// Events lost, each counted once: `dropped + max(overrun, in_pages)`.
    ///
    /// In overwrite mode the kernel counts an overwritten event in `overrun`,
    /// and the reader that next takes a sub-buffer is told how many were
    /// overwritten since its previous one (kernel/trace/ring_buffer.c,
    /// `rb_get_reader_page`: `lost_events = overrun - last_overrun`), which
    /// `ring_buffer_read_page` stores in that sub-buffer's header
    /// (`RB_MISSED_EVENTS`, with the count when it fits, `RB_MISSED_STORED`):
    /// the marks and `overrun` count the same events, so the larger is taken
    /// (marks without a stored count read as 0; a trace.dat without stats has
    /// only the marks). In drop-newest mode a full buffer refuses the new event
    /// and counts it in `dropped events`, which no mark repeats.
    pub(crate) fn total(&self) -> u64 {
        self.dropped + self.overrun.max(self.in_pages)
    }

    /// Lost events per CPU (keys: CPU numbers as strings): the file's
    /// per-CPU stats, and `in_pages`, the counts the sub-buffer headers of
    /// the records read gave per CPU ([`tracedat::Record::Lost`], 0 where
    /// the kernel stored none).
    pub(crate) fn per_cpu(
        file: &TraceFile,
        in_pages: &BTreeMap<u32, u64>,
    ) -> BTreeMap<String, Lost> {
        let mut lost: BTreeMap<String, Lost> = BTreeMap::new();
        for (cpu, stats) in file.cpu_stats().iter().enumerate() {
            let (overrun, dropped) = lost_from_stats(stats);
            let cpu_no = stats_cpu(stats).unwrap_or(cpu as u32);
            let l = lost.entry(cpu_no.to_string()).or_default();
            l.overrun += overrun;
            l.dropped += dropped;
        }
        for (cpu, n) in in_pages {
            lost.entry(cpu.to_string()).or_default().in_pages += n;
        }
        for l in lost.values_mut() {
            l.total = l.total();
        }
        lost
    }
}

impl JsonReport {
    /// Builds the report from an analysis pass, the file (for stats, clock and
    /// comms) and, for `run`, what the run knew.
    pub fn new(file: &TraceFile, a: &Analysis, run: Option<&RunInfo>) -> JsonReport {
        let c = &a.counts;
        let mut comms: Vec<(&String, &u64)> = c.comms.iter().collect();
        comms.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut pids: Vec<(&i32, &u64)> = c.pids.iter().collect();
        pids.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let lost = Lost::per_cpu(file, &c.lost_records);
        let scope = scope_test(a, run, |pid| comm_of(file, &c.learned, pid));
        let in_scope = scope.as_deref();
        let lost_total = lost.values().map(|l| l.total).sum();
        JsonReport {
            format_version: JSON_FORMAT_VERSION,
            recipe: run.map(|r| r.recipe.clone()),
            kernel_release: run
                .map(|r| r.kernel_release.clone())
                .or_else(|| uname_release(file).map(str::to_string)),
            started: run.map(|r| r.started.clone()),
            ended: run.map(|r| r.ended.clone()),
            duration_s: run.map(|r| r.duration_s),
            stop_reason: run.map(|r| r.stop_reason.clone()),
            workload: run.and_then(|r| r.workload.clone()),
            scope: run.map(|r| r.scope.clone()),
            recorder: run.map(|r| r.recorder.clone()),
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
                    comm: comm_of(file, &c.learned, *pid),
                    count: *n,
                })
                .collect(),
            lost_events: lost,
            lost_total,
            lost_percent: lost_percent(c.total, lost_total),
            truncated: file.truncated(),
            pieces: None,
            analyses: a.selected.iter().map(|n| n.as_str().to_string()).collect(),
            answer: a.answer().as_str().to_string(),
            timeline: a.timeline.clone(),
            latency: scoped_latency(a, in_scope),
            stacks: a.stacks.clone(),
            funcgraph_folded: a.funcgraph_folded.clone(),
            profile: a.profile.as_ref().map(|p| p.listed(in_scope)),
            errno: a.errno.clone(),
            block: a.block.clone(),
            kmem: a.kmem.clone(),
            faults: a.faults.clone(),
            fields: a.fields.clone(),
            functions: a.functions.clone(),
            process_tree: a.proctree.clone().map(|mut t| {
                let w = run.and_then(|r| r.workload.as_ref());
                if let Some((pid, code)) =
                    w.and_then(|w| Some((i32::try_from(w.pid).ok()?, w.exit.exit_code?)))
                {
                    t.with_exit(pid, i64::from(code));
                }
                t
            }),
            expectations: Vec::new(),
            collected: Vec::new(),
            params: BTreeMap::new(),
            tracer: None,
            stack_tracer: None,
            hist: Vec::new(),
            answers: a.answers.iter().cloned().collect(),
            markers: a.markers.clone(),
            function_profile: Vec::new(),
            irreversible: Vec::new(),
        }
    }
}

impl JsonReport {
    /// Takes from `j`, a run's report.json (untrusted: what does not parse is
    /// left out), what only the run knew: its expectations' results, the
    /// tracer's and stack tracer's results, hist tables, answers, the function
    /// profile, irreversible effects, collected context and params.
    pub(crate) fn add_run_results(&mut self, run: &RunReport) {
        fn take<T: serde::de::DeserializeOwned + Default>(v: &serde_json::Value) -> T {
            T::deserialize(v).unwrap_or_default()
        }
        let j = &run.json;
        self.expectations = take(&j["expectations"]);
        self.tracer = take(&j["tracer"]);
        self.stack_tracer = take(&j["stack_tracer"]);
        self.hist = take(&j["hist"]);
        self.answers = run.answers.clone();
        self.function_profile = take(&j["function_profile"]);
        self.irreversible = take(&j["irreversible"]);
        self.collected = take(&j["collected"]);
        self.params = take(&j["params"]);
    }
}

/// A run's report.json read back (untrusted): its JSON, and its answers in
/// the order written, which a JSON value's object does not keep (its keys are
/// sorted).
#[derive(Debug, Clone)]
pub(crate) struct RunReport {
    /// The whole report.
    pub(crate) json: serde_json::Value,
    /// `answers`, in the file's order; empty when absent or unreadable.
    answers: IndexMap<String, crate::answer::AnswerTable>,
}

impl RunReport {
    /// Parses report.json `bytes` (within [`crate::untrusted::Kind::Report`]'s
    /// bounds); `None` when it is not JSON.
    pub(crate) fn parse(bytes: &[u8]) -> Option<RunReport> {
        use crate::untrusted::{Kind, parse_json};
        #[derive(Deserialize)]
        struct Answers {
            #[serde(default)]
            answers: IndexMap<String, crate::answer::AnswerTable>,
        }
        let json = parse_json::<serde_json::Value>(bytes, Kind::Report).ok()?;
        let answers = parse_json::<Answers>(bytes, Kind::Report)
            .map(|a| a.answers)
            .unwrap_or_default();
        Some(RunReport { json, answers })
    }
}

/// The tasks a run was scoped to, as a test on a pid: the workload and its
/// descendants, the recipe's `pids` (and theirs), the tasks named by its
/// `comms` (`comm` names the task of a pid). `None` for a run that was not
/// scoped or a trace read without its run.
fn scope_test<'a>(
    a: &'a Analysis,
    run: Option<&'a RunInfo>,
    comm: impl Fn(i32) -> String + 'a,
) -> Option<Box<dyn Fn(i32) -> bool + 'a>> {
    let mut roots: Vec<i32> = run
        .and_then(|r| r.workload.as_ref())
        .and_then(|w| i32::try_from(w.pid).ok())
        .into_iter()
        .collect();
    let scope = run.map(|r| &r.scope);
    roots.extend(
        scope
            .into_iter()
            .flat_map(|s| &s.pids)
            .filter_map(|p| i32::try_from(*p).ok()),
    );
    roots.sort_unstable();
    roots.dedup();
    let comms = scope.map(|s| s.comms.as_slice()).unwrap_or_default();
    (!roots.is_empty() || !comms.is_empty()).then(move || {
        Box::new(move |pid: i32| comms.contains(&comm(pid)) || a.in_scope(pid, &roots))
            as Box<dyn Fn(i32) -> bool>
    })
}

/// The latency reports of `a`; with `in_scope` (a scoped run's tasks, see
/// [`scope_test`]), each per-task analysis leads with its `(scope)` group.
fn scoped_latency(a: &Analysis, in_scope: Option<&dyn Fn(i32) -> bool>) -> Vec<LatencyReport> {
    let mut latency = a.latencies.clone();
    for (name, group) in in_scope.map(|f| a.scoped(f)).unwrap_or_default() {
        if let Some(l) = latency.iter_mut().find(|l| l.analysis == name) {
            l.groups.insert(0, group);
        }
    }
    latency
}

/// `lost` as a percentage of `recorded + lost` (0 when both are 0).
pub(crate) fn lost_percent(recorded: u64, lost: u64) -> f64 {
    match recorded + lost {
        0 => 0.0,
        all => lost as f64 * 100.0 / all as f64,
    }
}

/// The CPU number a CPUSTAT text names (`CPU: N` on its first line), if any.
/// The kernel release in `file`'s UNAME option (its third word), if any.
pub(crate) fn uname_release(file: &TraceFile) -> Option<&str> {
    file.uname().and_then(|u| u.split_whitespace().nth(2))
}

fn stats_cpu(stats: &str) -> Option<u32> {
    stats
        .lines()
        .find_map(|l| l.trim().strip_prefix("CPU:")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's report.json read back keeps its answers in the file's order
    /// (a `serde_json::Value` object sorts its keys).
    #[test]
    fn a_run_reports_answers_keep_their_order() {
        let table = r#"{"question": null, "engine": "trace", "keys": [], "values": ["count"],
            "rows": [], "other": null, "total": {"keys": [], "count": 0, "cells": []},
            "dropped": 0, "notes": []}"#;
        let json = format!(r#"{{"answers": {{"zeta": {table}, "alpha": {table}}}}}"#);
        let run = RunReport::parse(json.as_bytes()).unwrap();
        let names: Vec<&String> = run.answers.keys().collect();
        assert_eq!(names, ["zeta", "alpha"]);
        assert_eq!(run.json["answers"].as_object().map(|o| o.len()), Some(2));
        assert!(RunReport::parse(b"not json").is_none());
    }
}
