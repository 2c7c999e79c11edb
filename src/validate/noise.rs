//! `[tracer.hwlat]`, `[tracer.osnoise]`, `[tracer.timerlat]`: the parameters of
//! the hardware latency detector, the osnoise tracer and the timerlat tracer,
//! as the global top-level files they are written to.
//!
//! Sources of truth: Documentation/trace/hwlat_detector.rst (`hwlat_detector/width`,
//! `window`, `mode`), osnoise-tracer.rst (`osnoise/period_us`, `runtime_us`,
//! `stop_tracing_us`, `stop_tracing_total_us`, `cpus`), timerlat-tracer.rst
//! (`osnoise/timerlat_period_us`, `print_stack`); the ranges are the kernel's
//! `trace_min_max_param` bounds (kernel/trace/trace_hwlat.c, trace_osnoise.c):
//! width ≤ window, runtime ≤ period, 100 ≤ timerlat period ≤ 1000000 µs.
//!
//! Every file is global (one per machine, not per instance): the plan writes
//! each from its before-image and restores it at teardown.

use super::{Ctx, Span, check_cpu_list};
use crate::recipe::Tracer;

/// hwlat's default `width` (µs), the bound a lone `window_us` is checked against.
const HWLAT_DEFAULT_WIDTH: u64 = 500_000;
/// hwlat's default `window` (µs), the bound a lone `width_us` is checked against.
const HWLAT_DEFAULT_WINDOW: u64 = 1_000_000;
/// osnoise's default `runtime_us` and `period_us` (µs).
const OSNOISE_DEFAULT_PERIOD: u64 = 1_000_000;
/// timerlat's period bounds (µs).
const TIMERLAT_PERIOD: (u64, u64) = (100, 1_000_000);
/// `hwlat_detector/mode` values (Linux 5.14 and later).
const HWLAT_MODES: &[&str] = &["none", "round-robin", "per-cpu"];

/// One global parameter file and the value the run writes to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NoiseParam {
    /// The file, relative to tracefs (`hwlat_detector/width`).
    pub(crate) file: String,
    /// What is written.
    pub(crate) value: String,
    /// The recipe key that asked for it.
    pub(crate) span: Span,
}

/// Checks the parameter tables of `t` (whose tracer is `name`) and returns the
/// writes, in an order the kernel accepts from its defaults (see [`pair`]).
pub(super) fn resolve_noise_params(cx: &mut Ctx<'_>, t: &Tracer, name: &str) -> Vec<NoiseParam> {
    for (table, set) in [
        ("hwlat", t.hwlat.is_some()),
        ("osnoise", t.osnoise.is_some()),
        ("timerlat", t.timerlat.is_some()),
    ] {
        if set && table != name {
            let span = cx.key_span(&path!("tracer", table));
            cx.recipe(
                span,
                format!("`[tracer.{table}]` sets the {table} tracer's parameters, and this recipe's tracer is `{name}`"),
                Some(format!("set name = \"{table}\" in [tracer], or remove [tracer.{table}]")),
            );
        }
    }
    let mut out = Vec::new();
    match name {
        "hwlat" => {
            let Some(h) = &t.hwlat else { return out };
            let k = |key: &str| path!("tracer", "hwlat", key);
            let width = (h.width_us, cx.span(&k("width_us")));
            let window = (h.window_us, cx.span(&k("window_us")));
            pair(
                cx,
                ("hwlat_detector/width", "width_us", width),
                ("hwlat_detector/window", "window_us", window),
                (HWLAT_DEFAULT_WIDTH, HWLAT_DEFAULT_WINDOW),
                true,
                &mut out,
            );
            if let Some(mode) = &h.mode {
                let span = cx.span(&k("mode"));
                if HWLAT_MODES.contains(&mode.as_str()) {
                    out.push(param("hwlat_detector/mode", mode.clone(), span));
                } else {
                    cx.recipe(
                        span,
                        format!("hwlat has no mode `{mode}`"),
                        Some(format!("one of: {}", HWLAT_MODES.join(", "))),
                    );
                }
            }
        }
        "osnoise" => {
            let Some(o) = &t.osnoise else { return out };
            let k = |key: &str| path!("tracer", "osnoise", key);
            let runtime = (o.runtime_us, cx.span(&k("runtime_us")));
            let period = (o.period_us, cx.span(&k("period_us")));
            pair(
                cx,
                ("osnoise/runtime_us", "runtime_us", runtime),
                ("osnoise/period_us", "period_us", period),
                (OSNOISE_DEFAULT_PERIOD, OSNOISE_DEFAULT_PERIOD),
                false,
                &mut out,
            );
            stops_and_cpus(
                cx,
                "osnoise",
                (o.stop_tracing_us, o.stop_tracing_total_us),
                o.cpus.as_deref(),
                &mut out,
            );
        }
        "timerlat" => {
            let Some(tl) = &t.timerlat else { return out };
            let k = |key: &str| path!("tracer", "timerlat", key);
            if let Some(p) = tl.period_us {
                let span = cx.span(&k("period_us"));
                if (TIMERLAT_PERIOD.0..=TIMERLAT_PERIOD.1).contains(&p) {
                    out.push(param("osnoise/timerlat_period_us", p.to_string(), span));
                } else {
                    cx.recipe(
                        span,
                        format!("timerlat's period is {p} µs; the kernel takes 100 to 1000000 µs"),
                        Some("period_us = 1000 is the kernel's default (1 ms)".into()),
                    );
                }
            }
            if let Some(v) = tl.print_stack_us {
                out.push(param(
                    "osnoise/print_stack",
                    v.to_string(),
                    cx.span(&k("print_stack_us")),
                ));
            }
            stops_and_cpus(
                cx,
                "timerlat",
                (tl.stop_tracing_us, tl.stop_tracing_total_us),
                tl.cpus.as_deref(),
                &mut out,
            );
        }
        _ => {}
    }
    out
}

