//! One `run`: render → validate → plan → apply → record → stop → roll back →
//! trace.dat + reports. The only place that strings the stages together.
//!
//! The run goes through typed phases: [`Prepared`] (valid recipe, plan, held
//! workload; nothing written to tracefs) → [`Armed`] (the plan applied; owns the
//! transaction and its journal, the guard, the recorder and the workload) →
//! [`RolledBack`] (a [`RollbackReport`] that decides how the run ends). Every
//! stop reason after apply goes through the one [`Armed::teardown`]; nothing
//! rests on the order in which locals drop. What a run keeps (trace.dat's
//! metadata and the kernel's tables, read before the rollback; trace.dat and
//! the reports, written after it) is the output stage, [`output`].
//!
//! Signals (SIGINT, SIGTERM, SIGHUP) never end the process here ([`stop`]):
//! they set the reason the run stops, and the normal path (tracing off, drain,
//! roll back, write the output) runs as for any other ending. The handlers are
//! unregistered when `run` returns.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tracedat::CaptureMeta;

use crate::apply::guard::Guard;
use crate::apply::journal::{
    Header, JOURNAL_DIR, JOURNAL_VERSION, Journal, JournalError, path_for,
};
use crate::apply::sweep::sweep;
use crate::apply::{ApplyError, RollbackReport, Transaction, apply};
use crate::check::{CheckError, FactsFrom, build_plan, load_and_validate_with, validate_loaded};
use crate::collect::Collected;
use crate::diagnostic::Source;
use crate::kernel::KernelFacts;
use crate::output::{OutputDir, OutputError};
use crate::plan::{Plan, TOP_LEVEL_LOCK};
use crate::recipe::{Chain, OnAbort, TemplateError};
use crate::record::{CpuCapture, Readers, RecordError, Recorder};
use crate::report::JsonReport;
use crate::tracefs::{Instance, Tracefs, TracefsError, WriteMode};
use crate::validate::{MaxLatencyAt, ValidRecipe};
use crate::workload::{Workload, WorkloadExit, WorkloadRecord, process_start_time};

mod flight;
mod output;
mod rotate;
mod stop;

pub use flight::{ArmedFlight, CollectBootOptions, collect_boot};
pub(crate) use output::keeps_max_trace;
use output::{capture_meta, observe_irreversible, save_tables, save_tracer_files, write_output};
pub(crate) use rotate::Pieces;
use stop::Signals;
pub use stop::{Signal, StopReason};

/// What `run` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The recipe file.
    pub recipe: PathBuf,
    /// `--set KEY=VALUE` overrides.
    pub sets: Vec<String>,
    /// `-o DIR`: output folder (overrides `[output] dir`).
    pub out_dir: Option<PathBuf>,
    /// `-- COMMAND ARGS...` (overrides `[scope] command`).
    pub command: Vec<String>,
    /// `--bundle`: also pack the output folder into `DIR.tar.zst`.
    pub bundle: bool,
    /// `--duration`, `--buffer-size-kb` (override recipe keys, validated like them).
    pub overrides: crate::overrides::Overrides,
    /// `rerun`: the recipe is a stored run's `recipe.source.toml` (or
    /// `recipe.toml`), its `extends` chain read from the run's
    /// `recipe.base-N.toml` ([`Chain::Stored`]); its `[output] dir` is not used,
    /// since a bundle does not choose where a root process writes (`out_dir` or
    /// the default folder instead).
    pub stored: bool,
    /// The recipe already rendered (`rerun`: the render whose commands were
    /// listed for consent, [`crate::replay::Replay::rendered`]): run as it is,
    /// not rendered again from `recipe` and `sets`.
    pub rendered: Option<crate::recipe::LoadedRecipe>,
}

/// Progress of a run, for the CLI to show.
#[derive(Debug, Clone)]
pub enum RunEvent {
    /// tracefs was mounted by us.
    Mounted(String),
    /// The plan has kernel effects no undo reverses: each one sentence,
    /// said before anything is applied.
    Irreversible(Vec<String>),
    /// Every step was applied to the instance.
    Applied {
        /// Instance directory.
        instance: String,
        /// Number of steps.
        steps: usize,
    },
    /// Tracing is on; recording until the given condition.
    Recording {
        /// Human description of what ends the run.
        until: String,
    },
    /// What was captured so far; sent about four times a second while recording.
    Progress(Progress),
    /// Recording stopped.
    Stopped {
        /// Why.
        reason: StopReason,
    },
    /// Everything the run changed in tracefs was undone.
    RolledBack,
    /// Some undos failed: tracefs is not as it was, and the journal is kept for
    /// `trace-recipe reset`.
    RollbackIncomplete {
        /// Each failed undo.
        failures: Vec<String>,
        /// The journal kept.
        journal: Option<PathBuf>,
    },
    /// A journal of an earlier run that died with its guard was rolled back.
    Swept(String),
    /// The run waits for something another run holds.
    Waiting(String),
}

