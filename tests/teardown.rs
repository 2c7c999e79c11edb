//! Teardown and its failures: an undo that fails in the run, in the guard or in
//! `reset` keeps the journal and exits "rollback incomplete" until `reset`
//! finishes the job; a journal write that fails stops the apply cleanly; a run
//! killed mid-recording takes its workload's process group with it, unless the
//! recipe says `on_abort = "leave"`. Kills at named points (recording, drain,
//! between undos of the run's rollback, during the guard's replay) end clean by
//! the guard or by `reset`; failures at `tracing_on`, recorder start, drain and
//! table saving roll back and exit 3.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::snapshot::Snapshot;
use trace_recipe::apply::journal::{JOURNAL_DIR, list, lock};
use trace_recipe::cli::exit;
use trace_recipe::fault::{
    FAIL_AT_ENV, FAIL_JOURNAL_ENV, FAIL_UNDO_ENV, KILL_AT_ENV, KILL_STEP_ENV,
};

use crate::common::{TracefsGuard, bin, text, trace_recipe, tracefs, write_recipe};
use crate::reliability::{settles_to, spawn_run};

const RECIPE: &str = r#"name = "teardown"
duration = "30s"
[[events]]
name = "sched:sched_switch"
[[events]]
name = "sched:sched_process_exit"
"#;

fn run_with(recipe: &Path, out: &Path, env: &[(&str, &str)], cmd: &[&str]) -> Output {
    let mut c = Command::new(bin());
    c.args(crate::common::run_args(recipe, out, &[], cmd));
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn journal_of(pid: u32) -> PathBuf {
    trace_recipe::apply::journal::path_for(Path::new(JOURNAL_DIR), pid)
}

/// Whether the guard of run `run_pid` (`trace-recipe __guard --run-pid PID ...`)
/// is still alive.
fn guard_alive(run_pid: u32) -> bool {
    guard_pid(run_pid).is_some()
}

/// The pid of the guard of run `run_pid`, while it runs.
fn guard_pid(run_pid: u32) -> Option<u32> {
    let want = ["__guard", "--run-pid", &run_pid.to_string()].map(String::from);
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            Some((pid, std::fs::read(e.path().join("cmdline")).ok()?))
        })
        .find(|(_, cmd)| {
            let args: Vec<String> = cmd
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            args.windows(3).any(|w| w == want)
        })
        .map(|(pid, _)| pid)
}

/// Whether process group `pgid` still has a member.
fn group_alive(pgid: u32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks for existence.
    unsafe { libc::kill(-(pgid as i32), 0) == 0 }
}

