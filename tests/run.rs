//! `run` end to end on the real kernel: events recorded, trace-cmd reads our
//! trace.dat, reports agree with it, and tracefs is exactly as before whatever
//! way the run ends.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{
    ReportLine, Scenario, TracefsGuard, assert_exit, bin, event_lines, event_name, plan_len,
    run_args, text, trace_cmd_report, trace_recipe,
};

fn unique(tag: &str) -> String {
    format!(
        "{tag}-{}-{:x}",
        std::process::id(),
        Instant::now().elapsed().as_nanos() ^ rand_seed()
    )
}

fn rand_seed() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Writes an executable shell script that runs `body`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// Per-event counts of a trace-cmd listing.
fn counts_by_event(listing: &str) -> std::collections::BTreeMap<String, u64> {
    let mut m = std::collections::BTreeMap::new();
    for l in event_lines(listing) {
        if let Some(n) = event_name(l) {
            *m.entry(n.to_string()).or_default() += 1;
        }
    }
    m
}

/// Compares two listings line by line on instance, task (comm-pid), CPU,
/// timestamp and event name.
pub fn assert_same_events(ours: &str, theirs: &str) {
    let a = crate::common::listing_lines(ours);
    let b = crate::common::listing_lines(theirs);
    assert_eq!(
        a.len(),
        b.len(),
        "event counts differ:\nours:\n{ours}\ntrace-cmd:\n{theirs}"
    );
    for (x, y) in a.iter().zip(&b) {
        let key = |l: &str| {
            ReportLine::parse(l)
                .map(|r| r.key())
                .unwrap_or_else(|| l.trim().to_string())
        };
        assert_eq!(key(x), key(y), "\nours:      {x}\ntrace-cmd: {y}");
    }
}

/// A recipe touching every kind of step: buffer, clock, cpumask, options, pid
/// scope, a uprobe (defined globally in its own probe group), filters,
/// stacktrace, enable, triggers.
pub(crate) const FULL: &str = r#"name = "every-step"
duration = "5s"
[buffer]
size_kb = 512
clock = "mono"
cpus = "0"
overwrite = false
[scope]
follow_forks = true
command = ["true"]
[[uprobes]]
event = "getpid_call"
kind = "uprobe"
target = "/lib/x86_64-linux-gnu/libc.so.6:getpid"
[[events]]
name = "sched:sched_process_exec"
filter = 'filename ~ "*"'
stacktrace = true
[[events]]
name = "sched:sched_process_exit"
[[triggers]]
event = "sched:sched_process_exit"
action = "traceoff"
count = 5
if = "prio > 0"
[[triggers]]
event = "sched:sched_process_fork"
action = "enable_event"
target = "sched:sched_wakeup"
"#;

fn interrupt_mid_run(signal: i32, expected_code: i32, reason: &str) {
    let sc = Scenario::new(&FULL.replace("duration = \"5s\"", "duration = \"60s\""));
    let out = sc.out();
    let mut child = Command::new(bin())
        .args(run_args(&sc.recipe, &out, &[], &["sleep", "50"]))
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let (mut stderr, seen) = crate::common::until_recording(&mut child);
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, signal) };
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert_eq!(status.code(), Some(expected_code), "{seen}{rest}");
    assert!(rest.contains("rolled back"), "{rest}");
    assert_eq!(sc.report()["stop_reason"], reason);
    trace_cmd_report(&out.join("trace.dat"));
    sc.finish();
}

