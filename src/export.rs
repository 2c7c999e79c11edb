//! `check --plan --export sh`: the plan a run applies, as a POSIX shell script
//! for machines without trace-recipe.
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

use crate::plan::{Op, Plan, Undo};
use crate::tracefs::WriteMode;

/// Single-quotes `s` for sh.
fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

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
        match &s.op {
            Op::Mkdir { dir } => {
                let p = format!("\"$T\"/{}", q(dir));
                let _ = writeln!(
                    o,
                    "mkdir {p} || step {n}\npush {}",
                    q(&format!("rmdir {p}"))
                );
            }
            Op::Write {
                file,
                value,
                mode,
                undo,
            } => {
                let p = format!("\"$T\"/{}", q(file));
                let arrow = if *mode == WriteMode::Append {
                    ">>"
                } else {
                    ">"
                };
                let undo_cmd = match undo {
                    Undo::Nothing => None,
                    Undo::Write(v) => Some(format!("printf '%s\\n' {} > {p}", q(v))),
                    Undo::Append(v) => Some(format!("printf '%s\\n' {} >> {p}", q(v))),
                    Undo::Restore => {
                        use crate::tracefs::Readback;
                        let pick = match crate::tracefs::file_rule(file).readback {
                            Readback::FirstWord => "awk '{print $1; exit}'",
                            Readback::Bracketed => "sed -n 's/.*\\[\\(.*\\)\\].*/\\1/p'",
                            Readback::BufferSize => {
                                "awk '{ if (match($0, /expanded: [0-9]+/)) print substr($0, RSTART + 10, RLENGTH - 10); else print $1; exit }'"
                            }
                            Readback::Filter => {
                                "awk '{ if ($0 == \"none\") print \"0\"; else print }'"
                            }
                            Readback::Enable => "sed 's/[*]$//'",
                            _ => {
                                return Err(format!(
                                    "step {n} restores `{file}` from a before-image the script cannot express"
                                ));
                            }
                        };
                        let _ = writeln!(o, "B{n}=$({pick} < {p}) || step {n}");
                        Some(format!("printf '%s\\n' \"$B{n}\" > {p}"))
                    }
                };
                let _ = writeln!(o, "printf '%s\\n' {} {arrow} {p} || step {n}", q(value));
                if let Some(u) = undo_cmd {
                    let _ = writeln!(o, "push {}", q(&u));
                }
            }
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
