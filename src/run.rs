//! One `run`: render → validate → plan → apply → record → stop → roll back →
//! trace.dat + reports. The only place that strings the stages together.
//!
//! Signals (SIGINT, SIGTERM, SIGHUP) never end the process here: they set the
//! reason the run stops, and the normal path (tracing off, drain, roll back, write
//! the output) runs as for any other ending.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tracedat::{CaptureMeta, CpuData, TraceFile};

use crate::analysis::{Selection, analyze};
use crate::apply::guard::Guard;
use crate::apply::journal::{
    Header, JOURNAL_DIR, JOURNAL_VERSION, Journal, JournalError, path_for, process_start_time,
};
use crate::apply::sweep::sweep;
use crate::apply::{ApplyError, apply};
use crate::diagnostic::{Diagnostic, Source};
use crate::kernel::KernelFacts;
use crate::output::{OutputDir, OutputError};
use crate::plan::{TOP_LEVEL_LOCK, instance_name, plan, probe_group};
use crate::recipe::{Builtins, LoadError, load};
use crate::record::{RecordError, Recorder, subbuf_size};
use crate::report::{
    JsonReport, RecorderInfo, RunInfo, Template, TemplateError, WorkloadInfo, render_html,
};
use crate::tracefs::{Tracefs, TracefsError, WriteMode};
use crate::validate::{ValidRecipe, validate};
use crate::workload::Workload;

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
}

/// Progress of a run, for the CLI to show.
#[derive(Debug, Clone)]
pub enum RunEvent {
    /// tracefs was mounted by us.
    Mounted(String),
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
        reason: String,
    },
    /// Everything the run changed in tracefs was undone.
    RolledBack,
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
    /// The recipe could not be read.
    #[error(transparent)]
    Load(LoadError),
    /// The recipe is invalid for this kernel; nothing was written.
    #[error("{}", crate::diagnostic::render_all(.diagnostics, .text).trim_end())]
    Invalid {
        /// Text the diagnostics point into.
        text: Source,
        /// Every problem.
        diagnostics: Vec<Diagnostic>,
    },
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
    /// A signal arrived before tracing started; everything was undone.
    #[error("interrupted by signal {0} before recording started; tracefs was rolled back")]
    Interrupted(i32),
}

fn apply_message(e: &ApplyError, source: &Source) -> String {
    let place = e
        .step
        .span
        .as_ref()
        .map(|s| format!("{}: ", source.place(s.start)));
    let mut msg = format!("{}{e}", place.unwrap_or_default());
    msg.push_str("\n  = note: every step already applied was undone; tracefs is as it was");
    for u in &e.undo_failures {
        msg.push_str(&format!(
            "\n  = warning: undo failed: {u} (run `trace-recipe reset`)"
        ));
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
    pub signal: Option<i32>,
    /// Undo steps that failed (tracefs may need `trace-recipe reset`).
    pub undo_failures: Vec<TracefsError>,
    /// The bundle written beside the output folder (`--bundle`, `[output] bundle`).
    pub bundle: Option<PathBuf>,
}

/// Registers SIGINT, SIGTERM and SIGHUP to set the returned cell to their number.
fn register_signals() -> Arc<AtomicUsize> {
    let cell = Arc::new(AtomicUsize::new(0));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        let _ = signal_hook::flag::register_usize(sig, cell.clone(), sig as usize);
    }
    cell
}

/// Validates a recipe against the live kernel: the shared first half of `check` and `run`.
pub fn load_and_validate(
    tracefs: &Tracefs,
    path: &Path,
    sets: &[String],
    started: &str,
) -> Result<(ValidRecipe, Source, KernelFacts), RunError> {
    load_and_validate_with(tracefs, path, sets, started, &Default::default())
}

/// [`load_and_validate`] with command-line `overrides` of recipe keys applied
/// before validation; problems of an overridden key name its flag.
pub fn load_and_validate_with(
    tracefs: &Tracefs,
    path: &Path,
    sets: &[String],
    started: &str,
    overrides: &crate::overrides::Overrides,
) -> Result<(ValidRecipe, Source, KernelFacts), RunError> {
    let mut loaded = load(
        path,
        sets,
        &Builtins {
            started: started.to_string(),
        },
    )
    .map_err(|e| match e {
        LoadError::Invalid {
            text: source,
            diagnostics,
        } => RunError::Invalid {
            text: source,
            diagnostics,
        },
        other => RunError::Load(other),
    })?;
    let flag_problems = overrides.apply(&mut loaded);
    let facts = KernelFacts::read(tracefs)?;
    match validate(&loaded, &facts) {
        Ok(valid) if flag_problems.is_empty() => Ok((valid, loaded.source, facts)),
        Ok(_) => Err(RunError::Invalid {
            text: loaded.source,
            diagnostics: flag_problems,
        }),
        Err(diagnostics) => Err(RunError::Invalid {
            text: loaded.source,
            diagnostics: [flag_problems, overrides.name_flags(diagnostics)].concat(),
        }),
    }
}

