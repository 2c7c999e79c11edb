//! Latency analyses: a start record paired with an end record, the duration
//! added to a [`Histogram`] per group.
//!
//! * `syscalls`: `sys_enter_X` then `sys_exit_X` of the same task (`common_pid`);
//!   `raw_syscalls:sys_enter`/`sys_exit` pair on the task and `id`. Group: the syscall.
//! * `wakeup`: the first `sched_wakeup`/`sched_waking`/`sched_wakeup_new` of a
//!   `pid` since it last ran, then the `sched_switch` with that `next_pid`.
//!   A task switched out after the wakeup (it was running) drops the wakeup.
//!   Groups: `(all)`, then the woken `next_comm`.
//! * `kretprobe`: a kprobe hit (`__probe_ip` = F) then a kretprobe hit
//!   (`__probe_func` = F) of the same task, nested calls paired innermost first
//!   (up to 64 deep, and 256 probed functions per task).
//!   Group: F's symbol; for a user function (a uprobe/uretprobe pair: F in
//!   the user half of the address space), the entry probe's event name.
//! * `funcgraph`: each `funcgraph_exit` gives `rettime - calltime`. Group: `func`'s symbol.
//!   The durations are those function time (`functime`) keeps per function
//!   address, so the functions past its first 4096 are in no group (they
//!   count in its `untracked`).
//! * `irq`: `irq:irq_handler_entry` then `irq_handler_exit` of the same `irq`
//!   on the same CPU. Groups: `(all)`, then the handler's `name`.
//!
//! * `softirq`: `irq:softirq_entry` then `softirq_exit` of the same `vec` on
//!   the same CPU (a CPU runs one softirq at a time). Groups: `(all)`, then
//!   the vector's name as the event's print fmt's `__print_symbolic` gives
//!   it (`NET_RX`, `TIMER`, ...; `vec N` for a number it does not name).
//!
//! Every group's max keeps the timestamp and CPU of the event that ended it.
//! `wakeup`, `irq` and `softirq` also keep one distribution per task (the woken
//! task; the task the interrupt or softirq stopped), for the top tasks by max and for the scoped
//! headline ([`Analysis::scoped`](super::Analysis)): at most [`MAX_TASKS`]
//! tasks, the later ones counted in `(all)` and the groups only.

use rustc_hash::FxHashMap;

use serde::Serialize;
use tracedat::{Event, Field, FieldValue, IntField, TraceFile};

use super::histogram::{HistRow, Histogram, Seen};
use super::pass::{At, Finish, Pass};
use super::tasks::{PidIndex, TaskSlots};
use super::{Analysis, AnalysisName, Selection, TOP, symbolize};

/// Groups a report keeps (most samples first); the rest are counted in `groups_total`.
const MAX_GROUPS: usize = 40;
/// Deepest nesting of one function per task that `kretprobe` tracks.
const MAX_NESTING: usize = 64;
/// Probed functions per task that `kretprobe` tracks: a task's functions
/// are searched one by one (a task meets a few; past this many, the calls of
/// the others count as unpaired).
const MAX_PROBED_PER_TASK: usize = 256;
/// Tasks a per-task distribution is kept for (see the module text).
pub(crate) const MAX_TASKS: usize = 4096;

/// One latency analysis.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct LatencyReport {
    /// Analysis name (`syscalls`, `wakeup`, `kretprobe`, `funcgraph`, `irq`, `softirq`).
    pub(crate) analysis: String,
    /// What is measured, for a person.
    pub(crate) title: String,
    /// What a group key is (`syscall`, `comm`, `function`).
    pub(crate) group_by: String,
    /// End records with no start (their start was before the trace or lost).
    pub(crate) unpaired: u64,
    /// Groups there were in all (only the first 40 are listed).
    pub(crate) groups_total: usize,
    /// Groups, most samples first (`syscalls`: most total time first, the
    /// syscall that cost the most); `(scope)` (the scoped tasks of a run, see
    /// [`Analysis::scoped`](super::Analysis)) and `(all)` lead when present.
    pub(crate) groups: Vec<LatencyGroup>,
    /// `wakeup`, `irq` and `softirq`: the tasks with the longest max (at most 10), longest first.
    #[serde(default)]
    pub(crate) tasks: Vec<TaskLatency>,
    /// `wakeup`, `irq` and `softirq`: tasks with samples in all.
    #[serde(default)]
    pub(crate) tasks_total: usize,
}

