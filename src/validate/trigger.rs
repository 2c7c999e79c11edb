//! `[[triggers]]`: event triggers written to `events/SYSTEM/EVENT/trigger`
//! (Documentation/trace/events.rst section 6, histogram.rst for `hist`) and
//! function triggers, the commands of `set_ftrace_filter`
//! (Documentation/trace/ftrace.rst, "Filter commands").

use tracedat::EventFormat;

use super::tracer::{check_function_entry, function_tracing_refused};
use super::{Ctx, Span, check_predicates, filter, rewrite, valid_event_pattern};
use crate::recipe::Trigger;
use crate::suggest;

/// Actions of event triggers.
pub(crate) const EVENT_ACTIONS: &[&str] = &[
    "traceon",
    "traceoff",
    "snapshot",
    "stacktrace",
    "enable_event",
    "disable_event",
    "hist",
];
/// Actions of function triggers (set_ftrace_filter commands).
pub(crate) const FUNCTION_ACTIONS: &[&str] = &[
    "traceon",
    "traceoff",
    "stacktrace",
    "snapshot",
    "enable_event",
    "disable_event",
];

/// Function trigger commands the kernel has but a run refuses, with the reason:
/// `dump` and `cpudump` call `ftrace_dump()` (kernel/trace/ftrace.c,
/// `ftrace_dump_probe`), which prints the top-level ring buffer, not the run's
/// instance, on the console, consuming it, and turns top-level tracing off
/// for good (kernel/trace/trace.c, `ftrace_dump`).
const REFUSED_FUNCTION_ACTIONS: &[&str] = &["dump", "cpudump"];

/// One trigger line that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedTrigger {
    /// `system:event` the trigger sits on; `None` for a function trigger, whose
    /// command goes to `set_ftrace_filter`.
    pub(crate) event: Option<String>,
    /// The event is one of the recipe's own probes (`kprobes:NAME` /
    /// `uprobes:NAME`), which lives in the run's probe group.
    pub(crate) on_probe: bool,
    /// The trigger command, e.g. `traceoff:1 if ret == -2`, or for a function
    /// trigger `do_bad_area:traceoff:1`.
    pub(crate) command: String,
    /// The command that removes it: `!` + the whole command (event triggers; hist
    /// triggers are matched by keys, values, sort and filter), or
    /// `!FUNCTION:ACTION` (function triggers).
    pub(crate) removal: String,
    /// The event an enable_event / disable_event trigger switches.
    pub(crate) target: Option<String>,
    /// The action (`hist` triggers' tables are saved before rollback).
    pub(crate) action: String,
    /// The recipe entry it came from.
    pub(crate) span: Span,
}

fn names_list(v: &[&str]) -> String {
    v.join(", ")
}

/// Checks trigger `i`; appends it to `out` when valid.
pub(super) fn resolve_trigger(
    cx: &mut Ctx<'_>,
    i: usize,
    t: &Trigger,
    out: &mut Vec<ResolvedTrigger>,
) {
    let entry_span = cx.span(&path!("triggers", i));
    match (&t.event, &t.function) {
        (Some(_), Some(_)) => {
            let span = cx.key_span(&path!("triggers", i, "function"));
            cx.recipe(
                span,
                "a trigger sits on an `event` or on a `function`, not both",
                None,
            );
        }
        (None, None) => {
            let span = cx.key_span(&path!("triggers", i));
            cx.recipe(
                span,
                "trigger has neither `event` nor `function`",
                Some("add `event = \"system:event\"` or `function = \"NAME\"`".into()),
            );
        }
        (None, Some(func)) => {
            if let Some(r) = function_trigger(cx, i, t, func, entry_span) {
                out.push(r);
            }
        }
        (Some(event), None) => {
            if let Some(r) = event_trigger(cx, i, t, event, entry_span) {
                out.push(r);
            }
        }
    }
}

