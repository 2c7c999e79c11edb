//! `check --plan --export sh|trace-cmd`: the plan a run applies, for machines
//! without trace-recipe: as a POSIX shell script ([`sh`]), or as the nearest
//! `trace-cmd record` command line ([`trace_cmd`]).
//!
//! The script is made from the same [`Plan`] steps and undos that `run` applies
//! (never a second description): each step is applied in order and, once it
//! succeeded, its undo is pushed on a stack; an `EXIT` trap (reached on a failed
//! step, on SIGINT, SIGTERM and SIGHUP, and at the end) runs the stack in
//! reverse. Between applying and undoing it turns `tracing_on` on in the
//! instance and waits until it is interrupted. A plan whose undo needs a
//! before-image that is a list (set_ftrace_filter, set_event_pid at the top
//! level) is refused: the shell would need a second copy of
//! [`crate::tracefs::restore_value`].

use std::fmt::Write as _;

use crate::plan::{Op, Plan, Shell, Undo};
use crate::recipe::Recipe;
use crate::tracefs::WriteMode;
use crate::validate::ValidRecipe;

/// Single-quotes `s` for sh.
fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `s` as one sh word: as it is when it has no character sh treats specially,
/// else single-quoted.
fn word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=,+@%".contains(c));
    if plain { s.to_string() } else { q(s) }
}

/// The script's dialect: paths under `"$T"`, values printed by `printf`.
const SH: Shell = Shell {
    path: |p| format!("\"$T\"/{}", q(p)),
    line: |v| format!("printf '%s\\n' {}", q(v)),
};

/// The script for `plan` of recipe `name`. Errors: a step whose undo the script
/// cannot express (see the module docs), named.
pub fn sh(plan: &Plan, name: &str) -> Result<String, String> {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "#!/bin/sh\n# trace-recipe check --plan --export sh: recipe `{name}`, {} steps.\n# Applies the plan to tracefs, turns tracing on in {}, and waits; on\n# Ctrl-C, SIGTERM, SIGHUP or a failed step it undoes every step applied, in reverse.\n# Read the trace meanwhile from \"$T/{}/trace_pipe\". Run as root.\nset -u\nT=${{TRACEFS:-/sys/kernel/tracing}}\nUNDO=''\nundo_all() {{\n  trap - EXIT INT TERM HUP\n  [ -n \"${{SLEEPER:-}}\" ] && kill \"$SLEEPER\" 2>/dev/null\n  status=0\n  printf '%s\\n' \"$UNDO\" | while IFS= read -r c; do\n    [ -z \"$c\" ] && continue\n    eval \"$c\" || {{ echo \"undo failed: $c\" >&2; status=1; }}\n  done\n}}\ntrap undo_all EXIT\ntrap 'exit 130' INT\ntrap 'exit 143' TERM\ntrap 'exit 129' HUP\nstep() {{ echo \"step failed: $1\" >&2; exit 1; }}\npush() {{ UNDO=\"$1\n$UNDO\"; }}",
        plan.steps.len(),
        if plan.instance.is_empty() {
            "the top level"
        } else {
            &plan.instance
        },
        plan.instance
    );
    for (i, s) in plan.steps.iter().enumerate() {
        let n = i + 1;
        let mut undo_cmd = s.op.undo_command(&SH);
        if let Op::Write {
            file,
            undo: Undo::Restore,
            ..
        } = &s.op
        {
            use crate::tracefs::Readback;
            let pick = match crate::tracefs::file_rule(file).readback {
                Readback::FirstWord => "awk '{print $1; exit}'",
                Readback::Bracketed => "sed -n 's/.*\\[\\(.*\\)\\].*/\\1/p'",
                Readback::BufferSize => {
                    "awk '{ if (match($0, /expanded: [0-9]+/)) print substr($0, RSTART + 10, RLENGTH - 10); else print $1; exit }'"
                }
                Readback::Filter => "awk '{ if ($0 == \"none\") print \"0\"; else print }'",
                Readback::Enable => "sed 's/[*]$//'",
                _ => {
                    return Err(format!(
                        "step {n} restores `{file}` from a before-image the script cannot express"
                    ));
                }
            };
            let p = (SH.path)(file);
            let _ = writeln!(o, "B{n}=$({pick} < {p}) || step {n}");
            undo_cmd = Some(format!("printf '%s\\n' \"$B{n}\" > {p}"));
        }
        if let Op::Sysctl { sysctl, .. } = &s.op {
            let p = sysctl.path().display().to_string();
            let _ = writeln!(o, "B{n}=$(cat {p}) || step {n}");
            undo_cmd = Some(format!("printf '%s\\n' \"$B{n}\" > {p}"));
        }
        let _ = writeln!(o, "{} || step {n}", s.op.command(&SH));
        if let Some(u) = undo_cmd {
            let _ = writeln!(o, "push {}", q(&u));
        }
    }
    let on = if plan.instance.is_empty() {
        "tracing_on".to_string()
    } else {
        format!("{}/tracing_on", plan.instance)
    };
    let _ = writeln!(
        o,
        "printf '1\\n' > \"$T\"/{} || step on\necho \"applied {} steps; tracing until interrupted\" >&2\nsleep 2147483647 &\nSLEEPER=$!\nwait \"$SLEEPER\"",
        q(&on),
        plan.steps.len()
    );
    Ok(o)
}

