//! Planning: a [`ValidRecipe`] becomes an ordered list of [`Step`]s, each a single
//! tracefs change that knows how to undo itself. Pure: nothing here touches tracefs.
//!
//! Order (Documentation/trace/ftrace.rst, events.rst): create the instance, turn its
//! tracing off, size and clock the ring buffer, set options and the pid scope, then
//! per event filter → stacktrace trigger → enable, then the recipe's triggers.
//! Tracing is turned on by `run` only after every step succeeded.

use std::fmt;

use crate::tracefs::{INSTANCE_PREFIX, WriteMode};
use crate::validate::{Span, ValidRecipe};

/// One tracefs change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `mkdir DIR` (an instance); undone by `rmdir DIR`.
    Mkdir {
        /// Directory relative to the tracefs root.
        dir: String,
    },
    /// Write `value` to `file`; undone as `undo` says.
    Write {
        /// File relative to the tracefs root.
        file: String,
        /// What to write.
        value: String,
        /// Replace or append.
        mode: WriteMode,
        /// How to undo it.
        undo: Undo,
    },
}

/// How a write is undone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    /// Nothing to undo: the instance that holds the file goes away.
    Nothing,
    /// Read the file's value before writing, and write it back.
    Restore,
    /// Write this value (replacing) to the same file.
    Write(String),
    /// Append this value to the same file (`!trigger` removes a trigger).
    Append(String),
}

/// One step of a plan: the change, and the recipe entry that asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The change.
    pub op: Op,
    /// The recipe entry (byte range of the rendered text) it comes from.
    pub span: Span,
}

/// Everything a run changes in tracefs, in order.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The instance directory, relative to tracefs: `instances/trace-recipe-NAME-PID`.
    pub instance: String,
    /// The steps, in the order they are applied (undone in reverse).
    pub steps: Vec<Step>,
}

/// The instance name for a run of recipe `name` by process `pid`.
pub fn instance_name(name: &str, pid: u32) -> String {
    format!("{INSTANCE_PREFIX}{name}-{pid}")
}

/// Builds the plan for `valid`, in instance `instance` (a bare name), scoping events
/// to `pids` (the recipe's and the workload's).
pub fn plan(valid: &ValidRecipe, instance: &str, pids: &[u32]) -> Plan {
    let dir = format!("instances/{instance}");
    let mut steps = Vec::new();
    let mut write = |file: String, value: String, mode: WriteMode, undo: Undo, span: Span| {
        steps.push(Step {
            op: Op::Write {
                file,
                value,
                mode,
                undo,
            },
            span,
        });
    };
    let f = |name: &str| format!("{dir}/{name}");
    let r = &valid.recipe;

    write(
        f("tracing_on"),
        "0".into(),
        WriteMode::Replace,
        Undo::Nothing,
        None,
    );
    if let Some((kb, span)) = &valid.buffer_size_kb {
        write(
            f("buffer_size_kb"),
            kb.to_string(),
            WriteMode::Replace,
            Undo::Restore,
            span.clone(),
        );
    }
    if let Some((clock, span)) = &valid.clock {
        write(
            f("trace_clock"),
            clock.clone(),
            WriteMode::Replace,
            Undo::Restore,
            span.clone(),
        );
    }
    if let Some((mask, span)) = &valid.cpumask {
        write(
            f("tracing_cpumask"),
            mask.clone(),
            WriteMode::Replace,
            Undo::Restore,
            span.clone(),
        );
    }
    if let Some((on, span)) = &valid.overwrite {
        write(
            f("options/overwrite"),
            bit(*on),
            WriteMode::Replace,
            Undo::Restore,
            span.clone(),
        );
    }
    if r.scope.follow_forks {
        write(
            f("options/event-fork"),
            "1".into(),
            WriteMode::Replace,
            Undo::Restore,
            None,
        );
    }
    if !pids.is_empty() {
        let list = pids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" ");
        write(
            f("set_event_pid"),
            list,
            WriteMode::Replace,
            Undo::Write(String::new()),
            None,
        );
    }
    for ev in &valid.events {
        let (system, event) = ev.name.split_once(':').unwrap_or((&ev.name, ""));
        let ef = |name: &str| format!("{dir}/events/{system}/{event}/{name}");
        if let Some(filter) = &ev.filter {
            write(
                ef("filter"),
                filter.clone(),
                WriteMode::Replace,
                Undo::Write("0".into()),
                ev.span.clone(),
            );
        }
        if ev.stacktrace {
            write(
                ef("trigger"),
                "stacktrace".into(),
                WriteMode::Append,
                Undo::Append("!stacktrace".into()),
                ev.span.clone(),
            );
        }
        write(
            ef("enable"),
            "1".into(),
            WriteMode::Replace,
            Undo::Write("0".into()),
            ev.span.clone(),
        );
    }
    for t in &valid.triggers {
        let (system, event) = t.event.split_once(':').unwrap_or((&t.event, ""));
        write(
            format!("{dir}/events/{system}/{event}/trigger"),
            t.command.clone(),
            WriteMode::Append,
            Undo::Append(format!("!{}", t.command)),
            t.span.clone(),
        );
    }
    steps.insert(
        0,
        Step {
            op: Op::Mkdir { dir: dir.clone() },
            span: None,
        },
    );
    Plan {
        instance: dir,
        steps,
    }
}

fn bit(on: bool) -> String {
    if on { "1" } else { "0" }.to_string()
}

impl fmt::Display for Step {
    /// The change as a shell command (`echo "1" > .../enable`); the alternate form
    /// (`{:#}`) adds its undo in parentheses.
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.op {
            Op::Mkdir { dir } => {
                write!(out, "mkdir {dir}")?;
                if out.alternate() {
                    write!(out, "    (undo: rmdir {dir})")?;
                }
                Ok(())
            }
            Op::Write {
                file,
                value,
                mode,
                undo,
            } => {
                let arrow = if *mode == WriteMode::Append {
                    ">>"
                } else {
                    ">"
                };
                write!(out, "echo {value:?} {arrow} {file}")?;
                if !out.alternate() {
                    return Ok(());
                }
                match undo {
                    Undo::Nothing => write!(out, "    (undo: removed with the instance)"),
                    Undo::Restore => write!(out, "    (undo: write back the value read before)"),
                    Undo::Write(v) => write!(out, "    (undo: echo {v:?} > {file})"),
                    Undo::Append(v) => write!(out, "    (undo: echo {v:?} >> {file})"),
                }
            }
        }
    }
}
