//! `[[answer]]` (recipe-format 1.3): each answer's events, fields, filter,
//! sort and engine, checked at the recipe's line:col; the kernel engine's hist
//! triggers compiled where it is chosen ([`crate::answer::kernel`]).
//!
//! Engine choice: `engine = "kernel"` needs hist triggers (every event has a
//! `hist` file: CONFIG_HIST_TRIGGERS), for a span also `synthetic_events`
//! (CONFIG_SYNTH_EVENTS), and every `by`/`values` item expressible as a hist
//! key or value; `check` refuses the recipe otherwise, naming what is missing.
//! `auto` takes the kernel where `kernel` would be accepted and trace.dat
//! elsewhere, and says why.
//!
//! Events recorded: an answer computed from trace.dat needs its events in the
//! stream, so they are added to the run's events when the recipe does not list
//! them (with the scope's comm filter, no filter of their own: `where` is
//! applied by the answer); a listed event keeps its entry, whose filter then
//! narrows the answer too. A kernel-engine answer's events are added only when
//! trace.dat is written (`[output] trace_dat`, default true), so that the file
//! can answer again; with `trace_dat = false` and only kernel answers, nothing
//! is streamed.

use std::collections::BTreeMap;

use tracedat::EventFormat;

use super::{Ctx, ResolvedEvent, Span, check_predicates, filter, rewrite, valid_event_pattern};
use crate::answer::EngineUsed;
use crate::answer::kernel::{KernelAnswer, compile};
use crate::kernel::TRACER_RECORDS;
use crate::recipe::{Answer, AnswerBy, AnswerEngine, AnswerValue, FieldRef, Recipe, SortKey};
use crate::suggest;

/// Longest answer name: it becomes part of a synthetic event's and hist
/// variables' names, within the kernel's 64 bytes with `trace_recipe_PID_`.
const MAX_NAME: usize = 32;

/// One answer that passed every check.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedAnswer {
    /// The recipe's entry, with its typed `by`, `values` and `sort`.
    pub(crate) answer: Answer,
    /// The engine it gets.
    pub(crate) engine: EngineUsed,
    /// Why, in one sentence (for `check`).
    pub(crate) why: String,
    /// The hist triggers, when the engine is the kernel.
    pub(crate) kernel: Option<KernelAnswer>,
    /// The filter the run writes on each of the answer's events for its own
    /// sake and the scope's (`[[events]]`' or the probe's filter with the comm
    /// scope; the comm scope alone for an event the recipe does not list): the
    /// kernel engine's triggers carry it too.
    pub(crate) event_filters: Vec<(String, Option<String>)>,
    /// The recipe entry.
    pub(crate) span: Span,
}

/// An answer's events and their formats: the one event, or `from` then `to`.
struct Ends {
    /// `(system:event, format, is one of the recipe's probes)` of `from`, for a span.
    from: Option<(String, EventFormat, bool)>,
    /// The one event, or a span's `to`.
    subject: (String, EventFormat, bool),
}

