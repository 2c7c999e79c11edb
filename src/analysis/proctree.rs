//! The process tree (`proctree`): who forked whom, which programs each
//! process exec'd, how it exited and how long it lived, from
//! `sched:sched_process_fork` (`parent_pid` → `child_pid`, `child_comm`),
//! `sched:sched_process_exec` (`pid`, `filename`), `sched:sched_process_exit`
//! (`pid`, `comm`, its time) and, for the exit status,
//! `syscalls:sys_enter_exit_group` (`error_code`, the status the process
//! passed to `exit_group(2)`; kernel/exit.c). A process that exited without
//! calling `exit_group` (killed by a signal, or still running when the trace
//! ended) has no status here: the report says "unknown".
//!
//! A fork of a thread (`clone(CLONE_THREAD)`) fires `sched_process_fork` too,
//! so threads appear as children of the task that made them. Bounded: at most
//! [`MAX_PROCESSES`] processes are kept (the records of others are counted),
//! and at most [`MAX_EXECS`] programs per process.

use rustc_hash::FxHashMap;
use schemars::JsonSchema;
use serde::Serialize;
use tracedat::{Event, FieldValue, TraceFile};

use super::Analysis;
use super::names::{AnalysisName, Selection};
use super::pass::{At, Finish, Pass};

/// Processes the tree keeps; the records of later ones are counted in
/// [`ProcessTree::untracked`].
pub(crate) const MAX_PROCESSES: usize = 4096;
/// Programs kept per process (a process exec'ing more counts the rest).
pub(crate) const MAX_EXECS: usize = 8;

/// report.json `process_tree`: the processes of the trace as a tree, listed
/// depth first (each parent before its children, children in the order they
/// were forked), with their depth for indenting.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub(crate) struct ProcessTree {
    /// Processes listed.
    pub(crate) count: u64,
    /// Forks seen (`sched_process_fork`).
    pub(crate) forks: u64,
    /// Execs seen (`sched_process_exec`).
    pub(crate) execs: u64,
    /// Exits seen (`sched_process_exit`).
    pub(crate) exits: u64,
    /// Listed processes whose exit status the trace has (their `exit_group`).
    pub(crate) statuses_known: u64,
    /// Records of processes past the bound of 4096 processes, not listed.
    pub(crate) untracked: u64,
    /// The processes, depth first.
    pub(crate) processes: Vec<Process>,
}

/// One process (or thread) of [`ProcessTree`].
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct Process {
    /// Its pid (`child_pid` of its fork, else the pid an exec or exit names).
    pub(crate) pid: i32,
    /// Its parent's pid (`parent_pid` of its fork); `null` when its fork is
    /// not in the trace (it is then a root).
    pub(crate) ppid: Option<i32>,
    /// Depth in the tree (0: a root).
    pub(crate) depth: u32,
    /// Its last name: from its `sched_process_exit`, else its fork's
    /// `child_comm`, else the file's comms (escaped and cut to 256 characters,
    /// as a marker's text: it is the task's choice).
    pub(crate) comm: String,
    /// The programs it exec'd (`filename`, escaped and cut as `comm`), in
    /// order; at most 8.
    pub(crate) programs: Vec<String>,
    /// Execs past the 8 listed.
    pub(crate) programs_more: u64,
    /// The status it passed to `exit_group` (`error_code`, as its parent's
    /// `wait` sees it: the low 8 bits; a run's workload without one: the
    /// status the run's `wait` saw); `null` when unknown (no `exit_group` of
    /// it in the trace: killed by a signal, still running, or the event not
    /// recorded).
    pub(crate) exit_status: Option<i64>,
    /// When it started (trace-clock ns): its fork, else its first record here.
    pub(crate) start_ns: u64,
    /// Whether `start_ns` is its fork (else it started before the trace did,
    /// or its fork was not recorded).
    pub(crate) forked: bool,
    /// When it exited (`sched_process_exit`); `null` when not in the trace.
    pub(crate) exit_ns: Option<u64>,
    /// `exit_ns - start_ns`, when it exited in the trace.
    pub(crate) lifetime_ns: Option<u64>,
}

impl ProcessTree {
    /// Gives process `pid` the exit status `code` when the trace has none for
    /// it (a run knows its workload's status from `wait`, also when the
    /// recipe does not record `exit_group`).
    pub(crate) fn with_exit(&mut self, pid: i32, code: i64) {
        if let Some(p) =
            (self.processes.iter_mut()).find(|p| p.pid == pid && p.exit_status.is_none())
        {
            p.exit_status = Some(code);
            self.statuses_known += 1;
        }
    }
}

/// What a record of a format means to the tree.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    None,
    Fork,
    Exec,
    Exit,
    ExitGroup,
}