#[test]
fn report_text_agrees_with_trace_cmd_on_a_trace_cmd_v7_zstd_file() {
    let fixture =
        crate::common::repo().join("crates/tracedat/tests/fixtures/trace-cmd-v7-zstd.dat");
    let ours = trace_recipe(&["report", fixture.to_str().unwrap()]);
    assert!(ours.status.success(), "{}", text(&ours.stderr));
    let theirs = trace_cmd_report(&fixture);
    assert!(event_lines(&theirs).len() > 10, "fixture has events");
    assert_same_events(&text(&ours.stdout), &theirs);
    let json = trace_recipe(&["report", fixture.to_str().unwrap(), "--format", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        report["total_events"].as_u64().unwrap(),
        event_lines(&theirs).len() as u64
    );
}

#[test]
fn report_on_a_corrupt_file_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        crate::common::repo().join("crates/tracedat/tests/fixtures/trace-cmd-v7-zstd.dat");
    let mut bytes = std::fs::read(&fixture).unwrap();
    bytes.truncate(bytes.len() / 3);
    let bad = dir.path().join("bad.dat");
    std::fs::write(&bad, &bytes).unwrap();
    for format in ["text", "summary", "json"] {
        let o = trace_recipe(&["report", bad.to_str().unwrap(), "--format", format]);
        assert_eq!(o.status.code(), Some(3), "{format}");
        assert!(
            text(&o.stderr).contains("bad.dat"),
            "the error names the file: {}",
            text(&o.stderr)
        );
        assert!(!text(&o.stderr).contains("panicked"));
    }
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn exec_of_a_unique_script_is_recorded_and_reports_match_trace_cmd() {
        let sc = Scenario::new(
            "name = \"e2e\"\ndescription = \"t\"\nduration = \"30s\"\n[scope]\nfollow_forks = true\n[[events]]\nname = \"sched:sched_process_exec\"\n[[events]]\nname = \"sched:sched_process_exit\"\n",
        );
        let name = unique("e2e-script");
        let s = script(sc.dir(), &name, "true");
        let out = sc.out();
        let shell = format!("{}; {}", s.display(), s.display());
        let report = sc.run_ok(&["sh", "-c", &shell]);

        let listing = trace_cmd_report(&out.join("trace.dat"));
        let execs: Vec<&str> = event_lines(&listing)
            .into_iter()
            .filter(|l| l.contains("sched_process_exec") && l.contains(&name))
            .collect();
        assert_eq!(execs.len(), 2, "the script ran twice:\n{listing}");

        let by_event = counts_by_event(&listing);
        let json_events = report["events"].as_object().unwrap();
        assert_eq!(json_events.len(), by_event.len(), "{listing}\n{report:#}");
        for (k, v) in json_events {
            let short = k.split(':').nth(1).unwrap();
            assert_eq!(
                Some(&v.as_u64().unwrap()),
                by_event.get(short),
                "count of {k}"
            );
        }
        assert_eq!(
            report["total_events"].as_u64().unwrap(),
            event_lines(&listing).len() as u64
        );
        assert_eq!(report["workload"]["exit"]["exit_code"], 0);
        assert_eq!(report["stop_reason"], "workload exited");
        assert!(
            report["kernel_release"]
                .as_str()
                .is_some_and(|k| !k.is_empty())
        );
        for f in ["trace.dat", "summary.txt", "report.json", "recipe.toml"] {
            assert!(out.join(f).is_file(), "{f} missing");
        }
        assert!(
            !out.join(".raw").exists(),
            "raw per-CPU files must be removed"
        );
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.lines().any(|l| l.starts_with("lost events: ")),
            "{summary}"
        );

        // Our own reader agrees with trace-cmd event for event.
        let ours = trace_recipe(&["report", out.join("trace.dat").to_str().unwrap()]);
        assert!(ours.status.success());
        assert_same_events(&text(&ours.stdout), &listing);
        sc.finish();
    }

    #[test]
    fn filters_and_comm_scope_keep_only_matching_events() {
        // Comm scope admits tra-yes and tra-no (never `sh`); the exec filter then
        // admits only tra-yes. Each mechanism removes events the other lets through,
        // so ignoring either one changes a count below.
        let sc = Scenario::new(
            "name = \"scope\"\nduration = \"30s\"\n[scope]\nfollow_forks = true\ncomms = [\"tra-yes\", \"tra-no\"]\n[[events]]\nname = \"sched:sched_process_exit\"\n\n[[events]]\nname = \"sched:sched_process_exec\"\nfilter = 'filename ~ \"*tra-yes\"'\n",
        );
        let yes = sc.path("tra-yes");
        let no = sc.path("tra-no");
        std::fs::copy("/bin/true", &yes).unwrap();
        std::fs::copy("/bin/true", &no).unwrap();
        let out = sc.out();
        let shell = format!("{} ; {} ; {}", yes.display(), no.display(), yes.display());
        let report = sc.run_ok(&["sh", "-c", &shell]);
        let listing = trace_cmd_report(&out.join("trace.dat"));
        let lines: Vec<ReportLine> = event_lines(&listing)
            .into_iter()
            .filter_map(ReportLine::parse)
            .collect();
        let tasks = |event: &str| -> Vec<&str> {
            let mut t: Vec<&str> = lines
                .iter()
                .filter(|l| l.event == event)
                .map(|l| l.comm())
                .collect();
            t.sort_unstable();
            t
        };
        assert_eq!(
            tasks("sched_process_exit"),
            ["tra-no", "tra-yes", "tra-yes"],
            "the comm scope passes exits of tra-yes and tra-no, not of sh:\n{listing}"
        );
        assert_eq!(
            tasks("sched_process_exec"),
            ["tra-yes", "tra-yes"],
            "the exec filter passes tra-yes, not tra-no (which the comm scope admits):\n{listing}"
        );
        assert_eq!(report["events"]["sched:sched_process_exit"], 3);
        assert_eq!(report["events"]["sched:sched_process_exec"], 2);
        sc.finish();
    }

    #[test]
    fn a_failure_at_every_step_of_the_plan_leaves_tracefs_unchanged() {
        let sc = Scenario::new(FULL);
        let recipe = &sc.recipe;
        let n = plan_len(recipe);
        assert!(n >= 12, "the plan should touch every kind of step, has {n}");
        let mut failures = Vec::new();
        for step in 1..=n {
            let out = sc.path(&format!("out{step}"));
            let o = Command::new(bin())
                .args(run_args(recipe, &out, &[], &[]))
                .env(trace_recipe::fault::FAIL_STEP_ENV, step.to_string())
                .output()
                .unwrap();
            let stderr = text(&o.stderr);
            let changes = sc.guard.changes();
            if o.status.code() != Some(3) || !stderr.contains(&format!("step {step} of {n} failed"))
            {
                failures.push(format!("step {step}: {:?}: {stderr}", o.status.code()));
            } else if !changes.is_empty() {
                failures.push(format!(
                    "step {step}: tracefs changed:\n{}",
                    changes.join("\n")
                ));
                trace_recipe(&["reset"]);
            }
        }
        eprintln!(
            "FIGURE steps fault-injected and clean: {}/{n}",
            n - failures.len()
        );
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        // And the whole plan applies and rolls back for real.
        sc.run_ok(&[]);
    }

    #[test]
    fn a_write_the_kernel_refuses_is_reported_with_the_recipe_line_and_rolled_back() {
        // `.function` on an int field passes our checks but the kernel refuses it.
        let sc = Scenario::new(
            "name = \"refused\"\n[buffer]\nsize_kb = 256\n[[events]]\nname = \"sched:sched_switch\"\nfilter = \"prev_pid.function == 1\"\n",
        );
        let o = sc.run(&[], &["true"], 3);
        let err = text(&o.stderr);
        assert!(
            err.contains("r.toml:4:1: step "),
            "the recipe entry is named: {err}"
        );
        assert!(
            // The recipe's filter, and-ed with the workload's scope: a switch of
            // the workload in or out (docs/src/scope.md).
            err.contains("failed: echo \"(prev_pid.function == 1) && (prev_pid == ")
                && err.contains("> instances/trace-recipe-refused-"),
            "{err}"
        );
        assert!(
            err.contains("error_log"),
            "the kernel's error_log text is shown: {err}"
        );
        sc.finish();
    }

    /// A refused write is explained only by the error_log entries it caused: an
    /// older entry (someone else's failure, or our own earlier one) is never shown
    /// as its reason.
    #[test]
    fn a_refused_write_shows_only_the_error_log_entries_it_caused() {
        use trace_recipe::tracefs::{Instance, Tracefs, WriteMode};
        let guard = TracefsGuard::acquire();
        let t = crate::common::tracefs();
        let name = format!("trace-recipe-errlog-{}", std::process::id());
        let inst = Instance::named(&t, &name);
        inst.create().unwrap();
        // Someone else's failure leaves an entry in the instance's error_log.
        let other = Instance::named(&Tracefs::at(t.root()), &name);
        let filter = "events/sched/sched_switch/filter";
        let e = other
            .write(filter, "prev_pid.function == 1", WriteMode::Replace)
            .unwrap_err()
            .to_string();
        // Our write of a filter the kernel refuses is explained by its own entry ...
        let ours = Instance::named(&Tracefs::at(t.root()), &name);
        let e2 = ours
            .write(filter, "no_such_field == 1", WriteMode::Replace)
            .unwrap_err()
            .to_string();
        // ... and a refusal that leaves no entry (a bad tracing_on value) by none.
        let e3 = ours
            .write("tracing_on", "x", WriteMode::Replace)
            .unwrap_err()
            .to_string();
        inst.destroy().unwrap();
        assert!(
            e.contains("error_log") && e.contains("prev_pid.function"),
            "{e}"
        );
        assert!(
            e2.contains("error_log") && e2.contains("no_such_field"),
            "{e2}"
        );
        assert!(
            !e2.contains("prev_pid.function"),
            "the older entry is not ours: {e2}"
        );
        assert!(!e3.contains("error_log"), "no entry, no explanation: {e3}");
        guard.assert_unchanged();
    }

    #[test]
    fn ctrl_c_mid_run_rolls_back_and_still_writes_the_output() {
        interrupt_mid_run(libc::SIGINT, 130, "signal SIGINT");
    }

    #[test]
    fn sigterm_mid_run_rolls_back_and_still_writes_the_output() {
        interrupt_mid_run(libc::SIGTERM, 143, "signal SIGTERM");
    }

    #[test]
    fn output_inside_tracefs_or_proc_is_refused_before_anything_is_written() {
        let sc = Scenario::new("name = \"o\"\n[[events]]\nname = \"sched:sched_switch\"\n");
        for bad in ["/sys/kernel/tracing/x", "/proc/self/x", "/sys/x"] {
            let o = trace_recipe(&run_args(&sc.recipe, Path::new(bad), &[], &["true"]));
            assert_exit(&o, 3);
            assert!(text(&o.stderr).contains("is inside"), "{}", text(&o.stderr));
        }
        sc.finish();
    }

    #[test]
    fn a_run_that_ends_by_duration_ends_the_workload_and_its_children() {
        let sc = Scenario::new(
            "name = \"tree\"\nduration = \"1s\"\n[[events]]\nname = \"sched:sched_process_exit\"\n",
        );
        // Odd durations mark our sleeps among whatever else runs on the machine.
        let report = sc.run_ok(&["sh", "-c", "sleep 3131.25 & sleep 3132.25; true"]);
        assert_eq!(report["stop_reason"], "duration");
        assert_eq!(report["workload"]["exit"]["signal"], 15);
        std::thread::sleep(Duration::from_millis(200));
        let left: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains("sleep 3131.25") || c.contains("sleep 3132.25"))
            .collect();
        assert!(
            left.is_empty(),
            "workload processes outlived the run: {left:?}"
        );
        sc.finish();
    }
}