fn function_trigger(
    cx: &mut Ctx<'_>,
    i: usize,
    t: &Trigger,
    func: &str,
    entry_span: Span,
) -> Option<ResolvedTrigger> {
    let base = |k: &str| path!("triggers", i, k);
    let action_span = cx.span(&base("action"));
    let before = cx.diags.len();
    if REFUSED_FUNCTION_ACTIONS.contains(&t.action.as_str()) {
        cx.recipe(
            action_span.clone(),
            format!(
                "`{}` is refused: it prints the top-level ring buffer (not the run's) on the console, emptying it, and turns top-level tracing off until someone turns it on again",
                t.action
            ),
            Some("use `stacktrace` (a kernel stack in the trace) or `snapshot` (the run's buffer, saved as snapshot.txt) instead".into()),
        );
    } else if !FUNCTION_ACTIONS.contains(&t.action.as_str()) {
        let near = suggest::nearest(&t.action, FUNCTION_ACTIONS.iter().copied());
        cx.recipe(
            action_span.clone(),
            format!("`{}` is not a function trigger action", t.action),
            Some(format!(
                "{}function triggers are: {}",
                near.map(|n| format!("did you mean `{n}`? "))
                    .unwrap_or_default(),
                names_list(FUNCTION_ACTIONS)
            )),
        );
    }
    let switches_event = matches!(t.action.as_str(), "enable_event" | "disable_event");
    for (key, set) in [
        ("if", t.condition.is_some()),
        ("target", t.target.is_some() && !switches_event),
        ("keys", !t.keys.is_empty()),
        ("values", !t.values.is_empty()),
        ("sort", !t.sort.is_empty()),
    ] {
        if set {
            let span = cx.key_span(&base(key));
            cx.recipe(
                span,
                format!("function triggers take no `{key}`"),
                Some("put the trigger on an event (`event = ...`) to use it".into()),
            );
        }
    }
    let target = match (switches_event, &t.target) {
        (true, None) => {
            cx.recipe(
                action_span.clone(),
                format!("`{}` needs `target = \"system:event\"`", t.action),
                None,
            );
            None
        }
        (true, Some(target)) => {
            let span = cx.span(&base("target"));
            event_target(cx, span, &t.action, target)
        }
        (false, _) => None,
    };
    if t.count == Some(0) {
        let span = cx.span(&base("count"));
        cx.recipe(
            span,
            "`count` must be at least 1 (leave it out for no limit)",
            None,
        );
    }
    let func_span = cx.span(&base("function"));
    let name_ok = !func.is_empty()
        && func
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'*' | b'?'));
    if !name_ok {
        cx.recipe(
            func_span,
            format!("`{func}` is not a function name or glob"),
            None,
        );
    } else {
        match cx.facts.filter_functions() {
            Err(why) => {
                let (msg, help) = function_tracing_refused(why);
                cx.kernel(func_span, msg, Some(help));
            }
            Ok(_) => {
                if let Some((msg, help)) = check_function_entry(cx, func) {
                    cx.kernel(func_span, msg, help);
                }
            }
        }
    }
    if t.action == "snapshot" && !cx.facts.has_snapshot {
        cx.kernel(
            action_span,
            "this kernel has no `snapshot` file (CONFIG_TRACER_SNAPSHOT): it cannot take snapshots",
            None,
        );
    }
    if cx.diags.len() > before {
        return None;
    }
    let mut command = format!("{func}:{}", t.action);
    if let Some(target) = &target {
        command.push(':');
        command.push_str(target);
    }
    if let Some(n) = t.count {
        command.push_str(&format!(":{n}"));
    }
    // The kernel removes a command registered with a count only by a removal
    // with one (kernel/trace/ftrace.c: `param` picks the probe ops, the removal
    // looks for the same ops), and an enable_event / disable_event command only
    // by one that names the event (Documentation/trace/ftrace.rst, "Filter
    // commands"): `!` + the whole command removes each.
    Some(ResolvedTrigger {
        event: None,
        on_probe: false,
        removal: format!("!{command}"),
        command,
        target,
        action: t.action.clone(),
        span: entry_span,
    })
}

