//! `[scope]`: which tasks a run records, and what that means event by event.
//!
//! The scoping rule (recipe-format 1.2): `pids`, `comms` and the workload mean
//! "events of these tasks". For most events that is the task the event fires in
//! (`common_pid`, the `comm` the kernel's filter offers). For the events whose
//! subject is not (only) that task ([`SUBJECTS`]) it is the tasks the event
//! names: `sched_switch` is of the task switched out (`prev_*`) and of the task
//! switched in (`next_*`); `sched_process_fork` of the parent and of the child;
//! a wakeup (`sched_wakeup`, `sched_wakeup_new`, `sched_waking`) of the woken
//! task; `sched_migrate_task` of the task moved (it fires in whichever task
//! moves it: the waker, `migration/N`, the balancer); `signal_generate` of its
//! target and of its sender (the current task). A wakeup's or a migration's
//! own `comm` field is read before the generic `comm`
//! (kernel/trace/trace_events_filter.c, `trace_find_event_field`); the
//! generic `COMM` is always the current task's.
//!
//! The kernel's pid list (`set_event_pid`) decides by the current task alone
//! (kernel/trace/trace_events.c, `trace_event_ignore_this_pid`, for every
//! event of the instance; only `sched_switch` and the wakeups have probes that
//! also look at the other task): a migration is recorded when the mover is
//! scoped, a signal when the sender is. So a fixed pid scope (no
//! `follow_forks`) of a recipe enabling one of these events is a filter on
//! every event ([`pid_filter`]), as `comms` is; with `follow_forks` only the
//! kernel's list can follow children, and `check` says what it decides for
//! each such event ([`subject_note`]).
//!
//! `system_wide` records every task from the workload's release until it exits.

use super::{Ctx, MAX_COMM, ValidRecipe};
use crate::recipe::Recipe;

/// An event whose subject is not (only) the task it fires in: the fields
/// that name the tasks it is of.
pub(crate) struct Subjects {
    /// `system:event`.
    pub(crate) event: &'static str,
    /// Its pid fields naming a task it is of.
    pub(crate) pids: &'static [&'static str],
    /// Its comm fields, in the order of `pids`.
    pub(crate) comms: &'static [&'static str],
    /// Whether the current task is one of its tasks too (a signal's sender).
    pub(crate) current: bool,
    /// Whose event it is, as `check` and the docs say it.
    pub(crate) whose: &'static str,
}

/// The events whose subject is not (only) the current task.
pub(crate) const SUBJECTS: &[Subjects] = &[
    Subjects {
        event: "sched:sched_switch",
        pids: &["prev_pid", "next_pid"],
        comms: &["prev_comm", "next_comm"],
        current: false,
        whose: "the task switched out (prev) and the task switched in (next)",
    },
    Subjects {
        event: "sched:sched_process_fork",
        pids: &["parent_pid", "child_pid"],
        comms: &["parent_comm", "child_comm"],
        current: false,
        whose: "the parent and the child",
    },
    Subjects {
        event: "sched:sched_wakeup",
        pids: &["pid"],
        comms: &["comm"],
        current: false,
        whose: "the woken task (pid)",
    },
    Subjects {
        event: "sched:sched_wakeup_new",
        pids: &["pid"],
        comms: &["comm"],
        current: false,
        whose: "the woken task (pid)",
    },
    Subjects {
        event: "sched:sched_waking",
        pids: &["pid"],
        comms: &["comm"],
        current: false,
        whose: "the woken task (pid)",
    },
    Subjects {
        event: "sched:sched_migrate_task",
        pids: &["pid"],
        comms: &["comm"],
        current: false,
        whose: "the task moved (pid), whichever task moves it",
    },
    Subjects {
        event: "signal:signal_generate",
        pids: &["pid"],
        comms: &["comm"],
        current: true,
        whose: "its target (pid) and its sender (the current task)",
    },
];

/// The [`Subjects`] of event `name`, if its subject is not (only) the current task.
pub(crate) fn subjects(name: &str) -> Option<&'static Subjects> {
    SUBJECTS.iter().find(|s| s.event == name)
}

/// The fields of event `name` that name a task it is of, pid fields
/// (`common_pid` for the current task) or comm fields (`COMM`, the generic
/// field that is always the current task's).
fn subject_fields(name: &str, comm: bool) -> Vec<&'static str> {
    match subjects(name) {
        Some(s) => {
            let mut f = if comm { s.comms } else { s.pids }.to_vec();
            if s.current {
                f.push(if comm { "COMM" } else { "common_pid" });
            }
            f
        }
        None if comm => vec!["comm"],
        None => vec!["common_pid"],
    }
}

