//! The flight recorder (`[buffer] persistent = "NAME"`): `run` arms the
//! boot-mapped instance NAME and exits, leaving it recording; after the next
//! boot `collect-boot` turns what it holds into a run folder and releases it.
//! The arm record is [`crate::flight`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    Armed, Prepared, RunError, RunEvent, RunOutcome, StopReason, Stopped, refused, write_output,
};
use crate::apply::journal::Undo;
use crate::check::{FactsFrom, load_and_validate_with};
use crate::flight::{ArmRecord, instance_state, shift_kallsyms, state_dir, text_delta};
use crate::output::OutputDir;
use crate::plan::Plan;
use crate::recipe::Chain;
use crate::record::Readers;
use crate::tracefs::{Instance, Tracefs, WriteMode};

/// A flight recorder armed by `run`.
#[derive(Debug)]
pub struct ArmedFlight {
    /// The boot-mapped instance, e.g. `boot_map`.
    pub instance: String,
    /// The run folder (recipe, facts, plan, arm record).
    pub dir: PathBuf,
    /// The copy of the arm record `collect-boot` finds by itself, or why it
    /// could not be written (then `--armed DIR` names the run folder).
    pub state: Result<PathBuf, String>,
}

/// Arms the instance of `p`'s `[buffer] persistent`: the plan's steps
/// written into it through the journal (a failure undoes them), its old
/// contents cleared, tracing on; then the journal is dropped, so the steps stay
/// when the run exits, and the arm record is written (run folder and state dir).
pub(super) fn arm(
    mut p: Prepared,
    on_event: &mut impl FnMut(RunEvent),
) -> Result<ArmedFlight, RunError> {
    let name = p
        .valid
        .persistent
        .as_ref()
        .map(|(n, _)| n.clone())
        .unwrap_or_default();
    // Arming clears the instance: not while it holds an armed boot's record
    // that no one collected.
    if let Ok(r) = ArmRecord::read(&state_dir(&name))
        && r.boot_id != crate::flight::boot_id()
    {
        let e = RunError::Boot(format!(
            "instances/{name} holds the trace of boot {} (armed by recipe `{}`), not collected yet: arming it again would clear it\n  = help: run `trace-recipe collect-boot -o DIR` first",
            crate::untrusted::escape(&r.boot_id),
            crate::untrusted::escape(&r.recipe)
        ));
        p.end_workload();
        return Err(refused(&p.out, e));
    }
    let before = instance_state(&p.tracefs, &name);
    let armed = p.arm(on_event)?;
    let inst = armed.tx.instance().clone();
    let done = (|| -> Result<(), RunError> {
        // The last boot's record, if any, goes: the recorder starts empty.
        inst.write("trace", "", WriteMode::Replace)?;
        inst.write("tracing_on", "1", WriteMode::Replace)?;
        Ok(())
    })();
    if let Err(e) = done {
        return Err(undo_arming(armed, e, on_event));
    }
    let Armed { mut p, tx, .. } = armed;
    let mut undo = tx.keep();
    undo.push(Undo::Write {
        file: format!("instances/{name}/tracing_on"),
        value: before
            .get("tracing_on")
            .map_or("1", |v| v.trim())
            .to_string(),
        append: false,
    });
    if let Some(g) = p.guard.take() {
        let _ = g.done();
    }
    p.readers = None;
    let kallsyms = p
        .kallsyms
        .take()
        .and_then(|t| t.join().ok())
        .unwrap_or_default();
    let modules = std::fs::read("/proc/modules").unwrap_or_default();
    let recipe = std::fs::read(p.out.path().join("recipe.toml")).unwrap_or_default();
    let record = ArmRecord::new(&name, &p.valid.recipe.name, before, undo);
    let plan: String = p.plan.steps.iter().map(|s| format!("{s}\n")).collect();
    p.out.write_new("plan.txt", plan.as_bytes())?;
    record
        .save(p.out.path(), &kallsyms, &modules, &recipe)
        .map_err(|source| {
            RunError::Output(crate::output::OutputError::Io {
                path: p.out.path().join("arm.json"),
                source,
            })
        })?;
    let state = state_dir(&name);
    let state = record
        .save(&state, &kallsyms, &modules, &recipe)
        .map(|()| state.clone())
        .map_err(|e| format!("{}: {e}", state.display()));
    Ok(ArmedFlight {
        instance: name,
        dir: p.out.path().to_path_buf(),
        state,
    })
}

/// Undoes an arming that failed after its plan was applied; the error to return.
fn undo_arming(armed: Armed, e: RunError, on_event: &mut impl FnMut(RunEvent)) -> RunError {
    let rolled = armed.teardown(Err(e), on_event);
    let e = match rolled.captured {
        Err(e) => e,
        Ok(_) => RunError::Boot("arming failed".into()),
    };
    match rolled.rollback.complete() {
        true => refused(&rolled.p.out, e),
        false => RunError::RollbackIncomplete {
            error: Box::new(e),
            rollback: rolled.rollback,
        },
    }
}

