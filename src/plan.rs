//! Planning: a [`ValidRecipe`] becomes an ordered list of [`Step`]s, each a single
//! tracefs change that knows how to undo itself. Pure: nothing here touches tracefs.
//!
//! Order (Documentation/trace/ftrace.rst, events.rst, kprobetrace.rst): create the
//! instance, turn its tracing off, size and clock the ring buffer, set options and
//! the pid scope (`set_event_pid`, or, for events of another task than the
//! current one, a filter on every event: `crate::validate::pids_by_filter`); the tracer's function filters, options and global knobs, then the
//! tracer; each probe's definition (appended to the global kprobe_events /
//! uprobe_events in the run's own probe group) followed by its filter, stacktrace
//! trigger and enable in the instance; per event filter → stacktrace trigger →
//! enable; then the recipe's triggers. Tracing is turned on by `run` only after
//! every step succeeded.
//!
//! Undo runs in reverse, which is the order the kernel needs: a probe event is
//! disabled in the instance before its definition is removed (`-:GROUP/EVENT`), and
//! the instance is removed last.
//!
//! About a quarter of this file is its unit tests (the plan of each recipe shape,
//! step by step); the code itself is under 800 lines.

use std::fmt;

use crate::tracefs::{INSTANCE_PREFIX, Irreversible, Sysctl, WriteMode, instance_file};
use crate::validate::{
    MaxLatencyAt, ResolvedTracer, ResolvedTrigger, SelfExclusion, Span, ValidRecipe, pid_filter,
    pid_runs, pids_by_filter,
};

/// One tracefs change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// `mkdir DIR` (an instance); undone by `rmdir DIR`.
    Mkdir {
        /// Directory relative to the tracefs root.
        dir: String,
    },
    /// Write `value` to `file`; undone as `undo` says.
    Write {
        /// File relative to the tracefs root.
        file: String,
        /// What to write.
        value: String,
        /// Replace or append.
        mode: WriteMode,
        /// How to undo it.
        undo: Undo,
    },
    /// Write `value` to a tracing sysctl (outside tracefs); undone by writing
    /// back the value read before.
    Sysctl {
        /// Which one.
        sysctl: Sysctl,
        /// What to write.
        value: String,
    },
}

/// How a write is undone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Undo {
    /// Nothing to undo: the instance that holds the file goes away.
    Nothing,
    /// Read the file's value before writing, and write it back.
    Restore,
    /// Write this value (replacing) to the same file.
    Write(String),
    /// Append this value to the same file (`!trigger` removes a trigger).
    Append(String),
}

/// One step of a plan: the change, and the recipe entry that asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The change.
    pub(crate) op: Op,
    /// The recipe entry (byte range of the rendered text) it comes from.
    pub(crate) span: Span,
}

/// Everything a run changes in tracefs, in order.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The instance directory, relative to tracefs: `instances/trace-recipe-NAME-PID`;
    /// "" when the run works at the top level (a tracer offered only there).
    pub(crate) instance: String,
    /// The probe group the run's probes are defined in: `trace_recipe_PID`.
    pub(crate) probe_group: String,
    /// Whether a step writes a global top-level file (max_graph_depth,
    /// tracing_thresh, set_graph_function on kernels whose instances lack it)
    /// that another run could also want: the run then holds [`TOP_LEVEL_LOCK`]
    /// while applied, and restores each file's before-image.
    pub(crate) touches_top_level: bool,
    /// The steps, in the order they are applied (undone in reverse).
    pub steps: Vec<Step>,
}

/// The irreversible effects `plan` will have on a kernel whose top-level ring
/// buffer is `top`: a run at the top level (a tracer instances lack) allocates
/// a top-level ring buffer still unallocated since boot, which user space can
/// never shrink back (kernel/trace/trace.c, `ring_buffer_expanded`).
pub(crate) fn irreversible(plan: &Plan, top: &crate::kernel::TopBuffer) -> Vec<Irreversible> {
    match (plan.instance.is_empty(), top.expanded_size_kb) {
        (true, Some(kb)) => vec![top_buffer_allocated(top, kb, true)],
        _ => Vec::new(),
    }
}

/// The effect "top-level ring buffer allocated", from `top` to `kb` KiB per CPU.
pub(crate) fn top_buffer_allocated(
    top: &crate::kernel::TopBuffer,
    kb: u64,
    declared: bool,
) -> Irreversible {
    Irreversible {
        effect: format!(
            "allocates the top-level ring buffer, unallocated since boot: {kb} KiB per CPU that user space cannot free again"
        ),
        file: "buffer_size_kb".into(),
        before: format!("{} (expanded: {kb})", top.size_kb),
        after: format!("{kb} (rounded up to whole pages)"),
        declared,
    }
}

/// Prefix of every probe group a run defines: `trace_recipe_PID`.
pub(crate) const PROBE_GROUP_PREFIX: &str = "trace_recipe_";
/// Lock file (flock, exclusive) held by a run while it holds top-level state.
pub(crate) const TOP_LEVEL_LOCK: &str = "/run/trace-recipe/top-level.lock";

/// The probe group of the run of process `pid`.
pub fn probe_group(pid: u32) -> String {
    format!("{PROBE_GROUP_PREFIX}{pid}")
}

/// The instance name for a run of recipe `name` by process `pid`.
pub fn instance_name(name: &str, pid: u32) -> String {
    format!("{INSTANCE_PREFIX}{name}-{pid}")
}

