//! The command line: argument parsing (clap), dispatch, and exit codes. Only this
//! module prints; only `main` exits.
//!
//! Exit codes: see [`exit`].

use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::analysis::{AnalysisName, Selection, analyze};
use crate::plan::{instance_name, plan, probe_group};
use crate::report::{JsonReport, Template, render_html};
use crate::run::{FactsFrom, RunError, RunEvent, RunOptions, load_and_validate, run, signal_name};
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
    /// The run finished and wrote everything, but lost more events than
    /// `[output] max_lost_percent` allows.
    pub const LOST_LIMIT: i32 = 4;
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
        /// Validate offline against a fact file (`trace-recipe facts -o FILE`, JSON
        /// or `.json.zst`) instead of the running kernel: needs neither root nor tracefs.
        #[arg(long, value_name = "FILE")]
        facts: Option<PathBuf>,
    },
    /// Print what validation knows about the running kernel's ftrace as versioned
    /// JSON (read-only; schema: `trace-recipe schema --facts`).
    Facts {
        /// Write to FILE instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        out: Option<PathBuf>,
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
        /// `text`: one line per event like `trace-cmd report`; `summary`: the
        /// analyses through a template; `json`: report.json; `html`: a
        /// self-contained page with charts.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Analyses to run (repeatable or comma-separated); default: every one
        /// whose events the file holds.
        #[arg(long, value_enum, value_delimiter = ',', value_name = "NAME")]
        analysis: Vec<AnalysisName>,
        /// A minijinja template for `--format summary` (context: report.json).
        #[arg(long, value_name = "FILE")]
        template: Option<PathBuf>,
    },
    /// Show tracefs state that differs from a clean boot, and what runs left behind.
    Status,
    /// Remove what trace-recipe runs left behind (never touches what others own).
    Reset {
        /// The hammer: reset ALL of tracefs to boot defaults, like `trace-cmd reset -a`,
        /// including other tools' instances, filters, triggers and probes.
        #[arg(long)]
        all: bool,
    },
    /// Print the recipe's JSON Schema (or report.json's, with `--report`, or the
    /// fact file's, with `--facts`).
    Schema {
        /// The schema of report.json instead.
        #[arg(long, conflicts_with = "facts")]
        report: bool,
        /// The schema of a fact file (`trace-recipe facts`) instead.
        #[arg(long)]
        facts: bool,
    },
    /// Internal: roll back JOURNAL if the run that started us dies.
    #[command(name = "__guard", hide = true)]
    Guard {
        /// The run's pid (our parent may already be gone when we start).
        #[arg(long)]
        run_pid: i32,
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
    Html,
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
        Command::Check {
            recipe,
            sets,
            plan,
            facts,
        } => check(&recipe, &sets, plan, facts.as_deref()),
        Command::Facts { out } => facts_cmd(out.as_deref()),
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
        Command::Report {
            file,
            format,
            analysis,
            template,
        } => report(&file, format, &analysis, template.as_deref()),
        Command::Status => with_tracefs(|t| {
            let (text, _) = status::status(t).map_err(|e| e.to_string())?;
            print!("{text}");
            Ok(exit::OK)
        }),
        Command::Reset { all } => with_tracefs(|t| {
            t.require_root().map_err(|e| e.to_string())?;
            let results = if all {
                status::reset_all(t)
            } else {
                status::reset(t)
            };
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
        Command::Schema { report, facts } => {
            if facts {
                println!("{}", crate::facts_schema_json());
            } else if report {
                println!("{}", crate::report_schema_json());
            } else {
                println!("{}", crate::schema_json());
            }
            exit::OK
        }
        Command::HeldExec { command } => crate::workload::held_exec(&command),
        Command::Guard { run_pid, journal } => crate::apply::guard::guard_main(&journal, run_pid),
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

/// `trace-recipe facts [-o FILE]`: the running kernel's facts as JSON.
fn facts_cmd(out: Option<&std::path::Path>) -> i32 {
    with_tracefs(|tracefs| {
        let facts = crate::kernel::KernelFacts::read(tracefs).map_err(|e| e.to_string())?;
        let json = serde_json::to_string_pretty(&facts).map_err(|e| e.to_string())? + "\n";
        match out {
            Some(path) => std::fs::write(path, json)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?,
            None => std::io::stdout()
                .write_all(json.as_bytes())
                .map_err(|e| format!("stdout: {e}"))?,
        }
        Ok(exit::OK)
    })
}

fn check(
    recipe: &std::path::Path,
    sets: &[String],
    show_plan: bool,
    facts_file: Option<&std::path::Path>,
) -> i32 {
    match facts_file {
        Some(file) => check_with(recipe, sets, show_plan, FactsFrom::File(file))
            .unwrap_or_else(|e| {
                eprintln!("trace-recipe: error: {e}");
                exit::FAILED
            }),
        None => with_tracefs(|tracefs| check_with(recipe, sets, show_plan, FactsFrom::Live(tracefs))),
    }
}

fn check_with(
    recipe: &std::path::Path,
    sets: &[String],
    show_plan: bool,
    from: FactsFrom<'_>,
) -> Result<i32, String> {
    {
        let started = jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S").to_string();
        match load_and_validate(from, recipe, sets, &started) {
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
                if let Some(t) = valid.tracer.as_ref()
                    && t.name != "nop"
                {
                    println!(
                        "note: whether an instance offers tracer `{}` is not read from the kernel (that needs a write); it comes from a kernel-version {}; `run` learns the real answer in its own instance",
                        t.name, facts.instance.source
                    );
                }
                if let FactsFrom::File(file) = from {
                    println!(
                        "note: checked offline against {} (kernel {} {}); pids, comms, uprobe files and templates are this host's",
                        file.display(),
                        facts.release,
                        facts.arch
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
    }
}

fn run_cmd(opts: RunOptions) -> i32 {
    let mut progress = crate::progress::ProgressDisplay::new();
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
        RunEvent::Progress(p) => progress.update(&p),
        RunEvent::Stopped { reason } => {
            progress.finish();
            eprintln!("stopped: {reason}")
        }
        RunEvent::RolledBack => eprintln!("rolled back: tracefs is as it was before the run"),
        RunEvent::Swept(line) | RunEvent::Waiting(line) => eprintln!("{line}"),
    });
    progress.finish();
    match result {
        Ok(outcome) => {
            print!("{}", outcome.summary);
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
                None => match outcome.lost_limit_exceeded {
                    Some(max) => {
                        eprintln!(
                            "trace-recipe: error: lost {} events ({:.3} % of recorded + lost), more than `[output] max_lost_percent = {max}`\n  = help: raise `[buffer] size_kb`, trace fewer events or add filters",
                            outcome.report.lost_total, outcome.report.lost_percent
                        );
                        exit::LOST_LIMIT
                    }
                    None => exit::OK,
                },
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

fn report(
    path: &std::path::Path,
    format: Format,
    analyses: &[AnalysisName],
    template: Option<&std::path::Path>,
) -> i32 {
    let template = match template
        .map(|p| Template::load(p).and_then(|t| t.check().map(|()| t)))
        .transpose()
    {
        Ok(t) => t.unwrap_or_else(Template::builtin),
        Err(e) => {
            eprintln!("trace-recipe: error: {e}");
            return exit::INVALID;
        }
    };
    let file = match tracedat::TraceFile::open(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("trace-recipe: error: cannot read {}: {e}", path.display());
            return exit::FAILED;
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let result: Result<(), String> = match format {
        Format::Text => (|| {
            writeln!(out, "cpus={}", file.cpu_count()).map_err(|e| e.to_string())?;
            let mut printer = tracedat::Printer::new(&file);
            for rec in file.records() {
                let rec = rec.map_err(|e| e.to_string())?;
                printer.write(&rec, &mut out).map_err(|e| e.to_string())?;
            }
            Ok(())
        })(),
        Format::Summary | Format::Json | Format::Html => {
            analyze(&file, &Selection::new(&file, analyses))
                .map_err(|e| e.to_string())
                .and_then(|a| {
                    let r = JsonReport::new(&file, &a, None);
                    let text = match format {
                        Format::Json => serde_json::to_string_pretty(&r).unwrap_or_default() + "\n",
                        Format::Html => render_html(&r),
                        _ => template.render(&r).map_err(|e| e.to_string())?,
                    };
                    out.write_all(text.as_bytes()).map_err(|e| e.to_string())
                })
        }
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
