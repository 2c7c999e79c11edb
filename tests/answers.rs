//! Each recipe of recipes/ asks a question in its `description`; a real run of
//! it here leads its summary with the analysis that answers it (report.json
//! `answer`). The recipes this kernel cannot run (function_graph, kprobes, the
//! function tracer and its triggers) are asserted in the kernel lab
//! (tests/lab.rs `assert_answer`); kmalloc-traffic and openat-failures in
//! tests/analyses.rs, against trace-cmd's listing.

use std::path::PathBuf;

use crate::common::{
    TracefsGuard, corpus_files, first_section, repo, run_recipe, text, trace_cmd, trace_recipe,
};

/// A run of recipes/NAME.toml (with `cmd` as its workload, if any): its
/// report.json, summary.txt, and the folder that holds them.
struct Answered {
    report: serde_json::Value,
    summary: String,
    _dir: tempfile::TempDir,
}

impl Answered {
    fn run(name: &str, cmd: &[&str]) -> Answered {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let recipe: PathBuf = repo().join(format!("recipes/{name}.toml"));
        let o = run_recipe(&recipe, &out, cmd);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o.stderr));
        let report =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        Answered {
            report,
            summary,
            _dir: dir,
        }
    }

    /// Asserts that `answer` is the answer and returns the summary's first section.
    fn first(&self, answer: &str, heading: &str) -> &str {
        assert_eq!(self.report["answer"], answer, "{}", self.summary);
        let first = first_section(&self.summary);
        assert!(first.starts_with(heading), "{}", self.summary);
        first
    }
}

