//! pid → comm learned from the events that name a task, for the pids the
//! file's saved cmdlines do not know.

use rustc_hash::FxHashMap;

use crate::{Event, FieldValue, Record, TraceFile};

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
#[derive(Debug, Default, Clone)]
pub struct Comms {
    learned: FxHashMap<i32, String>,
}

/// Whether records of `system:name` can name a task (so [`Comms::learn`] is
/// worth calling). A cheap check to make once per event format.
pub fn names_tasks(system: &str, name: &str) -> bool {
    matches!(
        (system, name),
        (
            "sched",
            "sched_switch"
                | "sched_wakeup"
                | "sched_wakeup_new"
                | "sched_process_fork"
                | "sched_process_exec"
        ) | ("task", "task_newtask" | "task_rename")
    )
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
        let mut wanted: Vec<Option<bool>> = Vec::new();
        for rec in file.records() {
            let Record::Event(ev) = rec? else { continue };
            let id = usize::from(ev.format.id);
            if id >= wanted.len() {
                wanted.resize(id + 1, None);
            }
            let w =
                *wanted[id].get_or_insert_with(|| names_tasks(&ev.format.system, &ev.format.name));
            if w {
                comms.learn(file, &ev);
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
        let mut changed = [None, None];
        let (pairs, replace): (&[(&str, &str)], bool) =
            match (ev.format.system.as_str(), ev.format.name.as_str()) {
                ("sched", "sched_switch") => (
                    &[("prev_pid", "prev_comm"), ("next_pid", "next_comm")],
                    false,
                ),
                ("sched", "sched_wakeup" | "sched_wakeup_new") => (&[("pid", "comm")], false),
                ("sched", "sched_process_fork") => (&[("child_pid", "child_comm")], false),
                ("task", "task_newtask") => (&[("pid", "comm")], false),
                ("task", "task_rename") => (&[("pid", "newcomm")], true),
                ("sched", "sched_process_exec") => (&[("pid", "filename")], true),
                _ => return changed,
            };
        for (slot, (pid, comm)) in changed.iter_mut().zip(pairs) {
            let pid = match ev.field(pid) {
                Some(FieldValue::Int(i)) => i as i32,
                Some(FieldValue::UInt(u)) => u as i32,
                _ => continue,
            };
            if pid <= 0 || file.comm(pid).is_some() {
                continue;
            }
            if !replace && self.learned.contains_key(&pid) {
                continue;
            }
            let raw = ev
                .format
                .field(comm)
                .and_then(|f| f.raw(&ev.data, ev.big_endian));
            let Some(raw) = raw else { continue };
            let mut name = raw.split(|c| *c == 0).next().unwrap_or(&[]);
            if *comm == "filename" {
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
            *slot = Some(pid);
        }
        changed
    }
}