/// The `trace_marker` a workload writes to annotate its run (relative to
/// tracefs): its instance's, or the top level's when the run works there.
pub(crate) fn marker_file(valid: &ValidRecipe, instance: &str) -> String {
    let top = valid.tracer.as_ref().is_some_and(|t| t.at_top_level);
    instance_file((!top).then_some(instance), "trace_marker")
}

/// Builds the plan for `valid`, in instance `instance` (a bare name), with probes
/// in group `group`, scoping events (and function tracers) to `pids` (the
/// recipe's and the workload's): by the kernel's pid list, or, when the pid
/// set is fixed and an event's subject is not the current task, by a filter on
/// every event (see `pids_by_filter`). Function tracers are also scoped to
/// `comm_pids`, the running tasks named by `[scope] comms` (events are scoped by
/// comm through their filters instead). `own` are the thread ids of the run
/// itself, kept out of the trace as `valid.self_exclusion` says.
///
/// The phases, in the order of the module doc: `buffer_and_scope`,
/// `tracer_steps`, `probe_steps`, `event_steps`, `trigger_steps`, and
/// the instance's `mkdir` first of all.
pub fn plan(
    valid: &ValidRecipe,
    instance: &str,
    group: &str,
    pids: &[u32],
    comm_pids: &[u32],
    own: &[u32],
) -> Plan {
    // A tracer this kernel offers only at the top level: the run works in the
    // top-level buffer, and every write there is undone from its before-image.
    let top = valid.tracer.as_ref().is_some_and(|t| t.at_top_level);
    // The flight recorder: the boot-mapped instance, armed in place.
    let instance = valid
        .persistent
        .as_ref()
        .map_or(instance, |(n, _)| n.as_str());
    let mut b = Builder {
        name: (!top).then_some(instance),
        top,
        steps: Vec::new(),
    };
    let dir = b.f("");
    let own = match valid.self_exclusion {
        SelfExclusion::Off => &[][..],
        _ => own,
    };
    // A fixed pid scope of a recipe with events of other tasks than the
    // current one: a filter on every event instead of the pid list.
    let (listed, filtered) = match pids_by_filter(valid) {
        true => (&[][..], pids),
        false => (pids, &[][..]),
    };
    buffer_and_scope(&mut b, valid, listed);
    let mut touches_top_level = match &valid.tracer {
        Some(t) => tracer_steps(&mut b, valid, t, pids, comm_pids, own),
        None => false,
    };
    if let Some(st) = &valid.stack {
        // The stack tracer is global: its filter and maximum are top-level
        // files restored from their before-image; it is switched on last of all
        // (below), so it measures the run rather than the rest of the apply.
        touches_top_level = true;
        if !st.filter.is_empty() {
            b.write(
                "stack_trace_filter".into(),
                st.filter.join(" "),
                WriteMode::Replace,
                Undo::Restore,
                st.span.clone(),
            );
        }
        b.write(
            "stack_max_size".into(),
            "0".into(),
            WriteMode::Replace,
            Undo::Restore,
            st.span.clone(),
        );
    }
    // Events kept to their tasks by filter leave out the run's own threads
    // already (none of them is in scope, and a switch or wakeup of a task in
    // scope is that task's).
    let own = if filtered.is_empty() { own } else { &[][..] };
    probe_steps(&mut b, valid, group, filtered, own);
    event_steps(&mut b, valid, filtered, own);
    trigger_steps(&mut b, valid, group);
    answer_steps(&mut b, valid, group, filtered, own, !listed.is_empty());
    let mut steps = b.steps;
    if let Some(st) = &valid.stack {
        steps.push(Step {
            op: Op::Sysctl {
                sysctl: Sysctl::StackTracerEnabled,
                value: "1".into(),
            },
            span: st.span.clone(),
        });
    }
    if valid.persistent.is_some() {
        steps = in_place(steps);
    } else if !top {
        steps.insert(
            0,
            Step {
                op: Op::Mkdir { dir: dir.clone() },
                span: None,
            },
        );
    }
    Plan {
        instance: dir,
        probe_group: group.to_string(),
        touches_top_level: touches_top_level || top,
        steps,
    }
}

/// The steps that arm an existing instance (the flight recorder's) rather than
/// a fresh one: nothing removes the instance afterwards, so every write the
/// instance's removal would have undone restores its before-image instead;
/// its size is fixed by the reservation made at boot, so `buffer_size_kb` is
/// not written.
fn in_place(steps: Vec<Step>) -> Vec<Step> {
    steps
        .into_iter()
        .filter(|s| !matches!(&s.op, Op::Write { file, .. } if file.ends_with("/buffer_size_kb")))
        .map(|mut s| {
            if let Op::Write { undo, .. } = &mut s.op
                && *undo == Undo::Nothing
            {
                *undo = Undo::Restore;
            }
            s
        })
        .collect()
}

/// The steps of a plan being built, and where its files are.
struct Builder<'a> {
    /// The run's instance (a bare name); `None` at the top level.
    name: Option<&'a str>,
    /// Whether the run works in the top-level buffer.
    top: bool,
    /// The steps so far, in order.
    steps: Vec<Step>,
}

