//! `[scope]`: which tasks a run records, and what that means event by event.
//!
//! The scoping rule (recipe-format 1.2): `pids`, `comms` and the workload mean
//! "events of these tasks". For most events that is the task the event fires in
//! (`common_pid`, the `comm` the kernel's filter offers). For the events that
//! name two tasks it is either of them: `sched_switch` is of the task switched
//! out (`prev_*`) and of the task switched in (`next_*`); `sched_process_fork`
//! of the parent and of the child. A wakeup (`sched_wakeup`,
//! `sched_wakeup_new`, `sched_waking`) is of the woken task: its own `comm` and
//! `pid` fields, which the kernel's filter reads before the generic `comm`
//! (kernel/trace/trace_events_filter.c, `trace_find_event_field`).
//!
//! `system_wide` records every task from the workload's release until it exits.

use super::{Ctx, MAX_COMM, ResolvedEvent};
use crate::recipe::Recipe;

/// Events whose task is either of two fields: the comm fields, then the pid fields.
const TWO_TASKS: &[(&str, [&str; 2], [&str; 2])] = &[
    (
        "sched:sched_switch",
        ["prev_comm", "next_comm"],
        ["prev_pid", "next_pid"],
    ),
    (
        "sched:sched_process_fork",
        ["parent_comm", "child_comm"],
        ["parent_pid", "child_pid"],
    ),
];

/// Wakeup events: of the woken task (their own `comm` and `pid` fields).
const WAKEUPS: &[&str] = &[
    "sched:sched_wakeup",
    "sched:sched_wakeup_new",
    "sched:sched_waking",
];

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
    let fields: &[&str] = match TWO_TASKS.iter().find(|(n, _, _)| *n == name) {
        Some((_, comm_fields, _)) => comm_fields,
        None => &["comm"],
    };
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

/// The filter keeping a wakeup event to the woken tasks `pids`: the kernel's
/// pid scope (`set_event_pid`) records a wakeup when the waker *or* the woken
/// task is scoped (kernel/trace/trace_events.c,
/// `event_filter_pid_sched_wakeup_probe_pre`). `None` for other events, and
/// when the pid list grows at run time (`follow_forks`).
pub(crate) fn woken_filter(name: &str, pids: &[u32], follow_forks: bool) -> Option<String> {
    if pids.is_empty() || follow_forks || !WAKEUPS.contains(&name) {
        return None;
    }
    let parts: Vec<String> = pids.iter().map(|p| format!("pid == {p}")).collect();
    Some(parts.join(" || "))
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

/// The note `check` gives when a recipe scoped to some tasks (a workload,
/// `pids` or `comms`) enables events that mostly fire outside those tasks:
/// they are recorded only when they happen to interrupt one of them. In
/// `check --format json` as `scope_note`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct ScopeNote {
    /// What scopes the recipe.
    pub scoped_by: ScopedBy,
    /// The events concerned, in the recipe's order.
    pub events: Vec<ElsewhereEvent>,
    /// The recipe key that records every task instead: `scope.system_wide`
    /// with a workload; absent for `pids`/`comms` (remove them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix_key: Option<String>,
    /// The note as `check` prints it (after `note: `).
    pub message: String,
}

/// The [`ScopeNote`] of recipe `r` enabling `events`, if it needs one.
pub(crate) fn elsewhere_note(r: &Recipe, events: &[ResolvedEvent]) -> Option<ScopeNote> {
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
    if found.is_empty() {
        return None;
    }
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for e in &found {
        match groups.iter_mut().find(|(p, _)| *p == e.fires) {
            Some((_, names)) => names.push(&e.event),
            None => groups.push((&e.fires, vec![&e.event])),
        }
    }
    let listed: Vec<String> = groups
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
    Some(ScopeNote {
        scoped_by: match by_workload {
            true => ScopedBy::Workload,
            false => ScopedBy::PidsOrComms,
        },
        message: format!(
            "this recipe records only the events of its tasks, and {}: they are recorded only when they interrupt one of those tasks; {fix}",
            listed.join("; ")
        ),
        events: found,
        fix_key: by_workload.then(|| "scope.system_wide".to_string()),
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
    fn pids_mean_the_woken_task_of_a_wakeup() {
        assert_eq!(
            woken_filter("sched:sched_waking", &[7, 8], false).unwrap(),
            "pid == 7 || pid == 8"
        );
        assert_eq!(woken_filter("sched:sched_waking", &[7], true), None);
        assert_eq!(woken_filter("sched:sched_switch", &[7], false), None);
    }
}
