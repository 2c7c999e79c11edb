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
        for e in &self.failures {
            write!(f, "\n  undo failed: {e}")?;
        }
        Ok(())
    }
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
