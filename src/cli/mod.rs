//! The command line: `args` parses (clap), one file per command family does
//! the work, and `Failure::code` chooses every exit code. Only this module
//! prints; only `main` exits.
//!
//! - `check`: `check` (with `--plan`, `--export`, `--explain`, `--facts`,
//!   `--against`) and `facts`;
//! - `run`: `run` and `rerun`;
//! - `inspect`: `list`, `show`, `events`, `functions`, `report`, `schema`,
//!   `completions`, `__man`;
//! - `export`: `export` (a trace as Parquet tables);
//! - `travel`: `diff`, `fleet`, `pack`, `unpack`, `status`, `reset`;
//! - [`man`]: the man pages `__man` writes, with the book's exit codes and
//!   examples.
//!
//! Exit codes: see [`exit`] and `Failure::code`.

mod args;
mod check;
mod export;
mod inspect;
pub mod man;
mod run;
mod travel;

use std::path::{Path, PathBuf};

use clap::Parser;

use crate::tracefs::Tracefs;
use crate::untrusted::teprintln;
use args::{Cli, Command};

/// Exit codes of `trace-recipe` (the README's table; `Failure::code` chooses them).
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

/// An error on its way to stderr, its source chain intact until printed.
pub(crate) type Error = Box<dyn std::error::Error>;

/// How a command ended when not with exit 0. A variant with an error prints it
/// as `trace-recipe: error: …` (see [`Failure::print`]); one without says the
/// command has already printed why (diagnostics, a verdict, a summary).
#[derive(Debug)]
pub(crate) enum Failure {
    /// The recipe is invalid, or the command's verdict is no ([`exit::INVALID`]).
    Invalid(Option<Error>),
    /// Bad usage ([`exit::USAGE`]).
    Usage(Option<Error>),
    /// The tool failed ([`exit::FAILED`]).
    Failed(Option<Error>),
    /// The run lost more than `[output] max_lost_percent` ([`exit::LOST_LIMIT`]).
    LostLimit,
    /// An `[[expect]]` failed ([`exit::EXPECTATION_FAILED`]).
    ExpectationFailed,
    /// A `diff --fail-if` rule held ([`exit::DIFF_RULE_HELD`]).
    DiffRuleHeld,
    /// The rollback is incomplete ([`exit::ROLLBACK_INCOMPLETE`]).
    RollbackIncomplete,
    /// The run was ended by this signal ([`exit::SIGNAL_BASE`] + its number).
    Signal(crate::run::Signal),
    /// An internal subcommand's own status (`__guard`, `__held-exec`).
    Internal(i32),
}

impl Failure {
    /// The tool failed with `e`.
    pub(crate) fn failed(e: impl Into<Error>) -> Failure {
        Failure::Failed(Some(e.into()))
    }

    /// The exit code: the one place the README's exit-code table is decided.
    pub(crate) fn code(&self) -> i32 {
        match self {
            Failure::Invalid(_) => exit::INVALID,
            Failure::Usage(_) => exit::USAGE,
            Failure::Failed(_) => exit::FAILED,
            Failure::LostLimit => exit::LOST_LIMIT,
            Failure::ExpectationFailed => exit::EXPECTATION_FAILED,
            Failure::DiffRuleHeld => exit::DIFF_RULE_HELD,
            Failure::RollbackIncomplete => exit::ROLLBACK_INCOMPLETE,
            Failure::Signal(s) => exit::SIGNAL_BASE + s.number(),
            Failure::Internal(code) => *code,
        }
    }

    /// The error it carries, if any.
    fn error(&self) -> Option<&Error> {
        match self {
            Failure::Invalid(e) | Failure::Usage(e) | Failure::Failed(e) => e.as_ref(),
            _ => None,
        }
    }

    /// Prints the error it carries (`trace-recipe: error: …`), if any.
    fn print(&self) {
        if let Some(e) = self.error() {
            teprintln!("trace-recipe: error: {e}");
        }
    }

    /// Prints the error it carries; the same failure with nothing left to print.
    fn printed(self) -> Failure {
        self.print();
        match self {
            Failure::Invalid(_) => Failure::Invalid(None),
            Failure::Usage(_) => Failure::Usage(None),
            Failure::Failed(_) => Failure::Failed(None),
            other => other,
        }
    }
}

/// What every command returns.
pub(crate) type Exit = Result<(), Failure>;

/// An error message with the error that caused it as its source: `WHAT: SOURCE`.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub(crate) struct Context {
    what: String,
    source: Error,
}

impl Context {
    /// `what` (e.g. "cannot read FILE") caused by `source`.
    pub(crate) fn new(what: impl Into<String>, source: impl Into<Error>) -> Context {
        Context {
            what: what.into(),
            source: source.into(),
        }
    }
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
        Command::Run(_) | Command::Guard(_) | Command::Reset(_)
    ) {
        // SAFETY: signal(2) with SIG_DFL before any thread is started.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    match dispatch(cli.command) {
        Ok(()) => exit::OK,
        Err(failure) => {
            failure.print();
            failure.code()
        }
    }
}

/// Runs one subcommand.
fn dispatch(command: Command) -> Exit {
    match command {
        Command::Check(a) => check::check(a),
        Command::Facts(a) => check::facts(a),
        Command::Run(a) => run::run(a),
        Command::Rerun(a) => run::rerun(a),
        Command::List(a) => inspect::list(a),
        Command::Show(a) => inspect::show(a),
        Command::Events(a) => inspect::events(a),
        Command::Functions(a) => inspect::functions(a),
        Command::Report(a) => inspect::report(a),
        Command::Export(a) => export::export(a),
        Command::Schema(a) => inspect::schema(a),
        Command::Completions(a) => inspect::completions(a),
        Command::Man(a) => inspect::man(a),
        Command::Diff(a) => travel::diff(a),
        Command::Fleet(a) => travel::fleet(a),
        Command::Pack(a) => travel::pack(a),
        Command::Unpack(a) => travel::unpack(a),
        Command::CollectBoot(a) => run::collect_boot(a),
        Command::Status(a) => travel::status(a),
        Command::Reset(a) => travel::reset(a),
        Command::HeldExec(a) => internal(crate::workload::held_exec(&a.command)),
        Command::Guard(a) => internal(crate::apply::guard::guard_main(
            &a.journal,
            a.run_pid,
            a.workload_pid,
        )),
    }
}

