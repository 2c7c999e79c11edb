//! Embedding trace-recipe in a runbook tool: load a recipe, validate it against
//! the live kernel, and print its plan (every tracefs change and its undo)
//! without touching tracefs.
//!
//! ```text
//! cargo run --example plan -- recipes/openat-failures.toml [KEY=VALUE...]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use trace_recipe::diagnostic::render_all;
use trace_recipe::host::HostFacts;
use trace_recipe::kernel::KernelFacts;
use trace_recipe::plan::{instance_name, plan, probe_group};
use trace_recipe::recipe::{Builtins, LoadError, load};
use trace_recipe::tracefs::Tracefs;
use trace_recipe::validate::validate;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: plan RECIPE [KEY=VALUE...]");
        return ExitCode::from(2);
    };
    let sets: Vec<String> = args.collect();

    // 1. Render and parse (no kernel needed).
    let loaded = match load(&path, &sets, &Builtins::default()) {
        Ok(l) => l,
        Err(LoadError::Invalid { text, diagnostics }) => {
            print!("{}", render_all(&diagnostics, &text));
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };

    // 2. Read the running kernel's facts (read-only) and this host's (pids,
    //    uprobe files, template), and validate against them.
    let tracefs = match Tracefs::locate_or_mount() {
        Ok((t, _)) => t,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(3);
        }
    };
    let facts = match KernelFacts::read(&tracefs) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(3);
        }
    };
    let host = HostFacts::gather(&loaded);
    let valid = match validate(&loaded, &facts, &host) {
        Ok(v) => v,
        Err(diagnostics) => {
            print!("{}", render_all(&diagnostics, &loaded.source));
            return ExitCode::from(1);
        }
    };

    // 3. Plan: pure data, nothing is written.
    println!(
        "recipe `{}` on kernel {}:",
        valid.recipe.name, facts.release
    );
    for ev in &valid.events {
        println!(
            "  event {} filter {:?}",
            ev.name,
            ev.filter.as_deref().unwrap_or("none")
        );
    }
    let p = plan(
        &valid,
        &instance_name(&valid.recipe.name, std::process::id()),
        &probe_group(std::process::id()),
        &valid.recipe.scope.pids,
        &trace_recipe::workload::pids_with_comm(&valid.recipe.scope.comms),
        // The run's own thread ids, kept out of the trace; this process stands in.
        &[std::process::id()],
    );
    for (i, step) in p.steps.iter().enumerate() {
        println!("{:>3}. {step:#}", i + 1);
    }
    ExitCode::SUCCESS
}
