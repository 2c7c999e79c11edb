//! Validation: every check a recipe can fail, against the recipe alone and against
//! [`KernelFacts`], producing a [`ValidRecipe`] or every problem at once.
//!
//! Passes: names and values → events (globs must match) → fields and operators of
//! each filter against the event's format → triggers (`trigger`: event and
//! function triggers, hist keys) → probes (`probe`: target, fetchargs, filter) →
//! tracer (`tracer`: available_tracers, function lists, options, where it can
//! run) → buffer, clock, CPUs, duration. What this kernel lacks (kprobe_events,
//! the function tracer, hist triggers, a snapshot buffer) is a kernel fault, found
//! before anything is written. A check that needs a fact an earlier
//! check found missing is skipped (no filter check for an event that does not exist).
//! Only [`validate`] builds a [`ValidRecipe`], so nothing unchecked reaches `plan`.
//!
//! Why this file is long (~1,000 lines of code): the resolved types
//! ([`ValidRecipe`] and its parts) and the top-level passes that build them live
//! together so that nothing outside this module can construct a `ValidRecipe`;
//! each pass is a function of its own, in the order above, and the checks with a
//! grammar of their own are the submodules.

/// A key path: `path!("events", i, "filter")`.
macro_rules! path {
    ($($seg:expr),* $(,)?) => { [$($crate::recipe::PathSeg::from($seg)),*] };
}

mod answer;
mod expect;
pub(crate) mod filter;
mod noise;
mod persistent;
pub(crate) use persistent::boot_command_line;
mod probe;
mod scope;
mod tracer;
pub(crate) use tracer::MAX_LATENCY_TRACERS;
mod trigger;

use std::ops::Range;
use std::time::Duration;

use crate::compare::Cmp;
use filter::Op as FilterOp;
pub(crate) use filter::{Predicate, Value as FilterValue};
pub(crate) use probe::ResolvedProbe;
pub use scope::{ElsewhereEvent, KeptBy, ScopeNote, ScopedBy, SubjectEvent};
pub(crate) use scope::{
    and as and_filters, pid_filter, pid_runs, pids_by_filter, scope_note, subjects,
};
use tracedat::{EventFormat, Field};
pub(crate) use tracer::{MaxLatencyAt, ResolvedStack, ResolvedTracer};
pub(crate) use trigger::ResolvedTrigger;

use crate::diagnostic::Diagnostic;
use crate::host::HostFacts;
use crate::kernel::KernelFacts;
use crate::recipe::{LoadedRecipe, PathSeg, Recipe, parse_duration};
use crate::suggest;

pub(crate) use answer::{ResolvedAnswer, field_of};
pub(crate) use expect::ValidExpect;

/// A byte range in the rendered recipe text.
pub(crate) type Span = Option<Range<usize>>;

/// A recipe that passed every check against one kernel's facts.
#[derive(Debug, Clone)]
pub struct ValidRecipe {
    /// The parsed recipe.
    pub recipe: Recipe,
    /// `duration`, when given.
    pub(crate) duration: Option<Duration>,
    /// `[buffer] size_kb` and where it was written.
    pub(crate) buffer_size_kb: Option<(u64, Span)>,
    /// `[buffer] clock`.
    pub(crate) clock: Option<(String, Span)>,
    /// `[buffer] cpus` as the hex mask `tracing_cpumask` takes.
    pub(crate) cpumask: Option<(String, Span)>,
    /// `[buffer] overwrite`.
    pub(crate) overwrite: Option<(bool, Span)>,
    /// `[buffer] persistent`: the boot-mapped instance `run` arms instead of
    /// creating its own (the flight recorder), and where it was written.
    pub(crate) persistent: Option<(String, Span)>,
    /// Every concrete event to enable (globs expanded), in recipe order.
    pub events: Vec<ResolvedEvent>,
    /// Every trigger line to write, in recipe order.
    pub(crate) triggers: Vec<ResolvedTrigger>,
    /// `[[kprobes]]` then `[[uprobes]]`, each defined in the run's probe group.
    pub(crate) probes: Vec<ResolvedProbe>,
    /// `[tracer]`, unless absent or a bare `nop`.
    pub(crate) tracer: Option<ResolvedTracer>,
    /// `[stack]`, unless absent or not enabled.
    pub(crate) stack: Option<ResolvedStack>,
    /// `[stop] max_size_mb` in bytes.
    pub(crate) max_size_bytes: Option<u64>,
    /// `[output] template`, read and compiled (resolved against the recipe's folder).
    pub(crate) template: Option<crate::recipe::Template>,
    /// `[[expect]]`, parsed, checked after the run.
    pub(crate) expectations: Vec<ValidExpect>,
    /// How the run keeps its own threads out of the trace on this kernel.
    pub(crate) self_exclusion: SelfExclusion,
    /// Whether the run's instance turns on `options/copy_trace_marker`
    /// (Linux 6.16+, Documentation/trace/ftrace.rst): what any program writes
    /// to the top-level `trace_marker` is copied into the instance, so a
    /// workload that writes the well-known path rather than
    /// `$TRACE_RECIPE_MARKER` lands in the run too.
    pub(crate) copy_marker: bool,
    /// The parameters the recipe was rendered with ([`LoadedRecipe::params`]).
    pub(crate) params: std::collections::BTreeMap<String, crate::recipe::ParamValue>,
    /// `[[answer]]`, checked, each with the engine it gets.
    pub(crate) answers: Vec<ResolvedAnswer>,
}

