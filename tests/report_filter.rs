//! `report -F/--cpu/--pid/--comm/--from/--to/-o` on a trace recorded on this
//! host: the kept records are those `trace-cmd report -F`/`--cpu` keeps, or,
//! where trace-cmd 3.1.6 has no such flag or reads a filter unlike the kernel
//! (negative numbers, `~` globs), those an independent pass over trace-cmd's
//! unfiltered listing keeps. The analyses count only what is kept; bad flags
//! exit 2 (syntax) or 1 (not in this file) with what to do.

use std::path::{Path, PathBuf};

use crate::common::{
    ReportLine, TracefsGuard, assert_exit, event_lines, is_lost_marker, text, trace_cmd,
    trace_recipe, write_recipe,
};

const RECIPE: &str = r#"name = "filters"
description = "records to filter"
duration = "30s"
[scope]
system_wide = true
[[events]]
name = "sched:sched_switch"
[[events]]
name = "sched:sched_wakeup"
[[events]]
name = "syscalls:sys_exit_openat"
[output]
reports = ["summary", "json"]
"#;

/// Records RECIPE system-wide while a shell opens files (some missing) and sleeps.
fn record() -> (tempfile::TempDir, PathBuf) {
    let guard = TracefsGuard::acquire();
    let dir = tempfile::tempdir().unwrap();
    let recipe = write_recipe(dir.path(), "filters.toml", RECIPE);
    let out = dir.path().join("out");
    let o = crate::common::run_recipe(
        &recipe,
        &out,
        &[
            "sh",
            "-c",
            "for i in 1 2 3 4 5 6; do cat /etc/passwd /nonexistent >/dev/null 2>&1; sleep 0.01; done",
        ],
    );
    guard.assert_unchanged();
    assert_exit(&o, 0);
    (dir, out)
}

/// Our listing with `args`, without its `cpus=` line.
fn ours(dat: &Path, args: &[&str]) -> String {
    let mut all = vec!["report", dat.to_str().unwrap()];
    all.extend(args);
    let o = trace_recipe(&all);
    assert_exit(&o, 0);
    text(&o.stdout)
}

/// trace-cmd's listing with `args` (before the file: 3.1.6 ignores `-F` after `-i`).
fn theirs(dat: &Path, args: &[&str]) -> String {
    let mut all: Vec<&std::ffi::OsStr> = vec!["report".as_ref()];
    all.extend(args.iter().map(std::ffi::OsStr::new));
    all.push(dat.as_os_str());
    trace_cmd(&all)
}

/// The lines of `listing` that `keep` keeps, as one text (with the `cpus=`
/// line) in [`by_pid`] form. A `CPU:N [N EVENTS DROPPED]` line goes with the record after it:
/// trace-cmd prints it on the record that carries the loss, so its filters
/// keep it when they keep that record (a trace recorded on a loaded machine
/// has such lines).
fn kept(listing: &str, keep: impl Fn(&ReportLine) -> bool) -> String {
    let mut out = String::new();
    let mut lost = None;
    for l in listing.lines() {
        match ReportLine::parse(l) {
            Some(r) => {
                if keep(&r) {
                    for l in lost.iter().chain([&l]) {
                        out.push_str(l);
                        out.push('\n');
                    }
                }
                lost = None;
            }
            None if is_lost_marker(l) => lost = Some(l),
            None if l.starts_with("cpus=") => {
                out.push_str(l);
                out.push('\n');
            }
            None => {}
        }
    }
    by_pid(&out)
}

/// `listing` with each record's task column cut to its pid. trace-cmd names
/// a task by what the records it printed before registered: when the first
/// records it prints come from an idle CPU, they can name a task under an
/// older comm (the workload's child before its exec), and that name shows
/// in some filtered listings and not in others. So a listing filtered here
/// and one filtered by trace-cmd are compared by pid; where trace-cmd itself
/// filters, the listings must agree byte for byte.
fn by_pid(listing: &str) -> String {
    let mut out = String::new();
    for l in listing.lines() {
        match ReportLine::parse(l) {
            Some(r) => out.push_str(&format!(
                "{} [{:03}] {}: {}: {}",
                r.pid(),
                r.cpu,
                r.timestamp,
                r.event,
                r.fields
            )),
            None => out.push_str(l),
        }
        out.push('\n');
    }
    out
}

