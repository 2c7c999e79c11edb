//! pid → comm learned from the events that name a task, for the pids the
//! file's saved cmdlines do not know.

use rustc_hash::FxHashMap;

use crate::format::{EventFormat, Field, IntField};
use crate::{Event, Record, TraceFile};

/// The kernel's `TASK_COMM_LEN` less its NUL: the longest comm (bytes).
const COMM_MAX: usize = 15;

/// Comms learned while reading records in order: from `sched_switch`
/// (`prev_comm`/`next_comm`) and `sched_wakeup`/`sched_wakeup_new` (`comm`)
/// as trace-cmd's sched_switch plugin does, and also from
/// `sched_process_fork` (`child_comm`), `task_newtask` (`comm`),
/// `task_rename` (`newcomm`) and `sched_process_exec` (the basename of
/// `filename`, cut to 15 bytes as the kernel's `__set_task_comm` does).
///
/// The saved cmdlines win: a pid they name is never learned. A learned pid
/// keeps its first name from sched_switch/wakeup/fork/newtask; exec and
/// rename replace it, because they change the task's comm.
///
/// One `Comms` learns from the records of one file (the saved cmdlines it
/// asks are that file's).
#[derive(Debug, Default, Clone)]
pub struct Comms {
    learned: FxHashMap<i32, String>,
    /// One bit per pid below [`SETTLED_PIDS`]: learned, or named by the
    /// saved cmdlines, so that a record naming it again is skipped by one
    /// load (most records name a task met before). Grows to the highest
    /// pid settled: at most 512 KiB.
    settled: Vec<u64>,
}

/// Pids below this (the kernel's PID_MAX_LIMIT on 64-bit, 4 Mi; see
/// include/linux/threads.h) are settled by a bit, others by the map.
const SETTLED_PIDS: usize = 1 << 22;

/// The `(pid field, comm field)` pairs through which records of
/// `system:name` name a task, and whether a name they give replaces a learned
/// one; `None` for events that name no task.
fn task_fields(
    system: &str,
    name: &str,
) -> Option<(&'static [(&'static str, &'static str)], bool)> {
    Some(match (system, name) {
        ("sched", "sched_switch") => (
            &[("prev_pid", "prev_comm"), ("next_pid", "next_comm")],
            false,
        ),
        ("sched", "sched_wakeup" | "sched_wakeup_new") => (&[("pid", "comm")], false),
        ("sched", "sched_process_fork") => (&[("child_pid", "child_comm")], false),
        ("task", "task_newtask") => (&[("pid", "comm")], false),
        ("task", "task_rename") => (&[("pid", "newcomm")], true),
        ("sched", "sched_process_exec") => (&[("pid", "filename")], true),
        _ => return None,
    })
}

/// Whether records of `system:name` can name a task (so [`Comms::learn`] is
/// worth calling). A cheap check to make once per event format.
pub fn names_tasks(system: &str, name: &str) -> bool {
    task_fields(system, name).is_some()
}

/// Where the records of one event format name tasks: the positions of their
/// pid and comm fields, found once per format ([`Learner::of`]) so that
/// [`Comms::learn_with`] looks no field up by name per record.
#[derive(Debug, Clone, Copy)]
pub struct Learner {
    /// At most two tasks per record (sched_switch's prev and next).
    tasks: [Option<TaskAt>; 2],
    /// Whether a name replaces a learned one (exec and rename change the
    /// task's comm).
    replace: bool,
}

/// One task a record names: indices of its fields in the format's fields
/// followed by its common fields ([`field_at`]).
#[derive(Debug, Clone, Copy)]
struct TaskAt {
    /// The pid field, read as an integer.
    pid: IntField,
    comm: usize,
    /// The comm is the basename of a path (sched_process_exec's `filename`).
    basename: bool,
}

/// Field `i` of `format`'s fields followed by its common fields.
fn field_at(format: &EventFormat, i: usize) -> Option<&Field> {
    match format.fields.get(i) {
        Some(f) => Some(f),
        None => format.common_fields.get(i - format.fields.len()),
    }
}

impl Learner {
    /// The learner for records of `format`; `None` when they name no task
    /// (see [`names_tasks`]).
    pub fn of(format: &EventFormat) -> Option<Learner> {
        let (pairs, replace) = task_fields(&format.system, &format.name)?;
        let index = |name: &str| {
            format
                .fields
                .iter()
                .chain(&format.common_fields)
                .position(|f| f.name == name)
        };
        let mut tasks = [None; 2];
        for (slot, (pid_name, comm_name)) in tasks.iter_mut().zip(pairs) {
            *slot = index(pid_name)
                .zip(index(comm_name))
                .map(|(pid, comm)| TaskAt {
                    pid: field_at(format, pid).map_or(IntField::default(), Field::int),
                    comm,
                    basename: *comm_name == "filename",
                });
        }
        Some(Learner { tasks, replace })
    }
}