/// How a run keeps its own threads (its main thread, the guard, the per-CPU
/// readers) out of the trace: decided from the recipe's
/// `[scope] include_self` and what this kernel offers. The thread ids are only
/// known at run time; [`crate::plan::plan`] writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum SelfExclusion {
    /// `[scope] include_self = true`: the run's own activity is traced like any other.
    #[default]
    Off,
    /// A filter on every event, written by [`crate::plan::plan`]: an event in
    /// the process context of one of the run's threads is dropped, one in
    /// interrupt context (hard irq, softirq, NMI: `common_flags`) is kept
    /// whoever is current, and a two-task sched event is dropped only when it
    /// is about the run's threads alone (a switch between two of them, a
    /// wakeup of one). Not `set_event_notrace_pid`: the kernel decides that
    /// per CPU from the current task, so it also drops every interrupt that
    /// hits while one of the run's threads is current (a block completion,
    /// a timer). Function tracers also get `set_ftrace_notrace_pid` when `ftrace`
    /// (the kernel has it, Linux 5.8+).
    Filter {
        /// Whether `set_ftrace_notrace_pid` exists.
        ftrace: bool,
    },
}

#[cfg(test)]
impl ValidRecipe {
    /// `recipe` as valid, with nothing resolved (no events, probes, tracer,
    /// buffer settings or duration) and the run's threads kept out by notrace
    /// pid lists: the start of the unit tests' recipes.
    pub(crate) fn bare(recipe: Recipe) -> ValidRecipe {
        ValidRecipe {
            recipe,
            duration: None,
            buffer_size_kb: None,
            clock: None,
            cpumask: None,
            overwrite: None,
            persistent: None,
            events: Vec::new(),
            triggers: Vec::new(),
            probes: Vec::new(),
            tracer: None,
            stack: None,
            max_size_bytes: None,
            template: None,
            expectations: Vec::new(),
            self_exclusion: SelfExclusion::Filter { ftrace: true },
            copy_marker: false,
            params: Default::default(),
            answers: Vec::new(),
        }
    }
}

impl SelfExclusion {
    /// What this means for the run, in one sentence (for `check`), given
    /// whether its tracer is a function tracer.
    pub(crate) fn describe(self, function_tracer: bool) -> String {
        const WHO: &str = "the run's own threads (main thread, guard, per-CPU readers)";
        match self {
            SelfExclusion::Off => {
                format!("[scope] include_self = true: {WHO} are traced like any other task")
            }
            SelfExclusion::Filter { ftrace } => {
                let funcs = match (function_tracer, ftrace) {
                    (false, _) => "",
                    (true, true) => {
                        "; the function tracer leaves them out with set_ftrace_notrace_pid (which also skips functions run in interrupt context while one of them is current)"
                    }
                    (true, false) => {
                        "; this kernel has no set_ftrace_notrace_pid, so the function tracer still traces them"
                    }
                };
                format!(
                    "{WHO} are kept out of the trace by a filter on every event: their own events are dropped, while interrupt-context events (hard irq, softirq, NMI) that fire while one of them is current are kept, and a sched_switch or wakeup is dropped only when it concerns them alone (a switch between two of them or one of them and the idle task, a wakeup of one){funcs}"
                )
            }
        }
    }
}

/// One concrete event to enable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedEvent {
    /// `system:event`.
    pub name: String,
    /// The filter to write (the recipe's, and-ed with the comm scope of
    /// `scope`'s rule), if any.
    pub filter: Option<String>,
    /// Whether to add a `stacktrace` trigger.
    pub(crate) stacktrace: bool,
    /// The recipe entry it came from.
    pub(crate) span: Span,
}

/// Reports `[output] reports` may name.
pub(crate) const REPORTS: &[&str] = &["summary", "json", "html"];
/// Longest value written to a tracefs file: the kernel refuses a filter or
/// trigger write of a page or more (kernel/trace/trace_events.c, `cnt >= PAGE_SIZE`).
const MAX_VALUE: usize = 4095;
/// `TASK_COMM_LEN - 1`.
const MAX_COMM: usize = 15;

struct Ctx<'a> {
    loaded: &'a LoadedRecipe,
    facts: &'a KernelFacts,
    host: &'a HostFacts,
    diags: Vec<Diagnostic>,
    /// The recipe's own probes as events (`kprobes:NAME`, `uprobes:NAME`), with
    /// the format the kernel will give them; `[[events]]` and `[[triggers]]` may
    /// name them.
    probe_formats: std::collections::BTreeMap<String, EventFormat>,
}

impl Ctx<'_> {
    fn span(&self, path: &[PathSeg]) -> Span {
        self.loaded.spans.span(path)
    }
    fn key_span(&self, path: &[PathSeg]) -> Span {
        self.loaded.spans.key_span(path)
    }
    fn recipe(&mut self, span: Span, msg: impl Into<String>, help: Option<String>) {
        let mut d = Diagnostic::recipe(span, msg);
        d.help = help;
        self.diags.push(d);
    }
    fn kernel(&mut self, span: Span, msg: impl Into<String>, help: Option<String>) {
        let mut d = Diagnostic::kernel(span, msg);
        d.help = help;
        self.diags.push(d);
    }
    /// Byte range of `inner` (a range inside a string value) in the recipe text, when
    /// the value is a plain quoted string without escapes; else the whole value.
    fn inner_span(&self, path: &[PathSeg], inner: &Range<usize>) -> Span {
        let outer = self.span(path)?;
        let raw = self.loaded.source.text.get(outer.clone())?;
        match string_offsets(raw) {
            Some(map) => {
                let at = |i: usize| outer.start + map.get(i).copied().unwrap_or(raw.len() - 1);
                let s = at(inner.start);
                Some(s..at(inner.end).max(s + 1))
            }
            None => Some(outer),
        }
    }
}