fn role(f: &tracedat::EventFormat) -> Role {
    match (f.system.as_str(), f.name.as_str()) {
        ("sched", "sched_process_fork") => Role::Fork,
        ("sched", "sched_process_exec") => Role::Exec,
        ("sched", "sched_process_exit") => Role::Exit,
        ("syscalls", "sys_enter_exit_group") => Role::ExitGroup,
        _ => Role::None,
    }
}

/// One process as the pass keeps it.
#[derive(Debug)]
struct Entry {
    pid: i32,
    parent: Option<usize>,
    ppid: Option<i32>,
    comm: Option<String>,
    programs: Vec<String>,
    programs_more: u64,
    status: Option<i64>,
    start_ns: u64,
    forked: bool,
    exit_ns: Option<u64>,
}

/// The pass.
pub(super) struct ProcTree {
    roles: Vec<Role>,
    /// The processes in order of first sight; a parent always before its
    /// children (so the tree has no cycle, whatever the file says).
    entries: Vec<Entry>,
    /// Pid → its current entry (a pid reused after its exit gets a new one).
    current: FxHashMap<i32, usize>,
    forks: u64,
    execs: u64,
    exits: u64,
    untracked: u64,
}

impl ProcTree {
    /// An empty tree; `roles` by format id.
    fn new(roles: Vec<Role>) -> ProcTree {
        ProcTree {
            roles,
            entries: Vec::new(),
            current: FxHashMap::default(),
            forks: 0,
            execs: 0,
            exits: 0,
            untracked: 0,
        }
    }

    /// Whether `file` has a fork or exec format (the tree's edges or programs).
    pub(super) fn applies(file: &TraceFile) -> bool {
        file.formats()
            .any(|f| matches!(role(f), Role::Fork | Role::Exec))
    }

    /// The entry of `pid`, made (a root starting at `ts`) when new; `None`
    /// past [`MAX_PROCESSES`].
    fn entry(&mut self, pid: i32, ts: u64) -> Option<usize> {
        if let Some(i) = self.current.get(&pid) {
            return Some(*i);
        }
        self.push(pid, None, None, ts, false)
    }

    fn push(
        &mut self,
        pid: i32,
        parent: Option<usize>,
        ppid: Option<i32>,
        ts: u64,
        forked: bool,
    ) -> Option<usize> {
        if self.entries.len() >= MAX_PROCESSES {
            self.untracked += 1;
            return None;
        }
        self.entries.push(Entry {
            pid,
            parent,
            ppid,
            comm: None,
            programs: Vec::new(),
            programs_more: 0,
            status: None,
            start_ns: ts,
            forked,
            exit_ns: None,
        });
        let i = self.entries.len() - 1;
        self.current.insert(pid, i);
        Some(i)
    }

    fn event(&mut self, role: Role, ev: &Event<'_>) {
        let ts = ev.ts;
        match role {
            Role::Fork => {
                self.forks += 1;
                let (Some(parent), Some(child)) = (int(ev, "parent_pid"), int(ev, "child_pid"))
                else {
                    return;
                };
                let (parent, child) = (parent as i32, child as i32);
                let p = self.entry(parent, ts);
                if let Some(c) = self.push(child, p, Some(parent), ts, true) {
                    self.entries[c].comm = text(ev, "child_comm");
                }
            }
            Role::Exec => {
                self.execs += 1;
                let pid = int(ev, "pid").map_or(ev.pid(), |p| p as i32);
                if let Some(i) = self.entry(pid, ts) {
                    let e = &mut self.entries[i];
                    match text(ev, "filename") {
                        Some(f) if e.programs.len() < MAX_EXECS => e.programs.push(f),
                        _ => e.programs_more += 1,
                    }
                }
            }
            Role::Exit => {
                self.exits += 1;
                let pid = int(ev, "pid").map_or(ev.pid(), |p| p as i32);
                if let Some(i) = self.entry(pid, ts) {
                    let e = &mut self.entries[i];
                    e.exit_ns = Some(ts);
                    if let Some(c) = text(ev, "comm") {
                        e.comm = Some(c);
                    }
                    // The pid may be reused: its next process is a new entry.
                    self.current.remove(&pid);
                }
            }
            Role::ExitGroup => {
                if let Some(code) = int(ev, "error_code")
                    && let Some(i) = self.entry(ev.pid(), ts)
                {
                    self.entries[i].status = Some(code & 0xff);
                }
            }
            Role::None => {}
        }
    }

