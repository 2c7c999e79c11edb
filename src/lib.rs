//! trace-recipe turns a checked-in TOML recipe into a Linux ftrace session.
//!
//! The data flow of one run, each stage in its own module:
//!
//! ```text
//! recipe.toml ──recipe::load (render, parse)──► LoadedRecipe
//! LoadedRecipe + kernel::KernelFacts ──validate──► ValidRecipe | Diagnostics
//! ValidRecipe ──plan──► Plan = [Step]   (each Step knows its undo)
//! Plan ──apply──► Transaction (instance ready, tracing off)
//! workload released, record::Recorder reads per_cpu/cpuN/trace_pipe_raw
//! stop ──Transaction::rollback──► tracefs as before
//! raw pages + formats ──tracedat::write_v6──► trace.dat ──report──► summary.txt, report.json
//! output folder ──bundle::pack──► DIR.tar.zst ──replay::StoredRun──► check --against | rerun
//! ```
//!
//! Every access to tracefs goes through `tracefs`, the typed handle (which also
//! locates or mounts it). Through it, `apply` makes the plan's changes and
//! undoes them (the run's rollback, the guard's and `reset`'s journal
//! replays); `run` turns tracing on and off, resets `tracing_max_latency`, and
//! before the rollback reads what trace.dat and the report need
//! (`run/output.rs`: formats, hist tables, the tracers' files); `record` reads
//! the per-CPU `trace_pipe_raw`; `status` reads what runs left and `reset`
//! puts boot defaults back. `kernel` (the facts, with /proc/kallsyms and
//! /proc/meminfo) and `format` (leftover instances and probes) only read.
//! `workload` spawns and signals the traced command and reads /proc for its
//! tasks; `fault` holds the test-only fault injection (feature
//! `fault-injection`). `check` is the first half, shared by the
//! `check` command and every run (load → validate → plan; writes nothing);
//! `run` strings the session together (prepare → arm → record → teardown →
//! output); `cli` parses arguments, prints, and chooses the exit code.
#![warn(missing_docs)]

pub mod analysis;
pub(crate) mod answer;
pub mod apply;
pub(crate) mod btf;
pub mod bundle;
pub(crate) mod check;
pub mod cli;
pub(crate) mod collect;
pub(crate) mod compare;
pub(crate) mod confine;
pub mod diagnostic;
pub(crate) mod diff;
pub(crate) mod elf;
pub(crate) mod errno;
pub mod export;
pub mod expr;
pub mod fault;
pub(crate) mod fleet;
pub(crate) mod flight;
pub(crate) mod format;
pub(crate) mod funcargs;
pub mod host;
pub(crate) mod inventory;
pub mod kernel;
pub(crate) mod library;
pub(crate) mod output;
pub(crate) mod overrides;
pub mod plan;
pub(crate) mod plan_export;
pub(crate) mod progress;
pub mod recipe;
pub mod record;
pub mod replay;
pub mod report;
pub(crate) mod run;
pub(crate) mod sarif;
pub mod status;
pub(crate) mod stub;
pub(crate) mod suggest;
pub mod tracefs;
pub(crate) mod untrusted;
pub mod validate;
pub mod workload;

/// The recipe's JSON Schema (draft 2020-12), generated from the serde model.
pub(crate) fn schema_json() -> String {
    let schema = schemars::schema_for!(recipe::Recipe);
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}

/// report.json's JSON Schema (draft 2020-12), generated from [`report::JsonReport`].
pub(crate) fn report_schema_json() -> String {
    let schema = schemars::schema_for!(report::JsonReport);
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}