fn event_trigger(
    cx: &mut Ctx<'_>,
    i: usize,
    t: &Trigger,
    event: &str,
    entry_span: Span,
) -> Option<ResolvedTrigger> {
    let base = |k: &str| path!("triggers", i, k);
    let action_span = cx.span(&base("action"));
    if !EVENT_ACTIONS.contains(&t.action.as_str()) {
        let near = suggest::nearest(&t.action, EVENT_ACTIONS.iter().copied());
        let also = if FUNCTION_ACTIONS.contains(&t.action.as_str()) {
            " (it is a function trigger: use `function = \"NAME\"`)"
        } else {
            ""
        };
        cx.recipe(
            action_span.clone(),
            format!("unknown trigger action `{}`{also}", t.action),
            Some(format!(
                "{}actions are: {}",
                near.map(|n| format!("did you mean `{n}`? "))
                    .unwrap_or_default(),
                names_list(EVENT_ACTIONS)
            )),
        );
        return None;
    }
    let event_span = cx.span(&base("event"));
    if !valid_event_pattern(event) || event.contains(['*', '?']) {
        cx.recipe(
            event_span,
            format!("trigger event {event:?} is not of the form \"system:event\" (no globs)"),
            None,
        );
        return None;
    }
    let probe_format = cx.probe_formats.get(event).cloned();
    let on_probe = probe_format.is_some();
    if !on_probe && !cx.facts.events.contains(event) {
        let hint = suggest::did_you_mean(event, cx.facts.events.iter().map(String::as_str), 3);
        cx.kernel(
            event_span,
            format!("this kernel has no event `{event}`"),
            (!hint.is_empty()).then(|| hint.trim_end().to_string()),
        );
        return None;
    }
    let (sys, ev) = event.split_once(':').unwrap_or((event, ""));
    let format = probe_format.or_else(|| cx.facts.format(event));
    let mut command = t.action.clone();
    let before = cx.diags.len();
    if t.action != "hist" {
        for key in ["keys", "values", "sort"] {
            let set = match key {
                "keys" => !t.keys.is_empty(),
                "values" => !t.values.is_empty(),
                _ => !t.sort.is_empty(),
            };
            if set {
                let span = cx.key_span(&base(key));
                cx.recipe(span, format!("`{key}` is for `hist` triggers only"), None);
            }
        }
    }
    match (t.action.as_str(), &t.target) {
        ("enable_event" | "disable_event", None) => {
            cx.recipe(
                action_span.clone(),
                format!("`{}` needs `target = \"system:event\"`", t.action),
                None,
            );
        }
        ("enable_event" | "disable_event", Some(target)) => {
            let span = cx.span(&base("target"));
            if let Some(target) = event_target(cx, span, &t.action, target) {
                command.push(':');
                command.push_str(&target);
            }
        }
        (_, Some(_)) => {
            let span = cx.key_span(&base("target"));
            cx.recipe(
                span,
                format!(
                    "`target` is only for enable_event and disable_event, not `{}`",
                    t.action
                ),
                None,
            );
        }
        ("hist", None) => {
            // With CONFIG_HIST_TRIGGERS every event has a `hist` file.
            if !cx.facts.has_hist_triggers {
                cx.kernel(
                    action_span.clone(),
                    format!("this kernel has no hist triggers (events/{sys}/{ev} has no `hist` file: CONFIG_HIST_TRIGGERS)"),
                    Some("run this recipe on a kernel built with CONFIG_HIST_TRIGGERS (see the kernel lab in README.md)".into()),
                );
            } else if let Some(format) = &format {
                command = hist_command(cx, i, t, event, format)?;
            }
        }
        ("snapshot", None) if !cx.facts.has_snapshot => {
            cx.kernel(
                action_span.clone(),
                "this kernel has no `snapshot` file (CONFIG_TRACER_SNAPSHOT): it cannot take snapshots",
                None,
            );
        }
        (_, None) => {}
    }
    match t.count {
        Some(0) => {
            let span = cx.span(&base("count"));
            cx.recipe(
                span,
                "`count` must be at least 1 (leave it out for no limit)",
                None,
            );
        }
        Some(_) if t.action == "hist" => {
            let span = cx.key_span(&base("count"));
            cx.recipe(span, "`hist` triggers take no `count`", None);
        }
        Some(n) => command.push_str(&format!(":{n}")),
        None => {}
    }
    if cx.diags.len() > before {
        return None;
    }
    if let Some(cond) = &t.condition {
        match filter::parse(cond) {
            Err(e) => {
                let span = cx.inner_span(&base("if"), &e.span);
                cx.recipe(span, format!("trigger filter syntax: {}", e.message), None);
                return None;
            }
            Ok(preds) => {
                let format = format?;
                let rewrites = check_predicates(
                    cx,
                    &base("if"),
                    event,
                    &format,
                    &preds,
                    &mut Default::default(),
                );
                if cx.diags.len() > before {
                    return None;
                }
                command.push_str(" if ");
                command.push_str(&rewrite(cond, &rewrites));
            }
        }
    }
    Some(ResolvedTrigger {
        event: Some(event.to_string()),
        on_probe,
        removal: format!("!{command}"),
        command,
        target: t.target.clone(),
        action: t.action.clone(),
        span: entry_span,
    })
}

