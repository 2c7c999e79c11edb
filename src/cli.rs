//! The command line: argument parsing (clap), dispatch, and exit codes. Only this
//! module prints; only `main` exits.
//!
//! Exit codes: see [`exit`].

use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::analysis::{AnalysisName, Selection, analyze};
use crate::report::{JsonReport, Template, render_html};
use crate::run::{
    FactsFrom, RunError, RunEvent, RunOptions, build_plan, incomplete_message, load_and_validate,
    load_and_validate_with, run, signal_name,
};
use crate::status;
use crate::tracefs::Tracefs;

/// Exit codes of `trace-recipe`.
pub mod exit {
    /// Success.
    pub const OK: i32 = 0;
    /// The recipe is invalid (or `check` found problems); nothing was written to tracefs.
    pub(crate) const INVALID: i32 = 1;
    /// Bad command-line usage (clap's code).
    pub(crate) const USAGE: i32 = 2;
    /// The tool failed: tracefs, the kernel, the workload, the output folder or a trace.dat.
    pub const FAILED: i32 = 3;
    /// The run finished and wrote everything, but lost more events than
    /// `[output] max_lost_percent` allows.
    pub(crate) const LOST_LIMIT: i32 = 4;
    /// The run finished and wrote everything, but an `[[expect]]` of the recipe failed.
    pub(crate) const EXPECTATION_FAILED: i32 = 5;
    /// `diff`: a `--fail-if` rule held.
    pub(crate) const DIFF_RULE_HELD: i32 = 6;
    /// Rollback incomplete: an undo failed, tracefs is not as it was, and the
    /// run's journal is kept; `trace-recipe reset` finishes the rollback. Wins
    /// over every other code of a run.
    pub const ROLLBACK_INCOMPLETE: i32 = 7;
    /// A run ended by signal N exits with 128 + N after rolling back and writing its output.
    pub(crate) const SIGNAL_BASE: i32 = 128;
}

