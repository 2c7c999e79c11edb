//! Shared helpers for the integration tests: tracefs capture (under the
//! shared lock, with an instance guard), trace-cmd invocation and report
//! line parsing.
#![allow(dead_code)]

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use tracedat::{CaptureMeta, CpuData, Printer, TraceFile};

pub const TRACEFS: &str = "/sys/kernel/tracing";
pub const LOCK: &str = "/tmp/trace-recipe-tracefs.lock";

/// Exclusive flock on the shared tracefs lock file, released on drop.
pub struct TracefsLock(#[allow(dead_code)] File);

pub fn lock_tracefs() -> TracefsLock {
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK)
        .expect("open lock file");
    f.lock().expect("flock");
    TracefsLock(f)
}

/// A tracefs instance that is turned off and removed on drop.
pub struct Instance {
    pub path: PathBuf,
}

impl Instance {
    pub fn create(tag: &str) -> Instance {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let name = format!("tracedat-test-{tag}-{}-{n}", std::process::id());
        let path = Path::new(TRACEFS).join("instances").join(name);
        fs::create_dir(&path).expect("create instance");
        let inst = Instance { path };
        inst.write("tracing_on", "0");
        inst
    }
    pub fn write(&self, rel: &str, val: &str) {
        fs::write(self.path.join(rel), val).unwrap_or_else(|e| panic!("write {rel}: {e}"));
    }
    pub fn read(&self, rel: &str) -> Vec<u8> {
        read_file(&self.path.join(rel))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = fs::write(self.path.join("tracing_on"), "0");
        // Disable events so the instance can be removed.
        let _ = fs::write(self.path.join("events/enable"), "0");
        for _ in 0..50 {
            if fs::remove_dir(&self.path).is_ok() || !self.path.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!("could not remove instance {}", self.path.display());
    }
}

pub fn tracefs_usable() -> bool {
    Path::new(TRACEFS).join("instances").is_dir()
        && fs::metadata(Path::new(TRACEFS).join("events/sched/sched_switch")).is_ok()
}

/// Whether the tests run under CI: `CI` set to anything but empty, `0` or
/// `false` (`.ci/run` runs with `CI=true`). Under CI a missing prerequisite is a
/// failure, never a skip. The same rule as the main crate's tests' `in_ci`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"))
}

/// Whether `trace-cmd` runs. Under CI it must: a missing reference reader
/// fails the test instead of skipping its comparison.
pub fn have_trace_cmd() -> bool {
    let found = Command::new("trace-cmd")
        .arg("-h")
        .output()
        .map(|o| !o.stdout.is_empty() || !o.stderr.is_empty())
        .unwrap_or(false);
    assert!(
        found || !in_ci(),
        "CI must provide trace-cmd (the reference reader); scripts/test installs it"
    );
    found
}

/// A finished capture: metadata plus raw per-CPU page files in `dir`.
pub struct Capture {
    pub meta: CaptureMeta,
    pub cpus: Vec<CpuData>,
    pub dir: tempfile::TempDir,
    pub page_size: usize,
    /// Sum of `read events` over the CPUs' stats.
    pub read_events: u64,
}

pub fn read_file(p: &Path) -> Vec<u8> {
    tracedat::read_tracefs_file(p).unwrap_or_else(|e| panic!("{e}"))
}

/// Drain `per_cpu/cpuN/trace_pipe_raw` of an instance with non-blocking,
/// sub-buffer-sized reads until EAGAIN.
fn drain_cpu(inst: &Instance, cpu: u32, page: usize, out: &Path) -> u64 {
    let p = inst.path.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&p)
        .unwrap_or_else(|e| panic!("open {}: {e}", p.display()));
    let mut data = Vec::new();
    let mut buf = vec![0u8; page];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => {
                data.extend_from_slice(&buf[..k]);
                // Keep whole pages even if a read came back short.
                let rem = data.len() % page;
                if rem != 0 {
                    data.resize(data.len() + page - rem, 0);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => panic!("read {}: {e}", p.display()),
        }
    }
    fs::write(out, &data).expect("write cpu file");
    data.len() as u64
}

