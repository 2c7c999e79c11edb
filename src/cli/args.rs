//! The command line's clap types: parsing only, no I/O (ripgrep's "low
//! args"). Each subcommand's arguments are a struct its family's file takes.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::analysis::AnalysisName;

/// Turn a checked-in TOML recipe into an ftrace session: validate it against the
/// running kernel, apply it to a fresh tracefs instance, record, roll everything
/// back, and leave a trace.dat plus reports.
#[derive(Debug, Parser)]
#[command(name = "trace-recipe", version, about, max_term_width = 100)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Validate a recipe against the running kernel; print every problem at once.
    Check(CheckArgs),
    /// Print what validation needs to know about the running kernel's ftrace
    /// (events and formats, tracers, options, clocks, probe support, buffer
    /// state, symbols) as versioned JSON. Read-only. Schema:
    /// `trace-recipe schema --of facts`.
    Facts(FactsArgs),
    /// Run a recipe: apply, record, roll back, write trace.dat and reports.
    Run(RunArgs),
    /// Run a bundle's (or an output folder's) recipe again here, with the params
    /// and the workload it ran with. Commands that come from the bundle (its
    /// workload, `[scope] command`, `[collect]`) are listed and started only with
    /// `--allow-commands` or a yes on a terminal; otherwise nothing runs (exit 2).
    Rerun(RerunArgs),
    /// Read a trace.dat (ours, or trace-cmd's v6/v7) and print it.
    Report(ReportArgs),
    /// Write a trace.dat's records for other tools: with `--format parquet`,
    /// one Parquet file per event, tasks.parquet and meta.json in the folder
    /// `-o DIR` (for DuckDB, polars, pandas); with `--format perfetto`, one
    /// Perfetto trace `-o FILE.pftrace` (for Perfetto's UI and trace
    /// processor).
    Export(ExportArgs),
    /// Compare two runs (bundles, output folders or trace.dat files): recipe keys,
    /// kernel facts, event counts and rates, latencies, top stacks, lost events.
    /// Exits 6 when a `--fail-if` rule holds.
    Diff(DiffArgs),
    /// Summarise one recipe's runs on many hosts: one row per host (events, lost
    /// events, expectations, stop reason, largest changes against the fleet
    /// median of each event's rate), totals, and the hosts that failed and why.
    Fleet(FleetArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Internal: write the man pages (trace-recipe.1, trace-recipe-SUBCOMMAND.1) into DIR.
    #[command(name = "__man", hide = true)]
    Man(ManArgs),
    /// Pack a run's output folder into one file, DIR.tar.zst: manifest.json (the
    /// run, the kernel, the sha256 of every member) and every artifact.
    Pack(PackArgs),
    /// Check a bundle and unpack it into a folder (nothing is written elsewhere).
    Unpack(UnpackArgs),
    /// The flight recorder, after a reboot: read the last boot's events from a
    /// boot-mapped instance (armed by `run` of a recipe with `[buffer]
    /// persistent`, Linux 6.12+) into a run folder (trace.dat, report.json,
    /// summary.txt), with the armed boot's kallsyms, then release the instance.
    CollectBoot(CollectBootArgs),
    /// Show tracefs state that differs from a clean boot, and what runs left behind.
    Status(StatusArgs),
    /// Remove what trace-recipe runs left behind (never touches what others own).
    Reset(ResetArgs),
    /// Print the recipe's JSON Schema (or report.json's, with `--report`, or a
    /// command's JSON output's, with `--of`).
    Schema(SchemaArgs),
    /// List the recipes on the recipe path: name, description, what they need,
    /// and whether they pass `check` on this kernel.
    List(ListArgs),
    /// Print a recipe (by name or path) with its "What to look for" comments.
    Show(ShowArgs),
    /// List the events this kernel (or a fact file) offers, with `--fields` their
    /// fields and types.
    Events(EventsArgs),
    /// List kernel functions matching GLOB: from available_filter_functions, or
    /// from /proc/kallsyms where the kernel refuses the function tracer.
    Functions(FunctionsArgs),
    /// Internal: roll back JOURNAL if the run that started us dies.
    #[command(name = "__guard", hide = true)]
    Guard(GuardArgs),
    /// Internal: wait for the go byte on fd 3, then exec COMMAND.
    #[command(name = "__held-exec", hide = true)]
    HeldExec(HeldExecArgs),
}