/// An internal subcommand's exit status as an [`Exit`].
fn internal(code: i32) -> Exit {
    match code {
        exit::OK => Ok(()),
        code => Err(Failure::Internal(code)),
    }
}

/// Runs `f` with the live tracefs (mounted if needed; the mount's note on stderr).
fn with_tracefs(f: impl FnOnce(&Tracefs) -> Exit) -> Exit {
    let (tracefs, note) = Tracefs::locate_or_mount().map_err(Failure::failed)?;
    if let Some(n) = note {
        teprintln!("{n}");
    }
    f(&tracefs)
}

/// Resolves a recipe argument on the recipe path ([`crate::library`]); prints
/// the note of a name found twice, or the error of one found nowhere (`None`).
fn find_recipe(arg: &Path) -> Option<PathBuf> {
    match crate::library::resolve(arg, &crate::library::search_path()) {
        Ok(r) => {
            if let Some(n) = r.note() {
                teprintln!("{n}");
            }
            Some(r.path)
        }
        Err(e) => {
            teprintln!("trace-recipe: error: {e}");
            None
        }
    }
}

/// A trace a command reads (`report`, `export`): a trace.dat, a run's output
/// folder (its trace.dat) or a bundle (checked and unpacked into a temporary
/// folder, removed when this is dropped), opened through
/// [`crate::bundle::resolve_input`].
pub(crate) struct Input {
    /// The trace.dat read.
    pub(crate) path: PathBuf,
    /// It, open.
    pub(crate) file: tracedat::TraceFile,
    /// The run's report.json, for a folder or a bundle that has a readable
    /// one (see [`run_report`]).
    pub(crate) run_json: Option<crate::report::RunReport>,
    /// What the path given was: `trace.dat`, `output folder` or `bundle`.
    pub(crate) kind: &'static str,
    /// The function prototypes a folder or bundle of a `func-args` /
    /// `funcgraph-args` run keeps, for the text listing
    /// ([`crate::funcargs`]); `None` for a bare trace.dat, and until
    /// [`Input::load_prototypes`].
    pub(crate) prototypes: Option<tracedat::Prototypes>,
    /// The unpacked bundle, kept until the trace is read.
    _opened: Option<crate::bundle::Opened>,
}

impl Input {
    /// Opens `given`; a failure to read it is [`Failure::Failed`].
    pub(crate) fn open(given: &Path) -> Result<Input, Failure> {
        let (path, opened) = crate::bundle::resolve_input(given).map_err(Failure::failed)?;
        let file = tracedat::TraceFile::open(&path).map_err(|e| {
            Failure::failed(Context::new(
                format!("cannot read {}", crate::untrusted::escape_path(&path)),
                e,
            ))
        })?;
        let kind = match (&opened, given.is_dir()) {
            (Some(_), _) => "bundle",
            (None, true) => "output folder",
            (None, false) => "trace.dat",
        };
        let run_json = (kind != "trace.dat")
            .then(|| path.parent().and_then(run_report))
            .flatten();
        Ok(Input {
            path,
            file,
            run_json,
            kind,
            prototypes: None,
            _opened: opened,
        })
    }

    /// Reads the function prototypes of a folder or bundle into
    /// [`Input::prototypes`] (for the text listing); a `func-args.txt` that
    /// cannot be read safely is [`Failure::Failed`], naming it.
    pub(crate) fn load_prototypes(&mut self) -> Result<(), Failure> {
        let Some(dir) = self.path.parent().filter(|_| self.kind != "trace.dat") else {
            return Ok(());
        };
        self.prototypes = crate::funcargs::load(dir).map_err(|e| {
            Failure::failed(Context::new(
                crate::untrusted::escape_path(&dir.join(crate::funcargs::FILE)),
                e.into_io(),
            ))
        })?;
        Ok(())
    }

    /// What `args` keeps of this trace (`None`: everything); a flag that
    /// cannot be read is [`Failure::Usage`], one that names what the file
    /// does not hold [`Failure::Invalid`].
    pub(crate) fn select(
        &self,
        args: &crate::analysis::SelectArgs,
    ) -> Result<Option<crate::analysis::Select>, Failure> {
        use crate::analysis::SelectError;
        crate::analysis::Select::new(&self.file, args).map_err(|e| match e {
            SelectError::Syntax(m) => Failure::Usage(Some(m.into())),
            SelectError::Unknown(m) => Failure::Invalid(Some(m.into())),
        })
    }
}

/// The report.json in output folder `dir`, parsed; `None` when it is
/// missing, refused by [`crate::untrusted`] (not a regular file, a link out
/// of the folder, over 64 MiB or over its count of JSON values) or not JSON.
fn run_report(dir: &Path) -> Option<crate::report::RunReport> {
    use crate::untrusted::{Kind, read_optional_in};
    let bytes = read_optional_in(dir, "report.json", Kind::Report).ok()??;
    crate::report::RunReport::parse(&bytes)
}

/// The timestamp a run started at, as templates see it (`YYYYmmdd-HHMMSS`).
fn started() -> String {
    jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S").to_string()
}
