//! `status` and `reset`: what runs left behind is named and removed; what others
//! own is never touched.

use crate::common::{TracefsGuard, text, trace_recipe, tracefs};

#[test]
fn reset_removes_only_instances_of_dead_runs() {
    let guard = TracefsGuard::acquire();
    let t = tracefs();
    // A pid above pid_max can never be alive: this instance is "left behind".
    let stale = "instances/trace-recipe-stale-4194999";
    let foreign = "instances/not-trace-recipe-test";
    t.mkdir(stale).unwrap();
    t.mkdir(foreign).unwrap();
    t.write(
        &format!("{stale}/events/sched/sched_switch/enable"),
        "1",
        trace_recipe::tracefs::WriteMode::Replace,
        stale,
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
    assert!(!t.exists(stale), "reset must remove the stale instance");
    assert!(
        t.exists(foreign),
        "reset must not touch other tools' instances"
    );
    t.rmdir(foreign).unwrap();

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