/// Turn a checked-in TOML recipe into an ftrace session: validate it against the
/// running kernel, apply it to a fresh tracefs instance, record, roll everything
/// back, and leave a trace.dat plus reports.
#[derive(Debug, Parser)]
#[command(name = "trace-recipe", version, about, max_term_width = 100)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a recipe against the running kernel; print every problem at once.
    Check {
        /// The recipe: a file (with a `/` or ending in `.toml`), or a name on the
        /// recipe path (see `list`).
        #[arg(required_unless_present = "against")]
        recipe: Option<PathBuf>,
        /// Override a `[params]` value (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Also print the plan: every tracefs change and its undo, one per line.
        #[arg(long)]
        plan: bool,
        /// With `--plan`: print only the plan as a POSIX shell script that applies
        /// it, traces until interrupted and undoes every step in reverse (`sh`),
        /// or as the nearest `trace-cmd record` command line, with a comment
        /// naming what it cannot express (`trace-cmd`).
        #[arg(long, value_enum, requires = "plan")]
        export: Option<ExportFormat>,
        /// First print every effective key with the file:line that set it (the
        /// recipe or a base it `extends`).
        #[arg(long)]
        explain: bool,
        /// `text` for people; `json` (schema/check.schema.json); `sarif` (SARIF
        /// 2.1.0, for code review).
        #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
        format: CheckFormat,
        /// Validate offline against another kernel's facts: a fact file
        /// (`trace-recipe facts -o FILE`, JSON or `.json.zst`) or a bundle
        /// (`.tar.zst`, its facts.json). Needs neither root nor tracefs.
        #[arg(long, value_name = "FILE")]
        facts: Option<PathBuf>,
        /// Validate a bundle's (or an output folder's) recipe, with the params it
        /// ran with, on this kernel; list the kernel facts that differ from the
        /// bundle's and matter to it, and the commands `rerun` would start.
        /// Read-only: nothing is applied. `--set` overrides the bundle's params.
        #[arg(long, value_name = "BUNDLE", conflicts_with_all = ["recipe", "facts", "export", "explain"])]
        against: Option<PathBuf>,
    },
    /// Print what validation needs to know about the running kernel's ftrace
    /// (events and formats, tracers, options, clocks, probe support, buffer
    /// state, symbols) as versioned JSON. Read-only. Schema:
    /// `trace-recipe schema --of facts`.
    Facts {
        /// Write to FILE instead of stdout (`.zst` at the end: compressed with zstd).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Run a recipe: apply, record, roll back, write trace.dat and reports.
    Run {
        /// The recipe: a file (with a `/` or ending in `.toml`), or a name on the
        /// recipe path (see `list`).
        recipe: PathBuf,
        /// Override a `[params]` value (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        #[command(flatten)]
        args: RunArgs,
        /// The workload: started held, scoped by pid, released once tracing is on.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Run a bundle's (or an output folder's) recipe again here, with the params
    /// and the workload it ran with. Commands that come from the bundle (its
    /// workload, `[scope] command`, `[collect]`) are listed and started only with
    /// `--allow-commands` or a yes on a terminal; otherwise nothing runs (exit 2).
    Rerun {
        /// The bundle (`.tar.zst`) or output folder of the run.
        #[arg(value_name = "BUNDLE")]
        from: PathBuf,
        /// Override one of the run's params (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Start the commands that come from the bundle without asking.
        #[arg(long)]
        allow_commands: bool,
        #[command(flatten)]
        args: RunArgs,
        /// A workload of your own instead of the run's.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Read a trace.dat (ours, or trace-cmd's v6/v7) and print it.
    Report {
        /// A trace.dat, a run's output folder, or a bundle (checked first).
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
    /// Compare two runs (bundles, output folders or trace.dat files): recipe keys,
    /// kernel facts, event counts and rates, latencies, top stacks, lost events.
    /// Exits 6 when a `--fail-if` rule holds.
    Diff {
        /// Run A, the baseline.
        a: PathBuf,
        /// Run B.
        b: PathBuf,
        /// `text`, `json` (schema/diff.schema.json) or `html` (one self-contained page).
        #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
        format: DiffFormat,
        /// A rule on B, e.g. `count(SYSTEM:EVENT) > +10%`, `rate(SYSTEM:EVENT) < -5%`,
        /// `p99(ANALYSIS:KEY) > +10%` (relative to A), `lost_events > 0` (repeatable).
        #[arg(long = "fail-if", value_name = "RULE")]
        fail_if: Vec<String>,
    },
    /// Summarise one recipe's runs on many hosts: one row per host (events, lost
    /// events, expectations, stop reason, largest changes against the fleet
    /// median of each event's rate), totals, and the hosts that failed and why.
    Fleet {
        /// Bundles (HOST.tar.zst, or output folders), and host status files
        /// (HOST.json: `{"host", "stage", "reason", "exit_code"}`) of hosts that
        /// wrote none.
        #[arg(required = true, value_name = "INPUT")]
        inputs: Vec<PathBuf>,
        /// `text`, `json` (schema/fleet.schema.json) or `html` (one self-contained page).
        #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
        format: DiffFormat,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Internal: write the man pages (trace-recipe.1, trace-recipe-SUBCOMMAND.1) into DIR.
    #[command(name = "__man", hide = true)]
    Man {
        /// The folder to write into (created).
        dir: PathBuf,
    },
    /// Pack a run's output folder into one file, DIR.tar.zst: manifest.json (the
    /// run, the kernel, the sha256 of every member) and every artifact.
    Pack {
        /// The output folder of a run.
        dir: PathBuf,
        /// The bundle to write (default `DIR.tar.zst`).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        out: Option<PathBuf>,
        /// Leave the host name out of the manifest.
        #[arg(long)]
        redact_host: bool,
    },
    /// Check a bundle and unpack it into a folder (nothing is written elsewhere).
    Unpack {
        /// The bundle.
        bundle: PathBuf,
        /// The folder to create (default: the bundle's name without `.tar.zst`, plus `.unpacked`).
        #[arg(short = 'o', long = "output", value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Show tracefs state that differs from a clean boot, and what runs left behind.
    Status {
        /// `text` or `json` (schema/status.schema.json).
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
        /// Exit 1 when a trace-recipe run left something behind (for monitoring).
        #[arg(long)]
        exit_code: bool,
    },
    /// Remove what trace-recipe runs left behind (never touches what others own).
    Reset {
        /// The hammer: reset ALL of tracefs to boot defaults, like `trace-cmd reset -a`,
        /// including other tools' instances, filters, triggers and probes.
        #[arg(long, conflicts_with = "dry_run")]
        all: bool,
        /// Change nothing: say what would be removed.
        #[arg(long)]
        dry_run: bool,
        /// `text` or `json` (schema/reset.schema.json).
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
    },
    /// Print the recipe's JSON Schema (or report.json's, with `--report`, or a
    /// command's JSON output's, with `--of`).
    Schema {
        /// The schema of report.json instead.
        #[arg(long, conflicts_with_all = ["manifest", "of"])]
        report: bool,
        /// The schema of a bundle's manifest.json instead.
        #[arg(long, conflicts_with = "of")]
        manifest: bool,
        /// The schema of this command's `--format json` output instead.
        #[arg(long, value_enum, value_name = "COMMAND")]
        of: Option<crate::format::SchemaOf>,
    },
    /// List the recipes on the recipe path: name, description, what they need,
    /// and whether they pass `check` on this kernel.
    List {
        /// `text` or `json` (schema/list.schema.json).
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
    },
    /// Print a recipe (by name or path) with its "What to look for" comments.
    Show {
        /// A name on the recipe path, or a file.
        recipe: PathBuf,
    },
    /// List the events this kernel (or a fact file) offers, with `--fields` their
    /// fields and types.
    Events {
        /// `system:event` glob, or an event-name glob in any system (default: all).
        glob: Option<String>,
        /// Also list each event's fields with their C types.
        #[arg(long)]
        fields: bool,
        /// Read a JSON fact file instead of this kernel.
        #[arg(long, value_name = "FILE")]
        facts: Option<PathBuf>,
        /// `text` or `json` (schema/events.schema.json).
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
    },
    /// List kernel functions matching GLOB: from available_filter_functions, or
    /// from /proc/kallsyms where the kernel refuses the function tracer.
    Functions {
        /// Function-name glob (`*`, `?`).
        glob: String,
    },
    /// Internal: roll back JOURNAL if the run that started us dies.
    #[command(name = "__guard", hide = true)]
    Guard {
        /// The run's pid (our parent may already be gone when we start).
        #[arg(long)]
        run_pid: u32,
        /// The workload to end (its whole process group) if the run dies.
        #[arg(long)]
        workload_pid: Option<u32>,
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

/// The options `run` and `rerun` share: where the output goes and how it is shown.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Output folder (default `./trace-recipe-out/NAME-TIMESTAMP`).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    out: Option<PathBuf>,
    /// Also write the `[[expect]]` results as JUnit XML to FILE (for CI).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Also pack the output folder into one file, DIR.tar.zst (see `pack`).
    #[arg(long)]
    bundle: bool,
    /// Replace the recipe's `duration` (e.g. `500ms`, `10s`, `2m`).
    #[arg(long, value_name = "DURATION")]
    duration: Option<String>,
    /// Replace the recipe's `[buffer] size_kb` (KiB per CPU).
    #[arg(long, value_name = "KB")]
    buffer_size_kb: Option<u64>,
    /// Record every task while the workload runs, not only the workload's
    /// (`[scope] system_wide = true`, as `trace-cmd record CMD` without `-F`).
    #[arg(long)]
    system_wide: bool,
    /// `text`: the summary on stdout; `json`: one object on stdout at the end
    /// (schema/run.schema.json), the summary on stderr.
    #[arg(long, value_enum, default_value_t = OutFormat::Text)]
    format: OutFormat,
    /// No progress lines on stderr and no summary: stdout is only the output
    /// folder's path (and the bundle's, on a second line) with `--format text`,
    /// the JSON object with `--format json`. Errors and warnings stay on stderr.
    #[arg(short, long)]
    quiet: bool,
}

impl RunArgs {
    /// Runs `recipe` with these options (see [`run_cmd`]; `stored`: a stored
    /// run's recipe, see [`RunOptions::stored`]); returns the exit code.
    fn run(self, recipe: PathBuf, sets: Vec<String>, command: Vec<String>, stored: bool) -> i32 {
        let opts = RunOptions {
            recipe,
            sets,
            out_dir: self.out,
            command,
            bundle: self.bundle,
            overrides: crate::overrides::Overrides {
                duration: self.duration,
                buffer_size_kb: self.buffer_size_kb,
                system_wide: self.system_wide,
            },
            stored,
        };
        run_cmd(opts, self.format, self.quiet, self.junit.as_deref())
    }

    /// A run that could not start: the error on stderr, and with `--format
    /// json` the run object saying so; returns `code`.
    fn failed(&self, code: i32, message: String) -> i32 {
        eprintln!("trace-recipe: error: {message}");
        if self.format == OutFormat::Json {
            print!(
                "{}",
                crate::format::to_json(&crate::format::RunJson::failed(code, message))
            );
        }
        code
    }
}

/// `--format` of `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CheckFormat {
    Text,
    Json,
    Sarif,
}

/// `--format` of `run`, `status`, `reset`, `list`, `events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OutFormat {
    Text,
    Json,
}

/// `--format` of `diff` and `fleet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DiffFormat {
    Text,
    Json,
    Html,
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
    // A reader that goes away (`trace-recipe facts | head`) ends a read-only
    // command the way it ends `cat`: by SIGPIPE, quietly. Not what writes
    // tracefs (a run, its guard, reset): they always finish their rollback, so
    // they keep ignoring SIGPIPE.
    if !matches!(
        cli.command,
        Command::Run { .. } | Command::Guard { .. } | Command::Reset { .. }
    ) {
        // SAFETY: signal(2) with SIG_DFL before any thread is started.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    match cli.command {
        Command::Check {
            recipe,
            sets,
            plan,
            explain,
            export,
            format,
            facts,
            against,
        } => match (against, recipe) {
            (Some(from), _) => against_cmd(&from, &sets, plan, format),
            (None, None) => exit::USAGE,
            (None, Some(recipe)) => {
                check_recipe(recipe, &sets, plan, explain, export, format, facts)
            }
        },
        Command::Run {
            recipe,
            sets,
            args,
            command,
        } => match find_recipe(&recipe) {
            Some(recipe) => args.run(recipe, sets, command, false),
            None => {
                if args.format == OutFormat::Json {
                    print!(
                        "{}",
                        crate::format::to_json(&crate::format::RunJson::failed(
                            exit::INVALID,
                            format!("no recipe `{}` on the recipe path", recipe.display())
                        ))
                    );
                }
                exit::INVALID
            }
        },
        Command::Rerun {
            from,
            sets,
            allow_commands,
            args,
            command,
        } => rerun(&from, &sets, allow_commands, args, command),
        Command::List { format } => list(format),
        Command::Show { recipe } => match find_recipe(&recipe) {
            Some(path) => match std::fs::read_to_string(&path) {
                Ok(text) => {
                    println!("# {}", path.display());
                    print!("{text}");
                    exit::OK
                }
                Err(e) => {
                    eprintln!("trace-recipe: error: cannot read {}: {e}", path.display());
                    exit::INVALID
                }
            },
            None => exit::INVALID,
        },
        Command::Events {
            glob,
            fields,
            facts,
            format,
        } => events(glob.as_deref(), fields, facts.as_deref(), format),
        Command::Functions { glob } => with_tracefs(|t| {
            let facts = crate::kernel::KernelFacts::read(t).map_err(|e| e.to_string())?;
            let f = crate::inventory::functions(&facts, &glob);
            for u in &f.unreadable {
                eprintln!("note: could not read {u}");
            }
            for n in &f.names {
                println!("{n}");
            }
            if f.names.is_empty() {
                eprintln!("trace-recipe: no function in {} matches `{glob}`", f.source);
                return Ok(exit::INVALID);
            }
            Ok(exit::OK)
        }),
        Command::Report {
            file,
            format,
            analysis,
            template,
        } => report(&file, format, &analysis, template.as_deref()),
        Command::Diff {
            a,
            b,
            format,
            fail_if,
        } => match crate::diff::diff(&a, &b, &fail_if) {
            Ok(d) => {
                let text = match format {
                    DiffFormat::Text => crate::diff::render_text(&d),
                    DiffFormat::Json => crate::format::to_json(&d),
                    DiffFormat::Html => crate::diff::render_html(&d),
                };
                print!("{text}");
                let held: Vec<&str> = d
                    .rules
                    .iter()
                    .filter(|r| r.held)
                    .map(|r| r.rule.as_str())
                    .collect();
                if held.is_empty() {
                    exit::OK
                } else {
                    eprintln!("trace-recipe: --fail-if held: {}", held.join("; "));
                    exit::DIFF_RULE_HELD
                }
            }
            Err(
                e @ (crate::diff::DiffError::Rule { .. } | crate::diff::DiffError::Unknown { .. }),
            ) => {
                eprintln!("trace-recipe: error: {e}");
                exit::USAGE
            }
            Err(e) => {
                eprintln!("trace-recipe: error: {e}");
                exit::FAILED
            }
        },
        Command::Fleet { inputs, format } => match crate::fleet::fleet(&inputs) {
            Ok(f) => {
                print!(
                    "{}",
                    match format {
                        DiffFormat::Text => crate::fleet::render_text(&f),
                        DiffFormat::Json => crate::format::to_json(&f),
                        DiffFormat::Html => crate::fleet::render_html(&f),
                    }
                );
                exit::OK
            }
            Err(e) => {
                eprintln!("trace-recipe: error: {e}");
                exit::FAILED
            }
        },
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "trace-recipe",
                &mut std::io::stdout(),
            );
            exit::OK
        }
        Command::Man { dir } => match write_man_pages(&dir) {
            Ok(n) => {
                println!("wrote {n} man pages to {}", dir.display());
                exit::OK
            }
            Err(e) => {
                eprintln!(
                    "trace-recipe: error: cannot write man pages to {}: {e}",
                    dir.display()
                );
                exit::FAILED
            }
        },
        Command::Pack {
            dir,
            out,
            redact_host,
        } => match crate::bundle::pack(&dir, out.as_deref(), redact_host) {
            Ok(path) => {
                println!("{}", path.display());
                exit::OK
            }
            Err(e) => {
                eprintln!("trace-recipe: error: {e}");
                exit::FAILED
            }
        },
        Command::Unpack { bundle, out } => match crate::bundle::unpack(&bundle, out.as_deref()) {
            Ok((dir, manifest)) => {
                println!(
                    "{}: recipe `{}`, kernel {}, {} members checked",
                    dir.display(),
                    manifest.recipe.as_deref().unwrap_or("?"),
                    manifest.kernel_release.as_deref().unwrap_or("?"),
                    manifest.members.len()
                );
                exit::OK
            }
            Err(e) => {
                eprintln!("trace-recipe: error: {e}");
                exit::FAILED
            }
        },
        Command::Status { format, exit_code } => with_tracefs(|t| {
            let (text, left) = status::status(t).map_err(|e| e.to_string())?;
            match format {
                OutFormat::Text => print!("{text}"),
                OutFormat::Json => print!(
                    "{}",
                    crate::format::to_json(&crate::format::StatusJson {
                        format_version: crate::format::FORMAT_VERSION,
                        tracefs: t.root().display().to_string(),
                        left_behind: left,
                        trace_recipe: crate::format::Leftovers::read(t),
                        lines: text.lines().map(str::to_string).collect(),
                    })
                ),
            }
            Ok(if exit_code && left {
                exit::INVALID
            } else {
                exit::OK
            })
        }),
        Command::Reset {
            all,
            dry_run,
            format,
        } => with_tracefs(|t| {
            let results: Vec<Result<String, String>> = if dry_run {
                crate::format::reset_plan(&crate::format::Leftovers::read(t))
                    .into_iter()
                    .map(|a| Ok(a.message))
                    .collect()
            } else {
                t.require_root().map_err(|e| e.to_string())?;
                if all {
                    status::reset_all(t)
                } else {
                    status::reset(t)
                }
            };
            let code = if results.iter().any(Result::is_err) {
                exit::FAILED
            } else {
                exit::OK
            };
            if format == OutFormat::Json {
                print!(
                    "{}",
                    crate::format::to_json(&crate::format::ResetJson {
                        format_version: crate::format::FORMAT_VERSION,
                        dry_run,
                        all,
                        actions: results
                            .into_iter()
                            .map(|r| crate::format::ResetAction {
                                ok: r.is_ok(),
                                message: r.unwrap_or_else(|e| e),
                            })
                            .collect(),
                    })
                );
                return Ok(code);
            }
            if results.is_empty() {
                println!("nothing to reset: no trace-recipe run left anything behind");
            }
            for r in results {
                match r {
                    Ok(line) => println!("{line}"),
                    Err(e) => eprintln!(
                        "trace-recipe: error: {e}\n  = help: see `trace-recipe status`; fix what it names by hand if it persists"
                    ),
                }
            }
            Ok(code)
        }),
        Command::Facts { out } => facts_cmd(out.as_deref()),
        Command::Schema {
            report,
            manifest,
            of,
        } => {
            if manifest {
                println!("{}", crate::bundle::manifest_schema_json());
            } else if let Some(of) = of {
                println!("{}", crate::format::schema_of(of));
            } else if report {
                println!("{}", crate::report_schema_json());
            } else {
                println!("{}", crate::schema_json());
            }
            exit::OK
        }
        Command::HeldExec { command } => crate::workload::held_exec(&command),
        Command::Guard {
            run_pid,
            workload_pid,
            journal,
        } => crate::apply::guard::guard_main(&journal, run_pid, workload_pid),
    }
}

/// Writes `trace-recipe.1` and one `trace-recipe-SUBCOMMAND.1` per visible
/// subcommand into `dir` (created); returns how many.
fn write_man_pages(dir: &std::path::Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let cmd = <Cli as clap::CommandFactory>::command();
    let mut n = 0;
    let mut write = |name: String, cmd: clap::Command| -> std::io::Result<()> {
        let mut buf = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut buf)?;
        std::fs::write(dir.join(format!("{name}.1")), buf)?;
        n += 1;
        Ok(())
    };
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("trace-recipe-{}", sub.get_name());
        let page = sub
            .clone()
            .display_name(name.clone())
            .bin_name(format!("trace-recipe {}", sub.get_name()));
        write(name, page)?;
    }
    write("trace-recipe".into(), cmd)?;
    Ok(n)
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