/// One task's distribution in a per-task latency analysis (ns).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct TaskLatency {
    /// Process id (the woken task for `wakeup`; the interrupted one for `irq`).
    pub(crate) pid: i32,
    /// Its comm.
    pub(crate) comm: String,
    /// Samples.
    pub(crate) count: u64,
    /// Mean.
    pub(crate) mean_ns: u64,
    /// Median.
    pub(crate) p50_ns: u64,
    /// 99th percentile.
    pub(crate) p99_ns: u64,
    /// Longest.
    pub(crate) max_ns: u64,
    /// Timestamp of the event that ended the longest (trace-clock units).
    pub(crate) max_at_ns: u64,
    /// CPU of that event.
    pub(crate) max_cpu: u32,
}

/// The distribution of one group. Durations in ns (trace-clock units for
/// non-nanosecond clocks); percentiles are nearest-rank, within 0.8 %.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct LatencyGroup {
    /// The syscall, comm or function.
    pub(crate) key: String,
    /// Samples.
    pub(crate) count: u64,
    /// Shortest.
    pub(crate) min_ns: u64,
    /// Mean.
    pub(crate) mean_ns: u64,
    /// Every sample summed: the time the group cost in all (saturating).
    #[serde(default)]
    pub(crate) total_ns: u64,
    /// Median.
    pub(crate) p50_ns: u64,
    /// 90th percentile.
    pub(crate) p90_ns: u64,
    /// 99th percentile.
    pub(crate) p99_ns: u64,
    /// Longest.
    pub(crate) max_ns: u64,
    /// Timestamp of the event that ended the longest (trace-clock units).
    #[serde(default)]
    pub(crate) max_at_ns: u64,
    /// CPU of that event.
    #[serde(default)]
    pub(crate) max_cpu: u32,
    /// Power-of-two rows from min to max.
    pub(crate) histogram: Vec<HistRow>,
}

impl LatencyGroup {
    /// The group `key` of the samples in `h`.
    pub(crate) fn of(key: String, h: &Histogram) -> LatencyGroup {
        let at = h.max_at();
        LatencyGroup {
            key,
            count: h.count(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            total_ns: u64::try_from(h.sum()).unwrap_or(u64::MAX),
            p50_ns: h.quantile(0.5),
            p90_ns: h.quantile(0.9),
            p99_ns: h.quantile(0.99),
            max_ns: h.max(),
            max_at_ns: at.ts,
            max_cpu: at.cpu,
            histogram: h.rows(),
        }
    }
}

#[derive(Clone, Default)]
enum Role {
    #[default]
    None,
    SysEnter(usize),
    SysExit(usize),
    RawEnter(IntField),
    RawExit(IntField),
    Wake {
        pid: IntField,
        /// `sched_wakeup_new`: the waker (`common_pid`) forked the woken.
        new: bool,
    },
    Fork {
        parent: IntField,
        child: IntField,
    },
    IrqEntry {
        irq: IntField,
        name: Field,
    },
    IrqExit(IntField),
    SoftEntry(IntField),
    SoftExit(IntField),
    Switch {
        prev_pid: IntField,
        next_pid: IntField,
        next_comm: Field,
    },
    ProbeEntry(IntField),
    ProbeReturn(IntField),
}

/// The longest raw comm kept per task to group its wakeups (`char[16]` in
/// every kernel; a format with a longer one is decoded each time).
const MAX_CACHED_COMM: usize = 64;

/// Histograms by key.
#[derive(Default)]
pub(super) struct Groups {
    names: Vec<String>,
    index: FxHashMap<String, usize>,
    hists: Vec<Histogram>,
    unpaired: u64,
    /// Per task (pid), for `wakeup`, `irq` and `softirq`.
    tasks: FxHashMap<i32, Histogram>,
}

impl Groups {
    pub(super) fn id(&mut self, key: &str) -> usize {
        if let Some(i) = self.index.get(key) {
            return *i;
        }
        let i = self.names.len();
        self.names.push(key.to_string());
        self.index.insert(key.to_string(), i);
        self.hists.push(Histogram::default());
        i
    }

    /// Adds `d` to group `g` and, when `task` is given, to that task's distribution.
    pub(super) fn add(&mut self, g: usize, d: u64, at: Seen, task: Option<i32>) {
        self.hists[g].add(d, at);
        if let Some(pid) = task {
            let n = self.tasks.len();
            match self.tasks.get_mut(&pid) {
                Some(h) => h.add(d, at),
                None if n < MAX_TASKS => {
                    let mut h = Histogram::default();
                    h.add(d, at);
                    self.tasks.insert(pid, h);
                }
                None => {}
            }
        }
    }

