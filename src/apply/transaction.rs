//! Applying a [`Plan`] as a transaction: each step is done in order, its undo
//! journaled (fsync'd) before the step touches tracefs; the first failure undoes
//! every step already done, in reverse, and reports the failing write with the
//! kernel's `error_log` text.
//!
//! [`Transaction::rollback`] is the normal way out and returns a
//! [`RollbackReport`]; `Drop` rolls back only as a last resort (e.g. on a panic).
//! Once any undo has failed, nothing deletes the journal: it is left for
//! `trace-recipe reset`. If the process dies outright, the journal is what the
//! guard or `reset` replays.

use std::path::PathBuf;

use super::journal::{Journal, JournalError, Undo as Recorded};
use crate::fault::{self, FAIL_STEP_ENV, KILL_STEP_ENV};
use crate::plan::{Op, Plan, Step, Undo};
use crate::tracefs::{Instance, Tracefs, TracefsError, restore_value};
use crate::untrusted::teprintln;

/// A step that could not be applied, after everything before it was undone.
#[derive(Debug, thiserror::Error)]
#[error("step {number} of {total} failed: {step}\n  {source}")]
pub(crate) struct ApplyError {
    /// 1-based number of the failing step.
    pub(crate) number: usize,
    /// How many steps the plan has.
    pub(crate) total: usize,
    /// The failing step (its span points at the recipe entry).
    pub(crate) step: Step,
    /// What went wrong.
    #[source]
    pub(crate) source: StepError,
    /// How undoing the steps already done went.
    pub(crate) rollback: RollbackReport,
}

/// What a rollback did.
#[derive(Debug, Default)]
pub(crate) struct RollbackReport {
    /// Undos performed or attempted.
    pub(crate) undone: usize,
    /// Undos that failed: tracefs is not back as it was.
    pub(crate) failures: Vec<TracefsError>,
    /// The journal left on disk for `trace-recipe reset` (always when an undo failed).
    pub(crate) journal_kept: Option<PathBuf>,
}

