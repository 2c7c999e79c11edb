//! The journal: one file per run under [`JOURNAL_DIR`], JSON lines, each record
//! written with one write(2) before its change is made. The journal guards
//! against the run's death, not the machine's: what a dead process wrote stays
//! in the page cache for the guard and `reset` to read, and a reboot resets
//! tracefs itself, so no fsync is needed (it cost about a millisecond per step
//! on an ext4 /run, most of a 755-step apply). The first line is a [`Header`] naming the run (pid and process
//! start time, so a reused pid is not mistaken for the run); every later line is
//! an [`Undo`] recorded *before* the change it undoes is made. Replaying the
//! undos in reverse returns tracefs to where it was; undoing a change that never
//! happened (the run died between journaling and writing) is harmless, because
//! every undo is idempotent: rmdir of a missing directory and writes into it are
//! skipped, and restoring a before-image that is still in place changes nothing.
//!
//! A clean rollback deletes the journal. The format is versioned; a journal of a
//! newer version is refused, never guessed at.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fault::{self, FAIL_JOURNAL_ENV, FAIL_UNDO_ENV};
use crate::tracefs::{Instance, Sysctl, Tracefs, TracefsError, WriteMode};

/// Where journals live: tmpfs, so a reboot (which resets tracefs too) clears them.
pub const JOURNAL_DIR: &str = "/run/trace-recipe";
/// Journal format version written by this build.
pub const JOURNAL_VERSION: u32 = 1;

/// First line of a journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Always `trace-recipe-journal`.
    pub format: String,
    /// [`JOURNAL_VERSION`] of the writer.
    pub version: u32,
    /// The run's pid.
    pub pid: u32,
    /// The run's start time (field 22 of /proc/PID/stat, clock ticks since boot).
    pub start_time: u64,
    /// The tracefs root the run used.
    pub tracefs: PathBuf,
    /// The run's instance directory (relative to tracefs).
    pub instance: String,
}

/// How to undo one change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "undo", rename_all = "snake_case")]
pub enum Undo {
    /// Remove a directory (an instance) the run created.
    Rmdir {
        /// Relative to tracefs.
        dir: String,
    },
    /// Write `value` to `file`.
    Write {
        /// Relative to tracefs.
        file: String,
        /// The before-image or the undo command.
        value: String,
        /// Replace or append.
        append: bool,
    },
    /// Write `value` back to a tracing sysctl (one of `crate::tracefs::Sysctl::ALL`).
    Sysctl {
        /// Its name under /proc/sys (`kernel/stack_tracer_enabled`).
        name: String,
        /// The before-image.
        value: String,
    },
}

impl Undo {
    /// Performs the undo recorded `n`-th (1-based) in its journal: as
    /// [`Undo::perform`], except that it fails untouched when [`FAIL_UNDO_ENV`]
    /// names `n`.
    pub(crate) fn perform_nth(&self, tracefs: &Tracefs, n: usize) -> Result<(), TracefsError> {
        if fault::number(FAIL_UNDO_ENV) == Some(n) {
            let file = match self {
                Undo::Rmdir { dir } => dir,
                Undo::Write { file, .. } | Undo::Sysctl { name: file, .. } => file,
            };
            return Err(TracefsError::Write {
                path: tracefs.path(file),
                value: String::new(),
                source: std::io::Error::other(format!("injected undo failure ({FAIL_UNDO_ENV})")),
                error_log: None,
            });
        }
        self.perform(tracefs)
    }