    /// Adds every sample of `h` to the group of `key`.
    pub(super) fn merge(&mut self, key: &str, h: &Histogram) {
        let g = self.id(key);
        self.hists[g].merge(h);
    }

    pub(super) fn report(
        self,
        name: AnalysisName,
        title: &str,
        group_by: &str,
        comm: &dyn Fn(i32) -> String,
    ) -> (LatencyReport, FxHashMap<i32, Histogram>) {
        let mut tasks: Vec<(&i32, &Histogram)> = self.tasks.iter().collect();
        tasks.sort_by(|a, b| b.1.max().cmp(&a.1.max()).then(a.0.cmp(b.0)));
        let top_tasks = tasks
            .iter()
            .take(TOP)
            .map(|(pid, h)| TaskLatency {
                pid: **pid,
                comm: comm(**pid),
                count: h.count(),
                mean_ns: h.mean(),
                p50_ns: h.quantile(0.5),
                p99_ns: h.quantile(0.99),
                max_ns: h.max(),
                max_at_ns: h.max_at().ts,
                max_cpu: h.max_at().cpu,
            })
            .collect();
        let tasks_total = tasks.len();
        let mut v: Vec<(String, Histogram)> = self.names.into_iter().zip(self.hists).collect();
        v.retain(|(_, h)| h.count() > 0);
        // Which syscall costs the most time is the syscall table's question.
        let weight = |h: &Histogram| match name {
            AnalysisName::Syscalls => h.sum(),
            _ => u128::from(h.count()),
        };
        v.sort_by(|a, b| {
            let all = |k: &str| k != "(all)";
            all(&a.0)
                .cmp(&all(&b.0))
                .then(weight(&b.1).cmp(&weight(&a.1)))
                .then_with(|| a.0.cmp(&b.0))
        });
        let groups_total = v.len();
        let report = LatencyReport {
            analysis: name.as_str().to_string(),
            title: title.to_string(),
            group_by: group_by.to_string(),
            unpaired: self.unpaired,
            groups_total,
            groups: v
                .into_iter()
                .take(MAX_GROUPS)
                .map(|(key, h)| LatencyGroup::of(key, &h))
                .collect(),
            tasks: top_tasks,
            tasks_total,
        };
        (report, self.tasks)
    }
}

/// The latency analyses of one pass.
pub(super) struct Latencies {
    roles: Vec<Role>,
    selected: Vec<AnalysisName>,
    syscalls: Groups,
    /// Per pid slot (see `analyze`): the open `sys_enter_X` and raw
    /// `sys_enter` (group, ts).
    sys_pending: Vec<[Option<(usize, u64)>; 2]>,
    raw_ids: RawIds,
    /// Names raw syscall numbers for the file's machine.
    sys_names: SyscallTable,
    wakeup: Groups,
    wake_all: usize,
    /// Per task woken (by its index in `wake_index`): the time of the
    /// wakeup not yet followed by its switch in.
    wake_pending: Vec<Option<u64>>,
    wake_index: PidIndex,
    comm_ids: FxHashMap<Vec<u8>, usize>,
    /// Per task woken (as `wake_pending`): the raw `next_comm` of its last
    /// switch in and that comm's group, so that a task switched in under
    /// the same comm again is grouped without decoding and hashing it.
    wake_comm: Vec<Option<(Vec<u8>, usize)>>,
    kretprobe: Groups,
    /// Per task (pid slot): the probed functions it entered, each with its
    /// `kretprobe` group once a return was paired, and the times of its
    /// open calls, innermost last.
    probe_pending: TaskSlots<Vec<ProbedFunction>>,
    probe_ids: FxHashMap<u64, usize>,
    irq: Groups,
    irq_all: usize,
    /// Per CPU: the open handler (irq number, group, ts, interrupted pid).
    irq_pending: Vec<Option<OnCpu>>,
    irq_ids: FxHashMap<(u64, Vec<u8>), usize>,
    softirq: Groups,
    soft_all: usize,
    /// The group of each vector below [`VECTORS`] (`usize::MAX`: not yet
    /// seen); `soft_names` names them, `soft_other` holds larger ones.
    soft_ids: [usize; VECTORS],
    soft_other: FxHashMap<u64, usize>,
    soft_names: Vec<(i64, String)>,
    /// Per CPU: the open softirq (vector, group, ts, interrupted pid).
    soft_pending: Vec<Option<OnCpu>>,
    /// Child pid → parent pid, from `sched_process_fork` and `sched_wakeup_new`.
    forks: FxHashMap<i32, i32>,
}

/// A probed function a task entered (`kretprobe`).
struct ProbedFunction {
    /// `__probe_ip` of its kprobe (`__probe_func` of its kretprobe).
    func: u64,
    /// The format id of its entry probe's event (names a user function's group).
    entry: u16,
    /// Its group, found at its first paired return.
    group: Option<usize>,
    /// Times of its open calls, innermost last.
    calls: Vec<u64>,
}

/// Raw syscall numbers seen in a `sys_enter`, and their group: the numbers
/// below [`RawIds::DIRECT`] (every table's) in a vector, others in a map.
#[derive(Default)]
struct RawIds {
    /// Group of number `i`, `usize::MAX` for none yet.
    direct: Vec<usize>,
    other: FxHashMap<i64, usize>,
}

impl RawIds {
    /// Numbers looked up without hashing.
    const DIRECT: usize = 4096;

