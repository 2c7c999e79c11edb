//! What a capture holds and what it lost: the run's own threads stay out of
//! the trace, and lost events are counted once.

use std::collections::BTreeSet;

use crate::common::{
    ReportLine, TracefsGuard, event_lines, is_runs_own, run_recipe, text, write_recipe,
};

/// A run of `recipe` (name `lost`) whose workload writes exactly `n` markers
/// (`ftrace:print` events) into the run's instance's `trace_marker` while the
/// per-CPU readers are held back (`TRACE_RECIPE_TEST_HOLD_READERS`), so a
/// small ring buffer overflows by a known amount. Returns the exit code,
/// stderr, report.json and the number of markers in trace.dat.
pub(crate) fn overflow_with_markers(
    dir: &std::path::Path,
    recipe: &std::path::Path,
    n: u32,
) -> (Option<i32>, String, serde_json::Value, u64) {
    let out = dir.join(format!(
        "out-{}",
        recipe.file_stem().unwrap().to_str().unwrap()
    ));
    let ready = dir.join(format!(
        "ready-{}",
        recipe.file_stem().unwrap().to_str().unwrap()
    ));
    let tracefs = crate::common::tracefs();
    // The run tells the workload its instance's trace_marker; the workload's
    // parent is the run, so it is trace-recipe-lost-$PPID's (checked: a
    // wrong path writes nothing and the counts below fail).
    // Each `echo` is one write(2), one event; a write the full buffer refuses
    // (drop-newest mode) fails with EBADF and is counted as dropped.
    let writer = format!(
        "[ \"$TRACE_RECIPE_MARKER\" = {root}/instances/trace-recipe-lost-$PPID/trace_marker ] && exec 3>\"$TRACE_RECIPE_MARKER\" && i=0 && while [ $i -lt {n} ]; do echo \"lost-test $i\" >&3 2>/dev/null; i=$((i+1)); done; touch {ready}",
        root = tracefs.root().display(),
        ready = ready.display()
    );
    let o = std::process::Command::new(crate::common::bin())
        .args(crate::common::run_args(
            recipe,
            &out,
            &[],
            &["sh", "-c", &writer],
        ))
        .env("TRACE_RECIPE_TEST_HOLD_READERS", &ready)
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("report.json"))
            .unwrap_or_else(|e| panic!("no report.json ({e}):\n{stderr}")),
    )
    .unwrap();
    let listing = crate::common::trace_cmd_report(&out.join("trace.dat"));
    let markers = event_lines(&listing)
        .into_iter()
        .filter(|l| l.contains("lost-test "))
        .count() as u64;
    (o.status.code(), stderr, report, markers)
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

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
            // main thread, guard and one reader per CPU.
            assert!(excluded.len() >= 4, "{report:#}");
            let own: Vec<&ReportLine> = lines
                .iter()
                .filter(|l| is_runs_own(l.event, l.pid(), false, l.fields, &excluded))
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

    #[test]
    fn lost_events_are_counted_once_in_overwrite_and_in_drop_newest_mode() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        const N: u32 = 5000;
        for overwrite in [true, false] {
            let recipe = write_recipe(
                dir.path(),
                &format!("overwrite-{overwrite}.toml"),
                &format!(
                    "name = \"lost\"\ndescription = \"t\"\nduration = \"60s\"\n[buffer]\nsize_kb = 8\noverwrite = {overwrite}\n[[events]]\nname = \"sched:sched_process_exec\"\nfilter = 'filename == \"/no/such/program\"'\n"
                ),
            );
            let (code, stderr, report, markers) = overflow_with_markers(dir.path(), &recipe, N);
            assert_eq!(code, Some(0), "{stderr}");
            let lost = report["lost_total"].as_u64().unwrap();
            let per_cpu = &report["lost_events"];
            let sum = |key: &str| -> u64 {
                per_cpu
                    .as_object()
                    .unwrap()
                    .values()
                    .map(|l| l[key].as_u64().unwrap())
                    .sum()
            };
            let (overrun, dropped, in_pages) = (sum("overrun"), sum("dropped"), sum("in_pages"));
            eprintln!(
                "FIGURE lost count, overwrite = {overwrite}: {N} markers written, {markers} read, lost {lost} (overrun {overrun}, dropped {dropped}, in pages {in_pages})"
            );
            assert_eq!(
                report["total_events"].as_u64().unwrap(),
                markers,
                "only the markers are in the trace: {report:#}"
            );
            assert!(
                markers > 0 && markers < u64::from(N) / 2,
                "an 8 KiB buffer holds a few hundred markers, not {markers}"
            );
            assert_eq!(
                markers + lost,
                u64::from(N),
                "read + lost must be what was written: {report:#}"
            );
            if overwrite {
                assert!(overrun > 0 && dropped == 0, "{report:#}");
            } else {
                assert!(dropped > 0 && overrun == 0 && in_pages == 0, "{report:#}");
            }
        }
        guard.assert_unchanged();
    }

    /// A workload that writes to `$TRACE_RECIPE_MARKER` finds its lines in
    /// report.json `markers` (time, CPU, task, text), summary.txt and report.html,
    /// escaped: a control sequence is written out as `\u{1b}` in the summary and
    /// HTML markup as text in the page.
    #[test]
    fn markers_the_workload_writes_reach_report_json_the_summary_and_the_html_page_escaped() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(
            dir.path(),
            "markers.toml",
            "name = \"markers\"\ndescription = \"t\"\n[[events]]\nname = \"sched:sched_process_exec\"\n[output]\nreports = [\"summary\", \"json\", \"html\"]\n",
        );
        let out = dir.path().join("out");
        let o = run_recipe(
            &recipe,
            &out,
            &[
                "sh",
                "-c",
                "echo 'phase one' > \"$TRACE_RECIPE_MARKER\"; printf 'evil \\033[2J <b>&</b>\\n' > \"$TRACE_RECIPE_MARKER\"; echo 'phase two' > \"$TRACE_RECIPE_MARKER\"",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
        let report: serde_json::Value = serde_json::from_str(&read("report.json")).unwrap();
        let m = &report["markers"];
        let workload = report["workload"]["pid"].as_i64().unwrap();
        let first = m["first"].as_array().cloned().unwrap_or_default();
        let texts: Vec<&str> = first.iter().filter_map(|x| x["text"].as_str()).collect();
        assert_eq!(m["count"], 3, "{m:#}");
        assert_eq!(
            texts,
            ["phase one", "evil \\u{1b}[2J <b>&</b>", "phase two"],
            "{m:#}"
        );
        let mut last = 0;
        for x in &first {
            let ts = x["ts_ns"].as_u64().unwrap();
            assert!(
                ts >= last
                    && x["pid"].as_i64() == Some(workload)
                    && x["comm"] == "sh"
                    && x["cpu"].as_u64().is_some(),
                "{x:#}"
            );
            last = ts;
        }
        let summary = read("summary.txt");
        assert!(
            summary.contains("markers:  3 written to trace_marker\n")
                && summary.contains(&format!(" sh-{workload}: phase one\n"))
                && summary.contains(": evil \\u{1b}[2J <b>&</b>\n")
                && !summary.contains('\u{1b}'),
            "{summary}"
        );
        let html = read("report.html");
        assert!(
            html.contains("<h2 id=\"markers\">Markers</h2>")
                && html.contains("evil \\u{1b}[2J &lt;b&gt;&amp;&lt;&#x2f;b&gt;")
                && html.contains("phase two")
                && !html.contains("<b>&"),
            "{html}"
        );
        guard.assert_unchanged();
    }

    /// Where the kernel has `copy_trace_marker` (6.16+; this host's 6.18 has
    /// it), a workload that writes the top-level `trace_marker` rather than
    /// `$TRACE_RECIPE_MARKER` finds its line in the run too: the run's
    /// instance turns the option on, and the instance is gone afterwards.
    #[test]
    fn markers_written_to_the_top_level_trace_marker_reach_the_run_where_the_kernel_copies_them() {
        let guard = TracefsGuard::acquire();
        let tracefs = crate::common::tracefs();
        let root = tracefs.root();
        if !root.join("options/copy_trace_marker").exists() {
            eprintln!("this kernel has no copy_trace_marker (6.16+): nothing to test");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(
            dir.path(),
            "topmarker.toml",
            "name = \"topmarker\"\ndescription = \"t\"\n[[events]]\nname = \"sched:sched_process_exec\"\n[output]\nreports = [\"json\"]\n",
        );
        let out = dir.path().join("out");
        let script = format!("echo 'top-level marker' > {}/trace_marker", root.display());
        let o = run_recipe(&recipe, &out, &["sh", "-c", &script]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
                .unwrap();
        let workload = report["workload"]["pid"].as_i64().unwrap();
        let ours: Vec<&serde_json::Value> = report["markers"]["first"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|x| x["pid"].as_i64() == Some(workload))
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            ours.len() == 1 && ours[0]["text"] == "top-level marker",
            "{:#}",
            report["markers"]
        );
        guard.assert_unchanged();
    }
}