impl Builder<'_> {
    /// Appends the write of `value` to `file`.
    fn write(&mut self, file: String, value: String, mode: WriteMode, undo: Undo, span: Span) {
        self.steps.push(Step {
            op: Op::Write {
                file,
                value,
                mode,
                undo,
            },
            span,
        });
    }

    /// The path of the run's own `file`, relative to tracefs.
    fn f(&self, file: &str) -> String {
        instance_file(self.name, file)
    }

    /// `undo` for a file of the run's instance; at the top level, the file is
    /// restored from its before-image instead.
    fn local(&self, undo: Undo) -> Undo {
        if self.top { Undo::Restore } else { undo }
    }
}

/// Tracing off, the ring buffer's size, clock, cpumask and overwrite mode, and
/// the pid scope (fork following, the recipe's pids).
fn buffer_and_scope(b: &mut Builder, valid: &ValidRecipe, pids: &[u32]) {
    b.write(
        b.f("tracing_on"),
        "0".into(),
        WriteMode::Replace,
        b.local(Undo::Nothing),
        None,
    );
    if b.top {
        // Whatever the top-level buffer held before is not this run's.
        b.write(
            "trace".into(),
            String::new(),
            WriteMode::Replace,
            Undo::Nothing,
            None,
        );
    }
    if let Some((kb, span)) = &valid.buffer_size_kb {
        b.write(
            b.f("buffer_size_kb"),
            kb.to_string(),
            WriteMode::Replace,
            Undo::Restore,
            span.clone(),
        );
    }
    if let Some((clock, span)) = &valid.clock {
        b.write(
            b.f("trace_clock"),
            clock.clone(),
            WriteMode::Replace,
            Undo::Restore,
            span.clone(),
        );
    }
    if let Some((mask, span)) = &valid.cpumask {
        b.write(
            b.f("tracing_cpumask"),
            mask.clone(),
            WriteMode::Replace,
            Undo::Restore,
            span.clone(),
        );
    }
    if let Some((on, span)) = &valid.overwrite {
        b.write(
            b.f("options/overwrite"),
            bit(*on),
            WriteMode::Replace,
            Undo::Restore,
            span.clone(),
        );
    }
    if valid.copy_marker {
        // The instance is removed at teardown: nothing to restore.
        b.write(
            b.f("options/copy_trace_marker"),
            "1".into(),
            WriteMode::Replace,
            Undo::Nothing,
            None,
        );
    }
    if valid.recipe.scope.follow_forks {
        b.write(
            b.f("options/event-fork"),
            "1".into(),
            WriteMode::Replace,
            Undo::Restore,
            None,
        );
    }
    if !pids.is_empty() {
        b.write(
            b.f("set_event_pid"),
            pid_list(pids),
            WriteMode::Replace,
            b.local(Undo::Write(String::new())),
            None,
        );
    }
}

/// The tracer `t`: its function and graph filters, pid scope, options and
/// global knobs, then the tracer itself. Returns whether a step writes a
/// global top-level file.
fn tracer_steps(
    b: &mut Builder,
    valid: &ValidRecipe,
    t: &ResolvedTracer,
    pids: &[u32],
    comm_pids: &[u32],
    own: &[u32],
) -> bool {
    let mut touches_top_level = false;
    for (file, list) in [
        ("set_ftrace_filter", &t.functions),
        ("set_ftrace_notrace", &t.notrace),
    ] {
        if !list.is_empty() {
            b.write(
                b.f(file),
                list.join(" "),
                WriteMode::Replace,
                b.local(Undo::Write(String::new())),
                t.span.clone(),
            );
        }
    }
    for (file, list) in [
        ("set_graph_function", &t.graph_functions),
        ("set_graph_notrace", &t.graph_notrace),
    ] {
        if list.is_empty() {
            continue;
        }
        // Global on kernels whose instances have no graph filter of their own:
        // restored from its before-image.
        let (file, undo) = if t.graph_filter_at_top {
            touches_top_level = true;
            (file.to_string(), Undo::Restore)
        } else {
            (b.f(file), Undo::Write(String::new()))
        };
        b.write(
            file,
            list.join(" "),
            WriteMode::Replace,
            undo,
            t.span.clone(),
        );
    }
    if t.is_function_tracer() {
        let mut ftrace_pids = pids.to_vec();
        ftrace_pids.extend_from_slice(comm_pids);
        if !ftrace_pids.is_empty() {
            b.write(
                b.f("set_ftrace_pid"),
                pid_list(&ftrace_pids),
                WriteMode::Replace,
                b.local(Undo::Write(String::new())),
                None,
            );
        }
        if valid.self_exclusion == (SelfExclusion::Filter { ftrace: true }) && !own.is_empty() {
            b.write(
                b.f("set_ftrace_notrace_pid"),
                pid_list(own),
                WriteMode::Replace,
                b.local(Undo::Write(String::new())),
                None,
            );
        }
        if valid.recipe.scope.follow_forks {
            b.write(
                b.f("options/function-fork"),
                "1".into(),
                WriteMode::Replace,
                Undo::Restore,
                None,
            );
        }
    }
    for (opt, on) in &t.options {
        b.write(
            b.f(&format!("options/{opt}")),
            bit(*on),
            WriteMode::Replace,
            Undo::Restore,
            t.span.clone(),
        );
    }
    // Global knobs: top-level files, restored from their before-image.
    for (file, value) in [
        ("max_graph_depth", t.max_graph_depth.map(u64::from)),
        ("tracing_thresh", t.thresh_us),
    ] {
        if let Some(value) = value {
            touches_top_level = true;
            b.write(
                file.into(),
                value.to_string(),
                WriteMode::Replace,
                Undo::Restore,
                t.span.clone(),
            );
        }
    }
    // hwlat's, osnoise's and timerlat's parameters: global files
    // (hwlat_detector/, osnoise/), in the order validation chose.
    for p in &t.params {
        touches_top_level = true;
        b.write(
            p.file.clone(),
            p.value.clone(),
            WriteMode::Replace,
            Undo::Restore,
            p.span.clone(),
        );
    }
    // The function profiler is global; switching it on resets its counts
    // (kernel/trace/ftrace.c, `ftrace_profile_write`).
    if t.function_profile {
        touches_top_level = true;
        b.write(
            "function_profile_enabled".into(),
            "1".into(),
            WriteMode::Replace,
            Undo::Restore,
            t.span.clone(),
        );
    }
    // A latency tracer reports the largest latency since tracing_max_latency
    // was last reset (ftrace.rst: "echo 0 > tracing_max_latency"): reset it
    // so the run measures its own; a global one is restored afterwards.
    match t.max_latency {
        Some(MaxLatencyAt::Instance) => b.write(
            b.f("tracing_max_latency"),
            "0".into(),
            WriteMode::Replace,
            b.local(Undo::Nothing),
            t.span.clone(),
        ),
        Some(MaxLatencyAt::TopLevel) => {
            touches_top_level = true;
            b.write(
                "tracing_max_latency".into(),
                "0".into(),
                WriteMode::Replace,
                Undo::Restore,
                t.span.clone(),
            );
        }
        None => {}
    }
    b.write(
        b.f("current_tracer"),
        t.name.clone(),
        WriteMode::Replace,
        b.local(Undo::Write("nop".into())),
        t.span.clone(),
    );
    touches_top_level
}