/// For a one-line TOML string literal as written (`"a\"b"` or `'a"b'`), the
/// offset in the written text of each byte of its value, plus one past the end.
/// `None` for multi-line strings.
fn string_offsets(raw: &str) -> Option<Vec<usize>> {
    let b = raw.as_bytes();
    if raw.starts_with("\"\"\"") || raw.starts_with("'''") || b.len() < 2 {
        return None;
    }
    let mut map = Vec::new();
    let mut i = 1;
    let end = b.len() - 1;
    let basic = b[0] == b'"';
    while i < end {
        if basic && b[i] == b'\\' {
            let (len, decoded) = match b.get(i + 1) {
                Some(b'u') => (
                    6,
                    char::from_u32(u32::from_str_radix(raw.get(i + 2..i + 6)?, 16).ok()?)?
                        .len_utf8(),
                ),
                Some(b'U') => (
                    10,
                    char::from_u32(u32::from_str_radix(raw.get(i + 2..i + 10)?, 16).ok()?)?
                        .len_utf8(),
                ),
                _ => (2, 1),
            };
            map.extend(std::iter::repeat_n(i, decoded));
            i += len;
        } else {
            map.push(i);
            i += 1;
        }
    }
    map.push(end);
    Some(map)
}

/// Checks `loaded` against a kernel's `facts` and this host's `host` facts,
/// with no I/O of its own (so it works as well against another machine's fact
/// file). Returns the [`ValidRecipe`], or every problem.
///
/// The passes of the module doc, in order: `check_values` and the duration,
/// probes and events (`resolve_events`), triggers, tracer, the buffer
/// (`resolve_buffer_size`, `resolve_clock`, `resolve_cpumask`), then
/// `check_scope_and_output`, expectations and the template.
pub fn validate(
    loaded: &LoadedRecipe,
    facts: &KernelFacts,
    host: &HostFacts,
) -> Result<ValidRecipe, Vec<Diagnostic>> {
    let r = &loaded.recipe;
    let mut cx = Ctx {
        loaded,
        facts,
        host,
        diags: loaded.problems.clone(),
        probe_formats: Default::default(),
    };

    check_name(&mut cx, r);
    check_values(&mut cx, r);
    let duration = resolve_duration(&mut cx, r);
    check_collect(&mut cx, r);
    let (probes, mut events, comms) = resolve_events(&mut cx, r);
    let answers = answer::resolve_answers(
        &mut cx,
        r,
        &mut answer::Recorded {
            events: &mut events,
            probes: &probes,
            comms: &comms,
        },
    );
    let mut triggers = Vec::new();
    for (i, t) in r.triggers.iter().enumerate() {
        trigger::resolve_trigger(&mut cx, i, t, &mut triggers);
    }
    let tracer = r
        .tracer
        .as_ref()
        .and_then(|t| tracer::resolve_tracer(&mut cx, t));
    let stack = r
        .stack
        .as_ref()
        .and_then(|s| tracer::resolve_stack(&mut cx, s));
    check_enables_something(&mut cx, r);
    let buffer_size_kb = resolve_buffer_size(&mut cx, r);
    let clock = resolve_clock(&mut cx, r);
    let cpumask = resolve_cpumask(&mut cx, r);
    let overwrite = r
        .buffer
        .overwrite
        .map(|o| (o, cx.span(&path!("buffer", "overwrite"))));
    check_scope_and_output(&mut cx, r);
    let persistent = persistent::resolve_persistent(&mut cx, r);
    let expectations = expect::resolve_expectations(&mut cx, &events, &probes);
    let template = resolve_template(&mut cx);

    if !cx.diags.is_empty() {
        let mut diags = cx.diags;
        diags.sort_by_key(|d| d.span.as_ref().map_or(0, |s| s.start));
        return Err(diags);
    }
    let copy_marker = !tracer.as_ref().is_some_and(|t| t.at_top_level)
        && facts.instance.options.contains("copy_trace_marker");
    Ok(ValidRecipe {
        recipe: r.clone(),
        duration,
        buffer_size_kb,
        clock,
        cpumask,
        overwrite,
        persistent,
        events,
        triggers,
        probes,
        tracer,
        stack,
        max_size_bytes: r.stop.max_size_mb.map(|mb| mb * 1024 * 1024),
        template,
        expectations,
        self_exclusion: match r.scope.include_self {
            true => SelfExclusion::Off,
            false => SelfExclusion::Filter {
                ftrace: facts.has_file("set_ftrace_notrace_pid"),
            },
        },
        copy_marker,
        params: loaded.params.clone(),
        answers,
    })
}

/// Every string value of the recipe fits one tracefs write and holds no
/// control character.
fn check_values(cx: &mut Ctx<'_>, r: &Recipe) {
    for (path, value) in string_values(r) {
        if value.len() > MAX_VALUE {
            let span = cx.span(&path);
            cx.recipe(
                span,
                format!("value is {} bytes, too long for one tracefs write (at most {MAX_VALUE})", value.len()),
                Some("the kernel refuses filters and triggers of a page or more: split the work into several events or simplify the filter".into()),
            );
        }
        if value.chars().any(char::is_control) {
            let span = cx.span(&path);
            cx.recipe(
                span,
                "value contains a control character (newline, tab, NUL, ...)",
                Some(
                    "values reach tracefs files as one line each: remove the control character"
                        .into(),
                ),
            );
        }
    }
}

/// `duration`, parsed.
fn resolve_duration(cx: &mut Ctx<'_>, r: &Recipe) -> Option<Duration> {
    r.duration.as_ref().and_then(|d| {
        let span = cx.span(&path!("duration"));
        match parse_duration(d) {
            Ok(v) => Some(v),
            Err(msg) => {
                cx.recipe(
                    span,
                    msg,
                    Some("write a duration such as \"500ms\", \"10s\" or \"2m\"".into()),
                );
                None
            }
        }
    })
}

