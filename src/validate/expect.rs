//! `[[expect]]`: each `that` parses in the [`crate::expr`] language, and names
//! only events the run records (a count of an event it never enables would
//! always be 0) and latency analyses that exist, on both sides of a comparison
//! of two measurements; `max_latency` only with a tracer that measures one,
//! `max_stack` only with `[stack]`.

use super::{Ctx, ResolvedEvent, ResolvedProbe};
use crate::expr::{Context, Expr, Metric};
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
        let expr = match Expr::parse(&e.that, Context::Expect) {
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
        let unrecorded = Metric::of(&expr).find_map(|(metric, span)| match metric {
            Metric::Count(ev) | Metric::Rate(ev) if !recorded.iter().any(|r| r == ev) => {
                Some((ev, span))
            }
            _ => None,
        });
        if let Some((ev, span)) = unrecorded {
            let span = cx.inner_span(&key, span);
            let hint = suggest::did_you_mean(ev, recorded.iter().map(String::as_str), 3);
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