/// What `collect-boot` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct CollectBootOptions {
    /// `--instance NAME`: the boot-mapped instance (default: the arm record's,
    /// else the kernel's only one).
    pub instance: Option<String>,
    /// `--armed DIR`: the arm record (a run folder of the arming `run`, or its
    /// state dir); default the state dir of the instance, when it has one.
    pub armed: Option<PathBuf>,
    /// `-o DIR`: the run folder to write.
    pub out_dir: PathBuf,
    /// `--keep`: leave the instance as it is (armed) rather than releasing it.
    pub keep: bool,
}

/// A `collect-boot` done.
#[derive(Debug)]
pub struct CollectedBoot {
    /// The run folder written (trace.dat, report.json, summary.txt).
    pub outcome: RunOutcome,
    /// The instance read.
    pub instance: String,
    /// Whether it was released to its state before arming.
    pub released: bool,
}

/// Reads the last boot's events from a boot-mapped instance into a run folder
/// (trace.dat, report.json, summary.txt headed by which boot it was), with
/// the armed boot's kallsyms (from the arm record, else this boot's moved by
/// `last_boot_info`'s text delta), then releases the instance unless `keep`.
pub fn collect_boot(
    opts: &CollectBootOptions,
    mut on_event: impl FnMut(RunEvent),
) -> Result<CollectedBoot, RunError> {
    let signals = super::stop::Signals::register();
    let (tracefs, mounted) = Tracefs::locate_or_mount()?;
    if let Some(m) = mounted {
        on_event(RunEvent::Mounted(m));
    }
    tracefs.require_root()?;
    let boot = crate::kernel::boot_instances(&tracefs);
    let armed_dir = opts.armed.clone().or_else(|| {
        let name = opts.instance.as_ref().or(boot.first())?;
        Some(state_dir(name)).filter(|d| d.join("arm.json").exists())
    });
    let record = armed_dir
        .as_deref()
        .map(ArmRecord::read)
        .transpose()
        .map_err(RunError::Boot)?;
    let name = match (&opts.instance, &record, boot.as_slice()) {
        (Some(n), _, _) => n.clone(),
        (None, Some(r), _) => r.instance.clone(),
        (None, None, [one]) => one.clone(),
        (None, None, []) => return Err(no_instance(&tracefs, "boot_map")),
        (None, None, many) => {
            return Err(RunError::Boot(format!(
                "this kernel has several boot-mapped instances ({}): name one with `--instance NAME`",
                many.join(", ")
            )));
        }
    };
    if !boot.contains(&name) {
        return Err(no_instance(&tracefs, &name));
    }
    let inst = Instance::named(&tracefs, &name);
    let last_boot_info = inst.read("last_boot_info").unwrap_or_default();
    let delta = text_delta(&last_boot_info);
    let started_at = jiff::Timestamp::now();
    let started = started_at.strftime("%Y%m%d-%H%M%S").to_string();
    // The armed recipe (for the events' formats and the report), else one
    // naming every event of this kernel.
    let fallback = std::env::temp_dir().join(format!(
        "trace-recipe-collect-boot-{}.toml",
        std::process::id()
    ));
    let recipe_path = match &armed_dir {
        Some(d) if record.is_some() => d.join("recipe.toml"),
        _ => {
            let text = format!(
                "name = \"boot-{name}\"\n\n[[events]]\nname = \"*:*\"\n\n[buffer]\npersistent = \"{name}\"\n"
            );
            std::fs::write(&fallback, text).map_err(|source| {
                RunError::Output(crate::output::OutputError::Io {
                    path: fallback.clone(),
                    source,
                })
            })?;
            fallback.clone()
        }
    };
    let loaded = load_and_validate_with(
        FactsFrom::Live(&tracefs),
        &recipe_path,
        &[],
        &started,
        &Default::default(),
        Chain::Extends,
    );
    let _ = std::fs::remove_file(&fallback);
    let (valid, source, facts) = loaded?;
    let out = OutputDir::create(&opts.out_dir, tracefs.root())?;
    let read = read_boot(&inst, &facts, &out);
    let (captures, header_page) = match read {
        Ok(r) => r,
        Err(e) => return Err(refused(&out, e)),
    };
    for (file, bytes) in crate::recipe::run_files(&source, &valid.recipe) {
        out.write_new(&file, &bytes)?;
    }
    out.write_new("facts.json", crate::output::to_json(&facts).as_bytes())?;
    let kallsyms = match armed_dir
        .as_deref()
        .filter(|_| record.is_some())
        .map(crate::flight::armed_kallsyms)
        .transpose()
        .map_err(RunError::Boot)?
        .flatten()
    {
        Some(k) => k,
        None => shift_kallsyms(
            &crate::tracefs::read_all(Path::new("/proc/kallsyms")).unwrap_or_default(),
            delta.unwrap_or(0),
        ),
    };
    if let Some(d) = armed_dir.as_deref().filter(|_| record.is_some()) {
        for (from, to) in [
            ("arm.json", "arm.json"),
            ("kallsyms", "kallsyms.last-boot"),
            ("modules", "modules.last-boot"),
        ] {
            if let Ok(Some(b)) =
                crate::untrusted::read_optional_in(d, from, crate::untrusted::Kind::Facts)
            {
                out.write_new(to, &b)?;
            }
        }
    }
    let plan = Plan {
        instance: inst.dir(),
        probe_group: String::new(),
        touches_top_level: false,
        steps: Vec::new(),
    };
    let mut meta = super::capture_meta(
        &inst,
        &plan,
        &valid,
        &facts,
        &header_page,
        &captures,
        kallsyms.clone(),
    )?;
    // Always the last boot's symbols: nothing of this boot could name its
    // addresses (a marker's caller, a pointer printed with %ps) later.
    meta.kallsyms = kallsyms;
    let p = Prepared {
        signals,
        tracefs: tracefs.clone(),
        valid,
        source,
        facts,
        started_at,
        out,
        plan,
        workload: None,
        bundle: false,
        kallsyms: None,
        readers: None,
        guard: None,
        own_tids: Vec::new(),
        collected: Vec::new(),
    };
    let stopped = Stopped {
        reason: StopReason::BootEnded,
        ended_at: jiff::Timestamp::now(),
        elapsed: Duration::ZERO,
        header_page,
    };
    let mut outcome = write_output(&p, (stopped, captures, meta), None, Vec::new(), None)?;
    let head = boot_heading(&name, record.as_ref(), &last_boot_info, delta);
    outcome.summary = format!("{head}\n{}", outcome.summary);
    let summary = p.out.path().join("summary.txt");
    if summary.exists() {
        std::fs::write(&summary, &outcome.summary).map_err(|source| {
            RunError::Output(crate::output::OutputError::Io {
                path: summary.clone(),
                source,
            })
        })?;
    }
    let released = !opts.keep;
    if released {
        release(&tracefs, &inst, record.as_ref())?;
        if let Some(d) = armed_dir.filter(|d| *d == state_dir(&name)) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    Ok(CollectedBoot {
        outcome,
        instance: name,
        released,
    })
}

/// The per-CPU buffers of `inst`, drained into `out`'s raw folder, and its
/// `events/header_page`.
fn read_boot(
    inst: &Instance,
    facts: &crate::kernel::KernelFacts,
    out: &OutputDir,
) -> Result<(Vec<crate::record::CpuCapture>, String), RunError> {
    let header_page = inst.read("events/header_page")?;
    let subbuf = tracedat::subbuffer_size(header_page.as_bytes()).unwrap_or(4096);
    let raw_dir = out.raw_dir()?;
    let recorder = Readers::spawn(&facts.cpus)?.start(inst, subbuf, &raw_dir, false)?;
    std::thread::sleep(Duration::from_millis(200));
    Ok((recorder.finish()?, header_page))
}

/// The instance back as it was before arming (the arm record's undos, in
/// reverse), or without one: every event off and its filter cleared.
fn release(tracefs: &Tracefs, inst: &Instance, record: Option<&ArmRecord>) -> Result<(), RunError> {
    match record {
        Some(r) => {
            for u in r.undo.iter().rev() {
                u.perform(tracefs)?;
            }
        }
        None => inst.write("events/enable", "0", WriteMode::Replace)?,
    }
    Ok(())
}

/// "this kernel has no boot-mapped instance NAME", with the command line that makes one.
fn no_instance(tracefs: &Tracefs, name: &str) -> RunError {
    let cpus = tracefs.list("per_cpu").len();
    RunError::Boot(format!(
        "this kernel has no boot-mapped instance `{}` (instances/NAME/last_boot_info): there is no last boot's trace to collect\n  = help: a flight recorder needs Linux 6.12+ booted with `{}`, armed by `trace-recipe run` of a recipe with `[buffer] persistent`",
        crate::untrusted::escape(name),
        crate::validate::boot_command_line(name, None, cpus)
    ))
}

/// The summary's first lines: whose trace this is.
fn boot_heading(
    name: &str,
    record: Option<&ArmRecord>,
    last_boot_info: &str,
    delta: Option<i64>,
) -> String {
    let esc = |s: &str| crate::untrusted::escape(s).into_owned();
    let mut h = format!(
        "flight recorder: the previous boot's trace, from boot-mapped instance `{name}` (this boot: {})\n",
        crate::flight::boot_id()
    );
    match record {
        Some(r) => h.push_str(&format!(
            "armed by recipe `{}` in boot {} (kernel {}) at {}\n",
            esc(&r.recipe),
            esc(&r.boot_id),
            esc(&r.release),
            esc(&r.armed_at)
        )),
        None => {
            h.push_str("no arm record: symbols from this boot's kallsyms moved by the text delta\n")
        }
    }
    h.push_str(&format!(
        "last_boot_info: {}\n",
        last_boot_info
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    ));
    if let Some(d) = delta {
        h.push_str(&format!("text delta: {d} bytes\n"));
    }
    h
}