// `check`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The recipe: a file (with a `/` or ending in `.toml`), or a name on the
    /// recipe path (see `list`).
    #[arg(required_unless_present = "against")]
    pub(crate) recipe: Option<PathBuf>,
    /// Override a `[params]` value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(crate) sets: Vec<String>,
    /// Also print the plan: every tracefs change and its undo, one per line.
    #[arg(long)]
    pub(crate) plan: bool,
    /// With `--plan`: print only the plan as a POSIX shell script that applies
    /// it, traces until interrupted and undoes every step in reverse (`sh`),
    /// or as the nearest `trace-cmd record` command line, with a comment
    /// naming what it cannot express (`trace-cmd`).
    #[arg(long, value_enum, requires = "plan")]
    pub(crate) export: Option<PlanExport>,
    /// First print every effective key with the file:line that set it (the
    /// recipe or a base it `extends`).
    #[arg(long)]
    pub(crate) explain: bool,
    /// `text` for people; `json` (schema/check.schema.json); `sarif` (SARIF
    /// 2.1.0, for code review).
    #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
    pub(crate) format: CheckFormat,
    /// Validate offline against another kernel's facts: a fact file
    /// (`trace-recipe facts -o FILE`, JSON or `.json.zst`) or a bundle
    /// (`.tar.zst`, its facts.json). Needs neither root nor tracefs.
    #[arg(long, value_name = "FILE")]
    pub(crate) facts: Option<PathBuf>,
    /// Validate a bundle's (or an output folder's) recipe, with the params it
    /// ran with, on this kernel; list the kernel facts that differ from the
    /// bundle's and matter to it, and the commands `rerun` would start.
    /// Read-only: nothing is applied. `--set` overrides the bundle's params.
    #[arg(long, value_name = "BUNDLE", conflicts_with_all = ["recipe", "facts", "export", "explain"])]
    pub(crate) against: Option<PathBuf>,
}

// `facts`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct FactsArgs {
    /// Write to FILE instead of stdout (`.zst` at the end: compressed with zstd).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    /// Also keep a digest of the kernel's BTF (/sys/kernel/btf/vmlinux): every
    /// function's and tracepoint's prototype and every struct's members (about
    /// 9 MB of JSON, 1.4 MB compressed), so that `check --facts` checks
    /// BTF-named fetchargs (`count`, `file->f_path.dentry`) offline.
    #[arg(long)]
    pub(crate) btf: bool,
}

// `run`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The recipe: a file (with a `/` or ending in `.toml`), or a name on the
    /// recipe path (see `list`).
    pub(crate) recipe: PathBuf,
    /// Override a `[params]` value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(crate) sets: Vec<String>,
    #[command(flatten)]
    pub(crate) flags: RunFlags,
    /// The workload: started held, scoped by pid, released once tracing is on.
    #[arg(last = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

// `rerun`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct RerunArgs {
    /// The bundle (`.tar.zst`) or output folder of the run.
    #[arg(value_name = "BUNDLE")]
    pub(crate) from: PathBuf,
    /// Override one of the run's params (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(crate) sets: Vec<String>,
    /// Start the commands that come from the bundle without asking.
    #[arg(long)]
    pub(crate) allow_commands: bool,
    /// Take what the bundle asks of this machine beyond the modest defaults
    /// (a ring buffer over 64 MiB in all, a duration over 10 minutes, a
    /// tracer that samples CPUs) without asking.
    #[arg(long)]
    pub(crate) allow_resources: bool,
    #[command(flatten)]
    pub(crate) flags: RunFlags,
    /// A workload of your own instead of the run's.
    #[arg(last = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