/// A snapshot of a recording in progress.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Time since tracing was turned on.
    pub elapsed: Duration,
    /// The recipe's `duration`, if it has one.
    pub duration: Option<Duration>,
    /// Raw ring-buffer bytes written to disk so far, all CPUs.
    pub bytes: u64,
    /// Events the kernel recorded so far (per_cpu/cpuN/stats `entries` + `read events`).
    pub events: u64,
    /// Events lost so far (stats `overrun` + `dropped events`).
    pub lost: u64,
}

/// How a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// tracefs could not be found, mounted or written.
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    /// The recipe could not be loaded or is invalid for this kernel (the
    /// check stage); nothing was written.
    #[error(transparent)]
    Check(#[from] CheckError),
    /// A step was refused; everything before it was undone.
    #[error("{}", apply_message(.error, .text))]
    Apply {
        /// The failure.
        error: Box<ApplyError>,
        /// The recipe text, for the line of the failing step.
        text: Source,
    },
    /// The workload could not be started.
    #[error("cannot start the workload `{command}`: {source}")]
    Workload {
        /// The command.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// Recording failed (tracefs was rolled back).
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The output folder could not be written.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// summary.txt's template failed (trace.dat and report.json were written).
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The trace.dat we wrote could not be read back.
    #[error("cannot read back {}: {source}", .path.display())]
    ReadBack {
        /// The file.
        path: PathBuf,
        /// Why.
        source: tracedat::Error,
    },
    /// The journal could not be written, so nothing was applied.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The rollback guard could not be started, so nothing was applied.
    #[error("cannot start the rollback guard: {0}")]
    Guard(std::io::Error),
    /// The bundle could not be written (the output folder was).
    #[error(transparent)]
    Bundle(Box<crate::bundle::BundleError>),
    /// The flight recorder (`[buffer] persistent`, `collect-boot`) cannot go on.
    #[error("{0}")]
    Boot(String),
    /// A `[collect]` command failed and the recipe says `required = true`.
    #[error("a required [collect] command failed: {0}")]
    Collect(String),
    /// A signal arrived before tracing started; everything was undone.
    #[error("interrupted by signal {} before recording started; tracefs was rolled back", .0.number())]
    Interrupted(Signal),
    /// `[output] rotate` cannot cut this run in pieces of its size (nothing
    /// was recorded).
    #[error("{0}")]
    Rotate(String),
    /// The run failed and its rollback is incomplete: undos failed, the journal is
    /// kept, and `trace-recipe reset` finishes the job.
    #[error("{error}\n{}", incomplete_message(.rollback))]
    RollbackIncomplete {
        /// What failed first.
        error: Box<RunError>,
        /// What the rollback did.
        rollback: RollbackReport,
    },
}

impl RunError {
    /// The rollback report when this error left tracefs not as it was.
    pub fn incomplete_rollback(&self) -> Option<&RollbackReport> {
        match self {
            RunError::RollbackIncomplete { rollback, .. } => Some(rollback),
            RunError::Apply { error, .. } if !error.rollback.complete() => Some(&error.rollback),
            _ => None,
        }
    }
}

/// "rollback incomplete: ..." with each failed undo and the journal to `reset`.
pub fn incomplete_message(r: &RollbackReport) -> String {
    let mut msg = format!(
        "rollback incomplete: {} of {} undo{} failed; tracefs is not as it was",
        r.failures.len(),
        r.undone,
        if r.undone == 1 { "" } else { "s" }
    );
    for e in &r.failures {
        msg.push_str(&format!("\n  = undo failed: {e}"));
    }
    match &r.journal_kept {
        Some(j) => msg.push_str(&format!(
            "\n  = journal kept: {}\n  = help: run `trace-recipe reset` to finish the rollback",
            j.display()
        )),
        None => msg.push_str("\n  = help: run `trace-recipe reset`, then `trace-recipe status`"),
    }
    msg
}

fn apply_message(e: &ApplyError, source: &Source) -> String {
    let place = e
        .step
        .span
        .as_ref()
        .map(|s| format!("{}: ", source.place(s.start)));
    let mut msg = format!("{}{e}", place.unwrap_or_default());
    if e.rollback.complete() {
        msg.push_str("\n  = note: every step already applied was undone; tracefs is as it was");
    } else {
        msg.push('\n');
        msg.push_str(&incomplete_message(&e.rollback));
    }
    msg
}

/// A finished run.
#[derive(Debug)]
pub struct RunOutcome {
    /// The output folder.
    pub dir: PathBuf,
    /// The report (as written to report.json).
    pub report: JsonReport,
    /// The report rendered through the summary template (summary.txt).
    pub summary: String,
    /// `[output] max_lost_percent`, when the run lost more than that.
    pub lost_limit_exceeded: Option<f64>,
    /// The signal that ended the run, if one did.
    pub signal: Option<Signal>,
    /// What the rollback did; when incomplete, the journal is kept for `trace-recipe reset`.
    pub rollback: RollbackReport,
    /// The bundle written beside the output folder (`--bundle`, `[output] bundle`).
    pub bundle: Option<PathBuf>,
    /// The output file system filled up while recording: trace.dat holds what
    /// fitted and is marked truncated ([`tracedat::TRUNCATED_STAT`]).
    pub output_full: bool,
}

/// The id of the calling thread (`gettid(2)`).
fn gettid() -> u32 {
    rustix::thread::gettid().as_raw_nonzero().get() as u32
}

/// Phase 1: everything known before tracefs is touched. The recipe is valid,
/// the output folder exists, the plan is built and the workload (if any) is
/// started held.
struct Prepared {
    signals: Signals,
    tracefs: Tracefs,
    valid: ValidRecipe,
    source: Source,
    facts: KernelFacts,
    started_at: jiff::Timestamp,
    out: OutputDir,
    plan: Plan,
    workload: Option<Workload>,
    /// Whether to pack the output folder into a bundle at the end (`--bundle`,
    /// `[output] bundle`).
    bundle: bool,
    /// /proc/kallsyms, read in the background meanwhile (it takes the kernel
    /// about 0.1 s to list); [`Armed::record`] waits for it before tracing starts.
    kallsyms: Option<std::thread::JoinHandle<Vec<u8>>>,
    /// The per-CPU reader threads, idle until [`Armed::record`] starts them.
    readers: Option<Readers>,
    /// The guard, started before the plan is built so that its pid is in it;
    /// told the run is over by [`Armed::teardown`] (or when arming fails).
    guard: Option<Guard>,
    /// The run's own thread ids (this thread, the guard, the readers):
    /// excluded from the trace unless `[scope] include_self`.
    own_tids: Vec<u32>,
    /// The `[collect] before` commands, as run.
    collected: Vec<Collected>,
}

/// Phase 2: the plan is applied. Owns everything that must be undone or ended:
/// the transaction (and its journal), the guard, the recorder once started, the
/// workload and the top-level lock. [`Armed::teardown`] is the one way out.
struct Armed {
    p: Prepared,
    tx: Transaction,
    workload_record: Option<PathBuf>,
    _top_level_lock: Option<std::fs::File>,
    recorder: Option<Recorder>,
    workload_exit: Option<WorkloadExit>,
    /// Whether tracing was turned on: a run that fails before is refused
    /// ([`refused`]), one that fails after keeps what it wrote.
    tracing_on: bool,
    /// /proc/kallsyms as read before tracing started.
    kallsyms: Vec<u8>,
    /// The raw files' folder, once recording started.
    raw_dir: PathBuf,
    /// The pieces of a rotating run (`[output] rotate`).
    rotation: Option<rotate::Rotation>,
}

/// How recording ended (what [`Armed::record`] returns when it got that far).
struct Stopped {
    reason: StopReason,
    ended_at: jiff::Timestamp,
    elapsed: Duration,
    header_page: String,
}

/// Phase 3: tracefs is rolled back (or the report says what is left), the
/// workload has ended and the guard is gone. What was captured is on disk.
struct RolledBack {
    p: Prepared,
    rollback: RollbackReport,
    /// The irreversible effects declared, and any observed that were not.
    irreversible: Vec<crate::tracefs::Irreversible>,
    workload_exit: Option<WorkloadExit>,
    /// The recording, or why it failed / never started.
    captured: Result<(Stopped, Vec<CpuCapture>, CaptureMeta), RunError>,
    /// Whether tracing was turned on ([`Armed::tracing_on`]).
    tracing_on: bool,
    /// The pieces written while recording (`[output] rotate`).
    rotation: Option<rotate::Rotation>,
}

fn prepare(opts: &RunOptions, on_event: &mut impl FnMut(RunEvent)) -> Result<Prepared, RunError> {
    let signals = Signals::register();
    let (tracefs, mounted) = Tracefs::locate_or_mount()?;
    if let Some(m) = mounted {
        on_event(RunEvent::Mounted(m));
    }
    tracefs.require_root()?;
    for swept in sweep(Path::new(JOURNAL_DIR)) {
        on_event(RunEvent::Swept(match swept {
            Ok(s) => s.to_string(),
            Err(e) => format!("cannot roll back a stale journal: {e}"),
        }));
    }
    let started_at = jiff::Timestamp::now();
    let started = started_at.strftime("%Y%m%d-%H%M%S").to_string();
    let (valid, source, facts) = match &opts.rendered {
        Some(loaded) => {
            validate_loaded(FactsFrom::Live(&tracefs), loaded.clone(), &opts.overrides)?
        }
        None => load_and_validate_with(
            FactsFrom::Live(&tracefs),
            &opts.recipe,
            &opts.sets,
            &started,
            &opts.overrides,
            match opts.stored {
                true => Chain::Stored,
                false => Chain::Extends,
            },
        )?,
    };
    let recipe = &valid.recipe;

    let command = if opts.command.is_empty() {
        recipe.scope.command.clone()
    } else {
        opts.command.clone()
    };
    if let Some(program) = command.first()
        && !crate::workload::resolvable(program)
    {
        return Err(RunError::Workload {
            command: command.join(" "),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such program (not a file, and not found in PATH)",
            ),
        });
    }
    let out_dir = opts
        .out_dir
        .clone()
        .or_else(|| match opts.stored {
            true => None,
            false => recipe.output.dir.as_ref().map(PathBuf::from),
        })
        .unwrap_or_else(|| {
            PathBuf::from("trace-recipe-out").join(format!("{}-{started}", recipe.name))
        });
    let out = OutputDir::create(&out_dir, tracefs.root())?;
    let started = start(opts, &tracefs, &valid, &source, &facts, &command, &out)
        .map_err(|e| refused(&out, e))?;
    Ok(Prepared {
        signals,
        tracefs,
        valid,
        source,
        facts,
        started_at,
        out,
        plan: started.plan,
        workload: started.workload,
        bundle: started.bundle,
        kallsyms: started.kallsyms,
        readers: Some(started.readers),
        guard: Some(started.guard),
        own_tids: started.own_tids,
        collected: started.collected,
    })
}

