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
        let o = crate::common::trace_recipe(&run_args(
            &s.recipe,
            &out,
            &[],
            &["sh", "-c", &writer],
        ));
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
        assert_eq!(report["stop_reason"], "output file system full", "{report:#}");
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
        assert!(markers > 1000, "only {markers} markers kept:\n{listing:.2000}");
        assert_eq!(
            report["total_events"].as_u64(),
            Some(markers),
            "{report:#}"
        );
        assert!(!out.join(".raw").exists(), "the raw files were left behind");
        drop(file);
        fs.unmount();
        s.finish();
    }
}
