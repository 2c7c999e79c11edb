//! `diff A B`: counts, rates, latencies and recipe keys between two runs, given as
//! bundles, output folders or trace.dat files; `--fail-if` rules trip on a real
//! change and not on a same-speed rerun.

use std::path::{Path, PathBuf};

use crate::common::{TracefsGuard, assert_exit, text, trace_recipe, write_recipe};

fn run_execs(dir: &Path, tag: &str, execs: usize, label: &str) -> PathBuf {
    let recipe = write_recipe(
        dir,
        &format!("{tag}.toml"),
        &format!(
            "name = \"diffed\"\nduration = \"30s\"\n[params]\nlabel = \"{label}\"\n[scope]\nfollow_forks = true\n[[events]]\nname = \"sched:sched_process_exec\"\n[[events]]\nname = \"syscalls:sys_enter_openat\"\n[[events]]\nname = \"syscalls:sys_exit_openat\"\n"
        ),
    );
    let out = dir.join(tag);
    let script = "for i in $(seq $N); do /bin/true; done".replace("$N", &execs.to_string());
    let o = crate::common::run_bundled(&recipe, &out, &["sh", "-c", &script]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    out
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn diff_shows_what_changed_and_fail_if_trips_only_on_a_real_change() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let a = run_execs(dir.path(), "a", 4, "first");
        let b = run_execs(dir.path(), "b", 12, "second");
        let c = run_execs(dir.path(), "c", 4, "first");
        guard.assert_unchanged();
        drop(guard);
        let rule = "count(sched:sched_process_exec) > +10%";
        let bundle_b = dir.path().join("b.tar.zst");

        // A against B (a folder against a bundle): the exec count tripled.
        let o = trace_recipe(&[
            "diff",
            a.to_str().unwrap(),
            bundle_b.to_str().unwrap(),
            "--format",
            "json",
            "--fail-if",
            rule,
        ]);
        assert_eq!(o.status.code(), Some(6), "{}", text(&o.stderr));
        let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        crate::runbook::assert_matches_schema("diff", &d);
        let exec = d["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["event"] == "sched:sched_process_exec")
            .unwrap();
        let (ca, cb) = (
            exec["count_a"].as_u64().unwrap(),
            exec["count_b"].as_u64().unwrap(),
        );
        assert_eq!(cb - ca, 8, "eight more execs in B: {exec:#}");
        let want = (cb as f64 - ca as f64) / ca as f64 * 100.0;
        assert!((exec["count_change_pct"].as_f64().unwrap() - want).abs() < 1e-6);
        assert!(exec["rate_a"].as_f64().unwrap() > 0.0);
        assert_eq!(d["rules"][0]["held"], true);
        assert!(
            d["recipe"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["key"] == "params.label"
                    && c["a"] == "\"first\""
                    && c["b"] == "\"second\""),
            "{:#}",
            d["recipe"]
        );
        assert!(
            d["latency"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["analysis"] == "syscalls" && l["key"] == "openat"),
            "{:#}",
            d["latency"]
        );

        // A against its same-speed rerun C (trace.dat against folder): the rule does not trip.
        let o = trace_recipe(&[
            "diff",
            a.join("trace.dat").to_str().unwrap(),
            c.to_str().unwrap(),
            "--fail-if",
            rule,
        ]);
        assert_exit(&o, 0);
        let out = text(&o.stdout);
        assert!(
            out.contains("sched:sched_process_exec") && out.contains("ok    count("),
            "{out}"
        );

        // A rule on an event neither run has is an error, not a silent pass.
        let o = trace_recipe(&[
            "diff",
            a.to_str().unwrap(),
            c.to_str().unwrap(),
            "--fail-if",
            "count(sched:sched_switch) > +1%",
        ]);
        assert_eq!(o.status.code(), Some(2));
        assert!(
            text(&o.stderr).contains("event `sched:sched_switch` is in neither run"),
            "{}",
            text(&o.stderr)
        );
        let o = trace_recipe(&[
            "diff",
            a.to_str().unwrap(),
            c.to_str().unwrap(),
            "--fail-if",
            "p99(syscalls:nosuch) > +1%",
        ]);
        assert_eq!(o.status.code(), Some(2));
        assert!(
            text(&o.stderr).contains("latency group `syscalls:nosuch`"),
            "{}",
            text(&o.stderr)
        );

        // HTML is one self-contained page.
        let o = trace_recipe(&[
            "diff",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--format",
            "html",
        ]);
        assert!(o.status.success());
        let html = text(&o.stdout);
        assert!(
            html.starts_with("<!doctype html>") && !html.contains("<script"),
            "{html}"
        );
    }
}
