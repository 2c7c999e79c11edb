//! The command line: argument parsing (clap), dispatch, and exit codes. Only this
//! module prints; only `main` exits.
//!
//! Exit codes: see [`exit`].

use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::plan::{instance_name, plan, probe_group};
use crate::run::{RunError, RunEvent, RunOptions, load_and_validate, run, signal_name};
use crate::status;
use crate::tracefs::Tracefs;

/// Exit codes of `trace-recipe`.
pub mod exit {
    /// Success.
    pub const OK: i32 = 0;
    /// The recipe is invalid (or `check` found problems); nothing was written to tracefs.
    pub const INVALID: i32 = 1;
    /// Bad command-line usage (clap's code).
    pub const USAGE: i32 = 2;
    /// The tool failed: tracefs, the kernel, the workload, the output folder or a trace.dat.
    pub const FAILED: i32 = 3;
    /// A run ended by signal N exits with 128 + N after rolling back and writing its output.
    pub const SIGNAL_BASE: i32 = 128;
}

/// Turn a checked-in TOML recipe into an ftrace session: validate it against the
/// running kernel, apply it to a fresh tracefs instance, record, roll everything
/// back, and leave a trace.dat plus reports.
#[derive(Debug, Parser)]
#[command(name = "trace-recipe", version, about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a recipe against the running kernel; print every problem at once.
    Check {
        /// The recipe file.
        recipe: PathBuf,
        /// Override a `[params]` value (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Also print the plan: every tracefs change and its undo, one per line.
        #[arg(long)]
        plan: bool,
    },
    /// Run a recipe: apply, record, roll back, write trace.dat and reports.
    Run {
        /// The recipe file.
        recipe: PathBuf,
        /// Override a `[params]` value (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Output folder (default `./trace-recipe-out/NAME-TIMESTAMP`).
        #[arg(short = 'o', long = "output", value_name = "DIR")]
        out: Option<PathBuf>,
        /// The workload: started held, scoped by pid, released once tracing is on.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Read a trace.dat (ours, or trace-cmd's v6/v7) and print it.
    Report {
        /// The trace.dat file.
        file: PathBuf,
        /// `text`: one line per event like `trace-cmd report`; `summary`; `json`.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Show tracefs state that differs from a clean boot, and what runs left behind.
    Status,
    /// Remove what trace-recipe runs left behind (never touches what others own).
    Reset,
    /// Print the recipe's JSON Schema.
    Schema,
    /// Internal: roll back JOURNAL if the run that started us dies.
    #[command(name = "__guard", hide = true)]
    Guard {
        #[arg(last = true)]
        journal: PathBuf,
    },
    /// Internal: wait for the go byte on fd 3, then exec COMMAND.
    #[command(name = "__held-exec", hide = true)]
    HeldExec {
        #[arg(last = true)]
        command: Vec<String>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Summary,
    Json,
}

/// Parses `args` and runs the command; returns the exit code.
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
        }
    };
    match cli.command {
        Command::Check { recipe, sets, plan } => check(&recipe, &sets, plan),
        Command::Run {
            recipe,
            sets,
            out,
            command,
        } => run_cmd(RunOptions {
            recipe,
            sets,
            out_dir: out,
            command,
        }),
        Command::Report { file, format } => report(&file, format),
        Command::Status => with_tracefs(|t| {
            let (text, _) = status::status(t).map_err(|e| e.to_string())?;
            print!("{text}");
            Ok(exit::OK)
        }),
        Command::Reset => with_tracefs(|t| {
            t.require_root().map_err(|e| e.to_string())?;
            let results = status::reset(t);
            let mut code = exit::OK;
            if results.is_empty() {
                println!("nothing to reset: no trace-recipe run left anything behind");
            }
            for r in results {
                match r {
                    Ok(line) => println!("{line}"),
                    Err(e) => {
                        eprintln!(
                            "trace-recipe: error: {e}\n  = help: see `trace-recipe status`; fix what it names by hand if it persists"
                        );
                        code = exit::FAILED;
                    }
                }
            }
            Ok(code)
        }),
        Command::Schema => {
            println!("{}", crate::schema_json());
            exit::OK
        }
        Command::HeldExec { command } => crate::workload::held_exec(&command),
        Command::Guard { journal } => crate::apply::guard::guard_main(&journal),
    }
}

fn with_tracefs(f: impl FnOnce(&Tracefs) -> Result<i32, String>) -> i32 {
    let tracefs = match Tracefs::locate_or_mount() {
        Ok((t, note)) => {
            if let Some(n) = note {
                eprintln!("{n}");
            }
            t
        }
        Err(e) => {
            eprintln!("trace-recipe: error: {e}");
            return exit::FAILED;
        }
    };
    f(&tracefs).unwrap_or_else(|e| {
        eprintln!("trace-recipe: error: {e}");
        exit::FAILED
    })
}