/// Runs a recipe end to end. See the module docs for the order of things.
pub fn run(opts: &RunOptions, mut on_event: impl FnMut(RunEvent)) -> Result<RunOutcome, RunError> {
    let signal = register_signals();
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
    let (valid, source, facts) = load_and_validate_with(
        &tracefs,
        &opts.recipe,
        &opts.sets,
        &started,
        &opts.overrides,
    )?;
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
        .or_else(|| recipe.output.dir.as_ref().map(PathBuf::from))
        .unwrap_or_else(|| {
            PathBuf::from("trace-recipe-out").join(format!("{}-{started}", recipe.name))
        });
    let out = OutputDir::create(&out_dir, tracefs.root())?;
    // The recipe as rendered, and as written with every file it extends, for the
    // bundle's manifest and for `rerun`.
    for (name, bytes) in crate::recipe::run_files(&source, recipe) {
        out.write_new(&name, &bytes)?;
    }

    let mut workload = match command.is_empty() {
        true => None,
        false => Some(
            Workload::spawn_held(&command).map_err(|e| RunError::Workload {
                command: command.join(" "),
                source: e,
            })?,
        ),
    };
    let mut pids = recipe.scope.pids.clone();
    pids.extend(workload.as_ref().map(Workload::pid));
    let the_plan = plan(
        &valid,
        &instance_name(&recipe.name, std::process::id()),
        &probe_group(std::process::id()),
        &pids,
        &crate::workload::pids_with_comm(&recipe.scope.comms),
    );
    let _top_level_lock = if the_plan.touches_top_level {
        Some(lock_top_level(&mut on_event)?)
    } else {
        None
    };
    // The guard starts first: whenever the run dies after this point, someone
    // is watching for the journal.
    let guard = Guard::spawn(&path_for(Path::new(JOURNAL_DIR), std::process::id()))
        .map_err(RunError::Guard)?;
    let journal = Journal::create(
        Path::new(JOURNAL_DIR),
        &Header {
            format: "trace-recipe-journal".into(),
            version: JOURNAL_VERSION,
            pid: std::process::id(),
            start_time: process_start_time(std::process::id()).unwrap_or(0),
            tracefs: tracefs.root().to_path_buf(),
            instance: the_plan.instance.clone(),
        },
    )?;
    let tx = match apply(&tracefs, &the_plan, Some(journal), |_| {}) {
        Ok(tx) => tx,
        Err(error) => {
            if let Some(w) = workload.as_mut() {
                let _ = w.terminate(Duration::from_secs(1));
            }
            return Err(RunError::Apply {
                error,
                text: source,
            });
        }
    };
    on_event(RunEvent::Applied {
        instance: the_plan.instance.clone(),
        steps: the_plan.steps.len(),
    });
    let inst = the_plan.instance.as_str();
    let interrupted = signal.load(Ordering::SeqCst);
    if interrupted != 0 {
        if let Some(w) = workload.as_mut() {
            let _ = w.terminate(Duration::from_secs(1));
        }
        drop(tx.rollback());
        on_event(RunEvent::RolledBack);
        return Err(RunError::Interrupted(interrupted as i32));
    }

    let header_page = tracefs.read(&format!("{inst}/events/header_page"))?;
    let subbuf = subbuf_size(&header_page).unwrap_or(4096);
    let raw_dir = out.raw_dir()?;
    let recorder = Recorder::start(&tracefs, inst, &facts.cpus, subbuf, &raw_dir)?;
    tracefs.write(&format!("{inst}/tracing_on"), "1", WriteMode::Replace, inst)?;
    let t0 = Instant::now();
    if let Some(w) = workload.as_mut() {
        // A failed release means the stub already died; its exit is seen below.
        let _ = w.release();
    }
    on_event(RunEvent::Recording {
        until: until_text(&valid, workload.is_some()),
    });

    let mut workload_exit = None;
    let mut last_progress = Instant::now();
    let stop_reason = loop {
        let sig = signal.load(Ordering::SeqCst);
        if sig != 0 {
            break format!("signal {}", signal_name(sig as i32));
        }
        if let Some(w) = workload.as_mut()
            && let Ok(Some(exit)) = w.try_wait()
        {
            workload_exit = Some(exit);
            break "workload exited".to_string();
        }
        if valid.duration.is_some_and(|d| t0.elapsed() >= d) {
            break "duration".to_string();
        }
        if recipe.stop.on_traceoff
            && tracefs
                .read(&format!("{inst}/tracing_on"))
                .is_ok_and(|v| v.trim() == "0")
        {
            break "traceoff (tracing_on dropped to 0)".to_string();
        }
        if valid
            .max_size_bytes
            .is_some_and(|max| recorder.bytes() >= max)
        {
            break "max_size_mb".to_string();
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
        std::thread::sleep(Duration::from_millis(20));
    };
    let ended_at = jiff::Timestamp::now();
    let elapsed = t0.elapsed();
    let off = tracefs.write(&format!("{inst}/tracing_on"), "0", WriteMode::Replace, inst);
    on_event(RunEvent::Stopped {
        reason: stop_reason.clone(),
    });
    if let Some(w) = workload.as_mut()
        && workload_exit.is_none()
    {
        workload_exit = w.terminate(Duration::from_secs(2)).ok();
    }
    // Everything read from the instance is read before it is removed.
    let captured = recorder.finish().map(|c| {
        let meta = capture_meta(&tracefs, &the_plan, &valid, &facts, &header_page, &c);
        (c, meta)
    });
    let saved = save_tables(&tracefs, &the_plan, &valid, &out);
    let undo_failures = tx.rollback();
    drop(guard);
    on_event(RunEvent::RolledBack);
    off?;
    saved?;
    let (captures, meta) = captured?;
    let meta = meta?;

    let dat_name = if recipe.output.trace_dat.unwrap_or(true) {
        "trace.dat"
    } else {
        ".trace.dat.tmp"
    };
    let cpus: Vec<CpuData> = captures
        .iter()
        .map(|c| CpuData {
            cpu: c.cpu,
            path: c.path.clone(),
        })
        .collect();
    let dat_path = out.write_trace_dat(dat_name, &meta, &cpus)?;
    out.remove_raw()?;
    let file = TraceFile::open(&dat_path).map_err(|source| RunError::ReadBack {
        path: dat_path.clone(),
        source,
    })?;
    let analysis =
        analyze(&file, &Selection::for_file(&file)).map_err(|source| RunError::ReadBack {
            path: dat_path.clone(),
            source,
        })?;
    let recorder_info = RecorderInfo {
        bytes: captures.iter().map(|c| c.bytes).sum(),
        cpu_s: captures.iter().map(|c| c.cpu_time.as_secs_f64()).sum(),
    };
    let info = RunInfo {
        recipe: recipe.name.clone(),
        kernel_release: facts.release.clone(),
        started: started_at.to_string(),
        ended: ended_at.to_string(),
        duration_s: elapsed.as_secs_f64(),
        stop_reason,
        recorder: recorder_info,
        workload: workload
            .as_ref()
            .zip(workload_exit)
            .map(|(w, exit)| WorkloadInfo {
                command: w.command.clone(),
                pid: w.pid(),
                exit,
            }),
    };
    let mut report = JsonReport::new(&file, &analysis, Some(&info));
    report.expectations = crate::expr::check_all(
        valid
            .expectations
            .iter()
            .map(|e| (e.that.as_str(), &e.expr)),
        &report,
    );
    drop(file);
    let reports = recipe
        .output
        .reports
        .clone()
        .unwrap_or_else(|| vec!["summary".into(), "json".into()]);
    if reports.iter().any(|r| r == "json") {
        let json = serde_json::to_string_pretty(&report).unwrap_or_default();
        out.write_new("report.json", format!("{json}\n").as_bytes())?;
    }
    if reports.iter().any(|r| r == "html") {
        out.write_new("report.html", render_html(&report).as_bytes())?;
    }
    let summary = valid
        .template
        .clone()
        .unwrap_or_else(Template::builtin)
        .render(&report)?;
    if reports.iter().any(|r| r == "summary") {
        out.write_new("summary.txt", summary.as_bytes())?;
    }
    if dat_name != "trace.dat" {
        out.remove(dat_name)?;
    }
    let bundle = if opts.bundle || recipe.output.bundle == Some(true) {
        Some(
            crate::bundle::pack(out.path(), None, false)
                .map_err(|e| RunError::Bundle(Box::new(e)))?,
        )
    } else {
        None
    };
    let sig = signal.load(Ordering::SeqCst);
    let lost_limit_exceeded = recipe
        .output
        .max_lost_percent
        .filter(|max| report.lost_percent > *max);
    Ok(RunOutcome {
        dir: out.path().to_path_buf(),
        report,
        summary,
        lost_limit_exceeded,
        signal: (sig != 0).then_some(sig as i32),
        undo_failures,
        bundle,
    })
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

/// Saves what the kernel aggregated in the instance before it goes away: the
/// table of every `hist` trigger as `hist/SYSTEM-EVENT.txt`, and the snapshot
/// buffer as `snapshot.txt` when a snapshot trigger was set.
fn save_tables(
    tracefs: &Tracefs,
    the_plan: &crate::plan::Plan,
    valid: &ValidRecipe,
    out: &OutputDir,
) -> Result<(), RunError> {
    let inst = the_plan.instance.as_str();
    let mut hist_events: Vec<(&str, bool)> = valid
        .triggers
        .iter()
        .filter(|t| t.action == "hist")
        .filter_map(|t| Some((t.event.as_deref()?, t.on_probe)))
        .collect();
    hist_events.dedup();
    if !hist_events.is_empty() {
        out.create_dir("hist")?;
    }
    for (event, on_probe) in hist_events {
        let (sys, ev) = event.split_once(':').unwrap_or((event, ""));
        let dir_sys = if on_probe {
            the_plan.probe_group.as_str()
        } else {
            sys
        };
        let table = tracefs.read_bytes(&format!("{inst}/events/{dir_sys}/{ev}/hist"))?;
        out.write_new(&format!("hist/{sys}-{ev}.txt"), &table)?;
    }
    if valid.triggers.iter().any(|t| t.action == "snapshot")
        && let Ok(snap) = tracefs.read_bytes(&format!("{inst}/snapshot"))
    {
        out.write_new("snapshot.txt", &snap)?;
    }
    Ok(())
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

/// SIGINT → "SIGINT", etc.
pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        n => n.to_string(),
    }
}

/// Everything besides the pages that goes into trace.dat, read right after
/// recording (before rollback: the instance's header_page and trace_clock).
fn capture_meta(
    tracefs: &Tracefs,
    the_plan: &crate::plan::Plan,
    valid: &ValidRecipe,
    facts: &KernelFacts,
    header_page: &str,
    captures: &[crate::record::CpuCapture],
) -> Result<CaptureMeta, RunError> {
    let mut ftrace_formats = Vec::new();
    if let Ok(rd) = std::fs::read_dir(tracefs.path("events/ftrace")) {
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        for n in names {
            if let Ok(text) = tracefs.read_bytes(&format!("events/ftrace/{n}/format")) {
                ftrace_formats.push(text);
            }
        }
    }
    let mut systems: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    let inst = the_plan.instance.as_str();
    // The run's own probes are stored under `kprobes` / `uprobes`, the names the
    // recipe uses, not under the per-run group, so reports read the same every run.
    for p in &valid.probes {
        let text = tracefs.read_bytes(&format!(
            "events/{}/{}/format",
            the_plan.probe_group, p.event
        ))?;
        systems
            .entry(p.kind.recipe_system().to_string())
            .or_default()
            .push(text);
    }
    let mut names: Vec<&str> = valid.events.iter().map(|e| e.name.as_str()).collect();
    names.extend(valid.triggers.iter().filter_map(|t| t.target.as_deref()));
    names.sort_unstable();
    names.dedup();
    for name in names {
        if let Some((sys, ev)) = name.split_once(':') {
            if sys == "ftrace" {
                continue;
            }
            let text = tracefs.read_bytes(&format!("events/{sys}/{ev}/format"))?;
            systems.entry(sys.to_string()).or_default().push(text);
        }
    }
    let kallsyms =
        crate::tracefs::read_all(std::path::Path::new("/proc/kallsyms")).unwrap_or_default();
    let kallsyms_useful = kallsyms
        .split(|&b| b == b'\n')
        .take(100)
        .any(|l| l.iter().take_while(|&&b| b != b' ').any(|&b| b != b'0'));
    let u = rustix::system::uname();
    Ok(CaptureMeta {
        header_page: header_page.as_bytes().to_vec(),
        header_event: tracefs.read_bytes(&format!("{inst}/events/header_event"))?,
        ftrace_formats,
        event_formats: systems.into_iter().collect(),
        kallsyms: if kallsyms_useful {
            kallsyms
        } else {
            Vec::new()
        },
        printk_formats: tracefs.read_bytes("printk_formats").unwrap_or_default(),
        cmdlines: tracefs.read_bytes("saved_cmdlines").unwrap_or_default(),
        cpu_count: facts.cpus.iter().max().map_or(1, |m| m + 1),
        trace_clock: tracefs.read(&format!("{inst}/trace_clock"))?,
        uname: format!(
            "{} {} {} {}",
            u.sysname().to_string_lossy(),
            u.nodename().to_string_lossy(),
            u.release().to_string_lossy(),
            u.machine().to_string_lossy()
        ),
        version: format!("trace-recipe {}", env!("CARGO_PKG_VERSION")),
        cpu_stats: (0..facts.cpus.iter().max().map_or(1, |m| m + 1))
            .map(|cpu| {
                captures
                    .iter()
                    .find(|c| c.cpu == cpu)
                    .map(|c| c.stats.clone())
                    .unwrap_or_default()
            })
            .collect(),
    })
}