    /// The group of `nr`, if seen.
    #[inline]
    fn get(&self, nr: i64) -> Option<usize> {
        match usize::try_from(nr) {
            Ok(i) if i < Self::DIRECT => self.direct.get(i).copied().filter(|g| *g != usize::MAX),
            _ => self.other.get(&nr).copied(),
        }
    }

    /// The group of `nr`, made by `new` on first sight.
    #[inline]
    fn get_or_insert_with(&mut self, nr: i64, new: impl FnOnce() -> usize) -> usize {
        match usize::try_from(nr) {
            Ok(i) if i < Self::DIRECT => {
                if i >= self.direct.len() {
                    self.direct.resize(i + 1, usize::MAX);
                }
                if self.direct[i] == usize::MAX {
                    self.direct[i] = new();
                }
                self.direct[i]
            }
            _ => *self.other.entry(nr).or_insert_with(new),
        }
    }
}

/// Which syscall table numbers a raw `id` (`raw_syscalls:sys_enter` and
/// `sys_exit`): the machine of the file's uname (its last word, as `uname -m`
/// prints it), from the `syscalls` crate's copies of the kernel's tables.
/// A 32-bit task on a 64-bit kernel uses the compat table, which this does
/// not know: its ids are named from the 64-bit table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyscallTable {
    X86_64,
    X86,
    Aarch64,
    Arm,
    Unknown,
}

impl SyscallTable {
    pub(super) fn of(file: &TraceFile) -> SyscallTable {
        let machine = file
            .uname()
            .and_then(|u| u.split_whitespace().last())
            .unwrap_or("");
        SyscallTable::of_machine(machine)
    }

    /// The table of `machine` (`uname -m`: `x86_64`, `aarch64`, ...).
    pub(crate) fn of_machine(machine: &str) -> SyscallTable {
        match machine {
            "x86_64" | "amd64" => SyscallTable::X86_64,
            "i386" | "i486" | "i586" | "i686" | "x86" => SyscallTable::X86,
            "aarch64" | "arm64" => SyscallTable::Aarch64,
            m if m.starts_with("arm") => SyscallTable::Arm,
            _ => SyscallTable::Unknown,
        }
    }

    /// The syscall's name, else `NR n`.
    pub(crate) fn name(self, nr: i64) -> String {
        let name = usize::try_from(nr).ok().and_then(|n| match self {
            SyscallTable::X86_64 => syscalls::x86_64::Sysno::new(n).map(|s| s.name()),
            SyscallTable::X86 => syscalls::x86::Sysno::new(n).map(|s| s.name()),
            SyscallTable::Aarch64 => syscalls::aarch64::Sysno::new(n).map(|s| s.name()),
            SyscallTable::Arm => syscalls::arm::Sysno::new(n).map(|s| s.name()),
            SyscallTable::Unknown => None,
        });
        name.map_or_else(|| format!("NR {nr}"), str::to_string)
    }
}

/// The integer field `f` of `ev` ([`IntField::get`]).
#[inline]
pub(super) fn uint(f: &IntField, ev: &Event<'_>) -> Option<u64> {
    f.get(&ev.data, ev.big_endian)
}