/// Each probe's definition in group `group`, then its filter (and-ed with
/// the scope's on `pids`, see [`pid_filter`]), stacktrace trigger and enable
/// in the run's instance.
fn probe_steps(b: &mut Builder, valid: &ValidRecipe, group: &str, pids: &[u32], own: &[u32]) {
    for p in &valid.probes {
        b.write(
            p.kind.events_file().into(),
            p.definition(group),
            WriteMode::Append,
            Undo::Append(p.removal(group)),
            p.span.clone(),
        );
        let scope = pid_filter("", pids);
        let filter = crate::validate::and_filters(p.filter.as_deref(), scope.as_deref());
        let filter = without_own(filter.as_deref(), "", own, valid.self_exclusion);
        let dir = b.f(&format!("events/{group}/{}", p.event));
        enable_event(b, &dir, filter.as_deref(), p.stacktrace, &p.span);
    }
}

/// Each event's filter (and-ed with the scope's on `pids`: the tasks the
/// event is of, see [`pid_filter`]), stacktrace trigger and enable.
fn event_steps(b: &mut Builder, valid: &ValidRecipe, pids: &[u32], own: &[u32]) {
    for ev in &valid.events {
        let (system, event) = ev.name.split_once(':').unwrap_or((&ev.name, ""));
        let scope = pid_filter(&ev.name, pids);
        let filter = crate::validate::and_filters(ev.filter.as_deref(), scope.as_deref());
        let filter = without_own(filter.as_deref(), &ev.name, own, valid.self_exclusion);
        let dir = b.f(&format!("events/{system}/{event}"));
        enable_event(b, &dir, filter.as_deref(), ev.stacktrace, &ev.span);
    }
}

/// The recipe's triggers, appended to an event's `trigger` file (a probe's in
/// group `group`) or to `set_ftrace_filter`.
fn trigger_steps(b: &mut Builder, valid: &ValidRecipe, group: &str) {
    let mut triggers: Vec<&ResolvedTrigger> = valid.triggers.iter().collect();
    triggers.sort_by_key(|t| function_trigger_rank(t));
    for t in triggers {
        let file = match &t.event {
            Some(event) => {
                let (system, event) = event.split_once(':').unwrap_or((event, ""));
                let system = if t.on_probe { group } else { system };
                b.f(&format!("events/{system}/{event}/trigger"))
            }
            None => b.f("set_ftrace_filter"),
        };
        b.write(
            file,
            t.command.clone(),
            WriteMode::Append,
            Undo::Append(t.removal.clone()),
            t.span.clone(),
        );
    }
}