/// Resolves a recipe argument on the recipe path ([`crate::library`]); prints
/// the note of a name found twice, or the error of one found nowhere (`None`).
fn find_recipe(arg: &std::path::Path) -> Option<PathBuf> {
    match crate::library::resolve(arg, &crate::library::search_path()) {
        Ok(r) => {
            if let Some(n) = r.note() {
                eprintln!("{n}");
            }
            Some(r.path)
        }
        Err(e) => {
            eprintln!("trace-recipe: error: {e}");
            None
        }
    }
}

/// `check --format json|sarif`: the verdict as one document on stdout.
fn check_machine(
    recipe: &std::path::Path,
    format: CheckFormat,
    result: Result<(&str, &str), (&[crate::diagnostic::Diagnostic], &crate::diagnostic::Source)>,
    against: Option<&crate::replay::AgainstJson>,
) {
    let (diags, source): (&[crate::diagnostic::Diagnostic], crate::diagnostic::Source) =
        match result {
            Ok(_) => (
                &[],
                crate::diagnostic::Source::single(recipe.to_path_buf(), String::new()),
            ),
            Err((d, s)) => (d, s.clone()),
        };
    let text = match format {
        CheckFormat::Sarif => crate::sarif::render(diags, &source),
        _ => crate::format::to_json(&crate::format::CheckJson {
            format_version: crate::format::FORMAT_VERSION,
            file: recipe.display().to_string(),
            ok: result.is_ok(),
            recipe: result.ok().map(|r| r.0.to_string()),
            kernel_release: result.ok().map(|r| r.1.to_string()),
            diagnostics: diags.iter().map(|d| d.to_json(&source)).collect(),
            against: against.cloned(),
        }),
    };
    print!("{text}");
}