/// What [`start`] set going for a run whose output folder exists.
struct Started {
    plan: Plan,
    workload: Option<Workload>,
    bundle: bool,
    kallsyms: Option<std::thread::JoinHandle<Vec<u8>>>,
    readers: Readers,
    guard: Guard,
    own_tids: Vec<u32>,
    collected: Vec<Collected>,
}

/// The rest of [`prepare`], once the output folder `out` exists: the run's
/// files written into it, `[collect] before` run, the workload started held,
/// the readers, the kallsyms reader and the guard started, the plan built.
/// On failure, whatever it started is ended; the caller discards `out`.
fn start(
    opts: &RunOptions,
    tracefs: &Tracefs,
    valid: &ValidRecipe,
    source: &Source,
    facts: &KernelFacts,
    command: &[String],
    out: &OutputDir,
) -> Result<Started, RunError> {
    let recipe = &valid.recipe;
    // The recipe as rendered, and as written with every file it extends, for the
    // bundle's manifest and for `rerun`.
    for (name, bytes) in crate::recipe::run_files(source, recipe) {
        out.write_new(&name, &bytes)?;
    }
    // The kernel's facts this recipe was validated against, for `check --facts`
    // on another host and for `diff`.
    out.write_new("facts.json", crate::output::to_json(facts).as_bytes())?;
    // `[collect] before`: context from before anything is applied.
    let collected = crate::collect::run_phase(&recipe.collect, "before", out.path());
    if let Some(f) = required_failure(recipe, &collected) {
        return Err(RunError::Collect(f));
    }

    let bundle = opts.bundle || valid.recipe.output.bundle == Some(true);
    let marker = tracefs.path(&crate::plan::marker_file(
        valid,
        &crate::plan::instance_name(&valid.recipe.name, std::process::id()),
    ));
    let mut workload = match command.is_empty() {
        true => None,
        false => Some(
            Workload::spawn_held(command, &marker).map_err(|e| RunError::Workload {
                command: command.join(" "),
                source: e,
            })?,
        ),
    };
    // Every thread and process of the run exists before the plan is built, so
    // that the plan can keep them all out of the trace (its filters name
    // threads): the per-CPU readers wait idle, the guard waits on its pipe.
    let end_workload = |w: &mut Option<Workload>| {
        if let Some(w) = w.as_mut() {
            let _ = w.terminate(Duration::from_secs(1));
        }
    };
    let readers = match Readers::spawn(&facts.cpus) {
        Ok(r) => r,
        Err(e) => {
            end_workload(&mut workload);
            return Err(e.into());
        }
    };
    let kallsyms = std::thread::Builder::new()
        .name("kallsyms".into())
        .spawn(|| crate::tracefs::read_all(Path::new("/proc/kallsyms")).unwrap_or_default())
        .ok();
    // The guard ends the workload's group if the run dies without rolling back.
    let orphan = workload
        .as_ref()
        .filter(|_| valid.recipe.scope.on_abort == OnAbort::Kill)
        .map(Workload::pid);
    let guard = match Guard::spawn(
        &path_for(Path::new(JOURNAL_DIR), std::process::id()),
        orphan,
    ) {
        Ok(g) => g,
        Err(e) => {
            end_workload(&mut workload);
            return Err(RunError::Guard(e));
        }
    };
    let mut own_tids = vec![gettid(), guard.pid()];
    own_tids.extend(readers.tids());
    let plan = build_plan(valid, workload.as_ref().map(Workload::pid), &own_tids);
    Ok(Started {
        plan,
        workload,
        bundle,
        kallsyms,
        readers,
        guard,
        own_tids,
        collected,
    })
}

