//! The serde model of a recipe: pure data, no kernel, no spans.
//!
//! Key names are the contract in `../shared/design/recipe-format.md` (version 1,
//! beside the repository).
//! Spans for diagnostics live beside the model in [`super::SpanIndex`], looked up
//! by key path, so the model stays plain and its JSON Schema (generated with
//! schemars) is what editors see.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A whole recipe, as parsed from rendered TOML.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
#[schemars(title = "trace-recipe recipe (format version 1)")]
pub struct Recipe {
    /// A base recipe this one builds on, relative to this file's folder
    /// (recipe-format 1.1). Chains are allowed; cycles and chains deeper than 8
    /// are refused. Tables merge key by key; `[[events]]`, `[[kprobes]]`,
    /// `[[uprobes]]`, `[[triggers]]`, `[[expect]]` and `[[answer]]` entries with
    /// the identity of one of the base's replace it, the others are appended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) extends: Option<String>,
    /// `[a-z0-9_-]+`, used in instance and output folder names.
    pub name: String,
    /// One sentence saying which question the recipe answers.
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// How long the run lasts at most: `"500ms"`, `"10s"`, `"2m"`. The run ends at the
    /// first of duration, workload exit, a stop condition or Ctrl-C.
    #[serde(default)]
    pub(crate) duration: Option<String>,
    /// Template variables (minijinja), overridable with `--set KEY=VALUE`: a plain
    /// value, or a typed table (`[params.NAME] type = ..., default = ..., help = ...`).
    #[serde(default)]
    pub(crate) params: BTreeMap<String, Param>,
    /// The per-CPU ring buffer of the run's instance.
    #[serde(default)]
    pub(crate) buffer: Buffer,
    /// Which tasks are traced, and the optional workload.
    #[serde(default)]
    pub scope: Scope,
    /// The tracer of the instance.
    #[serde(default)]
    pub(crate) tracer: Option<Tracer>,
    /// The stack tracer (recipe-format 1.2): the deepest kernel stack seen
    /// during the run, with each frame's size.
    #[serde(default)]
    pub(crate) stack: Option<Stack>,
    /// Dynamic kernel probes (kprobe_events and dynamic_events syntax), defined in the run's probe group.
    #[serde(default)]
    pub(crate) kprobes: Vec<Probe>,
    /// Dynamic user-space probes (uprobe_events syntax), defined in the run's probe group.
    #[serde(default)]
    pub(crate) uprobes: Vec<Probe>,
    /// Static tracepoints to enable, with filters.
    #[serde(default)]
    pub(crate) events: Vec<Event>,
    /// Event triggers (events.rst section 6) and function triggers.
    #[serde(default)]
    pub(crate) triggers: Vec<Trigger>,
    /// Conditions that end the run early.
    #[serde(default)]
    pub(crate) stop: Stop,
    /// What the run leaves behind.
    #[serde(default)]
    pub(crate) output: Output,
    /// Expectations checked after the run (recipe-format 1.1): a failed one makes
    /// the run exit 5 after writing everything.
    #[serde(default)]
    pub(crate) expect: Vec<Expect>,
    /// Context saved with the run (recipe-format 1.1): commands run before
    /// tracing starts and after it is rolled back.
    #[serde(default)]
    pub(crate) collect: Collect,
    /// Tables the recipe answers with (recipe-format 1.3): computed by the
    /// kernel's hist triggers where it has them, else from trace.dat.
    #[serde(default)]
    pub(crate) answer: Vec<super::answer::Answer>,
}

/// `[collect]`: commands whose output is saved in the output folder (and so the
/// bundle) as `collect/before-N-PROGRAM.txt` / `collect/after-N-PROGRAM.txt`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Collect {
    /// Run before tracing starts (before the plan is applied).
    #[serde(default)]
    pub(crate) before: Vec<CollectCommand>,
    /// Run after tracing ended and tracefs was rolled back.
    #[serde(default)]
    pub(crate) after: Vec<CollectCommand>,
    /// How long each command may run (default `"5s"`); it is killed after that.
    pub(crate) timeout: Option<String>,
    /// Largest output kept per command, in KiB (default 1024); the command is
    /// killed once it wrote more.
    pub(crate) max_output_kb: Option<u64>,
    /// Whether a failed command (not found, non-zero exit, timeout) fails the
    /// run (exit 3); otherwise it is only recorded in report.json.
    #[serde(default)]
    pub(crate) required: bool,
}