// `report`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// A trace.dat, a run's output folder, or a bundle (checked first).
    pub(crate) file: PathBuf,
    /// `text`: one line per event like `trace-cmd report`; `summary`: the
    /// analyses through a template; `json`: report.json; `html`: a
    /// self-contained page with charts and flame graphs; `folded`: the
    /// recorded stacks as folded stacks (`stacks.folded`: `EVENT;outer;...;inner
    /// COUNT`), for flamegraph.pl, inferno or speedscope; `folded-funcgraph`:
    /// function_graph's call paths weighted by self time in ns (`funcgraph.folded`).
    /// On a terminal, control characters in the file's strings are shown
    /// escaped (`\u{1b}`); piped or written with `-o`, the text listing is
    /// byte for byte trace-cmd's.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
    /// Analyses to run (repeatable or comma-separated); default: every one
    /// whose events the file holds.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "NAME")]
    pub(crate) analysis: Vec<AnalysisName>,
    /// A minijinja template for `--format summary` (context: report.json).
    #[arg(long, value_name = "FILE")]
    pub(crate) template: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) select: SelectFlags,
    /// Write the report to FILE instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    /// Answer the `[[answer]]` tables of FILE (a recipe, or a file of
    /// `[[answer]]` tables only) over the trace: first in the summary,
    /// `answers.NAME` in report.json, a table and histogram in report.html.
    #[arg(long, value_name = "FILE.toml")]
    pub(crate) answer: Option<PathBuf>,
}

/// The records a command reads from a trace (`report`, `export`): its
/// `-F`, `--cpu`, `--pid`, `--comm`, `--from`, `--to`.
#[derive(Debug, clap::Args)]
pub(crate) struct SelectFlags {
    /// Keep only EVENT's records, where FILTER holds (repeatable; a record is
    /// kept when any `-F` keeps it). EVENT: `system:event`, `system:*` or
    /// `event`; FILTER: the kernel's filter syntax (`prev_pid == 1 && cpu < 2`),
    /// with `comm` and `cpu` for every event.
    #[arg(short = 'F', long = "filter", value_name = "EVENT[:FILTER]")]
    pub(crate) filter: Vec<String>,
    /// Keep only the records of these CPUs (`0,2-3`; repeatable).
    #[arg(long, value_name = "LIST")]
    pub(crate) cpu: Vec<String>,
    /// Keep only the events of these tasks (repeatable or comma-separated).
    #[arg(
        short = 'P',
        long,
        value_delimiter = ',',
        value_name = "PID",
        allow_negative_numbers = true
    )]
    pub(crate) pid: Vec<i32>,
    /// Keep only the events of tasks with this name (a glob; repeatable).
    #[arg(long, value_name = "NAME")]
    pub(crate) comm: Vec<String>,
    /// Start at this time: seconds after the first event (`1.5`) or, after
    /// `@`, an event's timestamp as the text listing prints it.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub(crate) from: Option<String>,
    /// End at this time (inclusive), like `--from`.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub(crate) to: Option<String>,
}

impl From<SelectFlags> for crate::analysis::SelectArgs {
    fn from(f: SelectFlags) -> Self {
        crate::analysis::SelectArgs {
            filters: f.filter,
            cpus: f.cpu,
            pids: f.pid,
            comms: f.comm,
            from: f.from,
            to: f.to,
        }
    }
}

// `export`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// A trace.dat, a run's output folder, or a bundle (checked first).
    pub(crate) file: PathBuf,
    /// `parquet`: one Parquet file per event (its fields as typed columns,
    /// with `ts_ns`, `cpu`, `pid`, `comm`), tasks.parquet and meta.json, in
    /// the folder `-o`. `perfetto`: one Perfetto trace (`-o FILE.pftrace`)
    /// for Perfetto's UI and trace processor: ftrace event bundles per CPU
    /// (sched, task, irq, power events and print typed, every other event
    /// generic) and the tasks' names. (`--format`, as `report` names it:
    /// `--to` ends the time window.)
    #[arg(long, value_enum)]
    pub(crate) format: ExportFormat,
    /// Parquet: the folder to write (created; refused when it holds
    /// anything). Perfetto: the file to write (refused when it exists).
    #[arg(short = 'o', long, value_name = "PATH")]
    pub(crate) output: PathBuf,
    #[command(flatten)]
    pub(crate) select: SelectFlags,
}