/// Checks every `[[answer]]`; returns those that passed. The answers'
/// events are added to `rec.events` as the module doc says.
pub(super) fn resolve_answers(
    cx: &mut Ctx<'_>,
    r: &Recipe,
    rec: &mut Recorded<'_>,
) -> Vec<ResolvedAnswer> {
    let mut out = Vec::new();
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, a) in r.answer.iter().enumerate() {
        let before = cx.diags.len();
        check_name(cx, i, a, &mut names);
        let tracer = r.tracer.as_ref().and_then(|t| t.name.as_deref());
        let Some(ends) = resolve_ends(cx, i, a, tracer) else {
            continue;
        };
        let values = a.values_or_default();
        let match_fields = match a.is_span() {
            true => a.match_or_default(),
            false => Vec::new(),
        };
        check_match(cx, i, a, &ends, &match_fields);
        check_items(cx, i, a, &ends, &values);
        let filter = check_where(cx, i, a, &ends);
        check_sort(cx, i, a, &values);
        if a.top == Some(0) {
            let span = cx.span(&path!("answer", i, "top"));
            cx.recipe(span, "`top` must be at least 1", None);
        }
        if cx.diags.len() > before {
            continue;
        }
        let Some((engine, why, kernel)) = choose_engine(cx, i, a, &ends, &values, &filter) else {
            continue;
        };
        let trace_dat = r.output.trace_dat.unwrap_or(true);
        if engine == EngineUsed::Trace || trace_dat {
            // Stacks recorded for a kernel answer too, so that trace.dat can
            // answer again (`report --answer`); required only of the trace engine.
            let stack = a.by.contains(&AnswerBy::Stack);
            let need = stack && engine == EngineUsed::Trace;
            // A tracer's own record is recorded by its tracer, not as an event.
            for (name, _, _) in ends.from.iter().chain([&ends.subject]) {
                if tracer_of(name).is_none() {
                    record_event(cx, i, a, name, (stack, need), rec);
                }
            }
        }
        let event_filters = ends
            .from
            .iter()
            .chain([&ends.subject])
            .map(|(name, _, _)| (name.clone(), rec.filter_of(name)))
            .collect();
        out.push(ResolvedAnswer {
            event_filters,
            answer: a.clone(),
            engine,
            why,
            kernel,
            span: cx.span(&path!("answer", i)),
        });
    }
    out
}

/// `name`: `[a-z0-9_]+`, at most [`MAX_NAME`] bytes, unique.
fn check_name<'r>(cx: &mut Ctx<'_>, i: usize, a: &'r Answer, names: &mut BTreeMap<&'r str, usize>) {
    let span = cx.span(&path!("answer", i, "name"));
    let ok = !a.name.is_empty()
        && a.name.len() <= MAX_NAME
        && a.name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !ok {
        cx.recipe(
            span.clone(),
            format!(
                "answer name {:?} is not of the form [a-z0-9_]+ (1 to {MAX_NAME} characters)",
                a.name
            ),
            Some("it names the answer in report.json and `[[expect]]` (`count(NAME:KEY)`), and the kernel's synthetic event: write e.g. \"read_latency\"".into()),
        );
    }
    if let Some(j) = names.insert(&a.name, i) {
        let earlier = cx.span(&path!("answer", j, "name"));
        let place = earlier.map_or_else(
            || format!("answer {}", j + 1),
            |s| cx.loaded.source.place(s.start),
        );
        cx.recipe(
            span,
            format!("answer name `{}` is used twice (first at {place})", a.name),
            Some("give each answer a name of its own".into()),
        );
    }
}

/// `event`, or `from` and `to`: each a `system:event` of this kernel, one
/// of the recipe's probes, or a record of the recipe's `tracer`, with its
/// format.
fn resolve_ends(cx: &mut Ctx<'_>, i: usize, a: &Answer, tracer: Option<&str>) -> Option<Ends> {
    let entry = cx.key_span(&path!("answer", i));
    match (&a.event, &a.from, &a.to) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            let span = cx.key_span(&path!("answer", i, "event"));
            cx.recipe(
                span,
                "an answer has either `event` (one event) or `from` and `to` (a span), not both",
                None,
            );
            None
        }
        (None, None, None) => {
            cx.recipe(
                entry,
                "the answer names no event",
                Some("add `event = \"system:event\"`, or `from` and `to` for a span".into()),
            );
            None
        }
        (None, Some(_), None) | (None, None, Some(_)) => {
            let key = if a.from.is_some() { "from" } else { "to" };
            let span = cx.key_span(&path!("answer", i, key));
            cx.recipe(span, "a span needs both `from` and `to`", None);
            None
        }
        (Some(ev), None, None) => {
            if a.match_fields.is_some() {
                let span = cx.key_span(&path!("answer", i, "match"));
                cx.recipe(
                    span,
                    "`match` is for spans (`from`/`to`); a one-event answer has none",
                    None,
                );
            }
            let subject = answer_event(cx, i, "event", ev, tracer)?;
            Some(Ends {
                from: None,
                subject,
            })
        }
        (None, Some(from), Some(to)) => {
            let from = answer_event(cx, i, "from", from, tracer);
            let to = answer_event(cx, i, "to", to, tracer);
            Some(Ends {
                from: Some(from?),
                subject: to?,
            })
        }
    }
}

