//! perf-tools' questions as recipes (recipes/killsnoop.toml, syscount,
//! tpoint-count, iolatency, bitesize): each is run on a workload whose answer
//! is known, and its answer tables (report.json `answers.NAME`, the first
//! section of summary.txt) are asserted. Debian's perf-tools
//! (`perf-tools-unstable`, installed by scripts/test) traces the same
//! workload in the same test and its counts are compared with the recipe's:
//! killsnoop, tpoint and iolatency (tracepoints at the top level of tracefs),
//! syscount and bitesize (perf). Its execsnoop and opensnoop need kprobes,
//! funccount and funcslower the function tracers; recipes/execsnoop.toml,
//! execsnoop-args.toml and opensnoop.toml need eprobes: this kernel has none
//! of these (CONFIG_EPROBE_EVENTS is off, though its tracefs README documents
//! the `e:` syntax), so they are for the kernel lab's kernels: tests/lab.rs
//! runs recipes/funccount.toml and funcslower.toml beside perf-tools' scripts
//! ([`perf_tool`] copies them into the payload), and opensnoop.toml and
//! execsnoop.toml, in its 6.12 boot.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::{TracefsGuard, first_section, in_ci, repo, run_recipe, text};

/// A run of recipes/NAME.toml: its report.json and summary.txt.
struct Answered {
    report: serde_json::Value,
    summary: String,
    _dir: tempfile::TempDir,
}

impl Answered {
    /// Runs recipes/`name`.toml with `sets` (`KEY=VALUE` params) and workload `cmd`.
    fn run(name: &str, sets: &[&str], cmd: &[&str]) -> Answered {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let recipe: PathBuf = repo().join(format!("recipes/{name}.toml"));
        let o = match sets.is_empty() {
            true => run_recipe(&recipe, &out, cmd),
            false => {
                let mut args = vec!["run", recipe.to_str().unwrap(), "-o", out.to_str().unwrap()];
                for s in sets {
                    args.extend(["--set", s]);
                }
                args.push("--");
                args.extend(cmd);
                crate::common::trace_recipe(&args)
            }
        };
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

    /// The workload's pid (the pid its first program runs as).
    fn workload_pid(&self) -> String {
        self.report["workload"]["pid"].to_string()
    }

    /// Answer `name`'s rows: the keys and the count of each.
    fn rows(&self, name: &str) -> Vec<(Vec<String>, u64)> {
        let a = &self.report["answers"][name];
        assert_eq!(a["engine"], "trace", "{name}: {a:#}");
        (a["rows"].as_array())
            .unwrap_or_else(|| panic!("no answer `{name}`:\n{}", self.summary))
            .iter()
            .map(|r| {
                let keys = (r["keys"].as_array().unwrap().iter())
                    .map(|k| k.as_str().unwrap().to_string())
                    .collect();
                (keys, r["count"].as_u64().unwrap())
            })
            .collect()
    }

    /// Cell `i` of answer `name`'s row whose keys are `keys`.
    fn cell(&self, name: &str, keys: &[&str], i: usize) -> &serde_json::Value {
        let rows = self.report["answers"][name]["rows"].as_array().unwrap();
        let row = rows
            .iter()
            .find(|r| r["keys"].as_array().unwrap().iter().eq(keys.iter()))
            .unwrap_or_else(|| panic!("{name}: no row {keys:?}:\n{}", self.summary));
        &row["cells"][i]
    }

    /// Asserts that the summary leads with answer `name`: its first section
    /// is headed by the answer's question.
    fn leads_with(&self, name: &str) {
        let question = self.report["answers"][name]["question"].as_str().unwrap();
        assert!(
            first_section(&self.summary).starts_with(question),
            "the summary does not lead with `{name}`:\n{}",
            self.summary
        );
    }
}

/// Sum of the counts of `rows` whose keys satisfy `keep`.
fn count_where(rows: &[(Vec<String>, u64)], keep: impl Fn(&[String]) -> bool) -> u64 {
    rows.iter().filter(|(k, _)| keep(k)).map(|(_, n)| n).sum()
}

/// perf-tools' tool `name` (Debian's perf-tools-unstable installs it as
/// /usr/sbin/NAME-perf), copied into `dir` to read tracefs at
/// /sys/kernel/tracing: the tools expect it under debugfs
/// (/sys/kernel/debug/tracing), which this host does not mount. `None`, said
/// on stderr, when the package is missing outside CI (scripts/test installs
/// it; under CI a missing tool fails the test).
pub(crate) fn perf_tool(name: &str, dir: &Path) -> Option<PathBuf> {
    let installed = PathBuf::from(format!("/usr/sbin/{name}-perf"));
    let Ok(body) = std::fs::read_to_string(&installed) else {
        assert!(
            !in_ci(),
            "{} is missing: apt-get install perf-tools-unstable",
            installed.display()
        );
        eprintln!(
            "skipping the comparison with perf-tools' {name}: apt-get install perf-tools-unstable"
        );
        return None;
    };
    // iolatency sizes the top-level buffer and never restores it: it keeps
    // the size it finds here, so that the tracefs guard sees no change.
    let body = body
        .replace(
            "tracing=/sys/kernel/debug/tracing",
            "tracing=/sys/kernel/tracing",
        )
        .replace("warn \"echo $bufsize_kb > buffer_size_kb\"", ":");
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    Some(path)
}

/// A perf-tools tool running in a process group of its own, its output
/// piped; waited for on drop (a test that fails before reading its output
/// lets it end and restore the top level, which its duration bounds).
struct Tool {
    child: Option<Child>,
}

impl Tool {
    /// Starts `bash TOOL ARGS...` and returns once it sleeps in its tracing
    /// window: a `sleep` of its process group exists (the tools clear the
    /// buffer, then sleep for their duration or interval). Panics with its
    /// output when it ends first (another tracer holds perf-tools' lock, a
    /// tracepoint is missing).
    fn start(tool: &Path, args: &[&str]) -> Tool {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("bash")
            .arg(tool)
            .args(args)
            .current_dir(tool.parent().unwrap())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let group = child.id().to_string();
        loop {
            if child.try_wait().unwrap().is_some() {
                let o = child.wait_with_output().unwrap();
                panic!(
                    "{} ended before tracing: {}{}",
                    tool.display(),
                    text(&o.stdout),
                    text(&o.stderr)
                );
            }
            let sleeping = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
                let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                // pid (comm) state ppid pgrp ...
                stat.split_once(") ").is_some_and(|(head, rest)| {
                    head.ends_with("(sleep")
                        && rest.split_whitespace().nth(2) == Some(group.as_str())
                })
            });
            if sleeping {
                return Tool { child: Some(child) };
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Waits for the tool to end; its stdout.
    fn output(mut self) -> String {
        let child = self.child.take().unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
        text(&o.stdout)
    }
}

impl Drop for Tool {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }
}

/// A loop device over a small file of `dir`, detached on drop: block I/O to
/// it is the workload's alone.
struct Loop {
    dev: String,
}

impl Loop {
    fn new(dir: &Path) -> Loop {
        let file = dir.join("loop.img");
        std::fs::File::create(&file)
            .unwrap()
            .set_len(4 << 20)
            .unwrap();
        let o = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(o.status.success(), "losetup: {}", text(&o.stderr));
        Loop {
            dev: text(&o.stdout).trim().to_string(),
        }
    }

