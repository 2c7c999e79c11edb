//! `[tracer]`: the tracer (available_tracers), its function filters
//! (set_ftrace_filter / set_ftrace_notrace / set_graph_function /
//! set_graph_notrace, globs and `:mod:NAME`, checked against
//! available_filter_functions), `max_graph_depth`, `thresh_us` (tracing_thresh)
//! and `options/NAME`; `[stack]`: the stack tracer and its stack_trace_filter.
//!
//! Source of truth: Documentation/trace/ftrace.rst ("The File System",
//! "dynamic ftrace", "function graph tracer").

use super::noise::resolve_noise_params;
use super::{Ctx, Span};
use crate::kernel::glob_match;
use crate::recipe::{Stack, Tracer};
use crate::suggest;

pub(crate) use super::noise::NoiseParam;

/// Tracers that trace kernel functions through ftrace (need available_filter_functions).
pub(crate) const FUNCTION_TRACERS: &[&str] = &["function", "function_graph"];

/// Tracers that keep the largest latency they saw in `tracing_max_latency`
/// (µs): the latency tracers, which also keep the trace of that worst case in
/// their max buffer (what `trace` then shows, in the latency format), and
/// hwlat, osnoise (a period's noise) and timerlat (a thread's latency), which
/// only update the number (kernel/trace/trace_irqsoff.c, trace_sched_wakeup.c,
/// trace_hwlat.c, trace_osnoise.c `notify_new_max_latency`;
/// Documentation/trace/ftrace.rst "irqsoff"). A run resets the file and, where
/// it is the global one, restores it.
/// The first six keep the trace of their worst case in the max buffer
/// (`use_max_tr`; the run's output saves it).
pub(crate) const MAX_LATENCY_TRACERS: &[&str] = &[
    "irqsoff",
    "preemptoff",
    "preemptirqsoff",
    "wakeup",
    "wakeup_rt",
    "wakeup_dl",
    "hwlat",
    "osnoise",
    "timerlat",
];

/// Where a run's `tracing_max_latency` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaxLatencyAt {
    /// The run's instance has its own (Linux 4.x and later), gone with it.
    Instance,
    /// The global top-level file: reset before, restored from its before-image after.
    TopLevel,
}

/// The kernel config option that provides each tracer (kernel/trace/Kconfig).
const TRACER_CONFIGS: &[(&str, &str)] = &[
    ("function", "CONFIG_FUNCTION_TRACER"),
    ("function_graph", "CONFIG_FUNCTION_GRAPH_TRACER"),
    ("irqsoff", "CONFIG_IRQSOFF_TRACER"),
    ("preemptoff", "CONFIG_PREEMPT_TRACER"),
    (
        "preemptirqsoff",
        "CONFIG_IRQSOFF_TRACER and CONFIG_PREEMPT_TRACER",
    ),
    ("wakeup", "CONFIG_SCHED_TRACER"),
    ("wakeup_rt", "CONFIG_SCHED_TRACER"),
    ("wakeup_dl", "CONFIG_SCHED_TRACER"),
    ("hwlat", "CONFIG_HWLAT_TRACER"),
    ("osnoise", "CONFIG_OSNOISE_TRACER"),
    ("timerlat", "CONFIG_TIMERLAT_TRACER"),
    ("mmiotrace", "CONFIG_MMIOTRACE"),
    ("blk", "CONFIG_BLK_DEV_IO_TRACE"),
];

/// Trace options that came with a known release, and what needs them
/// besides: `func-args` and `funcgraph-args` (Linux 6.15,
/// kernel/trace/trace_functions.c `func_flags` and
/// trace_functions_graph.c `trace_opts`) exist where CONFIG_FUNCTION_TRACE_ARGS
/// is set (kernel/trace/Kconfig: an architecture with the function argument
/// access API and CONFIG_DEBUG_INFO_BTF).
const VERSIONED_OPTIONS: &[(&str, (u32, u32), &str)] = &[
    (
        "func-args",
        (6, 15),
        "kernels built with CONFIG_FUNCTION_TRACE_ARGS (BTF and an architecture that reads function arguments)",
    ),
    (
        "funcgraph-args",
        (6, 15),
        "kernels built with CONFIG_FUNCTION_TRACE_ARGS (BTF and an architecture that reads function arguments)",
    ),
];