/// One `[collect]` command: an argv array, or a string split into words like a
/// shell would (quotes, backslashes) but never run through a shell: write
/// `["sh", "-c", "..."]` for pipes and redirections.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum CollectCommand {
    /// `["cat", "/proc/interrupts"]`.
    Argv(Vec<String>),
    /// `"uname -a"`.
    Line(String),
}

impl CollectCommand {
    /// The argv; `None` for a string that does not split (an open quote) or an
    /// empty command.
    pub(crate) fn argv(&self) -> Option<Vec<String>> {
        let argv = match self {
            CollectCommand::Argv(a) => a.clone(),
            CollectCommand::Line(l) => shlex::split(l)?,
        };
        (!argv.is_empty()).then_some(argv)
    }
}

/// `[[expect]]`: one expectation on the run's results.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Expect {
    /// An expression: `count(SYSTEM:EVENT) >= 3`, `rate(SYSTEM:EVENT) < 100`,
    /// `lost_events == 0`, `p99(ANALYSIS:KEY) < 2ms` (ANALYSIS: syscalls, wakeup,
    /// kretprobe, funcgraph; durations in ns, us, ms, s).
    pub(crate) that: String,
}

/// One `[params]` entry: `NAME = value`, or a typed `[params.NAME]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum Param {
    /// A plain value; `--set` values must parse as its type.
    Value(ParamValue),
    /// A typed parameter.
    Typed(TypedParam),
}

/// `[params.NAME]`: a parameter with a declared type, a default and a help text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(deny_unknown_fields)]
pub(crate) struct TypedParam {
    /// What `default` and every `--set` value must be.
    #[serde(rename = "type")]
    pub(crate) kind: ParamType,
    /// The value when no `--set` gives one; without it, `--set NAME=...` is required.
    pub(crate) default: Option<ParamValue>,
    /// One line saying what the parameter does (shown by `check --explain`).
    pub(crate) help: Option<String>,
}

/// The type of a typed parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ParamType {
    /// A whole number (i64).
    Int,
    /// Any string.
    String,
    /// A duration string such as `"500ms"`, `"10s"`, `"2m"` (rendered as written).
    Duration,
    /// `true` or `false`.
    Bool,
}

/// A template variable's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum ParamValue {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string.
    Str(String),
}

/// `[buffer]`: the instance's ring buffer.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Buffer {
    /// Per-CPU ring buffer size in KiB (`buffer_size_kb`).
    pub(crate) size_kb: Option<u64>,
    /// The trace clock (`trace_clock`), one of the names it offers.
    pub(crate) clock: Option<String>,
    /// CPUs to trace as a cpu list, e.g. `"0-3,6"` (`tracing_cpumask`).
    pub(crate) cpus: Option<String>,
    /// `options/overwrite`: `false` drops the newest events when full, keeping the oldest.
    pub(crate) overwrite: Option<bool>,
    /// The flight recorder: the name of a boot-mapped instance (booted with
    /// `reserve_mem=SIZE:4096:trace trace_instance=NAME@trace`, Linux 6.12+,
    /// Documentation/trace/debugging.rst) whose buffer survives a reboot.
    /// `run` arms it and exits; `trace-recipe collect-boot` reads it after the
    /// next boot.
    pub(crate) persistent: Option<String>,
}