/// The recipe's probes, then its `[[events]]`: an entry naming one of the
/// recipe's own probes is folded into that probe, the others resolved against
/// the kernel's events (with the comm scope's filter); and the checked
/// `[scope] comms`.
fn resolve_events(
    cx: &mut Ctx<'_>,
    r: &Recipe,
) -> (Vec<ResolvedProbe>, Vec<ResolvedEvent>, Vec<String>) {
    let mut probes = Vec::new();
    probe::resolve_probes(cx, "kprobes", &r.kprobes, &mut probes);
    probe::resolve_probes(cx, "uprobes", &r.uprobes, &mut probes);
    let comms = scope::checked_comms(cx, r);
    let mut events = Vec::new();
    // Which `[[events]]` entry enabled each event first.
    let mut first: std::collections::BTreeMap<String, usize> = Default::default();
    for (i, ev) in r.events.iter().enumerate() {
        if !probe::fold_event_into_probe(cx, i, ev, &mut probes) {
            let from = events.len();
            resolve_event(cx, i, ev, &comms, &mut events);
            let mut twice = Vec::new();
            for e in events.drain(from..).collect::<Vec<_>>() {
                match first.get(&e.name) {
                    Some(&j) => twice.push((j, e.name)),
                    None => {
                        first.insert(e.name.clone(), i);
                        events.push(e);
                    }
                }
            }
            enabled_twice(cx, i, &twice);
        }
    }
    for p in &mut probes {
        p.filter = scope::and(
            p.filter.as_deref(),
            scope::comm_filter("", &comms).as_deref(),
        );
    }
    (probes, events, comms)
}

/// A recipe must enable at least one event, trigger, probe, tracer or answer.
fn check_enables_something(cx: &mut Ctx<'_>, r: &Recipe) {
    if r.events.is_empty()
        && r.answer.is_empty()
        && r.stack.as_ref().is_none_or(|s| s.enable == Some(false))
        && r.triggers.is_empty()
        && r.kprobes.is_empty()
        && r.uprobes.is_empty()
        && r.tracer
            .as_ref()
            .is_none_or(|t| t.name.as_deref().is_none_or(|n| n == "nop"))
    {
        cx.recipe(
            None,
            "the recipe enables no event",
            Some("add an `[[events]]` entry, e.g. name = \"sched:sched_process_exec\"".into()),
        );
    }
}

/// `[buffer] size_kb`: at least one sub-buffer, at most half of memory over
/// all CPUs.
fn resolve_buffer_size(cx: &mut Ctx<'_>, r: &Recipe) -> Option<(u64, Span)> {
    let facts = cx.facts;
    r.buffer.size_kb.and_then(|kb| {
        let span = cx.span(&path!("buffer", "size_kb"));
        let ncpu = facts.cpus.len().max(1) as u64;
        let max = facts.mem_total_kb / 2 / ncpu;
        if kb < 4 {
            cx.recipe(span, format!("buffer size {kb} KiB is too small"), Some("use at least 4 KiB per CPU (one sub-buffer)".into()));
            None
        } else if kb > max {
            cx.recipe(span, format!("buffer size {kb} KiB per CPU × {ncpu} CPUs is over half of this machine's memory"), Some(format!("use at most {max} KiB per CPU")));
            None
        } else {
            Some((kb, span))
        }
    })
}

/// `[buffer] clock`: one of the kernel's trace clocks.
fn resolve_clock(cx: &mut Ctx<'_>, r: &Recipe) -> Option<(String, Span)> {
    let facts = cx.facts;
    r.buffer.clock.as_ref().and_then(|c| {
        let span = cx.span(&path!("buffer", "clock"));
        if facts.clocks.iter().any(|k| k == c) {
            Some((c.clone(), span))
        } else {
            let hint = suggest::did_you_mean(c, facts.clocks.iter().map(String::as_str), 1);
            cx.kernel(
                span,
                format!("this kernel offers no trace clock `{c}`"),
                Some(format!(
                    "{hint}trace_clock offers: {}",
                    facts.clocks.join(" ")
                )),
            );
            None
        }
    })
}

/// `[buffer] cpus`: a cpu list of this machine's CPUs, as a hex mask.
fn resolve_cpumask(cx: &mut Ctx<'_>, r: &Recipe) -> Option<(String, Span)> {
    let list = r.buffer.cpus.as_ref()?;
    let span = cx.span(&path!("buffer", "cpus"));
    let cpus = check_cpu_list(cx, span.clone(), list)?;
    Some((cpumask_hex(&cpus), span))
}

/// A cpu list (`"0-3,6"`) of this machine's CPUs, at `span`; `None` (reported) when wrong.
fn check_cpu_list(cx: &mut Ctx<'_>, span: Span, list: &str) -> Option<Vec<u32>> {
    let facts = cx.facts;
    match parse_cpu_list(list) {
        Err(msg) => {
            cx.recipe(span, msg, Some("write a cpu list such as \"0-3,6\"".into()));
            None
        }
        Ok(cpus) => {
            let missing: Vec<String> = cpus
                .iter()
                .filter(|c| !facts.cpus.contains(c))
                .map(u32::to_string)
                .collect();
            if missing.is_empty() {
                return Some(cpus);
            }
            cx.kernel(
                span,
                format!("this machine has no CPU {}", missing.join(", ")),
                Some(format!(
                    "its CPUs are {}",
                    facts
                        .cpus
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                )),
            );
            None
        }
    }
}