/// A `[tracer]` that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedTracer {
    /// The tracer to write to `current_tracer`.
    pub(crate) name: String,
    /// `set_ftrace_filter` entries.
    pub(crate) functions: Vec<String>,
    /// `set_ftrace_notrace` entries.
    pub(crate) notrace: Vec<String>,
    /// `set_graph_function` entries.
    pub(crate) graph_functions: Vec<String>,
    /// `set_graph_notrace` entries.
    pub(crate) graph_notrace: Vec<String>,
    /// `max_graph_depth` (a top-level, global file).
    pub(crate) max_graph_depth: Option<u32>,
    /// `tracing_thresh` in µs (a top-level, global file).
    pub(crate) thresh_us: Option<u64>,
    /// `options/NAME` values, sorted by name.
    pub(crate) options: Vec<(String, bool)>,
    /// Whether this kernel offers the tracer only at the top level (not in
    /// instances): the run then works in the top-level buffer.
    pub(crate) at_top_level: bool,
    /// Whether set_graph_function / set_graph_notrace are global top-level files
    /// on this kernel (instances have none), rather than the instance's own.
    pub(crate) graph_filter_at_top: bool,
    /// For a tracer of [`MAX_LATENCY_TRACERS`], where the `tracing_max_latency`
    /// it updates is: reset to 0 before the run, read (with the max trace)
    /// before teardown. `None` for other tracers.
    pub(crate) max_latency: Option<MaxLatencyAt>,
    /// `function_profile = true`: the function profiler runs for the run.
    pub(crate) function_profile: bool,
    /// `[tracer.hwlat]`, `[tracer.osnoise]`, `[tracer.timerlat]`: global
    /// parameter files and their values, in the order they are written.
    pub(crate) params: Vec<NoiseParam>,
    /// The `[tracer]` table.
    pub(crate) span: Span,
}

impl ResolvedTracer {
    /// Whether the tracer traces functions (so set_ftrace_pid and function-fork apply).
    pub(crate) fn is_function_tracer(&self) -> bool {
        FUNCTION_TRACERS.contains(&self.name.as_str())
    }
}

#[cfg(test)]
impl ResolvedTracer {
    /// For tests: tracer `name` in the run's instance, with no function lists,
    /// options, parameters or limits; set the rest with struct update syntax.
    pub(crate) fn named(name: &str) -> Self {
        ResolvedTracer {
            name: name.into(),
            functions: Vec::new(),
            notrace: Vec::new(),
            graph_functions: Vec::new(),
            graph_notrace: Vec::new(),
            max_graph_depth: None,
            thresh_us: None,
            options: Vec::new(),
            at_top_level: false,
            graph_filter_at_top: false,
            max_latency: None,
            function_profile: false,
            params: Vec::new(),
            span: None,
        }
    }
}

/// The kernel fact reported when function tracing is refused: the message and help.
pub(super) fn function_tracing_refused(why: &str) -> (String, String) {
    (
        format!("this kernel refuses the function tracer: reading available_filter_functions fails ({why})"),
        "the function tracer needs CONFIG_FUNCTION_TRACER and CONFIG_DYNAMIC_FTRACE, and no lockdown or security module denying tracefs; run this recipe on such a kernel (see the kernel lab in README.md)".into(),
    )
}

