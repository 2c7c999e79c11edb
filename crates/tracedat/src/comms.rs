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
    /// Whether trace-cmd registers the tasks these records name (its
    /// sched_switch plugin handles sched_switch, sched_wakeup and
    /// sched_wakeup_new; see [`TaskTable`]).
    registers: bool,
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
        let registers = format.system == "sched"
            && matches!(
                format.name.as_str(),
                "sched_switch" | "sched_wakeup" | "sched_wakeup_new"
            );
        Some(Learner {
            tasks,
            replace,
            registers,
        })
    }

    /// Whether trace-cmd learns task names from these records (its
    /// sched_switch plugin: sched_switch, sched_wakeup, sched_wakeup_new);
    /// other formats (fork, exec, rename) never rename a task in its listing.
    pub fn registers(&self) -> bool {
        self.registers
    }

    /// The `(pid, comm)` of each task `ev` names, the comm's bytes up to
    /// its first NUL; a task whose fields do not read is left out.
    fn named<'e>(&self, ev: &'e Event<'_>) -> impl Iterator<Item = (i32, &'e [u8])> {
        self.tasks.iter().flatten().filter_map(move |task| {
            let pid = task.pid.get(&ev.data, ev.big_endian)? as i32;
            let raw = field_at(ev.format, task.comm)?.raw(&ev.data, ev.big_endian)?;
            Some((pid, raw.split(|c| *c == 0).next().unwrap_or(&[])))
        })
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
        if self.knows(learner, ev) {
            return [None, None];
        }
        self.learn_names(learner, file, ev)
    }

    /// Whether [`Comms::learn_with`] would learn nothing from `ev` because
    /// every task it names is settled (learned, or in the saved cmdlines):
    /// what most records of a long trace give. A caller in a loop over
    /// records asks this first, inlined, and calls `learn_with` for the rest.
    #[inline]
    pub fn knows(&self, learner: &Learner, ev: &Event<'_>) -> bool {
        let settled = |task: &Option<TaskAt>| match task {
            None => true,
            Some(t) => t
                .pid
                .get(&ev.data, ev.big_endian)
                .is_none_or(|p| p as i32 <= 0 || self.is_settled(p as i32)),
        };
        !learner.replace && learner.tasks.iter().all(settled)
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

/// trace-cmd's pid → comm table (libtraceevent's `cmdlines`, see
/// `tep_register_comm` and `find_cmdline` in its event-parse.c), kept only
/// where it names a task otherwise than [`Comms`] does.
///
/// trace-cmd registers the saved cmdlines in file order, then, while it
/// prints, each task a sched_switch, sched_wakeup or sched_wakeup_new record
/// names (its sched_switch plugin). Registrations go to a list until a
/// record of a task other than pid 0 (`<idle>`) is printed; then the list
/// becomes an array sorted by pid (glibc's stable `qsort`, the list read
/// newest first), and a registration of a pid already in it is dropped.
/// So only the pid-0 records printed first (wakeups from an idle CPU, a
/// switch from the idle task) can register a pid a second time: its task
/// column then shows whichever of its names glibc's `bsearch` meets, which
/// can change as later pids are inserted. Without such a pid the table says
/// what the saved cmdlines and [`Comms`] say, and this keeps nothing.
///
/// Bounded: at most [`MAX_LISTED`] registrations are kept before the first
/// lookup, and pids are inserted into a table holding a pid twice until it
/// has [`MAX_LISTED`] entries; past that each such pid keeps the name it has
/// then (trace-cmd's could still change).
#[derive(Debug)]
pub struct TaskTable {
    state: TableState,
}

/// The most registrations a [`TaskTable`] keeps before the first lookup,
/// and the most entries it inserts pids into (each insertion moves the
/// entries after it, as libtraceevent's does).
const MAX_LISTED: usize = 1 << 14;

#[derive(Debug)]
enum TableState {
    /// No task other than pid 0 printed yet: the tasks the printed records
    /// registered, in order.
    Listing(Vec<(i32, String)>),
    /// No pid twice in the table.
    Plain,
    /// Some pid twice: the table's pids in order, and the names of each
    /// pid it holds more than once, in table order.
    Twice {
        pids: Vec<i32>,
        names: FxHashMap<i32, Vec<String>>,
    },
    /// Past [`MAX_LISTED`] entries: the name each pid held twice had then.
    Fixed(FxHashMap<i32, String>),
}

impl Default for TaskTable {
    fn default() -> Self {
        TaskTable {
            state: TableState::Listing(Vec::new()),
        }
    }
}

impl TaskTable {
    /// The table before the first record is printed.
    pub fn new() -> Self {
        Self::default()
    }

    /// To call before printing a record of task `pid`: the first task other
    /// than pid 0 turns the list into the array (see [`TaskTable`]).
    #[inline]
    pub fn look_up(&mut self, file: &TraceFile, pid: i32) {
        if pid != 0 && matches!(self.state, TableState::Listing(_)) {
            self.sort(file);
        }
    }

    #[inline(never)]
    fn sort(&mut self, file: &TraceFile) {
        let TableState::Listing(early) = std::mem::replace(&mut self.state, TableState::Plain)
        else {
            return;
        };
        let mut all: Vec<(i32, &str)> = file
            .saved_cmdlines()
            .iter()
            .chain(&early)
            .map(|(pid, comm)| (*pid, comm.as_str()))
            .collect();
        all.reverse();
        all.sort_by_key(|(pid, _)| *pid);
        let mut names: FxHashMap<i32, Vec<String>> = FxHashMap::default();
        for run in all.chunk_by(|a, b| a.0 == b.0) {
            if run.len() > 1 && run[0].0 != 0 {
                names.insert(run[0].0, run.iter().map(|(_, c)| c.to_string()).collect());
            }
        }
        if !names.is_empty() {
            self.state = TableState::Twice {
                pids: all.iter().map(|(pid, _)| *pid).collect(),
                names,
            };
            if all.len() >= MAX_LISTED {
                self.fix();
            }
        }
    }

    /// To call after printing `ev`, whose format's learner is `learner`:
    /// registers the tasks it names as trace-cmd does. Returns whether the
    /// names of pids held twice may have changed ([`TaskTable::twice`]).
    pub fn register(&mut self, learner: &Learner, ev: &Event<'_>) -> bool {
        if !learner.registers {
            return false;
        }
        match &mut self.state {
            TableState::Plain | TableState::Fixed(_) => false,
            TableState::Listing(early) => {
                for (pid, comm) in learner.named(ev) {
                    if early.len() < MAX_LISTED {
                        early.push((pid, String::from_utf8_lossy(comm).into_owned()));
                    }
                }
                false
            }
            TableState::Twice { pids, .. } => {
                let mut changed = false;
                for (pid, _) in learner.named(ev) {
                    if let (true, Err(at)) = (pid != 0, pids.binary_search(&pid)) {
                        pids.insert(at, pid);
                        changed = true;
                    }
                }
                if pids.len() >= MAX_LISTED {
                    self.fix();
                }
                changed
            }
        }
    }

    /// Keeps the name each pid held twice has now, and inserts no more.
    #[cold]
    fn fix(&mut self) {
        let fixed = self
            .twice()
            .filter_map(|pid| Some((pid, self.name(pid)?.to_string())))
            .collect();
        self.state = TableState::Fixed(fixed);
    }

    /// The pids the table holds more than once.
    pub fn twice(&self) -> impl Iterator<Item = i32> + '_ {
        let (twice, fixed) = match &self.state {
            TableState::Twice { names, .. } => (Some(names.keys().copied()), None),
            TableState::Fixed(names) => (None, Some(names.keys().copied())),
            _ => (None, None),
        };
        twice
            .into_iter()
            .flatten()
            .chain(fixed.into_iter().flatten())
    }

    /// The name trace-cmd prints for `pid` when the table holds it more than
    /// once: the one glibc's `bsearch` (midpoint `(lo + hi) / 2`) meets
    /// first; `None` for any other pid.
    pub fn name(&self, pid: i32) -> Option<&str> {
        let (pids, names) = match &self.state {
            TableState::Twice { pids, names } => (pids, names),
            TableState::Fixed(names) => return names.get(&pid).map(String::as_str),
            _ => return None,
        };
        let held = names.get(&pid)?;
        let at = crate::reader::glibc_bsearch(pids.len(), |mid| {
            pids.get(mid)
                .map_or(std::cmp::Ordering::Less, |p| pid.cmp(p))
        })?;
        let first = pids.partition_point(|p| *p < pid);
        held.get(at - first).map(String::as_str)
    }
}