/// A run refused before it recorded anything leaves nothing behind: its
/// output folder is discarded ([`OutputDir::discard`]), so that a retry with
/// the same `-o` works, unless tracefs could not be rolled back: the folder
/// (the recipe, the kernel's facts, `[collect]` output) then stays beside the
/// kept journal, as evidence for `reset`. The one place a refused run's output
/// goes; returns `e`.
fn refused(out: &OutputDir, e: RunError) -> RunError {
    if e.incomplete_rollback().is_none() {
        out.discard();
    }
    e
}

/// The first failed `[collect]` command, as text, when the recipe requires them all.
fn required_failure(recipe: &crate::recipe::Recipe, collected: &[Collected]) -> Option<String> {
    if !recipe.collect.required {
        return None;
    }
    collected.iter().find_map(|c| {
        let e = c.error.as_ref()?;
        Some(format!("`{}`: {e}", c.command.join(" ")))
    })
}

impl Prepared {
    /// Ends the held workload of a run that stops before anything was applied,
    /// and tells the guard the run is over.
    fn end_workload(&mut self) {
        if let Some(w) = self.workload.as_mut() {
            let _ = w.terminate(Duration::from_secs(1));
        }
        if let Some(g) = self.guard.take() {
            let _ = g.done();
        }
    }