/// The tracer that writes `name` when it is a tracer's own record
/// ([`TRACER_RECORDS`]: `ftrace:function`, `ftrace:funcgraph_exit`, ...).
fn tracer_of(name: &str) -> Option<&'static str> {
    (TRACER_RECORDS.iter())
        .find(|(record, _)| *record == name)
        .map(|(_, tracer)| *tracer)
}

/// The event at key `key` of answer `i`, its format and whether it is one of
/// the recipe's probes; `None` (reported) when it is no event of this kernel,
/// or a tracer's record that the recipe's `tracer` does not write.
fn answer_event(
    cx: &mut Ctx<'_>,
    i: usize,
    key: &str,
    name: &str,
    tracer: Option<&str>,
) -> Option<(String, EventFormat, bool)> {
    let span = cx.span(&path!("answer", i, key));
    if !valid_event_pattern(name) || name.contains(['*', '?']) {
        cx.recipe(
            span,
            format!("answer event {name:?} is not of the form \"system:event\" (no globs)"),
            None,
        );
        return None;
    }
    if let Some(f) = cx.probe_formats.get(name) {
        return Some((name.to_string(), f.clone(), true));
    }
    if let Some(writer) = tracer_of(name) {
        if tracer != Some(writer) {
            cx.recipe(
                span,
                format!(
                    "`{name}` is the {writer} tracer's own record, and this recipe {}",
                    tracer.map_or("has no tracer".to_string(), |t| format!(
                        "runs the {t} tracer"
                    ))
                ),
                Some(format!(
                    "set `[tracer] name = \"{writer}\"` (with `functions` to choose what it traces)"
                )),
            );
            return None;
        }
        return match cx.facts.format(name) {
            Some(f) => Some((name.to_string(), f, false)),
            None => {
                let file = format!("events/{}/format", name.replace(':', "/"));
                cx.kernel(
                    span,
                    format!("cannot read the format of `{name}` ({file})"),
                    Some("a fact file written by an older trace-recipe lacks it: write it again (`trace-recipe facts -o FILE`)".into()),
                );
                None
            }
        };
    }
    if !cx.facts.events.contains(name) {
        let hint = suggest::did_you_mean(name, cx.facts.events.iter().map(String::as_str), 3);
        cx.kernel(
            span,
            format!("this kernel has no event `{name}`"),
            (!hint.is_empty()).then(|| hint.trim_end().to_string()),
        );
        return None;
    }
    match cx.facts.format(name) {
        Some(f) => Some((name.to_string(), f, false)),
        None => {
            cx.kernel(span, format!("cannot read the format of `{name}`"), None);
            None
        }
    }
}

/// Whether `name` is a field of `format`, common fields included.
fn has_field(format: &EventFormat, name: &str) -> bool {
    field_of(format, name).is_some()
}

/// Field `name` of `format`, common fields included.
pub(crate) fn field_of<'f>(format: &'f EventFormat, name: &str) -> Option<&'f tracedat::Field> {
    format
        .field(name)
        .or_else(|| format.common_fields.iter().find(|f| f.name == name))
}