/// `[scope]`: which tasks are traced.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Scope {
    /// Process ids written to `set_event_pid`.
    #[serde(default)]
    pub pids: Vec<u32>,
    /// Task names: adds `comm == "NAME"` (or-ed) to every event filter, and
    /// scopes function tracers to the running tasks of those names (set_ftrace_pid).
    #[serde(default)]
    pub comms: Vec<String>,
    /// `options/event-fork` (and `options/function-fork` for function tracers):
    /// children of scoped pids are traced too.
    #[serde(default)]
    pub(crate) follow_forks: bool,
    /// The workload, started held, released once tracing is on; scoped by pid
    /// unless `system_wide`.
    #[serde(default)]
    pub(crate) command: Vec<String>,
    /// With a workload: record every task (or the CPUs of `[buffer] cpus`) from
    /// the workload's release until it exits, as `trace-cmd record CMD` does
    /// without `-F`. Default `false`: only the workload's own tasks. Cannot be
    /// combined with `pids` or `comms`.
    #[serde(default)]
    pub(crate) system_wide: bool,
    /// What the guard does with the workload's process group when the run dies
    /// without rolling back (SIGKILL, OOM kill): `kill` (default) or `leave`.
    #[serde(default)]
    pub(crate) on_abort: OnAbort,
    /// Trace the run's own threads too (its main thread, guard and readers).
    /// By default they are kept out of the trace by a filter on every event
    /// (their own events go; interrupt-context events that hit them, and the
    /// other task of a switch or wakeup, stay), and by `set_ftrace_notrace_pid`
    /// for function tracers.
    #[serde(default)]
    pub(crate) include_self: bool,
}

/// `[scope] on_abort`: the workload's fate when its run dies without rolling back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OnAbort {
    /// The guard ends the workload's process group: SIGTERM, then SIGKILL after a
    /// grace period.
    #[default]
    Kill,
    /// The workload keeps running; `status` names it.
    Leave,
}

/// `[tracer]`: the instance's tracer and its function filters.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Tracer {
    /// A name from `available_tracers`; default `nop`.
    pub(crate) name: Option<String>,
    /// `set_ftrace_filter` lines (globs, `:mod:NAME`).
    #[serde(default)]
    pub(crate) functions: Vec<String>,
    /// `set_ftrace_notrace` lines.
    #[serde(default)]
    pub(crate) notrace: Vec<String>,
    /// `set_graph_function` lines.
    #[serde(default)]
    pub(crate) graph_functions: Vec<String>,
    /// `set_graph_notrace` lines.
    #[serde(default)]
    pub(crate) graph_notrace: Vec<String>,
    /// `max_graph_depth`.
    pub(crate) max_graph_depth: Option<u32>,
    /// `options/NAME = 0|1` (tracer and trace options).
    #[serde(default)]
    pub(crate) options: BTreeMap<String, bool>,
    /// `tracing_thresh`, in µs.
    pub(crate) thresh_us: Option<u64>,
    /// The function profiler (`function_profile_enabled`, global): per function
    /// its hits and time, from `trace_stat/function<CPU>`, merged over CPUs into
    /// report.json `function_profile`. Needs CONFIG_FUNCTION_PROFILER.
    pub(crate) function_profile: Option<bool>,
    /// `[tracer.hwlat]`: the hardware latency detector's parameters (global
    /// files of `hwlat_detector/`), for `name = "hwlat"`.
    pub(crate) hwlat: Option<Hwlat>,
    /// `[tracer.osnoise]`: the osnoise tracer's parameters (global files of
    /// `osnoise/`), for `name = "osnoise"`.
    pub(crate) osnoise: Option<Osnoise>,
    /// `[tracer.timerlat]`: the timerlat tracer's parameters (global files of
    /// `osnoise/`), for `name = "timerlat"`.
    pub(crate) timerlat: Option<Timerlat>,
}

/// `[tracer.hwlat]` (Documentation/trace/hwlat_detector.rst). Which CPUs it
/// samples is `[buffer] cpus` (`tracing_cpumask`); its threshold `[tracer] thresh_us`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Hwlat {
    /// `hwlat_detector/width`: µs of each window spent sampling with
    /// interrupts off; less than `window_us`.
    pub(crate) width_us: Option<u64>,
    /// `hwlat_detector/window`: µs of each sampling period.
    pub(crate) window_us: Option<u64>,
    /// `hwlat_detector/mode`: `none`, `round-robin` or `per-cpu`.
    pub(crate) mode: Option<String>,
}