/// `check --plan --export`'s formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ExportFormat {
    /// A POSIX shell script.
    Sh,
    /// The nearest `trace-cmd record` command line.
    TraceCmd,
}

/// `check --plan --export FORMAT`: the plan `run` would apply (with no
/// workload), as a shell script or a `trace-cmd record` command line on stdout;
/// problems as `check` prints them. Against the running kernel, or offline
/// against `facts_file` as `check` does.
fn export_cmd(
    recipe: &std::path::Path,
    sets: &[String],
    format: ExportFormat,
    facts_file: Option<&std::path::Path>,
) -> i32 {
    with_facts(facts_file, |from| {
        let started = jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S").to_string();
        match load_and_validate(from, recipe, sets, &started) {
            Ok((valid, _, _)) => {
                let p = build_plan(&valid, None, &[]);
                let text = match format {
                    ExportFormat::Sh => crate::export::sh(&p, &valid.recipe.name),
                    ExportFormat::TraceCmd => Ok(crate::export::trace_cmd(&p, &valid)),
                };
                match text {
                    Ok(script) => {
                        print!("{script}");
                        Ok(exit::OK)
                    }
                    Err(e) => Err(format!("cannot export this plan: {e}")),
                }
            }
            Err(RunError::Invalid { text, diagnostics }) => {
                print!("{}", crate::diagnostic::render_all(&diagnostics, &text));
                Ok(exit::INVALID)
            }
            Err(e) => Err(e.to_string()),
        }
    })
}

