//! `[buffer] persistent = "NAME"`: the flight recorder. The kernel must have
//! the boot-mapped instance NAME (Linux 6.12+: `reserve_mem=SIZE:ALIGN:LABEL`
//! and `trace_instance=NAME@LABEL` on the kernel command line,
//! Documentation/trace/debugging.rst), whose buffer lives in memory the next
//! boot finds again. Such an instance has no snapshot buffer and keeps its
//! size, so what needs either is refused here.

use super::{Ctx, MAX_LATENCY_TRACERS, Span};
use crate::recipe::Recipe;

/// Smallest reservation `check` suggests, MiB (the kernel needs a few pages
/// per CPU besides the data pages).
const MIN_RESERVE_MIB: u64 = 8;
/// Per-CPU size assumed when the recipe gives no `[buffer] size_kb`, KiB.
const DEFAULT_SIZE_KB: u64 = 1024;

/// The kernel command line that creates boot-mapped instance `name` with
/// `size_kb` KiB per CPU on `cpus` CPUs: the reservation is their product
/// rounded up to whole MiB, at least [`MIN_RESERVE_MIB`], aligned to a page.
pub(crate) fn boot_command_line(name: &str, size_kb: Option<u64>, cpus: usize) -> String {
    let kb = size_kb.unwrap_or(DEFAULT_SIZE_KB) * cpus.max(1) as u64;
    let mib = kb.div_ceil(1024).max(MIN_RESERVE_MIB);
    format!("reserve_mem={mib}M:4096:trace trace_instance={name}@trace")
}

/// Checks `[buffer] persistent` against the kernel and the rest of the recipe;
/// returns the instance name and where it was written.
pub(super) fn resolve_persistent(cx: &mut Ctx<'_>, r: &Recipe) -> Option<(String, Span)> {
    let name = r.buffer.persistent.as_ref()?;
    let span = cx.span(&path!("buffer", "persistent"));
    let before = cx.diags.len();
    let valid_name = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid_name {
        cx.recipe(
            span.clone(),
            "`persistent` must name an instance: 1 to 64 letters, digits, `_` or `-`",
            Some("e.g. `persistent = \"boot_map\"`".into()),
        );
        return None;
    }
    if !cx.facts.boot_instances.iter().any(|b| b == name) {
        let line = boot_command_line(name, r.buffer.size_kb, cx.facts.cpus.len());
        let have = match cx.facts.boot_instances.as_slice() {
            [] => String::new(),
            list => format!("; it has {}", list.join(", ")),
        };
        cx.kernel(
            span.clone(),
            format!(
                "this kernel ({}) has no boot-mapped instance `{name}` (an instance with `last_boot_info`){have}",
                cx.facts.release
            ),
            Some(format!(
                "the flight recorder needs Linux 6.12+ booted with `{line}` on its command line (Documentation/trace/debugging.rst)"
            )),
        );
    }
    let refuse = |cx: &mut Ctx<'_>, span: Span, what: String, help: &str| {
        cx.recipe(
            span,
            format!("{what}: a flight recorder's instance cannot have it"),
            Some(help.into()),
        );
    };
    if let Some(t) = r.tracer.as_ref().and_then(|t| t.name.as_ref())
        && MAX_LATENCY_TRACERS.contains(&t.as_str())
    {
        refuse(
            cx,
            cx.span(&path!("tracer", "name")),
            format!("tracer `{t}` keeps its worst case in a snapshot buffer"),
            "a boot-mapped instance has no snapshot buffer: trace events, or `function`",
        );
    }
    for (i, t) in r.triggers.iter().enumerate() {
        if t.action == "snapshot" {
            refuse(
                cx,
                cx.span(&path!("triggers", i, "action")),
                "a `snapshot` trigger needs a snapshot buffer".into(),
                "a boot-mapped instance has no snapshot buffer: use `traceoff` to freeze the buffer instead",
            );
        }
    }
    for (key, n) in [("kprobes", r.kprobes.len()), ("uprobes", r.uprobes.len())] {
        if n > 0 {
            refuse(
                cx,
                cx.key_span(&path!(key)),
                format!("`[[{key}]]` defines events that end with the boot"),
                "a probe's event and its format are gone after the reboot, so its records could not be read: trace tracepoints",
            );
        }
    }
    if !r.scope.command.is_empty() {
        refuse(
            cx,
            cx.span(&path!("scope", "command")),
            "`[scope] command` is a workload the run waits for".into(),
            "`run` arms the instance and exits at once: start the workload yourself afterwards",
        );
    }
    (cx.diags.len() == before).then(|| (name.clone(), span))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_reserves_the_buffer_rounded_up_with_a_floor() {
        assert_eq!(
            boot_command_line("boot_map", None, 2),
            "reserve_mem=8M:4096:trace trace_instance=boot_map@trace"
        );
        assert_eq!(
            boot_command_line("fr", Some(8192), 3),
            "reserve_mem=24M:4096:trace trace_instance=fr@trace"
        );
        assert_eq!(
            boot_command_line("fr", Some(5000), 4),
            "reserve_mem=20M:4096:trace trace_instance=fr@trace"
        );
    }
}