/// Record events in a fresh instance while `load` runs, and collect
/// everything `write_v6` needs. `events` are `(system, name)` pairs.
pub fn capture(
    tag: &str,
    events: &[(&str, &str)],
    setup: impl Fn(&Instance),
    load: impl Fn(&Instance),
) -> Capture {
    let inst = Instance::create(tag);
    setup(&inst);
    for (sys, ev) in events {
        inst.write(&format!("events/{sys}/{ev}/enable"), "1");
    }
    inst.write("tracing_on", "1");
    load(&inst);
    inst.write("tracing_on", "0");

    let header_page = inst.read("events/header_page");
    let page_size = tracedat::subbuffer_size(&header_page).expect("header_page");
    let mut cpu_count = 0u32;
    for e in fs::read_dir(inst.path.join("per_cpu")).expect("per_cpu") {
        let e = e.expect("dirent");
        if let Some(n) = e.file_name().to_str().and_then(|s| s.strip_prefix("cpu"))
            && let Ok(n) = n.parse::<u32>()
        {
            cpu_count = cpu_count.max(n + 1);
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cpus = Vec::new();
    for cpu in 0..cpu_count {
        let path = dir.path().join(format!("cpu{cpu}.raw"));
        drain_cpu(&inst, cpu, page_size, &path);
        cpus.push(CpuData { cpu, path });
    }
    let mut cpu_stats = Vec::new();
    let mut read_events = 0;
    for cpu in 0..cpu_count {
        let s =
            String::from_utf8_lossy(&inst.read(&format!("per_cpu/cpu{cpu}/stats"))).into_owned();
        for l in s.lines() {
            if let Some(v) = l.strip_prefix("read events:") {
                read_events += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
        cpu_stats.push(s);
    }
    let top = Path::new(TRACEFS);
    let mut ftrace_formats = Vec::new();
    let mut names: Vec<_> = fs::read_dir(inst.path.join("events/ftrace"))
        .expect("ftrace events")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("format").exists())
        .map(|e| e.path())
        .collect();
    names.sort();
    for p in names {
        ftrace_formats.push(read_file(&p.join("format")));
    }
    let mut event_formats: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
    for (sys, ev) in events {
        let f = read_file(&top.join(format!("events/{sys}/{ev}/format")));
        match event_formats.iter_mut().find(|(s, _)| s == sys) {
            Some((_, v)) => v.push(f),
            None => event_formats.push((sys.to_string(), vec![f])),
        }
    }
    let uname = Command::new("uname").arg("-snrm").output().expect("uname");
    let meta = CaptureMeta {
        header_page,
        header_event: inst.read("events/header_event"),
        ftrace_formats,
        event_formats,
        kallsyms: read_file(Path::new("/proc/kallsyms")),
        printk_formats: read_file(&top.join("printk_formats")),
        cmdlines: read_file(&top.join("saved_cmdlines")),
        cpu_count,
        trace_clock: String::from_utf8_lossy(&inst.read("trace_clock")).into_owned(),
        uname: String::from_utf8_lossy(&uname.stdout).trim().to_string(),
        version: "tracedat-test 0.1.0".into(),
        cpu_stats,
    };
    drop(inst);
    Capture {
        meta,
        cpus,
        dir,
        page_size,
        read_events,
    }
}

pub fn run(cmd: &mut Command) -> (String, String) {
    let o = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        o.status.success(),
        "{cmd:?} failed: {}\n{err}\n{out}",
        o.status
    );
    (out, err)
}

pub fn trace_cmd_report(path: &Path, extra: &[&str]) -> String {
    let (out, _) = run(Command::new("trace-cmd")
        .arg("report")
        .args(extra)
        .arg("-i")
        .arg(path));
    out
}

/// The comparable part of a report line: `head` is the exact text up to and
/// including the event name and its colon (`[BUFFER: ]COMM-PID [CPU] TIME:
/// NAME:`, padding included), or a whole `CPU:N [... DROPPED]` line; the
/// other members are parsed from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub head: String,
    pub pid: i32,
    pub cpu: u32,
    pub ts: String,
    pub name: String,
}

pub fn parse_line(l: &str) -> Option<Line> {
    if l.contains("EVENTS DROPPED]") {
        return Some(Line {
            head: l.trim().to_string(),
            pid: 0,
            cpu: 0,
            ts: String::new(),
            name: "DROPPED".into(),
        });
    }
    // Find "[NNN]" (the CPU column).
    let b = l.as_bytes();
    let mut i = 0;
    let mut at = None;
    while i + 5 <= b.len() {
        if b[i] == b'['
            && b[i + 4] == b']'
            && b[i + 1..i + 4].iter().all(|c| c.is_ascii_digit())
            && i > 0
            && b[i - 1] == b' '
        {
            at = Some(i);
            break;
        }
        i += 1;
    }
    let at = at?;
    let left = l[..at].trim_end();
    let (_, pid) = left.rsplit_once('-')?;
    let cpu: u32 = l[at + 1..at + 4].parse().ok()?;
    let rest = l[at + 5..].trim_start();
    let (ts, rest) = rest.split_once(": ")?;
    let name = rest.split(':').next()?.trim().to_string();
    let head_len = l.len() - rest.len() + name.len() + 1;
    Some(Line {
        head: l.get(..head_len)?.to_string(),
        pid: pid.trim().parse().ok()?,
        cpu,
        ts: ts.trim().to_string(),
        name,
    })
}

/// Parse `trace-cmd report` output into lines (skipping the `cpus=N`
/// header and continuation lines such as stack frames).
pub fn parse_report(s: &str) -> Vec<Line> {
    s.lines()
        .filter(|l| !l.starts_with("cpus="))
        .filter_map(parse_line)
        .collect()
}

/// Our reader's records printed by one [`Printer`] (which, like trace-cmd,
/// names a task its saved cmdlines lack from the events seen before), then
/// parsed the same way.
pub fn our_report(f: &TraceFile) -> (String, Vec<Line>) {
    let mut out = Vec::new();
    let mut printer = Printer::new(f);
    for r in f.records() {
        let r = r.expect("record");
        printer.write(&r, &mut out).expect("format");
    }
    let s = String::from_utf8(out).expect("utf8");
    let lines = parse_report(&s);
    (s, lines)
}

pub fn assert_same_lines(ours: &[Line], theirs: &[Line], what: &str) {
    for (i, (a, b)) in ours.iter().zip(theirs.iter()).enumerate() {
        assert_eq!(a, b, "{what}: line {i} differs");
    }
    assert_eq!(
        ours.len(),
        theirs.len(),
        "{what}: {} lines from us, {} from trace-cmd",
        ours.len(),
        theirs.len()
    );
}
