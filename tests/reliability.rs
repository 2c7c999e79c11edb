//! Rollback holds however a run ends: killed with SIGKILL at every step of its
//! plan, killed or terminated at random moments (apply, recording, rollback), and
//! with many runs at once. Figures are printed as `FIGURE name: clean/total` for
//! scripts/reliability.sh; `TRACE_RECIPE_TRIALS` and `TRACE_RECIPE_ROUNDS` scale
//! the randomized and concurrent tests (defaults keep `scripts/test` quick).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use trace_recipe::status::Snapshot;

use crate::common::{TracefsGuard, bin, text, trace_recipe, tracefs, write_recipe};

/// The recipe with every kind of step this kernel supports (see tests/run.rs).
use crate::run::FULL as RECIPE;

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Waits up to `limit` for tracefs to equal `before`; true when it does.
pub(crate) fn settles_to(before: &Snapshot, limit: Duration) -> bool {
    let t = tracefs();
    let deadline = Instant::now() + limit;
    loop {
        let ours_gone = !t.instances().iter().any(|i| i.starts_with("trace-recipe-"))
            && trace_recipe::apply::journal::list(Path::new(
                trace_recipe::apply::journal::JOURNAL_DIR,
            ))
            .is_empty();
        if ours_gone && Snapshot::take(&t) == *before {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn spawn_run(recipe: &Path, out: &Path, env: &[(&str, String)], cmd: &[&str]) -> Child {
    let mut c = Command::new(bin());
    c.args([
        "run",
        recipe.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--",
    ])
    .args(cmd);
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
/// step), SIGKILLing the run at that step, and asserts that tracefs is
/// back as it was within `limit` each time. Returns the number of steps.
pub(crate) fn sigkill_at_every_step(recipe: &Path, limit: Duration) -> usize {
    // `check --plan` shows the workload's set_event_pid step only when the recipe
    // names its workload; the `-- sleep 5` below adds it otherwise.
    let plan = text(&trace_recipe(&["check", "--plan", recipe.to_str().unwrap()]).stdout);
    let steps = crate::common::plan_len(recipe) + usize::from(!plan.contains("/set_event_pid"));
    let before = Snapshot::take(&tracefs());
    let dir = recipe.parent().unwrap();
    for step in 1..=steps {
        let out = dir.join(format!("out{step}"));
        let mut child = spawn_run(
            recipe,
            &out,
            &[(trace_recipe::apply::KILL_STEP_ENV, step.to_string())],
            &["sleep", "5"],
        );
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "step {step}: the run must have killed itself"
        );
        assert!(
            settles_to(&before, limit),
            "step {step}: not rolled back within {limit:?}:\n{}",
            before.diff(&Snapshot::take(&tracefs())).join("\n")
        );
    }
    steps
}

#[test]
fn sigkill_at_every_step_is_rolled_back_by_the_guard_within_a_second() {
    let guard = TracefsGuard::acquire();
    let dir = tempfile::tempdir().unwrap();
    let recipe = write_recipe(dir.path(), "r.toml", RECIPE);
    let steps = sigkill_at_every_step(&recipe, Duration::from_secs(1));
    let clean = steps;
    eprintln!("FIGURE steps killed and clean: {clean}/{steps}");
    guard.assert_unchanged();
}

#[test]
fn random_kills_during_apply_recording_and_rollback_always_end_clean() {
    let guard = TracefsGuard::acquire();
    let dir = tempfile::tempdir().unwrap();
    let recipe = write_recipe(dir.path(), "r.toml", RECIPE);
    let trials = env_count("TRACE_RECIPE_TRIALS", 12);
    let before = Snapshot::take(&tracefs());
    let mut rng = fastrand::Rng::new();
    let (mut clean, mut by_reset) = (0, 0);
    for trial in 0..trials {
        let out = dir.path().join(format!("out{trial}"));
        let mut child = spawn_run(&recipe, &out, &[], &["sh", "-c", "sleep 0.05"]);
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
        // SAFETY: kill(2) on our own child and on its guard.
        unsafe {
            libc::kill(child.id() as i32, sig);
            if let Some(g) = guard_pid {
                libc::kill(g as i32, libc::SIGKILL);
            }
        }
        child.wait().unwrap();
        if settles_to(&before, Duration::from_secs(1)) {
            clean += 1;
        } else {
            let left = before.diff(&Snapshot::take(&tracefs()));
            let journals = trace_recipe::apply::journal::list(Path::new(
                trace_recipe::apply::journal::JOURNAL_DIR,
            ));
            let r = trace_recipe(&["reset"]);
            assert!(
                settles_to(&before, Duration::from_secs(1)),
                "trial {trial} (signal {sig}, guard killed: {guard_too}): not clean even after reset:\n{}\n{}",
                text(&r.stdout),
                before.diff(&Snapshot::take(&tracefs())).join("\n")
            );
            assert!(
                guard_pid.is_some(),
                "trial {trial} (signal {sig}): only a killed guard may leave work for reset; left: {left:?}, journals: {journals:?}, reset said: {}",
                text(&r.stdout)
            );
            by_reset += 1;
        }
    }
    eprintln!(
        "FIGURE kill trials clean: {}/{trials} ({clean} by the run or its guard, {by_reset} by reset after the guard was killed too)",
        clean + by_reset
    );
    guard.assert_unchanged();
}

#[test]
fn eight_runs_at_once_each_record_their_own_workload_and_leave_tracefs_clean() {
    let guard = TracefsGuard::acquire();
    let dir = tempfile::tempdir().unwrap();
    let recipe = write_recipe(
        dir.path(),
        "r.toml",
        "name = \"concurrent\"\nduration = \"30s\"\n[scope]\nfollow_forks = true\n[[events]]\nname = \"sched:sched_process_exec\"\n",
    );
    let rounds = env_count("TRACE_RECIPE_ROUNDS", 1);
    let mut clean = 0;
    for round in 0..rounds {
        let runs: Vec<(std::path::PathBuf, String, Child)> = (0..8)
            .map(|i| {
                let marker = format!("conc-{round}-{i}-{}", fastrand::u64(..));
                let script = dir.path().join(&marker);
                std::fs::write(&script, "#!/bin/sh\nsleep 0.2\n").unwrap();
                std::fs::set_permissions(
                    &script,
                    std::os::unix::fs::PermissionsExt::from_mode(0o755),
                )
                .unwrap();
                let out = dir.path().join(format!("out-{round}-{i}"));
                let child = Command::new(bin())
                    .args([
                        "run",
                        recipe.to_str().unwrap(),
                        "-o",
                        out.to_str().unwrap(),
                        "--",
                        script.to_str().unwrap(),
                    ])
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
            assert!(o.status.success(), "{}", text(&o.stderr));
            let listing = crate::common::trace_cmd_report(&out.join("trace.dat"));
            assert!(
                listing.contains(&marker),
                "run {marker} recorded its own exec:\n{listing}"
            );
            for other in markers.iter().filter(|m| **m != marker) {
                assert!(
                    !listing.contains(other.as_str()),
                    "run {marker} recorded another run's workload {other}"
                );
            }
            ok += 1;
        }
        guard.assert_unchanged();
        clean += ok;
    }
    eprintln!("FIGURE concurrent runs clean: {clean}/{}", rounds * 8);
}
