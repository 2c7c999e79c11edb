//! The `errno` analysis: syscall exit values by errno name, per syscall and
//! per task. It reads `ret` of `syscalls:sys_exit_X` (the syscall is X), of
//! `raw_syscalls:sys_exit` (the syscall is `id` in the file machine's table)
//! and of a kretprobe event with a `ret` field (a recipe's
//! `fetch = { ret = "$retval..." }`; the "syscall" is the event's name).
//! A `ret` in -4095..=-1 is a failure with errno `-ret` (the kernel's
//! `IS_ERR_VALUE` range), named as Linux names it (`-13` → `EACCES`).
//!
//! Memory is bounded: at most [`MAX_KEYS`] (syscall, errno) pairs and as many
//! (task, syscall, errno) triples are tracked; failures past either cap count
//! in `untracked`, and at most [`MAX_KEYS`] syscalls get a row. Per event,
//! the pass reads one or two fields and bumps the syscall's counters, found
//! by index (by format id, or by a raw `id` below [`DENSE_NR`]) or in a hash
//! map; failures are counted in hash maps keyed by numbers; names are made at
//! the end.

use rustc_hash::FxHashMap;
use serde::Serialize;
use tracedat::{Event, IntField, TraceFile};

use super::latency::{SyscallTable, uint};
use super::pass::{At, Finish, Pass};
use super::{Analysis, AnalysisName, Selection};

/// How many (syscall, errno) pairs, and (task, syscall, errno) triples, are tracked.
pub(crate) const MAX_KEYS: usize = 4096;

/// How many task rows the report keeps, most failures first.
const TOP_TASKS: usize = 20;

/// A syscall: the format id of its `sys_exit_X`, or `RAW` and the raw `id`.
pub(super) type Sys = (u32, i64);
const RAW: u32 = u32::MAX;

/// Raw syscall numbers below this find their row by index (x86_64 has about
/// 460); others (and negative ones) in a hash map.
const DENSE_NR: usize = 1024;
/// No row yet.
const NO_ROW: u32 = u32::MAX;

/// What a format id means to the analysis.
#[derive(Clone)]
enum Role {
    None,
    /// `syscalls:sys_exit_X`: its `ret`.
    Exit(IntField),
    /// `raw_syscalls:sys_exit`: its `id` and `ret`.
    RawExit(IntField, IntField),
}

/// Syscall exit values by errno, per syscall and per task.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct Errno {
    /// Syscall exits read (with a readable `ret`).
    pub(crate) exits: u64,
    /// Of those, failures (`ret` in -4095..=-1).
    pub(crate) failed: u64,
    /// Failures not in the tables below: past [`MAX_KEYS`] keys.
    pub(crate) untracked: u64,
    /// Per syscall with at least one failure, most failures first.
    pub(crate) syscalls: Vec<ErrnoSyscall>,
    /// Per task, syscall and errno, most first (at most 20 rows).
    pub(crate) tasks: Vec<ErrnoTask>,
}

/// One syscall's failures.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct ErrnoSyscall {
    /// The syscall (`openat`; `NR n` for a raw id the table does not name),
    /// or the kretprobe event (`open_ret`).
    pub(crate) syscall: String,
    /// Exits of this syscall.
    pub(crate) calls: u64,
    /// Failed exits.
    pub(crate) failed: u64,
    /// By errno, most first.
    pub(crate) errors: Vec<ErrnoCount>,
}

/// How often one errno was returned.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct ErrnoCount {
    /// `ret` as returned (`-13`).
    pub(crate) value: i64,
    /// Its name (`EACCES`; `E?` for a number Linux does not name).
    pub(crate) errno: String,
    /// Times returned.
    pub(crate) count: u64,
}

/// How often one task got one errno from one syscall.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct ErrnoTask {
    /// Task id (`common_pid`).
    pub(crate) pid: i32,
    /// Its comm.
    pub(crate) comm: String,
    /// The syscall.
    pub(crate) syscall: String,
    /// `ret` as returned (`-13`).
    pub(crate) value: i64,
    /// Its name.
    pub(crate) errno: String,
    /// Times returned.
    pub(crate) count: u64,
}

