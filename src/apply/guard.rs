//! The guard: a small process started with every run that rolls the run back if
//! it dies without doing so itself (SIGKILL, OOM kill, an abort), and ends the
//! run's workload then too.
//!
//! It is this binary as `__guard --run-pid PID [--workload-pid PID] -- JOURNAL`,
//! in a session of its own (so Ctrl-C and a terminal hang-up do not reach it),
//! holding nothing open in tracefs. It blocks on a pipe whose other end only the
//! run holds. The run ends it with one byte, [`DONE`], once its own teardown is
//! over (whatever that teardown left, a kept journal included, is then `reset`'s
//! business). End-of-file without that byte means the run died: the guard sends
//! SIGTERM to the workload's process group (when it was given one), waits for
//! the run to be gone (a pidfd), locks the journal, replays it in reverse and
//! deletes it when every undo succeeded, then SIGKILLs what is left of the
//! workload's group after a grace period.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use rustix::process::Signal;

use super::journal;
use crate::stub;
use crate::untrusted::teprintln;

/// Hidden subcommand name.
pub(crate) const GUARD: &str = "__guard";

/// The byte a run sends its guard when its teardown is over: exit, replay nothing.
pub(crate) const DONE: u8 = b'd';

/// How long an orphaned workload has between SIGTERM and SIGKILL.
pub(crate) const ORPHAN_GRACE: Duration = Duration::from_secs(1);

/// A running guard.
#[derive(Debug)]
pub(crate) struct Guard {
    child: Child,
    pipe: Option<OwnedFd>,
}

impl Guard {
    /// Starts the guard for the journal at `journal`; when `workload` is given
    /// (the pid of a workload leading its own process group), the guard ends that
    /// group if the run dies without rolling back.
    pub(crate) fn spawn(journal: &Path, workload: Option<u32>) -> std::io::Result<Guard> {
        crate::fault::fail_at("guard")?;
        let pid = std::process::id().to_string();
        let workload = workload.map(|w| w.to_string());
        let mut args = vec![OsStr::new(GUARD), OsStr::new("--run-pid"), OsStr::new(&pid)];
        if let Some(w) = &workload {
            args.extend([OsStr::new("--workload-pid"), OsStr::new(w)]);
        }
        args.extend([OsStr::new("--"), journal.as_os_str()]);
        let (child, pipe) = stub::spawn(&args, true, |c| {
            c.stdin(Stdio::null()).stdout(Stdio::null());
        })?;
        Ok(Guard {
            child,
            pipe: Some(pipe),
        })
    }

    /// The guard's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Tells the guard the run's teardown is over and reaps it: it exits at once,
    /// touching nothing.
    pub(crate) fn done(mut self) -> std::io::Result<()> {
        if let Some(pipe) = self.pipe.take() {
            rustix::io::write(&pipe, &[DONE])?;
        }
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Guard {
    /// Last resort (a run that panics past its teardown): closing the pipe
    /// without [`DONE`] makes the guard treat the run as dead once it has exited.
    fn drop(&mut self) {
        self.pipe = None;
    }
}

/// Body of `__guard --run-pid PID [--workload-pid PID] -- JOURNAL`: wait for the
/// run to end; if it died, end its workload and replay its journal if it is
/// still there. Returns the exit code.
pub(crate) fn guard_main(journal_path: &Path, run_pid: u32, workload_pid: Option<u32>) -> i32 {
    // Opened while both are alive (the run spawned us after the workload), so a
    // pid reused later is never mistaken for them. A run already gone has no pidfd.
    let run = crate::workload::pidfd_of(run_pid).ok();
    let workload = workload_pid.and_then(|p| Some((p, crate::workload::pidfd_of(p).ok()?)));
    if stub::wait_on_parent().is_some() {
        return 0;
    }
    if let Some((pgid, _)) = &workload {
        crate::workload::signal_group(*pgid, Signal::TERM);
    }
    // The pipe closes while the run is still exiting; wait until it is a zombie
    // or gone, so that all its files (trace_pipe_raw readers) are closed.
    if let Some(run) = &run {
        crate::workload::wait_exit(run, Duration::from_secs(2));
    }
    let code = replay(journal_path);
    if let Some((pgid, leader)) = &workload {
        crate::workload::wait_exit(leader, ORPHAN_GRACE);
        crate::workload::signal_group(*pgid, Signal::KILL);
        if let Some(dir) = journal_path.parent() {
            let _ = std::fs::remove_file(crate::workload::WorkloadRecord::path(dir, run_pid));
        }
    }
    code
}

/// Replays the journal of a dead run, if it is still there; the exit code.
fn replay(journal_path: &Path) -> i32 {
    let Some(_lock) = journal::lock(journal_path, true) else {
        return 0;
    };
    match journal::read(journal_path) {
        Ok(recorded) => {
            let (n, failures) = recorded.replay("guard");
            teprintln!(
                "trace-recipe guard: run {} ended without rolling back; undid {n} change{} from {}",
                recorded.header.pid,
                if n == 1 { "" } else { "s" },
                journal_path.display()
            );
            for f in &failures {
                teprintln!("trace-recipe guard: undo failed: {f}; run `trace-recipe reset`");
            }
            i32::from(!failures.is_empty())
        }
        Err(journal::JournalError::Headerless { .. }) => {
            let _ = std::fs::remove_file(journal_path);
            0
        }
        Err(e) => {
            teprintln!("trace-recipe guard: {e}; run `trace-recipe reset`");
            1
        }
    }
}