/// `report --answer ANSWERS --format json` over the lab corpus's x86_64 6.12
/// recording (extracted into `dir`): the recording and the report.
fn answered_corpus(
    dir: &std::path::Path,
    answers: &std::path::Path,
) -> (PathBuf, serde_json::Value) {
    let dat = corpus_files(dir)
        .into_iter()
        .find(|p| p.ends_with("x86_64-sched-syscalls.dat"))
        .expect("the lab corpus's x86_64 6.12 recording");
    let json = dir.join("report.json");
    let o = trace_recipe(&[
        "report",
        dat.to_str().unwrap(),
        "--answer",
        answers.to_str().unwrap(),
        "--format",
        "json",
        "-o",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let report = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    (dat, report)
}

/// A key its event's print fmt shows as text: sched_switch's `prev_state`
/// in a trace-cmd recording of Debian 6.12 (tracedat's lab corpus) answers
/// by state as the kernel prints it (`S`, `D`, `Z`, `I`, `R`, and `R+` for
/// preempted), each counted as trace-cmd's raw listing (`report -R`) counts
/// that value.
#[test]
fn a_state_key_reads_as_the_kernel_prints_it() {
    let dir = tempfile::tempdir().unwrap();
    let answers = dir.path().join("states.toml");
    std::fs::write(
        &answers,
        "[[answer]]\nname = \"states\"\nevent = \"sched:sched_switch\"\nby = [\"prev_state\"]\n",
    )
    .unwrap();
    let (dat, report) = answered_corpus(dir.path(), &answers);
    let got: std::collections::BTreeMap<String, u64> =
        (report["answers"]["states"]["rows"].as_array().unwrap())
            .iter()
            .map(|r| {
                (
                    r["keys"][0].as_str().unwrap().to_string(),
                    r["count"].as_u64().unwrap(),
                )
            })
            .collect();
    // The kernel's letters (include/trace/events/sched.h, 6.12): one per
    // bit of the low eight, `R` for none, `+` for the preempted bit.
    let state = |v: u64| {
        let mut s: Vec<String> = (0..8)
            .filter(|b| v & (1 << b) != 0)
            .map(|b| "SDTtXZPI"[b..b + 1].to_string())
            .collect();
        if s.is_empty() {
            s.push("R".into());
        }
        s.join("|") + if v & 0x100 != 0 { "+" } else { "" }
    };
    let mut want: std::collections::BTreeMap<String, u64> = Default::default();
    for line in trace_cmd(&["report".as_ref(), "-R".as_ref(), dat.as_os_str()]).lines() {
        if let Some(v) = line
            .split_once(" sched_switch:")
            .and_then(|(_, rest)| rest.split_once("prev_state="))
            .and_then(|(_, v)| v.split(' ').next()?.parse::<u64>().ok())
        {
            *want.entry(state(v)).or_default() += 1;
        }
    }
    assert!(want.len() >= 3 && want.contains_key("R+"), "{want:?}");
    assert_eq!(got, want);
}

/// A recipe of templates (recipes/tpoint-count.toml: `event = "{{ event }}"`)
/// answers over a trace.dat as `run` would render it, its params at their
/// defaults: every sched_process_exec of the lab corpus's 6.12 recording,
/// as many as trace-cmd lists.
#[test]
fn a_templated_recipe_answers_with_its_params_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let (dat, report) = answered_corpus(dir.path(), &repo().join("recipes/tpoint-count.toml"));
    let listed = trace_cmd(&["report".as_ref(), dat.as_os_str()])
        .lines()
        .filter(|l| l.contains(" sched_process_exec:"))
        .count() as u64;
    assert!(listed > 0);
    assert_eq!(
        report["answers"]["hits"]["total"]["count"].as_u64(),
        Some(listed),
        "{:#}",
        report["answers"]["hits"]
    );
}

/// An answer file is read alone, even with templates: its `extends` is not
/// followed (here to a FIFO beside it, which would fail the report if it
/// were read, and to /etc/passwd), and a control character in its name is
/// printed escaped.
#[test]
fn an_answer_file_reads_no_other_file() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("base.toml");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    for base in ["base.toml", "/etc/passwd"] {
        let answers = dir.path().join("answers.toml");
        std::fs::write(
            &answers,
            format!(
                "extends = \"{base}\"\nname = \"a\"\n[params]\nevent = \"sched:sched_switch\"\n\
                 [[answer]]\nname = \"switches\"\nevent = \"{{{{ event }}}}\"\n"
            ),
        )
        .unwrap();
        let (_, report) = answered_corpus(dir.path(), &answers);
        assert!(
            report["answers"]["switches"]["total"]["count"].as_u64() > Some(0),
            "{base}: {:#}",
            report["answers"]
        );
    }
    let named = dir.path().join("a\u{1b}[31m.toml");
    std::fs::write(&named, "[[answer]]\nname = \"a\"\nevent = \"{{ nope }}\"\n").unwrap();
    let o = trace_recipe(&["report", "x.dat", "--answer", named.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert!(
        o.status.code() != Some(0) && !err.contains('\u{1b}'),
        "{err}"
    );
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    /// A recipe of two `[[answer]]`s on openat, computed by the trace engine
    /// (this kernel has no hist triggers): the failed opens per comm, one
    /// event; and their duration, a span.
    const OPENAT_ANSWERS: &str = r#"
name = "answers-openat"

[[events]]
name = "syscalls:sys_enter_openat"

[[events]]
name = "syscalls:sys_exit_openat"

[[answer]]
name = "missing"
question = "Who opens missing files?"
event = "syscalls:sys_exit_openat"
by = ["common_comm"]
where = "ret == -ENOENT"

[[answer]]
name = "slow_misses"
question = "How long does a failed openat() take?"
from = "syscalls:sys_enter_openat"
to = "syscalls:sys_exit_openat"
by = ["common_comm"]
where = "ret == -ENOENT"
"#;

    /// A workload that opens a missing path 7 times: its answers count each
    /// failed openat per comm exactly as trace-cmd's listing of the same
    /// trace.dat shows them, at least the 7, and every one as a span too.
    #[test]
    fn answers_count_failed_openat_as_trace_cmds_listing_does() {
        let _guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = dir.path().join("answers-openat.toml");
        std::fs::write(&recipe, OPENAT_ANSWERS).unwrap();
        let out = dir.path().join("out");
        let o = run_recipe(
            &recipe,
            &out,
            &[
                "sh",
                "-c",
                "for i in 1 2 3 4 5 6 7; do true < /nonexistent-trace-recipe-answer; done 2>/dev/null; true",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        let listing = std::process::Command::new("trace-cmd")
            .arg("report")
            .arg(out.join("trace.dat"))
            .output()
            .expect("trace-cmd is installed");
        let listing = String::from_utf8_lossy(&listing.stdout);
        let mut want: std::collections::BTreeMap<String, u64> = Default::default();
        for line in listing.lines() {
            if let Some((head, rest)) = line.split_once(" [")
                && rest.contains("sys_exit_openat:")
                && rest.trim_end().ends_with("0xfffffffffffffffe")
                && let Some((comm, _pid)) = head.trim().rsplit_once('-')
            {
                *want.entry(comm.to_string()).or_default() += 1;
            }
        }
        assert!(
            want.get("sh").copied().unwrap_or(0) >= 7,
            "{want:?}\n{listing}"
        );
        for name in ["missing", "slow_misses"] {
            let a = &report["answers"][name];
            assert_eq!(a["engine"], "trace", "{a:#}");
            let got: std::collections::BTreeMap<String, u64> = (a["rows"].as_array().unwrap())
                .iter()
                .map(|r| {
                    (
                        r["keys"][0].as_str().unwrap().to_string(),
                        r["count"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(got, want, "{name}: {a:#}");
        }
        let rows = report["answers"]["slow_misses"]["rows"].as_array().unwrap();
        let sh = rows.iter().find(|r| r["keys"][0] == "sh").unwrap();
        assert!(
            sh["cells"][1]["latency"]["max_us"].as_f64() > Some(0.0),
            "{sh:#}"
        );
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.contains("\nWho opens missing files?\n"),
            "{summary}"
        );
        // A span's columns: its count, then the total time (what `sort =
        // "-total"` orders by), min, percentiles and max.
        let header = summary
            .split("\nHow long does a failed openat() take?\n")
            .nth(1)
            .and_then(|s| {
                s.lines()
                    .find(|l| l.trim_start().starts_with("common_comm"))
            })
            .unwrap_or_else(|| panic!("{summary}"));
        assert_eq!(
            header.split_whitespace().collect::<Vec<_>>(),
            [
                "common_comm",
                "count",
                "total",
                "min",
                "p50",
                "p90",
                "p99",
                "max"
            ],
            "{summary}"
        );
    }

    /// block-io: "How long does block I/O take, per device and request size,
    /// while a command writes?" The first section is the `block` latency table, a
    /// row for the disk the workload writes to (the whole disk, as requests name it).
    #[test]
    fn block_io_answers_with_latency_per_device() {
        let guard = TracefsGuard::acquire();
        let a = Answered::run("block-io", &[]);
        let first = a.first("block", "block: I/O issue to complete");
        let block = &a.report["block"];
        assert!(block["requests"].as_u64() > Some(0), "{block:#}");
        // The device of /var/tmp's file system, or the disk it is a partition of.
        let meta = std::fs::metadata("/var/tmp").unwrap();
        let dev = std::os::linux::fs::MetadataExt::st_dev(&meta);
        let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
        let sys = std::path::Path::new("/sys/dev/block").join(format!("{major}:{minor}"));
        let disk = if sys.join("partition").exists() {
            std::fs::read_to_string(sys.join("../dev"))
                .unwrap()
                .trim()
                .to_string()
        } else {
            format!("{major}:{minor}")
        };
        let devices: Vec<&str> = block["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["key"].as_str().unwrap())
            .collect();
        assert!(devices.contains(&disk.as_str()), "{disk} in {devices:?}");
        assert!(first.contains(&format!("\n  {disk} ")), "{}", a.summary);
        guard.assert_unchanged();
    }

    /// exec-tree: "Which processes does a command fork, which programs do they
    /// exec, and how does each exit?" The first section is the process tree. The
    /// workload's tree is known: `sh` forks `ls` (exit 0), a `sh` exiting 3, a
    /// `sh` that kills itself (no `exit_group`: status unknown) and `date`. The
    /// tree's edges, programs and statuses are those of `trace-cmd report` of
    /// the same trace.dat (fork, exec and exit_group lines).
    #[test]
    fn exec_tree_answers_with_the_process_tree() {
        let guard = TracefsGuard::acquire();
        let cmd = "ls / > /dev/null; sh -c 'exit 3'; sh -c 'kill -9 $$'; date > /dev/null";
        let a = Answered::run("exec-tree", &["sh", "-c", cmd]);
        let first = a.first("proctree", "process tree: parent → child");
        let tree = &a.report["process_tree"];
        let procs = tree["processes"].as_array().unwrap();
        let root = a.report["workload"]["pid"].as_i64().unwrap();
        let program = |p: &serde_json::Value| -> String {
            let progs = p["programs"].as_array().unwrap();
            assert_eq!(progs.len(), 1, "{p:#}");
            let f = progs[0].as_str().unwrap();
            f.rsplit('/').next().unwrap().to_string()
        };
        assert_eq!(procs[0]["pid"], root, "{tree:#}");
        assert_eq!(
            (procs[0]["depth"].as_u64(), program(&procs[0])),
            (Some(0), "sh".into())
        );
        assert_eq!(procs[0]["exit_status"], 0, "{tree:#}");
        // The workload's children, in fork order: program and exit status.
        let children: Vec<(String, Option<i64>)> = procs
            .iter()
            .filter(|p| p["ppid"] == root)
            .map(|p| {
                assert_eq!(p["depth"], 1, "{p:#}");
                assert!(p["lifetime_ns"].as_u64().is_some_and(|n| n > 0), "{p:#}");
                (program(p), p["exit_status"].as_i64())
            })
            .collect();
        assert_eq!(
            children,
            [
                ("ls".to_string(), Some(0)),
                ("sh".to_string(), Some(3)),
                ("sh".to_string(), None),
                ("date".to_string(), Some(0))
            ],
            "{tree:#}"
        );
        assert_eq!(procs.len(), 5, "{tree:#}");
        assert_eq!(tree["statuses_known"], 4, "{tree:#}");

        // The same pids, edges, filenames and statuses as trace-cmd's listing.
        let listing = crate::common::trace_cmd_report(&a._dir.path().join("out/trace.dat"));
        let field = |line: &str, name: &str| -> String {
            let rest =
                &line[line.find(name).unwrap_or_else(|| panic!("{name}: {line}")) + name.len()..];
            rest.split_whitespace().next().unwrap().to_string()
        };
        let (mut edges, mut execs, mut statuses) = (Vec::new(), Vec::new(), Vec::new());
        for l in listing.lines() {
            if l.contains("sched_process_fork:") {
                edges.push((
                    field(l, " pid=").parse::<i64>().unwrap(),
                    field(l, "child_pid=").parse::<i64>().unwrap(),
                ));
            } else if l.contains("sched_process_exec:") {
                execs.push((
                    field(l, " pid=").parse::<i64>().unwrap(),
                    field(l, "filename="),
                ));
            } else if l.contains("sys_enter_exit_group:") {
                let pid: i64 = l
                    .split(": ")
                    .next()
                    .unwrap()
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .rsplit('-')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                let code = i64::from_str_radix(field(l, "error_code: 0x").as_str(), 16).unwrap();
                statuses.push((pid, code));
            }
        }
        let ours = |f: &dyn Fn(&serde_json::Value) -> Option<(i64, serde_json::Value)>| -> Vec<(i64, serde_json::Value)> {
            procs.iter().filter_map(f).collect()
        };
        let as_json = |v: Vec<(i64, String)>| -> Vec<(i64, serde_json::Value)> {
            v.into_iter().map(|(p, s)| (p, s.into())).collect()
        };
        let tree_edges: Vec<(i64, i64)> = procs
            .iter()
            .filter_map(|p| Some((p["ppid"].as_i64()?, p["pid"].as_i64().unwrap())))
            .collect();
        assert_eq!(tree_edges, edges, "{listing}");
        assert_eq!(
            ours(&|p| Some((p["pid"].as_i64()?, p["programs"][0].clone()))),
            as_json(execs),
            "{listing}"
        );
        let mut known: Vec<(i64, i64)> = procs
            .iter()
            .filter_map(|p| Some((p["pid"].as_i64()?, p["exit_status"].as_i64()?)))
            .collect();
        known.sort_unstable();
        statuses.sort_unstable();
        assert_eq!(known, statuses, "{listing}");

        // summary.txt: one indented line per child under the workload's.
        assert!(
            first
                .lines()
                .nth(1)
                .is_some_and(|l| l.starts_with(&format!("  {root} sh: exec "))),
            "{}",
            a.summary
        );
        for p in procs.iter().skip(1) {
            let status = match p["exit_status"].as_i64() {
                Some(s) => format!("; exit {s};"),
                None => "; exit status unknown (no exit_group);".to_string(),
            };
            let line = format!(
                "  └─ {} {}: exec {}{status}",
                p["pid"],
                p["comm"].as_str().unwrap(),
                p["programs"][0].as_str().unwrap()
            );
            assert!(
                first.lines().any(|l| l.starts_with(&line)),
                "{line}\n{}",
                a.summary
            );
        }
        guard.assert_unchanged();
    }

    /// Without `sys_enter_exit_group` recorded, the trace has no exit status:
    /// the workload's is the one the run's `wait` saw (4), its child's is
    /// unknown, and the summary says so.
    #[test]
    fn exec_tree_without_exit_group_knows_only_the_workloads_status() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let exec = std::fs::read_to_string(repo().join("recipes/exec-tree.toml")).unwrap();
        let cut = exec.rfind("[[events]]").unwrap();
        assert!(exec[cut..].contains("sys_enter_exit_group"), "{exec}");
        let recipe = crate::common::write_recipe(dir.path(), "noexit.toml", &exec[..cut]);
        let out = dir.path().join("out");
        let o = run_recipe(&recipe, &out, &["sh", "-c", "ls / > /dev/null; exit 4"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        let procs = report["process_tree"]["processes"].as_array().unwrap();
        let statuses: Vec<(&serde_json::Value, &serde_json::Value)> = procs
            .iter()
            .map(|p| (&p["comm"], &p["exit_status"]))
            .collect();
        assert_eq!(
            statuses,
            [
                (&"sh".into(), &4.into()),
                (&"ls".into(), &serde_json::Value::Null)
            ],
            "{report:#}"
        );
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.contains(" ls: exec /usr/bin/ls; exit status unknown (no exit_group);"),
            "{summary}"
        );
        guard.assert_unchanged();
    }

    /// stop-on-exit: "What ran until a named process exited?" The run stops at
    /// the first `sleep`'s exit; the first section is the per-task profile, with
    /// that `sleep` in it.
    #[test]
    fn stop_on_exit_answers_with_the_tasks_profile() {
        let guard = TracefsGuard::acquire();
        let a = Answered::run("stop-on-exit", &[]);
        assert_eq!(
            a.report["stop_reason"], "traceoff (tracing_on dropped to 0)",
            "{}",
            a.summary
        );
        let first = a.first("profile", "profile: where each task's time went");
        assert!(
            first
                .lines()
                .any(|l| l.split_whitespace().nth(1) == Some("sleep")),
            "{}",
            a.summary
        );
        guard.assert_unchanged();
    }

    /// wakeup-latency: "How long do a command's threads wait between being woken
    /// and running?" The first section is the wakeup latency, led by the
    /// workload's own tasks (`(scope)`), with as many samples as its sleeps at least.
    #[test]
    fn wakeup_latency_answers_with_the_scoped_tasks_latency() {
        let guard = TracefsGuard::acquire();
        let a = Answered::run("wakeup-latency", &[]);
        let first = a.first("wakeup", "wakeup: wakeup-to-run latency");
        // The first row after the table's header (a note on switches the
        // kernel lost may come before it).
        let row = first
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("comm "))
            .nth(1)
            .unwrap_or_else(|| panic!("{}", a.summary));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[0], "(scope)", "{}", a.summary);
        // Ten `sleep 0.01`: each wakes the sleeping task once at least.
        assert!(
            cells[1].parse::<u64>().is_ok_and(|n| n >= 10),
            "{}",
            a.summary
        );
        guard.assert_unchanged();
    }
}