/// Reports `name` missing from `event` at `span`, with its fields.
fn no_field(cx: &mut Ctx<'_>, span: Span, event: &str, format: &EventFormat, name: &str) {
    let names: Vec<&str> = format.fields.iter().map(|f| f.name.as_str()).collect();
    let hint = suggest::did_you_mean(name, names.iter().copied(), 1);
    cx.recipe(
        span,
        format!("event `{event}` has no field `{name}`"),
        Some(format!(
            "{hint}its fields are: {} (and common_pid)",
            names.join(", ")
        )),
    );
}

/// `match`: each field on both ends of the span.
fn check_match(cx: &mut Ctx<'_>, i: usize, a: &Answer, ends: &Ends, fields: &[String]) {
    let Some((from, from_format, _)) = &ends.from else {
        return;
    };
    let (to, to_format, _) = &ends.subject;
    if fields.is_empty() {
        let span = cx.span(&path!("answer", i, "match"));
        cx.recipe(
            span,
            "`match` is empty: a span needs at least one field equal on both ends",
            Some("leave `match` out for [\"common_pid\"] (the same task)".into()),
        );
    }
    for (j, f) in fields.iter().enumerate() {
        let span = match a.match_fields.is_some() {
            true => cx.span(&path!("answer", i, "match", j)),
            false => cx.key_span(&path!("answer", i, "from")),
        };
        for (event, format) in [(from, from_format), (to, to_format)] {
            if !has_field(format, f) {
                no_field(cx, span.clone(), event, format, f);
            }
        }
    }
}

/// The field `f` names (of `from` for `from.FIELD`), reported when missing;
/// `numeric` also refuses string fields for what needs a number.
fn check_field_ref(cx: &mut Ctx<'_>, span: Span, ends: &Ends, f: &FieldRef, numeric: Option<&str>) {
    let (event, format) = match (&ends.from, f.from) {
        (Some((e, fmt, _)), true) => (e, fmt),
        (None, true) => {
            cx.recipe(
                span,
                format!(
                    "`from.{}` names the start of a span, and this answer is one event",
                    f.name
                ),
                None,
            );
            return;
        }
        (_, false) => (&ends.subject.0, &ends.subject.1),
    };
    match field_of(format, &f.name) {
        None => no_field(cx, span, event, format, &f.name),
        Some(field) if numeric.is_some() && super::is_string_field(field) => cx.recipe(
            span,
            format!(
                "{} needs a number, and `{}` of `{event}` is a string",
                numeric.unwrap_or_default(),
                f.name
            ),
            None,
        ),
        Some(_) => {}
    }
}

/// `by` and `values`: the fields they name, of the right kind.
fn check_items(cx: &mut Ctx<'_>, i: usize, a: &Answer, ends: &Ends, values: &[AnswerValue]) {
    for (j, by) in a.by.iter().enumerate() {
        let span = cx.span(&path!("answer", i, "by", j));
        let numeric = match by {
            AnswerBy::Errno(_) => Some("errno(F)"),
            AnswerBy::Syscall(_) => Some("syscall(F)"),
            AnswerBy::Sym(_) => Some("sym(F)"),
            AnswerBy::Log2(_) => Some("log2(F)"),
            _ => None,
        };
        if let Some(f) = by.field() {
            check_field_ref(cx, span.clone(), ends, f, numeric);
        }
        if *by == AnswerBy::Stack && ends.from.is_some() {
            cx.recipe(
                span.clone(),
                "`stack` keys one event by the kernel stack it was hit with; a span has two events",
                Some("answer `event = \"...\"` with `by = [\"stack\"]` for either end".into()),
            );
        }
        if a.by[..j].contains(by) {
            cx.recipe(span, format!("`{by}` is in `by` twice"), None);
        }
    }
    for (j, v) in a.values.iter().enumerate() {
        let span = cx.span(&path!("answer", i, "values", j));
        match v {
            AnswerValue::Count => {}
            AnswerValue::Latency if ends.from.is_none() && !own_duration(&ends.subject.1) => cx
                .recipe(
                    span,
                    "`latency` is the duration of a span: it needs `from` and `to` (or an event \
                     that carries its own, as `ftrace:funcgraph_exit` does)",
                    Some("for one event, use count, sum(F), min(F), max(F) or avg(F)".into()),
                ),
            AnswerValue::Latency => {}
            AnswerValue::Sum(f)
            | AnswerValue::Min(f)
            | AnswerValue::Max(f)
            | AnswerValue::Avg(f) => {
                check_field_ref(cx, span, ends, f, Some("a value"));
            }
        }
    }
    for (j, v) in values.iter().enumerate() {
        if values[..j].contains(v) {
            let span = cx.span(&path!("answer", i, "values", j));
            cx.recipe(span, format!("`{v}` is in `values` twice"), None);
        }
    }
}

