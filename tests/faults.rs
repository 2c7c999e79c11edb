//! Faults under load (issue 37 item 4), each on the real kernel: the output
//! file system filling up mid-recording, the recorder stopped (SIGSTOP) while
//! the kernel keeps writing. Each ends with tracefs as it was and the run
//! folder saying what happened.

use std::path::{Path, PathBuf};

use crate::common::{Scenario, assert_exit, event_lines, run_args, text, trace_cmd_report};

/// A recipe that records only what the workload writes to its instance's
/// `trace_marker` (the exec filter matches nothing), with a buffer of `kb` KiB
/// per CPU and `duration` as a backstop, so a run that fails to stop ends
/// anyway (and the test then fails on its exit code).
fn markers_recipe(name: &str, kb: u32, duration: &str) -> String {
    format!(
        "name = \"{name}\"\ndescription = \"t\"\nduration = \"{duration}\"\n[buffer]\nsize_kb = {kb}\n[[events]]\nname = \"sched:sched_process_exec\"\nfilter = 'filename == \"/no/such/program\"'\n"
    )
}

/// A workload writing numbered markers (one `write(2)`, one event each) to
/// the run's `trace_marker` as fast as the shell can, until the file `stop`
/// exists; it then writes how many it wrote to `count`.
fn marker_writer(stop: &Path, count: &Path) -> String {
    format!(
        "exec 3>\"$TRACE_RECIPE_MARKER\" && i=0 && while [ ! -e {stop} ]; do echo \"fault-marker $i padding-padding-padding\" >&3; i=$((i+1)); done; echo $i > {count}",
        stop = stop.display(),
        count = count.display()
    )
}

/// A tmpfs of `size` mounted on a new folder `dir`, unmounted when dropped.
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(dir: &Path, size: &str) -> SmallFs {
        std::fs::create_dir_all(dir).unwrap();
        let o = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "mount: {}", text(&o.stderr));
        SmallFs(dir.to_path_buf())
    }
}

impl SmallFs {
    /// Unmounts it, asserting that nothing of the run holds a file there.
    fn unmount(self) {
        let o = std::process::Command::new("umount")
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(o.status.success(), "umount: {}", text(&o.stderr));
        std::mem::forget(self);
    }
}

impl Drop for SmallFs {
    /// A test that failed before [`SmallFs::unmount`]: unmount anyway (lazily).
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// The tests that drive the host's tracefs (the `tracefs` test group).
mod tracefs {
    use super::*;

    /// The output folder on a 4 MiB tmpfs, markers written without pause:
    /// the run stops when the file system is full, rolls back, keeps a
    /// trace.dat that trace-cmd reads and that says it was cut short, writes
    /// its reports and exits 3.
    #[test]
    fn a_full_output_file_system_stops_the_run_keeps_a_readable_truncated_trace_and_exits_3() {
        let s = Scenario::new(&markers_recipe("full", 1024, "120s"));
        let fs = SmallFs::mount(&s.path("small"), "4m");
        let out = fs.0.join("out");
        let (stop, count) = (s.path("never"), s.path("count"));
        let writer = marker_writer(&stop, &count);
        let o =
            crate::common::trace_recipe(&run_args(&s.recipe, &out, &[], &["sh", "-c", &writer]));
        let stderr = text(&o.stderr);
        assert_exit(&o, 3);
        assert!(
            stderr.contains("stopped: output file system full")
                && stderr.contains("the output file system filled up")
                && stderr.contains("rolled back: tracefs is as it was"),
            "{stderr}"
        );
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        assert_eq!(
            report["stop_reason"], "output file system full",
            "{report:#}"
        );
        assert_eq!(report["truncated"], true, "{report:#}");
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.contains("truncated: the output file system filled up"),
            "{summary}"
        );
        // The file says so itself, and trace-cmd reads every record of it.
        let dat = out.join("trace.dat");
        let file = tracedat::TraceFile::open(&dat).unwrap();
        assert!(file.truncated(), "trace.dat is not marked truncated");
        let listing = trace_cmd_report(&dat);
        let markers = event_lines(&listing)
            .iter()
            .filter(|l| l.contains("fault-marker "))
            .count() as u64;
        assert!(
            markers > 1000,
            "only {markers} markers kept:\n{listing:.2000}"
        );
        assert_eq!(report["total_events"].as_u64(), Some(markers), "{report:#}");
        assert!(!out.join(".raw").exists(), "the raw files were left behind");
        drop(file);
        fs.unmount();
        s.finish();
    }