impl Pass for Latencies {
    /// Always started: it also follows forks (`Analysis::in_scope`).
    fn start(file: &TraceFile, sel: &Selection) -> Option<Latencies> {
        let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
        let mut roles = vec![Role::None; max_id + 1];
        let mut syscalls = Groups::default();
        let mut soft_names = Vec::new();
        let field = |f: &tracedat::EventFormat, n: &str| f.field(n).map(Field::int);
        let text = |f: &tracedat::EventFormat, n: &str| f.field(n).cloned();
        for f in file.formats() {
            let (sys, name) = (f.system.as_str(), f.name.as_str());
            let role = if sel.has(AnalysisName::Syscalls) && sys == "syscalls" {
                if let Some(x) = name.strip_prefix("sys_enter_") {
                    Role::SysEnter(syscalls.id(x))
                } else if let Some(x) = name.strip_prefix("sys_exit_") {
                    Role::SysExit(syscalls.id(x))
                } else {
                    Role::None
                }
            } else if sel.has(AnalysisName::Syscalls) && sys == "raw_syscalls" {
                match (name, field(f, "id")) {
                    ("sys_enter", Some(id)) => Role::RawEnter(id),
                    ("sys_exit", Some(id)) => Role::RawExit(id),
                    _ => Role::None,
                }
            } else if sys == "sched" && name == "sched_process_fork" {
                match (field(f, "parent_pid"), field(f, "child_pid")) {
                    (Some(parent), Some(child)) => Role::Fork { parent, child },
                    _ => Role::None,
                }
            } else if sel.has(AnalysisName::Irq) && sys == "irq" && name == "irq_handler_entry" {
                match (field(f, "irq"), text(f, "name")) {
                    (Some(irq), Some(name)) => Role::IrqEntry { irq, name },
                    _ => Role::None,
                }
            } else if sel.has(AnalysisName::Irq) && sys == "irq" && name == "irq_handler_exit" {
                field(f, "irq").map_or(Role::None, Role::IrqExit)
            } else if sel.has(AnalysisName::Softirq) && sys == "irq" && name == "softirq_entry" {
                if soft_names.is_empty()
                    && let Some((_, tracedat::Shown::Symbolic(t))) = tracedat::shown_fields(f)
                        .into_iter()
                        .find(|(n, _)| n == "vec")
                {
                    soft_names = t;
                }
                field(f, "vec").map_or(Role::None, Role::SoftEntry)
            } else if sel.has(AnalysisName::Softirq) && sys == "irq" && name == "softirq_exit" {
                field(f, "vec").map_or(Role::None, Role::SoftExit)
            } else if sel.has(AnalysisName::Wakeup) && sys == "sched" {
                match name {
                    "sched_wakeup" | "sched_waking" | "sched_wakeup_new" => {
                        field(f, "pid").map_or(Role::None, |pid| Role::Wake {
                            pid,
                            new: name == "sched_wakeup_new",
                        })
                    }
                    "sched_switch" => {
                        match (
                            field(f, "prev_pid"),
                            field(f, "next_pid"),
                            text(f, "next_comm"),
                        ) {
                            (Some(prev_pid), Some(next_pid), Some(next_comm)) => Role::Switch {
                                prev_pid,
                                next_pid,
                                next_comm,
                            },
                            _ => Role::None,
                        }
                    }
                    _ => Role::None,
                }
            } else if sel.has(AnalysisName::Kretprobe) {
                match (field(f, "__probe_ip"), field(f, "__probe_func")) {
                    (Some(ip), _) => Role::ProbeEntry(ip),
                    (None, Some(func)) if f.field("__probe_ret_ip").is_some() => {
                        Role::ProbeReturn(func)
                    }
                    _ => Role::None,
                }
            } else {
                Role::None
            };
            roles[f.id as usize] = role;
        }
        let mut wakeup = Groups::default();
        let wake_all = wakeup.id("(all)");
        let mut irq = Groups::default();
        let irq_all = irq.id("(all)");
        let mut softirq = Groups::default();
        let soft_all = softirq.id("(all)");
        Some(Latencies {
            roles,
            selected: sel.names().to_vec(),
            syscalls,
            sys_pending: Vec::new(),
            raw_ids: RawIds::default(),
            sys_names: SyscallTable::of(file),
            wakeup,
            wake_all,
            wake_pending: Vec::new(),
            wake_index: PidIndex::new(),
            comm_ids: FxHashMap::default(),
            wake_comm: Vec::new(),
            kretprobe: Groups::default(),
            probe_pending: TaskSlots::new(usize::MAX),
            probe_ids: FxHashMap::default(),
            irq,
            irq_all,
            irq_pending: Vec::new(),
            irq_ids: FxHashMap::default(),
            softirq,
            soft_all,
            soft_ids: [usize::MAX; VECTORS],
            soft_other: FxHashMap::default(),
            soft_names,
            soft_pending: Vec::new(),
            forks: FxHashMap::default(),
        })
    }

