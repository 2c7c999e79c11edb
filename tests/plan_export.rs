//! `check --plan --export sh`: the script applies the plan on this kernel and,
//! interrupted, undoes every step (tracefs snapshot unchanged).
//! `check --plan --export trace-cmd`: the command line printed for recipes in
//! recipes/ (that it runs is proved in the kernel lab,
//! scripts/check-export-trace-cmd.sh).

use std::io::BufRead;

use crate::common::{TracefsGuard, repo, text, trace_recipe, write_recipe};

fn interrupted(sig: i32, want: i32) {
    let dir = tempfile::tempdir().unwrap();
    let recipe = write_recipe(
        dir.path(),
        "e.toml",
        "name = \"exp\"\n[buffer]\nsize_kb = 256\nclock = \"mono\"\n[[events]]\nname = \"sched:sched_process_exec\"\nfilter = \"pid > 1\"\n[[triggers]]\nevent = \"sched:sched_process_exec\"\naction = \"stacktrace\"\n",
    );
    let guard = TracefsGuard::acquire();
    let out = trace_recipe(&[
        "check",
        "--plan",
        "--export",
        "sh",
        recipe.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let script = dir.path().join("plan.sh");
    std::fs::write(&script, &out.stdout).unwrap();
    let mut child = std::process::Command::new("sh")
        .arg(&script)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The script says when every step is applied; then it sleeps.
    let mut line = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // Seven steps, and the instance's copy_trace_marker where the kernel has
    // it (6.16+).
    let steps = if std::path::Path::new("/sys/kernel/tracing/options/copy_trace_marker").exists() {
        8
    } else {
        7
    };
    if !line.starts_with(&format!("applied {steps} steps")) {
        unsafe { libc::kill(child.id() as i32, sig) };
        let _ = child.wait();
        panic!("{line}");
    }
    let instances: Vec<_> = std::fs::read_dir("/sys/kernel/tracing/instances")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        instances.iter().any(|i| i.starts_with("trace-recipe-exp-")),
        "{instances:?}"
    );
    let trigger = std::fs::read_dir("/sys/kernel/tracing/instances")
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("trace-recipe-exp-"))
        .map(|p| {
            std::fs::read_to_string(p.join("events/sched/sched_process_exec/trigger")).unwrap()
        })
        .unwrap();
    assert!(trigger.starts_with("stacktrace"), "{trigger}");
    unsafe { libc::kill(child.id() as i32, sig) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(want));
    guard.assert_unchanged();
}

/// `check --plan --export trace-cmd` of a recipe in recipes/, with `extra` args.
fn trace_cmd_line(recipe: &str, extra: &[&str]) -> String {
    let path = repo().join("recipes").join(recipe);
    let mut args = vec!["check", "--plan", "--export", "trace-cmd"];
    args.extend_from_slice(extra);
    args.push(path.to_str().unwrap());
    let out = trace_recipe(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn trace_cmd_export_of_a_workload_recipe_records_its_events_around_the_command() {
    let t = trace_cmd_line("exec-tree.toml", &[]);
    let record = &t[t
        .find("trace-cmd record -B trace-recipe-exec-tree-")
        .expect(&t)..];
    assert!(
        record.ends_with(
            " \\\n  -e sched:sched_process_exec \\\n  -e sched:sched_process_fork \\\n  -e sched:sched_process_exit \\\n  -e syscalls:sys_enter_exit_group \\\n  -c \\\n  -F sh -c 'ls / > /dev/null; date > /dev/null'\n"
        ),
        "{t}"
    );
    assert!(
        t.contains("#   - duration = \"60s\": trace-cmd record ends when the command exits"),
        "{t}"
    );
    // A filter with a param, rendered.
    let t = trace_cmd_line("openat-failures.toml", &["--set", "errno=-2"]);
    assert!(
        t.contains("  -e syscalls:sys_exit_openat -f 'ret == -2' \\\n  sleep 10\n"),
        "{t}"
    );
}

#[test]
fn trace_cmd_export_offline_for_debian_6_12_defines_probes_and_names_what_it_lacks() {
    let facts = repo().join("tests/facts/debian-6.12.json.zst");
    let facts = facts.to_str().unwrap();
    let t = trace_cmd_line("kretprobe-returns.toml", &["--facts", facts]);
    let lines: Vec<&str> = t.lines().collect();
    let record = lines
        .iter()
        .position(|l| l.starts_with("trace-cmd record"))
        .expect(&t);
    assert!(
        lines[record - 2].starts_with("echo 'p:trace_recipe_")
            && lines[record - 2].ends_with(
                "/open_entry do_sys_openat2 dfd=%di:s32 path=+0(%si):ustring' >> /sys/kernel/tracing/kprobe_events"
            ),
        "{t}"
    );
    assert!(t.contains(":open_ret -f 'ret < 0' \\\n  sleep 10\n"), "{t}");
    assert!(
        lines.last().unwrap().starts_with("echo '-:trace_recipe_"),
        "{t}"
    );

    // trace-cmd applies -g (and --max-graph-depth) at the top level only.
    let t = trace_cmd_line("call-graph-depth.toml", &["--facts", facts]);
    assert!(
        t.ends_with(
            "trace-cmd record -g do_sys_openat2 \\\n  --max-graph-depth 3 \\\n  -p function_graph \\\n  sleep 5\n"
        ),
        "{t}"
    );
    assert!(
        t.contains("#   - the instance: trace-cmd record applies -g at the top level only"),
        "{t}"
    );

    let t = trace_cmd_line("stop-at-fault.toml", &["--facts", facts]);
    for want in [
        "#   - [[triggers]] function trigger `force_sig_fault:stacktrace:1` (a set_ftrace_filter command): trace-cmd record has no option for it\n",
        "#   - [stop] on_traceoff: trace-cmd record keeps recording",
        "  -e signal:signal_generate \\\n  sleep 60\n",
    ] {
        assert!(t.contains(want), "no {want:?} in\n{t}");
    }
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn an_exported_script_interrupted_by_sigint_leaves_tracefs_as_found() {
        interrupted(libc::SIGINT, 130);
    }

    #[test]
    fn an_exported_script_interrupted_by_sigterm_leaves_tracefs_as_found() {
        interrupted(libc::SIGTERM, 143);
    }
}