/// `[scope]` (live pids, a program name), `[output] reports` and
/// `max_lost_percent`, `[stop] max_size_mb`.
fn check_scope_and_output(cx: &mut Ctx<'_>, r: &Recipe) {
    for (i, pid) in r.scope.pids.iter().enumerate() {
        if !cx.host.live_pids.contains(pid) {
            let span = cx.span(&path!("scope", "pids", i));
            cx.recipe(span, format!("no process with pid {pid} is running"), None);
        }
    }
    if let Some(cmd) = r.scope.command.first()
        && cmd.is_empty()
    {
        let span = cx.span(&path!("scope", "command"));
        cx.recipe(
            span,
            "`scope.command` starts with an empty program name",
            None,
        );
    }
    if let Some(reports) = &r.output.reports {
        for (i, rep) in reports.iter().enumerate() {
            if !REPORTS.contains(&rep.as_str()) {
                let span = cx.span(&path!("output", "reports", i));
                cx.recipe(
                    span,
                    format!("unknown report `{rep}`"),
                    Some(format!("reports are: {}", REPORTS.join(", "))),
                );
            }
        }
    }
    if let Some(rot) = &r.output.rotate {
        if rot.size_mb < 4 {
            let span = cx.span(&path!("output", "rotate", "size_mb"));
            cx.recipe(span, format!("`rotate.size_mb` is {}; a piece must be at least 4 MiB", rot.size_mb), Some("a piece holds the ring buffer's pages and trace.dat's metadata; give 4 or more".into()));
        }
        if rot.keep_mb < rot.size_mb.saturating_mul(2) {
            let span = cx.span(&path!("output", "rotate", "keep_mb"));
            cx.recipe(
                span,
                format!(
                    "`rotate.keep_mb` is {}, less than two pieces of {} MiB",
                    rot.keep_mb, rot.size_mb
                ),
                Some(format!(
                    "give at least {} (two pieces)",
                    rot.size_mb.saturating_mul(2)
                )),
            );
        }
        if r.output.trace_dat == Some(false) {
            let span = cx.span(&path!("output", "rotate"));
            cx.recipe(
                span,
                "`rotate` writes trace.dat pieces, and `trace_dat = false` asks for none",
                Some("remove one of the two keys".into()),
            );
        }
        if let Some(name) = r.tracer.as_ref().and_then(|t| t.name.as_deref())
            && crate::run::keeps_max_trace(name)
        {
            let span = cx.span(&path!("output", "rotate"));
            cx.recipe(span, format!("tracer `{name}` keeps its worst case in the ring buffer until the run ends, so its run cannot be cut in pieces"), Some("remove `[output] rotate`, or trace events instead".into()));
        }
    }
    if r.stop.max_size_mb == Some(0) {
        let span = cx.span(&path!("stop", "max_size_mb"));
        cx.recipe(span, "`max_size_mb` must be at least 1", None);
    }
    if let Some(p) = r.output.max_lost_percent
        && !(0.0..=100.0).contains(&p)
    {
        let span = cx.span(&path!("output", "max_lost_percent"));
        cx.recipe(
            span,
            format!("`max_lost_percent` is {p}, not a percentage"),
            Some("give a number from 0 to 100".into()),
        );
    }
}

/// `[output] template`, as the host loaded it.
fn resolve_template(cx: &mut Ctx<'_>) -> Option<crate::recipe::Template> {
    match cx.host.template.clone() {
        Some(Ok(tpl)) => Some(tpl),
        Some(Err(e)) => {
            let span = cx.span(&path!("output", "template"));
            cx.recipe(span, e, None);
            None
        }
        None => None,
    }
}

fn check_name(cx: &mut Ctx<'_>, r: &Recipe) {
    let ok = !r.name.is_empty()
        && r.name.len() <= 64
        && r.name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !ok {
        let span = cx.span(&path!("name"));
        cx.recipe(span, format!("recipe name {:?} is not of the form [a-z0-9_-]+ (1 to 64 characters)", r.name), Some("the name becomes part of an instance and a folder name; write e.g. \"openat-failures\"".into()));
    }
}

/// Every string value that reaches tracefs, with its key path.
fn string_values(r: &Recipe) -> Vec<(Vec<PathSeg>, &str)> {
    let mut out: Vec<(Vec<PathSeg>, &str)> = Vec::new();
    for (i, e) in r.events.iter().enumerate() {
        out.push((path!("events", i, "name").to_vec(), &e.name));
        if let Some(f) = &e.filter {
            out.push((path!("events", i, "filter").to_vec(), f));
        }
    }
    for (i, t) in r.triggers.iter().enumerate() {
        let keys = [
            ("event", &t.event),
            ("target", &t.target),
            ("if", &t.condition),
            ("function", &t.function),
        ];
        for (key, v) in keys {
            if let Some(v) = v {
                out.push((path!("triggers", i, key).to_vec(), v));
            }
        }
    }
    for (i, t) in r.triggers.iter().enumerate() {
        for (key, list) in [("keys", &t.keys), ("values", &t.values), ("sort", &t.sort)] {
            for (j, v) in list.iter().enumerate() {
                out.push((path!("triggers", i, key, j).to_vec(), v));
            }
        }
    }
    for (table, probes) in [("kprobes", &r.kprobes), ("uprobes", &r.uprobes)] {
        for (i, p) in probes.iter().enumerate() {
            out.push((path!(table, i, "event").to_vec(), &p.event));
            out.push((path!(table, i, "target").to_vec(), &p.target));
            if let Some(f) = &p.filter {
                out.push((path!(table, i, "filter").to_vec(), f));
            }
            for (name, arg) in &p.fetch {
                out.push((path!(table, i, "fetch", name.as_str()).to_vec(), arg));
            }
        }
    }
    if let Some(t) = &r.tracer {
        if let Some(n) = &t.name {
            out.push((path!("tracer", "name").to_vec(), n));
        }
        for (key, list) in [
            ("functions", &t.functions),
            ("notrace", &t.notrace),
            ("graph_functions", &t.graph_functions),
            ("graph_notrace", &t.graph_notrace),
        ] {
            for (j, v) in list.iter().enumerate() {
                out.push((path!("tracer", key, j).to_vec(), v));
            }
        }
    }
    for (i, c) in r.scope.comms.iter().enumerate() {
        out.push((path!("scope", "comms", i).to_vec(), c));
    }
    if let Some(c) = &r.buffer.clock {
        out.push((path!("buffer", "clock").to_vec(), c));
    }
    for (i, a) in r.answer.iter().enumerate() {
        let keys = [
            ("event", &a.event),
            ("from", &a.from),
            ("to", &a.to),
            ("where", &a.filter),
        ];
        for (key, v) in keys {
            if let Some(v) = v {
                out.push((path!("answer", i, key).to_vec(), v));
            }
        }
        for (j, m) in a.match_fields.iter().flatten().enumerate() {
            out.push((path!("answer", i, "match", j).to_vec(), m));
        }
    }
    out
}