/// `check --explain`: the effective keys and where each was set (nothing when the
/// recipe does not load: the check that follows prints why).
fn print_explain(recipe: &std::path::Path, sets: &[String]) {
    let builtins = crate::recipe::Builtins {
        started: jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S").to_string(),
    };
    if let Ok(loaded) = crate::recipe::load(recipe, sets, &builtins) {
        print!(
            "{}",
            crate::recipe::explain(loaded.spans.root(), &loaded.source)
        );
    }
}

/// `trace-recipe facts [-o FILE]`: the running kernel's facts as JSON.
fn facts_cmd(out: Option<&std::path::Path>) -> i32 {
    with_tracefs(|tracefs| {
        let facts = crate::kernel::KernelFacts::read(tracefs).map_err(|e| e.to_string())?;
        match out {
            Some(path) => facts.save(path).map_err(|e| e.to_string())?,
            None => print!("{}", crate::format::to_json(&facts)),
        }
        Ok(exit::OK)
    })
}

/// `check`: against the running kernel, or offline against `facts_file` (a
/// fact file or a bundle), which needs neither root nor tracefs.
fn check(
    recipe: &std::path::Path,
    sets: &[String],
    show_plan: bool,
    format: CheckFormat,
    facts_file: Option<&std::path::Path>,
) -> i32 {
    with_facts(facts_file, |from| {
        check_with(
            recipe,
            sets,
            show_plan,
            format,
            from,
            crate::recipe::Chain::Extends,
            None,
        )
    })
}

