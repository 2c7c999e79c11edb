//! `[[expect]]`: checked after the run; a failed one exits 5 after everything is
//! written, and `check` places each bad expression at its line and column.

use crate::common::{TracefsGuard, repo, text, trace_recipe, write_recipe};

const RECIPE: &str = r#"name = "expect"
description = "three execs and what they must show"
duration = "30s"
[scope]
follow_forks = true
[[events]]
name = "sched:sched_process_exec"
[[events]]
name = "syscalls:sys_enter_openat"
[[events]]
name = "syscalls:sys_exit_openat"
[[expect]]
that = "count(sched:sched_process_exec) >= 3"
[[expect]]
that = "lost_events == 0"
[[expect]]
that = "p99(syscalls:openat) < 10s"
[[expect]]
that = "count(syscalls:sys_exit_openat) == count(syscalls:sys_enter_openat)"
"#;

#[test]
fn check_places_each_bad_expectation_at_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let body = "name = \"bad-expect\"\n[[events]]\nname = \"sched:sched_process_exec\"\n[[expect]]\nthat = \"count(sched:sched_switch) > 1\"\n[[expect]]\nthat = \"p99(syscalls:openat) < 2\"\n[[expect]]\nthat = \"count(sched:sched_process_exec) >= 3ms\"\n[[expect]]\nthat = \"p99(nosuch:x) < 2ms\"\n[[expect]]\nthat = \"lost_events = 0\"\n[[expect]]\nthat = \"count(sched:nosuch_event) > 0\"\n[[expect]]\nthat = \"count(sched:sched_process_exec) <= 2 * count(sched:sched_wakeup)\"\n[[expect]]\nthat = \"p99(syscalls:openat) < count(sched:sched_process_exec)\"\n";
    let r = write_recipe(dir.path(), "r.toml", body);
    let o = trace_recipe(&["check", r.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let p = r.display();
    for want in [
        format!("{p}:5:15: error (recipe): the recipe does not record `sched:sched_switch`"),
        format!("{p}:7:32: error (recipe): expectation: `2` needs a unit"),
        format!("{p}:9:44: error (recipe): expectation: the unit `ms` does not fit a count"),
        format!("{p}:11:13: error (recipe): expectation: no latency analysis `nosuch`"),
        format!("{p}:13:21: error (recipe): expectation: expected a comparison"),
        format!("{p}:15:15: error (this kernel): this kernel has no event `sched:nosuch_event`"),
        // The right side of a comparison of two measurements is checked as the left.
        format!("{p}:17:54: error (recipe): the recipe does not record `sched:sched_wakeup`"),
        format!(
            "{p}:19:13: error (recipe): expectation: both sides must be of one kind: the left is a duration, the right a count"
        ),
    ] {
        assert!(out.contains(&want), "missing `{want}` in:\n{out}");
    }
    assert!(out.contains("8 problems found"), "{out}");
    let _ = repo();
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn expectations_that_hold_exit_0_and_one_that_fails_exits_5_after_writing_everything() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let workload = [
            "sh",
            "-c",
            "ls / > /dev/null; cat /etc/hostname > /dev/null; true",
        ];
        let ok = write_recipe(dir.path(), "ok.toml", RECIPE);
        let out = dir.path().join("ok");
        let junit = dir.path().join("ok.xml");
        let o = trace_recipe(&crate::common::run_args(
            &ok,
            &out,
            &["--junit", junit.to_str().unwrap()],
            &workload,
        ));
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
                .unwrap();
        let results = report["expectations"].as_array().unwrap();
        assert_eq!(results.len(), 4, "{report:#}");
        assert!(results.iter().all(|r| r["passed"] == true), "{results:#?}");
        // The measured count is the report's own count of the event.
        assert_eq!(
            results[0]["actual"].as_str().unwrap(),
            report["events"]["sched:sched_process_exec"].to_string()
        );
        // Two measurements: both read from the report, shown side by side.
        let (enter, exit) = (
            &report["events"]["syscalls:sys_enter_openat"],
            &report["events"]["syscalls:sys_exit_openat"],
        );
        assert!(enter.as_u64().unwrap() > 0, "{report:#}");
        assert_eq!(
            results[3]["actual"].as_str().unwrap(),
            format!("{exit} vs {enter}")
        );
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(summary.contains("expectations: 4 of 4 held"), "{summary}");
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(
            xml.contains("tests=\"4\"") && xml.contains("failures=\"0\""),
            "{xml}"
        );

        // Ask for more execs than the workload makes: exit 5, everything written.
        let bad = write_recipe(
            dir.path(),
            "bad.toml",
            &RECIPE
                .replace(">= 3\"", ">= 300\"")
                .replace("== count(", "> 2 * count("),
        );
        let out = dir.path().join("bad");
        let junit = dir.path().join("bad.xml");
        let o = trace_recipe(&crate::common::run_args(
            &bad,
            &out,
            &["--junit", junit.to_str().unwrap()],
            &workload,
        ));
        assert_eq!(o.status.code(), Some(5), "{}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("2 of 4 expectations failed"),
            "{}",
            text(&o.stderr)
        );
        for f in ["trace.dat", "report.json", "summary.txt"] {
            assert!(out.join(f).is_file(), "{f} is written before exit 5");
        }
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.contains("FAIL  count(sched:sched_process_exec) >= 300"),
            "{summary}"
        );
        assert!(
            summary.contains(
                "FAIL  count(syscalls:sys_exit_openat) > 2 * count(syscalls:sys_enter_openat)"
            ),
            "{summary}"
        );
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(
            xml.contains("failures=\"2\"") && xml.contains("&gt;= 300"),
            "{xml}"
        );
        guard.assert_unchanged();
    }
}
