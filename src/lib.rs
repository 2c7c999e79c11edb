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
//! Only `tracefs`, `apply`, `record` and `status` touch the kernel; `workload`
//! spawns the traced command. `run` strings the stages together; `cli` parses
//! arguments and prints.
#![warn(missing_docs)]

pub mod analysis;
pub mod apply;
pub mod bundle;
pub mod cli;
pub mod collect;
pub mod diagnostic;
pub mod diff;
pub mod elf;
pub mod export;
pub mod expr;
pub mod fleet;
pub mod format;
pub mod host;
pub mod inventory;
pub mod kernel;
pub mod library;
pub mod output;
pub mod overrides;
pub mod plan;
pub mod progress;
pub mod recipe;
pub mod record;
pub mod replay;
pub mod report;
pub mod run;
pub mod sarif;
pub mod status;
pub mod stub;
pub mod suggest;
pub mod tracefs;
pub mod validate;
pub mod workload;

/// The recipe's JSON Schema (draft 2020-12), generated from the serde model.
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(recipe::Recipe);
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}

/// A fact file's JSON Schema (draft 2020-12), generated from [`kernel::KernelFacts`].
pub fn facts_schema_json() -> String {
    let schema = schemars::schema_for!(kernel::KernelFacts);
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}

/// report.json's JSON Schema (draft 2020-12), generated from [`report::JsonReport`].
pub fn report_schema_json() -> String {
    let schema = schemars::schema_for!(report::JsonReport);
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}