    /// Takes the top-level lock when needed, starts the guard, creates the
    /// journal and applies the plan. On failure everything done is undone and
    /// the workload ended before returning.
    fn arm(mut self, on_event: &mut impl FnMut(RunEvent)) -> Result<Armed, RunError> {
        let top_level_lock = if self.plan.touches_top_level {
            match lock_top_level(on_event) {
                Ok(l) => Some(l),
                Err(e) => {
                    self.end_workload();
                    return Err(refused(&self.out, e));
                }
            }
        } else {
            None
        };
        let me = std::process::id();
        let journal_dir = Path::new(JOURNAL_DIR);
        let workload_record = match &self.workload {
            Some(w) => {
                let record = WorkloadRecord {
                    run_pid: me,
                    run_start_time: process_start_time(me).unwrap_or(0),
                    pid: w.pid(),
                    start_time: process_start_time(w.pid()).unwrap_or(0),
                    command: w.command.clone(),
                    end_on_abort: self.valid.recipe.scope.on_abort == OnAbort::Kill,
                };
                match record.write(journal_dir) {
                    Ok(p) => Some(p),
                    Err(source) => {
                        self.end_workload();
                        let e = RunError::Journal(JournalError::Io {
                            path: WorkloadRecord::path(journal_dir, me),
                            source,
                        });
                        return Err(refused(&self.out, e));
                    }
                }
            }
            None => None,
        };
        // The guard started before anything is written (in `prepare`): whenever
        // the run dies after this point, someone is watching for the journal.
        // Refused before recording: nothing of the run stays, its output folder
        // included, so that a retry with the same `-o` works ([`refused`]).
        let abort = |p: &mut Prepared, e: RunError| {
            p.end_workload();
            if let Some(r) = &workload_record {
                let _ = std::fs::remove_file(r);
            }
            refused(&p.out, e)
        };
        let header = Header {
            format: "trace-recipe-journal".into(),
            version: JOURNAL_VERSION,
            pid: me,
            start_time: process_start_time(me).unwrap_or(0),
            tracefs: self.tracefs.root().to_path_buf(),
            instance: self.plan.instance.clone(),
        };
        let journal = match Journal::create(journal_dir, &header) {
            Ok(j) => j,
            Err(e) => return Err(abort(&mut self, e.into())),
        };
        let declared = crate::plan::irreversible(&self.plan, &self.facts.top_buffer);
        if !declared.is_empty() {
            on_event(RunEvent::Irreversible(
                declared.iter().map(|i| i.effect.clone()).collect(),
            ));
        }
        let tx = match apply(&self.tracefs, &self.plan, Some(journal), |_| {}) {
            Ok(tx) => tx,
            Err(error) => {
                let text = self.source.clone();
                return Err(abort(&mut self, RunError::Apply { error, text }));
            }
        };
        on_event(RunEvent::Applied {
            instance: self.plan.instance.clone(),
            steps: self.plan.steps.len(),
        });
        Ok(Armed {
            p: self,
            tx,
            workload_record,
            _top_level_lock: top_level_lock,
            recorder: None,
            workload_exit: None,
            tracing_on: false,
            kallsyms: Vec::new(),
            raw_dir: PathBuf::new(),
            rotation: None,
        })
    }
}

