//! `[[expect]]`: each `that` parses in the [`crate::expr`] language, and names
//! only events the run records (a count of an event it never enables would
//! always be 0) and latency analyses that exist, on both sides of a comparison
//! of two measurements; `max_latency` only with a tracer that measures one,
//! `max_stack` only with `[stack]`.

use std::ops::Range;

use super::{Ctx, ResolvedEvent, ResolvedProbe};
use crate::expr::{CellOf, Context, Expr, LATENCY_ANALYSES, Metric, RowKey};
use crate::recipe::{AnswerValue, LatencyStat};
use crate::suggest;

/// One checked expectation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ValidExpect {
    /// The expression as written.
    pub(crate) that: String,
    /// Parsed.
    pub(crate) expr: Expr,
}

/// Parses every `[[expect]]`, reporting each problem at its place in the string.
pub(super) fn resolve_expectations(
    cx: &mut Ctx<'_>,
    events: &[ResolvedEvent],
    probes: &[ResolvedProbe],
) -> Vec<ValidExpect> {
    let mut out = Vec::new();
    let recorded: Vec<String> = events
        .iter()
        .map(|e| e.name.clone())
        .chain(
            probes
                .iter()
                .map(|p| format!("{}:{}", p.kind.recipe_system(), p.event)),
        )
        .collect();
    for (i, e) in cx.loaded.recipe.expect.clone().iter().enumerate() {
        let key = path!("expect", i, "that");
        let answers = &cx.loaded.recipe.answer;
        let parsed = Expr::parse(&e.that, Context::Expect)
            .and_then(|x| x.with_answers(|n| answers.iter().any(|a| a.name == n)));
        let expr = match parsed {
            Ok(x) => x,
            Err(err) => {
                let span = cx.inner_span(&key, &err.span);
                cx.recipe(
                    span,
                    format!("expectation: {}", err.message),
                    Some("write e.g. `count(sched:sched_process_exec) >= 3`, `lost_events == 0` or `p99(syscalls:openat) < 2ms`".into()),
                );
                continue;
            }
        };
        let tracer = cx
            .loaded
            .recipe
            .tracer
            .as_ref()
            .and_then(|t| t.name.clone());
        if expr.metric == Metric::MaxLatency
            && !tracer
                .as_deref()
                .is_some_and(|t| super::tracer::MAX_LATENCY_TRACERS.contains(&t))
        {
            let span = cx.inner_span(&key, &expr.metric_span);
            cx.recipe(
                span,
                format!(
                    "`max_latency` is the result of a latency tracer, and this recipe's tracer is `{}`",
                    tracer.as_deref().unwrap_or("nop")
                ),
                Some(format!(
                    "set [tracer] name to one of: {}",
                    super::tracer::MAX_LATENCY_TRACERS.join(", ")
                )),
            );
            continue;
        }
        if expr.metric == Metric::MaxStack
            && cx
                .loaded
                .recipe
                .stack
                .as_ref()
                .is_none_or(|s| s.enable == Some(false))
        {
            let span = cx.inner_span(&key, &expr.metric_span);
            cx.recipe(
                span,
                "`max_stack` is the stack tracer's result, and this recipe does not enable it",
                Some("add `[stack]` (enable = true)".into()),
            );
            continue;
        }
        if let Metric::Hist { event, value } = &expr.metric {
            let triggers: Vec<&crate::recipe::Trigger> = cx
                .loaded
                .recipe
                .triggers
                .iter()
                .filter(|t| t.action == "hist" && t.event.as_deref() == Some(event.as_str()))
                .collect();
            let values: Vec<String> = std::iter::once("hitcount".to_string())
                .chain(triggers.iter().flat_map(|t| {
                    t.values
                        .iter()
                        .map(|v| v.split('.').next().unwrap_or(v).to_string())
                }))
                .collect();
            let problem = if triggers.is_empty() {
                Some(format!("the recipe has no hist trigger on `{event}`"))
            } else if !values.contains(value) {
                Some(format!(
                    "the hist trigger on `{event}` keeps no value `{value}`"
                ))
            } else {
                None
            };
            if let Some(msg) = problem {
                let span = cx.inner_span(&key, &expr.metric_span);
                cx.recipe(
                    span,
                    msg,
                    Some(format!(
                        "name a `[[triggers]]` entry with action = \"hist\" and one of its values: {}",
                        values.join(", ")
                    )),
                );
                continue;
            }
        }
        if let Some((span, msg, help)) = Metric::of(&expr).find_map(|(metric, span)| {
            answer_problem(cx, &e.that, metric, span)
                .or_else(|| latency_problem(cx, &recorded, metric, span))
        }) {
            let span = cx.inner_span(&key, &span);
            cx.recipe(span, msg, Some(help));
            continue;
        }
        let unrecorded = Metric::of(&expr).find_map(|(metric, span)| match metric {
            Metric::Count(ev) | Metric::Rate(ev) if !recorded.iter().any(|r| r == ev) => {
                Some((ev, span))
            }
            _ => None,
        });
        if let Some((ev, span)) = unrecorded {
            let span = cx.inner_span(&key, span);
            let system = ev.split_once(':').map_or(ev.as_str(), |(s, _)| s);
            let names = cx.loaded.recipe.answer.iter().map(|a| a.name.as_str());
            let hint = suggest::did_you_mean(ev, recorded.iter().map(String::as_str), 3)
                + &suggest::did_you_mean(system, names, 3);
            let hint = match cx.loaded.recipe.answer.is_empty() {
                true => hint,
                false => format!(
                    "{hint}(an answer's row is `count(NAME:ROW)`, NAME one of: {}) ",
                    answer_names(cx)
                ),
            };
            if ev.starts_with("kprobes:")
                || ev.starts_with("uprobes:")
                || cx.facts.events.contains(ev)
            {
                cx.recipe(
                    span,
                    format!("the recipe does not record `{ev}`, so its count is always 0"),
                    Some(format!(
                        "{hint}add it to `[[events]]`, or name one of: {}",
                        recorded.join(", ")
                    )),
                );
            } else {
                cx.kernel(
                    span,
                    format!("this kernel has no event `{ev}`"),
                    Some(format!("{hint}the recipe records: {}", recorded.join(", "))),
                );
            }
            continue;
        }
        out.push(ValidExpect {
            that: e.that.clone(),
            expr,
        });
    }
    out
}