/// The state of one pass.
pub(super) struct Errors {
    roles: Vec<Role>,
    table: SyscallTable,
    exits: u64,
    failed: u64,
    untracked: u64,
    /// Per syscall, in the order of their first exits: exits and failures.
    calls: Vec<(Sys, u64, u64)>,
    /// The row in `calls` of a `sys_exit_X` (or kretprobe) by format id, of
    /// a raw syscall by `id` below [`DENSE_NR`]; [`NO_ROW`] when it has none.
    row_by_id: Vec<u32>,
    row_by_nr: Vec<u32>,
    /// The row of any other raw syscall.
    row_of: FxHashMap<Sys, u32>,
    by_errno: FxHashMap<(Sys, i64), u64>,
    by_task: FxHashMap<(i32, Sys, i64), u64>,
}

impl Errors {
    /// Whether `file` has the formats of a syscall exit with `ret`.
    pub(super) fn applies(file: &TraceFile) -> bool {
        file.formats().any(|f| !matches!(role(f), Role::None))
    }

    pub(super) fn new(file: &TraceFile) -> Errors {
        let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
        let mut roles = vec![Role::None; max_id + 1];
        for f in file.formats() {
            roles[f.id as usize] = role(f);
        }
        Errors {
            roles,
            table: SyscallTable::of(file),
            exits: 0,
            failed: 0,
            untracked: 0,
            calls: Vec::new(),
            row_by_id: vec![NO_ROW; max_id + 1],
            row_by_nr: vec![NO_ROW; DENSE_NR],
            row_of: FxHashMap::default(),
            by_errno: FxHashMap::default(),
            by_task: FxHashMap::default(),
        }
    }

    #[inline]
    fn event(&mut self, ev: &Event<'_>, pid: i32) {
        // The reader gives each record its own format (`analyze_kept` feeds
        // no record of an unknown one): the id is the format's.
        let id = usize::from(ev.format.id);
        let (sys, ret) = match self.roles.get(id) {
            Some(Role::Exit(ret)) => ((id as u32, 0), uint(ret, ev)),
            Some(Role::RawExit(nr, ret)) => match uint(nr, ev) {
                Some(nr) => ((RAW, nr as i64), uint(ret, ev)),
                None => return,
            },
            _ => return,
        };
        let Some(ret) = ret.map(|r| r as i64) else {
            return;
        };
        self.exits += 1;
        let failed = (-4095..=-1).contains(&ret);
        self.failed += u64::from(failed);
        if let Some(row) = self.row(sys) {
            row.1 += 1;
            row.2 += u64::from(failed);
        }
        if !failed {
            return;
        }
        let mut tracked = bump(&mut self.by_errno, (sys, ret));
        tracked &= bump(&mut self.by_task, (pid, sys, ret));
        self.untracked += u64::from(!tracked);
    }

    /// The row of `sys`, made if there is room.
    #[inline]
    pub(super) fn row(&mut self, sys: Sys) -> Option<&mut (Sys, u64, u64)> {
        let n = self.calls.len();
        let slot = match sys {
            (RAW, nr) => match usize::try_from(nr).ok().filter(|&nr| nr < DENSE_NR) {
                Some(nr) => self.row_by_nr.get_mut(nr)?,
                None => match self.row_of.get(&sys) {
                    Some(&r) => return self.calls.get_mut(r as usize),
                    None if n < MAX_KEYS => {
                        self.row_of.insert(sys, n as u32);
                        self.calls.push((sys, 0, 0));
                        return self.calls.last_mut();
                    }
                    None => return None,
                },
            },
            (id, _) => self.row_by_id.get_mut(id as usize)?,
        };
        if *slot == NO_ROW {
            if n >= MAX_KEYS {
                return None;
            }
            *slot = n as u32;
            self.calls.push((sys, 0, 0));
        }
        self.calls.get_mut(*slot as usize)
    }