/// Whether each record of `format` carries its own duration: `rettime -
/// calltime` (ns) of `ftrace:funcgraph_exit`, what `latency` is for it.
fn own_duration(format: &EventFormat) -> bool {
    format.field("calltime").is_some() && format.field("rettime").is_some()
}

/// `where`: the recipe's filter syntax, on the answer's event (a span's `to`).
fn check_where(cx: &mut Ctx<'_>, i: usize, a: &Answer, ends: &Ends) -> Option<String> {
    let text = a.filter.as_ref()?;
    let path = path!("answer", i, "where");
    match filter::parse(text) {
        Err(e) => {
            let span = cx.inner_span(&path, &e.span);
            cx.recipe(
                span,
                format!("`where` syntax: {}", e.message),
                Some("see Documentation/trace/events.rst section 5 (\"field op value\", joined with && and ||)".into()),
            );
            None
        }
        Ok(preds) => {
            let (event, format, _) = &ends.subject;
            let rewrites =
                check_predicates(cx, &path, event, format, &preds, &mut Default::default());
            Some(rewrite(text, &rewrites))
        }
    }
}

/// `sort`: one of the answer's values, or a statistic of its `latency`.
fn check_sort(cx: &mut Ctx<'_>, i: usize, a: &Answer, values: &[AnswerValue]) {
    let Some(sort) = &a.sort else {
        return;
    };
    let named = match &sort.key {
        SortKey::Value(v) => values.contains(v),
        SortKey::Latency(_) => values.contains(&AnswerValue::Latency),
    };
    if !named {
        let span = cx.span(&path!("answer", i, "sort"));
        let list: Vec<String> = values.iter().map(ToString::to_string).collect();
        cx.recipe(
            span,
            format!("`sort = \"{sort}\"` names no value of this answer"),
            Some(format!(
                "its values are: {}{}",
                list.join(", "),
                if values.contains(&AnswerValue::Latency) {
                    " (latency sorts by min, p50, p90, p99, max or total)"
                } else {
                    ""
                }
            )),
        );
    }
}