    /// The device's (major, minor).
    fn numbers(&self) -> (u32, u32) {
        let meta = std::fs::metadata(&self.dev).unwrap();
        let rdev = std::os::unix::fs::MetadataExt::rdev(&meta);
        (rustix::fs::major(rdev), rustix::fs::minor(rdev))
    }

    /// The kernel's dev_t of the device, as block events show it.
    fn dev_t(&self) -> String {
        let (major, minor) = self.numbers();
        ((u64::from(major) << 20) | u64::from(minor)).to_string()
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    /// killsnoop: a shell that ignores SIGUSR1 sends it to itself twice
    /// (delivered: 0; the kernel's result 1, ignored) and SIGUSR2 to a pid
    /// above pid_max (-ESRCH). perf-tools' killsnoop (sys_enter_kill and
    /// sys_exit_kill at the top level) sees the same calls, with the same
    /// signal, target and return.
    #[test]
    fn killsnoop_answers_sender_signal_target_and_result_as_perf_tools_does() {
        let mut guard = TracefsGuard::acquire();
        // perf-tools trace at the top level: on a freshly booted machine
        // that allocates its ring buffer.
        guard.allow_top_level_allocation();
        let tools = tempfile::tempdir().unwrap();
        let tool = perf_tool("killsnoop", tools.path()).map(|t| Tool::start(&t, &["-d", "10"]));
        let a = Answered::run(
            "killsnoop",
            &[],
            &[
                "sh",
                "-c",
                "trap '' USR1; kill -USR1 $$; kill -USR1 $$; kill -USR2 4000000 2>/dev/null; true",
            ],
        );
        a.leads_with("kills");
        let me = a.workload_pid();
        let kills = a.rows("kills");
        let mine: Vec<&(Vec<String>, u64)> = kills.iter().filter(|(k, _)| k[0] == me).collect();
        let want = [
            (
                vec![me.clone(), "sh".into(), "10".into(), me.clone(), "0".into()],
                2,
            ),
            (
                vec![
                    me.clone(),
                    "sh".into(),
                    "12".into(),
                    "4000000".into(),
                    "-ESRCH".into(),
                ],
                1,
            ),
        ];
        assert_eq!(mine.len(), 2, "{}", a.summary);
        for w in &want {
            assert!(kills.contains(w), "{w:?}: {}", a.summary);
        }
        let signals = a.rows("signals");
        assert!(
            signals.contains(&(
                vec![
                    "sh".into(),
                    "10".into(),
                    "sh".into(),
                    me.clone(),
                    "1".into()
                ],
                2
            )),
            "{}",
            a.summary
        );
        if let Some(tool) = tool {
            // COMM PID TPID SIGNAL RETURN, one line per kill(2). On this kernel
            // the syscall events print their arguments as `0x...`, and the tool,
            // which puts its own `0x` before them, reads TPID and SIGNAL as 0
            // and the return as unsigned (-3 as 1.84467e+19): compare the
            // calls per sender and which of them failed.
            let out = tool.output();
            let (mut calls, mut failed) = (0, 0);
            for l in out.lines() {
                let f: Vec<&str> = l.split_whitespace().collect();
                if f.len() == 5 && f[0] == "sh" && f[1] == me {
                    calls += 1;
                    failed += u64::from(f[4] != "0");
                }
            }
            let ours = count_where(&kills, |k| k[0] == me);
            let ours_failed = count_where(&kills, |k| k[0] == me && k[4] != "0");
            assert_eq!(
                (calls, failed),
                (ours, ours_failed),
                "perf-tools' killsnoop:\n{out}\n{}",
                a.summary
            );
        }
        guard.assert_unchanged();
    }

    /// syscount: a shell that calls kill(2) five times (`kill -0`): 5 calls of
    /// `kill` per syscall and per process, with their time; perf-tools'
    /// syscount -c (perf stat of every sys_enter_* of the same command) counts
    /// 5 too. The syscall table is sorted by total time.
    #[test]
    fn syscount_counts_and_times_each_syscall_as_perf_tools_counts_it() {
        let mut guard = TracefsGuard::acquire();
        // perf-tools trace at the top level: on a freshly booted machine
        // that allocates its ring buffer.
        guard.allow_top_level_allocation();
        // A file: syscount joins its command's words into one string.
        let tools = tempfile::tempdir().unwrap();
        let script = tools.path().join("kill5.sh");
        std::fs::write(&script, "for i in 1 2 3 4 5; do kill -0 $$; done; true\n").unwrap();
        let script = script.to_str().unwrap();
        let a = Answered::run("syscount", &[], &["sh", script]);
        a.leads_with("syscall_time");
        let by_syscall = a.rows("syscall_time");
        assert_eq!(
            count_where(&by_syscall, |k| k[0] == "kill"),
            5,
            "{}",
            a.summary
        );
        let me = a.workload_pid();
        let per_process = a.rows("syscalls_per_task");
        assert!(
            per_process.contains(&(vec![me.clone(), "sh".into(), "kill".into()], 5)),
            "{}",
            a.summary
        );
        let totals: Vec<f64> = (a.report["answers"]["syscall_time"]["rows"].as_array())
            .unwrap()
            .iter()
            .map(|r| r["cells"][1]["latency"]["total_us"].as_f64().unwrap())
            .collect();
        assert!(totals.windows(2).all(|w| w[0] >= w[1]), "{totals:?}");
        assert!(
            (a.cell("task_time", &["sh"], 1)["latency"]["max_us"].as_f64()) > Some(0.0),
            "{}",
            a.summary
        );
        if let Some(tool) = perf_tool("syscount", tools.path()) {
            let o = Command::new("bash")
                .arg(&tool)
                .args(["-c", "sh", script])
                .current_dir(tools.path())
                .output()
                .unwrap();
            let out = text(&o.stdout);
            let kill = out
                .lines()
                .find_map(|l| l.strip_prefix("kill "))
                .map(|n| n.trim().parse::<u64>().unwrap());
            assert_eq!(
                kill,
                Some(5),
                "perf-tools' syscount -c:\n{out}{}",
                text(&o.stderr)
            );
        }
        guard.assert_unchanged();
    }

    /// tpoint-count: a program of a name of its own exec'd 4 times: 4 hits of
    /// sched_process_exec under that name; perf-tools' tpoint on the same
    /// tracepoint lists the same 4 execs.
    #[test]
    fn tpoint_count_counts_each_task_as_perf_tools_tpoint_lists_them() {
        let mut guard = TracefsGuard::acquire();
        // perf-tools trace at the top level: on a freshly booted machine
        // that allocates its ring buffer.
        guard.allow_top_level_allocation();
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("pt-tpoint-true");
        std::fs::copy("/bin/true", &prog).unwrap();
        let prog = prog.to_str().unwrap().to_string();
        let tool = perf_tool("tpoint", dir.path())
            .map(|t| Tool::start(&t, &["-d", "10", "sched:sched_process_exec"]));
        let script = format!("for i in 1 2 3 4; do {prog}; done; true");
        let a = Answered::run("tpoint-count", &[], &["sh", "-c", &script]);
        a.leads_with("hits");
        let hits = a.rows("hits");
        assert_eq!(
            count_where(&hits, |k| k[0] == "pt-tpoint-true"),
            4,
            "{}",
            a.summary
        );
        let cpus = a.rows("hits_per_cpu");
        assert_eq!(
            count_where(&cpus, |_| true),
            count_where(&hits, |_| true),
            "{}",
            a.summary
        );
        if let Some(tool) = tool {
            let out = tool.output();
            let theirs = out
                .lines()
                .filter(|l| l.contains(&format!("filename={prog} ")))
                .count();
            assert_eq!(theirs, 4, "perf-tools' tpoint:\n{out}");
        }
        guard.assert_unchanged();
    }

    /// iolatency and bitesize on a loop device of their own: 32 writes of
    /// 60 KiB with O_DIRECT are 32 requests of the device, each a span from
    /// issue to completion, and 32 issues by dd of 61440 bytes (bucket 2^16:
    /// up to 64 KiB).
    /// perf-tools' iolatency (the same tracepoints at the top level, writes
    /// of that device) counts the same 32; bitesize (perf stat of requests
    /// of 60 KiB on the whole machine) at least those 32.
    #[test]
    fn iolatency_and_bitesize_count_a_loop_devices_writes_as_perf_tools_do() {
        let mut guard = TracefsGuard::acquire();
        // perf-tools trace at the top level: on a freshly booted machine
        // that allocates its ring buffer.
        guard.allow_top_level_allocation();
        let dir = tempfile::tempdir().unwrap();
        let dev = Loop::new(dir.path());
        let of = format!("of={}", dev.dev);
        let dd = [
            "dd",
            "if=/dev/zero",
            of.as_str(),
            "bs=60k",
            "count=32",
            "oflag=direct",
            "status=none",
        ];
        let (major, minor) = dev.numbers();
        let device = format!("{major},{minor}");
        let tool = perf_tool("iolatency", dir.path())
            .map(|t| Tool::start(&t, &["-d", &device, "-i", "*W*", "1", "6"]));
        let set = format!("device={}", dev.dev_t());
        let a = Answered::run("iolatency", &[&set], &dd);
        a.leads_with("io_latency");
        let lat = a.rows("io_latency");
        assert_eq!(lat, vec![(vec![dev.dev_t()], 32)], "{}", a.summary);
        let kinds = a.rows("io_latency_kind");
        assert_eq!(
            count_where(&kinds, |k| k[1].starts_with('W')),
            32,
            "{}",
            a.summary
        );
        let l = &a.cell("io_latency", &[&dev.dev_t()], 1)["latency"];
        let in_buckets: u64 = (l["buckets"].as_array().unwrap().iter())
            .map(|b| b["count"].as_u64().unwrap())
            .sum();
        assert_eq!(in_buckets, 32, "{l:#}");
        if let Some(tool) = tool {
            // ">=(ms) .. <(ms)   : I/O      |Distribution|" rows, one table per second.
            let out = tool.output();
            let theirs: u64 = out
                .lines()
                .filter_map(|l| {
                    let (range, rest) = l.split_once(':')?;
                    range.contains("->").then_some(())?;
                    rest.split_whitespace().next()?.parse::<u64>().ok()
                })
                .sum();
            assert_eq!(theirs, 32, "perf-tools' iolatency:\n{out}");
        }

        let tool =
            perf_tool("bitesize", dir.path()).map(|t| Tool::start(&t, &["-b", "60 61", "10"]));
        let b = Answered::run("bitesize", &[], &dd);
        b.leads_with("sizes");
        let sizes = b.rows("sizes");
        assert_eq!(
            count_where(&sizes, |k| k[0] == "dd" && k[1] == "2^16"),
            32,
            "{}",
            b.summary
        );
        if let Some(tool) = tool {
            let out = tool.output();
            // "   60.0 -> 60.9      : 34       |####|": the requests of 60 KiB up
            // to 61 KiB on the whole machine (bitesize has no device or task
            // filter): dd's 32 and whatever else the machine wrote of that size
            // meanwhile (a few at most on a busy host).
            let theirs = out.lines().find_map(|l| {
                let (range, rest) = l.split_once(':')?;
                let f: Vec<&str> = range.split_whitespace().collect();
                (f.first() == Some(&"60.0") && f.get(1) == Some(&"->")).then_some(())?;
                rest.split_whitespace().next()?.parse::<u64>().ok()
            });
            assert!(
                theirs.is_some_and(|n| n >= 32),
                "perf-tools' bitesize:\n{out}"
            );
        }
        drop(dev);
        guard.assert_unchanged();
    }
}