/// The `[scope] comms` that are task names, each as a quoted filter value;
/// reports the others at their place.
pub(super) fn checked_comms(cx: &mut Ctx<'_>, r: &Recipe) -> Vec<String> {
    let mut out = Vec::new();
    for (i, comm) in r.scope.comms.iter().enumerate() {
        let span = cx.span(&path!("scope", "comms", i));
        if comm.is_empty()
            || comm.len() > MAX_COMM
            || comm.contains('"')
            || comm.chars().any(char::is_control)
        {
            cx.recipe(span, format!("comm {comm:?} is not a task name"), Some(format!("task names are 1 to {MAX_COMM} bytes, without quotes or control characters (the kernel truncates longer names)")));
        } else {
            out.push(format!("\"{comm}\""));
        }
    }
    if r.scope.system_wide && (!r.scope.pids.is_empty() || !r.scope.comms.is_empty()) {
        let span = cx.span(&path!("scope", "system_wide"));
        cx.recipe(
            span,
            "`system_wide = true` records every task, and `pids`/`comms` name only some",
            Some(
                "keep one: `system_wide = true` with a workload records the whole system while it runs; `pids`/`comms` keep the events of those tasks"
                    .into(),
            ),
        );
    }
    out
}

/// The filter keeping event `name` to the tasks named `comms` (quoted), by the
/// scoping rule of this module; `None` without comms.
pub(super) fn comm_filter(name: &str, comms: &[String]) -> Option<String> {
    if comms.is_empty() {
        return None;
    }
    let fields = subject_fields(name, true);
    let parts: Vec<String> = fields
        .iter()
        .flat_map(|f| comms.iter().map(move |c| format!("{f} == {c}")))
        .collect();
    Some(parts.join(" || "))
}

/// The recipe's `filter` and the scope's `scope`, and-ed, each in parentheses
/// so that neither changes the other's meaning.
pub(crate) fn and(filter: Option<&str>, scope: Option<&str>) -> Option<String> {
    match (filter, scope) {
        (Some(f), Some(s)) => Some(format!("({f}) && ({s})")),
        (Some(f), None) => Some(f.to_string()),
        (None, Some(s)) => Some(s.to_string()),
        (None, None) => None,
    }
}

/// Why a pid scope stays the kernel's pid list although an event's subject
/// is another task ([`pids_by_filter`]).
fn pid_list_reason(valid: &ValidRecipe) -> Option<&'static str> {
    if valid.recipe.scope.follow_forks {
        Some("with `follow_forks` only the kernel's pid list (set_event_pid) follows the children")
    } else if valid.triggers.iter().any(|t| t.event.is_some()) {
        // An event trigger with a condition runs for the records the pid
        // list lets through, before and whatever the event's filter
        // (kernel/trace/trace_events_trigger.c, `event_triggers_call`).
        Some(
            "with event triggers the kernel's pid list (set_event_pid) keeps scoping them, as their conditions run before an event's filter",
        )
    } else {
        None
    }
}

/// Whether a run of `valid` scoped to some pids scopes its events by filter
/// ([`pid_filter`]) rather than by the kernel's pid list: when one of its
/// events is of a task other than the current one ([`SUBJECTS`]), which the
/// pid list cannot see, and nothing needs the list ([`pid_list_reason`]: the
/// children of `follow_forks`, event triggers).
pub(crate) fn pids_by_filter(valid: &ValidRecipe) -> bool {
    pid_list_reason(valid).is_none() && valid.events.iter().any(|e| subjects(&e.name).is_some())
}

/// The filter keeping event `name` (`""` for a probe) to the tasks `pids`
/// by the scoping rule of this module: each of its subject fields
/// ([`SUBJECTS`], `common_pid` for the others) equal to one of them, runs of
/// consecutive ids as ranges; `None` without pids.
pub(crate) fn pid_filter(name: &str, pids: &[u32]) -> Option<String> {
    if pids.is_empty() {
        return None;
    }
    let runs = pid_runs(pids);
    let parts: Vec<String> = subject_fields(name, false)
        .into_iter()
        .flat_map(|f| {
            runs.iter().map(move |&(lo, hi)| match lo == hi {
                true => format!("{f} == {lo}"),
                false => format!("({f} >= {lo} && {f} <= {hi})"),
            })
        })
        .collect();
    Some(parts.join(" || "))
}

/// `pids` sorted, as runs of consecutive ids `(first, last)`: threads are
/// mostly created one after another, so a filter naming them stays short on a
/// host of many CPUs (the kernel takes a filter of one page at most).
pub(crate) fn pid_runs(pids: &[u32]) -> Vec<(u32, u32)> {
    let mut sorted = pids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for p in sorted {
        match runs.last_mut() {
            Some((_, hi)) if hi.checked_add(1) == Some(p) => *hi = p,
            _ => runs.push((p, p)),
        }
    }
    runs
}