/// `[tracer.osnoise]` (Documentation/trace/osnoise-tracer.rst). Its noise
/// threshold is `[tracer] thresh_us` (`tracing_thresh`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Osnoise {
    /// `osnoise/period_us`: µs of each period; at least `runtime_us`.
    pub(crate) period_us: Option<u64>,
    /// `osnoise/runtime_us`: µs of each period the osnoise thread samples.
    pub(crate) runtime_us: Option<u64>,
    /// `osnoise/stop_tracing_us`: stop tracing when one noise exceeds this (µs).
    pub(crate) stop_tracing_us: Option<u64>,
    /// `osnoise/stop_tracing_total_us`: stop tracing when a period's total noise exceeds this (µs).
    pub(crate) stop_tracing_total_us: Option<u64>,
    /// `osnoise/cpus`: the CPUs to sample, a cpu list such as `"0-3,6"`.
    pub(crate) cpus: Option<String>,
}

/// `[tracer.timerlat]` (Documentation/trace/timerlat-tracer.rst).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Timerlat {
    /// `osnoise/timerlat_period_us`: the timer's period, 100 to 1000000 µs.
    pub(crate) period_us: Option<u64>,
    /// `osnoise/print_stack`: record the IRQ's stack when the thread latency
    /// exceeds this (µs).
    pub(crate) print_stack_us: Option<u64>,
    /// `osnoise/stop_tracing_us`: stop tracing when an IRQ latency exceeds this (µs).
    pub(crate) stop_tracing_us: Option<u64>,
    /// `osnoise/stop_tracing_total_us`: stop tracing when a thread latency exceeds this (µs).
    pub(crate) stop_tracing_total_us: Option<u64>,
    /// `osnoise/cpus`: the CPUs to sample, a cpu list such as `"0-3,6"`.
    pub(crate) cpus: Option<String>,
}

/// `[stack]`: the stack tracer (Documentation/trace/ftrace.rst, "Stack trace"),
/// global to the machine: `/proc/sys/kernel/stack_tracer_enabled` is on for the
/// run (from the apply to the rollback), `stack_max_size` reset to 0 before and
/// both restored after, like `stack_trace_filter`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Stack {
    /// Turn the stack tracer on for the run (default true; `false` keeps the
    /// table for composition but does nothing).
    pub(crate) enable: Option<bool>,
    /// `stack_trace_filter` lines: only stacks through these functions (globs,
    /// `:mod:NAME`) are measured; empty: every function.
    #[serde(default)]
    pub(crate) filter: Vec<String>,
}

/// `[[kprobes]]` / `[[uprobes]]`: one dynamic probe.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Probe {
    /// Event name; its system is the run's probe group.
    pub(crate) event: String,
    /// `kprobe` | `kretprobe` | `fprobe` | `fexit` | `tprobe` | `eprobe` in
    /// `[[kprobes]]`; `uprobe` | `uretprobe` in `[[uprobes]]`.
    pub(crate) kind: String,
    /// `SYMBOL[+offs]` or `MODULE:SYMBOL` (kprobe, kretprobe), `FUNCTION`
    /// (fprobe, fexit), `TRACEPOINT` (tprobe), `system:event` (eprobe),
    /// `PATH:SYMBOL` or `PATH:0xOFFSET` (uprobes).
    pub(crate) target: String,
    /// `name = "FETCHARG[:TYPE]"`, kept in order.
    #[serde(default)]
    pub(crate) fetch: indexmap::IndexMap<String, String>,
    /// Filter on the probe event.
    pub(crate) filter: Option<String>,
    /// Record a kernel stack with each hit.
    #[serde(default)]
    pub(crate) stacktrace: bool,
}

/// `[[events]]`: a static tracepoint, or a glob of them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Event {
    /// `"system:event"`; `*` and `?` globs allowed (`"sched:*"`).
    pub(crate) name: String,
    /// Event filter (Documentation/trace/events.rst section 5).
    pub(crate) filter: Option<String>,
    /// Record a kernel stack with each event (a `stacktrace` trigger).
    #[serde(default)]
    pub(crate) stacktrace: bool,
}