    fn errno(self, file: &TraceFile, comm: &dyn Fn(i32) -> String) -> Errno {
        let name = |(id, nr): Sys| match id {
            RAW => self.table.name(nr),
            id => file
                .formats()
                .find(|f| f.id == id as u16)
                .map(|f| f.name.strip_prefix("sys_exit_").unwrap_or(&f.name))
                .unwrap_or("?")
                .to_string(),
        };
        let errno_name = |v: i64| crate::errno::name(-v).unwrap_or("E?").to_string();
        let mut errors: FxHashMap<Sys, Vec<ErrnoCount>> = FxHashMap::default();
        for ((sys, v), n) in &self.by_errno {
            errors.entry(*sys).or_default().push(ErrnoCount {
                value: *v,
                errno: errno_name(*v),
                count: *n,
            });
        }
        let mut syscalls: Vec<ErrnoSyscall> = self
            .calls
            .iter()
            .filter(|(_, _, failed)| *failed > 0)
            .map(|(sys, calls, failed)| {
                let mut errors = errors.remove(sys).unwrap_or_default();
                errors.sort_by(|a, b| b.count.cmp(&a.count).then(b.value.cmp(&a.value)));
                ErrnoSyscall {
                    syscall: name(*sys),
                    calls: *calls,
                    failed: *failed,
                    errors,
                }
            })
            .collect();
        // Rows of one name (a raw id and a `sys_exit_X`, say) keep the
        // order of their first exits.
        syscalls.sort_by(|a, b| {
            b.failed
                .cmp(&a.failed)
                .then_with(|| a.syscall.cmp(&b.syscall))
        });
        let mut tasks: Vec<(&(i32, Sys, i64), &u64)> = self.by_task.iter().collect();
        tasks.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        Errno {
            exits: self.exits,
            failed: self.failed,
            untracked: self.untracked,
            syscalls,
            tasks: tasks
                .into_iter()
                .take(TOP_TASKS)
                .map(|((pid, sys, v), n)| ErrnoTask {
                    pid: *pid,
                    comm: comm(*pid),
                    syscall: name(*sys),
                    value: *v,
                    errno: errno_name(*v),
                    count: *n,
                })
                .collect(),
        }
    }
}

/// Adds one to `key`'s count when it is tracked or there is room; whether it was.
fn bump<K: std::hash::Hash + Eq>(map: &mut FxHashMap<K, u64>, key: K) -> bool {
    let n = map.len();
    match map.get_mut(&key) {
        Some(c) => *c += 1,
        None if n < MAX_KEYS => {
            map.insert(key, 1);
        }
        None => return false,
    }
    true
}

fn role(f: &tracedat::EventFormat) -> Role {
    match (f.system.as_str(), f.field("ret")) {
        ("syscalls", Some(ret)) if f.name.starts_with("sys_exit_") => Role::Exit(ret.int()),
        (_, Some(ret)) if f.field("__probe_ret_ip").is_some() => Role::Exit(ret.int()),
        ("raw_syscalls", Some(ret)) if f.name == "sys_exit" => match f.field("id") {
            Some(id) => Role::RawExit(id.int(), ret.int()),
            None => Role::None,
        },
        _ => Role::None,
    }
}

impl Pass for Errors {
    fn start(file: &TraceFile, sel: &Selection) -> Option<Errors> {
        sel.has(AnalysisName::Errno).then(|| Errors::new(file))
    }

    fn handles(&self, id: u16) -> bool {
        !matches!(self.roles.get(usize::from(id)), None | Some(Role::None))
    }

    #[inline]
    fn add(&mut self, at: &At<'_, '_>) {
        self.event(at.ev, at.pid);
    }

    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        let e = self.errno(cx.file, &|pid| cx.comm(pid));
        let has = e.exits > 0;
        let kept = cx.keeps(has);
        out.section(AnalysisName::Errno, kept, has);
        out.errno = kept.then_some(e);
    }
}
