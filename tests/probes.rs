//! Probes and the features this machine's kernel has: uprobes on a binary the test
//! builds (recorded, filtered, rolled back however the run ends), probe groups of
//! dead runs removed by `reset` and nothing else, features this kernel lacks
//! refused before anything is written, and a traceoff trigger ending the run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{
    Scenario, TracefsGuard, assert_exit, event_lines, repo, text, trace_cmd_report, trace_recipe,
    tracefs,
};

/// Builds a small C program with a function `tr_work(x) = 2x + 1` called for
/// x = 1..=5 (with no arguments), and returns its path.
pub fn build_target(dir: &Path) -> PathBuf {
    let src = dir.join("target.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n\
         __attribute__((noinline)) int tr_work(int x) { __asm__ volatile(\"\"); return x * 2 + 1; }\n\
         int main(int argc, char **argv) { int s = 0; for (int i = 0; i < 5; i++) s += tr_work(i + argc); printf(\"%d\\n\", s); return 0; }\n",
    )
    .unwrap();
    let exe = dir.join("uprobe-target");
    let out = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("a C compiler (cc) is installed");
    assert!(out.status.success(), "cc failed: {}", text(&out.stderr));
    exe
}

fn uprobe_recipe(exe: &Path) -> String {
    format!(
        r#"name = "uprobe-test"
description = "arguments and return values of tr_work"
[[uprobes]]
event = "work"
kind = "uprobe"
target = "{exe}:tr_work"
fetch = {{ x = "%di:s32" }}
[[uprobes]]
event = "work_ret"
kind = "uretprobe"
target = "{exe}:tr_work"
fetch = {{ ret = "$retval:s32" }}
filter = "ret > 5"
[[events]]
name = "uprobes:work"
filter = "x > 1"
"#,
        exe = exe.display()
    )
}

