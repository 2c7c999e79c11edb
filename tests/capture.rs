//! What a capture holds and what it lost: the run's own threads stay out of
//! the trace, and lost events are counted once.

use std::collections::BTreeSet;

use crate::common::{ReportLine, TracefsGuard, event_lines, run_recipe, text, write_recipe};

/// Fields of an event line that name a task by pid (`sched_switch`'s prev/next,
/// `sched_wakeup`'s pid), as trace-cmd prints them: `comm:PID [prio]`.
fn named_pids(fields: &str) -> Vec<i32> {
    fields
        .split_whitespace()
        .filter_map(|w| w.rsplit_once(':')?.1.parse().ok())
        .collect()
}

#[test]
fn a_whole_system_trace_on_an_idle_machine_holds_under_1_percent_of_the_runs_own_events() {
    let guard = TracefsGuard::acquire();
    let dir = tempfile::tempdir().unwrap();
    let body = |include_self: bool| {
        format!(
            "name = \"idle-self\"\ndescription = \"t\"\nduration = \"2s\"\n[scope]\ninclude_self = {include_self}\n[[events]]\nname = \"sched:sched_switch\"\n[[events]]\nname = \"sched:sched_wakeup\"\n[[events]]\nname = \"raw_syscalls:sys_enter\"\n[[events]]\nname = \"raw_syscalls:sys_exit\"\n"
        )
    };
    let mut shares = Vec::new();
    for include_self in [false, true] {
        let recipe = write_recipe(dir.path(), "r.toml", &body(include_self));
        let out = dir.path().join(format!("out-{include_self}"));
        let o = run_recipe(&recipe, &out, &[]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
                .unwrap();
        let excluded: BTreeSet<i32> = report["recorder"]["excluded_tids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_i64().unwrap() as i32)
            .collect();
        let listing = crate::common::trace_cmd_report(&out.join("trace.dat"));
        let lines: Vec<ReportLine> = event_lines(&listing)
            .into_iter()
            .filter_map(ReportLine::parse)
            .collect();
        assert!(lines.len() > 50, "too few events to judge:\n{listing}");
        if include_self {
            assert!(excluded.is_empty(), "{report:#}");
            // The readers are named record-cpuN: with include_self they show up.
            assert!(
                lines.iter().any(|l| l.comm().starts_with("record-cpu")),
                "include_self = true, yet no event of the run's readers:\n{listing}"
            );
            continue;
        }
        // main thread, guard, kallsyms reader and one reader per CPU.
        assert!(excluded.len() >= 4, "{report:#}");
        let own: Vec<&ReportLine> = lines
            .iter()
            .filter(|l| {
                excluded.contains(&l.pid())
                    || l.comm().starts_with("record-cpu")
                    || (l.event.starts_with("sched_")
                        && named_pids(l.fields).iter().any(|p| excluded.contains(p)))
            })
            .collect();
        let share = 100.0 * own.len() as f64 / lines.len() as f64;
        shares.push(share);
        assert!(
            share < 1.0,
            "{} of {} events ({share:.2} %) are the run's own (tids {excluded:?}):\n{}",
            own.len(),
            lines.len(),
            own.iter()
                .map(|l| format!("{l:?}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    eprintln!(
        "FIGURE idle whole-system trace: {:.2} % of events from the run's own threads",
        shares[0]
    );
    guard.assert_unchanged();
}