    /// Whether records of format `id` mean something to this analysis
    /// (the others need not be fed to it).
    fn handles(&self, id: u16) -> bool {
        !matches!(self.roles.get(usize::from(id)), None | Some(Role::None))
    }

    /// Feeds one event (`pid` is its `common_pid`, `slot` that pid's place in
    /// `analyze`'s pid list, `cpu` its CPU's dense slot: a file may claim any
    /// CPU id, and per-CPU state is sized by the CPUs seen).
    #[inline]
    fn add(&mut self, at: &At<'_, '_>) {
        let (file, ev, pid, slot, cpu) = (at.file, at.ev, at.pid, at.task, at.cpu);
        // The reader gives each record its own format (`analyze_kept` feeds
        // no record of an unknown one): the id is the format's.
        let id = usize::from(ev.format.id);
        let Some(role) = self.roles.get(id) else {
            return;
        };
        match role {
            Role::None => {}
            Role::SysEnter(g) => {
                pending_syscall(&mut self.sys_pending, slot)[0] = Some((*g, ev.ts));
            }
            Role::RawEnter(f) => {
                if let Some(nr) = uint(f, ev) {
                    let g = self.raw_ids.get_or_insert_with(nr as i64, || {
                        self.syscalls.id(&self.sys_names.name(nr as i64))
                    });
                    pending_syscall(&mut self.sys_pending, slot)[1] = Some((g, ev.ts));
                }
            }
            Role::SysExit(g) => {
                let open = pending_syscall(&mut self.sys_pending, slot)[0].take();
                pair_syscall(&mut self.syscalls, open, Some(*g), ev);
            }
            Role::RawExit(f) => {
                let g = uint(f, ev).and_then(|nr| self.raw_ids.get(nr as i64));
                let g = g.or(Some(usize::MAX));
                let open = pending_syscall(&mut self.sys_pending, slot)[1].take();
                pair_syscall(&mut self.syscalls, open, g, ev);
            }
            Role::Wake { pid: f, new } => {
                if let Some(p) = uint(f, ev) {
                    if let Some(i) = self.wake_index.get_or_insert(p as i32, usize::MAX) {
                        if i >= self.wake_pending.len() {
                            self.wake_pending.resize(i + 1, None);
                        }
                        self.wake_pending[i].get_or_insert(ev.ts);
                    }
                    if *new && pid > 0 {
                        self.forks.insert(p as i32, pid);
                    }
                }
            }
            Role::Fork { parent, child } => {
                if let (Some(p), Some(c)) = (uint(parent, ev), uint(child, ev)) {
                    self.forks.insert(c as i32, p as i32);
                }
            }
            Role::IrqEntry { irq, name } => {
                let Some(n) = uint(irq, ev) else { return };
                let handler = match name.decode(&ev.data, ev.big_endian) {
                    Some(FieldValue::Str(s)) => s,
                    _ => b"?",
                };
                let g = match self.irq_ids.get(&(n, handler.to_vec())) {
                    Some(g) => *g,
                    None => {
                        let g = self.irq.id(&String::from_utf8_lossy(handler));
                        self.irq_ids.insert((n, handler.to_vec()), g);
                        g
                    }
                };
                open_on_cpu(&mut self.irq_pending, cpu, (n, g, ev.ts, pid));
            }
            Role::IrqExit(irq) => {
                let all = self.irq_all;
                close_on_cpu(
                    &mut self.irq,
                    all,
                    &mut self.irq_pending,
                    cpu,
                    uint(irq, ev),
                    ev,
                );
            }
            Role::SoftEntry(f) => {
                let Some(v) = uint(f, ev) else { return };
                let g = self.soft_group(v);
                open_on_cpu(&mut self.soft_pending, cpu, (v, g, ev.ts, pid));
            }
            Role::SoftExit(f) => {
                let all = self.soft_all;
                close_on_cpu(
                    &mut self.softirq,
                    all,
                    &mut self.soft_pending,
                    cpu,
                    uint(f, ev),
                    ev,
                );
            }
            Role::Switch {
                prev_pid,
                next_pid,
                next_comm,
            } => {
                // The task switched out is no longer waiting for a CPU.
                if let Some(i) = uint(prev_pid, ev).and_then(|p| self.wake_index.get(p as i32)) {
                    self.wake_pending.get_mut(i).map(Option::take);
                }
                let Some(next) = uint(next_pid, ev) else {
                    return;
                };
                let Some(i) = self.wake_index.get(next as i32) else {
                    return;
                };
                let Some(t) = self.wake_pending.get_mut(i).and_then(Option::take) else {
                    return;
                };
                let d = ev.ts.saturating_sub(t);
                let at = seen(ev);
                self.wakeup.add(self.wake_all, d, at, Some(next as i32));
                // The group is a function of the comm's raw bytes: the same
                // bytes as last time give the same group.
                let raw = next_comm.raw(&ev.data, ev.big_endian);
                let cached = match (raw, self.wake_comm.get(i)) {
                    (Some(raw), Some(Some((last, g)))) if last == raw => Some(*g),
                    _ => None,
                };
                let g = match cached {
                    Some(g) => g,
                    None => {
                        let comm = match next_comm.decode(&ev.data, ev.big_endian) {
                            Some(FieldValue::Str(s)) => s,
                            _ => b"?",
                        };
                        let g = match self.comm_ids.get(comm) {
                            Some(g) => *g,
                            None => {
                                let g = self.wakeup.id(&String::from_utf8_lossy(comm));
                                self.comm_ids.insert(comm.to_vec(), g);
                                g
                            }
                        };
                        if let Some(raw) = raw.filter(|r| r.len() <= MAX_CACHED_COMM) {
                            if i >= self.wake_comm.len() {
                                self.wake_comm.resize(i + 1, None);
                            }
                            self.wake_comm[i] = Some((raw.to_vec(), g));
                        }
                        g
                    }
                };
                self.wakeup.add(g, d, at, None);
            }
            Role::ProbeEntry(f) => {
                let open = self.probe_pending.get(slot);
                if let (Some(ip), Some(open)) = (uint(f, ev), open) {
                    match open.iter().position(|p| p.func == ip) {
                        Some(i) => {
                            let calls = &mut open[i].calls;
                            if calls.len() < MAX_NESTING {
                                calls.push(ev.ts);
                            }
                        }
                        None if open.len() < MAX_PROBED_PER_TASK => open.push(ProbedFunction {
                            func: ip,
                            entry: ev.format.id,
                            group: None,
                            calls: vec![ev.ts],
                        }),
                        None => {}
                    }
                }
            }
            Role::ProbeReturn(f) => {
                let Some(func) = uint(f, ev) else { return };
                let open = self.probe_pending.get(slot);
                let p = open.and_then(|o| o.iter_mut().find(|p| p.func == func));
                match p.and_then(|p| Some((p.calls.pop()?, &mut p.group, p.entry))) {
                    Some((t, group, entry)) => {
                        let g = *group.get_or_insert_with(|| {
                            *self.probe_ids.entry(func).or_insert_with(|| {
                                self.kretprobe.id(&probed_function(file, func, entry))
                            })
                        });
                        self.kretprobe
                            .add(g, ev.ts.saturating_sub(t), seen(ev), None);
                    }
                    None => self.kretprobe.unpaired += 1,
                }
            }
        }
    }