/// `--format` of `export`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ExportFormat {
    /// Parquet tables, for DuckDB, polars, pandas, Spark.
    Parquet,
    /// A Perfetto trace (protobuf), for Perfetto's UI and trace processor.
    Perfetto,
}

// `diff`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    /// Run A, the baseline.
    pub(crate) a: PathBuf,
    /// Run B.
    pub(crate) b: PathBuf,
    /// `text`, `json` (schema/diff.schema.json) or `html` (one self-contained page).
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    pub(crate) format: DiffFormat,
    /// A rule on B, e.g. `count(SYSTEM:EVENT) > +10%`, `rate(SYSTEM:EVENT) < -5%`,
    /// `p99(ANALYSIS:KEY) > +10%` (relative to A), `lost_events > 0` (repeatable).
    #[arg(long = "fail-if", value_name = "RULE")]
    pub(crate) fail_if: Vec<String>,
}

// `fleet`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct FleetArgs {
    /// Bundles (HOST.tar.zst, or output folders), and host status files
    /// (HOST.json: `{"host", "stage", "reason", "exit_code"}`) of hosts that
    /// wrote none.
    #[arg(required = true, value_name = "INPUT")]
    pub(crate) inputs: Vec<PathBuf>,
    /// `text`, `json` (schema/fleet.schema.json) or `html` (one self-contained page).
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    pub(crate) format: DiffFormat,
}

// `completions`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    pub(crate) shell: clap_complete::Shell,
}

// `__man`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct ManArgs {
    /// The folder to write into (created).
    pub(crate) dir: PathBuf,
}

// `pack`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct PackArgs {
    /// The output folder of a run.
    pub(crate) dir: PathBuf,
    /// The bundle to write (default `DIR.tar.zst`).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    /// Leave the host name out of the manifest.
    #[arg(long)]
    pub(crate) redact_host: bool,
}

// `unpack`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct UnpackArgs {
    /// The bundle.
    pub(crate) bundle: PathBuf,
    /// The folder to create (default: the bundle's name without `.tar.zst`, plus `.unpacked`).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

// `collect-boot`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct CollectBootArgs {
    /// The boot-mapped instance (default: the arm record's, else the kernel's only one).
    #[arg(long, value_name = "NAME")]
    pub(crate) instance: Option<String>,
    /// The arm record: the arming run's output folder, or a copy of
    /// /var/lib/trace-recipe/boot/NAME (the default, when it exists; the folder
    /// is `$TRACE_RECIPE_BOOT_STATE/NAME` when that is set). Without one, symbols
    /// come from this boot's kallsyms moved by `last_boot_info`'s text delta.
    #[arg(long, value_name = "DIR")]
    pub(crate) armed: Option<PathBuf>,
    /// The run folder to write (must not exist, or be empty).
    #[arg(short, long, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// Leave the instance as it is rather than releasing it to its state before arming.
    #[arg(long)]
    pub(crate) keep: bool,
}

// `status`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    /// `text` or `json` (schema/status.schema.json).
    #[arg(long, value_enum, default_value_t = OutFormat::Text)]
    pub(crate) format: OutFormat,
    /// Exit 1 when a trace-recipe run left something behind (for monitoring).
    #[arg(long)]
    pub(crate) exit_code: bool,
}

// `reset`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct ResetArgs {
    /// The hammer: reset ALL of tracefs to boot defaults, like `trace-cmd reset -a`,
    /// including other tools' instances, filters, triggers and probes.
    #[arg(long, conflicts_with = "dry_run")]
    pub(crate) all: bool,
    /// Change nothing: say what would be removed.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// `text` or `json` (schema/reset.schema.json).
    #[arg(long, value_enum, default_value_t = OutFormat::Text)]
    pub(crate) format: OutFormat,
}

// `schema`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct SchemaArgs {
    /// The schema of report.json instead.
    #[arg(long, conflicts_with_all = ["manifest", "of"])]
    pub(crate) report: bool,
    /// The schema of a bundle's manifest.json instead.
    #[arg(long, conflicts_with = "of")]
    pub(crate) manifest: bool,
    /// The schema of this command's `--format json` output instead.
    #[arg(long, value_enum, value_name = "COMMAND")]
    pub(crate) of: Option<crate::format::SchemaOf>,
}

