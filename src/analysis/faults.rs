//! The `faults` analysis: page faults, the kernel's by where they happened.
//!
//! `exceptions:page_fault_kernel` (a fault taken in kernel mode: a
//! `copy_from_user`, a first touch of a user page by the kernel) is counted
//! by the function its `ip` falls in, through the file's kallsyms (trace-cmd
//! prints `ip=foo+0x12` with `%ps`, this groups by `foo`; an address kallsyms
//! does not cover stays `0xADDR`). `exceptions:page_fault_user` and
//! `page_fault_kernel` are both counted per task (`common_pid`: the task
//! that faulted).
//!
//! Memory is bounded: at most [`MAX_KEYS`] distinct `ip`s (each symbolized
//! once, at the end; faults at further addresses count in `untracked`) and
//! [`MAX_TASKS`] tasks (the faults of later tasks count in the totals only).
//! Per record the pass reads one field and adds to a counter.

use rustc_hash::FxHashMap;
use serde::Serialize;
use tracedat::{Field, IntField, TraceFile};

use super::errno::MAX_KEYS;
use super::function_name;
use super::latency::{MAX_TASKS, uint};
use super::pass::{At, Finish, Pass};
use super::tasks::TaskSlots;
use super::{Analysis, AnalysisName, Selection};

/// Functions the report lists (most kernel faults first).
const MAX_SYMBOLS: usize = 20;
/// Tasks the report lists (most faults first).
const LISTED: usize = 10;

#[derive(Clone)]
enum Role {
    None,
    User,
    Kernel(Option<IntField>),
}

/// Page faults: kernel ones by function, all of them per task.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct Faults {
    /// `exceptions:page_fault_user` records.
    pub(crate) user: u64,
    /// `exceptions:page_fault_kernel` records.
    pub(crate) kernel: u64,
    /// Kernel faults by the function their `ip` falls in, most first (at
    /// most 20).
    pub(crate) kernel_by_symbol: Vec<SymbolFaults>,
    /// Functions kernel faults were counted in, in all.
    pub(crate) symbols_total: usize,
    /// Kernel faults at addresses past the key limit (in no function's count).
    pub(crate) untracked: u64,
    /// The tasks with the most faults (at most 10), most first.
    pub(crate) tasks: Vec<TaskFaults>,
    /// Tasks with faults, in all (at most 4,096 followed).
    pub(crate) tasks_total: usize,
}

/// Kernel faults in one function.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct SymbolFaults {
    /// The function (kallsyms), or `0xADDR`.
    pub(crate) symbol: String,
    /// Faults whose `ip` is in it.
    pub(crate) count: u64,
}

/// One task's faults.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct TaskFaults {
    /// Process (thread) id: the task that faulted.
    pub(crate) pid: i32,
    /// Its comm.
    pub(crate) comm: String,
    /// Its user-mode faults.
    pub(crate) user: u64,
    /// Its kernel-mode faults.
    pub(crate) kernel: u64,
}

/// One task's counts, with its pid.
#[derive(Default)]
struct Task {
    pid: i32,
    user: u64,
    kernel: u64,
}

/// The pass's state.
pub(super) struct FaultPass {
    roles: Vec<Role>,
    user: u64,
    kernel: u64,
    by_ip: FxHashMap<u64, u64>,
    untracked: u64,
    tasks: TaskSlots<Task>,
}

impl FaultPass {
    /// Whether `file` has a page fault event's format.
    pub(super) fn applies(file: &TraceFile) -> bool {
        file.formats().any(|f| {
            f.system == "exceptions"
                && matches!(f.name.as_str(), "page_fault_user" | "page_fault_kernel")
        })
    }
}

impl Pass for FaultPass {
    fn start(file: &TraceFile, sel: &Selection) -> Option<FaultPass> {
        if !sel.has(AnalysisName::Faults) {
            return None;
        }
        let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
        let mut roles = vec![Role::None; max_id + 1];
        for f in file.formats().filter(|f| f.system == "exceptions") {
            roles[usize::from(f.id)] = match f.name.as_str() {
                "page_fault_user" => Role::User,
                "page_fault_kernel" => Role::Kernel(f.field("ip").map(Field::int)),
                _ => Role::None,
            };
        }
        Some(FaultPass {
            roles,
            user: 0,
            kernel: 0,
            by_ip: FxHashMap::default(),
            untracked: 0,
            tasks: TaskSlots::new(MAX_TASKS),
        })
    }

    fn handles(&self, id: u16) -> bool {
        !matches!(self.roles.get(usize::from(id)), None | Some(Role::None))
    }

    #[inline]
    fn add(&mut self, at: &At<'_, '_>) {
        let ev = at.ev;
        let kernel = match self.roles.get(usize::from(ev.format.id)) {
            Some(Role::User) => false,
            Some(Role::Kernel(ip)) => {
                if let Some(ip) = ip.as_ref().and_then(|f| uint(f, ev)) {
                    let n = self.by_ip.len();
                    match self.by_ip.get_mut(&ip) {
                        Some(c) => *c += 1,
                        None if n < MAX_KEYS => {
                            self.by_ip.insert(ip, 1);
                        }
                        None => self.untracked += 1,
                    }
                }
                true
            }
            _ => return,
        };
        if kernel {
            self.kernel += 1;
        } else {
            self.user += 1;
        }
        if let Some(t) = self.tasks.get(at.task) {
            t.pid = at.pid;
            if kernel {
                t.kernel += 1;
            } else {
                t.user += 1;
            }
        }
    }

    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        let mut by_symbol: FxHashMap<String, u64> = FxHashMap::default();
        for (ip, n) in &self.by_ip {
            *by_symbol.entry(function_name(cx.file, *ip)).or_default() += n;
        }
        let mut symbols: Vec<(String, u64)> = by_symbol.into_iter().collect();
        symbols.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut tasks: Vec<Task> = self.tasks.into_values().collect();
        tasks.sort_by(|a, b| {
            (b.user + b.kernel)
                .cmp(&(a.user + a.kernel))
                .then(a.pid.cmp(&b.pid))
        });
        let f = Faults {
            user: self.user,
            kernel: self.kernel,
            symbols_total: symbols.len(),
            kernel_by_symbol: (symbols.into_iter().take(MAX_SYMBOLS))
                .map(|(symbol, count)| SymbolFaults { symbol, count })
                .collect(),
            untracked: self.untracked,
            tasks_total: tasks.len(),
            tasks: (tasks.into_iter().take(LISTED))
                .map(|t| TaskFaults {
                    pid: t.pid,
                    comm: cx.comm(t.pid),
                    user: t.user,
                    kernel: t.kernel,
                })
                .collect(),
        };
        let has = f.user + f.kernel > 0;
        let kept = cx.keeps(has);
        out.section(AnalysisName::Faults, kept, has);
        out.faults = kept.then_some(f);
    }
}