/// Waits up to `limit` for `cond`; true when it held.
fn within(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `reset` (without any test hook) brings tracefs back to `before` and deletes
/// the journal.
fn reset_finishes(before: &Snapshot, journal: &Path) {
    let r = trace_recipe(&["reset"]);
    assert_eq!(r.status.code(), Some(exit::OK), "{}", text(&r.stderr));
    assert!(
        text(&r.stdout).contains("rolled back"),
        "reset replayed the journal: {}",
        text(&r.stdout)
    );
    assert!(!journal.exists(), "reset deleted {}", journal.display());
    assert!(
        settles_to(before, Duration::from_secs(1)),
        "clean after reset:\n{}",
        before.diff(&Snapshot::take(&tracefs())).join("\n")
    );
}

/// Starts a run of `recipe` around `sleep 30`, waits until the workload runs
/// (released: its comm is `sleep`), SIGKILLs the run and returns the workload's
/// pid (also its process group).
fn kill_run_mid_recording(recipe: &Path, out: &Path) -> u32 {
    kill_mid_recording(recipe, out, false)
}

/// [`kill_run_mid_recording`], SIGKILLing the run's guard first when `and_guard`.
fn kill_mid_recording(recipe: &Path, out: &Path, and_guard: bool) -> u32 {
    let mut child = spawn_run(recipe, out, &[], &["sleep", "30"]);
    let record = Path::new(JOURNAL_DIR).join(format!("run-{}.workload", child.id()));
    let mut workload = None;
    assert!(
        within(Duration::from_secs(10), || {
            workload = trace_recipe::workload::WorkloadRecord::list(Path::new(JOURNAL_DIR))
                .into_iter()
                .find(|(p, _)| *p == record)
                .map(|(_, r)| r.pid);
            workload.is_some_and(|w| {
                std::fs::read_to_string(format!("/proc/{w}/comm"))
                    .is_ok_and(|c| c.trim() == "sleep")
            })
        }),
        "the workload started"
    );
    let workload = workload.unwrap();
    assert_eq!(
        rustix::process::getpgid(rustix::process::Pid::from_raw(workload as i32))
            .map(|p| p.as_raw_nonzero().get() as u32),
        Ok(workload),
        "the workload leads a process group of its own"
    );
    if and_guard {
        let g = guard_pid(child.id()).expect("the run has a guard");
        // SAFETY: kill(2) of the test's own run's guard.
        unsafe { libc::kill(g as i32, libc::SIGKILL) };
        assert!(within(Duration::from_secs(2), || !guard_alive(child.id())));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    workload
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn an_undo_failing_in_the_run_keeps_the_journal_exits_7_and_reset_finishes() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(dir.path(), "r.toml", RECIPE);
        let before = Snapshot::take(&tracefs());
        // Undo 1 is the instance's rmdir: the instance stays behind.
        let o = run_with(
            &recipe,
            &dir.path().join("out"),
            &[(FAIL_UNDO_ENV, "1")],
            &["true"],
        );
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(exit::ROLLBACK_INCOMPLETE), "{err}");
        assert!(err.contains("rollback incomplete"), "{err}");
        assert!(!err.contains("rolled back: tracefs is as it was"), "{err}");
        let kept = err
            .lines()
            .find_map(|l| l.trim().strip_prefix("= journal kept: "))
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("names the kept journal: {err}"));
        assert!(kept.exists(), "the journal survives: {}", kept.display());
        assert!(
            lock(&kept, false).is_some(),
            "nobody holds the kept journal (its run and guard are gone)"
        );
        assert!(
            tracefs()
                .instances()
                .iter()
                .any(|i| i.starts_with("trace-recipe-teardown")),
            "the undo that failed (rmdir) left the instance: tracefs is really not clean"
        );
        let s = text(&trace_recipe(&["status"]).stdout);
        assert!(s.contains("journal of a dead run"), "{s}");
        reset_finishes(&before, &kept);
        guard.assert_unchanged();
    }

    #[test]
    fn an_undo_failing_in_the_guard_and_in_reset_keeps_the_journal_until_reset_finishes() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(dir.path(), "r.toml", RECIPE);
        let before = Snapshot::take(&tracefs());
        // The run SIGKILLs itself at step 2: its guard replays the journal (with the
        // environment it inherited) and fails undo 1.
        let mut child = spawn_run(
            &recipe,
            &dir.path().join("out"),
            &[
                (KILL_STEP_ENV, "2".to_string()),
                (FAIL_UNDO_ENV, "1".to_string()),
            ],
            &["sleep", "5"],
        );
        let pid = child.id();
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        let journal = journal_of(pid);
        // The guard may not have taken the journal over yet when the run is seen
        // dead: wait until the guard process of this run is gone, then the journal
        // must still be there (its undo failed) and nobody may hold it.
        assert!(
            within(Duration::from_secs(5), || !guard_alive(pid)),
            "the guard of run {pid} ended"
        );
        assert!(
            journal.exists() && lock(&journal, false).is_some(),
            "the guard kept {} after its undo failed",
            journal.display()
        );
        assert!(
            tracefs()
                .instances()
                .iter()
                .any(|i| i.starts_with("trace-recipe-teardown")),
            "the undo the guard failed (rmdir) left the instance"
        );
        // `reset` with the same failing undo keeps it too, and says so.
        let r = Command::new(bin())
            .arg("reset")
            .env(FAIL_UNDO_ENV, "1")
            .output()
            .unwrap();
        assert_eq!(r.status.code(), Some(exit::FAILED), "{}", text(&r.stderr));
        assert!(
            text(&r.stderr).contains("undo failed"),
            "{}",
            text(&r.stderr)
        );
        assert!(journal.exists(), "a failing sweep keeps the journal");
        reset_finishes(&before, &journal);
        guard.assert_unchanged();
    }

    #[test]
    fn a_journal_write_failure_stops_the_apply_and_leaves_tracefs_clean() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(dir.path(), "r.toml", RECIPE);
        let o = run_with(
            &recipe,
            &dir.path().join("out"),
            &[(FAIL_JOURNAL_ENV, "3")],
            &["true"],
        );
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(exit::FAILED), "{err}");
        assert!(err.contains("injected journal write failure"), "{err}");
        assert!(err.contains("tracefs is as it was"), "{err}");
        assert!(list(Path::new(JOURNAL_DIR)).is_empty(), "no journal left");
        guard.assert_unchanged();
    }

    #[test]
    fn a_run_killed_mid_recording_takes_its_workloads_process_group_with_it() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(dir.path(), "r.toml", RECIPE);
        let before = Snapshot::take(&tracefs());
        let workload = kill_run_mid_recording(&recipe, &dir.path().join("out"));
        assert!(
            within(Duration::from_secs(2), || !group_alive(workload)),
            "no process of the workload's group {workload} remains within 2 s"
        );
        assert!(
            settles_to(&before, Duration::from_secs(1)),
            "tracefs clean:\n{}",
            before.diff(&Snapshot::take(&tracefs())).join("\n")
        );
        guard.assert_unchanged();
    }

    /// With the run and its guard both SIGKILLed, nobody ended the workload:
    /// `reset` does, as the guard would have, and says so.
    #[test]
    fn reset_ends_the_workload_of_a_run_whose_guard_died_too() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(dir.path(), "r.toml", RECIPE);
        let workload = kill_mid_recording(&recipe, &dir.path().join("out"), true);
        std::thread::sleep(Duration::from_millis(300));
        let orphaned = group_alive(workload);
        let r = trace_recipe(&["reset"]);
        let out = format!("{}{}", text(&r.stdout), text(&r.stderr));
        let ended = within(Duration::from_secs(3), || !group_alive(workload));
        if !ended {
            // SAFETY: kill(2) on the test's own orphaned workload group.
            unsafe { libc::kill(-(workload as i32), libc::SIGKILL) };
        }
        assert!(orphaned, "the workload outlived its run and guard");
        assert!(r.status.success(), "{out}");
        assert!(ended, "reset ended the workload's group {workload}: {out}");
        assert!(
            out.contains("ended the workload of dead run")
                && out.contains(&format!("pid {workload}")),
            "reset says so: {out}"
        );
        guard.assert_unchanged();
    }

    #[test]
    fn on_abort_leave_keeps_the_workload_running_and_status_names_it() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(
            dir.path(),
            "r.toml",
            &format!("{RECIPE}[scope]\non_abort = \"leave\"\n"),
        );
        let before = Snapshot::take(&tracefs());
        let workload = kill_run_mid_recording(&recipe, &dir.path().join("out"));
        assert!(
            settles_to(&before, Duration::from_secs(1)),
            "tracefs clean:\n{}",
            before.diff(&Snapshot::take(&tracefs())).join("\n")
        );
        let alive = group_alive(workload);
        let s = text(&trace_recipe(&["status"]).stdout);
        // SAFETY: kill(2) on the test's own orphaned workload group.
        unsafe { libc::kill(-(workload as i32), libc::SIGKILL) };
        assert!(alive, "the workload was left running");
        assert!(
            s.contains(&format!("still running: pid {workload}")),
            "status names the workload: {s}"
        );
        assert!(within(Duration::from_secs(2), || !group_alive(workload)));
        let r = trace_recipe(&["reset"]);
        assert!(r.status.success(), "{}", text(&r.stderr));
        assert!(
            trace_recipe::workload::WorkloadRecord::list(Path::new(JOURNAL_DIR)).is_empty(),
            "reset removes the record of an ended workload"
        );
        guard.assert_unchanged();
    }

    #[test]
    fn a_second_ctrl_c_says_rollback_is_in_progress_and_the_whole_workload_group_ends() {
        use std::io::{BufRead, Read};
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(dir.path(), "r.toml", RECIPE);
        let out = dir.path().join("out");
        // The shell's background child stays in the workload's process group; both
        // ignore SIGTERM, so the teardown waits its grace period before SIGKILL,
        // and the second SIGINT surely arrives while it is under way.
        let mut child = Command::new(bin())
            .args(crate::common::run_args(
                &recipe,
                &out,
                &[],
                &["sh", "-c", "trap '' TERM; sleep 50 & sleep 50"],
            ))
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let (mut stderr, mut seen) = crate::common::until_recording(&mut child);
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        while !seen.contains("stopped: signal SIGINT") {
            let mut line = String::new();
            if stderr.read_line(&mut line).unwrap() == 0 {
                break;
            }
            seen.push_str(&line);
        }
        // SAFETY: kill(2) on our own child, during its teardown.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let status = child.wait().unwrap();
        stderr.read_to_string(&mut seen).unwrap();
        assert_eq!(status.code(), Some(130), "{seen}");
        assert!(seen.contains("already stopping"), "{seen}");
        assert!(seen.contains("rolled back: tracefs is as it was"), "{seen}");
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        let pgid = report["workload"]["pid"]
            .as_u64()
            .unwrap_or_else(|| panic!("report names the workload: {report}"))
            as u32;
        // Ended before the run exited; only their reaping by init may lag.
        assert!(
            within(Duration::from_secs(2), || !group_alive(pgid)),
            "the run ended every process of the workload's group {pgid}"
        );
        guard.assert_unchanged();
    }

    /// A run SIGKILLed at each named point ends clean: by its guard, or, when the
    /// guard is killed too in the middle of its replay, by `reset`, which the
    /// journal left behind (and `status`) call for.
    #[test]
    fn a_kill_at_each_named_point_ends_clean_by_the_guard_or_by_reset() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(dir.path(), "r.toml", RECIPE);
        let before = Snapshot::take(&tracefs());
        let points = [
            ("recording", false),
            ("drain", false),
            ("undo:1", false),
            ("undo:3", false),
            ("recording,guard-undo:2", true),
            ("drain,guard-undo:1", true),
        ];
        let (mut by_guard, mut by_reset, mut clean) = (0, 0, 0);
        let mut failures = Vec::new();
        for (i, (point, needs_reset)) in points.iter().enumerate() {
            let mut child = spawn_run(
                &recipe,
                &dir.path().join(format!("out-{i}")),
                &[(KILL_AT_ENV, point.to_string())],
                &["true"],
            );
            let pid = child.id();
            let status = child.wait().unwrap();
            let killed = std::os::unix::process::ExitStatusExt::signal(&status) == Some(9);
            let guard_gone = within(Duration::from_secs(5), || !guard_alive(pid));
            let journal = journal_of(pid);
            let kept = journal.exists();
            let ok = if *needs_reset {
                let s = text(&trace_recipe(&["status"]).stdout);
                let r = trace_recipe(&["reset"]);
                by_reset += 1;
                kept && s.contains("journal of a dead run")
                    && r.status.code() == Some(exit::OK)
                    && settles_to(&before, Duration::from_secs(2))
            } else {
                by_guard += 1;
                !kept && settles_to(&before, Duration::from_secs(2))
            };
            if killed && guard_gone && ok {
                clean += 1;
            } else {
                failures.push(format!(
                "{point}: killed {killed}, guard gone {guard_gone}, journal kept {kept}, clean {ok}: {}",
                before.diff(&Snapshot::take(&tracefs())).join("; ")
            ));
                let _ = trace_recipe(&["reset"]);
            }
        }
        println!(
            "FIGURE named kill points clean: {clean}/{} ({by_guard} by the guard alone, {by_reset} needing reset after the guard was killed mid-replay)",
            points.len()
        );
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        guard.assert_unchanged();
    }

    /// A failure after apply (turning tracing on, starting the recorder, draining
    /// it, saving the tables) goes through the one teardown: rolled back, journal
    /// deleted, exit 3 with the stage named.
    #[test]
    fn a_failure_at_each_later_stage_rolls_back_and_exits_3() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(dir.path(), "r.toml", RECIPE);
        let before = Snapshot::take(&tracefs());
        let points = ["tracing_on", "recorder", "drain", "tables"];
        let mut failures = Vec::new();
        for (i, point) in points.iter().enumerate() {
            let o = run_with(
                &recipe,
                &dir.path().join(format!("out-{i}")),
                &[(FAIL_AT_ENV, point)],
                &["true"],
            );
            let err = text(&o.stderr);
            let named = err.contains(&format!("injected failure at `{point}`"));
            let rolled_back = err.contains("tracefs is as it was");
            let code = o.status.code();
            let clean =
                list(Path::new(JOURNAL_DIR)).is_empty() && Snapshot::take(&tracefs()) == before;
            if !(code == Some(exit::FAILED) && named && rolled_back && clean) {
                failures.push(format!(
                "{point}: exit {code:?}, named {named}, rolled back {rolled_back}, clean {clean}: {err}"
            ));
                let _ = trace_recipe(&["reset"]);
            }
        }
        println!(
            "FIGURE later-stage failures rolled back: {}/{}",
            points.len() - failures.len(),
            points.len()
        );
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        guard.assert_unchanged();
    }
}