/// Events that mostly fire outside the task that caused them, and where.
const ELSEWHERE: &[(&str, &str)] = &[
    ("irq:*", "in interrupt and softirq context"),
    ("irq_vectors:*", "in interrupt context"),
    ("block:*_complete", "in the completion interrupt"),
    ("block:block_io_done", "in the completion interrupt"),
    ("block:block_rq_error", "in the completion interrupt"),
    ("timer:*expire*", "in timer interrupts and softirqs"),
    ("workqueue:*", "in kworker threads"),
    ("writeback:*", "in the flusher (kworker) threads"),
    ("napi:*", "in the network receive softirq"),
    ("net:netif_receive_skb*", "in the network receive softirq"),
    ("net:napi_gro_*", "in the network receive softirq"),
    ("rcu:*", "in RCU's threads and softirq"),
];

/// What narrows a recipe to some tasks, for [`ScopeNote`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScopedBy {
    /// `[scope] command` (or `run -- COMMAND`) without `system_wide`.
    Workload,
    /// `[scope] pids` or `[scope] comms`.
    PidsOrComms,
}

/// One enabled event that mostly fires outside the task that caused it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct ElsewhereEvent {
    /// `system:event`.
    pub event: String,
    /// Where it mostly fires ("in the completion interrupt").
    pub fires: String,
}

/// How a scoped run keeps an event whose subject is not the current task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeptBy {
    /// A filter on the event's own task fields: kept when one of its tasks is
    /// in scope (`pids` or the workload without `follow_forks`, `comms`).
    Filter,
    /// The kernel's pid list (`set_event_pid`, with `follow_forks`): recorded
    /// by the task it fires in, whatever task it is of.
    PidList,
}

/// One enabled event whose subject is not (only) the task it fires in.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct SubjectEvent {
    /// `system:event`.
    pub event: String,
    /// Whose event it is ("the task moved (pid), whichever task moves it").
    pub of: String,
    /// How the run keeps it.
    pub kept_by: KeptBy,
}

/// The note `check` gives when a recipe scoped to some tasks (a workload,
/// `pids` or `comms`) enables events that mostly fire outside those tasks
/// (they are recorded only when they happen to interrupt one of them), or
/// events whose subject is not the task they fire in (each named, with how
/// the run keeps it). In `check --format json` as `scope_note`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct ScopeNote {
    /// What scopes the recipe.
    pub scoped_by: ScopedBy,
    /// The events that mostly fire elsewhere, in the recipe's order (may be empty).
    pub events: Vec<ElsewhereEvent>,
    /// The events of another task than the current one, in the recipe's
    /// order (may be empty).
    pub subjects: Vec<SubjectEvent>,
    /// The recipe key that records every task instead: `scope.system_wide`
    /// with a workload; absent for `pids`/`comms` (remove them) and when no
    /// event fires elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix_key: Option<String>,
    /// The note as `check` prints it (after `note: `).
    pub message: String,
}

/// Event names grouped by a description, each group in first-seen order.
fn grouped<'a>(items: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<(&'a str, Vec<&'a str>)> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for (what, name) in items {
        match groups.iter_mut().find(|(w, _)| *w == what) {
            Some((_, names)) => names.push(name),
            None => groups.push((what, vec![name])),
        }
    }
    groups
}

