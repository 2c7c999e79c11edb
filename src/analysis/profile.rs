//! The `profile` analysis: where each task's time went, as `trace-cmd report
//! --profile` tells it, from the scheduler's own records.
//!
//! Needs `sched:sched_switch`; `sched:sched_wakeup`/`sched_waking`/`sched_wakeup_new`
//! split the time off CPU into sleeping and waiting for a CPU; `irq:irq_handler_*`,
//! `irq:softirq_*` and `exceptions:page_fault_*` add interrupt time and faults.
//!
//! A task's time, from the records of the task (its pid, `prev_pid`/`next_pid`
//! of a switch, `pid` of a wakeup):
//! * running: switched in → switched out (on that CPU);
//! * preempted: switched out in state R (`prev_state & 0xff == 0`) → switched in;
//! * wakeup: the first wakeup since it was switched out sleeping or blocked →
//!   switched in; a wakeup of a task on a CPU, preempted, or not yet seen
//!   switched out is none;
//! * sleeping: switched out in S (or I, the idle kernel threads' state) → woken;
//! * blocked: switched out in D → woken;
//! * irq / softirq: handler entry → exit on the CPU while the task was current.
//!
//! A task switched out again with no switch in since its last switch out (or
//! its last wakeup) lost that switch in: the trace holds only part of its
//! switches (the kernel's pid list `set_event_pid` drops some, a ring buffer
//! overran). Its running time (and a wakeup latency) is then short by the
//! interval lost; each such switch out counts in `switch_ins_missing`, and a
//! report says so rather than print the smaller number alone.
//!
//! Each measure keeps its count, total and longest, with the timestamp and CPU
//! of the event that ended the longest. The pass keeps one small record per
//! task (at most [`MAX_TASKS`], later tasks count in the CPUs only) and one
//! per CPU.

use serde::Serialize;
use tracedat::{Event, Field, IntField, TraceFile};

use super::histogram::{HistRow, Histogram, Seen};
use super::latency::MAX_TASKS;
use super::pass::{At, Finish, Pass};
use super::tasks::PidIndex;
use super::{Analysis, AnalysisName, Selection};

/// Tasks a profile lists (by time on CPU).
const LISTED: usize = 20;

/// Intervals of one kind: how many, how long in all, the longest and where it ended.
#[derive(Debug, Clone, Copy, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct Span {
    /// Intervals.
    pub(crate) count: u64,
    /// Their sum, ns (trace-clock units).
    pub(crate) total_ns: u64,
    /// The longest, ns.
    pub(crate) max_ns: u64,
    /// Timestamp of the event that ended the longest.
    pub(crate) max_at_ns: u64,
    /// CPU of that event.
    pub(crate) max_cpu: u32,
}

impl Span {
    fn add(&mut self, d: u64, at: Seen) {
        if self.count == 0 || d > self.max_ns {
            self.max_ns = d;
            self.max_at_ns = at.ts;
            self.max_cpu = at.cpu;
        }
        self.count += 1;
        self.total_ns = self.total_ns.saturating_add(d);
    }
}