/// Checks `[tracer]`; `None` when there is none or it is a bare `nop`.
pub(super) fn resolve_tracer(cx: &mut Ctx<'_>, t: &Tracer) -> Option<ResolvedTracer> {
    let span = cx.key_span(&path!("tracer"));
    let name = t.name.clone().unwrap_or_else(|| "nop".into());
    let name_span = cx.span(&path!("tracer", "name")).or(span.clone());
    let before = cx.diags.len();
    let is_function = FUNCTION_TRACERS.contains(&name.as_str());
    if !cx.facts.tracers.contains(&name) {
        // Only what this kernel allows: a function tracer it lists in
        // available_tracers but refuses to run is no suggestion.
        let refused = cx.facts.filter_functions().is_err();
        let usable = |t: &&String| !(refused && FUNCTION_TRACERS.contains(&t.as_str()));
        let near = suggest::nearest(
            &name,
            cx.facts.tracers.iter().filter(usable).map(String::as_str),
        );
        let listed: Vec<String> = cx
            .facts
            .tracers
            .iter()
            .map(|t| match usable(&t) {
                true => t.clone(),
                false => format!("{t} (refused by this kernel)"),
            })
            .collect();
        let config = TRACER_CONFIGS
            .iter()
            .find(|(t, _)| *t == name)
            .map(|(_, c)| format!(" (it was built without {c})"))
            .unwrap_or_default();
        cx.kernel(
            name_span.clone(),
            format!("this kernel offers no tracer `{name}`{config}"),
            Some(format!(
                "{}available_tracers: {}",
                near.map(|n| format!("did you mean `{n}`? "))
                    .unwrap_or_default(),
                listed.join(" ")
            )),
        );
        return None;
    }
    let mut functions_ok = true;
    if (is_function
        || t.function_profile == Some(true)
        || !t.functions.is_empty()
        || !t.notrace.is_empty()
        || !t.graph_functions.is_empty()
        || !t.graph_notrace.is_empty())
        && let Err(why) = cx.facts.filter_functions()
    {
        let (msg, help) = function_tracing_refused(why);
        cx.kernel(name_span.clone(), msg, Some(help));
        functions_ok = false;
    }
    let instance = cx.facts.instance_facts().cloned();
    let at_top_level = instance
        .as_ref()
        .is_some_and(|i| !i.tracers.contains(&name));
    let graph = name == "function_graph";
    for (key, list) in [
        ("functions", &t.functions),
        ("notrace", &t.notrace),
        ("graph_functions", &t.graph_functions),
        ("graph_notrace", &t.graph_notrace),
    ] {
        if key.starts_with("graph") && !list.is_empty() && !graph {
            let span = cx.key_span(&path!("tracer", key));
            cx.recipe(
                span,
                format!("`{key}` applies to the function_graph tracer only, not `{name}`"),
                Some("set name = \"function_graph\", or use `functions`".into()),
            );
            continue;
        }
        if !functions_ok {
            continue;
        }
        for (i, entry) in list.iter().enumerate() {
            let span = cx.span(&path!("tracer", key, i));
            if let Some((msg, help)) = check_function_entry(cx, entry) {
                cx.kernel(span, msg, help);
            }
        }
    }
    for (key, set) in [
        ("max_graph_depth", t.max_graph_depth.is_some()),
        ("thresh_us", t.thresh_us.is_some()),
    ] {
        if !set {
            continue;
        }
        let file = if key == "thresh_us" {
            "tracing_thresh"
        } else {
            key
        };
        let span = cx.key_span(&path!("tracer", key));
        if key == "max_graph_depth" && !graph {
            cx.recipe(
                span,
                "`max_graph_depth` applies to the function_graph tracer only",
                None,
            );
        } else if !cx.facts.has_file(file) {
            cx.kernel(
                span,
                format!("this kernel has no `{file}` file"),
                Some(if key == "thresh_us" {
                    "tracing_thresh needs CONFIG_TRACER_MAX_TRACE or the function_graph tracer"
                        .into()
                } else {
                    "max_graph_depth needs CONFIG_FUNCTION_GRAPH_TRACER".into()
                }),
            );
        }
    }
    let options = instance
        .as_ref()
        .filter(|_| !at_top_level)
        .map_or(&cx.facts.options, |i| &i.options)
        .clone();
    let mut opts = Vec::new();
    for (opt, on) in &t.options {
        if opt == "function_profile_enabled" {
            // A tracefs file, not an option: the recipe's mistake, whatever the kernel.
            let span = cx.key_span(&path!("tracer", "options", opt.as_str()));
            cx.recipe(
                span,
                "`function_profile_enabled` is not a trace option but a tracefs file of its own",
                Some("write `function_profile = true` in [tracer]".into()),
            );
        } else if options.contains(opt) {
            opts.push((opt.clone(), *on));
        } else if let Some((_, (major, minor), built)) =
            VERSIONED_OPTIONS.iter().find(|(name, ..)| name == opt)
        {
            let span = cx.key_span(&path!("tracer", "options", opt.as_str()));
            cx.kernel(
                span,
                format!(
                    "this kernel ({}) has no trace option `{opt}` (no options/{opt} in an instance): it comes with Linux {major}.{minor}, in {built}",
                    cx.facts.release
                ),
                Some(format!(
                    "leave `{opt}` out here, or run on a kernel that has it"
                )),
            );
        } else {
            let span = cx.key_span(&path!("tracer", "options", opt.as_str()));
            let near = suggest::nearest(opt, options.iter().map(String::as_str));
            cx.kernel(
                span,
                format!(
                    "this kernel has no trace option `{opt}` (no options/{opt} in an instance)"
                ),
                Some(
                    near.map(|n| format!("did you mean `{n}`?"))
                        .unwrap_or_else(|| {
                            "see the options/ directory of an instance for what this kernel offers"
                                .into()
                        }),
                ),
            );
        }
    }
    let params = resolve_noise_params(cx, t, &name);
    let function_profile = t.function_profile == Some(true);
    if function_profile && !cx.facts.has_file("function_profile_enabled") {
        let span = cx.key_span(&path!("tracer", "function_profile"));
        cx.kernel(
            span,
            "this kernel has no function profiler (no function_profile_enabled in tracefs)",
            Some("it was built without CONFIG_FUNCTION_PROFILER (as every Debian kernel is); the `funcgraph` analysis of a function_graph recipe gives per-function durations instead".into()),
        );
    }
    if cx.diags.len() > before
        || (name == "nop" && opts.is_empty() && t.thresh_us.is_none() && !function_profile)
    {
        return None;
    }
    let max_latency = MAX_LATENCY_TRACERS
        .contains(&name.as_str())
        .then(|| {
            let own = !at_top_level
                && instance
                    .as_ref()
                    .is_some_and(|i| i.files.contains("tracing_max_latency"));
            if own {
                Some(MaxLatencyAt::Instance)
            } else {
                cx.facts
                    .has_file("tracing_max_latency")
                    .then_some(MaxLatencyAt::TopLevel)
            }
        })
        .flatten();
    Some(ResolvedTracer {
        function_profile,
        params,
        max_latency,
        name,
        functions: t.functions.clone(),
        notrace: t.notrace.clone(),
        graph_functions: t.graph_functions.clone(),
        graph_notrace: t.graph_notrace.clone(),
        max_graph_depth: t.max_graph_depth,
        thresh_us: t.thresh_us,
        options: opts,
        at_top_level,
        graph_filter_at_top: at_top_level
            || instance
                .as_ref()
                .is_none_or(|i| !i.files.contains("set_graph_function")),
        span,
    })
}