    /// The tree, depth first; comms the trace's records did not give are
    /// asked of `comm`.
    fn finish_tree(self, comm: &dyn Fn(i32) -> String) -> ProcessTree {
        let n = self.entries.len();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut roots = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            match e.parent {
                Some(p) => children[p].push(i),
                None => roots.push(i),
            }
        }
        let mut order = Vec::with_capacity(n);
        // Explicit stack (a deep chain of forks must not overflow ours).
        let mut stack: Vec<(usize, u32)> = roots.into_iter().rev().map(|r| (r, 0)).collect();
        while let Some((i, depth)) = stack.pop() {
            order.push((i, depth));
            stack.extend(children[i].iter().rev().map(|c| (*c, depth + 1)));
        }
        let mut entries: Vec<Option<Entry>> = self.entries.into_iter().map(Some).collect();
        let processes: Vec<Process> = order
            .into_iter()
            .filter_map(|(i, depth)| {
                let e = entries[i].take()?;
                Some(Process {
                    pid: e.pid,
                    ppid: e.ppid,
                    depth,
                    comm: e
                        .comm
                        .unwrap_or_else(|| crate::untrusted::escape(&comm(e.pid)).into_owned()),
                    programs: e.programs,
                    programs_more: e.programs_more,
                    exit_status: e.status,
                    start_ns: e.start_ns,
                    forked: e.forked,
                    exit_ns: e.exit_ns,
                    lifetime_ns: e.exit_ns.map(|x| x.saturating_sub(e.start_ns)),
                })
            })
            .collect();
        ProcessTree {
            count: processes.len() as u64,
            forks: self.forks,
            execs: self.execs,
            exits: self.exits,
            statuses_known: processes.iter().filter(|p| p.exit_status.is_some()).count() as u64,
            untracked: self.untracked,
            processes,
        }
    }
}

/// An integer field of `ev`.
fn int(ev: &Event<'_>, name: &str) -> Option<i64> {
    match ev.field(name)? {
        FieldValue::Int(v) => Some(v),
        FieldValue::UInt(v) => Some(v as i64),
        _ => None,
    }
}

/// A text field of `ev`, bounded and escaped as a marker's text is (a task
/// names itself and its programs: hostile to a terminal).
fn text(ev: &Event<'_>, name: &str) -> Option<String> {
    match ev.field(name)? {
        FieldValue::Str(b) | FieldValue::Bytes(b) => Some(super::markers::text_of(b)),
        _ => None,
    }
}

impl Pass for ProcTree {
    fn start(file: &TraceFile, sel: &Selection) -> Option<ProcTree> {
        if !sel.has(AnalysisName::Proctree) {
            return None;
        }
        let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
        let mut roles = vec![Role::None; max_id + 1];
        for f in file.formats() {
            roles[f.id as usize] = role(f);
        }
        Some(ProcTree::new(roles))
    }

    fn handles(&self, id: u16) -> bool {
        self.roles
            .get(usize::from(id))
            .is_some_and(|r| *r != Role::None)
    }

    fn add(&mut self, at: &At<'_, '_>) {
        let role = (self.roles.get(usize::from(at.ev.format.id)).copied()).unwrap_or(Role::None);
        self.event(role, at.ev);
    }

    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        // Exits alone (a recipe recording sched_process_exit for another
        // question) make no tree: it needs a fork or an exec.
        let has = self.forks > 0 || self.execs > 0;
        let tree = self.finish_tree(&|pid| cx.comm(pid));
        let kept = cx.keeps(has);
        out.section(AnalysisName::Proctree, kept, has);
        if kept {
            out.proctree = Some(tree);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> ProcTree {
        ProcTree::new(Vec::new())
    }

    /// Forks make a depth-first tree (children in fork order, a grandchild
    /// right under its parent); a pid reused after its exit is a new process
    /// under its new parent; past the bound, processes are counted, not kept.
    #[test]
    fn the_tree_is_depth_first_bounded_and_follows_pid_reuse() {
        let mut t = tree();
        let fork = |t: &mut ProcTree, parent: i32, child: i32, ts: u64| {
            let p = t.entry(parent, ts);
            t.push(child, p, Some(parent), ts, true)
        };
        fork(&mut t, 10, 11, 1);
        fork(&mut t, 10, 12, 2);
        fork(&mut t, 11, 13, 3);
        // 13 exits; its pid is reused by a child of 12.
        let i = t.entry(13, 4).unwrap();
        t.entries[i].exit_ns = Some(4);
        t.current.remove(&13);
        fork(&mut t, 12, 13, 5);
        let got = t.finish_tree(&|pid| format!("p{pid}"));
        let rows: Vec<(i32, Option<i32>, u32, Option<u64>)> = (got.processes.iter())
            .map(|p| (p.pid, p.ppid, p.depth, p.lifetime_ns))
            .collect();
        assert_eq!(
            rows,
            [
                (10, None, 0, None),
                (11, Some(10), 1, None),
                (13, Some(11), 2, Some(1)),
                (12, Some(10), 1, None),
                (13, Some(12), 2, None)
            ]
        );
        assert_eq!(got.processes[0].comm, "p10");
        assert!(!got.processes[0].forked && got.processes[1].forked);

        let mut t = tree();
        for pid in 0..MAX_PROCESSES as i32 + 3 {
            t.entry(pid, 0);
        }
        let got = t.finish_tree(&|_| String::new());
        assert_eq!((got.count, got.untracked), (MAX_PROCESSES as u64, 3));
    }
}
