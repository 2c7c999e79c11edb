//! Rollback holds however a run ends: killed with SIGKILL at every step of its
//! plan, killed or terminated at random moments (apply, recording, rollback), and
//! with many runs at once. Figures are printed as `FIGURE name: clean/total` for
//! scripts/reliability.sh; `TRACE_RECIPE_TRIALS` and `TRACE_RECIPE_ROUNDS` scale
//! the randomized and concurrent tests (defaults keep `scripts/test` quick).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::snapshot::Snapshot;

use crate::common::{Scenario, bin, run_args, text, trace_recipe, tracefs};

/// The recipe with every kind of step this kernel supports (see tests/run.rs).
use crate::run::FULL as RECIPE;

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Waits up to `limit` for the run's rollback to be over, then checks that
/// tracefs equals `before`; true when it does.
///
/// The rollback is over when no instance of ours and no journal is left (a
/// run or its guard deletes its journal after its last undo): a cheap poll,
/// so `limit` bounds the rollback and not the snapshot that judges it. Under
/// a loaded suite (two lab guests beside the tests) one snapshot of
/// thousands of files can take longer than the rollback: a snapshot begun
/// mid-rollback once ran past the deadline, and the test said "not rolled
/// back within 1s" with nothing left in the diff taken right after. Once
/// the rollback is over, tracefs must equal `before` by a snapshot begun
/// before the deadline, or by the first one begun after it.
pub(crate) fn settles_to(before: &Snapshot, limit: Duration) -> bool {
    let t = tracefs();
    let deadline = Instant::now() + limit;
    let journals = Path::new(trace_recipe::apply::journal::JOURNAL_DIR);
    loop {
        let ours_gone = !t.instances().iter().any(|i| i.starts_with("trace-recipe-"))
            && trace_recipe::apply::journal::list(journals).is_empty();
        if ours_gone {
            break;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    loop {
        let started = Instant::now();
        if Snapshot::take(&t) == *before {
            return true;
        }
        if started >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn spawn_run(recipe: &Path, out: &Path, env: &[(&str, String)], cmd: &[&str]) -> Child {
    let mut c = Command::new(bin());
    c.args(run_args(recipe, out, &[], cmd));
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The guard of run `pid`, found by its command line.
fn guard_of(pid: u32) -> Option<u32> {
    let needle = format!("run-{pid}.journal");
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok())
        .find_map(|e| {
            let p: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd);
            (cmd.contains("__guard") && cmd.contains(&needle)).then_some(p)
        })
}

/// Runs `recipe` once per step of its plan (with the workload's set_event_pid
/// step), SIGKILLing the run at that step, and counts the steps after which
/// tracefs is back as it was within `limit`. Returns `(clean, steps, failures)`;
/// callers print the figure before they assert, so a failing step shows in it.
pub(crate) fn sigkill_at_every_step(recipe: &Path, limit: Duration) -> (usize, usize, Vec<String>) {
    // `check --plan` shows the workload's set_event_pid step only when the recipe
    // names its workload; the `-- sleep 5` below adds it otherwise.
    let plan = text(&trace_recipe(&["check", "--plan", recipe.to_str().unwrap()]).stdout);
    let steps = crate::common::plan_len(recipe) + usize::from(!plan.contains("/set_event_pid"));
    let before = Snapshot::take(&tracefs());
    let dir = recipe.parent().unwrap();
    let mut failures = Vec::new();
    for step in 1..=steps {
        let out = dir.join(format!("out{step}"));
        let mut child = spawn_run(
            recipe,
            &out,
            &[(trace_recipe::fault::KILL_STEP_ENV, step.to_string())],
            &["sleep", "5"],
        );
        let status = child.wait().unwrap();
        if std::os::unix::process::ExitStatusExt::signal(&status) != Some(9) {
            failures.push(format!(
                "step {step}: the run did not kill itself ({status})"
            ));
        }
        if !settles_to(&before, limit) {
            failures.push(format!(
                "step {step}: not rolled back within {limit:?}:\n{}",
                before.diff(&Snapshot::take(&tracefs())).join("\n")
            ));
            // Leave tracefs clean for the next step, and for the suite.
            trace_recipe(&["reset"]);
        }
    }
    let failed_steps = (1..=steps)
        .filter(|s| {
            failures
                .iter()
                .any(|f| f.starts_with(&format!("step {s}:")))
        })
        .count();
    (steps - failed_steps, steps, failures)
}

/// Where a run was when a trial's signal reached it, read from the progress
/// lines the run had written to stderr by then.
fn phase_of(stderr: &str) -> &'static str {
    if stderr.contains("rolled back") {
        "writing output"
    } else if stderr.contains("stopped:") {
        "drain and rollback"
    } else if stderr.contains("recording until") {
        "recording"
    } else if stderr.contains("applied ") {
        "armed, before recording"
    } else {
        "validate and apply"
    }
}

/// One random trial's outcome, for the per-phase figures.
struct Trial {
    phase: &'static str,
    exit: String,
    journal_existed: bool,
    cleaned_by: &'static str,
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn sigkill_at_every_step_is_rolled_back_by_the_guard_within_a_second() {
        let sc = Scenario::new(RECIPE);
        let (clean, steps, failures) = sigkill_at_every_step(&sc.recipe, Duration::from_secs(1));
        eprintln!("FIGURE steps killed and clean: {clean}/{steps}");
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        sc.finish();
    }

    #[test]
    fn random_kills_during_apply_recording_and_rollback_always_end_clean() {
        let sc = Scenario::new(RECIPE);
        let (dir, recipe) = (sc.dir(), &sc.recipe);
        let trials = env_count("TRACE_RECIPE_TRIALS", 12);
        let before = Snapshot::take(&tracefs());
        let mut rng = fastrand::Rng::new();
        let mut results: Vec<Trial> = Vec::new();
        let mut failures: Vec<String> = Vec::new();
        let journal_dir = Path::new(trace_recipe::apply::journal::JOURNAL_DIR);
        for trial in 0..trials {
            let out = dir.join(format!("out{trial}"));
            let log = dir.join(format!("stderr{trial}"));
            let mut child = Command::new(bin())
                .args(run_args(recipe, &out, &[], &["sh", "-c", "sleep 0.05"]))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_micros(rng.u64(0..250_000)));
            let kind = rng.u8(0..10);
            let sig = if kind < 6 {
                libc::SIGKILL
            } else {
                libc::SIGTERM
            };
            let guard_too = kind == 0;
            let guard_pid = if guard_too {
                guard_of(child.id())
            } else {
                None
            };
            let journal = trace_recipe::apply::journal::path_for(journal_dir, child.id());
            let journal_existed = journal.exists();
            let phase = phase_of(&std::fs::read_to_string(&log).unwrap_or_default());
            // SAFETY: kill(2) on our own child and on its guard.
            unsafe {
                libc::kill(child.id() as i32, sig);
                if let Some(g) = guard_pid {
                    libc::kill(g as i32, libc::SIGKILL);
                }
            }
            let status = child.wait().unwrap();
            let exit = match std::os::unix::process::ExitStatusExt::signal(&status) {
                Some(s) => format!("signal {s}"),
                None => format!("exit {}", status.code().unwrap_or(-1)),
            };
            let what = format!(
                "trial {trial} (signal {sig} in phase `{phase}`, guard killed: {guard_too}, {exit})"
            );
            // The guard rolls back what the killed run left: judge once it
            // has exited (on a loaded machine that took over a second), not
            // at a fixed time. The bound only keeps a hung guard from
            // hanging the test.
            if let Some(g) = guard_of(child.id()) {
                let deadline = Instant::now() + Duration::from_secs(60);
                while Path::new(&format!("/proc/{g}")).exists() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            let cleaned_by = if settles_to(&before, Duration::from_secs(1)) {
                if journal_existed {
                    "the run or its guard"
                } else {
                    "nothing to undo"
                }
            } else {
                let left = before.diff(&Snapshot::take(&tracefs()));
                let r = trace_recipe(&["reset"]);
                if !settles_to(&before, Duration::from_secs(1)) {
                    failures.push(format!(
                        "{what}: not clean even after reset:\n{}\n{}",
                        text(&r.stdout),
                        before.diff(&Snapshot::take(&tracefs())).join("\n")
                    ));
                } else if guard_pid.is_none() {
                    failures.push(format!(
                    "{what}: only a killed guard may leave work for reset; left: {left:?}, reset said: {}",
                    text(&r.stdout)
                ));
                }
                "reset, after the guard was killed too"
            };
            results.push(Trial {
                phase,
                exit,
                journal_existed,
                cleaned_by,
            });
        }
        let clean = trials - failures.len();
        eprintln!("FIGURE kill trials clean: {clean}/{trials}");
        let mut by: std::collections::BTreeMap<(&str, &str), (usize, usize)> = Default::default();
        for t in &results {
            let e = by.entry((t.phase, t.cleaned_by)).or_default();
            e.0 += 1;
            e.1 += usize::from(t.journal_existed);
        }
        for ((phase, cleaned_by), (n, journals)) in &by {
            eprintln!(
                "FIGURE   kill trials in phase `{phase}`, cleaned by {cleaned_by}: {n} ({journals} with a journal at the kill)"
            );
        }
        let signalled = results
            .iter()
            .filter(|t| t.exit.starts_with("signal"))
            .count();
        eprintln!(
            "FIGURE   kill trials whose run died by the signal: {signalled}/{trials} (the rest rolled back and exited)"
        );
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        sc.finish();
    }

    #[test]
    fn eight_runs_at_once_each_record_their_own_workload_and_leave_tracefs_clean() {
        let sc = Scenario::new(
            "name = \"concurrent\"\nduration = \"30s\"\n[scope]\nfollow_forks = true\n[[events]]\nname = \"sched:sched_process_exec\"\n",
        );
        let (dir, recipe) = (sc.dir(), &sc.recipe);
        let rounds = env_count("TRACE_RECIPE_ROUNDS", 1);
        let mut clean = 0;
        let mut failures: Vec<String> = Vec::new();
        for round in 0..rounds {
            let runs: Vec<(std::path::PathBuf, String, Child)> = (0..8)
                .map(|i| {
                    let marker = format!("conc-{round}-{i}-{}", fastrand::u64(..));
                    let script = dir.join(&marker);
                    std::fs::write(&script, "#!/bin/sh\nsleep 0.2\n").unwrap();
                    std::fs::set_permissions(
                        &script,
                        std::os::unix::fs::PermissionsExt::from_mode(0o755),
                    )
                    .unwrap();
                    let out = dir.join(format!("out-{round}-{i}"));
                    let child = Command::new(bin())
                        .args(run_args(recipe, &out, &[], &[script.to_str().unwrap()]))
                        .stdout(Stdio::null())
                        .stderr(Stdio::piped())
                        .spawn()
                        .unwrap();
                    (out, marker, child)
                })
                .collect();
            let mut ok = 0;
            let markers: Vec<String> = runs.iter().map(|r| r.1.clone()).collect();
            for (out, marker, child) in runs {
                let o = child.wait_with_output().unwrap();
                if !o.status.success() {
                    failures.push(format!("run {marker} failed: {}", text(&o.stderr)));
                    continue;
                }
                let listing = crate::common::trace_cmd_report(&out.join("trace.dat"));
                if !listing.contains(&marker) {
                    failures.push(format!(
                        "run {marker} did not record its own exec:\n{listing}"
                    ));
                    continue;
                }
                if let Some(other) = markers
                    .iter()
                    .find(|m| **m != marker && listing.contains(m.as_str()))
                {
                    failures.push(format!(
                        "run {marker} recorded another run's workload {other}"
                    ));
                    continue;
                }
                ok += 1;
            }
            clean += ok;
        }
        eprintln!("FIGURE concurrent runs clean: {clean}/{}", rounds * 8);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        sc.finish();
    }
}