/// A `[stack]` that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedStack {
    /// `stack_trace_filter` entries.
    pub(crate) filter: Vec<String>,
    /// The `[stack]` table.
    pub(crate) span: Span,
}

/// Checks `[stack]`: the kernel has the stack tracer (`stack_trace`), which
/// rides on function tracing, and every filter entry names traceable
/// functions. `None` when absent, disabled or wrong.
pub(super) fn resolve_stack(cx: &mut Ctx<'_>, s: &Stack) -> Option<ResolvedStack> {
    if s.enable == Some(false) {
        return None;
    }
    let span = cx.key_span(&path!("stack"));
    if !cx.facts.has_file("stack_trace") {
        cx.kernel(
            span,
            "this kernel has no stack tracer (no stack_trace in tracefs)",
            Some("it was built without CONFIG_STACK_TRACER; run this recipe on a kernel that has it (Debian's 6.1, 6.12 and RT kernels do)".into()),
        );
        return None;
    }
    if let Err(why) = cx.facts.filter_functions() {
        let (msg, help) = function_tracing_refused(why);
        cx.kernel(span, msg, Some(help));
        return None;
    }
    let before = cx.diags.len();
    for (i, entry) in s.filter.iter().enumerate() {
        let entry_span = cx.span(&path!("stack", "filter", i));
        if let Some((msg, help)) = check_function_entry(cx, entry) {
            cx.kernel(entry_span, msg, help);
        }
    }
    (cx.diags.len() == before).then(|| ResolvedStack {
        filter: s.filter.clone(),
        span,
    })
}