impl RollbackReport {
    /// True when every undo succeeded (tracefs is as it was).
    pub(crate) fn complete(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Why one step failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepError {
    /// tracefs refused it.
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    /// Its undo could not be journaled, so it was not attempted.
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// Applied steps, not yet undone.
#[derive(Debug)]
pub(crate) struct Transaction {
    tracefs: Tracefs,
    /// The plan's instance (the top level when the run works there).
    instance: Instance,
    /// Undos of the steps done, each with its 1-based place in the journal.
    done: Vec<(usize, Recorded)>,
    /// Undos recorded so far.
    recorded: usize,
    journal: Option<Journal>,
    /// An undo has failed: the journal must outlive this transaction.
    failed: bool,
}

/// Applies `plan` step by step, journaling each undo in `journal` first (when
/// given). On failure everything done so far is undone and the error names the
/// step; `on_step(n)` is called before step `n` (1-based).
pub(crate) fn apply(
    tracefs: &Tracefs,
    plan: &Plan,
    journal: Option<Journal>,
    mut on_step: impl FnMut(usize),
) -> Result<Transaction, Box<ApplyError>> {
    let (fail_at, kill_at) = (fault::number(FAIL_STEP_ENV), fault::number(KILL_STEP_ENV));
    let mut tx = Transaction {
        tracefs: tracefs.clone(),
        instance: Instance::at_dir(tracefs, &plan.instance),
        done: Vec::new(),
        recorded: 0,
        journal,
        failed: false,
    };
    for (i, step) in plan.steps.iter().enumerate() {
        on_step(i + 1);
        let result = if fail_at == Some(i + 1) {
            Err(injected(step).into())
        } else {
            tx.apply_one(step, kill_at == Some(i + 1))
        };
        if let Err(source) = result {
            let rollback = tx.undo_all();
            return Err(Box::new(ApplyError {
                number: i + 1,
                total: plan.steps.len(),
                step: step.clone(),
                source,
                rollback,
            }));
        }
    }
    Ok(tx)
}

fn injected(step: &Step) -> TracefsError {
    let path = match &step.op {
        Op::Mkdir { dir } => dir.into(),
        Op::Write { file, .. } => file.into(),
        Op::Sysctl { sysctl, .. } => sysctl.path(),
    };
    TracefsError::Write {
        path,
        value: String::new(),
        source: std::io::Error::other(format!("injected failure ({FAIL_STEP_ENV})")),
        error_log: None,
    }
}

impl Transaction {
    fn apply_one(&mut self, step: &Step, kill_before_write: bool) -> Result<(), StepError> {
        let undo = match &step.op {
            Op::Mkdir { dir } => Some(Recorded::Rmdir { dir: dir.clone() }),
            Op::Write { file, undo, .. } => {
                let write = |value: String, append: bool| {
                    Some(Recorded::Write {
                        file: file.clone(),
                        value,
                        append,
                    })
                };
                match undo {
                    Undo::Nothing => None,
                    Undo::Restore => write(restore_value(file, &self.tracefs.read(file)?), false),
                    Undo::Write(v) => write(v.clone(), false),
                    Undo::Append(v) => write(v.clone(), true),
                }
            }
            Op::Sysctl { sysctl, .. } => Some(Recorded::Sysctl {
                name: sysctl.name().to_string(),
                value: sysctl.read()?,
            }),
        };
        let undo = match undo {
            Some(undo) => {
                if let Some(journal) = self.journal.as_mut() {
                    journal.record(&undo)?;
                }
                self.recorded += 1;
                Some((self.recorded, undo))
            }
            None => None,
        };
        if kill_before_write {
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        }
        match &step.op {
            Op::Mkdir { dir } => Instance::at_dir(&self.tracefs, dir).create()?,
            Op::Write {
                file, value, mode, ..
            } => {
                // Inside the run's instance, or a top-level file (a probe
                // definition, a global knob): each explained by its own error_log.
                let (instance, file) = Instance::holding(&self.tracefs, file);
                instance.write(file, value, *mode)?
            }
            Op::Sysctl { sysctl, value } => sysctl.write(value)?,
        }
        self.done.extend(undo);
        Ok(())
    }

    /// The instance this transaction works in.
    pub(crate) fn instance(&self) -> &Instance {
        &self.instance
    }

    /// Leaves every applied step in place (the flight recorder, armed to
    /// outlive the run): the journal is removed, so no guard or `reset` undoes
    /// them, and the undos are returned in the order they were recorded, for
    /// `collect-boot` to release the instance later (performed in reverse).
    pub(crate) fn keep(mut self) -> Vec<Recorded> {
        let undos = std::mem::take(&mut self.done)
            .into_iter()
            .map(|(_, u)| u)
            .collect();
        if let Some(j) = self.journal.take() {
            let _ = j.remove();
        }
        undos
    }

    /// Undoes every applied step in reverse order. When all undos succeeded the
    /// journal is deleted; otherwise it is closed and kept for `trace-recipe
    /// reset`, and the report names it.
    pub(crate) fn rollback(mut self) -> RollbackReport {
        self.undo_all()
    }

    /// Undoes what is left to undo and closes the journal: deleted only when no
    /// undo of this transaction has ever failed.
    fn undo_all(&mut self) -> RollbackReport {
        let mut report = RollbackReport::default();
        while let Some((n, undo)) = self.done.pop() {
            report.undone += 1;
            fault::kill_at(&format!("undo:{n}"));
            if let Err(e) = undo.perform_nth(&self.tracefs, n) {
                report.failures.push(e);
            }
        }
        self.failed |= !report.failures.is_empty();
        match self.journal.take() {
            Some(j) if self.failed => report.journal_kept = Some(j.keep()),
            Some(j) => {
                let _ = j.remove();
            }
            None => {}
        }
        report
    }
}

impl Drop for Transaction {
    /// Last resort (a panic between apply and rollback): rolls back what is left.
    /// After [`Transaction::rollback`] there is nothing left and this does nothing.
    fn drop(&mut self) {
        if self.done.is_empty() && self.journal.is_none() {
            return;
        }
        let report = self.undo_all();
        for e in &report.failures {
            teprintln!("trace-recipe: rollback: {e}");
        }
        if let Some(j) = &report.journal_kept {
            teprintln!(
                "trace-recipe: rollback incomplete: journal {} kept; run `trace-recipe reset`",
                j.display()
            );
        }
    }
}