    /// The reports of the selected latency analyses, with their per-task
    /// distributions, and the forks followed.
    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        out.forks = self.forks;
        let selected = self.selected;
        for (name, groups, title, by) in [
            (
                AnalysisName::Syscalls,
                self.syscalls,
                "syscall latency (sys_enter → sys_exit, per task)",
                "syscall",
            ),
            (
                AnalysisName::Wakeup,
                self.wakeup,
                "wakeup-to-run latency (sched_wakeup/sched_waking → sched_switch in)",
                "comm",
            ),
            (
                AnalysisName::Kretprobe,
                self.kretprobe,
                "kprobe → kretprobe latency (per task and function)",
                "function",
            ),
            (
                AnalysisName::Irq,
                self.irq,
                "interrupt handler time (irq_handler_entry → irq_handler_exit, per CPU)",
                "handler",
            ),
            (
                AnalysisName::Softirq,
                self.softirq,
                "softirq time per vector (softirq_entry → softirq_exit, per CPU)",
                "vector",
            ),
        ] {
            if selected.contains(&name) {
                let (report, tasks) = groups.report(name, title, by, &|pid| cx.comm(pid));
                out.latency(cx, name, report, tasks);
            }
        }
    }
}

/// A handler (irq number or softirq vector, group, ts, interrupted pid)
/// open on a CPU.
type OnCpu = (u64, usize, u64, i32);

/// Opens `h` on CPU slot `cpu` (replacing one whose exit was lost).
#[inline]
fn open_on_cpu(pending: &mut Vec<Option<OnCpu>>, cpu: usize, h: OnCpu) {
    if cpu >= pending.len() {
        pending.resize(cpu + 1, None);
    }
    pending[cpu] = Some(h);
}