/// Runs `f` with the facts of `facts_file` (a fact file, an output folder's
/// facts.json or a bundle's), or without one with the running kernel's; an
/// error is printed and gives [`exit::FAILED`].
fn with_facts(
    facts_file: Option<&std::path::Path>,
    f: impl FnOnce(FactsFrom<'_>) -> Result<i32, String>,
) -> i32 {
    match facts_file {
        Some(file) => {
            // A bundle's facts are its facts.json member, read from a temporary
            // folder; an output folder's, its facts.json.
            let is_bundle = file.to_string_lossy().ends_with(".tar.zst");
            let opened = match is_bundle {
                true => match crate::bundle::open(file) {
                    Ok(o) => Some(o),
                    Err(e) => {
                        eprintln!("trace-recipe: error: {e}");
                        return exit::FAILED;
                    }
                },
                false => None,
            };
            let path = match &opened {
                Some(o) => o.dir.path().join("facts.json"),
                None if file.is_dir() => file.join("facts.json"),
                None => file.to_path_buf(),
            };
            f(FactsFrom::File(&path)).unwrap_or_else(|e| {
                eprintln!("trace-recipe: error: {e}");
                exit::FAILED
            })
        }
        None => with_tracefs(|tracefs| f(FactsFrom::Live(tracefs))),
    }
}

/// `check`'s verdict on `recipe` (its chain read as `chain` says) against the
/// facts `from`, printed in `format`; `against` joins the JSON of `check --against`.
fn check_with(
    recipe: &std::path::Path,
    sets: &[String],
    show_plan: bool,
    format: CheckFormat,
    from: FactsFrom<'_>,
    chain: crate::recipe::Chain,
    against: Option<&crate::replay::AgainstJson>,
) -> Result<i32, String> {
    {
        let started = jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S").to_string();
        let overrides = Default::default();
        match load_and_validate_with(from, recipe, sets, &started, &overrides, chain) {
            Ok((valid, _, facts)) if format != CheckFormat::Text => {
                check_machine(
                    recipe,
                    format,
                    Ok((&valid.recipe.name, &facts.release)),
                    against,
                );
                Ok(exit::OK)
            }
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
                let workload = (!valid.recipe.scope.command.is_empty()).then_some(0);
                let p = build_plan(&valid, workload, &[std::process::id()]);
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
                if let Some(t) = valid
                    .tracer
                    .as_ref()
                    .filter(|t| t.name != "nop" && !t.at_top_level)
                {
                    println!(
                        "note: whether an instance offers tracer `{}` is not read from the kernel (learning it takes a write); it comes from the {}; `run` finds the real answer in its own instance",
                        t.name, facts.instance.source
                    );
                }
                if let FactsFrom::File(file) = from {
                    println!(
                        "note: checked offline against the facts in {} (kernel {} {}); pids, comms, files named by uprobes and templates are this host's",
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
                for i in crate::plan::irreversible(&p, &facts.top_buffer) {
                    println!(
                        "irreversible: a run of this recipe {} ({}: `{}` -> `{}`)",
                        i.effect, i.file, i.before, i.after
                    );
                }
                let function_tracer = valid
                    .tracer
                    .as_ref()
                    .is_some_and(|t| t.is_function_tracer());
                println!("note: {}", valid.self_exclusion.describe(function_tracer));
                if let Some(n) = crate::validate::elsewhere_note(&valid.recipe, &valid.events) {
                    println!("note: {n}");
                }
                if show_plan {
                    println!(
                        "plan (pid 0 stands for the workload's pid, {} for each of the run's own threads):",
                        std::process::id()
                    );
                    for (i, step) in p.steps.iter().enumerate() {
                        println!("{:>3}. {step:#}", i + 1);
                    }
                }
                Ok(exit::OK)
            }
            Err(RunError::Invalid { text, diagnostics }) => {
                match format {
                    CheckFormat::Text => {
                        print!("{}", crate::diagnostic::render_all(&diagnostics, &text))
                    }
                    _ => check_machine(recipe, format, Err((&diagnostics, &text)), against),
                }
                Ok(exit::INVALID)
            }
            Err(RunError::Load(e)) => {
                eprintln!("trace-recipe: error: {e}");
                if format != CheckFormat::Text {
                    // The file has no text to point into: one problem without a place.
                    let d = crate::diagnostic::Diagnostic::recipe(None, e.to_string());
                    let source =
                        crate::diagnostic::Source::single(recipe.to_path_buf(), String::new());
                    check_machine(recipe, format, Err((&[d], &source)), against);
                }
                Ok(exit::INVALID)
            }
            Err(e) => Err(e.to_string()),
        }
    }
}

/// `check RECIPE`: against this kernel or a fact file, or as an exported plan.
fn check_recipe(
    recipe: PathBuf,
    sets: &[String],
    plan: bool,
    explain: bool,
    export: Option<ExportFormat>,
    format: CheckFormat,
    facts: Option<PathBuf>,
) -> i32 {
    match find_recipe(&recipe) {
        Some(recipe) if let Some(export) = export => {
            export_cmd(&recipe, sets, export, facts.as_deref())
        }
        Some(recipe) => {
            if explain && format == CheckFormat::Text {
                print_explain(&recipe, sets);
            }
            check(&recipe, sets, plan, format, facts.as_deref())
        }
        None => {
            if format != CheckFormat::Text {
                let d = crate::diagnostic::Diagnostic::recipe(
                    None,
                    format!("no recipe `{}` on the recipe path", recipe.display()),
                )
                .with_help("see `trace-recipe list`");
                let source = crate::diagnostic::Source::single(recipe.clone(), String::new());
                check_machine(&recipe, format, Err((&[d], &source)), None);
            }
            exit::INVALID
        }
    }
}

/// `list`: every recipe on the recipe path, checked against this kernel.
fn list(format: OutFormat) -> i32 {
    with_tracefs(|tracefs| {
        let dirs = crate::library::search_path();
        let started = jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S").to_string();
        let recipes = crate::library::discover(&dirs)
            .iter()
            .map(|f| {
                let verdict =
                    match load_and_validate(FactsFrom::Live(tracefs), &f.path, &[], &started) {
                        Ok(_) => Ok(()),
                        Err(RunError::Invalid { text, diagnostics }) => Err(diagnostics
                            .iter()
                            .map(|d| d.render(&text).lines().next().unwrap_or("").to_string())
                            .collect()),
                        Err(e) => Err(vec![e.to_string()]),
                    };
                crate::library::entry(f, verdict)
            })
            .collect();
        let l = crate::library::ListJson {
            format_version: crate::format::FORMAT_VERSION,
            search_path: dirs.iter().map(|d| d.display().to_string()).collect(),
            recipes,
        };
        match format {
            OutFormat::Text => print!("{}", crate::library::list_text(&l)),
            OutFormat::Json => print!("{}", crate::format::to_json(&l)),
        }
        // Nothing found is a failure a script can see (the text says where it looked).
        Ok(match l.recipes.is_empty() {
            true => exit::INVALID,
            false => exit::OK,
        })
    })
}

/// `events`: from a fact file, or from this kernel.
fn events(
    glob: Option<&str>,
    fields: bool,
    facts: Option<&std::path::Path>,
    format: OutFormat,
) -> i32 {
    let show = |e: crate::inventory::EventsJson| {
        match format {
            OutFormat::Text => {
                for u in &e.unreadable {
                    eprintln!("note: could not read {u}");
                }
                print!("{}", crate::inventory::events_text(&e));
            }
            OutFormat::Json => print!("{}", crate::format::to_json(&e)),
        }
        if e.substring {
            eprintln!(
                "note: no event is named `{}`: these are the events whose name contains it",
                glob.unwrap_or("*")
            );
        }
        if e.events.is_empty() {
            let near: Vec<String> = e.suggestions.iter().map(|s| format!("`{s}`")).collect();
            eprintln!(
                "trace-recipe: no event in {} matches `{}`, nor contains it{}",
                e.source,
                glob.unwrap_or("*"),
                match near.is_empty() {
                    true => String::new(),
                    false => format!("; did you mean {}?", near.join(", ")),
                }
            );
            exit::INVALID
        } else {
            exit::OK
        }
    };
    match facts {
        Some(path) => match crate::kernel::KernelFacts::load(path) {
            Ok(f) => show(crate::inventory::events(
                &f,
                &path.display().to_string(),
                glob,
                fields,
            )),
            Err(e) => {
                eprintln!("trace-recipe: error: {e}");
                exit::FAILED
            }
        },
        None => with_tracefs(|t| {
            let scope = crate::kernel::Scope {
                systems: None,
                kernel_symbols: false,
                filter_functions: false,
            };
            let facts =
                crate::kernel::KernelFacts::read_scoped(t, &scope).map_err(|e| e.to_string())?;
            Ok(show(crate::inventory::events(
                &facts, "tracefs", glob, fields,
            )))
        }),
    }
}

fn run_cmd(
    opts: RunOptions,
    format: OutFormat,
    quiet: bool,
    junit: Option<&std::path::Path>,
) -> i32 {
    let json = format == OutFormat::Json;
    let code = run_human(opts, json, quiet, junit);
    if let Some(j) = code.1 {
        print!("{}", crate::format::to_json(&j));
    }
    code.0
}

/// Runs, printing the human lines (on stderr, and the summary on stdout unless
/// `json`; when `quiet`, none of them, and in text only the output folder's
/// path on stdout). Returns the
/// exit code and, when `json`, the object to print.
fn run_human(
    opts: RunOptions,
    json: bool,
    quiet: bool,
    junit: Option<&std::path::Path>,
) -> (i32, Option<crate::format::RunJson>) {
    let mut progress = crate::progress::ProgressDisplay::new();
    let result = run(&opts, |ev| match ev {
        _ if quiet => {}
        RunEvent::Mounted(m) => eprintln!("{m}"),
        RunEvent::Irreversible(effects) => {
            for e in effects {
                eprintln!("irreversible: this run {e}");
            }
        }
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
        RunEvent::RollbackIncomplete { failures, journal } => eprintln!(
            "rollback incomplete: {} undo{} failed{}",
            failures.len(),
            if failures.len() == 1 { "" } else { "s" },
            journal.map_or(String::new(), |j| format!(
                "; journal kept: {}",
                j.display()
            ))
        ),
        RunEvent::Swept(line) | RunEvent::Waiting(line) => eprintln!("{line}"),
    });
    progress.finish();
    match result {
        Ok(outcome) => {
            if json && !quiet {
                eprint!("{}", outcome.summary);
                eprintln!("\noutput: {}", outcome.dir.display());
                if let Some(b) = &outcome.bundle {
                    eprintln!("bundle: {}", b.display());
                }
            } else if !json && quiet {
                // Quiet: stdout is the output folder's path (and the bundle's), for scripts.
                println!("{}", outcome.dir.display());
                if let Some(b) = &outcome.bundle {
                    println!("{}", b.display());
                }
            } else if !json {
                print!("{}", outcome.summary);
                println!("\noutput: {}", outcome.dir.display());
                if let Some(b) = &outcome.bundle {
                    println!("bundle: {}", b.display());
                }
            }
            if let Some(path) = junit
                && let Err(e) = std::fs::write(path, crate::report::render_junit(&outcome.report))
            {
                eprintln!("trace-recipe: error: cannot write {}: {e}", path.display());
                return (exit::FAILED, None);
            }
            let code = run_outcome_code(&outcome);
            (
                code,
                json.then(|| crate::format::RunJson::finished(&outcome, code)),
            )
        }
        Err(e) => {
            let code = run_error_code(&e);
            (
                code,
                json.then(|| crate::format::RunJson::failed(code, e.to_string())),
            )
        }
    }
}

/// Prints the warnings of a finished run; returns its exit code.
fn run_outcome_code(outcome: &crate::run::RunOutcome) -> i32 {
    if !outcome.rollback.complete() {
        eprintln!(
            "trace-recipe: error: {}",
            incomplete_message(&outcome.rollback)
        );
        return exit::ROLLBACK_INCOMPLETE;
    }
    match outcome.signal {
        Some(sig) => {
            eprintln!("trace-recipe: interrupted by {}", signal_name(sig));
            exit::SIGNAL_BASE + sig
        }
        None => match outcome.lost_limit_exceeded {
            Some(max) => {
                eprintln!(
                    "trace-recipe: error: lost {} events ({:.3} % of recorded + lost), more than `[output] max_lost_percent = {max}`\n  = help: raise `[buffer] size_kb`, trace fewer events or add filters",
                    outcome.report.lost_total, outcome.report.lost_percent
                );
                exit::LOST_LIMIT
            }
            None if outcome.report.expectations.iter().any(|e| !e.passed) => {
                eprintln!(
                    "trace-recipe: error: {} of {} expectations failed (see summary.txt and report.json)",
                    outcome
                        .report
                        .expectations
                        .iter()
                        .filter(|e| !e.passed)
                        .count(),
                    outcome.report.expectations.len()
                );
                exit::EXPECTATION_FAILED
            }
            None => exit::OK,
        },
    }
}

/// Prints a failed run's error; returns its exit code.
fn run_error_code(e: &RunError) -> i32 {
    match e {
        RunError::Invalid { .. } | RunError::Load(_) => {
            eprint!("{}", format!("{e}\n").replace("\n\n", "\n"));
            eprintln!("trace-recipe: nothing was written to tracefs");
            exit::INVALID
        }
        e if e.incomplete_rollback().is_some() => {
            eprintln!("trace-recipe: error: {e}");
            exit::ROLLBACK_INCOMPLETE
        }
        RunError::Interrupted(sig) => {
            eprintln!("trace-recipe: {e}");
            exit::SIGNAL_BASE + sig
        }
        e => {
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
    let (path, _opened) = match crate::bundle::resolve_input(path) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("trace-recipe: error: {e}");
            return exit::FAILED;
        }
    };
    let path = path.as_path();
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

/// `check --against BUNDLE`: the bundle's recipe, with the params it ran with
/// (then `sets`), validated on this kernel like `check`; then the kernel facts
/// that differ from the bundle's and matter to it, and the commands a rerun
/// would start. Read-only. Exit 0 when the recipe is valid here, 1 when not.
fn against_cmd(
    from: &std::path::Path,
    sets: &[String],
    show_plan: bool,
    format: CheckFormat,
) -> i32 {
    let stored = match crate::replay::StoredRun::open(from) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("trace-recipe: error: {e}");
            return exit::FAILED;
        }
    };
    let replay = stored.replay(sets, Vec::new());
    let recipe = stored.recipe();
    let chain = crate::recipe::Chain::Stored;
    with_tracefs(|tracefs| {
        let builtins = crate::recipe::Builtins {
            started: jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S").to_string(),
        };
        // The differences need the recipe (even one invalid here) and both facts.
        let bundle_facts = stored.facts();
        let differences = crate::recipe::load_with(&recipe, &replay.sets, &builtins, chain)
            .ok()
            .zip(bundle_facts.as_ref().ok())
            .map(|(loaded, theirs)| {
                let scope = crate::kernel::Scope::for_recipe(&loaded.recipe);
                crate::kernel::KernelFacts::read_scoped(tracefs, &scope)
                    .map(|here| crate::replay::differences(&loaded.recipe, theirs, &here))
            })
            .transpose()
            .map_err(|e| e.to_string())?;
        let m = &stored.manifest;
        let json = crate::replay::AgainstJson {
            bundle: from.display().to_string(),
            kernel_release: m.kernel_release.clone(),
            params: replay.sets.clone(),
            differences: differences.clone(),
            commands: replay
                .foreign
                .iter()
                .map(|(what, argv)| crate::replay::ForeignCommand {
                    purpose: what.to_string(),
                    argv: argv.clone(),
                })
                .collect(),
        };
        if format == CheckFormat::Text {
            println!(
                "{}: recipe `{}` as run on kernel {}{}{}{}",
                from.display(),
                m.recipe.as_deref().unwrap_or("?"),
                m.kernel_release.as_deref().unwrap_or("?"),
                m.host
                    .as_ref()
                    .map_or(String::new(), |h| format!(" (host {h})")),
                m.started
                    .as_ref()
                    .map_or(String::new(), |t| format!(" at {t}")),
                match replay.sets.is_empty() {
                    true => String::new(),
                    false => format!(", params {}", replay.sets.join(" ")),
                }
            );
            let bases = (1..)
                .map(|n| format!("recipe.base-{n}.toml"))
                .take_while(|b| stored.dir.join(b).is_file());
            let files: Vec<String> = [recipe
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()]
            .into_iter()
            .chain(bases)
            .collect();
            println!(
                "note: the run's recipe files are checked in {}{}: {}",
                stored.dir.display(),
                if from.is_dir() {
                    ""
                } else {
                    " (unpacked, removed on exit)"
                },
                files.join(", ")
            );
        }
        let code = check_with(
            &recipe,
            &replay.sets,
            show_plan,
            format,
            FactsFrom::Live(tracefs),
            chain,
            Some(&json),
        )?;
        if format == CheckFormat::Text {
            match (&differences, &bundle_facts) {
                (Some(d), Ok(theirs)) => print!("{}", crate::replay::differences_text(theirs, d)),
                (_, Err(e)) => println!("note: no kernel facts to compare with: {e}"),
                (None, Ok(_)) => {}
            }
            if !replay.foreign.is_empty() {
                println!(
                    "commands a rerun starts that come from the bundle (`rerun --allow-commands` agrees to them):"
                );
                print!("{}", crate::replay::commands_text(&replay.foreign));
            }
        }
        Ok(code)
    })
}

/// `rerun BUNDLE`: the bundle's recipe run here like `run`, with the params it
/// ran with (then `sets`) and its workload (unless `command`). The commands that
/// come from the bundle start only with `allow_commands` or a yes typed on a
/// terminal; otherwise nothing runs and the exit code is 2.
fn rerun(
    from: &std::path::Path,
    sets: &[String],
    allow_commands: bool,
    args: RunArgs,
    command: Vec<String>,
) -> i32 {
    let stored = match crate::replay::StoredRun::open(from) {
        Ok(s) => s,
        Err(e) => return args.failed(exit::FAILED, e.to_string()),
    };
    let replay = stored.replay(sets, command);
    if !args.quiet {
        let m = &stored.manifest;
        eprintln!(
            "rerun: recipe `{}` of {} (kernel {}{}){}",
            m.recipe.as_deref().unwrap_or("?"),
            from.display(),
            m.kernel_release.as_deref().unwrap_or("?"),
            m.host
                .as_ref()
                .map_or(String::new(), |h| format!(", host {h}")),
            match replay.sets.is_empty() {
                true => String::new(),
                false => format!(" with params {}", replay.sets.join(" ")),
            }
        );
    }
    if !replay.foreign.is_empty() && !allow_commands && !agreed(&replay.foreign) {
        return args.failed(
            exit::USAGE,
            format!(
                "the recipe of {} starts commands that come from the bundle, not from you; nothing was run\n{}  = help: read them; pass `--allow-commands` to start them, or give a workload of your own after `--` (`[collect]` commands still need `--allow-commands`)",
                from.display(),
                crate::replay::commands_text(&replay.foreign)
            ),
        );
    }
    args.run(stored.recipe(), replay.sets, replay.command, true)
}

/// Asks on the terminal whether to start `commands` (stdin and stderr must both
/// be terminals; otherwise no). True on `y` or `yes`.
fn agreed(commands: &[(&'static str, Vec<String>)]) -> bool {
    use std::io::IsTerminal;
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return false;
    }
    eprint!(
        "this bundle's recipe starts these commands:\n{}start them? [y/N] ",
        crate::replay::commands_text(commands)
    );
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).is_ok()
        && matches!(answer.trim().to_lowercase().as_str(), "y" | "yes")
}