/// Reports the events entry `i` enables that an earlier entry enabled
/// already (`twice`: the earlier entry's index and the event): the kernel keeps
/// one filter per event, so the later entry would silently replace it.
fn enabled_twice(cx: &mut Ctx<'_>, i: usize, twice: &[(usize, String)]) {
    let Some((j, _)) = twice.first() else {
        return;
    };
    let r = &cx.loaded.recipe;
    let earlier = cx.span(&path!("events", *j, "name"));
    let place = earlier.map_or_else(
        || format!("entry {}", j + 1),
        |s| cx.loaded.source.place(s.start),
    );
    let names: Vec<&str> = twice.iter().take(4).map(|(_, n)| n.as_str()).collect();
    let more = match twice.len().saturating_sub(4) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let msg = format!(
        "`{}`{more} enabled twice: by `{}` at {place} and by `{}` here; an event has one filter, and the later entry would silently replace the earlier one's",
        names.join("`, `"),
        r.events[*j].name,
        r.events[i].name,
    );
    let span = cx.span(&path!("events", i, "name"));
    cx.recipe(
        span,
        msg,
        Some("give each event one entry: join the two filters with `||` in one of them, or narrow the glob".into()),
    );
}

fn resolve_event(
    cx: &mut Ctx<'_>,
    i: usize,
    ev: &crate::recipe::Event,
    comms: &[String],
    out: &mut Vec<ResolvedEvent>,
) {
    let name_path = path!("events", i, "name");
    let name_span = cx.span(&name_path);
    let entry_span = cx.span(&path!("events", i)).or_else(|| name_span.clone());
    if !valid_event_pattern(&ev.name) {
        cx.recipe(
            name_span,
            format!(
                "event name {:?} is not of the form \"system:event\"",
                ev.name
            ),
            Some("write e.g. \"sched:sched_switch\" or \"sched:*\" (see available_events)".into()),
        );
        return;
    }
    let matched: Vec<String> = cx
        .facts
        .matching_events(&ev.name)
        .into_iter()
        .map(str::to_string)
        .collect();
    if matched.is_empty() {
        let hint = suggest::did_you_mean(&ev.name, cx.facts.events.iter().map(String::as_str), 3);
        let what = if ev.name.contains(['*', '?']) {
            "no event of this kernel matches"
        } else {
            "this kernel has no event"
        };
        cx.kernel(
            name_span,
            format!("{what} `{}`", ev.name),
            Some(if hint.is_empty() {
                "list this kernel's events with `cat /sys/kernel/tracing/available_events`"
                    .to_string()
            } else {
                hint.trim_end().to_string()
            }),
        );
        return;
    }
    let filter_path = path!("events", i, "filter");
    let preds = match &ev.filter {
        None => None,
        Some(f) => match filter::parse(f) {
            Ok(p) => Some(p),
            Err(e) => {
                let span = cx.inner_span(&filter_path, &e.span);
                cx.recipe(span, format!("filter syntax: {}", e.message), Some("see Documentation/trace/events.rst section 5 (\"field op value\", joined with && and ||)".into()));
                return;
            }
        },
    };
    let mut reported = std::collections::BTreeSet::new();
    let mut rewrites = Vec::new();
    for name in matched {
        if let Some(preds) = &preds {
            match cx.facts.format(&name) {
                Some(format) => {
                    rewrites =
                        check_predicates(cx, &filter_path, &name, &format, preds, &mut reported);
                }
                None => {
                    cx.kernel(
                        name_span.clone(),
                        format!("cannot read the format of `{name}`"),
                        None,
                    );
                    continue;
                }
            }
        }
        let own = ev.filter.as_deref().map(|f| rewrite(f, &rewrites));
        let filter = scope::and(own.as_deref(), scope::comm_filter(&name, comms).as_deref());
        out.push(ResolvedEvent {
            name,
            filter,
            stacktrace: ev.stacktrace,
            span: entry_span.clone(),
        });
    }
}

fn valid_event_pattern(name: &str) -> bool {
    let Some((sys, ev)) = name.split_once(':') else {
        return false;
    };
    let part_ok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'*' | b'?' | b'-' | b'.'))
    };
    part_ok(sys) && part_ok(ev) && !name.contains("..")
}

/// Whether the kernel filters `f` as a string: char arrays, `__data_loc char[]`,
/// and `char *` / `const char *` pointers (`filter_assign_type` in
/// kernel/trace/trace_events_filter.c: FILTER_PTR_STRING); other pointers
/// (`const char *const *`) are numbers.
pub(crate) fn is_string_field(f: &Field) -> bool {
    f.is_string || (f.is_pointer && matches!(f.type_name.trim(), "char *" | "const char *"))
}

/// Whether field `f` of `event` points into user space: a pointer argument of
/// a syscall's entry event.
fn is_user_pointer(event: &str, f: &Field) -> bool {
    f.is_pointer && event.starts_with("syscalls:sys_enter_")
}

/// A replacement of a range of a filter's text (an errno name by its number).
pub(crate) type Rewrite = (Range<usize>, String);

