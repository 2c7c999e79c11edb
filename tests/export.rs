//! `check --plan --export sh`: the script applies the plan on this kernel and,
//! interrupted, undoes every step (tracefs snapshot unchanged).

use std::io::BufRead;

use crate::common::{TracefsGuard, text, trace_recipe, write_recipe};

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
    assert!(line.starts_with("applied 7 steps"), "{line}");
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

#[test]
fn an_exported_script_interrupted_by_sigint_leaves_tracefs_as_found() {
    interrupted(libc::SIGINT, 130);
}

#[test]
fn an_exported_script_interrupted_by_sigterm_leaves_tracefs_as_found() {
    interrupted(libc::SIGTERM, 143);
}