// `list`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    /// `text` or `json` (schema/list.schema.json).
    #[arg(long, value_enum, default_value_t = OutFormat::Text)]
    pub(crate) format: OutFormat,
}

// `show`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// A name on the recipe path, or a file.
    pub(crate) recipe: PathBuf,
}

// `events`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct EventsArgs {
    /// `system:event` glob, or an event-name glob in any system (default: all).
    pub(crate) glob: Option<String>,
    /// Also list each event's fields with their C types.
    #[arg(long)]
    pub(crate) fields: bool,
    /// Read a JSON fact file instead of this kernel.
    #[arg(long, value_name = "FILE")]
    pub(crate) facts: Option<PathBuf>,
    /// `text` or `json` (schema/events.schema.json).
    #[arg(long, value_enum, default_value_t = OutFormat::Text)]
    pub(crate) format: OutFormat,
}

// `functions`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct FunctionsArgs {
    /// Function-name glob (`*`, `?`).
    pub(crate) glob: String,
}

// `__guard`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct GuardArgs {
    /// The run's pid (our parent may already be gone when we start).
    #[arg(long)]
    pub(crate) run_pid: u32,
    /// The workload to end (its whole process group) if the run dies.
    #[arg(long)]
    pub(crate) workload_pid: Option<u32>,
    #[arg(last = true)]
    pub(crate) journal: PathBuf,
}

// `__held-exec`'s arguments (the variant's doc comment is its help).
#[derive(Debug, clap::Args)]
pub(crate) struct HeldExecArgs {
    #[arg(last = true)]
    pub(crate) command: Vec<String>,
}

/// The options `run` and `rerun` share: where the output goes and how it is shown.
#[derive(Debug, clap::Args)]
pub(crate) struct RunFlags {
    /// Output folder (default `./trace-recipe-out/NAME-TIMESTAMP`).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Also write the `[[expect]]` results as JUnit XML to FILE (for CI).
    #[arg(long, value_name = "FILE")]
    pub(crate) junit: Option<PathBuf>,
    /// Also pack the output folder into one file, DIR.tar.zst (see `pack`).
    #[arg(long)]
    pub(crate) bundle: bool,
    /// Replace the recipe's `duration` (e.g. `500ms`, `10s`, `2m`).
    #[arg(long, value_name = "DURATION")]
    pub(crate) duration: Option<String>,
    /// Replace the recipe's `[buffer] size_kb` (KiB per CPU).
    #[arg(long, value_name = "KB")]
    pub(crate) buffer_size_kb: Option<u64>,
    /// Record every task while the workload runs, not only the workload's
    /// (`[scope] system_wide = true`, as `trace-cmd record CMD` without `-F`).
    #[arg(long)]
    pub(crate) system_wide: bool,
    /// `text`: the summary on stdout; `json`: one object on stdout at the end
    /// (schema/run.schema.json), the summary on stderr.
    #[arg(long, value_enum, default_value_t = OutFormat::Text)]
    pub(crate) format: OutFormat,
    /// No progress lines on stderr and no summary: stdout is only the output
    /// folder's path (and the bundle's, on a second line) with `--format text`,
    /// the JSON object with `--format json`. Errors and warnings stay on stderr.
    #[arg(short, long)]
    pub(crate) quiet: bool,
}

/// `--format` of `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CheckFormat {
    Text,
    Json,
    Sarif,
}

/// `--format` of `run`, `status`, `reset`, `list`, `events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutFormat {
    Text,
    Json,
}

/// `--format` of `diff` and `fleet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DiffFormat {
    Text,
    Json,
    Html,
}

/// `--format` of `report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    Text,
    Summary,
    Json,
    Html,
    Folded,
    FoldedFuncgraph,
}

/// `check --plan --export`'s formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PlanExport {
    /// A POSIX shell script.
    Sh,
    /// The nearest `trace-cmd record` command line.
    TraceCmd,
}