    /// Performs the undo. A missing file or directory counts as already undone.
    pub(crate) fn perform(&self, tracefs: &Tracefs) -> Result<(), TracefsError> {
        let result = match self {
            Undo::Rmdir { dir } => {
                let instance = Instance::at_dir(tracefs, dir);
                if !instance.exists("") {
                    return Ok(());
                }
                instance.destroy()
            }
            Undo::Write {
                file,
                value,
                append,
            } => {
                let (instance, file) = Instance::holding(tracefs, file);
                if !instance.exists(file) {
                    return Ok(());
                }
                let mode = if *append {
                    WriteMode::Append
                } else {
                    WriteMode::Replace
                };
                instance.write(file, value, mode)
            }
            // Only the sysctls a plan writes: a journal is never a way to write
            // anything else under /proc/sys.
            Undo::Sysctl { name, value } => match Sysctl::named(name) {
                Some(sysctl) => sysctl.write(value),
                None => Err(TracefsError::Write {
                    path: PathBuf::from("/proc/sys").join(name),
                    value: value.clone(),
                    source: std::io::Error::other(
                        "not a sysctl trace-recipe writes; left untouched",
                    ),
                    error_log: None,
                }),
            },
        };
        match result {
            // The instance went away under us (an earlier undo, or `reset`).
            Err(TracefsError::Write { source, .. } | TracefsError::Dir { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(())
            }
            other => other,
        }
    }
}

/// Why a journal could not be written or read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JournalError {
    /// I/O on the journal file.
    #[error("journal {}: {source}", .path.display())]
    Io {
        /// The journal.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The run died while creating the journal: it recorded nothing.
    #[error("journal {} has no header: its run died before recording anything", .path.display())]
    Headerless {
        /// The journal.
        path: PathBuf,
    },
    /// The journal is not one we can read.
    #[error("journal {}: {reason}", .path.display())]
    Unreadable {
        /// The journal.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// An open journal being appended to by a run.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    file: File,
    records: usize,
}

impl Journal {
    /// Creates the journal of this process in `dir` (created 0700 if needed).
    pub(crate) fn create(dir: &Path, header: &Header) -> Result<Journal, JournalError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| JournalError::Io { path, source }
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io(dir))?;
        let path = path_for(dir, header.pid);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(io(&path))?;
        // Held for the run's life: the guard and `reset` replay a journal only
        // once they can lock it, that is once the run is gone.
        rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
            |e| JournalError::Io {
                path: path.clone(),
                source: e.into(),
            },
        )?;
        let mut j = Journal {
            path,
            file,
            records: 0,
        };
        let line = serde_json::to_string(header).unwrap_or_default();
        j.append_line(&line)?;
        Ok(j)
    }

    /// Records `undo` (one write(2), which outlives this process) before its change
    /// is made. Errors: the write failed; the undo may then be in the file or not,
    /// and the change must not be made.
    pub(crate) fn record(&mut self, undo: &Undo) -> Result<(), JournalError> {
        self.records += 1;
        if fault::number(FAIL_JOURNAL_ENV) == Some(self.records) {
            return Err(JournalError::Io {
                path: self.path.clone(),
                source: std::io::Error::other(format!(
                    "injected journal write failure ({FAIL_JOURNAL_ENV})"
                )),
            });
        }
        let line = serde_json::to_string(undo).unwrap_or_default();
        self.append_line(&line)
    }

    fn append_line(&mut self, line: &str) -> Result<(), JournalError> {
        let path = self.path.clone();
        let io = move |source| JournalError::Io { path, source };
        self.file
            .write_all(format!("{line}\n").as_bytes())
            .map_err(io)
    }

    /// Closes the journal and leaves it on disk (unlocked, so that `reset` can
    /// replay it): what a rollback with a failed undo does. Returns its path.
    pub(crate) fn keep(self) -> PathBuf {
        self.path
    }

    /// Deletes the journal after a clean rollback.
    pub(crate) fn remove(self) -> Result<(), JournalError> {
        std::fs::remove_file(&self.path).map_err(|source| JournalError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

/// A journal read back from disk.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    /// The file.
    pub(crate) path: PathBuf,
    /// Its header.
    pub(crate) header: Header,
    /// Its undos, in the order they were recorded.
    pub(crate) undos: Vec<Undo>,
}

/// Locks the journal at `path` exclusively (waiting when `wait`), so that only one
/// process replays it and never while its run is alive. `None` when it is locked
/// by someone else (and `wait` is false) or no longer exists.
pub fn lock(path: &Path, wait: bool) -> Option<File> {
    let f = File::open(path).ok()?;
    let op = if wait {
        rustix::fs::FlockOperation::LockExclusive
    } else {
        rustix::fs::FlockOperation::NonBlockingLockExclusive
    };
    rustix::fs::flock(&f, op).ok()?;
    // It may have been replayed and removed while we waited.
    path.exists().then_some(f)
}

/// Reads a journal. A torn last line (the run died mid-write) is ignored.
///
/// Errors: [`JournalError::Headerless`] for a journal whose run died while
/// creating it (nothing was recorded, so nothing needs undoing: delete it);
/// [`JournalError::Unreadable`] for one that is not ours or is too new.
pub(crate) fn read(path: &Path) -> Result<Recorded, JournalError> {
    let unreadable = |reason: String| JournalError::Unreadable {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    // The header is written whole before any undo: without a
    // complete first line, the run recorded nothing.
    let Some((first, rest)) = text.split_once('\n') else {
        return Err(JournalError::Headerless {
            path: path.to_path_buf(),
        });
    };
    let header: Header =
        serde_json::from_str(first).map_err(|e| unreadable(format!("bad header: {e}")))?;
    if header.format != "trace-recipe-journal" {
        return Err(unreadable(format!(
            "not a trace-recipe journal ({})",
            header.format
        )));
    }
    if header.version > JOURNAL_VERSION {
        return Err(unreadable(format!(
            "written by a newer trace-recipe (journal version {}, this one reads up to {JOURNAL_VERSION}); roll it back with that version",
            header.version
        )));
    }
    let mut undos = Vec::new();
    for line in rest.lines() {
        match serde_json::from_str::<Undo>(line) {
            Ok(u) => undos.push(u),
            Err(_) => break, // torn final record
        }
    }
    Ok(Recorded {
        path: path.to_path_buf(),
        header,
        undos,
    })
}

impl Recorded {
    /// Replays the undos in reverse order against tracefs, then deletes the journal
    /// when every undo succeeded. Returns the number of undos replayed and the
    /// failures (the journal is kept when there are any, for `reset` to finish).
    ///
    /// Replayed once, with no retries: the guard replays only after the dead
    /// run has exited (its trace_pipe_raw readers are closed then), and `reset`
    /// only journals no live process holds; every undo is idempotent, so a later
    /// `reset` can replay a kept journal again.
    /// `who` (`guard` or `reset`) names the replayer for the test hook
    /// `{who}-undo:N` ([`crate::fault`]).
    pub(crate) fn replay(&self, who: &str) -> (usize, Vec<TracefsError>) {
        let tracefs = Tracefs::at(&self.header.tracefs);
        let mut failures = Vec::new();
        for (i, undo) in self.undos.iter().enumerate().rev() {
            fault::kill_at(&format!("{who}-undo:{}", i + 1));
            if let Err(e) = undo.perform_nth(&tracefs, i + 1) {
                failures.push(e);
            }
        }
        if failures.is_empty() {
            let _ = std::fs::remove_file(&self.path);
        }
        (self.undos.len(), failures)
    }
}

/// The journal path of run `pid` in `dir`.
pub fn path_for(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("run-{pid}.journal"))
}

/// Every journal in `dir`, sorted by path.
pub fn list(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "journal"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_in_order_and_a_torn_line_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let header = Header {
            format: "trace-recipe-journal".into(),
            version: JOURNAL_VERSION,
            pid: 42,
            start_time: 7,
            tracefs: "/nonexistent".into(),
            instance: "instances/x".into(),
        };
        let mut j = Journal::create(dir.path(), &header).unwrap();
        j.record(&Undo::Rmdir {
            dir: "instances/x".into(),
        })
        .unwrap();
        j.record(&Undo::Write {
            file: "instances/x/buffer_size_kb".into(),
            value: "1408".into(),
            append: false,
        })
        .unwrap();
        let path = path_for(dir.path(), header.pid);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"undo\":\"wri")
            .unwrap();
        let r = read(&path).unwrap();
        assert_eq!(r.header, header);
        assert_eq!(r.undos.len(), 2);
        assert_eq!(
            r.undos[0],
            Undo::Rmdir {
                dir: "instances/x".into()
            }
        );
    }

    /// A journal as version 1 writes it, byte for byte: it must stay readable
    /// (and replayable by `reset`) by every later build.
    #[test]
    fn a_version_1_journal_reads_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run-7.journal");
        std::fs::write(
            &p,
            concat!(
                "{\"format\":\"trace-recipe-journal\",\"version\":1,\"pid\":7,\"start_time\":5,\"tracefs\":\"/sys/kernel/tracing\",\"instance\":\"instances/trace-recipe-x-7\"}\n",
                "{\"undo\":\"rmdir\",\"dir\":\"instances/trace-recipe-x-7\"}\n",
                "{\"undo\":\"write\",\"file\":\"kprobe_events\",\"value\":\"-:trace_recipe_7/open\",\"append\":true}\n",
                "{\"undo\":\"write\",\"file\":\"instances/trace-recipe-x-7/events/sched/sched_switch/enable\",\"value\":\"0\",\"append\":false}\n",
            ),
        )
        .unwrap();
        let r = read(&p).unwrap();
        assert_eq!(r.header.instance, "instances/trace-recipe-x-7");
        assert_eq!(
            r.undos,
            [
                Undo::Rmdir {
                    dir: "instances/trace-recipe-x-7".into()
                },
                Undo::Write {
                    file: "kprobe_events".into(),
                    value: "-:trace_recipe_7/open".into(),
                    append: true
                },
                Undo::Write {
                    file: "instances/trace-recipe-x-7/events/sched/sched_switch/enable".into(),
                    value: "0".into(),
                    append: false
                },
            ]
        );
    }

    #[test]
    fn a_newer_journal_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run-1.journal");
        std::fs::write(&p, "{\"format\":\"trace-recipe-journal\",\"version\":99,\"pid\":1,\"start_time\":1,\"tracefs\":\"/x\",\"instance\":\"i\"}\n").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("newer trace-recipe"), "{e}");
    }
}