/// Where one task's time went.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct TaskProfile {
    /// Process (thread) id.
    pub(crate) pid: i32,
    /// Its comm.
    pub(crate) comm: String,
    /// On a CPU: switched in → switched out.
    pub(crate) running: Span,
    /// Waiting for a CPU after a preemption: switched out in state R → switched in.
    pub(crate) preempted: Span,
    /// Waiting for a CPU after a wakeup: woken → switched in (wakeup latency).
    pub(crate) wakeup: Span,
    /// Wakeup latency, p50 (nearest rank, within 0.8 %).
    pub(crate) wakeup_p50_ns: u64,
    /// Wakeup latency, p99.
    pub(crate) wakeup_p99_ns: u64,
    /// Wakeup latency in power-of-two rows.
    pub(crate) wakeup_histogram: Vec<HistRow>,
    /// Sleeping: switched out in S (or I) → woken.
    pub(crate) sleeping: Span,
    /// Blocked (uninterruptible, D): switched out in D → woken.
    pub(crate) blocked: Span,
    /// Times switched out while runnable.
    pub(crate) preemptions: u64,
    /// Hard interrupt handlers that ran while it was current.
    pub(crate) irq: Span,
    /// Softirqs that ran while it was current.
    pub(crate) softirq: Span,
    /// `exceptions:page_fault_user`/`page_fault_kernel` records of the task.
    pub(crate) page_faults: u64,
    /// Switches out with no switch in since the task's last switch out or
    /// wakeup (see the module text): its `running` is short by as many
    /// intervals. Counted for a scoped run's own tasks only (a scoped trace
    /// holds only some switches of the others). Absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) switch_ins_missing: u64,
    /// One of a scoped run's tasks (the workload and its descendants,
    /// `[scope] pids`, the tasks `[scope] comms` names); false when the run
    /// was not scoped or the trace is read without its run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) in_scope: bool,
}

/// Where one CPU's time went (from its first to its last switch).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct CpuProfile {
    /// CPU number.
    pub(crate) cpu: u32,
    /// Running a task other than the idle task, ns.
    pub(crate) busy_ns: u64,
    /// Running the idle task (pid 0), ns.
    pub(crate) idle_ns: u64,
    /// Context switches.
    pub(crate) switches: u64,
    /// Hard interrupt handlers.
    pub(crate) irq: Span,
    /// Softirqs.
    pub(crate) softirq: Span,
}

/// The `profile` analysis.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct Profile {
    /// Which measures the file's events allow: `running`, `preempted` (sched_switch),
    /// `wakeup`, `sleeping`, `blocked` (a wakeup event), `irq`, `softirq`, `page_faults`.
    pub(crate) measures: Vec<String>,
    /// Tasks followed one by one (the idle task aside): at most 4,096
    /// (`MAX_TASKS`).
    pub(crate) tasks_total: usize,
    /// Tasks seen after that bound was reached: `(other)`, whose time counts
    /// in `cpus` only. Absent when none.
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub(crate) tasks_other: usize,
    /// Of those, a scoped run's own tasks (see [`TaskProfile::in_scope`]);
    /// absent when the run was not scoped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tasks_in_scope: Option<usize>,
    /// The tasks listed (at most 20): a scoped run's own tasks first, then
    /// the others (seen on the other side of their switches and wakeups),
    /// each longest on a CPU first.
    pub(crate) tasks: Vec<TaskProfile>,
    /// Per CPU, in CPU order.
    pub(crate) cpus: Vec<CpuProfile>,
    /// Switches out with no switch in before them ([`TaskProfile::switch_ins_missing`]),
    /// of a scoped run's tasks (of every task when the run was not scoped: a
    /// scoped trace holds only some switches of the others). Absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) switch_ins_missing: u64,
    /// The tasks those are of.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) tasks_missing_switch_ins: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

impl Profile {
    /// The profile as a report lists it: with `in_scope` (a scoped run's
    /// test for its own tasks), those tasks first and marked, then the
    /// others; at most [`LISTED`] tasks in all, each group longest on a CPU
    /// first.
    pub(crate) fn listed(&self, in_scope: Option<&dyn Fn(i32) -> bool>) -> Profile {
        let mut p = self.clone();
        if let Some(f) = in_scope {
            for t in &mut p.tasks {
                t.in_scope = f(t.pid);
                // A scoped trace holds only the switches of the others
                // that meet a task in scope: no verdict on them.
                if !t.in_scope {
                    t.switch_ins_missing = 0;
                }
            }
            p.tasks_in_scope = Some(p.tasks.iter().filter(|t| t.in_scope).count());
            // Stable: each group keeps its order by time on a CPU.
            p.tasks.sort_by_key(|t| !t.in_scope);
        }
        let judged = p.tasks.iter().filter(|t| t.switch_ins_missing > 0);
        (p.switch_ins_missing, p.tasks_missing_switch_ins) =
            judged.fold((0, 0), |(n, k), t| (n + t.switch_ins_missing, k + 1));
        p.tasks.truncate(LISTED);
        p
    }
}