/// `text` with each of `rewrites` (ranges in `text`, not overlapping) applied.
pub(crate) fn rewrite(text: &str, rewrites: &[Rewrite]) -> String {
    let mut sorted: Vec<&Rewrite> = rewrites.iter().collect();
    sorted.sort_by_key(|(r, _)| r.start);
    let mut out = String::new();
    let mut at = 0;
    for (r, with) in sorted {
        out.push_str(text.get(at..r.start).unwrap_or_default());
        out.push_str(with);
        at = r.end;
    }
    out.push_str(text.get(at..).unwrap_or_default());
    out
}

/// Checks each predicate of a filter on `event` as the kernel will
/// (kernel/trace/trace_events_filter.c, `parse_pred`): the field exists,
/// operator and value suit its type, a number fits the field's size and sign,
/// a string is quoted, a user-space pointer is read with `.ustring`. Returns
/// the rewrites the filter needs before it reaches the kernel: an errno name
/// compared with a syscall's `ret` becomes its number (`-EACCES` → `-13`).
#[must_use]
fn check_predicates(
    cx: &mut Ctx<'_>,
    path: &[PathSeg],
    event: &str,
    format: &EventFormat,
    preds: &[Predicate],
    reported: &mut std::collections::BTreeSet<String>,
) -> Vec<Rewrite> {
    let mut rewrites = Vec::new();
    for pred in preds {
        let base = pred.field.split('.').next().unwrap_or(&pred.field);
        let special = matches!(base, "comm" | "COMM" | "cpu" | "CPU" | "common_cpu");
        let field = format
            .field(base)
            .or_else(|| format.common_fields.iter().find(|f| f.name == base));
        let is_string = match (field, special) {
            (_, true) => matches!(base, "comm" | "COMM"),
            (Some(f), false) => is_string_field(f),
            (None, false) => {
                let key = format!("field:{base}:{event}");
                if reported.insert(key) {
                    let names: Vec<&str> = format.fields.iter().map(|f| f.name.as_str()).collect();
                    let hint = suggest::did_you_mean(base, names.iter().copied(), 1);
                    let span = cx.inner_span(path, &pred.field_span);
                    // The event exists on this kernel: the field name is the recipe's.
                    cx.recipe(span, format!("event `{event}` has no field `{base}`"), Some(format!(
                        "{hint}its fields are: {} (and common_pid, common_flags, common_preempt_count, comm, cpu)",
                        names.join(", ")
                    )));
                }
                continue;
            }
        };
        let errno = match &pred.value {
            FilterValue::Word(w) if base == "ret" && event.starts_with("syscalls:sys_exit_") => {
                Some(w.as_str())
            }
            _ => None,
        };
        let mut help = None;
        let numeric = field.filter(|_| !special && !is_string);
        let problem = match (is_string, pred.op, &pred.value) {
            (false, FilterOp::Glob, _) => Some(format!(
                "`~` (glob match) works on string fields only, and `{base}` is numeric"
            )),
            (true, FilterOp::Cmp(Cmp::Lt | Cmp::Le | Cmp::Gt | Cmp::Ge) | FilterOp::BitAnd, _) => {
                Some(format!(
                    "`{}` does not work on string field `{base}`",
                    pred.op
                ))
            }
            (false, _, FilterValue::Quoted(_)) => {
                Some(format!("numeric field `{base}` is compared with a string"))
            }
            (false, _, FilterValue::Word(_)) if errno.is_some() => {
                match errno_value(errno.unwrap_or_default()) {
                    Ok(n) => {
                        rewrites.push((pred.value_span.clone(), n.to_string()));
                        None
                    }
                    Err(msg) => {
                        help = Some("a syscall's `ret` is its return value: -errno on failure, e.g. `ret == -EACCES`".into());
                        Some(msg)
                    }
                }
            }
            (false, _, FilterValue::Word(w)) if !pred.field.contains('.') => Some(format!(
                "numeric field `{base}` is compared with `{w}`, which is not a number"
            )),
            (true, _, FilterValue::Number(_)) => Some(format!(
                "string field `{base}` is compared with a number (quote the value)"
            )),
            (true, _, FilterValue::Word(w)) => {
                help = Some(format!("write `{} {} \"{w}\"`", pred.field, pred.op));
                Some(format!(
                    "string field `{base}` is compared with `{w}` without quotes: the kernel refuses it (\"did you forget quotes?\")"
                ))
            }
            (true, _, FilterValue::Quoted(_))
                if field.is_some_and(|f| is_user_pointer(event, f))
                    && !pred.field.ends_with(".ustring") =>
            {
                help = Some(ustring_advice(cx.facts, pred));
                Some(format!(
                    "`{base}` is a pointer into user space: as written the kernel reads it as a kernel address and the filter never matches"
                ))
            }
            (false, _, FilterValue::Number(n)) => numeric.and_then(|f| {
                let e = number_fits(n, f).err()?;
                help = Some(format!(
                    "`{}` is {} {}-byte field; compare it with a number in its range",
                    f.name,
                    if f.signed { "a signed" } else { "an unsigned" },
                    f.size
                ));
                Some(e)
            }),
            _ => None,
        };
        if let Some(msg) = problem {
            let key = format!("op:{}:{}", pred.field_span.start, msg);
            if reported.insert(key) {
                let span = cx.inner_span(path, &(pred.field_span.start..pred.value_span.end));
                let help = help.unwrap_or_else(|| "numeric fields take ==, !=, <, <=, >, >=, & and a number; string fields take ==, !=, ~ and a quoted string".into());
                cx.recipe(span, format!("{msg} (event `{event}`)"), Some(help));
            }
        }
    }
    rewrites
}

