//! The guard: a small process started with every run that rolls the run back if
//! it dies without doing so itself (SIGKILL, OOM kill, an abort).
//!
//! It is this binary as `__guard JOURNAL`, in a session of its own (so Ctrl-C and
//! a terminal hang-up do not reach it), holding nothing open in tracefs. It
//! blocks on a pipe whose other end only the run holds. When the pipe reads
//! end-of-file the run is gone: if its journal still exists (a clean run deletes
//! it first), the guard locks it, replays it in reverse and deletes it, then exits.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::journal;
use crate::stub;

/// Hidden subcommand name.
pub const GUARD: &str = "__guard";

/// A running guard.
#[derive(Debug)]
pub struct Guard {
    child: Child,
    pipe: Option<OwnedFd>,
}

impl Guard {
    /// Starts the guard for the journal at `journal`.
    pub fn spawn(journal: &Path) -> std::io::Result<Guard> {
        let pid = std::process::id().to_string();
        let (child, pipe) = stub::spawn(
            &[
                OsStr::new(GUARD),
                OsStr::new("--run-pid"),
                OsStr::new(&pid),
                OsStr::new("--"),
                journal.as_os_str(),
            ],
            true,
            |c| {
                c.stdin(Stdio::null()).stdout(Stdio::null());
            },
        )?;
        Ok(Guard {
            child,
            pipe: Some(pipe),
        })
    }

    /// The guard's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Guard {
    /// Ends the guard: closing the pipe tells it the run is over. After a clean
    /// rollback the journal is gone and it exits at once; otherwise it replays
    /// what is left. Reaps it when it is quick about it.
    fn drop(&mut self) {
        self.pipe = None;
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Body of `__guard --run-pid PID -- JOURNAL`: wait for the run to end, then replay its journal
/// if it is still there. Returns the exit code.
pub fn guard_main(journal_path: &Path, run_pid: i32) -> i32 {
    if stub::wait_on_parent().is_some() {
        return 0;
    }
    // The pipe closes while the run is still exiting; wait until it is a zombie
    // or gone, so that all its files (trace_pipe_raw readers) are closed. The pid
    // comes from the run itself: it may have died before we could ask getppid.
    wait_until_dead(run_pid, Duration::from_secs(2));
    let Some(_lock) = journal::lock(journal_path, true) else {
        return 0;
    };
    match journal::read(journal_path) {
        Ok(recorded) => {
            let (n, failures) = recorded.replay();
            eprintln!(
                "trace-recipe guard: run {} ended without rolling back; undid {n} change{} from {}",
                recorded.header.pid,
                if n == 1 { "" } else { "s" },
                journal_path.display()
            );
            for f in &failures {
                eprintln!("trace-recipe guard: undo failed: {f}; run `trace-recipe reset`");
            }
            i32::from(!failures.is_empty())
        }
        Err(journal::JournalError::Headerless { .. }) => {
            let _ = std::fs::remove_file(journal_path);
            0
        }
        Err(e) => {
            eprintln!("trace-recipe guard: {e}; run `trace-recipe reset`");
            1
        }
    }
}

/// Waits until process `pid` has exited (gone, or a zombie whose files are all
/// closed), at most `limit`.
fn wait_until_dead(pid: i32, limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return,
            Ok(stat) => {
                let state = stat
                    .rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().next());
                if matches!(state, Some("Z" | "X")) {
                    return;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