/// The hist triggers (and synthetic events) of the answers the kernel
/// computes ([`crate::answer::kernel`]), each appended and undone by its
/// removal. Each trigger's condition carries the filter the run writes on its
/// event (the recipe's and the scope's, with `pids` and the run's own threads
/// `own` as on the event itself): a hist trigger counts what it sees, and
/// the kernel calls an unconditional one before the event's pid list or
/// filter is looked at (kernel/trace/trace_events_trigger.c,
/// `trace_trigger_soft_disabled`). For the same reason, when the scope is the
/// kernel's pid list (`pid_list`), a trigger without a condition gets the
/// always-true `common_pid >= 0`: a conditional trigger runs only for an event
/// the pid list let through (`trace_event_buffer_reserve` drops the others
/// first), as the recorded events are.
fn answer_steps(
    b: &mut Builder,
    valid: &ValidRecipe,
    group: &str,
    pids: &[u32],
    own: &[u32],
    pid_list: bool,
) {
    let names = crate::answer::kernel::RunNames { group };
    for a in &valid.answers {
        let Some(k) = &a.kernel else {
            continue;
        };
        let scope = |event: &str| {
            let own_filter = a
                .event_filters
                .iter()
                .find(|(e, _)| e == event)
                .and_then(|(_, f)| f.clone());
            let pid = pid_filter(event, pids);
            let filter = crate::validate::and_filters(own_filter.as_deref(), pid.as_deref());
            without_own(filter.as_deref(), event, own, valid.self_exclusion)
                .or_else(|| pid_list.then(|| "common_pid >= 0".to_string()))
        };
        for w in k.writes(&names, &scope) {
            let file = match w.global {
                true => w.file,
                false => b.f(&w.file),
            };
            b.write(
                file,
                w.value,
                WriteMode::Append,
                Undo::Append(w.removal),
                a.span.clone(),
            );
        }
    }
}

/// Where function trigger `t` is written among the others: the kernel runs
/// the commands on one function in the reverse order they were written (each
/// command is a probe with an ftrace_ops of its own, added at the head of
/// ftrace's list: kernel/trace/ftrace.c, `add_ftrace_ops`). A `traceoff` is
/// written first so that it acts last, a `traceon` last so that it acts first:
/// a `stacktrace`, `snapshot` or `enable_event` on the same call then records
/// while tracing is on, whatever the recipe's order. Event triggers keep theirs.
fn function_trigger_rank(t: &ResolvedTrigger) -> u8 {
    match (&t.event, t.action.as_str()) {
        (None, "traceoff") => 0,
        (None, "traceon") => 2,
        _ => 1,
    }
}

/// Filter, stacktrace trigger (under the same filter) and enable of the event directory `dir`
/// (`instances/NAME/events/SYSTEM/EVENT`, or `events/SYSTEM/EVENT` at the top
/// level, where the filter and enable are restored from their before-image).
fn enable_event(b: &mut Builder, dir: &str, filter: Option<&str>, stacktrace: bool, span: &Span) {
    let ef = |name: &str| format!("{dir}/{name}");
    if let Some(filter) = filter {
        b.write(
            ef("filter"),
            filter.to_string(),
            WriteMode::Replace,
            b.local(Undo::Write("0".into())),
            span.clone(),
        );
    }
    if stacktrace {
        // The kernel runs a stacktrace trigger after the event is committed or
        // discarded, so an unconditional trigger records the stack of every
        // event the filter dropped too (kernel/trace/trace_events_trigger.c,
        // `event_triggers_post_call`): the trigger carries the same filter.
        let trigger = match filter {
            Some(filter) => format!("stacktrace if {filter}"),
            None => "stacktrace".into(),
        };
        b.write(
            ef("trigger"),
            trigger,
            WriteMode::Append,
            Undo::Append("!stacktrace".into()),
            span.clone(),
        );
    }
    b.write(
        ef("enable"),
        "1".into(),
        WriteMode::Replace,
        b.local(Undo::Write("0".into())),
        span.clone(),
    );
}

/// `common_flags` bits of an event recorded in interrupt context:
/// `TRACE_FLAG_HARDIRQ` (0x08), `TRACE_FLAG_SOFTIRQ` (0x10) and
/// `TRACE_FLAG_NMI` (0x40) of include/linux/trace_events.h, `enum
/// trace_flag_type` (user-visible, the same since Linux 4.x).
const IRQ_CONTEXT_FLAGS: &str = "0x58";

/// The filter of event `name`: `filter` (the recipe's, if any) and-ed with what
/// keeps the run's own threads `own` out of it ([`SelfExclusion::Filter`]).
/// An event fired in the process context of one of them is dropped; one
/// fired in interrupt context is kept (it belongs to no task: the current one
/// is whoever the interrupt hit); a two-task sched event is dropped only when
/// every task it is about is one of them, so a switch between one of the
/// run's threads and another task stays (it is the other task's switch in or
/// out), and so does a wakeup of another task by one of the run's threads. A
/// switch between one of them and the idle task (pid 0) goes too: on an idle
/// CPU, the run's threads then leave no trace of their own (the reader's and
/// the main thread's wake-ups), and the CPU reads as idle while they ran,
/// whereas every task the trace is about keeps its switches.
fn without_own(
    filter: Option<&str>,
    name: &str,
    own: &[u32],
    how: SelfExclusion,
) -> Option<String> {
    if own.is_empty() || how == SelfExclusion::Off {
        return filter.map(str::to_string);
    }
    let none_of = |field: &str, own: &[u32]| {
        pid_runs(own)
            .into_iter()
            .map(|(lo, hi)| match lo == hi {
                true => format!("{field} != {lo}"),
                false => format!("({field} < {lo} || {field} > {hi})"),
            })
            .collect::<Vec<_>>()
            .join(" && ")
    };
    let with_idle = [own, &[0]].concat();
    // An event of other tasks than the current one is left out when every
    // task it is of is one of the run's (the pid lists see only the current
    // task: kernel/trace/trace_events.c, `trace_event_ignore_this_pid`).
    let fields = crate::validate::subjects(name).map(|s| {
        let mut f = s.pids.to_vec();
        if s.current {
            f.push("common_pid");
        }
        f
    });
    let scope = match fields.as_deref() {
        Some([field]) => none_of(field, own),
        Some(fields) => fields
            .iter()
            .map(|f| format!("({})", none_of(f, &with_idle)))
            .collect::<Vec<_>>()
            .join(" || "),
        None => format!(
            "({}) || (common_flags & {IRQ_CONTEXT_FLAGS})",
            none_of("common_pid", own)
        ),
    };
    Some(match filter {
        Some(f) => format!("({f}) && ({scope})"),
        None => scope,
    })
}