/// The [`ScopeNote`] of `valid`, if it needs one.
pub(crate) fn scope_note(valid: &ValidRecipe) -> Option<ScopeNote> {
    let (r, events) = (&valid.recipe, &valid.events);
    let by_workload = !r.scope.command.is_empty() && !r.scope.system_wide;
    if !by_workload && r.scope.pids.is_empty() && r.scope.comms.is_empty() {
        return None;
    }
    let found: Vec<ElsewhereEvent> = events
        .iter()
        .filter_map(|ev| {
            let (_, place) = ELSEWHERE
                .iter()
                .find(|(glob, _)| crate::kernel::glob_match(glob, &ev.name))?;
            Some(ElsewhereEvent {
                event: ev.name.clone(),
                fires: place.to_string(),
            })
        })
        .collect();
    // A pid scope is a filter unless something needs the kernel's list;
    // comms are filters.
    let reason = pid_list_reason(valid).filter(|_| by_workload || !r.scope.pids.is_empty());
    let kept_by = match reason {
        Some(_) => KeptBy::PidList,
        None => KeptBy::Filter,
    };
    let subjects: Vec<SubjectEvent> = events
        .iter()
        .filter_map(|ev| {
            Some(SubjectEvent {
                event: ev.name.clone(),
                of: subjects(&ev.name)?.whose.to_string(),
                kept_by,
            })
        })
        .collect();
    if found.is_empty() && subjects.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !found.is_empty() {
        let listed: Vec<String> =
            grouped(found.iter().map(|e| (e.fires.as_str(), e.event.as_str())))
                .iter()
                .map(|(place, names)| {
                    let shown: Vec<&str> = names.iter().take(4).copied().collect();
                    let more = match names.len().saturating_sub(4) {
                        0 => String::new(),
                        n => format!(" and {n} more"),
                    };
                    format!("{}{more} fire mostly {place}", shown.join(", "))
                })
                .collect();
        let fix = if by_workload {
            "`[scope] system_wide = true` records every task from the workload's release until it exits"
        } else {
            "a recipe without `pids` and `comms` records every task"
        };
        parts.push(format!(
            "this recipe records only the events of its tasks, and {}: they are recorded only when they interrupt one of those tasks; {fix}",
            listed.join("; ")
        ));
    }
    if !subjects.is_empty() {
        let listed: Vec<String> =
            grouped(subjects.iter().map(|e| (e.of.as_str(), e.event.as_str())))
                .iter()
                .map(|(of, names)| format!("{} of {of}", names.join(", ")))
                .collect();
        parts.push(match reason {
            None => format!(
                "these events are of other tasks than the one they fire in, and are kept when one of those is in scope (a filter on every event, not the kernel's pid list): {}",
                listed.join("; ")
            ),
            Some(why) => format!(
                "{why}, which scopes every event by the task it fires in, and these events are of other tasks: {}; a migration is then recorded only when a task in scope moves it, a signal only when one sends it, a wakeup when one wakes or is woken",
                listed.join("; ")
            ),
        });
    }
    Some(ScopeNote {
        scoped_by: match by_workload {
            true => ScopedBy::Workload,
            false => ScopedBy::PidsOrComms,
        },
        fix_key: (by_workload && !found.is_empty()).then(|| "scope.system_wide".to_string()),
        message: parts.join("; and "),
        events: found,
        subjects,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comms_mean_either_task_of_a_switch_and_the_woken_task() {
        let c = vec!["\"worker\"".to_string()];
        assert_eq!(
            comm_filter("sched:sched_switch", &c).unwrap(),
            "prev_comm == \"worker\" || next_comm == \"worker\""
        );
        assert_eq!(
            comm_filter("sched:sched_wakeup", &c).unwrap(),
            "comm == \"worker\""
        );
        assert_eq!(comm_filter("sched:sched_switch", &[]), None);
        let two = vec!["\"a\"".to_string(), "\"b\"".to_string()];
        assert_eq!(
            comm_filter("syscalls:sys_enter_read", &two).unwrap(),
            "comm == \"a\" || comm == \"b\""
        );
        assert_eq!(
            and(
                Some("next_comm == \"x\" || prio < 5"),
                Some("comm == \"a\"")
            )
            .unwrap(),
            "(next_comm == \"x\" || prio < 5) && (comm == \"a\")"
        );
    }

    #[test]
    fn pids_mean_the_tasks_an_event_is_of() {
        assert_eq!(
            pid_filter("sched:sched_switch", &[7, 8, 9, 20]).unwrap(),
            "(prev_pid >= 7 && prev_pid <= 9) || prev_pid == 20 || (next_pid >= 7 && next_pid <= 9) || next_pid == 20"
        );
        assert_eq!(pid_filter("sched:sched_waking", &[7]).unwrap(), "pid == 7");
        assert_eq!(
            pid_filter("sched:sched_migrate_task", &[7]).unwrap(),
            "pid == 7"
        );
        assert_eq!(
            pid_filter("signal:signal_generate", &[7]).unwrap(),
            "pid == 7 || common_pid == 7"
        );
        assert_eq!(
            pid_filter("syscalls:sys_enter_read", &[7]).unwrap(),
            "common_pid == 7"
        );
        assert_eq!(pid_filter("", &[]), None);
        // A signal's sender by name: the generic COMM, the current task's.
        assert_eq!(
            comm_filter("signal:signal_generate", &["\"w\"".to_string()]).unwrap(),
            "comm == \"w\" || COMM == \"w\""
        );
    }

    #[test]
    fn pid_runs_group_consecutive_ids() {
        assert_eq!(
            pid_runs(&[7, 5, 6, 9, 9, u32::MAX]),
            [(5, 7), (9, 9), (u32::MAX, u32::MAX)]
        );
        assert!(pid_runs(&[]).is_empty());
    }
}