impl Armed {
    /// Starts the recorder, turns tracing on, releases the workload and waits for
    /// a reason to stop. Leaves tracing on: [`Armed::teardown`] turns it off.
    fn record(&mut self, on_event: &mut impl FnMut(RunEvent)) -> Result<Stopped, RunError> {
        if let Some(sig) = self.p.signals.get() {
            return Err(RunError::Interrupted(sig));
        }
        let valid = &self.p.valid;
        let inst = self.tx.instance();
        let header_page = inst.read("events/header_page")?;
        let subbuf = tracedat::subbuffer_size(header_page.as_bytes()).unwrap_or(4096);
        let raw_dir = self.p.out.raw_dir()?;
        self.raw_dir = raw_dir.clone();
        let readers = self.p.readers.take().ok_or_else(|| RecordError::Read {
            cpu: 0,
            source: std::io::Error::other("the readers were started already"),
        })?;
        // The kallsyms reader ends before tracing starts: listing kallsyms
        // keeps a CPU busy for a tenth of a second or more, load that would
        // otherwise land in the recording (and whose thread would be one
        // more to keep out of it).
        if let Some(t) = self.p.kallsyms.take() {
            self.kallsyms = t.join().unwrap_or_default();
        }
        // A latency tracer's worst case is in the max buffer the kernel swaps
        // the live one into: the live buffer is read only once tracing is off.
        let at_end = valid
            .tracer
            .as_ref()
            .is_some_and(|t| output::keeps_max_trace(&t.name));
        let mut rotation = match &valid.recipe.output.rotate {
            Some(r) => {
                let ring_kb = inst
                    .read("buffer_size_kb")?
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0);
                let cpus = self.p.facts.cpus.len() as u64;
                // What a piece holds besides the pages, measured on the metadata as it reads now.
                let meta = capture_meta(
                    inst,
                    &self.p.plan,
                    valid,
                    &self.p.facts,
                    &header_page,
                    &[],
                    self.kallsyms.clone(),
                )?;
                let meta_bytes = rotate::metadata_bytes(&meta);
                Some(
                    rotate::Rotation::new(r, cpus, ring_kb, meta_bytes)
                        .map_err(RunError::Rotate)?,
                )
            }
            None => None,
        };
        let recorder = self
            .recorder
            .insert(readers.start(inst, subbuf, &raw_dir, at_end)?);
        if let Some(rot) = &rotation {
            recorder.rotate_at(rot.threshold);
        }
        crate::fault::fail_at("tracing_on").map_err(|source| TracefsError::Write {
            path: inst.path("tracing_on"),
            value: "1".into(),
            source,
            error_log: None,
        })?;
        inst.write("tracing_on", "1", WriteMode::Replace)?;
        self.tracing_on = true;
        // A latency tracer measures from the moment it is set, whatever the
        // instance's tracing_on says (kernel/trace/trace_sched_wakeup.c
        // enables itself on the top level's state): a latency seen before
        // recording started updated tracing_max_latency and swapped an empty
        // live buffer into the max buffer, and no smaller latency of the run
        // would replace that empty trace. Reset the maximum now that the
        // buffer records, so the run's worst case comes with its trace. The
        // write was planned before the tracer (and journaled there when the
        // file is global).
        if let Some(at) = valid.tracer.as_ref().and_then(|t| t.max_latency) {
            let file = match at {
                MaxLatencyAt::Instance => inst.clone(),
                MaxLatencyAt::TopLevel => Instance::top(inst.tracefs()),
            };
            file.write("tracing_max_latency", "0", WriteMode::Replace)?;
        }
        let t0 = Instant::now();
        let workload_fd = match self.p.workload.as_mut() {
            Some(w) => {
                // A failed release means the stub already died; its exit is seen below.
                let _ = w.release();
                w.pidfd().ok()
            }
            None => None,
        };
        on_event(RunEvent::Recording {
            until: until_text(valid, self.p.workload.is_some()),
        });
        crate::fault::kill_at("recording");
        const TICK: Duration = Duration::from_millis(20);
        let mut last_progress = Instant::now();
        let reason = loop {
            if let Some(sig) = self.p.signals.get() {
                break StopReason::Signal(sig);
            }
            if let Some(w) = self.p.workload.as_mut()
                && let Ok(Some(exit)) = w.try_wait()
            {
                self.workload_exit = Some(exit);
                break StopReason::WorkloadExited;
            }
            if valid.duration.is_some_and(|d| t0.elapsed() >= d) {
                break StopReason::Duration;
            }
            if valid.recipe.stop.on_traceoff
                && inst.read("tracing_on").is_ok_and(|v| v.trim() == "0")
            {
                break StopReason::Traceoff;
            }
            if valid
                .max_size_bytes
                .is_some_and(|max| recorder.bytes() >= max)
            {
                break StopReason::MaxSize;
            }
            if recorder.output_full() {
                break StopReason::OutputFull;
            }
            if let Some(rot) = rotation.as_mut() {
                let source = rotate::PieceSource {
                    inst,
                    plan: &self.p.plan,
                    valid,
                    facts: &self.p.facts,
                    header_page: &header_page,
                    kallsyms: &self.kallsyms,
                    out: &self.p.out,
                    raw_dir: &raw_dir,
                };
                rot.tick(recorder, &self.p.out, |piece, name| source.cut(piece, name))?;
            }
            if last_progress.elapsed() >= Duration::from_millis(250) {
                last_progress = Instant::now();
                let (events, lost) = recorder.live_counts();
                on_event(RunEvent::Progress(Progress {
                    elapsed: t0.elapsed(),
                    duration: valid.duration,
                    bytes: recorder.bytes(),
                    events,
                    lost,
                }));
            }
            // Until the next check: the workload's exit (or a signal) wakes us at once.
            let tick = valid
                .duration
                .map_or(TICK, |d| d.saturating_sub(t0.elapsed()).min(TICK));
            match &workload_fd {
                Some(fd) => {
                    crate::workload::wait_exit(fd, tick);
                }
                None => std::thread::sleep(tick),
            }
        };
        self.rotation = rotation;
        Ok(Stopped {
            reason,
            ended_at: jiff::Timestamp::now(),
            elapsed: t0.elapsed(),
            header_page,
        })
    }

    /// The one teardown, whatever stopped the run (the workload's exit, the
    /// duration, a traceoff, the size limit, a signal, or an error after apply):
    /// tracing off, the workload ended, the recorder drained, the kernel's tables
    /// saved, the transaction rolled back, the guard told the run is done.
    fn teardown(
        mut self,
        recorded: Result<Stopped, RunError>,
        on_event: &mut impl FnMut(RunEvent),
    ) -> RolledBack {
        let tracefs = self.p.tracefs.clone();
        let inst = self.tx.instance().clone();
        let off = match self.recorder.is_some() {
            true => inst.write("tracing_on", "0", WriteMode::Replace),
            false => Ok(()),
        };
        if let Ok(s) = &recorded {
            on_event(RunEvent::Stopped { reason: s.reason });
        }
        if let Some(w) = self.p.workload.as_mut()
            && self.workload_exit.is_none()
        {
            self.workload_exit = w.terminate(Duration::from_secs(2)).ok();
        }
        // Everything read from the instance is read before it is removed.
        let drained = self.recorder.take().map(Recorder::finish);
        let kallsyms = std::mem::take(&mut self.kallsyms);
        let captured = recorded.and_then(|stopped| {
            let mut captures = drained.unwrap_or_else(|| Ok(Vec::new()))?;
            if let Some(rot) = self.rotation.as_mut() {
                let source = rotate::PieceSource {
                    inst: &inst,
                    plan: &self.p.plan,
                    valid: &self.p.valid,
                    facts: &self.p.facts,
                    header_page: &stopped.header_page,
                    kallsyms: &kallsyms,
                    out: &self.p.out,
                    raw_dir: &self.raw_dir,
                };
                rot.settle(&mut captures, &self.raw_dir, &self.p.out, |piece, name| {
                    source.cut(piece, name)
                })?;
            }
            let meta = capture_meta(
                &inst,
                &self.p.plan,
                &self.p.valid,
                &self.p.facts,
                &stopped.header_page,
                &captures,
                kallsyms,
            )?;
            save_tables(&inst, &self.p.plan, &self.p.valid, &self.p.out)?;
            save_tracer_files(&tracefs, &inst, &self.p.valid, &self.p.out)?;
            off?;
            Ok((stopped, captures, meta))
        });
        let rollback = self.tx.rollback();
        let irreversible = observe_irreversible(&tracefs, &self.p.plan, &self.p.facts);
        if let Some(r) = &self.workload_record {
            let _ = std::fs::remove_file(r);
        }
        // A guard that cannot be told is ended by its pipe closing when it drops:
        // it then finds no journal, or the kept one, which `reset` also handles.
        if let Some(g) = self.p.guard.take() {
            let _ = g.done();
        }
        if rollback.complete() {
            on_event(RunEvent::RolledBack);
        } else {
            on_event(RunEvent::RollbackIncomplete {
                failures: rollback.failures.iter().map(|e| e.to_string()).collect(),
                journal: rollback.journal_kept.clone(),
            });
        }
        RolledBack {
            p: self.p,
            rollback,
            irreversible,
            workload_exit: self.workload_exit,
            captured,
            tracing_on: self.tracing_on,
            rotation: self.rotation,
        }
    }
}