/// What is wrong with `metric`, a `syscalls` or `kretprobe` latency group
/// (`span` its argument), when the recipe cannot produce that group: a
/// syscall whose enter and exit it does not record (any with
/// `raw_syscalls`), a function it does not probe on entry and return (a
/// kernel function by its name, a uprobe pair by its entry event's name, as
/// the `kretprobe` analysis names its groups). The place, message and help.
fn latency_problem(
    cx: &Ctx<'_>,
    recorded: &[String],
    metric: &Metric,
    span: &Range<usize>,
) -> Option<(Range<usize>, String, String)> {
    let Metric::Latency { analysis, key, .. } = metric else {
        return None;
    };
    if key == "(all)" || key == "(scope)" {
        return None;
    }
    let (groups, none, how) = match analysis.as_str() {
        "syscalls" => {
            if recorded.iter().any(|e| e.starts_with("raw_syscalls:")) {
                return None;
            }
            let exits: Vec<&str> = recorded
                .iter()
                .filter_map(|e| e.strip_prefix("syscalls:sys_exit_"))
                .collect();
            let groups: Vec<String> = recorded
                .iter()
                .filter_map(|e| e.strip_prefix("syscalls:sys_enter_"))
                .filter(|x| exits.contains(x))
                .map(str::to_string)
                .collect();
            (
                groups,
                "the recipe records no syscall's enter and exit, so `syscalls` has no group",
                "record `syscalls:sys_enter_X` and `syscalls:sys_exit_X` (or `raw_syscalls`) for the syscall X",
            )
        }
        "kretprobe" => (
            probed_functions(cx),
            "the recipe probes no function on both entry and return, so `kretprobe` has no group",
            "probe the function on entry and on return: a kprobe (or fprobe) and a kretprobe (or fexit) on one kernel function (its group is the function's name), or a uprobe and a uretprobe on one target (its group is the uprobe's event name)",
        ),
        _ => return None,
    };
    if groups.iter().any(|g| g == key) {
        return None;
    }
    let key_span = span.end - key.len()..span.end;
    Some(match groups.is_empty() {
        true => (span.clone(), none.to_string(), how.to_string()),
        false => (
            key_span,
            format!("the recipe's `{analysis}` latency has no group `{key}`"),
            format!(
                "{}its groups: {}; {how}",
                suggest::did_you_mean(key, groups.iter().map(String::as_str), 3),
                groups.join(", ")
            ),
        ),
    })
}

/// The `kretprobe` groups the recipe's probes can produce: each kernel
/// function with an entry (kprobe at offset 0, fprobe) and a return
/// (kretprobe, fexit) probe, by name; each uprobe whose target a uretprobe
/// also probes, by the uprobe's event name.
fn probed_functions(cx: &Ctx<'_>) -> Vec<String> {
    let r = &cx.loaded.recipe;
    let function = |target: &str| {
        let t = target.rsplit_once(':').map_or(target, |(_, s)| s);
        t.strip_suffix("+0").unwrap_or(t).to_string()
    };
    let kernel = |kinds: &[&str]| -> Vec<String> {
        r.kprobes
            .iter()
            .filter(|p| kinds.contains(&p.kind.as_str()))
            .map(|p| function(&p.target))
            .collect()
    };
    let returns = kernel(&["kretprobe", "fexit"]);
    let mut groups: Vec<String> = kernel(&["kprobe", "fprobe"])
        .into_iter()
        .filter(|f| returns.contains(f))
        .collect();
    groups.extend(
        r.uprobes
            .iter()
            .filter(|p| p.kind == "uprobe")
            .filter(|p| {
                r.uprobes
                    .iter()
                    .any(|q| q.kind == "uretprobe" && q.target == p.target)
            })
            .map(|p| p.event.clone()),
    );
    groups.sort();
    groups.dedup();
    groups
}