/// The engine answer `i` gets, why, and its hist triggers when it is the
/// kernel; `None` (reported) when `engine = "kernel"` cannot be honoured.
fn choose_engine(
    cx: &mut Ctx<'_>,
    i: usize,
    a: &Answer,
    ends: &Ends,
    values: &[AnswerValue],
    filter: &Option<String>,
) -> Option<(EngineUsed, String, Option<KernelAnswer>)> {
    if a.engine == AnswerEngine::Trace {
        return Some((
            EngineUsed::Trace,
            "`engine = \"trace\"`: computed from trace.dat after the run".into(),
            None,
        ));
    }
    // A tracer's record (the recipe's doing), what the kernel lacks, then
    // what the answer asks that hist triggers cannot do.
    let record =
        (ends.from.iter().chain([&ends.subject])).find_map(|(n, ..)| Some((n, tracer_of(n)?)));
    let lacks = if !cx.facts.has_hist_triggers {
        Some(
            "this kernel has no hist triggers (events have no `hist` file: CONFIG_HIST_TRIGGERS)"
                .to_string(),
        )
    } else if ends.from.is_some() && !cx.facts.has_file("synthetic_events") {
        Some(
            "this kernel has no `synthetic_events` file (CONFIG_SYNTH_EVENTS), which a span needs"
                .to_string(),
        )
    } else {
        None
    };
    let compiled = match (record, lacks) {
        (Some((name, tracer)), _) => Err((
            format!(
                "`{name}` is the {tracer} tracer's own record, which takes no hist trigger (it has no `hist` file)"
            ),
            false,
        )),
        (None, Some(why)) => Err((why, true)),
        (None, None) => compile(
            a,
            values,
            &ends.subject,
            ends.from.as_ref(),
            filter.as_deref(),
            cx.facts,
        )
        .map_err(|why| (why, false)),
    };
    match (compiled, a.engine) {
        (Ok(k), _) => Some((
            EngineUsed::Kernel,
            format!(
                "computed in the kernel by hist triggers{} (read back from `hist` before rollback)",
                if ends.from.is_some() {
                    " through a synthetic event fed by `onmatch`"
                } else {
                    ""
                }
            ),
            Some(k),
        )),
        (Err((why, _)), AnswerEngine::Auto | AnswerEngine::Trace) => Some((
            EngineUsed::Trace,
            format!("computed from trace.dat: {why}"),
            None,
        )),
        (Err((why, kernel_fault)), AnswerEngine::Kernel) => {
            let span = cx.span(&path!("answer", i, "engine"));
            let help = Some(
                "use `engine = \"auto\"` to compute it from trace.dat where the kernel cannot"
                    .into(),
            );
            match kernel_fault {
                true => cx.kernel(span, format!("`engine = \"kernel\"`: {why}"), help),
                false => cx.recipe(span, format!("`engine = \"kernel\"`: {why}"), help),
            }
            None
        }
    }
}

/// Where an answer's events are recorded: the run's events so far, the
/// recipe's probes, and the comm scope's names.
pub(super) struct Recorded<'a> {
    /// The run's events, to which answers' events are added.
    pub(super) events: &'a mut Vec<ResolvedEvent>,
    /// The recipe's probes (always recorded).
    pub(super) probes: &'a [super::ResolvedProbe],
    /// `[scope] comms`, checked.
    pub(super) comms: &'a [String],
}

impl Recorded<'_> {
    /// The filter the run writes on event `name` (see [`ResolvedAnswer::event_filters`]).
    fn filter_of(&self, name: &str) -> Option<String> {
        if let Some(p) = self.probes.iter().find(|p| is_probe_event(name, p)) {
            return p.filter.clone();
        }
        match self.events.iter().find(|e| e.name == name) {
            Some(e) => e.filter.clone(),
            None => super::scope::comm_filter(name, self.comms),
        }
    }
}

/// Whether `name` (`kprobes:EVENT` / `uprobes:EVENT`) is probe `p`.
fn is_probe_event(name: &str, p: &super::ResolvedProbe) -> bool {
    name.split_once(':')
        .is_some_and(|(sys, ev)| ev == p.event && matches!(sys, "kprobes" | "uprobes"))
}