/// What to write instead of a string comparison on user-space pointer `pred`.
fn ustring_advice(facts: &KernelFacts, pred: &Predicate) -> String {
    let base = pred.field.split('.').next().unwrap_or(&pred.field);
    if facts.release_at_least(5, 17) {
        format!(
            "write `{base}.ustring {} ...`: the kernel then reads the string from user space (events.rst 5.1)",
            pred.op
        )
    } else {
        format!(
            "this kernel ({}) cannot read user-space strings in a filter (`.ustring` is Linux 5.17+): record without it and narrow with `report -F`",
            facts.release
        )
    }
}

/// The value of an errno comparison with a syscall's `ret`: `-NAME` is the
/// negated number (what the syscall returns); a bare `NAME` is refused, since
/// `ret` is never a positive errno.
fn errno_value(word: &str) -> Result<i64, String> {
    let (neg, name) = match word.strip_prefix('-') {
        Some(n) => (true, n),
        None => (false, word),
    };
    match (crate::errno::number(name), neg) {
        (Some(n), true) => Ok(-n),
        (Some(n), false) => Err(format!(
            "a failed syscall returns `-{name}` in `ret`, never `{name}`: write `-{name}` (it becomes -{n})"
        )),
        (None, _) => {
            let hint = suggest::did_you_mean(name, crate::errno::names(), 1);
            Err(format!(
                "`{word}` is neither a number nor an errno name{}",
                if hint.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", hint.trim_end())
                }
            ))
        }
    }
}

/// Whether the number `text` (decimal or `0x` hex, maybe negative) fits field
/// `f` as the kernel compares it: the kernel parses it as a signed or unsigned
/// 64-bit number by the field's sign (a negative value for an unsigned field is
/// refused) and then truncates it to the field's size, so a larger value would
/// silently compare as another one. Hex bit patterns may use the sign bit.
fn number_fits(text: &str, f: &Field) -> Result<(), String> {
    let (neg, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text),
    };
    let (hex, parsed) = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(h) => (true, i128::from_str_radix(h, 16)),
        None => (false, digits.parse::<i128>()),
    };
    let Ok(magnitude) = parsed else {
        return Err(format!("`{text}` is too large for any field"));
    };
    let value = if neg { -magnitude } else { magnitude };
    if !matches!(f.size, 1 | 2 | 4 | 8) || f.array_len.is_some() {
        return Ok(());
    }
    let bits = 8 * f.size as u32;
    let (min, max) = match (f.signed, hex) {
        (true, false) => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
        // kstrtoll: a hex bit pattern up to the field's width, within i64.
        (true, true) => (
            -(1i128 << (bits - 1)),
            ((1i128 << bits) - 1).min(i64::MAX.into()),
        ),
        (false, _) => (0, (1i128 << bits) - 1),
    };
    if value < 0 && !f.signed {
        return Err(format!(
            "`{}` is unsigned ({} bytes) and the kernel refuses the negative value `{text}`",
            f.name, f.size
        ));
    }
    if value < min || value > max {
        return Err(format!(
            "`{text}` does not fit `{}`, {} {}-byte ({min} to {max}): the kernel would compare it cut to {bits} bits, as another number",
            f.name,
            if f.signed { "a signed" } else { "an unsigned" },
            f.size
        ));
    }
    Ok(())
}

/// `[collect]`: each command splits into words and names a program this host
/// has; the timeout is a duration.
fn check_collect(cx: &mut Ctx<'_>, r: &Recipe) {
    for (phase, commands) in [("before", &r.collect.before), ("after", &r.collect.after)] {
        for (i, c) in commands.iter().enumerate() {
            let span = cx.span(&path!("collect", phase, i));
            match c.argv() {
                None => cx.recipe(
                    span,
                    "this command is empty or does not split into words (an open quote?)",
                    Some("write an argv array: [\"cat\", \"/proc/interrupts\"]".into()),
                ),
                Some(argv) if cx.host.missing_programs.contains(&argv[0]) => cx.recipe(
                    span,
                    format!("`{}` is not a file and not found in PATH", argv[0]),
                    Some("install it, or give its full path".into()),
                ),
                Some(_) => {}
            }
        }
    }
    if let Some(t) = &r.collect.timeout
        && let Err(msg) = parse_duration(t)
    {
        let span = cx.span(&path!("collect", "timeout"));
        cx.recipe(span, msg, Some("write a duration such as \"5s\"".into()));
    }
}

/// Parses a cpu list (`"0-3,6"`) into sorted, unique CPU numbers.
pub(crate) fn parse_cpu_list(text: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        let bad = || format!("`{part}` in cpu list `{text}` is not a CPU number or range");
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (
                a.trim().parse::<u32>().map_err(|_| bad())?,
                b.trim().parse::<u32>().map_err(|_| bad())?,
            ),
            None => {
                let a = part.parse::<u32>().map_err(|_| bad())?;
                (a, a)
            }
        };
        if a > b || b >= 8192 {
            return Err(bad());
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The `tracing_cpumask` text for `cpus`: hex, in comma-separated 32-bit groups.
pub(crate) fn cpumask_hex(cpus: &[u32]) -> String {
    let max = cpus.iter().copied().max().unwrap_or(0);
    let groups = (max / 32 + 1) as usize;
    let mut words = vec![0u32; groups];
    for &c in cpus {
        words[(c / 32) as usize] |= 1 << (c % 32);
    }
    words
        .iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_become_masks() {
        assert_eq!(parse_cpu_list("0-3,6").unwrap(), vec![0, 1, 2, 3, 6]);
        assert_eq!(cpumask_hex(&[0, 1, 2, 3, 6]), "0000004f");
        assert_eq!(cpumask_hex(&[33]), "00000002,00000000");
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }

    #[test]
    fn offsets_map_through_escapes() {
        let m = string_offsets(r#""a\"b""#).unwrap();
        assert_eq!(m, vec![1, 2, 4, 5]);
        assert_eq!(string_offsets("'x'").unwrap(), vec![1, 2]);
    }
}