/// Runs a recipe end to end: [`Prepared`] → [`Armed`] → [`RolledBack`] → output.
/// Every way out after apply goes through [`Armed::teardown`]; its rollback
/// report decides whether the run ends in [`RunError::RollbackIncomplete`].
/// A recipe with `[buffer] persistent` arms its instance and returns at once
/// ([`Ran::Armed`]).
pub fn run(opts: &RunOptions, mut on_event: impl FnMut(RunEvent)) -> Result<Ran, RunError> {
    let prepared = prepare(opts, &mut on_event)?;
    if prepared.valid.persistent.is_some() {
        return flight::arm(prepared, &mut on_event).map(Ran::Armed);
    }
    record_run(prepared, on_event).map(|o| Ran::Recorded(Box::new(o)))
}

/// What [`run`] did.
#[derive(Debug)]
pub enum Ran {
    /// Recorded, rolled back and wrote its output folder.
    Recorded(Box<RunOutcome>),
    /// Armed a flight recorder and left it armed.
    Armed(ArmedFlight),
}

/// [`run`] of a recipe that records.
fn record_run(
    prepared: Prepared,
    mut on_event: impl FnMut(RunEvent),
) -> Result<RunOutcome, RunError> {
    let mut armed = prepared.arm(&mut on_event)?;
    let recorded = armed.record(&mut on_event);
    let rolled_back = armed.teardown(recorded, &mut on_event);
    let RolledBack {
        p,
        rollback,
        irreversible,
        workload_exit,
        captured,
        tracing_on,
        rotation,
    } = rolled_back;
    for i in irreversible.iter().filter(|i| !i.declared) {
        on_event(RunEvent::Irreversible(vec![format!(
            "{} (seen after the run, not declared before it)",
            i.effect
        )]));
    }
    let result = captured.and_then(|c| write_output(&p, c, workload_exit, irreversible, rotation));
    match (result, rollback.complete()) {
        (Ok(mut outcome), _) => {
            outcome.rollback = rollback;
            Ok(outcome)
        }
        (Err(error), true) if !tracing_on => Err(refused(&p.out, error)),
        (Err(error), true) => Err(error),
        (Err(error), false) => Err(RunError::RollbackIncomplete {
            error: Box::new(error),
            rollback,
        }),
    }
}