fn check(recipe: &std::path::Path, sets: &[String], show_plan: bool) -> i32 {
    with_tracefs(|tracefs| {
        let started = jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S").to_string();
        match load_and_validate(tracefs, recipe, sets, &started) {
            Ok((valid, _, facts)) => {
                println!(
                    "{}: ok: recipe `{}` is valid for kernel {} ({} event{}, {} trigger{}, {} probe{}, tracer {})",
                    recipe.display(),
                    valid.recipe.name,
                    facts.release,
                    valid.events.len(),
                    if valid.events.len() == 1 { "" } else { "s" },
                    valid.triggers.len(),
                    if valid.triggers.len() == 1 { "" } else { "s" },
                    valid.probes.len(),
                    if valid.probes.len() == 1 { "" } else { "s" },
                    valid.tracer.as_ref().map_or("nop", |t| t.name.as_str()),
                );
                let pids = if valid.recipe.scope.command.is_empty() {
                    valid.recipe.scope.pids.clone()
                } else {
                    [valid.recipe.scope.pids.clone(), vec![0]].concat()
                };
                let p = plan(
                    &valid,
                    &instance_name(&valid.recipe.name, std::process::id()),
                    &probe_group(std::process::id()),
                    &pids,
                    &crate::workload::pids_with_comm(&valid.recipe.scope.comms),
                );
                let top = p.top_level_files();
                if let Some(t) = valid.tracer.as_ref().filter(|t| t.at_top_level) {
                    println!(
                        "note: this kernel offers tracer `{}` only at the top level, not in an instance: the run works in the top-level buffer (cleared first), restores the before-image of each of the {} top-level files it writes, and holds {} meanwhile",
                        t.name,
                        top.len(),
                        crate::plan::TOP_LEVEL_LOCK
                    );
                } else if !top.is_empty() {
                    println!(
                        "note: this recipe writes top-level (global) tracefs files: {}; a run restores their before-image and holds {} meanwhile",
                        top.join(", "),
                        crate::plan::TOP_LEVEL_LOCK
                    );
                }
                if !valid.probes.is_empty() {
                    println!(
                        "note: this recipe defines {} probe{} in the global kprobe_events/uprobe_events, in probe group trace_recipe_PID of its own",
                        valid.probes.len(),
                        if valid.probes.len() == 1 { "" } else { "s" }
                    );
                }
                if show_plan {
                    println!("plan (pid 0 stands for the workload's pid):");
                    for (i, step) in p.steps.iter().enumerate() {
                        println!("{:>3}. {step:#}", i + 1);
                    }
                }
                Ok(exit::OK)
            }
            Err(RunError::Invalid { text, diagnostics }) => {
                print!("{}", crate::diagnostic::render_all(&diagnostics, &text));
                Ok(exit::INVALID)
            }
            Err(RunError::Load(e)) => {
                eprintln!("trace-recipe: error: {e}");
                Ok(exit::INVALID)
            }
            Err(e) => Err(e.to_string()),
        }
    })
}

fn run_cmd(opts: RunOptions) -> i32 {
    let result = run(&opts, |ev| match ev {
        RunEvent::Mounted(m) => eprintln!("{m}"),
        RunEvent::Applied { instance, steps } => {
            let place = if instance.is_empty() {
                "the top level"
            } else {
                &instance
            };
            eprintln!("applied {steps} steps to {place} (tracing off)")
        }
        RunEvent::Recording { until } => eprintln!("recording until {until}"),
        RunEvent::Stopped { reason } => eprintln!("stopped: {reason}"),
        RunEvent::RolledBack => eprintln!("rolled back: tracefs is as it was before the run"),
        RunEvent::Swept(line) | RunEvent::Waiting(line) => eprintln!("{line}"),
    });
    match result {
        Ok(outcome) => {
            print!("{}", outcome.report.summary_text());
            println!("\noutput: {}", outcome.dir.display());
            for e in &outcome.undo_failures {
                eprintln!(
                    "trace-recipe: warning: undo failed: {e}\n  = help: run `trace-recipe reset`"
                );
            }
            match outcome.signal {
                Some(sig) => {
                    eprintln!("trace-recipe: interrupted by {}", signal_name(sig));
                    exit::SIGNAL_BASE + sig
                }
                None if !outcome.undo_failures.is_empty() => exit::FAILED,
                None => exit::OK,
            }
        }
        Err(e @ (RunError::Invalid { .. } | RunError::Load(_))) => {
            eprint!("{}", format!("{e}\n").replace("\n\n", "\n"));
            eprintln!("trace-recipe: nothing was written to tracefs");
            exit::INVALID
        }
        Err(RunError::Interrupted(sig)) => {
            eprintln!("trace-recipe: {}", RunError::Interrupted(sig));
            exit::SIGNAL_BASE + sig
        }
        Err(e) => {
            eprintln!("trace-recipe: error: {e}");
            exit::FAILED
        }
    }
}

fn report(path: &std::path::Path, format: Format) -> i32 {
    let file = match tracedat::TraceFile::open(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("trace-recipe: error: cannot read {}: {e}", path.display());
            return exit::FAILED;
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result: Result<(), String> = match format {
        Format::Text => (|| {
            writeln!(out, "cpus={}", file.cpu_count()).map_err(|e| e.to_string())?;
            for rec in file.records() {
                let rec = rec.map_err(|e| e.to_string())?;
                tracedat::format_record(&file, &rec, &mut out).map_err(|e| e.to_string())?;
            }
            Ok(())
        })(),
        Format::Summary | Format::Json => crate::report::count(&file)
            .map_err(|e| e.to_string())
            .and_then(|c| {
                let r = crate::report::JsonReport::new(&file, &c, None);
                let text = match format {
                    Format::Json => serde_json::to_string_pretty(&r).unwrap_or_default() + "\n",
                    _ => r.summary_text(),
                };
                out.write_all(text.as_bytes()).map_err(|e| e.to_string())
            }),
    };
    let result = result.and_then(|()| out.flush().map_err(|e| e.to_string()));
    match result {
        Ok(()) => exit::OK,
        Err(e) if e.contains("Broken pipe") => exit::OK,
        Err(e) => {
            eprintln!("trace-recipe: error: {}: {e}", path.display());
            exit::FAILED
        }
    }
}