/// The recipe's answer names, for messages (`none` without one).
fn answer_names(cx: &Ctx<'_>) -> String {
    let names: Vec<&str> = cx
        .loaded
        .recipe
        .answer
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    match names.is_empty() {
        true => "none".into(),
        false => names.join(", "),
    }
}

/// What is wrong with `metric`, a cell of an answer (`span` its argument in
/// `that`): an answer the recipe does not declare, a value it does not
/// compute, a row of more or fewer keys than its `by`. The place (in `that`),
/// message and help.
fn answer_problem(
    cx: &Ctx<'_>,
    that: &str,
    metric: &Metric,
    span: &Range<usize>,
) -> Option<(Range<usize>, String, String)> {
    let Metric::Answer(cell) = metric else {
        return None;
    };
    let name = &cell.answer;
    let name_span = span.start..span.start + name.len();
    let row_span = that[span.clone()]
        .find(':')
        .map_or(span.clone(), |k| span.start + k + 1..span.end);
    let Some(answer) = cx.loaded.recipe.answer.iter().find(|a| a.name == *name) else {
        let candidates = cx
            .loaded
            .recipe
            .answer
            .iter()
            .map(|a| a.name.as_str())
            .chain(LATENCY_ANALYSES.iter().copied());
        let latency = matches!(cell.of, CellOf::Latency(_));
        return Some((
            name_span,
            match latency {
                true => format!("no answer or latency analysis `{name}`"),
                false => format!("the recipe declares no answer `{name}`"),
            },
            format!(
                "{}the recipe's answers: {}{}",
                suggest::did_you_mean(name, candidates, 3),
                answer_names(cx),
                match latency {
                    true => format!("; latency analyses: {}", LATENCY_ANALYSES.join(", ")),
                    false => String::new(),
                }
            ),
        ));
    };
    let values = answer.values_or_default();
    let listed: Vec<String> = values.iter().map(ToString::to_string).collect();
    let computes = match &cell.of {
        CellOf::Count => true,
        CellOf::Value(v) => values.contains(v),
        CellOf::Latency(_) | CellOf::Mean => values.contains(&AnswerValue::Latency),
    };
    if !computes {
        let want = cell.of.name();
        let mut forms: Vec<CellOf> = vec![CellOf::Count];
        for v in &values {
            match v {
                AnswerValue::Count => {}
                AnswerValue::Latency => forms.extend(
                    LatencyStat::ALL
                        .iter()
                        .map(|(s, _)| CellOf::Latency(*s))
                        .chain([CellOf::Mean]),
                ),
                other => forms.push(CellOf::Value(other.clone())),
            }
        }
        let names: Vec<String> = forms.iter().map(CellOf::name).collect();
        let what = match &cell.of {
            CellOf::Value(_) => format!("`{want}`"),
            _ => format!(
                "latency (`{want}` reads its `latency` value, and it is {})",
                match answer.is_span() {
                    true => "a span without it",
                    false => "one event, not a span",
                }
            ),
        };
        return Some((
            span.clone(),
            format!(
                "answer `{name}` computes no {what}; its values: {}",
                listed.join(", ")
            ),
            format!(
                "{}an expectation on it may read: {}",
                suggest::did_you_mean(&want, names.iter().map(String::as_str), 3),
                forms
                    .iter()
                    .map(|f| format!("`{}`", f.call(name, "ROW")))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    if let RowKey::Keys(keys) = &cell.row
        && keys.len() != answer.by.len()
    {
        let by: Vec<String> = answer.by.iter().map(ToString::to_string).collect();
        let example = match by.is_empty() {
            true => "(all)".to_string(),
            false => by
                .iter()
                .map(|b| b.to_uppercase())
                .collect::<Vec<_>>()
                .join(","),
        };
        return Some((
            row_span,
            format!(
                "answer `{name}` has {} key{} per row ({}), and `{}` gives {}",
                by.len(),
                if by.len() == 1 { "" } else { "s" },
                if by.is_empty() {
                    "none: its one row is `(all)`".to_string()
                } else {
                    by.join(", ")
                },
                cell.row,
                keys.len()
            ),
            format!(
                "write the row's keys in the order of `by`, joined by `,` (`{}`), or `(all)` for every row, `(other)` for the rows past `top`",
                cell.of.call(name, &example),
            ),
        ));
    }
    None
}