/// What `trace-cmd record` gets for one event: `-e`, then `-f` and `-R`.
#[derive(Default)]
struct EventArgs {
    /// `system:event`.
    name: String,
    filter: Option<String>,
    /// Trigger commands (`-R`), in plan order.
    triggers: Vec<String>,
    /// The plan enables it (a trigger alone does not).
    enabled: bool,
}

/// The nearest `trace-cmd record` command line (options of trace-cmd 3.1,
/// `trace-cmd record -h`) for `plan` of recipe `valid`, as sh text: `#`
/// comments naming every recipe feature it cannot express, the probe
/// definitions to append before it (trace-cmd record cannot create kprobes or
/// uprobes), the command, and the lines that remove the probes afterwards.
///
/// Each plan step maps to an option: the instance to `-B` (none with a graph
/// filter: trace-cmd applies `-g` at the top level only), `buffer_size_kb` to
/// `-b`, `trace_clock` to `-C`, `tracing_cpumask` to `-M`, `options/NAME` to
/// `-O [no]NAME`, `set_event_pid` to `-P`, `event-fork` with a pid scope to
/// `-c`, `set_ftrace_filter` / `set_ftrace_notrace` / `set_graph_function` to
/// `-l` / `-n` / `-g`, `max_graph_depth` to `--max-graph-depth`,
/// `current_tracer` to `-p`, an event's `enable` / `filter` / `trigger` to `-e`
/// / `-f` / `-R`. `[scope] command` becomes the command (`-F`, or bare with
/// `[scope] system_wide`); without one, a
/// `duration` becomes `sleep SECONDS`. The global knobs trace-cmd record cannot
/// set for an instance (`max_graph_depth`, `tracing_thresh`) are written
/// before it and restored after it, as probes (and the synthetic events of
/// answers the kernel computes) are defined before it and removed after it. The run's own-thread exclusion needs
/// nothing: trace-cmd leaves its own threads out unless `--no-filter`.
pub fn trace_cmd(plan: &Plan, valid: &ValidRecipe) -> String {
    let r = &valid.recipe;
    let mut notes: Vec<String> = Vec::new();
    let mut before = Vec::new();
    let mut after = Vec::new();
    let mut opts: Vec<String> = Vec::new();
    let mut events: Vec<EventArgs> = Vec::new();
    let mut pids: Vec<String> = Vec::new();
    let mut fork = false;
    let prefix = if plan.instance.is_empty() {
        String::new()
    } else {
        format!("{}/", plan.instance)
    };
    // trace-cmd record writes -g to the top-level set_graph_function whatever
    // -B says (trace-cmd 3.1; seen in the kernel lab: an instance's
    // function_graph then traced every function): a graph filter means
    // recording in the top-level buffer.
    let graph = plan.steps.iter().any(|s| {
        matches!(&s.op, Op::Write { file, .. }
            if file.ends_with("set_graph_function") || file.ends_with("set_graph_notrace"))
    });
    let top = plan.instance.is_empty() || graph;
    if top && !plan.instance.is_empty() {
        notes.push("the instance: trace-cmd record applies -g at the top level only, so this records in the top-level buffer (trace-cmd resets it afterwards)".into());
    }
    for s in &plan.steps {
        let Op::Write {
            file,
            value,
            mode,
            undo,
        } = &s.op
        else {
            if let Op::Sysctl { sysctl, .. } = &s.op {
                notes.push(format!(
                    "{}: trace-cmd record cannot set it (`trace-cmd stack --start` before and `--stop` after do)",
                    sysctl.name()
                ));
            }
            // The instance: `-B`, below.
            continue;
        };
        let rel = file.strip_prefix(&prefix).unwrap_or(file);
        let words = || value.split_whitespace().map(word);
        match rel.split('/').collect::<Vec<_>>()[..] {
            ["tracing_on"] | ["trace"] | ["set_event_notrace_pid"] | ["set_ftrace_notrace_pid"] => {}
            ["buffer_size_kb"] => opts.push(format!("-b {value}")),
            ["trace_clock"] => opts.push(format!("-C {}", word(value))),
            ["tracing_cpumask"] => opts.push(format!("-M {}", word(value))),
            ["options", "event-fork" | "function-fork"] if value == "1" => fork = true,
            ["options", opt] => opts.push(format!(
                "-O {}",
                word(&format!("{}{opt}", if value == "1" { "" } else { "no" }))
            )),
            ["set_event_pid"] => pids.extend(value.split_whitespace().map(str::to_string)),
            ["set_ftrace_pid"] => {
                let extra: Vec<&str> = value
                    .split_whitespace()
                    .filter(|p| !pids.iter().any(|e| e == p))
                    .collect();
                if !extra.is_empty() {
                    notes.push(format!(
                        "[scope] comms: the function tracer would follow the running tasks {} only (set_ftrace_pid); -P would scope the events to them too",
                        extra.join(" ")
                    ));
                }
            }
            ["set_ftrace_filter"] if *mode == WriteMode::Append => notes.push(format!(
                "[[triggers]] function trigger `{value}` (a set_ftrace_filter command): trace-cmd record has no option for it"
            )),
            ["set_ftrace_filter"] => opts.extend(words().map(|w| format!("-l {w}"))),
            ["set_ftrace_notrace"] => opts.extend(words().map(|w| format!("-n {w}"))),
            ["set_graph_function"] => opts.extend(words().map(|w| format!("-g {w}"))),
            // A global knob: trace-cmd writes --max-graph-depth into the instance,
            // which has no such file; written before and restored after instead.
            ["max_graph_depth"] if top => {
                opts.push(format!("--max-graph-depth {value}"))
            }
            ["max_graph_depth" | "tracing_thresh"] => {
                let var = format!("old_{rel}");
                before.push(format!("{var}=$(cat /sys/kernel/tracing/{rel})"));
                before.push(format!("echo {} > /sys/kernel/tracing/{rel}", word(value)));
                after.push(format!("echo \"${var}\" > /sys/kernel/tracing/{rel}"));
            }
            ["current_tracer"] => opts.push(format!("-p {}", word(value))),
            ["kprobe_events" | "uprobe_events" | "dynamic_events" | "synthetic_events"] => {
                before.push(format!(
                    "echo {} >> /sys/kernel/tracing/{rel}",
                    q(value)
                ));
                if let Undo::Append(removal) = undo {
                    after.push(format!(
                        "echo {} >> /sys/kernel/tracing/{rel}",
                        q(removal)
                    ));
                }
            }
            ["events", system, event, leaf] => {
                let name = format!("{system}:{event}");
                let i = match events.iter().position(|e| e.name == name) {
                    Some(i) => i,
                    None => {
                        events.push(EventArgs {
                            name,
                            ..Default::default()
                        });
                        events.len() - 1
                    }
                };
                let e = &mut events[i];
                match leaf {
                    "enable" => e.enabled = true,
                    "filter" => e.filter = Some(value.clone()),
                    _ => e.triggers.push(value.clone()),
                }
            }
            ["set_graph_notrace"] => notes.push(
                "[tracer] graph_notrace (set_graph_notrace): trace-cmd record has no option for it".into(),
            ),
            _ => notes.push(format!(
                "the write of `{value}` to {file}: trace-cmd record has no option for it"
            )),
        }
    }
    unexpressed(r, &events, &mut notes);
    let mut cmd: Vec<String> = Vec::new();
    if !top {
        let name = plan.instance.rsplit('/').next().unwrap_or(&plan.instance);
        cmd.push(format!("-B {}", word(name)));
    }
    cmd.extend(opts);
    for e in &events {
        let mut line = format!("-e {}", word(&e.name));
        if let Some(f) = &e.filter {
            let _ = write!(line, " -f {}", q(f));
        }
        for t in &e.triggers {
            let _ = write!(line, " -R {}", word(t));
        }
        cmd.push(line);
    }
    for p in &pids {
        cmd.push(format!("-P {p}"));
    }
    let by_workload = !r.scope.command.is_empty() && !r.scope.system_wide;
    if fork && (!pids.is_empty() || by_workload) {
        cmd.push("-c".into());
    }
    if !r.scope.command.is_empty() {
        let words: Vec<String> = r.scope.command.iter().map(|w| word(w)).collect();
        // `-F` scopes the trace to the command; without it trace-cmd records
        // every task while the command runs ([scope] system_wide).
        let flag = if by_workload { "-F " } else { "" };
        cmd.push(format!("{flag}{}", words.join(" ")));
        if let Some(d) = &r.duration {
            notes.push(format!(
                "duration = {d:?}: trace-cmd record ends when the command exits (or at Ctrl-C)"
            ));
        }
    } else if let Some(d) = valid.duration {
        cmd.push(format!("sleep {}", d.as_secs_f64()));
    } else {
        notes.push("no duration and no command: trace-cmd record runs until Ctrl-C".into());
    }
    render_trace_cmd(&r.name, &notes, &before, &cmd, &after)
}