/// `[[triggers]]`: an event trigger (`event = ...`) or a function trigger (`function = ...`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Trigger {
    /// The event the trigger sits on, `"system:event"`.
    pub(crate) event: Option<String>,
    /// The function (or glob) of a function trigger (a set_ftrace_filter command).
    pub(crate) function: Option<String>,
    /// Event triggers: `traceon` | `traceoff` | `snapshot` | `stacktrace` |
    /// `enable_event` | `disable_event` | `hist`. Function triggers: `traceon` |
    /// `traceoff` | `stacktrace` | `snapshot` | `enable_event` | `disable_event`
    /// (`dump` and `cpudump` are refused: see `validate/trigger.rs`).
    pub(crate) action: String,
    /// For enable_event / disable_event (event and function triggers): the
    /// `"system:event"` to switch.
    pub(crate) target: Option<String>,
    /// Trigger filter: the trigger fires only when it matches.
    #[serde(rename = "if")]
    pub(crate) condition: Option<String>,
    /// Fire at most this many times.
    pub(crate) count: Option<u64>,
    /// `hist` only: the fields to group by, with optional `.modifier`
    /// (`.sym`, `.execname`, `.log2`, ...; Documentation/trace/histogram.rst).
    #[serde(default)]
    pub(crate) keys: Vec<String>,
    /// `hist` only: numeric fields to sum per key (`vals=`); `hitcount` is always kept.
    #[serde(default)]
    pub(crate) values: Vec<String>,
    /// `hist` only: keys or values to sort by, with `.descending` / `.ascending`.
    #[serde(default)]
    pub(crate) sort: Vec<String>,
}

/// `[stop]`: conditions that end the run early.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Stop {
    /// End the run when the instance's `tracing_on` drops to 0 (a traceoff trigger fired).
    #[serde(default)]
    pub(crate) on_traceoff: bool,
    /// End the run once this many MiB of raw ring-buffer data were captured.
    pub(crate) max_size_mb: Option<u64>,
}

/// `[output]`: what the run leaves behind.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Output {
    /// Output folder; default `./trace-recipe-out/NAME-TIMESTAMP`. Templates may use
    /// `name` and `started`. Never inside tracefs, /sys or /proc.
    pub(crate) dir: Option<String>,
    /// Write `trace.dat` (default true).
    pub(crate) trace_dat: Option<bool>,
    /// Reports to render: `"summary"` (summary.txt), `"json"` (report.json), `"html"`
    /// (report.html, self-contained with inline SVG charts). Default summary and json.
    pub(crate) reports: Option<Vec<String>>,
    /// A minijinja template for summary.txt instead of the built-in one, as a path
    /// relative to the recipe's folder. Its context is report.json.
    pub(crate) template: Option<String>,
    /// Fail the run (exit code 4, after writing everything) when lost events exceed
    /// this percentage (0 to 100) of recorded plus lost events.
    pub(crate) max_lost_percent: Option<f64>,
    /// Also write the output folder as one bundle, `DIR.tar.zst` (manifest.json and
    /// every artifact), as `run --bundle` does.
    pub(crate) bundle: Option<bool>,
    /// Record in pieces for long runs: `{ size_mb = N, keep_mb = M }` writes
    /// trace.1.dat, trace.2.dat, ... of at most N MiB each while recording, the
    /// newest piece last as trace.dat, and drops the oldest pieces while all
    /// of them take more than M MiB. report.json and summary.txt cover every
    /// piece kept.
    pub(crate) rotate: Option<Rotate>,
}

/// `[output] rotate`: pieces of at most `size_mb` MiB, `keep_mb` MiB of them kept.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rotate {
    /// The largest a piece (a trace.dat) may be, MiB (at least 4).
    pub(crate) size_mb: u64,
    /// The most all pieces kept may take together, MiB (at least twice `size_mb`):
    /// past it the oldest pieces are deleted.
    pub(crate) keep_mb: u64,
}

/// Parses `"500ms"`, `"10s"`, `"2m"`, `"1h30m"` (jiff's friendly format). Errors: not
/// a duration, or not positive.
pub(crate) fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let d: jiff::SignedDuration = text
        .parse()
        .map_err(|_| format!("`{text}` is not a duration"))?;
    if d.is_negative() || d.is_zero() {
        return Err(format!("duration `{text}` must be positive"));
    }
    d.try_into()
        .map_err(|_| format!("`{text}` is not a duration"))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("0s").is_err());
    }
}
