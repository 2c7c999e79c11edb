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

/// Runs recipes/NAME.toml as shipped, with report.html too, in a new
/// folder: the folder, the output folder and report.json.
fn run_shipped_with_html(name: &str) -> (tempfile::TempDir, std::path::PathBuf, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let recipe = std::fs::read_to_string(repo().join(format!("recipes/{name}.toml"))).unwrap();
    let recipe = crate::common::write_recipe(
        dir.path(),
        &format!("{name}.toml"),
        &format!("{recipe}\n[output]\nreports = [\"summary\", \"json\", \"html\"]\n"),
    );
    let o = run_recipe(&recipe, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let report = json(&out.join("report.json"));
    (dir, out, report)
}

/// The analyses' sections of summary.txt and report.html, in the order each
/// shows them (summary.txt: by their headings at the start of a line;
/// report.html: by their `<section id="analysis-NAME">`): the same order,
/// the one report.json names `answer` first. Returns that order.
fn assert_same_section_order(out: &std::path::Path, report: &serde_json::Value) -> Vec<String> {
    let names: Vec<String> = report["analyses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    let ours: Vec<String> = summary
        .lines()
        .filter_map(|l| {
            if l.starts_with("per event:") {
                return Some("counts".to_string());
            }
            if l.starts_with("top kernel ") {
                return Some("stacks".to_string());
            }
            if l.starts_with("process tree: ") {
                return Some("proctree".to_string());
            }
            let head = l.split(':').next()?;
            names.iter().find(|n| *n == head).cloned()
        })
        .collect();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let page: Vec<String> = html
        .split(r#"<section class="analysis" id="analysis-"#)
        .skip(1)
        .map(|s| s.split('"').next().unwrap().to_string())
        .collect();
    assert_eq!(ours, page, "{summary}");
    assert_eq!(
        ours.first(),
        Some(&report["answer"].as_str().unwrap().to_string())
    );
    let mut sorted = ours.clone();
    sorted.sort();
    let mut all = names.clone();
    all.sort();
    assert_eq!(sorted, all, "each analysis once");
    ours
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

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

        // The summary answers the recipe's question first.
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert_eq!(report["answer"], "errno");
        assert!(
            crate::common::first_section(&summary).starts_with("errno: failed syscalls"),
            "{summary}"
        );
        assert!(
            summary.contains(&format!("-13 EACCES x{}", by_ret[&-13])),
            "{summary}"
        );
        guard.assert_unchanged();
    }

    /// recipes/softirq-time.toml (as shipped, with report.html; 100 refused loopback
    /// connections, system-wide): report.json's `softirq` latency pairs each
    /// softirq_entry with the next softirq_exit of the same vector on its
    /// CPU, named as the format's `__print_symbolic` names it, as done here
    /// independently on `trace-cmd report -t` of the same trace.dat (whose
    /// `[action=NET_RX]` comes from the same table): per vector the same
    /// count, total and max; and NET_RX ran at least once per connection.
    #[test]
    fn softirq_time_per_vector_is_what_trace_cmds_listing_pairs() {
        let guard = TracefsGuard::acquire();
        let (_dir, out, report) = run_shipped_with_html("softirq-time");
        let listing = crate::common::trace_cmd(&[
            "report".as_ref(),
            "-t".as_ref(),
            "-i".as_ref(),
            out.join("trace.dat").as_os_str(),
        ]);
        // Per CPU the open softirq (vec, ns); per action (count, total, max).
        let mut open: BTreeMap<u32, (String, u64)> = BTreeMap::new();
        let mut want: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
        let mut unpaired = 0u64;
        for l in event_lines(&listing) {
            let Some(r) = ReportLine::parse(l) else {
                continue;
            };
            let action = || {
                let a = r
                    .fields
                    .split("[action=")
                    .nth(1)
                    .unwrap_or_else(|| panic!("{l}"));
                a.trim_end_matches(']').to_string()
            };
            match r.event {
                "softirq_entry" => {
                    open.insert(r.cpu, (action(), r.ns()));
                }
                "softirq_exit" => match open.remove(&r.cpu) {
                    Some((a, t)) if a == action() => {
                        let d = r.ns() - t;
                        let e = want.entry(a).or_insert((0, 0, 0));
                        *e = (e.0 + 1, e.1 + d, e.2.max(d));
                    }
                    _ => unpaired += 1,
                },
                _ => {}
            }
        }
        let soft = report["latency"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["analysis"] == "softirq")
            .unwrap_or_else(|| panic!("no softirq latency: {:#}", report["latency"]));
        assert_eq!(soft["group_by"], "vector");
        assert_eq!(soft["unpaired"], unpaired, "{soft:#}");
        let ours: BTreeMap<String, (u64, u64, u64)> = soft["groups"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| !g["key"].as_str().unwrap().starts_with('('))
            .map(|g| {
                let n = |f: &str| g[f].as_u64().unwrap();
                for k in ["p50_ns", "p99_ns", "min_ns", "mean_ns"] {
                    assert!(n(k) <= n("max_ns"), "{g:#}");
                }
                let key = g["key"].as_str().unwrap().to_string();
                (key, (n("count"), n("total_ns"), n("max_ns")))
            })
            .collect();
        assert_eq!(ours, want);
        assert!(
            want.get("NET_RX").is_some_and(|v| v.0 >= 100),
            "a NET_RX softirq per loopback connection: {want:?}"
        );
        // `(scope)` (the tasks of the run the softirqs interrupted), then `(all)`.
        let groups = soft["groups"].as_array().unwrap();
        let all = groups.iter().find(|g| g["key"] == "(all)").unwrap();
        assert_eq!(all["count"], want.values().map(|v| v.0).sum::<u64>());
        assert!(soft["tasks"].as_array().is_some_and(|t| !t.is_empty()));

        // softirq answers (the recipe records softirqs), irq beside it when a
        // hardware interrupt came during the run (none may on a quiet machine).
        let order = assert_same_section_order(&out, &report);
        assert!(
            order == ["softirq", "counts", "irq"] || order == ["softirq", "counts"],
            "{order:?}"
        );
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        let (n, total, _) = want["NET_RX"];
        let row = summary
            .lines()
            .find(|l| l.trim_start().starts_with("NET_RX "))
            .unwrap_or_else(|| panic!("{summary}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[1], n.to_string(), "{row}");
        assert_eq!(cols[2], trace_recipe::report::dur(total), "{row}");
        assert!(
            summary.contains("\nsoftirq: softirq time per vector"),
            "{summary}"
        );
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(html.contains("softirq: softirq time per vector"), "{html}");
        assert!(html.contains("<td>NET_RX</td>"));
        guard.assert_unchanged();
    }

    /// recipes/page-faults.toml as shipped (`dd bs=4M` from /dev/zero: its
    /// first read clears 1024 fresh pages of its buffer from the kernel):
    /// report.json's `faults` counts kernel faults by the function of `ip`,
    /// as `trace-cmd report` prints `ip=` (`%ps`) for the same trace.dat,
    /// and each task's user and kernel faults as its listing does.
    #[test]
    fn kernel_faults_are_counted_by_the_function_trace_cmd_prints_for_ip() {
        let guard = TracefsGuard::acquire();
        let (_dir, out, report) = run_shipped_with_html("page-faults");
        let listing = trace_cmd_report(&out.join("trace.dat"));
        let mut by_ip: BTreeMap<String, u64> = BTreeMap::new();
        let mut tasks: BTreeMap<i32, (u64, u64)> = BTreeMap::new();
        let (mut user, mut kernel) = (0u64, 0u64);
        for l in event_lines(&listing) {
            let Some(r) = ReportLine::parse(l) else {
                continue;
            };
            let t = tasks.entry(r.pid()).or_default();
            match r.event {
                "page_fault_user" => {
                    user += 1;
                    t.0 += 1;
                }
                "page_fault_kernel" => {
                    kernel += 1;
                    t.1 += 1;
                    let ip = r
                        .fields
                        .split("ip=")
                        .nth(1)
                        .unwrap_or_else(|| panic!("{l}"));
                    let ip = ip.split_whitespace().next().unwrap();
                    *by_ip.entry(ip.to_string()).or_default() += 1;
                }
                _ => {}
            }
        }
        let faults = &report["faults"];
        assert_eq!(
            (&faults["user"], &faults["kernel"]),
            (&user.into(), &kernel.into()),
            "{faults:#}"
        );
        assert_eq!(faults["untracked"], 0);
        assert_eq!(faults["symbols_total"], by_ip.len());
        let ours: BTreeMap<String, u64> = faults["kernel_by_symbol"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["symbol"].as_str().unwrap().to_string(),
                    s["count"].as_u64().unwrap(),
                )
            })
            .collect();
        let listed = ours.len();
        let mut want: Vec<(&String, &u64)> = by_ip.iter().collect();
        want.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let want: BTreeMap<String, u64> = want
            .into_iter()
            .take(listed)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        assert_eq!(ours, want);
        // dd's first read clears its 4 MiB buffer from the kernel: 1024
        // kernel faults in one function, at the top.
        let top = &faults["kernel_by_symbol"][0];
        assert!(top["count"].as_u64().unwrap() >= 1024, "{faults:#}");
        let rows: BTreeMap<i32, (u64, u64)> = faults["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let n = |k: &str| t[k].as_u64().unwrap();
                (t["pid"].as_i64().unwrap() as i32, (n("user"), n("kernel")))
            })
            .collect();
        for (pid, v) in &rows {
            assert_eq!(tasks.get(pid), Some(v), "pid {pid}");
        }
        let dd = &faults["tasks"][0];
        assert_eq!(dd["comm"], "dd", "{faults:#}");
        assert_eq!(dd["pid"], report["workload"]["pid"]);

        assert_eq!(
            assert_same_section_order(&out, &report),
            ["faults", "counts"]
        );
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert_eq!(report["answer"], "faults");
        let first = crate::common::first_section(&summary);
        assert!(
            first.starts_with(&format!(
                "faults: page faults ({kernel} in kernel mode, {user} in user mode)"
            )),
            "{summary}"
        );
        let symbol = top["symbol"].as_str().unwrap();
        assert!(
            first.contains(&format!(
                "  {symbol:<32} {:>9}\n",
                top["count"].as_u64().unwrap()
            )),
            "{first}"
        );
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(
            html.contains(&format!(
                "<tr><td>{symbol}</td><td>{}</td></tr>",
                top["count"]
            )),
            "{html}"
        );
        guard.assert_unchanged();
    }

    /// A recipe that only names events (execs, forks, signals, TCP resets),
    /// around a workload that execs known programs, sends SIGUSR1 to itself
    /// and SIGTERM to a child, and connects to a closed loopback port:
    /// report.json's `fields` shows, per event, the top values of its
    /// telling fields per task (a signal's target and number, a reset's
    /// family and ports), each row's count as the rows of `trace-cmd report`
    /// of the same trace.dat count, and the known answers: SIGTERM from the
    /// shell to `sleep`; a reset received on a connection to port 9. The
    /// execs and forks are the process tree's: /bin/true exec'd once by a
    /// child of the workload.
    #[test]
    fn telling_fields_answer_which_and_who_as_trace_cmds_listing_shows() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let recipe = crate::common::write_recipe(
            dir.path(),
            "who.toml",
            r#"name = "who"
description = "Which programs are exec'd, which signals sent, which connections reset?"
duration = "30s"
[scope]
follow_forks = true
[[events]]
name = "sched:sched_process_exec"
[[events]]
name = "sched:sched_process_fork"
[[events]]
name = "signal:signal_generate"
[[events]]
name = "tcp:tcp_receive_reset"
[output]
reports = ["summary", "json", "html"]
"#,
        );
        // SIGTERM goes to `sleep` once its child has exec'd it (its comm says so).
        let script = "trap '' USR1; /bin/true; sleep 10 & p=$!; kill -USR1 $$; \
            while [ \"$(cat /proc/$p/comm)\" != sleep ]; do :; done; kill -TERM $p; wait; \
            curl -s -m 1 http://127.0.0.1:9/ >/dev/null; true";
        let o = run_recipe(&recipe, &out, &["sh", "-c", script]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let report = json(&out.join("report.json"));
        let listing = trace_cmd_report(&out.join("trace.dat"));
        let fields = report["fields"].as_array().unwrap();
        let event = |name: &str| {
            fields
                .iter()
                .find(|e| e["event"] == name)
                .unwrap_or_else(|| panic!("no {name} in {fields:#?}"))
        };
        let strs = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        };
        // The execs and forks are the process tree's (below), not `fields`'.
        assert!(
            fields
                .iter()
                .all(|e| !e["event"].as_str().unwrap().starts_with("sched:")),
            "{fields:#?}"
        );
        for name in ["signal:signal_generate", "tcp:tcp_receive_reset"] {
            let e = event(name);
            let names = strs(&e["fields"]);
            let kinds = strs(&e["kinds"]);
            // The same rows counted on trace-cmd's listing: the task, then
            // each telling field's `name=value` (a signal by its number).
            let short = name.split(':').nth(1).unwrap();
            let mut want: BTreeMap<(i32, Vec<String>), u64> = BTreeMap::new();
            for l in event_lines(&listing) {
                let Some(r) = ReportLine::parse(l) else {
                    continue;
                };
                if r.event != short {
                    continue;
                }
                let vals = names
                    .iter()
                    .map(|n| {
                        // sched_process_fork prints parent_comm as `comm=`.
                        let key = format!("{}=", n.strip_prefix("parent_").unwrap_or(n));
                        let tok = r
                            .fields
                            .split_whitespace()
                            .find_map(|t| t.strip_prefix(key.as_str()));
                        tok.unwrap_or_else(|| panic!("no {n} in {l}")).to_string()
                    })
                    .collect();
                *want.entry((r.pid(), vals)).or_default() += 1;
            }
            let total: u64 = want.values().sum();
            assert!(total > 0, "no {name} in the listing");
            assert_eq!(e["records"], total, "{e:#}");
            assert_eq!(e["rows_total"], want.len(), "{e:#}");
            let mut listed = 0;
            for row in e["rows"].as_array().unwrap() {
                let vals: Vec<String> = strs(&row["values"])
                    .into_iter()
                    .zip(&kinds)
                    .map(|(v, k)| match k.as_str() {
                        "signal" => v.split(['(', ')']).nth(1).unwrap_or(&v).to_string(),
                        _ => v,
                    })
                    .collect();
                let key = (row["pid"].as_i64().unwrap() as i32, vals);
                assert_eq!(
                    Some(&row["count"].as_u64().unwrap()),
                    want.get(&key),
                    "{name}: {row:#}"
                );
                listed += row["count"].as_u64().unwrap();
            }
            assert_eq!(e["other"], total - listed, "{e:#}");
        }
        let workload = report["workload"]["pid"].as_i64().unwrap();
        let row_with = |name: &str, value: &str| -> serde_json::Value {
            let e = event(name);
            e["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| strs(&r["values"]).iter().any(|v| v == value))
                .cloned()
                .unwrap_or_else(|| panic!("no {value} in {e:#}"))
        };
        // /bin/true, exec'd once by a child of the workload: the process tree.
        let procs = report["process_tree"]["processes"].as_array().unwrap();
        let exec: Vec<&serde_json::Value> = procs
            .iter()
            .filter(|p| strs(&p["programs"]) == ["/bin/true"])
            .collect();
        assert_eq!(exec.len(), 1, "{procs:#?}");
        assert_eq!(exec[0]["ppid"], workload, "{procs:#?}");
        // The target's comm and pid, then the signal (the order of the fields).
        assert_eq!(
            strs(&event("signal:signal_generate")["fields"]),
            ["comm", "sig", "pid"]
        );
        let term = row_with("signal:signal_generate", "SIGTERM (15)");
        assert_eq!(term["pid"], workload, "sent by the shell: {term:#}");
        assert_eq!(term["values"][0], "sleep", "to sleep: {term:#}");
        let usr1 = row_with("signal:signal_generate", "SIGUSR1 (10)");
        assert_eq!(
            (&usr1["pid"], &usr1["values"][2]),
            (&workload.into(), &workload.to_string().into()),
            "the shell to itself: {usr1:#}"
        );
        let reset = row_with("tcp:tcp_receive_reset", "9");
        assert_eq!(reset["comm"], "curl", "{reset:#}");
        assert_eq!(strs(&reset["values"])[0], "AF_INET");

        assert_eq!(
            assert_same_section_order(&out, &report),
            ["fields", "counts", "proctree"]
        );
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert_eq!(report["answer"], "fields");
        let first = crate::common::first_section(&summary);
        assert!(
            first.starts_with("fields: which and who, per event"),
            "{summary}"
        );
        assert!(first.contains("SIGTERM (15)"), "{first}");
        assert!(summary.contains(": exec /bin/true;"), "{summary}");
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(html.contains("<td>SIGTERM (15)</td>"), "{html}");
        guard.assert_unchanged();
    }

    /// recipes/block-io.toml, system-wide, with a real `dd oflag=direct`: report.json's
    /// `block` pairs each block_rq_issue with the block_rq_complete of the same
    /// device and sector, as done here independently on trace-cmd's listing of the
    /// same trace.dat: the same requests, per device and size, with the same
    /// min and max. The completions come in the disk's interrupt, in whatever
    /// task it interrupts: the run reads kallsyms before tracing starts, so that
    /// its own (excluded) threads are seldom that task and the completions are in
    /// the file (once they were all lost, the `block` analysis was not chosen at
    /// all and `requests` was null).
    #[test]
    fn block_latency_pairs_requests_as_trace_cmds_listing_does() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let target = dir.path().join("dd.tmp");
        let of = format!("of={}", target.display());
        let out = dir.path().join("out");
        let recipe = std::fs::read_to_string(repo().join("recipes/block-io.toml")).unwrap();
        let recipe = crate::common::write_recipe(
            dir.path(),
            "block-io.toml",
            &recipe.replace("follow_forks = true", "system_wide = true"),
        );
        let o = run_recipe(
            &recipe,
            &out,
            &[
                "dd",
                "if=/dev/zero",
                &of,
                "bs=64k",
                "count=64",
                "oflag=direct",
                "status=none",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let report = json(&out.join("report.json"));
        let block = &report["block"];

        let listing = crate::common::trace_cmd(&[
            "report".as_ref(),
            "-t".as_ref(),
            "-i".as_ref(),
            out.join("trace.dat").as_os_str(),
        ]);
        // (dev, sector) -> (issue ns, bytes); per device and size: (count, min, max).
        let mut pending: BTreeMap<(String, u64), (u64, u64)> = BTreeMap::new();
        let (mut devices, mut sizes, mut unpaired, mut issues) =
            (BTreeMap::new(), BTreeMap::new(), 0u64, 0u64);
        for l in event_lines(&listing) {
            let Some(r) = ReportLine::parse(l) else {
                continue;
            };
            if r.event != "block_rq_issue" && r.event != "block_rq_complete" {
                continue;
            }
            let tok: Vec<&str> = r.fields.split_whitespace().collect();
            let plus = tok.iter().position(|t| *t == "+").unwrap();
            let dev = tok[0].replace(',', ":");
            let sector: u64 = tok[plus - 1].parse().unwrap();
            if r.event == "block_rq_issue" {
                issues += 1;
                let nr: u64 = tok[plus + 1].parse().unwrap();
                pending.insert((dev, sector), (r.ns(), nr * 512));
                continue;
            }
            let Some((start, bytes)) = pending.remove(&(dev.clone(), sector)) else {
                unpaired += 1;
                continue;
            };
            let d = r.ns() - start;
            for (map, key) in [
                (&mut devices, dev.clone()),
                (&mut sizes, format!("{bytes} B")),
            ] {
                let e = map.entry(key).or_insert((0u64, u64::MAX, 0u64));
                *e = (e.0 + 1, e.1.min(d), e.2.max(d));
            }
        }
        assert!(issues >= 64, "dd's writes are issued: {issues}");
        let paired: u64 = devices.values().map(|v: &(u64, u64, u64)| v.0).sum();
        assert!(paired >= 1, "no completion of dd's writes in the listing");
        assert_eq!(block["requests"], paired, "{block:#}");
        assert_eq!(block["unpaired"], unpaired, "{block:#}");
        assert_eq!(block["untracked"], 0);
        let groups = |k: &str| -> BTreeMap<String, (u64, u64, u64)> {
            block[k]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| {
                    let n = |f: &str| g[f].as_u64().unwrap();
                    (
                        g["key"].as_str().unwrap().to_string(),
                        (n("count"), n("min_ns"), n("max_ns")),
                    )
                })
                .collect()
        };
        assert_eq!(groups("devices"), devices);
        assert_eq!(groups("sizes"), sizes);
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.contains(&format!("block: I/O issue to complete ({paired} requests")),
            "{summary}"
        );
        guard.assert_unchanged();
    }

    /// recipes/kmalloc-traffic.toml as shipped (its `ls -lR` workload): report.json's
    /// `kmem` counts allocations and bytes per call site (the function, as
    /// trace-cmd's `call_site=foo+0x12` names it), per size, and what was not
    /// freed, as computed here independently from trace-cmd's listing of the same
    /// trace.dat (each kfree paired with the last kmalloc of its `ptr`).
    #[test]
    fn kmem_counts_call_sites_and_outstanding_bytes_as_trace_cmds_listing_shows_them() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let o = run_recipe(&repo().join("recipes/kmalloc-traffic.toml"), &out, &[]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let report = json(&out.join("report.json"));
        let kmem = &report["kmem"];
        assert_eq!(report["answer"], "kmem", "{:?}", report["analyses"]);

        #[derive(Debug, Default, PartialEq)]
        struct Site {
            allocs: u64,
            bytes_req: u64,
            bytes_alloc: u64,
            freed: u64,
            outstanding: u64,
            outstanding_bytes: u64,
        }
        let field = |fields: &str, name: &str| -> String {
            fields
                .split_whitespace()
                .find_map(|t| t.strip_prefix(name)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("no {name} in {fields}"))
                .to_string()
        };
        let hex = |s: String| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or(0);
        let listing = trace_cmd_report(&out.join("trace.dat"));
        let mut sites: BTreeMap<String, Site> = BTreeMap::new();
        let mut sizes: BTreeMap<u64, u64> = BTreeMap::new();
        let mut live: BTreeMap<u64, (String, u64)> = BTreeMap::new();
        let (mut frees, mut unpaired) = (0u64, 0u64);
        for l in event_lines(&listing) {
            let Some(r) = ReportLine::parse(l) else {
                continue;
            };
            match r.event {
                "kmalloc" => {
                    let site = field(r.fields, "call_site");
                    let site = site.split('+').next().unwrap().to_string();
                    let req: u64 = field(r.fields, "bytes_req").parse().unwrap();
                    let alloc: u64 = field(r.fields, "bytes_alloc").parse().unwrap();
                    let s = sites.entry(site.clone()).or_default();
                    s.allocs += 1;
                    s.bytes_req += req;
                    s.bytes_alloc += alloc;
                    *sizes.entry(alloc).or_default() += 1;
                    let ptr = hex(field(r.fields, "ptr"));
                    if ptr > 16 {
                        live.insert(ptr, (site, alloc));
                    }
                }
                "kfree" => {
                    let ptr = hex(field(r.fields, "ptr"));
                    if ptr <= 16 {
                        continue;
                    }
                    frees += 1;
                    match live.remove(&ptr) {
                        Some((site, _)) => sites.get_mut(&site).unwrap().freed += 1,
                        None => unpaired += 1,
                    }
                }
                _ => {}
            }
        }
        for (site, bytes) in live.values() {
            let s = sites.get_mut(site).unwrap();
            s.outstanding += 1;
            s.outstanding_bytes += bytes;
        }
        let allocs: u64 = sites.values().map(|s| s.allocs).sum();
        assert!(allocs > 1000, "ls -lR allocates: {allocs}");
        let n = |v: &serde_json::Value, f: &str| v[f].as_u64().unwrap();
        assert_eq!(n(kmem, "allocs"), allocs, "{kmem:#}");
        assert_eq!(
            n(kmem, "bytes_req"),
            sites.values().map(|s| s.bytes_req).sum::<u64>()
        );
        assert_eq!(
            n(kmem, "bytes_alloc"),
            sites.values().map(|s| s.bytes_alloc).sum::<u64>()
        );
        assert_eq!(
            (n(kmem, "frees"), n(kmem, "frees_unpaired")),
            (frees, unpaired)
        );
        assert_eq!(n(kmem, "outstanding"), live.len() as u64);
        assert_eq!(
            n(kmem, "outstanding_bytes"),
            live.values().map(|(_, b)| b).sum::<u64>()
        );
        assert_eq!((n(kmem, "untracked"), n(kmem, "unfollowed")), (0, 0));
        assert_eq!(kmem["call_sites_total"], sites.len());
        let listed = kmem["call_sites"].as_array().unwrap();
        assert_eq!(listed.len(), sites.len().min(40));
        for s in listed {
            let name = s["call_site"].as_str().unwrap();
            let ours = Site {
                allocs: n(s, "allocs"),
                bytes_req: n(s, "bytes_req"),
                bytes_alloc: n(s, "bytes_alloc"),
                freed: n(s, "freed"),
                outstanding: n(s, "outstanding"),
                outstanding_bytes: n(s, "outstanding_bytes"),
            };
            assert_eq!(Some(&ours), sites.get(name), "{name}");
            assert_eq!(n(s, "waste"), ours.bytes_alloc - ours.bytes_req);
        }
        let ours: BTreeMap<u64, u64> = kmem["sizes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|z| (n(z, "bytes_alloc"), n(z, "allocs")))
            .collect();
        if sizes.len() <= 40 {
            assert_eq!(ours, sizes);
        }

        // The summary answers the recipe's question first: the call sites.
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        let first = crate::common::first_section(&summary);
        assert!(first.starts_with("kmem: slab allocations"), "{summary}");
        let top = listed[0]["call_site"].as_str().unwrap();
        assert!(first.contains(top), "{summary}");
        let html =
            crate::common::trace_recipe(&["report", out.to_str().unwrap(), "--format", "html"]);
        let html = text(&html.stdout);
        assert!(html.contains("id=\"kmem\"") && html.contains(top), "{html}");
        guard.assert_unchanged();
    }
}