/// Takes [`TOP_LEVEL_LOCK`], waiting (and saying so) while another run holds it.
fn lock_top_level(on_event: &mut impl FnMut(RunEvent)) -> Result<std::fs::File, RunError> {
    use rustix::fs::{FlockOperation, flock};
    let io = |source: std::io::Error| {
        RunError::Journal(JournalError::Io {
            path: PathBuf::from(TOP_LEVEL_LOCK),
            source,
        })
    };
    std::fs::create_dir_all(JOURNAL_DIR).map_err(io)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(TOP_LEVEL_LOCK)
        .map_err(io)?;
    if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
        on_event(RunEvent::Waiting(format!(
            "another trace-recipe run holds top-level tracefs state (max_graph_depth / tracing_thresh); waiting for it to end ({TOP_LEVEL_LOCK})"
        )));
        flock(&file, FlockOperation::LockExclusive).map_err(|e| io(e.into()))?;
    }
    Ok(file)
}

fn until_text(valid: &ValidRecipe, has_workload: bool) -> String {
    let mut parts = Vec::new();
    if has_workload {
        parts.push("the workload exits".to_string());
    }
    if let Some(d) = &valid.recipe.duration {
        parts.push(format!("{d} pass"));
    }
    if valid.recipe.stop.on_traceoff {
        parts.push("a traceoff trigger fires".into());
    }
    if let Some(mb) = valid.recipe.stop.max_size_mb {
        parts.push(format!("{mb} MiB are captured"));
    }
    parts.push("Ctrl-C".into());
    parts.join(", or ")
}