/// Adds event `name` of answer `i` to the run's events when no entry records
/// it yet (a probe always is), with its stacks when `stack.0`; refuses an
/// answer that needs stacks (`stack.1`) on an event recorded without them.
fn record_event(
    cx: &mut Ctx<'_>,
    i: usize,
    a: &Answer,
    name: &str,
    (stack, need): (bool, bool),
    rec: &mut Recorded<'_>,
) {
    let probe = rec.probes.iter().find(|p| is_probe_event(name, p));
    let stacks = match (probe, rec.events.iter().find(|e| e.name == name)) {
        (Some(p), _) => p.stacktrace,
        (None, Some(e)) => e.stacktrace,
        (None, None) => {
            rec.events.push(ResolvedEvent {
                name: name.to_string(),
                filter: super::scope::comm_filter(name, rec.comms),
                stacktrace: stack,
                span: cx.span(&path!("answer", i)),
            });
            return;
        }
    };
    if need && !stacks {
        let j = a.by.iter().position(|b| *b == AnswerBy::Stack).unwrap_or(0);
        let at = cx.span(&path!("answer", i, "by", j));
        cx.recipe(
            at,
            format!("`stack` needs the stacks of `{name}`, which the recipe records without them"),
            Some("add `stacktrace = true` to its `[[events]]` (or probe) entry".into()),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::kernel::KernelFacts;

    use crate::kernel::test_facts as facts;

    /// Every problem of a recipe of `answers`, as `LINE:COL: MESSAGE`.
    fn problems(answers: &str, facts: &KernelFacts) -> Vec<String> {
        let text = format!("name = \"t\"\n{answers}");
        let builtins = crate::recipe::Builtins::default();
        let loaded = match crate::recipe::load_str(Path::new("r.toml"), &text, &[], &builtins) {
            Ok(l) => l,
            Err(crate::recipe::LoadError::Invalid { diagnostics, .. }) => {
                return diagnostics.iter().map(|d| d.message.clone()).collect();
            }
            Err(e) => panic!("{e}"),
        };
        let diags = super::super::validate(&loaded, facts, &Default::default())
            .err()
            .unwrap_or_default();
        diags
            .iter()
            .map(|d| {
                let at = d
                    .span
                    .as_ref()
                    .map_or("-".into(), |s| loaded.source.place(s.start));
                format!("{at}: {}", d.message)
            })
            .collect()
    }

    #[test]
    fn check_reports_each_answer_problem_at_its_place() {
        let p = problems(
            r#"
[[answer]]
name = "a"
event = "sched:sched_switch"
by = ["prev_pidd", "from.x"]
values = ["latency", "sum(prev_comm)"]
where = "next_pid >"
sort = "max(prev_pid)"

[[answer]]
name = "a"
from = "sched:sched_waking"
to = "sched:no_such"

[[answer]]
name = "b"
from = "sched:sched_waking"
to = "sched:sched_wakeup"
match = ["pid"]
by = ["stack"]
"#,
            &facts("debian-6.12"),
        );
        let want = [
            "r.toml:6:7: event `sched:sched_switch` has no field `prev_pidd`",
            "r.toml:6:20: `from.x` names the start of a span, and this answer is one event",
            "r.toml:7:11: `latency` is the duration of a span: it needs `from` and `to` (or an event that carries its own, as `ftrace:funcgraph_exit` does)",
            "r.toml:7:22: a value needs a number, and `prev_comm` of `sched:sched_switch` is a string",
            "r.toml:8:20: `where` syntax: filter ends too early",
            "r.toml:9:8: `sort = \"max(prev_pid)\"` names no value of this answer",
            "r.toml:12:8: answer name `a` is used twice (first at r.toml:4:8)",
            "r.toml:14:6: this kernel has no event `sched:no_such`",
            "r.toml:21:7: `stack` keys one event by the kernel stack it was hit with; a span has two events",
        ];
        assert_eq!(p, want);
    }

    /// debian-6.12's facts with the formats of the tracers' own records
    /// (x86-64, as its tracefs gives them), which its fact file predates.
    fn facts_with_tracer_records() -> KernelFacts {
        let mut f = facts("debian-6.12");
        let common = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
            \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
            \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n";
        f.formats.insert(
            "ftrace:function".into(),
            format!(
                "name: function\nID: 1\nformat:\n{common}\
                 \tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\
                 \tfield:unsigned long parent_ip;\toffset:16;\tsize:8;\tsigned:0;\n\n\
                 print fmt: \" %ps <-- %ps\", (void *)REC->ip, (void *)REC->parent_ip\n"
            ),
        );
        f.formats.insert(
            "ftrace:funcgraph_exit".into(),
            format!(
                "name: funcgraph_exit\nID: 10\nformat:\n{common}\
                 \tfield:unsigned long func;\toffset:8;\tsize:8;\tsigned:0;\n\
                 \tfield:unsigned int depth;\toffset:16;\tsize:4;\tsigned:0;\n\
                 \tfield:unsigned int overrun;\toffset:20;\tsize:4;\tsigned:0;\n\
                 \tfield:unsigned long long calltime;\toffset:24;\tsize:8;\tsigned:0;\n\
                 \tfield:unsigned long long rettime;\toffset:32;\tsize:8;\tsigned:0;\n\n\
                 print fmt: \"<-- %ps (%u)\", (void *)REC->func, REC->depth\n"
            ),
        );
        f
    }

    /// A tracer's own records (`ftrace:function`, `ftrace:funcgraph_exit`)
    /// answer when the recipe runs that tracer, from trace.dat (they take no
    /// hist trigger), and funcgraph_exit's `latency` is each call's own
    /// duration; without the tracer, with `engine = "kernel"` or with a
    /// `latency` of a record that has no duration, check says why.
    #[test]
    fn a_tracers_own_records_answer_when_the_recipe_runs_the_tracer() {
        let f = facts_with_tracer_records();
        let calls =
            "[[answer]]\nname = \"calls\"\nevent = \"ftrace:function\"\nby = [\"sym(ip)\"]\n";
        let tracer = "[tracer]\nname = \"function\"\nfunctions = [\"vfs_read\"]\n";
        assert_eq!(
            problems(&format!("{tracer}{calls}"), &f),
            Vec::<String>::new()
        );
        assert_eq!(
            problems(calls, &f),
            [
                "r.toml:4:9: `ftrace:function` is the function tracer's own record, and this recipe has no tracer"
            ]
        );
        assert_eq!(
            problems(&format!("{tracer}{calls}engine = \"kernel\"\n"), &f),
            [
                "r.toml:9:10: `engine = \"kernel\"`: `ftrace:function` is the function tracer's own record, which takes no hist trigger (it has no `hist` file)"
            ]
        );
        let slow = "[tracer]\nname = \"function_graph\"\nfunctions = [\"vfs_read\"]\nthresh_us = 10\n\
            [[answer]]\nname = \"slow\"\nevent = \"ftrace:funcgraph_exit\"\nby = [\"sym(func)\"]\n\
            values = [\"count\", \"latency\"]\nsort = \"-p99\"\n";
        assert_eq!(problems(slow, &f), Vec::<String>::new());
        assert_eq!(
            problems(
                &slow
                    .replace("funcgraph_exit", "function")
                    .replace("function_graph", "function")
                    .replace("func)", "ip)"),
                &f
            ),
            [
                "r.toml:10:20: `latency` is the duration of a span: it needs `from` and `to` (or an event that carries its own, as `ftrace:funcgraph_exit` does)"
            ]
        );
    }

    #[test]
    fn engine_kernel_is_refused_where_the_kernel_lacks_hist_triggers() {
        let answer = "[[answer]]\nname = \"a\"\nevent = \"sched:sched_switch\"\nby = [\"prev_comm\"]\nengine = \"kernel\"\n";
        let p = problems(answer, &facts("host"));
        assert_eq!(
            p,
            [
                "r.toml:6:10: `engine = \"kernel\"`: this kernel has no hist triggers (events have no `hist` file: CONFIG_HIST_TRIGGERS)"
            ]
        );
        assert!(problems(answer, &facts("debian-6.1")).is_empty());
        // A `by` item of no known form is refused at parse time, with the forms.
        let p = problems(
            "[[answer]]\nname = \"a\"\nevent = \"sched:sched_switch\"\nby = [\"median(x)\"]\n",
            &facts("debian-6.1"),
        );
        assert!(
            p.iter()
                .any(|m| m.contains("`median(...)` is not a `by` function")),
            "{p:#?}"
        );
    }
}