/// Runs `recipe` once per step of its plan, SIGKILLing the run at that step, and
/// asserts that the guard rolls every prefix back.
fn sigkill_at_every_step(recipe: &Path) {
    let (_, _, failures) =
        crate::reliability::sigkill_at_every_step(recipe, Duration::from_secs(2));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A recipe whose tracer this kernel offers only at the top level (`blk` here:
/// instances offer `function nop`), with a filter and the workload's pid scope.
const TOP_LEVEL: &str = r#"name = "top-level"
description = "t"
[tracer]
name = "blk"
[[events]]
name = "sched:sched_process_exec"
filter = 'comm != "no-such-comm"'
"#;

fn top_level_tracer_available() -> bool {
    let t = tracefs();
    let top = t.read("available_tracers").unwrap_or_default();
    let ok = top.split_whitespace().any(|w| w == "blk");
    if !ok {
        eprintln!(
            "!!!!!!!! this kernel has no `blk` tracer: the top-level tracer test cannot run here"
        );
        assert!(!crate::common::in_ci(), "no blk tracer");
    }
    ok
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn uprobe_and_uretprobe_record_arguments_and_filtered_return_values() {
        let sc = Scenario::new("");
        let exe = build_target(sc.dir());
        sc.set_recipe(&uprobe_recipe(&exe));
        let out = sc.out();
        sc.run(&[], &[exe.to_str().unwrap()], 0);

        let listing = trace_cmd_report(&out.join("trace.dat"));
        let lines = event_lines(&listing);
        let args: Vec<&str> = lines
            .iter()
            .filter(|l| l.contains(" work: "))
            .filter_map(|l| l.split("x=").nth(1))
            .collect();
        assert_eq!(
            args,
            ["2", "3", "4", "5"],
            "the [[events]] filter keeps x > 1:\n{listing}"
        );
        let rets: Vec<&str> = lines
            .iter()
            .filter(|l| l.contains(" work_ret: "))
            .filter_map(|l| l.split("ret=").nth(1))
            .collect();
        assert_eq!(
            rets,
            ["7", "9", "11"],
            "the filter keeps ret > 5:\n{listing}"
        );

        // Our reader agrees, and the report names the events as the recipe does
        // (`uprobes:NAME`), the same on every run whatever the run's probe group.
        let ours = trace_recipe(&["report", out.join("trace.dat").to_str().unwrap()]);
        assert_eq!(text(&ours.stdout).matches(" work: ").count(), 4);
        let report = sc.report();
        assert_eq!(report["events"]["uprobes:work_ret"], 3, "{report:#}");
        assert_eq!(report["events"]["uprobes:work"], 4, "{report:#}");
        sc.finish();
    }

    #[test]
    fn sigkill_at_every_step_of_a_probe_plan_is_rolled_back_by_the_guard() {
        let sc = Scenario::new("");
        let exe = build_target(sc.dir());
        sc.set_recipe(&uprobe_recipe(&exe));
        let plan = text(&trace_recipe(&["check", "--plan", sc.recipe.to_str().unwrap()]).stdout);
        assert!(plan.contains(">> uprobe_events"), "{plan}");
        assert!(plan.contains("(undo: echo \"-:trace_recipe_"), "{plan}");
        sigkill_at_every_step(&sc.recipe);
        sc.finish();
    }

    #[test]
    fn a_tracer_offered_only_at_the_top_level_runs_there_and_every_file_is_restored() {
        let mut sc = Scenario::new(TOP_LEVEL);
        if !top_level_tracer_available() {
            return;
        }
        let check = text(&trace_recipe(&["check", sc.recipe.to_str().unwrap()]).stdout);
        assert!(check.contains("only at the top level"), "{check}");
        let out = sc.out();
        let o = sc.run(&[], &["sh", "-c", "exec /bin/true"], 0);
        assert!(
            text(&o.stderr).contains("to the top level"),
            "{}",
            text(&o.stderr)
        );
        let listing = trace_cmd_report(&out.join("trace.dat"));
        assert!(
            event_lines(&listing)
                .iter()
                .any(|l| l.contains("sched_process_exec") && l.contains("/bin/true")),
            "{listing}"
        );
        // A top-level buffer still unallocated since boot (a fresh machine) is
        // allocated by this run, which nothing can undo: the run must have declared
        // exactly that, and the snapshot then allows exactly that.
        let declared = sc.guard.allow_declared(&out.join("report.json"));
        let unallocated = sc
            .guard
            .before("buffer_size_kb")
            .is_some_and(|b| b.contains("expanded"));
        assert_eq!(
            declared.len(),
            usize::from(unallocated),
            "declared {declared:?} with buffer_size_kb {:?} before the run",
            sc.guard.before("buffer_size_kb")
        );
        if unallocated {
            assert!(
                text(&o.stderr)
                    .contains("irreversible: this run allocates the top-level ring buffer")
            );
            assert!(
                check.contains("irreversible: a run of this recipe allocates"),
                "{check}"
            );
        }
        // The guard's snapshot covers every top-level file the run wrote.
        sc.finish();
    }

    #[test]
    fn sigkill_at_every_step_of_a_top_level_plan_restores_every_before_image() {
        let sc = Scenario::new(TOP_LEVEL);
        if !top_level_tracer_available() {
            return;
        }
        sigkill_at_every_step(&sc.recipe);
        sc.finish();
    }

    #[test]
    fn reset_removes_probes_of_dead_runs_and_nothing_else() {
        let guard = TracefsGuard::acquire();
        let t = tracefs();
        let dir = tempfile::tempdir().unwrap();
        let exe = build_target(dir.path());
        // A pid that is no live process: its group belongs to a dead run.
        let dead = "trace_recipe_4194303";
        let ours = format!("p:{dead}/left {}:0x100", exe.display());
        let theirs = format!("p:someone_else/kept {}:0x100", exe.display());
        for line in [&ours, &theirs] {
            trace_recipe::tracefs::Instance::top(&t)
                .write(
                    "uprobe_events",
                    line,
                    trace_recipe::tracefs::WriteMode::Append,
                )
                .unwrap();
        }
        let status = text(&trace_recipe(&["status"]).stdout);
        assert!(
            status.contains(&format!(
                "left behind by a trace-recipe run: probe {dead}/left"
            )),
            "{status}"
        );
        let reset = trace_recipe(&["reset"]);
        assert_exit(&reset, 0);
        let defs = t.read("uprobe_events").unwrap();
        let kept = defs.contains("someone_else/kept");
        trace_recipe::tracefs::Instance::top(&t)
            .write(
                "uprobe_events",
                "-:someone_else/kept",
                trace_recipe::tracefs::WriteMode::Append,
            )
            .unwrap();
        assert!(!defs.contains(dead), "reset must remove {dead}: {defs}");
        assert!(kept, "reset must keep probes it does not own: {defs}");
        guard.assert_unchanged();
    }

    #[test]
    fn features_this_kernel_lacks_are_refused_before_anything_is_written() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = repo().join("tests/bad-recipes/kernel-lacks.toml");
        let out = dir.path().join("out");
        let o = crate::common::run_recipe(&recipe, &out, &[]);
        let err = text(&o.stderr);
        assert_exit(&o, 1);
        assert!(err.contains("error (this kernel)"), "{err}");
        assert!(err.contains("nothing was written to tracefs"), "{err}");
        assert!(!out.exists());
        guard.assert_unchanged();
    }

    #[test]
    fn a_traceoff_trigger_ends_the_run_with_on_traceoff() {
        let sc = Scenario::new(
            r#"name = "traceoff-stop"
description = "t"
duration = "60s"
[scope]
follow_forks = true
[[events]]
name = "sched:sched_process_exit"
[[triggers]]
event = "sched:sched_process_exit"
action = "traceoff"
if = 'comm == "sleep"'
count = 1
[stop]
on_traceoff = true
"#,
        );
        let out = sc.out();
        let started = std::time::Instant::now();
        let report = sc.run_ok(&["sh", "-c", "sleep 0.1; exec sleep 60"]);
        assert_eq!(report["stop_reason"], "traceoff (tracing_on dropped to 0)");
        // The run ended at the first sleep's exit, not with the 60 s one.
        assert!(started.elapsed() < Duration::from_secs(50));
        let listing = trace_cmd_report(&out.join("trace.dat"));
        assert!(
            event_lines(&listing)
                .iter()
                .any(|l| l.contains("comm=sleep")),
            "{listing}"
        );
        sc.finish();
    }
}