fn param(file: &str, value: String, span: Span) -> NoiseParam {
    NoiseParam {
        file: file.into(),
        value,
        span,
    }
}

/// A `(small, large)` pair the kernel keeps ordered (`width ≤ window`,
/// `runtime ≤ period`), each `(file, key, (value, span))`, with the kernel's
/// defaults for the one the recipe leaves out. `strict`: small < large.
/// Written so that each write is accepted from the defaults: the large one
/// first when it is at least the default small one (it grows or stays above),
/// else the small one first.
fn pair(
    cx: &mut Ctx<'_>,
    small: (&str, &str, (Option<u64>, Span)),
    large: (&str, &str, (Option<u64>, Span)),
    defaults: (u64, u64),
    strict: bool,
    out: &mut Vec<NoiseParam>,
) {
    let (s_file, s_key, (s_val, s_span)) = small;
    let (l_file, l_key, (l_val, l_span)) = large;
    if s_val.is_none() && l_val.is_none() {
        return;
    }
    for (key, v, span) in [(s_key, s_val, &s_span), (l_key, l_val, &l_span)] {
        if v == Some(0) {
            cx.recipe(span.clone(), format!("`{key}` must be above 0 µs"), None);
            return;
        }
    }
    let (s, l) = (s_val.unwrap_or(defaults.0), l_val.unwrap_or(defaults.1));
    if s > l || (strict && s == l) {
        let span = if s_val.is_some() { s_span } else { l_span };
        let default = |v: Option<u64>, key: &str| match v {
            Some(_) => String::new(),
            None => format!(" (the kernel's default {key})"),
        };
        cx.recipe(
            span,
            format!(
                "`{s_key}` = {s} µs{} must be {} `{l_key}` = {l} µs{}",
                default(s_val, s_key),
                if strict { "less than" } else { "at most" },
                default(l_val, l_key)
            ),
            Some(format!("set both `{s_key}` and `{l_key}`")),
        );
        return;
    }
    let small = s_val.map(|v| param(s_file, v.to_string(), s_span));
    let large = l_val.map(|v| param(l_file, v.to_string(), l_span));
    let large_first = l >= defaults.0;
    let (a, b) = if large_first {
        (large, small)
    } else {
        (small, large)
    };
    out.extend(a.into_iter().chain(b));
}

/// `stop_tracing_us`, `stop_tracing_total_us` and `cpus` of `[tracer.TABLE]`
/// (osnoise and timerlat share these files).
fn stops_and_cpus(
    cx: &mut Ctx<'_>,
    table: &str,
    (stop, stop_total): (Option<u64>, Option<u64>),
    cpus: Option<&str>,
    out: &mut Vec<NoiseParam>,
) {
    for (key, v) in [
        ("stop_tracing_us", stop),
        ("stop_tracing_total_us", stop_total),
    ] {
        if let Some(v) = v {
            let span = cx.span(&path!("tracer", table, key));
            out.push(param(&format!("osnoise/{key}"), v.to_string(), span));
        }
    }
    if let Some(list) = cpus {
        let span = cx.span(&path!("tracer", table, "cpus"));
        if let Some(cpus) = check_cpu_list(cx, span.clone(), list) {
            let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
            out.push(param("osnoise/cpus", list.join(","), span));
        }
    }
}
