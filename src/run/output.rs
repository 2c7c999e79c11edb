//! The output stage of a session: what a run keeps. Before the rollback,
//! [`capture_meta`] reads what trace.dat needs besides the pages (formats,
//! header page, clock, kallsyms), [`save_tables`] the kernel's hist tables
//! and snapshot and [`save_tracer_files`] what the tracers kept; after it, [`observe_irreversible`] sees what the run could
//! not undo and [`write_output`] writes trace.dat and the reports into the
//! output folder ([`crate::output::OutputDir`]).

use std::collections::BTreeMap;

use tracedat::{CaptureMeta, CpuData, TraceFile};

use super::{Prepared, RunError, RunOutcome, Stopped, required_failure};
use crate::analysis::{Selection, analyze, analyze_pieces};
use crate::apply::RollbackReport;
use crate::kernel::KernelFacts;
use crate::output::OutputDir;
use crate::plan::Plan;
use crate::recipe::Template;
use crate::record::CpuCapture;
use crate::report::tracer::{MAX_LATENCY_FILE, MAX_TRACE_FILE, STACK_MAX_FILE, STACK_TRACE_FILE};
use crate::report::{JsonReport, RecorderInfo, RunInfo, ScopeInfo, WorkloadInfo, render_html};
use crate::tracefs::{Instance, Tracefs, TracefsError};
use crate::validate::{MaxLatencyAt, ValidRecipe};
use crate::workload::{Workload, WorkloadExit};

