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
//!
//! The test-only points at which an apply or a rollback is killed or fails are
//! in [`crate::fault`].

pub(crate) mod guard;
pub mod journal;
pub(crate) mod sweep;
pub(crate) mod transaction;

pub(crate) use transaction::{ApplyError, RollbackReport, Transaction, apply};