fn pid_list(pids: &[u32]) -> String {
    pids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

fn bit(on: bool) -> String {
    if on { "1" } else { "0" }.to_string()
}

impl Plan {
    /// Top-level (global) files the plan writes, outside its instance and
    /// besides probe definitions, and the sysctls it sets: these are restored
    /// from their before-image.
    pub(crate) fn top_level_files(&self) -> Vec<&str> {
        self.steps
            .iter()
            .filter_map(|s| match &s.op {
                Op::Write {
                    file,
                    undo: Undo::Restore,
                    ..
                } if !file.starts_with("instances/") => Some(file.as_str()),
                Op::Sysctl { sysctl, .. } => Some(sysctl.name()),
                _ => None,
            })
            .collect()
    }
}

/// How a shell rendering of a step writes paths and values: `check --plan`
/// shows tracefs-relative paths and `echo "VALUE"`; the sh export
/// `"$T"/'PATH'` and `printf '%s\n' 'VALUE'`.
pub(crate) struct Shell {
    /// A path relative to tracefs, as the shell is to read it.
    pub(crate) path: fn(&str) -> String,
    /// The command that prints a value as one line.
    pub(crate) line: fn(&str) -> String,
}

/// The dialect of `check --plan`.
const PLAN_SHELL: Shell = Shell {
    path: str::to_string,
    line: |v| format!("echo {v:?}"),
};

impl Op {
    /// The change as one shell command in dialect `sh`.
    pub(crate) fn command(&self, sh: &Shell) -> String {
        match self {
            Op::Mkdir { dir } => format!("mkdir {}", (sh.path)(dir)),
            Op::Write {
                file, value, mode, ..
            } => format!(
                "{} {} {}",
                (sh.line)(value),
                mode.redirection(),
                (sh.path)(file)
            ),
            Op::Sysctl { sysctl, value } => {
                format!("{} > {}", (sh.line)(value), sysctl.path().display())
            }
        }
    }

    /// The shell command (dialect `sh`) that undoes the change, when it is one
    /// fixed command; `None` when there is nothing to undo ([`Undo::Nothing`]) or
    /// a before-image to write back ([`Undo::Restore`]).
    pub(crate) fn undo_command(&self, sh: &Shell) -> Option<String> {
        let (file, value, mode) = match self {
            Op::Mkdir { dir } => return Some(format!("rmdir {}", (sh.path)(dir))),
            Op::Write {
                file,
                undo: Undo::Write(v),
                ..
            } => (file, v, WriteMode::Replace),
            Op::Write {
                file,
                undo: Undo::Append(v),
                ..
            } => (file, v, WriteMode::Append),
            Op::Write { .. } | Op::Sysctl { .. } => return None,
        };
        Some(format!(
            "{} {} {}",
            (sh.line)(value),
            mode.redirection(),
            (sh.path)(file)
        ))
    }
}

impl fmt::Display for Step {
    /// The change as a shell command (`echo "1" > .../enable`); the alternate form
    /// (`{:#}`) adds its undo in parentheses.
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(out, "{}", self.op.command(&PLAN_SHELL))?;
        if !out.alternate() {
            return Ok(());
        }
        if let Some(undo) = self.op.undo_command(&PLAN_SHELL) {
            return write!(out, "    (undo: {undo})");
        }
        match &self.op {
            Op::Write {
                undo: Undo::Restore,
                ..
            }
            | Op::Sysctl { .. } => write!(out, "    (undo: write back the value read before)"),
            Op::Write { file, .. } if file.starts_with("instances/") => {
                write!(out, "    (undo: removed with the instance)")
            }
            _ => write!(out, "    (no undo: what it cleared is not kept)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::{ResolvedProbe, ResolvedTracer};

    fn valid() -> ValidRecipe {
        let mut v = ValidRecipe::bare(Default::default());
        v.probes = vec![ResolvedProbe::open_ret()];
        v
    }

    fn files(p: &Plan) -> Vec<String> {
        p.steps
            .iter()
            .map(|s| match &s.op {
                Op::Mkdir { dir } => format!("mkdir {dir}"),
                Op::Write { file, .. } => file.clone(),
                Op::Sysctl { sysctl, .. } => sysctl.name().to_string(),
            })
            .collect()
    }

    #[test]
    fn a_latency_tracer_resets_its_max_and_the_stack_tracer_is_switched_on_last() {
        let mut v = valid();
        v.probes.clear();
        let tracer = |at| ResolvedTracer {
            max_latency: Some(at),
            ..ResolvedTracer::named("wakeup_rt")
        };
        v.tracer = Some(tracer(MaxLatencyAt::Instance));
        let p = plan(&v, "i", "g", &[], &[], &[]);
        let f = files(&p);
        let max = f
            .iter()
            .position(|f| f == "instances/i/tracing_max_latency");
        let cur = f.iter().position(|f| f == "instances/i/current_tracer");
        assert!(max.is_some() && max < cur, "{f:?}");
        assert!(!p.touches_top_level);

        v.tracer = Some(tracer(MaxLatencyAt::TopLevel));
        v.stack = Some(crate::validate::ResolvedStack {
            filter: vec!["vfs_read".into()],
            span: None,
        });
        let p = plan(&v, "i", "g", &[], &[], &[]);
        assert!(p.touches_top_level);
        assert_eq!(
            p.top_level_files(),
            [
                "tracing_max_latency",
                "stack_trace_filter",
                "stack_max_size",
                "kernel/stack_tracer_enabled"
            ]
        );
        assert_eq!(
            p.steps.last().map(|s| &s.op),
            Some(&Op::Sysctl {
                sysctl: Sysctl::StackTracerEnabled,
                value: "1".into()
            })
        );
        assert_eq!(write_of(&p, "stack_max_size"), Some("0"));
    }

    #[test]
    fn a_functions_traceoff_is_written_first_and_its_traceon_last() {
        let mut v = valid();
        v.probes.clear();
        let trigger = |event: Option<&str>, action: &str| ResolvedTrigger {
            event: event.map(str::to_string),
            on_probe: false,
            command: format!("{}:{action}", event.unwrap_or("force_sig_fault")),
            removal: String::new(),
            target: None,
            action: action.into(),
            span: None,
        };
        v.triggers = vec![
            trigger(None, "traceon"),
            trigger(None, "stacktrace"),
            trigger(Some("sched:sched_process_exec"), "traceoff"),
            trigger(None, "traceoff"),
            trigger(None, "snapshot"),
        ];
        let p = plan(&v, "i", "g", &[], &[], &[]);
        let written: Vec<&str> = p
            .steps
            .iter()
            .filter_map(|s| match &s.op {
                Op::Write { file, value, .. }
                    if file.ends_with("trigger") || file.ends_with("set_ftrace_filter") =>
                {
                    Some(value.as_str())
                }
                _ => None,
            })
            .collect();
        // The kernel runs a function's commands last written first: traceon
        // acts first, traceoff last; event triggers keep the recipe's order.
        assert_eq!(
            written,
            [
                "force_sig_fault:traceoff",
                "force_sig_fault:stacktrace",
                "sched:sched_process_exec:traceoff",
                "force_sig_fault:snapshot",
                "force_sig_fault:traceon"
            ]
        );
    }

    #[test]
    fn a_probe_is_defined_before_it_is_enabled_and_removed_exactly() {
        let p = plan(
            &valid(),
            "trace-recipe-x-1",
            "trace_recipe_1",
            &[],
            &[],
            &[],
        );
        assert_eq!(
            files(&p),
            [
                "mkdir instances/trace-recipe-x-1",
                "instances/trace-recipe-x-1/tracing_on",
                "kprobe_events",
                "instances/trace-recipe-x-1/events/trace_recipe_1/open_ret/filter",
                "instances/trace-recipe-x-1/events/trace_recipe_1/open_ret/enable",
            ]
        );
        let Op::Write {
            value, mode, undo, ..
        } = &p.steps[2].op
        else {
            panic!("not a write")
        };
        assert_eq!(
            value,
            "r:trace_recipe_1/open_ret do_sys_openat2 ret=$retval:s32"
        );
        assert_eq!(*mode, WriteMode::Append);
        assert_eq!(*undo, Undo::Append("-:trace_recipe_1/open_ret".into()));
        assert!(!p.touches_top_level);
    }

    #[test]
    fn a_top_level_tracer_restores_every_file_it_writes() {
        let mut v = valid();
        v.tracer = Some(ResolvedTracer {
            graph_functions: vec!["vfs_read".into()],
            max_graph_depth: Some(3),
            at_top_level: true,
            graph_filter_at_top: true,
            ..ResolvedTracer::named("function_graph")
        });
        let p = plan(&v, "trace-recipe-x-1", "trace_recipe_1", &[7], &[], &[]);
        assert_eq!(p.instance, "");
        assert!(p.touches_top_level);
        for s in &p.steps {
            match &s.op {
                Op::Mkdir { .. } => panic!("no instance at the top level"),
                Op::Write { file, undo, .. } => {
                    assert!(!file.starts_with("instances/"), "{file}");
                    let ok =
                        matches!(undo, Undo::Restore) || file == "trace" || file == "kprobe_events";
                    assert!(ok, "{file}: {undo:?}");
                }
                Op::Sysctl { .. } => {}
            }
        }
        assert!(files(&p).contains(&"set_ftrace_pid".to_string()));
        assert!(files(&p).contains(&"set_graph_function".to_string()));
    }

    fn write_of<'a>(p: &'a Plan, file: &str) -> Option<&'a str> {
        p.steps.iter().find_map(|s| match &s.op {
            Op::Write { file: f, value, .. } if f.ends_with(file) => Some(value.as_str()),
            _ => None,
        })
    }

    #[test]
    fn the_runs_own_threads_are_kept_out_by_filters_that_keep_interrupts_and_other_tasks() {
        let mut v = valid();
        v.probes.clear();
        v.events = [
            "sched:sched_switch",
            "sched:sched_waking",
            "syscalls:sys_enter_read",
        ]
        .iter()
        .map(|n| crate::validate::ResolvedEvent {
            name: n.to_string(),
            filter: (*n == "sched:sched_waking").then(|| "prio < 100".to_string()),
            stacktrace: false,
            span: None,
        })
        .collect();
        let p = plan(&v, "i", "g", &[], &[], &[11, 12, 20]);
        // No per-CPU pid list: it would drop every interrupt that hits one of ours.
        assert_eq!(write_of(&p, "/set_event_notrace_pid"), None);
        assert_eq!(
            write_of(&p, "sched_switch/filter"),
            Some(
                "(prev_pid != 0 && (prev_pid < 11 || prev_pid > 12) && prev_pid != 20) || (next_pid != 0 && (next_pid < 11 || next_pid > 12) && next_pid != 20)"
            )
        );
        assert_eq!(
            write_of(&p, "sched_waking/filter"),
            Some("(prio < 100) && ((pid < 11 || pid > 12) && pid != 20)")
        );
        assert_eq!(
            write_of(&p, "sys_enter_read/filter"),
            Some(
                "((common_pid < 11 || common_pid > 12) && common_pid != 20) || (common_flags & 0x58)"
            )
        );

        v.self_exclusion = SelfExclusion::Off;
        let p = plan(&v, "i", "g", &[], &[], &[11]);
        assert_eq!(write_of(&p, "sched_switch/filter"), None);
        assert_eq!(write_of(&p, "sched_waking/filter"), Some("prio < 100"));
    }

    #[test]
    fn a_pid_scope_is_a_filter_on_each_event_by_the_tasks_it_is_of() {
        let mut v = valid();
        v.events = [
            "sched:sched_wakeup",
            "sched:sched_switch",
            "sched:sched_migrate_task",
            "syscalls:sys_enter_read",
        ]
        .iter()
        .map(|n| crate::validate::ResolvedEvent {
            name: n.to_string(),
            filter: (*n == "sched:sched_wakeup").then(|| "prio < 100".to_string()),
            stacktrace: false,
            span: None,
        })
        .collect();
        let p = plan(&v, "i", "g", &[7], &[], &[11]);
        // The kernel's pid list sees only the current task: not written.
        assert_eq!(write_of(&p, "/set_event_pid"), None);
        assert_eq!(
            write_of(&p, "sched_wakeup/filter"),
            Some("(prio < 100) && (pid == 7)")
        );
        assert_eq!(
            write_of(&p, "sched_switch/filter"),
            Some("prev_pid == 7 || next_pid == 7")
        );
        assert_eq!(write_of(&p, "sched_migrate_task/filter"), Some("pid == 7"));
        assert_eq!(
            write_of(&p, "sys_enter_read/filter"),
            Some("common_pid == 7")
        );
        // Probes too.
        assert!(
            files(&p)
                .iter()
                .zip(&p.steps)
                .any(|(f, s)| f.starts_with("instances/i/events/g/")
                    && f.ends_with("/filter")
                    && matches!(&s.op, Op::Write { value, .. } if value.contains("common_pid == 7"))),
            "{:?}",
            files(&p)
        );
        // Children join the pid list at run time: the kernel's list, no filter.
        v.recipe.scope.follow_forks = true;
        let p = plan(&v, "i", "g", &[7], &[], &[]);
        assert_eq!(write_of(&p, "/set_event_pid"), Some("7"));
        assert_eq!(write_of(&p, "sched_wakeup/filter"), Some("prio < 100"));
        assert_eq!(write_of(&p, "sched_migrate_task/filter"), None);
        // An event trigger's condition runs before the event's filter: the
        // pid list keeps scoping it.
        v.recipe.scope.follow_forks = false;
        v.triggers.push(ResolvedTrigger {
            event: Some("sched:sched_switch".into()),
            on_probe: false,
            command: "traceoff if prev_state == 2".into(),
            removal: "!traceoff if prev_state == 2".into(),
            target: None,
            action: "traceoff".into(),
            span: None,
        });
        let p = plan(&v, "i", "g", &[7], &[], &[]);
        assert_eq!(write_of(&p, "/set_event_pid"), Some("7"));
        assert_eq!(write_of(&p, "sched_migrate_task/filter"), None);
        v.triggers.clear();
        // Without an event of another task, the pid list as before.
        v.events.retain(|e| e.name == "syscalls:sys_enter_read");
        let p = plan(&v, "i", "g", &[7], &[], &[]);
        assert_eq!(write_of(&p, "/set_event_pid"), Some("7"));
        assert_eq!(write_of(&p, "sys_enter_read/filter"), None);
    }

    #[test]
    fn a_function_tracer_also_gets_set_ftrace_notrace_pid() {
        let mut v = valid();
        v.tracer = Some(ResolvedTracer::named("function_graph"));
        let p = plan(&v, "i", "g", &[], &[], &[5, 6]);
        assert_eq!(write_of(&p, "/set_ftrace_notrace_pid"), Some("5 6"));
        let tracer_at = files(&p).iter().position(|f| f.ends_with("current_tracer"));
        let notrace_at = files(&p)
            .iter()
            .position(|f| f.ends_with("set_ftrace_notrace_pid"));
        assert!(notrace_at < tracer_at, "{:?}", files(&p));
        v.self_exclusion = SelfExclusion::Filter { ftrace: false };
        let p = plan(&v, "i", "g", &[], &[], &[5, 6]);
        assert_eq!(write_of(&p, "/set_ftrace_notrace_pid"), None);
    }
}