    /// The run (its per-CPU readers are threads of it) SIGSTOPped for 5 s
    /// while its workload keeps writing markers into a 16 KiB-per-CPU buffer:
    /// the kernel overwrites what nobody reads. Every marker written is either
    /// in trace.dat or counted lost, once: per CPU, report.json's overrun is
    /// the overrun of trace.dat's stats, its in-page count the sum of
    /// trace-cmd's `[N EVENTS DROPPED]` lines of that CPU, and the summary
    /// shows the same total.
    #[test]
    fn a_recorder_stopped_for_5_s_counts_the_loss_per_cpu_exactly_once() {
        use std::collections::BTreeMap;
        let s = Scenario::new(&markers_recipe("stopped", 16, "300s"));
        let (stop, count) = (s.path("stop"), s.path("count"));
        let writer = marker_writer(&stop, &count);
        let out = s.out();
        let mut child = std::process::Command::new(crate::common::bin())
            .args(run_args(&s.recipe, &out, &[], &["sh", "-c", &writer]))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (mut stderr, mut seen) = crate::common::until_recording(&mut child);
        let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        let stats = |cpu: &str| {
            std::fs::read_to_string(crate::common::tracefs().root().join(format!(
                "instances/trace-recipe-stopped-{pid}/per_cpu/{cpu}/stats"
            )))
            .unwrap_or_default()
        };
        let overrun_now = || -> u64 {
            crate::common::tracefs()
                .list(&format!("instances/trace-recipe-stopped-{pid}/per_cpu"))
                .iter()
                .map(|cpu| stat(&stats(cpu), "overrun:"))
                .sum()
        };
        let before = overrun_now();
        rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
        // The fault itself lasts 5 s; nothing waits on time to decide an outcome.
        std::thread::sleep(std::time::Duration::from_secs(5));
        let during = overrun_now();
        rustix::process::kill_process(pid, rustix::process::Signal::CONT).unwrap();
        std::fs::write(&stop, "").unwrap();
        let status = child.wait().unwrap();
        std::io::Read::read_to_string(&mut stderr, &mut seen).unwrap();
        assert_eq!(status.code(), Some(0), "{seen}");
        assert!(
            during > before,
            "the kernel overwrote nothing while the recorder was stopped ({before} -> {during})"
        );
        let written: u64 = std::fs::read_to_string(&count)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let report = s.report();
        let lost = report["lost_events"].as_object().unwrap().clone();
        let total: u64 = lost.values().map(|l| l["total"].as_u64().unwrap()).sum();
        assert_eq!(report["lost_total"].as_u64(), Some(total), "{report:#}");
        assert!(total >= during - before, "{report:#}");
        // Read + lost = written: each marker counted once, in one place.
        let dat = out.join("trace.dat");
        let listing = trace_cmd_report(&dat);
        let kept = event_lines(&listing)
            .iter()
            .filter(|l| l.contains("fault-marker "))
            .count() as u64;
        assert_eq!(kept + total, written, "{report:#}");
        // Per CPU: report.json's overrun is trace.dat's, its in-page count
        // trace-cmd's dropped lines, its total the larger of the two.
        let file = tracedat::TraceFile::open(&dat).unwrap();
        let mut dropped_lines: BTreeMap<String, u64> = BTreeMap::new();
        for l in crate::common::listing_lines(&listing)
            .into_iter()
            .filter(|l| crate::common::is_lost_marker(l))
        {
            let (cpu, rest) = l["CPU:".len()..].split_once(' ').unwrap();
            let n: u64 = rest
                .trim_start_matches('[')
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap_or(0);
            *dropped_lines.entry(cpu.to_string()).or_default() += n;
        }
        for (cpu, l) in &lost {
            let in_file = file
                .cpu_stats()
                .iter()
                .find(|st| st.starts_with(&format!("CPU: {cpu}\n")))
                .map_or(0, |st| stat(st, "overrun:"));
            assert_eq!(l["overrun"].as_u64(), Some(in_file), "cpu {cpu}: {l:#}");
            assert_eq!(
                l["in_pages"].as_u64(),
                Some(dropped_lines.get(cpu).copied().unwrap_or(0)),
                "cpu {cpu}: {l:#}\n{dropped_lines:?}"
            );
            let (o, p) = (
                l["overrun"].as_u64().unwrap(),
                l["in_pages"].as_u64().unwrap(),
            );
            assert_eq!(
                l["total"].as_u64(),
                Some(o.max(p) + l["dropped"].as_u64().unwrap())
            );
        }
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.contains(&format!("lost events: {total} (")),
            "{summary}"
        );
        eprintln!(
            "FIGURE recorder stopped 5 s: {written} markers written, {kept} kept, {total} lost ({lost:?})"
        );
        s.finish();
    }

    /// One tracefs write (the fork event's `enable`, applied and undone) made
    /// to fail by the test hook: `EINTR` three times is tried again and the
    /// run succeeds; `EINTR` past the bound of tries and `EBUSY` fail the step,
    /// and every step before it is undone (exit 3, nothing left, the output
    /// folder discarded); `EBUSY` on its undo leaves the journal as evidence
    /// (exit 7) until `reset` finishes the rollback.
    #[test]
    fn a_busy_or_interrupted_tracefs_write_is_retried_or_rolled_back_never_half_applied() {
        let s = Scenario::new(
            "name = \"busy\"\ndescription = \"t\"\n[scope]\nfollow_forks = true\n[[events]]\nname = \"sched:sched_process_fork\"\n",
        );
        let run = |name: &str, fault: &str| {
            let out = s.path(name);
            let o = std::process::Command::new(crate::common::bin())
                .args(run_args(&s.recipe, &out, &[], &["sh", "-c", "true & wait"]))
                .env(
                    "TRACE_RECIPE_TEST_TRACEFS_ERRNO",
                    format!(
                        "{fault}:sched/sched_process_fork/enable:{}",
                        &name[name.len() - 3..]
                    ),
                )
                .output()
                .unwrap();
            (o, out)
        };
        // Interrupted three times: tried again, recorded as usual.
        let (o, out) = run("eintr-1x3", "EINTR");
        assert_exit(&o, 0);
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        assert!(
            report["events"]["sched:sched_process_fork"].as_u64() >= Some(1),
            "{report:#}"
        );
        assert_eq!(s.guard.changes(), Vec::<String>::new());
        // Interrupted past the bound, or busy: the step fails, all is undone.
        for (name, fault, says) in [
            ("eintr-1x8", "EINTR", "Interrupted system call"),
            ("ebusy-1x1", "EBUSY", "Device or resource busy"),
        ] {
            let (o, out) = run(name, fault);
            let stderr = text(&o.stderr);
            assert_exit(&o, 3);
            assert!(
                stderr.contains("sched_process_fork/enable")
                    && stderr.contains(says)
                    && stderr.contains("every step already applied was undone"),
                "{name}: {stderr}"
            );
            assert!(!out.exists(), "{name}: the refused run's folder was kept");
            assert_eq!(s.guard.changes(), Vec::<String>::new(), "{name}");
        }
        // Busy when undone: the undo fails, the journal is kept, exit 7.
        let (o, _) = run("ebusy-2x1", "EBUSY");
        let stderr = text(&o.stderr);
        assert_exit(&o, 7);
        let journal = stderr
            .lines()
            .find_map(|l| l.split("journal kept: ").nth(1))
            .map(|j| PathBuf::from(j.trim()))
            .unwrap_or_else(|| panic!("no journal named:\n{stderr}"));
        assert!(
            journal.exists(),
            "the journal of the failed undo was deleted"
        );
        assert!(stderr.contains("Device or resource busy"), "{stderr}");
        let reset = crate::common::trace_recipe(&["reset"]);
        assert_exit(&reset, 0);
        assert!(!journal.exists(), "reset left the journal");
        s.finish();
    }

    /// A workload forking 5,000 short tasks, followed (`follow_forks`): the
    /// run leaves nothing of its own (instance, pid lists, journal, a task),
    /// the profile follows at most 4,096 tasks one by one and counts the rest
    /// as `(other)`, lists 20, and the run stays under 300 MB.
    #[test]
    fn five_thousand_forked_tasks_leave_nothing_behind_and_the_profile_stays_bounded() {
        let s = Scenario::new(
            "name = \"forks\"\ndescription = \"t\"\n[buffer]\nsize_kb = 8192\n[scope]\nfollow_forks = true\n[[events]]\nname = \"sched:sched_switch\"\n[[events]]\nname = \"sched:sched_wakeup\"\n[[events]]\nname = \"sched:sched_process_fork\"\n",
        );
        let out = s.out();
        let tag = format!("fault-forks-{}", std::process::id());
        let m = crate::bounds::measured(&run_args(
            &s.recipe,
            &out,
            &[],
            &[
                "sh",
                "-c",
                "i=0; while [ $i -lt 5000 ]; do ( : ) & i=$((i+1)); done; wait",
                &tag,
            ],
        ));
        assert_eq!(m.code, Some(0), "{}", m.all);
        let report = s.report();
        let forks = report["events"]["sched:sched_process_fork"]
            .as_u64()
            .unwrap_or(0);
        let lost = report["lost_total"].as_u64().unwrap();
        assert!(
            forks >= 5000 || lost > 0,
            "{forks} forks recorded, none lost"
        );
        let p = &report["profile"];
        let (followed, other) = (
            p["tasks_total"].as_u64().unwrap(),
            p["tasks_other"].as_u64().unwrap_or(0),
        );
        assert!(followed <= 4096, "{followed} tasks followed one by one");
        assert!(
            followed + other > 5000 || lost > 0,
            "{followed} + {other} tasks seen of 5,001"
        );
        assert!(p["tasks"].as_array().unwrap().len() <= 20);
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            other == 0 || summary.contains(&format!("and {other} more past that bound, (other)")),
            "{summary:.3000}"
        );
        assert!(m.max_rss_mb < 300, "the run peaked at {} MB", m.max_rss_mb);
        eprintln!(
            "FIGURE 5,000 forks: {forks} fork events, {followed} tasks followed + {other} (other), lost {lost}, peak {} MB",
            m.max_rss_mb
        );
        // No task of the workload is left.
        let left: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .map(|c| text(&c))
            .filter(|c| c.contains(&tag))
            .collect();
        assert!(left.is_empty(), "tasks left: {left:?}");
        s.finish();
    }

    /// `[output] rotate = { size_mb = 6, keep_mb = 12 }` on 30 MiB of
    /// markers: pieces of at most 6 MiB, the oldest dropped so that those
    /// kept take at most 12 MiB, each read whole by trace-cmd, in recording
    /// order, and the report's events are those of every piece kept.
    #[test]
    fn a_rotating_run_keeps_bounded_pieces_each_readable_and_reports_over_all_of_them() {
        let s = Scenario::new(&format!(
            "{}[stop]\nmax_size_mb = 30\n[output]\nrotate = {{ size_mb = 6, keep_mb = 12 }}\n",
            markers_recipe("rotate", 64, "300s")
        ));
        let (stop, count) = (s.path("never"), s.path("count"));
        let writer = marker_writer(&stop, &count);
        s.run(&[], &["sh", "-c", &writer], 0);
        let out = s.out();
        let report = s.report();
        assert_eq!(report["stop_reason"], "max_size_mb", "{report:#}");
        let pieces = &report["pieces"];
        let kept: Vec<(String, u64)> = pieces["kept"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| (k[0].as_str().unwrap().to_string(), k[1].as_u64().unwrap()))
            .collect();
        let mut on_disk: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("trace") && n.ends_with(".dat"))
            .collect();
        on_disk.sort_by_key(|n| {
            n.trim_start_matches("trace.")
                .trim_end_matches("dat")
                .trim_end_matches('.')
                .parse::<u64>()
                .unwrap_or(u64::MAX)
        });
        let names: Vec<&str> = kept.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(on_disk, names, "{pieces:#}");
        assert!(pieces["dropped"].as_u64() >= Some(1), "{pieces:#}");
        assert!(kept.len() >= 2, "{pieces:#}");
        let mut total = 0;
        let mut markers = 0;
        // Per CPU, the newest marker of the pieces before. A CPU's partly
        // filled sub-buffer reaches its reader only when full or at the end
        // (the writer moved to another CPU meanwhile), so a piece may hold a
        // CPU's older page: order holds per CPU, not across CPUs.
        let mut last_seen: std::collections::BTreeMap<u32, u64> = Default::default();
        for (name, size) in &kept {
            let path = out.join(name);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), *size, "{name}");
            assert!(*size <= 6 << 20, "{name} is {size} bytes, over 6 MiB");
            total += size;
            let listing = trace_cmd_report(&path);
            let numbers: Vec<(u32, u64)> = event_lines(&listing)
                .iter()
                .filter_map(|l| {
                    let cpu = crate::common::ReportLine::parse(l)?.cpu;
                    let n = l.split("fault-marker ").nth(1)?.split(' ').next()?;
                    Some((cpu, n.parse().ok()?))
                })
                .collect();
            // In recording order: each piece's markers of a CPU come after
            // that CPU's in the pieces before.
            let mut newest = last_seen.clone();
            for &(cpu, n) in &numbers {
                if let Some(prev) = last_seen.get(&cpu) {
                    assert!(
                        n > *prev,
                        "{name}: cpu{cpu}'s marker {n} is not after its {prev} of an earlier piece"
                    );
                }
                let e = newest.entry(cpu).or_insert(n);
                *e = (*e).max(n);
            }
            last_seen = newest;
            markers += numbers.len() as u64;
        }
        assert!(total <= 12 << 20, "the pieces kept take {total} bytes");
        assert_eq!(report["total_events"].as_u64(), Some(markers), "{pieces:#}");
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.contains(&format!("events:   {markers} "))
                && summary.contains(&format!("pieces: {} kept", kept.len())),
            "{summary:.2000}"
        );
        assert!(!out.join(".raw").exists(), "raw files left behind");
        eprintln!(
            "FIGURE rotate 6/12 MiB on 30 MiB: {} pieces kept ({total} bytes), {} dropped, {markers} events",
            kept.len(),
            pieces["dropped"]
        );
        s.finish();
    }
}

/// The number after `key` in a `per_cpu/cpuN/stats` text (0 when absent).
fn stat(stats: &str, key: &str) -> u64 {
    stats
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}