/// The `target` of an enable_event / disable_event trigger (event or
/// function trigger), if the kernel has that event: one `system:event`, no glob.
fn event_target(cx: &mut Ctx<'_>, span: Span, action: &str, target: &str) -> Option<String> {
    if valid_event_pattern(target)
        && !target.contains(['*', '?'])
        && cx.facts.events.contains(target)
    {
        return Some(target.to_string());
    }
    let hint = suggest::did_you_mean(target, cx.facts.events.iter().map(String::as_str), 3);
    cx.kernel(
        span,
        format!(
            "this kernel has no event `{target}` to {}",
            action.replace("_event", "")
        ),
        (!hint.is_empty()).then(|| hint.trim_end().to_string()),
    );
    None
}

/// Key modifiers of histogram.rst ("hist trigger command", `.modifier`).
const HIST_MODIFIERS: &[&str] = &[
    "hex",
    "sym",
    "sym-offset",
    "execname",
    "syscall",
    "log2",
    "usecs",
    "percent",
    "graph",
    "stacktrace",
];

/// `hist:keys=...[:vals=...][:sort=...]`, each field checked against the format.
fn hist_command(
    cx: &mut Ctx<'_>,
    i: usize,
    t: &Trigger,
    event: &str,
    format: &EventFormat,
) -> Option<String> {
    let before = cx.diags.len();
    if t.keys.is_empty() {
        let span = cx.key_span(&path!("triggers", i, "action"));
        cx.recipe(
            span,
            "a `hist` trigger needs `keys` (the fields to group by)",
            Some("e.g. keys = [\"call_site.sym\"], values = [\"bytes_req\"]".into()),
        );
        return None;
    }
    let known = |name: &str| {
        format.field(name).is_some()
            || format.common_fields.iter().any(|f| f.name == name)
            || matches!(
                name,
                "common_timestamp" | "stacktrace" | "common_stacktrace" | "cpu" | "common_cpu"
            )
    };
    let check = |cx: &mut Ctx<'_>, key: &str, list: &[String], sort: bool| {
        for (j, entry) in list.iter().enumerate() {
            let (field, modifier) = match entry.split_once('.') {
                Some((f, m)) => (f, Some(m)),
                None => (entry.as_str(), None),
            };
            let span = cx.span(&path!("triggers", i, key, j));
            let modifier_ok = match modifier {
                None => true,
                Some(m) if sort => matches!(m, "ascending" | "descending"),
                Some(m) => {
                    HIST_MODIFIERS.contains(&m)
                        || m.strip_prefix("buckets=")
                            .is_some_and(|n| n.parse::<u64>().is_ok())
                }
            };
            if !modifier_ok {
                cx.recipe(
                    span,
                    format!(
                        "`.{}` is not a {} modifier",
                        modifier.unwrap_or(""),
                        if sort { "sort" } else { "hist field" }
                    ),
                    Some(if sort {
                        "sort fields take .ascending or .descending".into()
                    } else {
                        format!("modifiers are: {}, buckets=N", HIST_MODIFIERS.join(", "))
                    }),
                );
                continue;
            }
            let field_ok = if sort {
                field == "hitcount"
                    || t.keys
                        .iter()
                        .chain(&t.values)
                        .any(|k| k.split('.').next() == Some(field))
            } else if key == "values" {
                field == "hitcount"
                    || format
                        .field(field)
                        .is_some_and(|f| !super::is_string_field(f))
                    || matches!(field, "common_timestamp")
            } else {
                known(field)
            };
            if !field_ok {
                let names: Vec<&str> = format.fields.iter().map(|f| f.name.as_str()).collect();
                let near = suggest::nearest(field, names.iter().copied());
                let what = match key {
                    "sort" => format!(
                        "`{field}` is neither a key nor a value of this hist trigger (nor hitcount)"
                    ),
                    "values" => format!("event `{event}` has no numeric field `{field}` to sum"),
                    _ => format!("event `{event}` has no field `{field}`"),
                };
                let fault_kernel = key != "sort";
                let help = Some(format!(
                    "{}its fields are: {}",
                    near.map(|n| format!("did you mean `{n}`? "))
                        .unwrap_or_default(),
                    names.join(", ")
                ));
                if fault_kernel {
                    cx.kernel(span, what, help);
                } else {
                    cx.recipe(span, what, None);
                }
            }
        }
    };
    check(cx, "keys", &t.keys, false);
    check(cx, "values", &t.values, false);
    check(cx, "sort", &t.sort, true);
    if cx.diags.len() > before {
        return None;
    }
    let mut command = format!("hist:keys={}", t.keys.join(","));
    if !t.values.is_empty() {
        command.push_str(&format!(":vals={}", t.values.join(",")));
    }
    if !t.sort.is_empty() {
        command.push_str(&format!(":sort={}", t.sort.join(",")));
    }
    Some(command)
}