/// Checks one set_ftrace_filter-style entry (`GLOB`, `GLOB:mod:MODULE`,
/// `:mod:MODULE`) against available_filter_functions. `None` when it is fine or
/// the list cannot be read (reported elsewhere); else the message and help.
pub(super) fn check_function_entry(cx: &Ctx<'_>, entry: &str) -> Option<(String, Option<String>)> {
    let funcs = cx.facts.filter_functions().ok()?;
    let (glob, module) = match entry.split_once(":mod:") {
        Some((g, m)) => (if g.is_empty() { "*" } else { g }, Some(m)),
        None => (entry, None),
    };
    let glob = glob.strip_prefix('!').unwrap_or(glob);
    // The kernel's filter parser reads a pattern that starts with a digit as
    // an index into available_filter_functions, the module's name in `:mod:`
    // too, and then matches no module (kernel/trace/ftrace.c,
    // `filter_parse_regex`, `match_records`): the write fails with EINVAL
    // (seen in the kernel lab: `:mod:9p` on Debian 6.1).
    if let Some(m) = module.filter(|m| m.starts_with(|c: char| c.is_ascii_digit())) {
        return Some((
            format!(
                "the kernel cannot filter by module `{m}`: it reads a name that starts with a digit as a function index (`:mod:{m}` fails with EINVAL)"
            ),
            Some(
                "name the module's functions by a glob instead, e.g. `v9fs_*` for 9p (available_filter_functions marks each with `[9p]`)"
                    .to_string(),
            ),
        ));
    }
    let pool: Vec<&str> = match module {
        Some(m) => match funcs.modules.get(m) {
            Some(set) => set.iter().map(String::as_str).collect(),
            None => {
                let near = suggest::nearest(m, funcs.modules.keys().map(String::as_str));
                return Some((
                    format!("no loaded module `{m}` has traceable functions"),
                    near.map(|n| format!("did you mean `{n}`?")),
                ));
            }
        },
        None => funcs.names.iter().map(String::as_str).collect(),
    };
    if pool.iter().any(|f| glob_match(glob, f)) {
        return None;
    }
    let hint = suggest::did_you_mean(glob, pool.iter().copied(), 3);
    Some((
        format!(
            "no function of available_filter_functions matches `{glob}`{}",
            module
                .map(|m| format!(" in module `{m}`"))
                .unwrap_or_default()
        ),
        Some(if hint.is_empty() {
            "functions the kernel can trace are listed in available_filter_functions".into()
        } else {
            hint.trim_end().to_string()
        }),
    ))
}