/// Adds to `notes` what recipe `r` asks beyond its plan's writes that
/// `trace-cmd record` cannot do, and what it does differently for `events`
/// (a trigger without -e, a hist table).
fn unexpressed(r: &Recipe, events: &[EventArgs], notes: &mut Vec<String>) {
    for e in events {
        if !e.enabled {
            notes.push(format!(
                "{} carries a trigger but is not recorded in the recipe; -R needs -e, so trace-cmd records it too",
                e.name
            ));
        }
        if e.triggers.iter().any(|t| t.starts_with("hist")) {
            notes.push(format!(
                "the hist table of {}: trace.dat does not keep it (read events/{}/hist while recording)",
                e.name,
                e.name.replace(':', "/")
            ));
        }
    }
    if r.stop.on_traceoff {
        notes.push("[stop] on_traceoff: trace-cmd record keeps recording after a traceoff trigger fires; stop it with Ctrl-C".into());
    }
    if let Some(mb) = r.stop.max_size_mb {
        notes.push(format!(
            "[stop] max_size_mb = {mb}: trace-cmd's -m caps each CPU's data, not the total"
        ));
    }
    if !r.expect.is_empty() {
        notes.push(format!(
            "[[expect]] ({} entries): checked by trace-recipe after a run only",
            r.expect.len()
        ));
    }
    if !r.collect.before.is_empty() || !r.collect.after.is_empty() {
        notes.push("[collect]: run those commands yourself before and after".into());
    }
    if r.output.reports.is_some()
        || r.output.template.is_some()
        || r.output.bundle == Some(true)
        || r.output.max_lost_percent.is_some()
    {
        notes.push("[output] reports, template, bundle, max_lost_percent: trace-cmd writes trace.dat only (read it with `trace-cmd report`)".into());
    }
    if r.scope.include_self {
        notes.push("[scope] include_self: trace-cmd leaves its own threads out (add --no-filter to trace them)".into());
    }
}

