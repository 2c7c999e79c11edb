//! The analyses keyed to what a recipe asks (`errno`), on real runs, compared
//! with numbers computed independently from `trace-cmd report` of the same file.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;

use crate::common::{
    ReportLine, TracefsGuard, event_lines, repo, run_recipe, text, trace_cmd_report,
};

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// recipes/openat-failures.toml with a workload that opens a root-only file as
/// `nobody` (EACCES) and a missing one (ENOENT): report.json's `errno` counts
/// each failure by name, per syscall and per task, as trace-cmd's listing of
/// the same trace.dat shows them (`ret` as an unsigned hex word there).
#[test]
fn errno_counts_failures_by_name_as_trace_cmds_listing_shows_them() {
    let guard = TracefsGuard::acquire();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "x").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let script = format!(
        "cat {s}; cat {s}; cat {s}; cat /nonexistent-errno-test; true",
        s = secret.display()
    );
    let out = dir.path().join("out");
    let o = run_recipe(
        &repo().join("recipes/openat-failures.toml"),
        &out,
        &[
            "setpriv",
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let report = json(&out.join("report.json"));
    assert!(
        report["analyses"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "errno"),
        "{:?}",
        report["analyses"]
    );
    let errno = &report["errno"];

    // Independently: count trace-cmd's sys_exit_openat lines by ret and by (pid, ret).
    let listing = trace_cmd_report(&out.join("trace.dat"));
    let mut by_ret: BTreeMap<i64, u64> = BTreeMap::new();
    let mut by_task: BTreeMap<(i32, i64), u64> = BTreeMap::new();
    for l in event_lines(&listing) {
        let Some(r) = ReportLine::parse(l) else {
            continue;
        };
        if r.event != "sys_exit_openat" {
            continue;
        }
        let hex = r.fields.trim().trim_start_matches("0x");
        let ret = u64::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("{l}: {e}")) as i64;
        *by_ret.entry(ret).or_default() += 1;
        *by_task.entry((r.pid(), ret)).or_default() += 1;
    }
    assert!(by_ret.get(&-13).is_some_and(|n| *n >= 3), "{by_ret:?}");
    assert!(by_ret.contains_key(&-2), "{by_ret:?}");
    let total: u64 = by_ret.values().sum();
    assert_eq!(errno["exits"], total, "{errno:#}");
    assert_eq!(errno["failed"], total, "the recipe keeps only failures");
    assert_eq!(errno["untracked"], 0);

    let syscalls = errno["syscalls"].as_array().unwrap();
    assert_eq!(syscalls.len(), 1, "{errno:#}");
    let openat = &syscalls[0];
    assert_eq!(openat["syscall"], "openat");
    assert_eq!(
        (&openat["calls"], &openat["failed"]),
        (&total.into(), &total.into())
    );
    let ours: BTreeMap<i64, u64> = openat["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["value"].as_i64().unwrap(), e["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(ours, by_ret);
    let names: BTreeMap<i64, &str> = openat["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["value"].as_i64().unwrap(), e["errno"].as_str().unwrap()))
        .collect();
    assert_eq!((names[&-13], names[&-2]), ("EACCES", "ENOENT"));

    let tasks: BTreeMap<(i32, i64), u64> = errno["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert_eq!(t["syscall"], "openat");
            (
                (
                    t["pid"].as_i64().unwrap() as i32,
                    t["value"].as_i64().unwrap(),
                ),
                t["count"].as_u64().unwrap(),
            )
        })
        .collect();
    if by_task.len() <= 20 {
        assert_eq!(tasks, by_task);
    }
    let cats = errno["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["comm"] == "cat" && t["errno"] == "EACCES")
        .count();
    // Each `cat` of the secret is a task of its own, named in its rows.
    assert!(cats >= 3, "one row per cat process: {errno:#}");

    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.contains("errno: failed syscalls"), "{summary}");
    assert!(
        summary.contains(&format!("-13 EACCES x{}", by_ret[&-13])),
        "{summary}"
    );
    guard.assert_unchanged();
}