#[derive(Clone, Default)]
enum Role {
    #[default]
    None,
    Switch {
        prev_pid: IntField,
        prev_state: IntField,
        next_pid: IntField,
    },
    Wake(IntField),
    IrqEntry,
    IrqExit,
    SoftEntry,
    SoftExit,
    Fault,
}

/// Where a task is, since when.
#[derive(Clone, Copy, Default)]
enum State {
    #[default]
    Unknown,
    Running,
    Preempted(u64),
    Sleeping(u64),
    Blocked(u64),
    Woken(u64),
}

#[derive(Default)]
struct Task {
    state: State,
    running: Span,
    preempted: Span,
    wakeup: Histogram,
    sleeping: Span,
    blocked: Span,
    preemptions: u64,
    irq: Span,
    softirq: Span,
    page_faults: u64,
    switch_ins_missing: u64,
}

#[derive(Clone, Default)]
struct Cpu {
    /// The CPU's id (its slot is its place among the CPUs seen).
    id: u32,
    /// The current task and since when (from the last switch).
    current: Option<(i32, u64)>,
    busy: u64,
    idle: u64,
    switches: u64,
    /// Open handler: (ts, task).
    irq_open: Option<(u64, i32)>,
    soft_open: Option<(u64, i32)>,
    irq: Span,
    softirq: Span,
}

/// The pass's state.
pub(super) struct Profiler {
    roles: Vec<Role>,
    measures: Vec<String>,
    /// Per task followed, in order of first event: its pid and profile.
    tasks: Vec<(i32, Task)>,
    /// The index of a pid in `tasks`.
    task_index: PidIndex,
    cpus: Vec<Cpu>,
}

#[inline]
fn int(f: &IntField, ev: &Event<'_>) -> Option<i64> {
    f.get(&ev.data, ev.big_endian).map(|v| v as i64)
}

impl Profiler {
    /// Whether `file` has what the profile needs (a `sched:sched_switch` format).
    pub(super) fn applies(file: &TraceFile) -> bool {
        file.formats()
            .any(|f| f.system == "sched" && f.name == "sched_switch")
    }