impl Comms {
    /// A learner that knows nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Learns from every record of `file` that can name a task.
    /// Errors: a corrupt page or chunk.
    pub fn of_file(file: &TraceFile) -> Result<Comms, crate::Error> {
        let mut comms = Comms::new();
        // Per format id, its learner once worked out.
        let mut learners: Vec<Option<Option<Learner>>> = Vec::new();
        for rec in file.records() {
            let Record::Event(ev) = rec? else { continue };
            let id = usize::from(ev.format.id);
            if id >= learners.len() {
                learners.resize(id + 1, None);
            }
            if let Some(l) = learners[id].get_or_insert_with(|| Learner::of(ev.format)) {
                comms.learn_with(l, file, &ev);
            }
        }
        Ok(comms)
    }

    /// Whether nothing was learned.
    pub fn is_empty(&self) -> bool {
        self.learned.is_empty()
    }

    /// `cmdlines` (a `saved_cmdlines` text, `PID COMM` lines) with a line
    /// appended for every learned pid, in pid order, so other readers
    /// (trace-cmd, KernelShark) name those tasks too.
    pub fn extend_cmdlines(&self, cmdlines: &[u8]) -> Vec<u8> {
        let mut out = cmdlines.to_vec();
        if !out.is_empty() && !out.ends_with(b"\n") {
            out.push(b'\n');
        }
        let mut pids: Vec<(&i32, &String)> = self.learned.iter().collect();
        pids.sort();
        for (pid, comm) in pids {
            out.extend_from_slice(format!("{pid} {comm}\n").as_bytes());
        }
        out
    }

    /// The comm of `pid`: the saved cmdlines, else the learned one, else
    /// `None` (the caller prints `<idle>` for pid 0 and `<...>` otherwise).
    pub fn get<'a>(&'a self, file: &'a TraceFile, pid: i32) -> Option<&'a str> {
        file.comm(pid)
            .or_else(|| self.learned.get(&pid).map(String::as_str))
    }

    /// Learns from one record. Returns the pids whose comm changed (at most
    /// two), so a caller caching per-pid text can drop it.
    pub fn learn(&mut self, file: &TraceFile, ev: &Event<'_>) -> [Option<i32>; 2] {
        match Learner::of(ev.format) {
            Some(l) => self.learn_with(&l, file, ev),
            None => [None, None],
        }
    }

    /// [`Comms::learn`] with the learner of `ev`'s format, made once
    /// ([`Learner::of`]`(ev.format)`; a learner of another format reads
    /// the wrong fields).
    pub fn learn_with(
        &mut self,
        learner: &Learner,
        file: &TraceFile,
        ev: &Event<'_>,
    ) -> [Option<i32>; 2] {
        // Most records name tasks settled already: that is checked first,
        // and the rest read out of line.
        let settled = |task: &Option<TaskAt>| match task {
            None => true,
            Some(t) => t
                .pid
                .get(&ev.data, ev.big_endian)
                .is_none_or(|p| p as i32 <= 0 || self.is_settled(p as i32)),
        };
        if !learner.replace && learner.tasks.iter().all(settled) {
            return [None, None];
        }
        self.learn_names(learner, file, ev)
    }

    /// [`Comms::learn_with`] of a record that may name a task not settled.
    #[inline(never)]
    fn learn_names(
        &mut self,
        learner: &Learner,
        file: &TraceFile,
        ev: &Event<'_>,
    ) -> [Option<i32>; 2] {
        let mut changed = [None, None];
        let replace = learner.replace;
        for (slot, task) in changed.iter_mut().zip(&learner.tasks) {
            let Some(task) = task else { continue };
            // An integer pid field reads as decode's Int or UInt would.
            let Some(pid) = task.pid.get(&ev.data, ev.big_endian) else {
                continue;
            };
            let pid = pid as i32;
            // A pid already learned is skipped before the saved cmdlines
            // are asked: the cheaper test, and either one skips it.
            if pid <= 0 || (!replace && self.is_settled(pid)) {
                continue;
            }
            if file.comm(pid).is_some() {
                self.settle(pid);
                continue;
            }
            let raw = field_at(ev.format, task.comm).and_then(|f| f.raw(&ev.data, ev.big_endian));
            let Some(raw) = raw else { continue };
            let mut name = raw.split(|c| *c == 0).next().unwrap_or(&[]);
            if task.basename {
                name = name.rsplit(|c| *c == b'/').next().unwrap_or(&[]);
                name = &name[..name.len().min(COMM_MAX)];
            }
            if name.is_empty() {
                continue;
            }
            let name = String::from_utf8_lossy(name);
            if self.learned.get(&pid).is_some_and(|old| *old == name) {
                continue;
            }
            self.learned.insert(pid, name.into_owned());
            self.settle(pid);
            *slot = Some(pid);
        }
        changed
    }

    /// Whether `pid` (above 0) was learned or found in the saved cmdlines.
    #[inline]
    fn is_settled(&self, pid: i32) -> bool {
        match usize::try_from(pid) {
            Ok(p) if p < SETTLED_PIDS => self
                .settled
                .get(p / 64)
                .is_some_and(|w| w >> (p % 64) & 1 == 1),
            _ => self.learned.contains_key(&pid),
        }
    }

    /// Marks `pid` (above 0) as learned or found in the saved cmdlines.
    fn settle(&mut self, pid: i32) {
        if let Ok(p) = usize::try_from(pid)
            && p < SETTLED_PIDS
        {
            if self.settled.len() <= p / 64 {
                self.settled.resize(p / 64 + 1, 0);
            }
            self.settled[p / 64] |= 1 << (p % 64);
        }
    }
}
