//! `status` and `reset`: what runs left behind is named and removed; what others
//! own is never touched.

use trace_recipe::tracefs::Instance;

use crate::common::{TracefsGuard, text, trace_recipe, tracefs};

/// Leaves what a run killed together with its guard leaves: an instance and the
/// journal that undoes it, owned by a pid that is not alive.
fn plant_dead_run(t: &trace_recipe::tracefs::Tracefs, pid: u32) -> std::path::PathBuf {
    use trace_recipe::apply::journal::{Header, JOURNAL_DIR, JOURNAL_VERSION, Undo};
    let instance = Instance::named(t, &format!("trace-recipe-swept-{pid}"));
    let dir = instance.dir();
    instance.create().unwrap();
    instance
        .write(
            "events/sched/sched_switch/enable",
            "1",
            trace_recipe::tracefs::WriteMode::Replace,
        )
        .unwrap();
    let header = Header {
        format: "trace-recipe-journal".into(),
        version: JOURNAL_VERSION,
        pid,
        start_time: 1,
        tracefs: t.root().to_path_buf(),
        instance: dir.clone(),
    };
    let undos = [
        Undo::Rmdir { dir: dir.clone() },
        Undo::Write {
            file: format!("{dir}/events/sched/sched_switch/enable"),
            value: "0".into(),
            append: false,
        },
    ];
    let mut body = serde_json::to_string(&header).unwrap() + "\n";
    for u in &undos {
        body += &(serde_json::to_string(u).unwrap() + "\n");
    }
    std::fs::create_dir_all(JOURNAL_DIR).unwrap();
    let path = std::path::Path::new(JOURNAL_DIR).join(format!("run-{pid}.journal"));
    std::fs::write(&path, body).unwrap();
    path
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn reset_removes_only_instances_of_dead_runs() {
        let guard = TracefsGuard::acquire();
        let t = tracefs();
        // A pid above pid_max can never be alive: this instance is "left behind".
        let stale = Instance::named(&t, "trace-recipe-stale-4194999");
        let foreign = Instance::named(&t, "not-trace-recipe-test");
        stale.create().unwrap();
        foreign.create().unwrap();
        stale
            .write(
                "events/sched/sched_switch/enable",
                "1",
                trace_recipe::tracefs::WriteMode::Replace,
            )
            .unwrap();

        let status = trace_recipe(&["status"]);
        let out = text(&status.stdout);
        assert!(
            out.contains("left behind by a trace-recipe run: instances/trace-recipe-stale-4194999"),
            "{out}"
        );
        assert!(
            out.contains("other instances (not ours, never touched): not-trace-recipe-test"),
            "{out}"
        );

        let reset = trace_recipe(&["reset"]);
        assert!(
            reset.status.success(),
            "{:?}\n{}{}",
            reset.status,
            text(&reset.stdout),
            text(&reset.stderr)
        );
        assert!(text(&reset.stdout).contains("removed instances/trace-recipe-stale-4194999"));
        assert!(!stale.exists(""), "reset must remove the stale instance");
        assert!(
            foreign.exists(""),
            "reset must not touch other tools' instances"
        );
        foreign.destroy().unwrap();

        let again = trace_recipe(&["status"]);
        assert!(text(&again.stdout).contains("nothing left behind by trace-recipe"));
        guard.assert_unchanged();
    }

    #[test]
    fn without_root_every_tracefs_command_says_what_is_missing() {
        let guard = TracefsGuard::acquire();
        let recipe = crate::common::repo().join("recipes/exec-tree.toml");
        for args in [
            vec!["run", recipe.to_str().unwrap()],
            vec!["check", recipe.to_str().unwrap()],
            vec!["reset"],
        ] {
            let out = std::process::Command::new("setpriv")
                .args([
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    "--inh-caps=-all",
                ])
                .arg(crate::common::bin())
                .args(&args)
                .output()
                .expect("setpriv (util-linux) runs the binary as nobody");
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
            assert!(
                err.contains("needs root") && err.contains("CAP_SYS_ADMIN") && err.contains("sudo"),
                "{args:?}: {err}"
            );
        }
        guard.assert_unchanged();
    }

    #[test]
    fn reset_all_returns_everything_to_boot_defaults() {
        use trace_recipe::tracefs::WriteMode::{Append, Replace};
        let guard = TracefsGuard::acquire();
        let t = tracefs();
        let top = Instance::top(&t);
        let (status_before, _) = trace_recipe::status::status(&t).unwrap();
        assert!(
            status_before.contains("top level: as after a clean boot"),
            "this test needs a tracefs at boot defaults to compare with:\n{status_before}"
        );
        // What other tools might leave: top-level filter, trigger, pid list, clock,
        // an enabled event, tracing off, and an instance of their own.
        top.write("events/sched/sched_switch/filter", "prev_pid == 1", Replace)
            .unwrap();
        top.write(
            "events/sched/sched_process_exit/trigger",
            "traceoff:3 if prio > 0",
            Append,
        )
        .unwrap();
        top.write(
            "events/sched/sched_process_fork/trigger",
            "enable_event:sched:sched_wakeup",
            Append,
        )
        .unwrap();
        top.write("events/sched/sched_wakeup/enable", "1", Replace)
            .unwrap();
        top.write("set_event_pid", "1", Replace).unwrap();
        top.write("trace_clock", "mono", Replace).unwrap();
        top.write("tracing_on", "0", Replace).unwrap();
        let other = Instance::named(&t, "other-tool-reset-all");
        other.create().unwrap();
        other
            .write("events/sched/sched_switch/filter", "prev_pid == 2", Replace)
            .unwrap();
        let dirty = trace_recipe::status::status(&t).unwrap().0;
        assert!(
            dirty.contains("events/sched/sched_switch/filter: prev_pid == 1"),
            "{dirty}"
        );

        let out = trace_recipe(&["reset", "--all"]);
        assert!(
            out.status.success(),
            "{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        assert!(
            text(&out.stdout).contains("removed instances/other-tool-reset-all"),
            "{}",
            text(&out.stdout)
        );
        guard.assert_unchanged();
    }

    #[test]
    fn journals_of_runs_dead_with_their_guard_are_swept_by_reset_and_by_the_next_run() {
        let guard = TracefsGuard::acquire();
        let t = tracefs();
        let journal = plant_dead_run(&t, 4194001);
        let status = text(&trace_recipe(&["status"]).stdout);
        assert!(
            status.contains("journal of a dead run, not rolled back yet"),
            "{status}"
        );
        let out = trace_recipe(&["reset"]);
        assert!(
            text(&out.stdout).contains("rolled back 2 changes left by dead run 4194001"),
            "{}",
            text(&out.stdout)
        );
        assert!(!journal.exists() && !t.exists("instances/trace-recipe-swept-4194001"));
        guard.assert_unchanged();

        let journal = plant_dead_run(&t, 4194002);
        let dir = tempfile::tempdir().unwrap();
        let recipe = crate::common::write_recipe(
            dir.path(),
            "r.toml",
            "name = \"after-crash\"\n[[events]]\nname = \"sched:sched_process_exec\"\n",
        );
        let run = crate::common::run_recipe(&recipe, &dir.path().join("o"), &["true"]);
        assert!(run.status.success(), "{}", text(&run.stderr));
        assert!(
            text(&run.stderr).contains("rolled back 2 changes left by dead run 4194002"),
            "{}",
            text(&run.stderr)
        );
        assert!(!journal.exists());
        guard.assert_unchanged();
    }

    /// `reset` run while a run records must leave that run alone: its instance, its
    /// probe, its journal and its tracing all survive, and the run ends normally.
    #[test]
    fn reset_beside_a_live_run_leaves_it_alone() {
        use std::process::{Command, Stdio};
        let guard = TracefsGuard::acquire();
        let t = tracefs();
        let dir = tempfile::tempdir().unwrap();
        let exe = crate::probes::build_target(dir.path());
        let recipe = crate::common::write_recipe(
            dir.path(),
            "live.toml",
            &format!(
                "name = \"live\"\nduration = \"3s\"\n[scope]\nfollow_forks = true\n[[uprobes]]\nevent = \"work\"\nkind = \"uprobe\"\ntarget = \"{}:tr_work\"\n[[events]]\nname = \"sched:sched_process_exec\"\n[[events]]\nname = \"uprobes:work\"\n",
                exe.display()
            ),
        );
        let out = dir.path().join("out");
        let mut child = Command::new(crate::common::bin())
            .args(crate::common::run_args(
                &recipe,
                &out,
                &[],
                &["sh", "-c", &format!("sleep 1.5; {}", exe.display())],
            ))
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let (mut stderr, seen) = crate::common::until_recording(&mut child);
        let instance = format!("instances/trace-recipe-live-{}", child.id());
        let journal = trace_recipe::apply::journal::path_for(
            std::path::Path::new(trace_recipe::apply::journal::JOURNAL_DIR),
            child.id(),
        );
        assert!(t.exists(&instance), "{seen}");
        let reset = trace_recipe(&["reset"]);
        assert!(reset.status.success(), "{}", text(&reset.stderr));
        assert!(
            t.exists(&instance),
            "reset removed a live run's instance:\n{}",
            text(&reset.stdout)
        );
        assert_eq!(
            t.read(&format!("{instance}/tracing_on")).unwrap().trim(),
            "1"
        );
        assert!(
            t.read("uprobe_events").unwrap().contains("/work "),
            "reset removed a live run's probe: {}",
            t.read("uprobe_events").unwrap()
        );
        assert!(
            journal.is_file(),
            "reset removed a live run's journal ({})",
            journal.display()
        );
        let status = child.wait().unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
        assert_eq!(status.code(), Some(0), "{seen}{rest}");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
                .unwrap();
        assert!(
            report["events"]["uprobes:work"].as_u64() == Some(5),
            "the probe kept firing after reset: {report:#}"
        );
        guard.assert_unchanged();
    }
}