    pub(super) fn new(file: &TraceFile) -> Profiler {
        let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
        let mut roles = vec![Role::None; max_id + 1];
        let mut has = [false; 5];
        for f in file.formats() {
            let field = |n: &str| f.field(n).map(Field::int);
            let role = match (f.system.as_str(), f.name.as_str()) {
                ("sched", "sched_switch") => {
                    match (field("prev_pid"), field("prev_state"), field("next_pid")) {
                        (Some(prev_pid), Some(prev_state), Some(next_pid)) => {
                            has[0] = true;
                            Role::Switch {
                                prev_pid,
                                prev_state,
                                next_pid,
                            }
                        }
                        _ => Role::None,
                    }
                }
                ("sched", "sched_wakeup" | "sched_waking" | "sched_wakeup_new") => field("pid")
                    .map_or(Role::None, |p| {
                        has[1] = true;
                        Role::Wake(p)
                    }),
                ("irq", "irq_handler_entry") => Role::IrqEntry,
                ("irq", "irq_handler_exit") => {
                    has[2] = true;
                    Role::IrqExit
                }
                ("irq", "softirq_entry") => Role::SoftEntry,
                ("irq", "softirq_exit") => {
                    has[3] = true;
                    Role::SoftExit
                }
                ("exceptions", "page_fault_user" | "page_fault_kernel") => {
                    has[4] = true;
                    Role::Fault
                }
                _ => Role::None,
            };
            roles[f.id as usize] = role;
        }
        let measures = [
            (has[0], &["running", "preempted"][..]),
            (has[0] && has[1], &["wakeup", "sleeping", "blocked"][..]),
            (has[2], &["irq"][..]),
            (has[3], &["softirq"][..]),
            (has[4], &["page_faults"][..]),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .flat_map(|(_, m)| m.iter().map(|s| s.to_string()))
        .collect();
        Profiler {
            roles,
            measures,
            tasks: Vec::new(),
            task_index: PidIndex::new(),
            cpus: Vec::new(),
        }
    }

    #[inline(always)]
    fn task(&mut self, pid: i32) -> Option<&mut Task> {
        if pid == 0 {
            return None;
        }
        let i = self.task_index.get_or_insert(pid, MAX_TASKS)?;
        if i == self.tasks.len() {
            self.tasks.push((pid, Task::default()));
        }
        self.tasks.get_mut(i).map(|(_, t)| t)
    }

    /// Feeds one event (`pid` is its `common_pid`, `cpu` its CPU's dense
    /// slot: a file may claim any CPU id, and per-CPU state is sized by the
    /// CPUs seen).
    #[inline]
    fn event(&mut self, ev: &Event<'_>, pid: i32, cpu: usize) {
        // The reader gives each record its own format (`analyze_kept` feeds
        // no record of an unknown one): the id is the format's.
        let id = usize::from(ev.format.id);
        let Some(role) = self.roles.get(id) else {
            return;
        };
        let ts = ev.ts;
        let at = Seen { ts, cpu: ev.cpu };
        if !matches!(role, Role::None | Role::Wake(_) | Role::Fault) {
            if cpu >= self.cpus.len() {
                self.cpus.resize(cpu + 1, Cpu::default());
            }
            self.cpus[cpu].id = ev.cpu;
        }
        match role {
            Role::None => {}
            Role::Switch {
                prev_pid,
                prev_state,
                next_pid,
            } => {
                let (Some(prev), Some(state), Some(next)) =
                    (int(prev_pid, ev), int(prev_state, ev), int(next_pid, ev))
                else {
                    return;
                };
                let (prev, next) = (prev as i32, next as i32);
                let c = &mut self.cpus[cpu];
                c.switches += 1;
                let ran = match c.current {
                    Some((p, since)) if p == prev => Some(ts.saturating_sub(since)),
                    _ => None,
                };
                if let Some(d) = ran {
                    if prev == 0 {
                        c.idle += d;
                    } else {
                        c.busy += d;
                    }
                }
                c.current = Some((next, ts));
                if let Some(t) = self.task(prev) {
                    if let Some(d) = ran {
                        t.running.add(d, at);
                    }
                    // Off a CPU since its last switch out or wakeup, and
                    // switched out again: the switch in between is lost.
                    if !matches!(t.state, State::Running | State::Unknown) {
                        t.switch_ins_missing += 1;
                    }
                    t.state = match state & 0xff {
                        0 => {
                            t.preemptions += 1;
                            State::Preempted(ts)
                        }
                        s if s & 0x01 != 0 || s & 0x80 != 0 => State::Sleeping(ts),
                        s if s & 0x02 != 0 => State::Blocked(ts),
                        _ => State::Unknown,
                    };
                }
                if let Some(t) = self.task(next) {
                    match t.state {
                        State::Preempted(since) => t.preempted.add(ts.saturating_sub(since), at),
                        State::Woken(since) => t.wakeup.add(ts.saturating_sub(since), at),
                        _ => {}
                    }
                    t.state = State::Running;
                }
            }
            Role::Wake(f) => {
                let Some(woken) = int(f, ev) else { return };
                if let Some(t) = self.task(woken as i32) {
                    t.state = match t.state {
                        State::Sleeping(since) => {
                            t.sleeping.add(ts.saturating_sub(since), at);
                            State::Woken(ts)
                        }
                        State::Blocked(since) => {
                            t.blocked.add(ts.saturating_sub(since), at);
                            State::Woken(ts)
                        }
                        // Woken again, on a CPU, runnable, or not yet seen switched
                        // out: not the end of a sleep (as trace-cmd counts).
                        s @ (State::Unknown
                        | State::Woken(_)
                        | State::Preempted(_)
                        | State::Running) => s,
                    };
                }
            }
            Role::IrqEntry => self.cpus[cpu].irq_open = Some((ts, pid)),
            Role::SoftEntry => self.cpus[cpu].soft_open = Some((ts, pid)),
            Role::IrqExit | Role::SoftExit => {
                let soft = matches!(role, Role::SoftExit);
                let c = &mut self.cpus[cpu];
                let open = if soft {
                    c.soft_open.take()
                } else {
                    c.irq_open.take()
                };
                let Some((since, task)) = open else { return };
                let d = ts.saturating_sub(since);
                if soft {
                    c.softirq.add(d, at);
                } else {
                    c.irq.add(d, at);
                }
                if let Some(t) = self.task(task) {
                    if soft {
                        t.softirq.add(d, at);
                    } else {
                        t.irq.add(d, at);
                    }
                }
            }
            Role::Fault => {
                if let Some(t) = self.task(pid) {
                    t.page_faults += 1;
                }
            }
        }
    }

    /// The profile of every task followed (see [`Profile::listed`] for what
    /// a report shows); `comm` names a pid.
    fn profile(self, comm: &dyn Fn(i32) -> String) -> Profile {
        let mut tasks = self.tasks;
        tasks.sort_by(|a, b| {
            b.1.running
                .total_ns
                .cmp(&a.1.running.total_ns)
                .then(a.0.cmp(&b.0))
        });
        let tasks_total = tasks.len();
        Profile {
            measures: self.measures,
            tasks_total,
            tasks_other: self.task_index.refused(),
            tasks_in_scope: None,
            tasks: tasks
                .into_iter()
                .map(|(pid, t)| {
                    let at = t.wakeup.max_at();
                    TaskProfile {
                        pid,
                        comm: comm(pid),
                        running: t.running,
                        preempted: t.preempted,
                        wakeup: Span {
                            count: t.wakeup.count(),
                            total_ns: u64::try_from(t.wakeup.sum()).unwrap_or(u64::MAX),
                            max_ns: t.wakeup.max(),
                            max_at_ns: at.ts,
                            max_cpu: at.cpu,
                        },
                        wakeup_p50_ns: t.wakeup.quantile(0.5),
                        wakeup_p99_ns: t.wakeup.quantile(0.99),
                        wakeup_histogram: t.wakeup.rows(),
                        sleeping: t.sleeping,
                        blocked: t.blocked,
                        preemptions: t.preemptions,
                        irq: t.irq,
                        softirq: t.softirq,
                        page_faults: t.page_faults,
                        switch_ins_missing: t.switch_ins_missing,
                        in_scope: false,
                    }
                })
                .collect(),
            cpus: {
                let mut cpus: Vec<Cpu> = self
                    .cpus
                    .into_iter()
                    .filter(|c| c.switches > 0 || c.irq.count > 0 || c.softirq.count > 0)
                    .collect();
                cpus.sort_by_key(|c| c.id);
                cpus
            }
            .into_iter()
            .map(|c| CpuProfile {
                cpu: c.id,
                busy_ns: c.busy,
                idle_ns: c.idle,
                switches: c.switches,
                irq: c.irq,
                softirq: c.softirq,
            })
            .collect(),
            switch_ins_missing: 0,
            tasks_missing_switch_ins: 0,
        }
    }
}

impl Pass for Profiler {
    fn start(file: &TraceFile, sel: &Selection) -> Option<Profiler> {
        sel.has(AnalysisName::Profile).then(|| Profiler::new(file))
    }

    fn handles(&self, id: u16) -> bool {
        !matches!(self.roles.get(usize::from(id)), None | Some(Role::None))
    }

    #[inline]
    fn add(&mut self, at: &At<'_, '_>) {
        self.event(at.ev, at.pid, at.cpu);
    }

    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        let p = self.profile(&|pid| cx.comm(pid));
        let has = p.tasks_total > 0;
        let kept = cx.keeps(has);
        out.section(AnalysisName::Profile, kept, has);
        out.profile = kept.then_some(p);
    }
}