/// Writes trace.dat and the reports of a rolled-back run.
pub(super) fn write_output(
    p: &Prepared,
    (stopped, captures, meta): (Stopped, Vec<CpuCapture>, CaptureMeta),
    workload_exit: Option<WorkloadExit>,
    irreversible: Vec<crate::tracefs::Irreversible>,
    rotation: Option<super::rotate::Rotation>,
) -> Result<RunOutcome, RunError> {
    let (recipe, out) = (&p.valid.recipe, &p.out);
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
    // A recording cut short by a full file system is turned into trace.dat
    // in place: each piece copied is freed from its raw file.
    let output_full = captures.iter().any(|c| c.truncated);
    let dat_path = out.write_trace_dat(dat_name, &meta, &cpus, output_full)?;
    out.remove_raw()?;
    // A rotating run's report covers every piece kept, trace.dat last.
    let (paths, pieces) = match (rotation, &recipe.output.rotate) {
        (Some(rot), Some(r)) => {
            let last = std::fs::metadata(&dat_path).map_or(0, |m| m.len());
            let (paths, pieces) = rot.finish(out, last, r)?;
            (paths, Some(pieces))
        }
        _ => (vec![dat_path.clone()], None),
    };
    let files = paths
        .iter()
        .map(|p| {
            TraceFile::open(p).map_err(|source| RunError::ReadBack {
                path: p.clone(),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let read_back = |source| RunError::ReadBack {
        path: dat_path.clone(),
        source,
    };
    let file = files
        .last()
        .ok_or_else(|| read_back(tracedat::Error::Capture("no trace.dat".into())))?;
    // The answers the kernel does not compute are computed in the pass.
    let trace_answers = (p.valid.answers.iter())
        .filter(|a| a.engine == crate::answer::EngineUsed::Trace)
        .map(|a| a.answer.clone())
        .collect();
    let selection = Selection::for_file(file).with_answers(trace_answers);
    let analysis = analyze_pieces(&files, &selection)
        .unwrap_or_else(|| analyze(file, &selection))
        .map_err(read_back)?;
    let recorder_info = RecorderInfo {
        bytes: captures.iter().map(|c| c.bytes).sum(),
        cpu_s: captures.iter().map(|c| c.cpu_time.as_secs_f64()).sum(),
        excluded_tids: match p.valid.self_exclusion {
            crate::validate::SelfExclusion::Off => Vec::new(),
            _ => p.own_tids.clone(),
        },
    };
    let info = RunInfo {
        recipe: recipe.name.clone(),
        kernel_release: p.facts.release.clone(),
        started: p.started_at.to_string(),
        ended: stopped.ended_at.to_string(),
        duration_s: stopped.elapsed.as_secs_f64(),
        stop_reason: stopped.reason.to_string(),
        recorder: recorder_info,
        scope: ScopeInfo::of(recipe, p.workload.as_ref().map(Workload::pid)),
        workload: p
            .workload
            .as_ref()
            .zip(workload_exit)
            .map(|(w, exit)| WorkloadInfo {
                command: w.command.clone(),
                pid: w.pid(),
                exit,
            }),
    };
    let mut report = JsonReport::new(file, &analysis, Some(&info));
    report.irreversible = irreversible;
    report.pieces = pieces;
    report.tracer = crate::report::tracer::tracer_report(out.path(), &p.valid, &analysis.noise);
    report.stack_tracer = crate::report::tracer::stack_report(out.path(), &p.valid);
    report.hist = crate::report::tracer::hist_report(out.path(), &p.valid);
    report
        .answers
        .extend(kernel_answers(out.path(), &p.valid, &p.plan.probe_group));
    // In the recipe's order, the kernel's and the trace's answers alike.
    let declared = |name: &str| p.valid.answers.iter().position(|a| a.answer.name == name);
    report
        .answers
        .sort_by(|a, _, b, _| declared(a).cmp(&declared(b)));
    report.function_profile = crate::report::tracer::function_profile(out.path());
    // `[collect] after`: context from after the rollback.
    report.collected = p.collected.clone();
    report.params = p.valid.params.clone();
    report.collected.extend(crate::collect::run_phase(
        &recipe.collect,
        "after",
        out.path(),
    ));
    report.expectations = crate::report::check_all(
        p.valid
            .expectations
            .iter()
            .map(|e| (e.that.as_str(), &e.expr)),
        &report,
    );
    // func-args / funcgraph-args: the traced functions' prototypes, for
    // the listing (the kernel's BTF is readable now, not where the file goes).
    if (p.valid.tracer.as_ref()).is_some_and(|t| crate::funcargs::records_args(&t.options)) {
        match crate::funcargs::prototypes_text(file, std::path::Path::new(crate::btf::VMLINUX)) {
            Ok(text) => {
                out.write_new(crate::funcargs::FILE, text.as_bytes())?;
            }
            Err(e) => crate::untrusted::teprintln!(
                "note: the listing will print no function arguments: {} (the kernel's BTF, {}): {e}",
                crate::funcargs::FILE,
                crate::btf::VMLINUX
            ),
        }
    }
    drop(files);
    let reports = recipe
        .output
        .reports
        .clone()
        .unwrap_or_else(|| vec!["summary".into(), "json".into()]);
    if reports.iter().any(|r| r == "json") {
        out.write_new("report.json", crate::output::to_json(&report).as_bytes())?;
    }
    // Folded stacks for flamegraph.pl, inferno or speedscope.
    if let Some(s) = report.stacks.as_ref().filter(|s| !s.folded.is_empty()) {
        out.write_new("stacks.folded", s.folded.text().as_bytes())?;
    }
    if let Some(f) = &report.funcgraph_folded {
        out.write_new("funcgraph.folded", f.text().as_bytes())?;
    }
    if reports.iter().any(|r| r == "html") {
        out.write_new("report.html", render_html(&report).as_bytes())?;
    }
    let summary = p
        .valid
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
    let bundle = if p.bundle {
        Some(
            crate::bundle::pack(out.path(), None, false)
                .map_err(|e| RunError::Bundle(Box::new(e)))?,
        )
    } else {
        None
    };
    if let Some(f) = required_failure(recipe, &report.collected) {
        return Err(RunError::Collect(f));
    }
    let lost_limit_exceeded = recipe
        .output
        .max_lost_percent
        .filter(|max| report.lost_percent > *max);
    Ok(RunOutcome {
        dir: out.path().to_path_buf(),
        report,
        summary,
        lost_limit_exceeded,
        signal: p.signals.get(),
        rollback: RollbackReport::default(),
        bundle,
        output_full,
    })
}

/// The irreversible effects of the run: those [`crate::plan::irreversible`]
/// declares for `plan`, plus the allocation of the top-level ring buffer when it
/// happened without being declared (seen in `buffer_size_kb`, which `facts`
/// read before the run).
pub(super) fn observe_irreversible(
    tracefs: &Tracefs,
    plan: &Plan,
    facts: &KernelFacts,
) -> Vec<crate::tracefs::Irreversible> {
    let mut out = crate::plan::irreversible(plan, &facts.top_buffer);
    let now = tracefs
        .read("buffer_size_kb")
        .ok()
        .and_then(|t| crate::kernel::TopBuffer::parse(&t));
    if let (Some(kb), Some(now)) = (facts.top_buffer.expanded_size_kb, now)
        && now.expanded_size_kb.is_none()
        && out.is_empty()
    {
        out.push(crate::plan::top_buffer_allocated(
            &facts.top_buffer,
            kb,
            false,
        ));
    }
    out
}

/// Saves what the kernel aggregated in the instance before it goes away: the
/// table of every `hist` trigger as `hist/SYSTEM-EVENT.txt`, the `hist` file
/// of each answer the kernel computes as `answers/NAME.hist.txt`, and the
/// snapshot buffer as `snapshot.txt` when a snapshot trigger was set.
pub(super) fn save_tables(
    inst: &Instance,
    the_plan: &crate::plan::Plan,
    valid: &ValidRecipe,
    out: &OutputDir,
) -> Result<(), RunError> {
    crate::fault::fail_at("tables").map_err(|source| TracefsError::Read {
        path: inst.path("events"),
        source,
    })?;
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
        let table = inst.read_bytes(&format!("events/{dir_sys}/{ev}/hist"))?;
        out.write_new(&crate::report::tracer::hist_file(event), &table)?;
    }
    let names = crate::answer::kernel::RunNames {
        group: &the_plan.probe_group,
    };
    let kernel: Vec<_> = valid
        .answers
        .iter()
        .filter_map(|a| Some((&a.answer.name, a.kernel.as_ref()?)))
        .collect();
    if !kernel.is_empty() {
        out.create_dir("answers")?;
    }
    for (name, k) in kernel {
        let table = inst.read_bytes(&format!("{}/hist", k.table_dir(&names)))?;
        out.write_new(&answer_hist_file(name), &table)?;
    }
    if valid.triggers.iter().any(|t| t.action == "snapshot")
        && let Ok(snap) = inst.read_bytes("snapshot")
    {
        out.write_new("snapshot.txt", &snap)?;
    }
    Ok(())
}

/// The file, in the output folder, holding the `hist` file of answer `name`
/// computed by the kernel, as read before rollback.
fn answer_hist_file(name: &str) -> String {
    format!("answers/{name}.hist.txt")
}

/// The tables of the answers the kernel computed, from the `hist` files
/// [`save_tables`] saved in `dir` (an answer whose file is missing is left out).
fn kernel_answers(
    dir: &std::path::Path,
    valid: &ValidRecipe,
    group: &str,
) -> BTreeMap<String, crate::answer::AnswerTable> {
    let names = crate::answer::kernel::RunNames { group };
    valid
        .answers
        .iter()
        .filter_map(|a| {
            let k = a.kernel.as_ref()?;
            let text =
                crate::report::tracer::read_small(&dir.join(answer_hist_file(&a.answer.name)))?;
            let top = a
                .answer
                .top
                .map_or(crate::answer::DEFAULT_TOP, |t| t as usize);
            Some((a.answer.name.clone(), k.read(&names, &text, &a.answer, top)))
        })
        .collect()
}

/// Folder of the output folder holding the tracer's own files, as read.
const TRACER_DIR: &str = "tracer";

/// Tracers whose `trace` shows their max buffer (the worst case's trace):
/// those that set `use_max_tr` (kernel/trace/trace_irqsoff.c, trace_sched_wakeup.c).
const MAX_TRACE_TRACERS: &[&str] = crate::validate::MAX_LATENCY_TRACERS.split_at(6).0;

/// Whether tracer `name` keeps the trace of its worst case in the max buffer,
/// which its `trace` file then shows (see [`MAX_TRACE_TRACERS`]).
pub(crate) fn keeps_max_trace(name: &str) -> bool {
    MAX_TRACE_TRACERS.contains(&name)
}

/// Reads what the run's tracer, the function profiler and the stack tracer
/// kept (see [`crate::report::tracer`]) into `out`, before the instance `inst` goes away and the rollback resets them.
pub(super) fn save_tracer_files(
    tracefs: &Tracefs,
    inst: &Instance,
    valid: &ValidRecipe,
    out: &OutputDir,
) -> Result<(), RunError> {
    if valid.stack.is_some() {
        out.create_dir("stack")?;
        out.write_new(STACK_MAX_FILE, &tracefs.read_bytes("stack_max_size")?)?;
        out.write_new(STACK_TRACE_FILE, &tracefs.read_bytes("stack_trace")?)?;
    }
    let Some(t) = &valid.tracer else {
        return Ok(());
    };
    if t.function_profile {
        out.create_dir("profile")?;
        let stat = tracefs.path("trace_stat");
        let entries = std::fs::read_dir(&stat).map_err(|source| TracefsError::Read {
            path: stat.clone(),
            source,
        })?;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name
                .strip_prefix("function")
                .is_some_and(|n| n.parse::<u32>().is_ok())
            {
                let table = tracefs.read_bytes(&format!("trace_stat/{name}"))?;
                out.write_new(&format!("profile/{name}.txt"), &table)?;
            }
        }
    }
    let Some(at) = t.max_latency else {
        return Ok(());
    };
    out.create_dir(TRACER_DIR)?;
    let max = match at {
        MaxLatencyAt::Instance => inst.read_bytes("tracing_max_latency")?,
        MaxLatencyAt::TopLevel => tracefs.read_bytes("tracing_max_latency")?,
    };
    out.write_new(MAX_LATENCY_FILE, &max)?;
    if keeps_max_trace(&t.name) {
        out.write_new(MAX_TRACE_FILE, &inst.read_bytes("trace")?)?;
    }
    Ok(())
}

/// Whether trace.dat needs /proc/kallsyms: when the trace holds kernel code
/// addresses a reader turns into symbols, that is stack traces (a trigger, an
/// event's `stacktrace`, or the `stacktrace` option that takes one after every
/// event), a tracer other than nop, probes, or an event whose print format
/// prints a code pointer
/// (`%ps`, `%pS`, `%pB`, `%pf`, `%pF`). Without them the kernel's symbol list
/// (megabytes) is left out.
fn needs_kallsyms(valid: &ValidRecipe, formats: &BTreeMap<String, Vec<Vec<u8>>>) -> bool {
    let code_pointer = |f: &[u8]| {
        f.windows(3)
            .any(|w| w[0] == b'%' && w[1] == b'p' && b"sSBfF".contains(&w[2]))
    };
    valid.events.iter().any(|e| e.stacktrace)
        || valid.triggers.iter().any(|t| t.action == "stacktrace")
        || valid.tracer.as_ref().is_some_and(|t| {
            t.name != "nop" || t.options.iter().any(|(o, on)| *on && o == "stacktrace")
        })
        || !valid.probes.is_empty()
        || formats.values().flatten().any(|f| code_pointer(f))
}

/// Everything besides the pages that goes into trace.dat, read right after
/// recording (before rollback: the instance's header_page and trace_clock).
/// Event formats, printk_formats and saved_cmdlines are the top level's.
pub(super) fn capture_meta(
    inst: &Instance,
    the_plan: &crate::plan::Plan,
    valid: &ValidRecipe,
    facts: &KernelFacts,
    header_page: &str,
    captures: &[crate::record::CpuCapture],
    kallsyms: Vec<u8>,
) -> Result<CaptureMeta, RunError> {
    let tracefs = inst.tracefs();
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
    let kallsyms = match needs_kallsyms(valid, &systems) {
        true => kallsyms,
        false => Vec::new(),
    };
    let kallsyms_useful = kallsyms
        .split(|&b| b == b'\n')
        .take(100)
        .any(|l| l.iter().take_while(|&&b| b != b' ').any(|&b| b != b'0'));
    let u = rustix::system::uname();
    Ok(CaptureMeta {
        header_page: header_page.as_bytes().to_vec(),
        header_event: inst.read_bytes("events/header_event")?,
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
        trace_clock: inst.read("trace_clock")?,
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
                    .map(|c| match c.truncated {
                        true => format!("{}{}", c.stats, tracedat::TRUNCATED_STAT),
                        false => c.stats.clone(),
                    })
                    .unwrap_or_default()
            })
            .collect(),
    })
}