/// Closes the handler open on CPU slot `cpu` with exit `ev` of number
/// `key`: its time goes to `all`, its group and its interrupted task; an
/// exit of another number, or with none open, is unpaired.
#[inline]
fn close_on_cpu(
    groups: &mut Groups,
    all: usize,
    pending: &mut [Option<OnCpu>],
    cpu: usize,
    key: Option<u64>,
    ev: &Event<'_>,
) {
    match (pending.get_mut(cpu).and_then(Option::take), key) {
        (Some((n, g, t, task)), Some(m)) if n == m => {
            let d = ev.ts.saturating_sub(t);
            let at = seen(ev);
            groups.add(all, d, at, None);
            groups.add(g, d, at, Some(task));
        }
        _ => groups.unpaired += 1,
    }
}

/// Softirq vectors whose group is found without hashing (the kernel has 10).
const VECTORS: usize = 32;

impl Latencies {
    /// The `softirq` group of vector `v`, made on its first sight: its name
    /// in the print fmt's table, else `vec N`.
    #[inline]
    fn soft_group(&mut self, v: u64) -> usize {
        let (names, groups) = (&self.soft_names, &mut self.softirq);
        let new = || {
            let name = names.iter().find(|(n, _)| *n as u64 == v);
            name.map_or_else(|| format!("vec {v}"), |(_, s)| s.clone())
        };
        match usize::try_from(v).ok().filter(|i| *i < VECTORS) {
            Some(i) => {
                if self.soft_ids[i] == usize::MAX {
                    self.soft_ids[i] = groups.id(&new());
                }
                self.soft_ids[i]
            }
            None => *self
                .soft_other
                .entry(v)
                .or_insert_with(|| groups.id(&new())),
        }
    }
}

/// The `kretprobe` group of a probed function at `func`: a kernel function's
/// symbol (through kallsyms), and for an address in the user half (a uprobe's,
/// which differs from process to process) the name of the entry probe's
/// event (format id `entry`): `uprobes:work` → `work`, what the recipe calls it.
fn probed_function(file: &TraceFile, func: u64, entry: u16) -> String {
    let user = func >> 63 == 0;
    match file.formats().find(|f| f.id == entry) {
        Some(f) if user => f.name.clone(),
        _ => symbolize(file, func),
    }
}

/// Pairs a syscall exit with the pending enter of `key`; `group` is the exit's
/// syscall (`usize::MAX` for an unknown raw id).
/// The open syscalls (`sys_enter_X`, raw `sys_enter`) of the task in pid slot `slot`.
fn pending_syscall(
    pending: &mut Vec<[Option<(usize, u64)>; 2]>,
    slot: usize,
) -> &mut [Option<(usize, u64)>; 2] {
    if slot >= pending.len() {
        pending.resize(slot + 1, [None, None]);
    }
    &mut pending[slot]
}

/// Pairs a syscall exit `ev` of `group` with the task's `open` entry.
fn pair_syscall(
    groups: &mut Groups,
    open: Option<(usize, u64)>,
    group: Option<usize>,
    ev: &Event<'_>,
) {
    match open {
        Some((g, t)) if Some(g) == group => groups.add(g, ev.ts.saturating_sub(t), seen(ev), None),
        _ => groups.unpaired += 1,
    }
}

/// Where `ev` was seen.
fn seen(ev: &Event<'_>) -> Seen {
    Seen {
        ts: ev.ts,
        cpu: ev.cpu,
    }
}

#[cfg(test)]
mod tests {
    use super::SyscallTable;

    #[test]
    fn raw_syscall_ids_are_named_per_machine() {
        // openat is 257 on x86_64, 56 on arm64 (the generic table), 295 on
        // i386 and 322 on arm EABI: the same id names different calls.
        assert_eq!(SyscallTable::X86_64.name(257), "openat");
        assert_eq!(SyscallTable::Aarch64.name(56), "openat");
        assert_eq!(SyscallTable::X86.name(295), "openat");
        assert_eq!(SyscallTable::Arm.name(322), "openat");
        assert_eq!(SyscallTable::X86.name(257), "remap_file_pages");
        assert_eq!(SyscallTable::Unknown.name(257), "NR 257");
        assert_eq!(SyscallTable::X86_64.name(-1), "NR -1");
        assert_eq!(SyscallTable::X86_64.name(100_000), "NR 100000");
    }
}