/// The export's text: `notes` as comments, the `before` lines, `trace-cmd
/// record` with the options `cmd`, then the `after` lines in reverse.
fn render_trace_cmd(
    name: &str,
    notes: &[String],
    before: &[String],
    cmd: &[String],
    after: &[String],
) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# trace-recipe check --plan --export trace-cmd: recipe `{name}`, as the nearest\n# `trace-cmd record` command line (options of trace-cmd 3.1). Run as root."
    );
    if notes.is_empty() {
        let _ = writeln!(o, "# It expresses the whole plan.");
    } else {
        let _ = writeln!(o, "# Not expressed:");
        for n in notes {
            let _ = writeln!(o, "#   - {n}");
        }
    }
    if !before.is_empty() {
        let _ = writeln!(
            o,
            "# trace-cmd record has no option for these: done before it, undone after it."
        );
        for l in before {
            let _ = writeln!(o, "{l}");
        }
    }
    let _ = writeln!(o, "trace-cmd record {}", cmd.join(" \\\n  "));
    for l in after.iter().rev() {
        let _ = writeln!(o, "{l}");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::plan;
    use crate::validate::{ResolvedEvent, ResolvedProbe, ResolvedTracer, ResolvedTrigger};

    fn valid() -> ValidRecipe {
        let mut recipe = crate::recipe::Recipe {
            name: "x".into(),
            ..Default::default()
        };
        recipe.scope.follow_forks = true;
        let mut v = ValidRecipe::bare(recipe);
        v.duration = Some(std::time::Duration::from_millis(2500));
        v
    }

    fn event(name: &str, filter: Option<&str>, stacktrace: bool) -> ResolvedEvent {
        ResolvedEvent {
            name: name.into(),
            filter: filter.map(str::to_string),
            stacktrace,
            span: None,
        }
    }

    /// The exported text for `v`, planned as `check --plan --export` plans it.
    fn export(v: &ValidRecipe, pids: &[u32]) -> String {
        let p = plan(v, "trace-recipe-x-1", "trace_recipe_1", pids, &[], &[]);
        trace_cmd(&p, v)
    }

    #[test]
    fn events_buffer_and_command_become_options_in_the_instance() {
        let mut v = valid();
        v.buffer_size_kb = Some((2048, None));
        v.clock = Some(("mono".into(), None));
        v.overwrite = Some((false, None));
        v.events = vec![
            event(
                "sched:sched_process_exec",
                Some("filename != \"/x\""),
                false,
            ),
            event("sched:sched_switch", None, true),
        ];
        v.recipe.scope.command = vec!["sh".into(), "-c".into(), "ls 'a b'".into()];
        v.recipe.duration = Some("10s".into());
        assert_eq!(
            export(&v, &[]),
            "# trace-recipe check --plan --export trace-cmd: recipe `x`, as the nearest
# `trace-cmd record` command line (options of trace-cmd 3.1). Run as root.
# Not expressed:
#   - duration = \"10s\": trace-cmd record ends when the command exits (or at Ctrl-C)
trace-cmd record -B trace-recipe-x-1 \\
  -b 2048 \\
  -C mono \\
  -O nooverwrite \\
  -e sched:sched_process_exec -f 'filename != \"/x\"' \\
  -e sched:sched_switch -R stacktrace \\
  -c \\
  -F sh -c 'ls '\\''a b'\\'''
"
        );
    }

    #[test]
    fn a_system_wide_workload_is_the_bare_command() {
        let mut v = valid();
        v.recipe.scope.command = vec!["dd".into(), "if=/dev/zero".into()];
        v.recipe.scope.system_wide = true;
        let text = export(&v, &[]);
        assert!(text.ends_with("  dd if=/dev/zero\n"), "{text}");
        assert!(!text.contains("-F"), "{text}");
    }

    #[test]
    fn a_system_wide_recipe_records_for_its_duration_and_pids_become_p() {
        let mut v = valid();
        v.events = vec![event("sched:sched_switch", None, false)];
        let text = export(&v, &[]);
        assert!(
            text.ends_with("  -e sched:sched_switch \\\n  sleep 2.5\n"),
            "{text}"
        );
        assert!(text.contains("# It expresses the whole plan."), "{text}");
        let text = export(&v, &[42, 43]);
        assert!(
            text.contains("  -P 42 \\\n  -P 43 \\\n  -c \\\n  sleep 2.5\n"),
            "{text}"
        );
    }

    #[test]
    fn probes_are_defined_before_and_removed_after() {
        let mut v = valid();
        v.probes = vec![ResolvedProbe::open_ret()];
        let text = export(&v, &[]);
        let lines: Vec<&str> = text.lines().collect();
        let def = "echo 'r:trace_recipe_1/open_ret do_sys_openat2 ret=$retval:s32' >> /sys/kernel/tracing/kprobe_events";
        let record = lines
            .iter()
            .position(|l| l.starts_with("trace-cmd record"))
            .unwrap();
        assert_eq!(lines[record - 1], def, "{text}");
        assert_eq!(
            lines.last().copied(),
            Some("echo '-:trace_recipe_1/open_ret' >> /sys/kernel/tracing/kprobe_events")
        );
        assert!(
            text.contains("  -e trace_recipe_1:open_ret -f 'ret < 0' \\\n"),
            "{text}"
        );
    }

    #[test]
    fn a_top_level_graph_tracer_and_what_trace_cmd_lacks_are_named() {
        let mut v = valid();
        v.tracer = Some(ResolvedTracer {
            functions: vec!["vfs_*".into()],
            notrace: vec!["*spin*".into()],
            graph_functions: vec!["do_sys_openat2".into()],
            graph_notrace: vec!["schedule".into()],
            max_graph_depth: Some(3),
            thresh_us: Some(100),
            options: vec![("funcgraph-retval".into(), true)],
            at_top_level: true,
            graph_filter_at_top: true,
            ..ResolvedTracer::named("function_graph")
        });
        v.triggers = vec![
            ResolvedTrigger {
                event: None,
                on_probe: false,
                command: "force_sig_fault:traceoff:1".into(),
                removal: "!force_sig_fault:traceoff".into(),
                target: None,
                action: "traceoff".into(),
                span: None,
            },
            ResolvedTrigger {
                event: Some("sched:sched_process_exit".into()),
                on_probe: false,
                command: "traceoff:1 if comm == \"sleep\"".into(),
                removal: "!traceoff:1".into(),
                target: None,
                action: "traceoff".into(),
                span: None,
            },
        ];
        v.recipe.stop.on_traceoff = true;
        let text = export(&v, &[]);
        assert!(!text.contains("-B "), "at the top level: {text}");
        for want in [
            "trace-cmd record -l 'vfs_*' \\\n",
            "  -n '*spin*' \\\n",
            "  -g do_sys_openat2 \\\n",
            "  -O funcgraph-retval \\\n",
            "  --max-graph-depth 3 \\\n",
            "  -p function_graph \\\n",
            "  -e sched:sched_process_exit -R 'traceoff:1 if comm == \"sleep\"' \\\n",
            "#   - [tracer] graph_notrace (set_graph_notrace): trace-cmd record has no option for it\n",
            "old_tracing_thresh=$(cat /sys/kernel/tracing/tracing_thresh)\necho 100 > /sys/kernel/tracing/tracing_thresh\ntrace-cmd record",
            "\necho \"$old_tracing_thresh\" > /sys/kernel/tracing/tracing_thresh\n",
            "#   - [[triggers]] function trigger `force_sig_fault:traceoff:1` (a set_ftrace_filter command): trace-cmd record has no option for it\n",
            "#   - sched:sched_process_exit carries a trigger but is not recorded in the recipe; -R needs -e, so trace-cmd records it too\n",
            "#   - [stop] on_traceoff: trace-cmd record keeps recording after a traceoff trigger fires; stop it with Ctrl-C\n",
        ] {
            assert!(text.contains(want), "no {want:?} in\n{text}");
        }
    }
}