/// `(prev_comm, prev_pid)` of trace-cmd's sched_switch line
/// (`sh:2430 [120] D ==> ...`): the task's comm when it switched out.
fn prev_task(fields: &str) -> (&str, i32) {
    let head = fields.trim().split(" [").next().unwrap();
    let (comm, pid) = head.rsplit_once(':').unwrap();
    (comm, pid.parse().unwrap())
}

/// The pids of the tasks that switched out under one of `comms`, in the
/// order of their first such switch.
fn pids_named(listing: &str, comms: &[&str]) -> Vec<i32> {
    let mut pids = Vec::new();
    for r in event_lines(listing)
        .iter()
        .filter_map(|l| ReportLine::parse(l))
    {
        if r.event != "sched_switch" {
            continue;
        }
        let (comm, pid) = prev_task(r.fields);
        if comms.contains(&comm) && !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    pids
}

/// `next_pid` of trace-cmd's sched_switch line (`... ==> swapper/0:0 [120]`).
fn next_pid(fields: &str) -> i32 {
    let next = fields.split("==> ").nth(1).unwrap();
    let head = next.split(" [").next().unwrap();
    head.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// A trace recorded with RECIPE on this host, with the missed-events flag
/// set by hand on 2 of CPU 0's 3 pages and 7 of CPU 1's 8 (bit 31 of a
/// page's commit word, as the kernel sets it after an overrun when it cannot
/// store the count): every filter keeps the `CPU:N [EVENTS DROPPED]` lines
/// trace-cmd keeps, those before the records it keeps. On a loaded machine a
/// run of the live test above loses events too; before, our filters dropped
/// every marker where trace-cmd kept some.
#[test]
fn lost_events_markers_go_with_the_record_after_them_as_trace_cmd_prints_them() {
    let dir = tempfile::tempdir().unwrap();
    let dat = crate::common::unpacked_trace("tests/report-filter/lost.dat.zst", dir.path());
    let dropped = theirs(&dat, &[])
        .lines()
        .filter(|l| is_lost_marker(l))
        .count();
    assert_eq!(dropped, 9, "the file's markers");
    assert_filters_keep_what_trace_cmd_keeps(&dat, dir.path());
}

/// The listings of `dat` (a trace of RECIPE) with each filter against
/// trace-cmd's or an independent pass over its unfiltered listing; writes
/// into `scratch`.
fn assert_filters_keep_what_trace_cmd_keeps(dat: &Path, scratch: &Path) {
    let all = ours(dat, &[]);
    assert_eq!(all, theirs(dat, &[]), "unfiltered listings differ");
    let n = event_lines(&all).len();
    assert!(n > 100, "too few records to filter: {n}");

    // Filters trace-cmd 3.1.6 reads as the kernel does (its EVENT takes no
    // `system:` prefix; ours takes both).
    for (f, fs) in [
        (vec!["-F", "sched_switch"], vec!["-F", "sched_switch"]),
        (
            vec!["-F", "sched:sched_wakeup", "-F", "sys_exit_openat"],
            vec!["-F", "sched_wakeup", "-F", "sys_exit_openat"],
        ),
        (
            vec!["-F", "sched_switch:prev_state == 1"],
            vec!["-F", "sched_switch:prev_state == 1"],
        ),
        (
            vec![
                "-F",
                "sched:sched_switch:prev_pid > 100 && next_pid < 1000 || prev_prio == 120",
            ],
            vec![
                "-F",
                "sched_switch:prev_pid > 100 && next_pid < 1000 || prev_prio == 120",
            ],
        ),
        (
            vec!["-F", "sched_switch:!(prev_state == 0)"],
            vec!["-F", "sched_switch:!(prev_state == 0)"],
        ),
        (
            vec!["-F", "sys_exit_openat:ret == 3"],
            vec!["-F", "sys_exit_openat:ret == 3"],
        ),
        (
            vec![
                "-F",
                "sched_wakeup:comm == \"migration/0\" || comm == \"migration/1\"",
            ],
            vec![
                "-F",
                "sched_wakeup:comm == \"migration/0\" || comm == \"migration/1\"",
            ],
        ),
        (vec!["--cpu", "0"], vec!["--cpu", "0"]),
        (vec!["--cpu", "1"], vec!["--cpu", "1"]),
        (
            vec!["--cpu", "1", "-F", "sched_switch"],
            vec!["--cpu", "1", "-F", "sched_switch"],
        ),
    ] {
        let (a, b) = (ours(dat, &f), theirs(dat, &fs));
        assert_eq!(a, b, "{f:?} keeps other records than trace-cmd {fs:?}");
        let kept = event_lines(&a).len();
        assert!(kept < n, "{f:?} kept everything");
    }
    // Some filter keeps something (a test that keeps nothing proves little).
    assert!(!event_lines(&ours(dat, &["-F", "sched_switch:prev_state == 1"])).is_empty());

    // `system:*`, by event name on the unfiltered listing.
    let want = kept(&all, |r| r.event.starts_with("sched_"));
    assert_eq!(by_pid(&ours(dat, &["-F", "sched:*"])), want);

    // The kernel compares `long ret` signed (trace-cmd 3.1.6 does not): the
    // failed openat()s, printed as 0xfff.... by trace-cmd.
    let failed = |r: &ReportLine| {
        r.event == "sys_exit_openat"
            && (u64::from_str_radix(r.fields.trim().trim_start_matches("0x"), 16).unwrap() as i64)
                < 0
    };
    let want = kept(&all, failed);
    assert!(
        event_lines(&want).len() >= 6,
        "the workload's failed opens: {want}"
    );
    assert_eq!(by_pid(&ours(dat, &["-F", "sys_exit_openat:ret < 0"])), want);
    let wanted = ["-F", "syscalls:sys_exit_openat:ret == -2"];
    assert_eq!(by_pid(&ours(dat, &wanted)), {
        kept(&all, |r| {
            failed(r) && r.fields.trim() == "0xfffffffffffffffe"
        })
    });

    // `~` is the kernel's glob (trace-cmd reads it as a regex).
    let want = kept(&all, |r| {
        r.event == "sched_switch"
            && (prev_task(r.fields).0.starts_with("sh") || next_pid(r.fields) == 0)
    });
    assert!(event_lines(&want).len() >= 6, "{want}");
    let glob = ["-F", "sched_switch:prev_comm ~ \"sh*\" || next_pid == 0"];
    assert_eq!(by_pid(&ours(dat, &glob)), want);

    // --pid and --comm (trace-cmd 3.1.6 has neither): the task's pid, and
    // the tasks that ran as cat or sleep (each switched out as it exited).
    let shell = pids_named(&all, &["sh"]);
    let shell = *shell.first().expect("the workload's shell in the listing");
    let want = kept(&all, |r| r.pid() == shell);
    assert!(event_lines(&want).len() > 5);
    assert_eq!(by_pid(&ours(dat, &["--pid", &shell.to_string()])), want);
    let named = pids_named(&all, &["cat", "sleep"]);
    let want = kept(&all, |r| named.contains(&r.pid()));
    assert!(!event_lines(&want).is_empty());
    let comms = ["--comm", "cat", "--comm", "sleep"];
    assert_eq!(by_pid(&ours(dat, &comms)), want);

    // --from/--to: printed timestamps (inclusive), and seconds after the first.
    let lines = event_lines(&all);
    let ts = |i: usize| ReportLine::parse(lines[i]).unwrap().timestamp.to_string();
    let (a, b) = (ts(n / 4), ts(n / 2));
    let secs = |t: &str| t.parse::<f64>().unwrap();
    let want = kept(&all, |r| {
        secs(r.timestamp) >= secs(&a) && secs(r.timestamp) <= secs(&b)
    });
    let window = ["--from", &format!("@{a}"), "--to", &format!("@{b}")];
    assert_eq!(by_pid(&ours(dat, &window)), want);
    let first = secs(&ts(0));
    let want = kept(&all, |r| secs(r.timestamp) - first > 0.05 + 1e-6);
    let got = ours(dat, &["--from", "0.05"]);
    // The listing rounds to microseconds: at most the records within 1 µs of the cut differ.
    let diff = event_lines(&got).len().abs_diff(event_lines(&want).len());
    assert!(!got.is_empty() && event_lines(&got).len() < n);
    assert!(
        diff <= 2,
        "--from 0.05: {} vs {}",
        event_lines(&got).len(),
        event_lines(&want).len()
    );

    // -o FILE writes what stdout would show.
    let file = scratch.join("filtered.txt");
    let o = trace_recipe(&[
        "report",
        dat.to_str().unwrap(),
        "-F",
        "sched_switch",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_exit(&o, 0);
    assert!(o.stdout.is_empty());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        ours(dat, &["-F", "sched_switch"])
    );

    // The analyses count only what is kept.
    let json = ours(
        dat,
        &["--format", "json", "-F", "sched_switch", "--cpu", "1"],
    );
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    let listed = event_lines(&theirs(dat, &["--cpu", "1", "-F", "sched_switch"])).len();
    assert_eq!(r["events"]["sched:sched_switch"], listed as u64);
    assert_eq!(r["total_events"], listed as u64);
    assert_eq!(r["cpus"].as_object().unwrap().len(), 1);
    let wakeups = ours(dat, &["--format", "json", "--pid", &shell.to_string()]);
    let r: serde_json::Value = serde_json::from_str(&wakeups).unwrap();
    assert_eq!(r["top_pids"].as_array().unwrap().len(), 1);
    assert_eq!(r["top_pids"][0]["pid"], shell);
}

#[test]
fn bad_filters_say_what_is_wrong_and_exit_2_or_1() {
    let dat = crate::common::repo().join("crates/tracedat/tests/fixtures/trace-cmd-v7-zstd.dat");
    let dat = dat.to_str().unwrap();
    for (args, code, says) in [
        (
            vec!["-F", "sched_switch:prev_pid =="],
            2,
            "filter ends too early",
        ),
        (vec!["-F", "sched_switch:(prev_pid == 1"], 2, "missing `)`"),
        (vec!["--cpu", "one"], 2, "CPU numbers and ranges"),
        (vec!["--from", "soon"], 2, "seconds after the first event"),
        (vec!["-F", "no_such_event"], 1, "no event `no_such_event`"),
        (
            vec!["-F", "sched_switch:nofield == 1"],
            1,
            "no field `nofield`; its fields: prev_comm",
        ),
        (
            vec!["-F", "sched_switch:prev_comm < 3"],
            1,
            "use ==, != or ~",
        ),
        (
            vec!["-F", "sched_switch:prev_pid ~ \"1*\""],
            1,
            "`~` matches strings",
        ),
    ] {
        let mut all = vec!["report", dat];
        all.extend(&args);
        let o = trace_recipe(&all);
        assert_exit(&o, code);
        let err = text(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?} printed records");
    }
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn each_filter_keeps_what_trace_cmd_keeps() {
        let (_dir, out) = record();
        assert_filters_keep_what_trace_cmd_keeps(&out.join("trace.dat"), &out);
    }

    #[test]
    fn a_folder_report_shows_the_run_header_and_analysis_prints_only_that() {
        let (_dir, out) = record();
        let summary = ours(&out, &["--format", "summary"]);
        for want in [
            "recipe:   filters",
            "ended by: workload exited",
            "workload: sh -c",
            "per event:",
        ] {
            assert!(summary.contains(want), "no {want:?} in\n{summary}");
        }
        let html = ours(&out, &["--format", "html"]);
        assert!(html.contains("<th>workload</th><td>sh -c"), "html header");
        assert!(html.contains("<h2>Events</h2>"));
        let only = ours(&out, &["--format", "summary", "--analysis", "wakeup"]);
        assert!(
            only.contains("recipe:   filters") && only.contains("wakeup: "),
            "{only}"
        );
        assert!(
            !only.contains("per event:") && !only.contains("top comms:"),
            "{only}"
        );
        let html = ours(&out, &["--format", "html", "--analysis", "wakeup"]);
        assert!(!html.contains("<h2>Events</h2>"));
        // A bundle's too.
        assert_exit(&trace_recipe(&["pack", out.to_str().unwrap()]), 0);
        let bundle = out.with_extension("tar.zst");
        let packed = ours(&bundle, &["--format", "summary", "--pid", "1"]);
        assert!(packed.contains("recipe:   filters"), "{packed}");
        // A bare trace.dat has no run header.
        let bare = ours(&out.join("trace.dat"), &["--format", "summary"]);
        assert!(!bare.contains("recipe:"), "{bare}");
    }
}
