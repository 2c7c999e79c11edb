//! Sweeping: rolling back journals whose run and guard both died (a crash of the
//! whole process tree, or a guard killed too). Runs at the start of every `run`
//! and in `reset`. A journal still locked belongs to a live run or to a guard at
//! work, and is left alone.

use std::path::Path;

use super::journal::{self, JournalError};
use crate::tracefs::TracefsError;

/// What sweeping one stale journal did.
#[derive(Debug)]
pub(crate) struct Swept {
    /// The run's pid.
    pub(crate) pid: u32,
    /// Its instance.
    pub(crate) instance: String,
    /// Undos replayed.
    pub(crate) replayed: usize,
    /// Undos that failed (the journal is kept).
    pub(crate) failures: Vec<TracefsError>,
    /// What became of the dead run's workload, when it was still running.
    pub(crate) workload: Option<String>,
}

impl std::fmt::Display for Swept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rolled back {} change{} left by dead run {} ({})",
            self.replayed,
            if self.replayed == 1 { "" } else { "s" },
            self.pid,
            self.instance
        )?;
        if let Some(w) = &self.workload {
            write!(f, "\n  {w}")?;
        }
        for e in &self.failures {
            write!(f, "\n  undo failed: {e}")?;
        }
        Ok(())
    }
}

/// Ends the workload of dead run `run_pid` as its guard would have (SIGTERM to
/// its process group, a grace period, SIGKILL), when its record in `dir` says it
/// still runs — the same pid with the same start time, so a reused pid is never
/// hit — and the recipe did not say `on_abort = "leave"`. Returns what was done.
fn end_orphan(dir: &Path, run_pid: u32) -> Option<String> {
    use crate::workload::WorkloadRecord;
    let path = WorkloadRecord::path(dir, run_pid);
    let w: WorkloadRecord = serde_json::from_slice(
        &crate::untrusted::read(&path, crate::untrusted::Kind::Report).ok()?,
    )
    .ok()?;
    if w.run_alive() {
        return None;
    }
    let what = format!(
        "pid {} (process group {}): {}",
        w.pid,
        w.pid,
        crate::untrusted::escape(&w.command.join(" "))
    );
    // The pidfd pins the process: checked for the recorded start time after
    // it is opened, the signals cannot reach a process that reused the pid.
    let fd = crate::workload::pidfd_of(w.pid)
        .ok()
        .filter(|_| w.workload_alive());
    let Some(fd) = fd else {
        let _ = std::fs::remove_file(&path);
        return None;
    };
    if !w.end_on_abort {
        return Some(format!(
            "left the workload of dead run {run_pid} running, as its recipe says (on_abort = \"leave\"): {what}"
        ));
    }
    crate::workload::end_group(&fd, w.pid, super::guard::ORPHAN_GRACE);
    let _ = std::fs::remove_file(&path);
    Some(format!("ended the workload of dead run {run_pid}: {what}"))
}

/// Replays every unlocked journal in `dir`.
pub(crate) fn sweep(dir: &Path) -> Vec<Result<Swept, JournalError>> {
    let mut out = Vec::new();
    for path in journal::list(dir) {
        let Some(_lock) = journal::lock(&path, false) else {
            continue;
        };
        match journal::read(&path) {
            Ok(r) => {
                let (replayed, failures) = r.replay("reset");
                let (pid, instance) = (r.header.pid, r.header.instance);
                out.push(Ok(Swept {
                    pid,
                    instance,
                    replayed,
                    failures,
                    workload: end_orphan(dir, pid),
                }));
            }
            // Its run died while creating it: nothing was recorded or changed.
            Err(JournalError::Headerless { .. }) => {
                let _ = std::fs::remove_file(&path);
            }
            Err(e) => out.push(Err(e)),
        }
    }
    out
}
