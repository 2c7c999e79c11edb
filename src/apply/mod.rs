//! Applying a plan and guaranteeing its undo.
//!
//! - `transaction`: do the plan's steps in order, each journaled before it
//!   touches tracefs; undo them in reverse on failure or at the end of the run.
//! - [`journal`]: the on-disk record of what a run changed (under /run),
//!   replayed in reverse by whoever finds the run dead.
//! - `guard`: a small process started with each run that replays the journal
//!   within a moment of the run dying (SIGKILL, OOM kill, a panic that aborts).
//! - `sweep`: rolls back journals of runs whose run and guard both died (used
//!   by `reset` and at the start of every `run`).
//! - `hooks`: named test-only points at which a run is killed or a stage fails.

pub(crate) mod guard;
pub(crate) mod hooks;
pub mod journal;
pub(crate) mod sweep;
pub(crate) mod transaction;

pub use hooks::{FAIL_AT_ENV, KILL_AT_ENV};
pub use journal::{FAIL_JOURNAL_ENV, FAIL_UNDO_ENV};
pub(crate) use transaction::{ApplyError, RollbackReport, Transaction, apply};
pub use transaction::{FAIL_STEP_ENV, KILL_STEP_ENV};
