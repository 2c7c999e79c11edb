//! `[collect]`: context commands before and after a run, on the real kernel.

use crate::common::{TracefsGuard, text, trace_recipe, write_recipe};

#[test]
fn check_places_missing_programs_and_bad_commands() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = write_recipe(
        dir.path(),
        "b.toml",
        "name = \"b\"\n[collect]\nbefore = [[\"no-such-prog-xyz\", \"-a\"], \"echo 'open\"]\ntimeout = \"soon\"\n[[events]]\nname = \"sched:sched_process_exec\"\n",
    );
    let r = recipe.to_str().unwrap();
    let o = trace_recipe(&["check", r]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    for want in [
        format!("{r}:3:11: error (recipe): `no-such-prog-xyz` is not a file and not found in PATH"),
        format!("{r}:3:39: error (recipe): this command is empty or does not split into words"),
        format!("{r}:4:11: error (recipe): `soon` is not a duration"),
    ] {
        assert!(stdout.contains(&want), "no `{want}` in:\n{stdout}");
    }
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn collected_context_lands_in_the_folder_report_and_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(
            dir.path(),
            "c.toml",
            r#"name = "ctx"
duration = "20s"
[collect]
before = [["uname", "-r"], "cat /proc/loadavg"]
after = [["sh", "-c", "echo after; exit 3"], ["sleep", "30"], ["head", "-c", "4000", "/dev/zero"]]
timeout = "1s"
max_output_kb = 1
[output]
reports = ["json", "html"]
[[events]]
name = "sched:sched_process_exec"
"#,
        );
        let out = dir.path().join("run");
        let guard = TracefsGuard::acquire();
        let o = crate::common::run_bundled(&recipe, &out, &["true"]);
        guard.assert_unchanged();
        drop(guard);
        // Failures of optional commands are recorded, not fatal.
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let uname = duct::cmd!("uname", "-r").read().unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join("collect/before-1-uname.txt")).unwrap(),
            format!("{uname}\n")
        );
        assert!(out.join("collect/before-2-cat.txt").is_file());
        assert_eq!(
            std::fs::read_to_string(out.join("collect/after-1-sh.txt")).unwrap(),
            "after\n"
        );
        assert_eq!(
            std::fs::metadata(out.join("collect/after-3-head.txt"))
                .unwrap()
                .len(),
            1024,
            "output past max_output_kb is cut"
        );
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
                .unwrap();
        let c = report["collected"].as_array().unwrap();
        assert_eq!(c.len(), 5, "{c:?}");
        assert_eq!(c[0]["exit"], 0);
        assert!(c[0]["error"].is_null());
        assert_eq!(c[2]["exit"], 3);
        assert_eq!(c[2]["error"], "exited with 3");
        assert_eq!(c[3]["error"], "killed after the timeout of 1s");
        assert_eq!(c[4]["error"], "killed after writing more than 1 KiB");
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(html.contains("<h2>Collected context</h2>"), "{html}");
        assert!(html.contains("before-1-uname.txt</a>"), "{html}");
        let list = duct::cmd!("tar", "--zstd", "-tf", dir.path().join("run.tar.zst"))
            .read()
            .unwrap();
        for m in ["collect/before-1-uname.txt", "collect/after-1-sh.txt"] {
            assert!(list.lines().any(|l| l == m), "no {m} in:\n{list}");
        }
    }

    #[test]
    fn a_required_command_that_fails_stops_the_run_before_anything_is_applied() {
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(
            dir.path(),
            "r.toml",
            "name = \"req\"\n[collect]\nbefore = [[\"false\"]]\nrequired = true\n[[events]]\nname = \"sched:sched_process_exec\"\n",
        );
        let out = dir.path().join("run");
        let guard = TracefsGuard::acquire();
        let o = crate::common::run_recipe(&recipe, &out, &["true"]);
        guard.assert_unchanged();
        drop(guard);
        assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("a required [collect] command failed: `false`: exited with 1"),
            "{}",
            text(&o.stderr)
        );
        assert!(!out.join("trace.dat").exists());
    }
}
