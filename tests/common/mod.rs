//! Shared test helpers: the tracefs lock, snapshots, the binary, temp recipes.

use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Output;

pub mod scenario;
pub mod snapshot;
pub use scenario::Scenario;
pub use snapshot::Snapshot;
use trace_recipe::tracefs::{INSTANCE_PREFIX, Tracefs};

/// Whether the tests run under CI: `CI` set to anything but empty, `0` or
/// `false` (`.ci/run` runs with `CI=true`). Under CI a missing prerequisite is a
/// failure, never a skip. The same rule as the other test crate's `in_ci`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"))
}

/// Lock file shared by every test suite of the repo that touches tracefs.
pub const LOCK: &str = "/tmp/trace-recipe-tracefs.lock";

pub fn tracefs() -> Tracefs {
    Tracefs::locate_or_mount()
        .expect("tracefs must be mounted (run as root)")
        .0
}

/// Holds the tracefs lock and the snapshot taken when it was acquired; on drop
/// (test end, also on panic) it checks that tracefs is exactly as it was, but
/// for the irreversible changes a run declared ([`TracefsGuard::allow_declared`]).
pub struct TracefsGuard {
    _lock: File,
    before: Snapshot,
    tracefs: Tracefs,
    /// `(file, before)` of each declared irreversible change.
    allowed: Vec<(String, String)>,
}

impl TracefsGuard {
    pub fn acquire() -> TracefsGuard {
        // Under nextest every test is a process of its own and the `tracefs`
        // test group (.config/nextest.toml: the tests in a module's `mod
        // tracefs`) is what runs these tests one at a time; the lock alone keeps
        // them correct but lets a test wait on it in a slot another test could use.
        if let Ok(group) = std::env::var("NEXTEST_TEST_GROUP") {
            assert_eq!(
                group,
                "tracefs",
                "{} takes the tracefs lock outside nextest's `tracefs` test group: move it into its module's `mod tracefs`",
                std::env::var("NEXTEST_TEST_NAME").unwrap_or_default()
            );
        }
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(LOCK)
            .expect("open lock file");
        rustix::fs::flock(lock.as_fd(), rustix::fs::FlockOperation::LockExclusive).expect("flock");
        let tracefs = tracefs();
        let before = Snapshot::take(&tracefs);
        TracefsGuard {
            _lock: lock,
            before,
            tracefs,
            allowed: Vec::new(),
        }
    }

    /// How top-level `file` read when the guard was acquired.
    pub fn before(&self, file: &str) -> Option<&str> {
        self.before.0.get(file).map(|v| v.trim_end())
    }

    /// Allows the irreversible changes declared in a run's `report.json` (its
    /// `irreversible` entries with `declared: true`): the file may go from the
    /// declared before-value to an allocated size, nothing else. Returns them.
    pub fn allow_declared(&mut self, report_json: &Path) -> Vec<serde_json::Value> {
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(report_json).unwrap()).unwrap();
        let declared: Vec<serde_json::Value> = report["irreversible"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|i| i["declared"] == true)
            .collect();
        for i in &declared {
            let (file, before) = (i["file"].as_str().unwrap(), i["before"].as_str().unwrap());
            self.allowed.push((file.to_string(), before.to_string()));
        }
        declared
    }

    /// Allows what the kernel does the first time anything traces in the
    /// top-level ring buffer, which a tool tracing there (perf-tools) does on
    /// a freshly booted machine: `buffer_size_kb` from its unallocated
    /// reading (`7 (expanded: 1408)`) to an allocated size, never undone.
    /// Nothing else; our own runs trace in instances and never need it.
    pub fn allow_top_level_allocation(&mut self) {
        if let Some(before) = self.before("buffer_size_kb")
            && before.contains("expanded")
        {
            self.allowed
                .push(("buffer_size_kb".to_string(), before.to_string()));
        }
    }

    /// What differs from the snapshot taken at acquire (empty when nothing does).
    pub fn changes(&self) -> Vec<String> {
        self.before.diff(&Snapshot::take(&self.tracefs))
    }

    /// Asserts tracefs equals the snapshot taken at acquire, but for the
    /// declared irreversible changes: `buffer_size_kb` from its declared
    /// unallocated reading to an allocated size (a plain number).
    pub fn assert_unchanged(&self) {
        let after = Snapshot::take(&self.tracefs);
        let diff: Vec<String> = self
            .before
            .diff(&after)
            .into_iter()
            .filter(|line| {
                !self.allowed.iter().any(|(file, before)| {
                    let now = after.0.get(file).map_or("", |v| v.trim());
                    line.starts_with(&format!("{file}: "))
                        && self.before(file) == Some(before.as_str())
                        && now.parse::<u64>().is_ok()
                })
            })
            .collect();
        assert!(diff.is_empty(), "tracefs changed:\n{}", diff.join("\n"));
        assert_no_leftovers(&self.tracefs);
    }
}

impl Drop for TracefsGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        self.assert_unchanged();
    }
}

/// No instance and no probe of ours remains.
pub fn assert_no_leftovers(t: &Tracefs) {
    let ours: Vec<String> = t
        .instances()
        .into_iter()
        .filter(|i| i.starts_with(INSTANCE_PREFIX))
        .collect();
    assert!(ours.is_empty(), "instances left behind: {ours:?}");
    for f in ["uprobe_events", "kprobe_events", "dynamic_events"] {
        if let Ok(text) = t.read(f) {
            assert!(
                !text.contains("trace_recipe"),
                "probe left behind in {f}: {text}"
            );
        }
    }
}

/// A recording shared by the tests that only read it: the folder
/// `target/tmp/shared-recordings/RUN/NAME`, made by `record(folder)` for the
/// first test of this test run that asks for it (RUN is nextest's run id, so
/// each test process of one run finds it; under `cargo test`, the process id)
/// and read by the rest. `record` runs under a lock of its own, holds the
/// tracefs lock itself (every caller is a `mod tracefs` test) and must leave
/// everything it needs in the folder; a recording that failed is made again by
/// the next test, which then fails the same way. Recordings of earlier runs are
/// removed when a run makes its first one.
pub fn shared_recording(name: &str, record: impl FnOnce(&Path)) -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("shared-recordings");
    let run = std::env::var("NEXTEST_RUN_ID").unwrap_or_else(|_| std::process::id().to_string());
    let here = root.join(&run);
    std::fs::create_dir_all(&here).unwrap();
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(here.join(format!("{name}.lock")))
        .unwrap();
    rustix::fs::flock(lock.as_fd(), rustix::fs::FlockOperation::LockExclusive).expect("flock");
    let folder = here.join(name);
    if !folder.join(".done").exists() {
        for old in std::fs::read_dir(&root).unwrap().flatten() {
            if old.file_name() != run.as_str() {
                let _ = std::fs::remove_dir_all(old.path());
            }
        }
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder).unwrap();
        record(&folder);
        std::fs::write(folder.join(".done"), "").unwrap();
    }
    folder
}

/// A trace.dat `dir/t.dat` of one record of tracedat's testing event `small`
/// (pid 7, its string field `text`), whose event is `SYSTEM:small` with format
/// `format`, the task comm `comm` and the kernel `uname`: the one-record file
/// the hostile-input tests start from. Returns its path.
pub fn one_record_trace(
    dir: &Path,
    text: &[u8],
    system: &str,
    format: String,
    comm: &str,
    uname: &str,
) -> PathBuf {
    use tracedat::testing::{Endian, Page, small};
    let e = Endian::LITTLE64;
    let mut page = Page::new(e, 4096, 1_000_000);
    page.event(10, &small(e, 7, 1, text));
    let raw = dir.join("cpu0.raw");
    std::fs::write(&raw, page.finish(None)).unwrap();
    let meta = tracedat::CaptureMeta {
        header_page: e.header_page(4096).into_bytes(),
        header_event: Vec::new(),
        ftrace_formats: Vec::new(),
        event_formats: vec![(system.to_string(), vec![format.into_bytes()])],
        kallsyms: Vec::new(),
        printk_formats: Vec::new(),
        cmdlines: format!("7 {comm}\n").into_bytes(),
        cpu_count: 1,
        trace_clock: "[local] global".into(),
        uname: uname.to_string(),
        version: "test".into(),
        cpu_stats: vec![String::new()],
    };
    let dat = dir.join("t.dat");
    tracedat::write_v6(
        File::create(&dat).unwrap(),
        &meta,
        &[tracedat::CpuData { cpu: 0, path: raw }],
    )
    .unwrap();
    dat
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_trace-recipe"))
}

pub fn trace_recipe(args: &[&str]) -> Output {
    std::process::Command::new(bin())
        .args(args)
        .output()
        .expect("run trace-recipe")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts that the command `o` exited with `code`, showing its stdout and
/// stderr when it did not.
#[track_caller]
pub fn assert_exit(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
}

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The zstd-compressed file `packed` (a path in the repository) unpacked
/// into `dir` as `trace.dat`; returns its path.
pub fn unpacked_trace(packed: &str, dir: &Path) -> std::path::PathBuf {
    let dat = dir.join("trace.dat");
    let bytes = std::fs::read(repo().join(packed)).unwrap();
    std::fs::write(&dat, zstd::decode_all(&bytes[..]).unwrap()).unwrap();
    dat
}

/// Every trace.dat of tracedat's corpora unpacked into `dir`: other
/// people's recordings (crates/tracedat/tests/corpus) and those of the
/// lab's guests (crates/tracedat/tests/lab-corpus: x86-64 kernels from 6.1
/// to 7.2, arm64, big-endian s390x; compressed, several buffers, other
/// clocks, `--tsc2nsec`, `extract`, `split`, `convert`).
pub fn corpus_files(dir: &Path) -> Vec<PathBuf> {
    let root = repo().join("crates/tracedat/tests");
    let mut files = Vec::new();
    for e in std::fs::read_dir(root.join("corpus")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".zst") {
            let out = dir.join(stem);
            let bytes = std::fs::read(&p).unwrap();
            std::fs::write(&out, zstd::decode_all(&bytes[..]).unwrap()).unwrap();
            files.push(out);
        } else if name.ends_with(".dat") {
            files.push(p);
        }
    }
    for e in std::fs::read_dir(root.join("lab-corpus")).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with(".tar.zst") {
            let packed = std::fs::File::open(&p).unwrap();
            let mut tar = tar::Archive::new(zstd::Decoder::new(packed).unwrap());
            for entry in tar.entries().unwrap() {
                let mut entry = entry.unwrap();
                let out = dir.join(entry.path().unwrap().file_name().unwrap());
                entry.unpack(&out).unwrap();
                files.push(out);
            }
        }
    }
    files.sort();
    files
}

/// Writes `body` as a recipe in `dir` and returns its path.
pub fn write_recipe(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

/// `trace-cmd report -i FILE` output (panics when it fails).
pub fn trace_cmd_report(file: &Path) -> String {
    trace_cmd(&["report".as_ref(), "-i".as_ref(), file.as_os_str()])
}

/// Runs `trace-cmd ARGS...` (through duct) and returns its stdout; panics with
/// its stderr when it fails.
pub fn trace_cmd(args: &[&std::ffi::OsStr]) -> String {
    let out = duct::cmd("trace-cmd", args)
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .expect("trace-cmd is installed (scripts/test installs it)");
    assert!(
        out.status.success(),
        "trace-cmd {args:?} failed: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Lines of a `trace-cmd report` listing after `cpus=N`, one per record plus the
/// `=> symbol` lines of kernel stacks.
pub fn listing_lines(listing: &str) -> Vec<&str> {
    listing
        .lines()
        .filter(|l| !l.starts_with("cpus=") && !l.trim().is_empty())
        .collect()
}

/// The record lines of a listing: one per event, without stack lines and
/// without lost-events markers (`CPU:N [N EVENTS DROPPED]`).
pub fn event_lines(listing: &str) -> Vec<&str> {
    listing_lines(listing)
        .into_iter()
        .filter(|l| !l.trim_start().starts_with("=>") && !is_lost_marker(l))
        .collect()
}

/// Whether `line` is the `CPU:N [N EVENTS DROPPED]` (or `[EVENTS DROPPED]`)
/// line trace-cmd prints before the first record after a loss.
pub fn is_lost_marker(line: &str) -> bool {
    line.starts_with("CPU:") && line.ends_with("EVENTS DROPPED]")
}

/// One event line of a `trace-cmd report` listing (ours or trace-cmd's), split
/// into its columns: the tests' one report-line parser, shared with tracedat's.
pub use tracedat::testing::report::ReportLine;

/// Event name of a report line (`sched_switch`).
pub fn event_name(line: &str) -> Option<&str> {
    ReportLine::parse(line).map(|l| l.event)
}

/// Number of steps `check --plan` prints for `recipe`.
pub fn plan_len(recipe: &Path) -> usize {
    let out = trace_recipe(&["check", "--plan", recipe.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    text(&out.stdout)
        .lines()
        .filter(|l| {
            l.trim_start()
                .split('.')
                .next()
                .is_some_and(|n| n.parse::<usize>().is_ok())
        })
        .count()
}

/// The arguments of `trace-recipe run RECIPE -o OUT FLAGS... [-- CMD...]` (no
/// `--` when `cmd` is empty).
pub fn run_args<'a>(
    recipe: &'a Path,
    out: &'a Path,
    flags: &[&'a str],
    cmd: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec!["run", recipe.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend(flags);
    if !cmd.is_empty() {
        args.push("--");
        args.extend(cmd);
    }
    args
}

/// `trace-recipe run RECIPE -o OUT -- CMD...` (no `--` when `cmd` is empty).
pub fn run_recipe(recipe: &Path, out: &Path, cmd: &[&str]) -> Output {
    trace_recipe(&run_args(recipe, out, &[], cmd))
}

/// Reads `child`'s piped stderr until a line says it is recording (`recording
/// until`); returns the reader (to read the rest later) and what was read.
/// Panics when stderr ends first.
pub fn until_recording(
    child: &mut std::process::Child,
) -> (std::io::BufReader<std::process::ChildStderr>, String) {
    use std::io::BufRead;
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr piped"));
    let mut seen = String::new();
    while !seen.contains("recording until") {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        seen.push_str(&line);
    }
    assert!(seen.contains("recording until"), "{seen}");
    (stderr, seen)
}

/// `trace-recipe run RECIPE -o OUT --bundle -- CMD...`: a run that also packs
/// its output folder into `OUT.tar.zst`.
pub fn run_bundled(recipe: &Path, out: &Path, cmd: &[&str]) -> Output {
    trace_recipe(&run_args(recipe, out, &["--bundle"], cmd))
}

/// The first section of a summary.txt: after the run's header (which ends
/// with the `lost events:` line and a blank line), up to the next blank line.
/// It is the section of the analysis report.json names `answer`.
pub fn first_section(summary: &str) -> &str {
    let rest = summary
        .find("\nlost events:")
        .and_then(|i| {
            summary[i + 1..]
                .find("\n\n")
                .map(|j| &summary[i + 1 + j + 2..])
        })
        .unwrap_or_else(|| panic!("no header in the summary:\n{summary}"));
    rest.split("\n\n").next().unwrap_or("")
}

/// function_graph self time (ns) per call path (`outer;...;inner`), per task,
/// from trace-cmd's drawing of the graph: `f() {` opens a call, `f();` is a
/// whole call with its duration, `}` closes one with its duration; a call's
/// self time is its duration less its callees'.
pub fn funcgraph_folded(listing: &str) -> std::collections::BTreeMap<String, u64> {
    let mut open: std::collections::BTreeMap<&str, Vec<(&str, u64)>> =
        std::collections::BTreeMap::new();
    let mut folded = std::collections::BTreeMap::new();
    for line in listing.lines() {
        let Some((head, graph)) = line
            .split_once("funcgraph_entry:")
            .or_else(|| line.split_once("funcgraph_exit:"))
        else {
            continue;
        };
        let task = head.split_whitespace().next().unwrap();
        let (time, call) = graph.split_once('|').unwrap();
        // `+ 17.924 us`: microseconds with three decimals, so whole ns.
        let ns = time
            .split_whitespace()
            .find(|t| t.contains('.'))
            .map(|t| t.replace('.', "").parse::<u64>().unwrap());
        let stack = open.entry(task).or_default();
        let call = call.trim();
        let mut close = |stack: &mut Vec<(&str, u64)>, name: &str, callees: u64, ns: u64| {
            let mut path: Vec<&str> = stack.iter().map(|(n, _)| *n).collect();
            path.push(name);
            *folded.entry(path.join(";")).or_insert(0) += ns - callees;
            if let Some(parent) = stack.last_mut() {
                parent.1 += ns;
            }
        };
        if let Some(name) = call.strip_suffix("() {") {
            stack.push((name, 0));
        } else if let Some(name) = call.strip_suffix("();") {
            close(stack, name, 0, ns.unwrap());
        } else if call.starts_with('}') {
            let (name, callees) = stack.pop().unwrap();
            close(stack, name, callees, ns.unwrap());
        }
    }
    folded
}

/// A folded-stacks text (`path weight` lines) as a map.
pub fn parse_folded(text: &str) -> std::collections::BTreeMap<String, u64> {
    text.lines()
        .map(|l| {
            let (path, n) = l.rsplit_once(' ').unwrap();
            (path.to_string(), n.parse().unwrap())
        })
        .collect()
}

/// The pids a sched event's fields name, as trace-cmd prints them
/// (`comm:PID [prio]`): a switch's prev and next, a wakeup's woken task first.
pub fn named_pids(fields: &str) -> Vec<i32> {
    fields
        .split_whitespace()
        .filter_map(|w| w.rsplit_once(':')?.1.parse().ok())
        .collect()
}

/// Whether a listed event is one of the run's own by the rule a run keeps
/// them out with (docs/src/scope.md), `own` being its thread ids
/// (report.json `recorder.excluded_tids`): a `sched_switch` between two of
/// them or one of them and the idle task, a wakeup of one of them, any other
/// event one of them fired outside interrupt context (`irq`: the listing's
/// latency flags say hard irq, softirq or NMI; pass false when unknown, which
/// only counts more events as the run's).
pub fn is_runs_own(
    event: &str,
    pid: i32,
    irq: bool,
    fields: &str,
    own: &std::collections::BTreeSet<i32>,
) -> bool {
    let named = named_pids(fields);
    match event {
        "sched_switch" => {
            named.len() >= 2
                && named[..2].iter().all(|p| *p == 0 || own.contains(p))
                && named[..2].iter().any(|p| own.contains(p))
        }
        "sched_wakeup" | "sched_wakeup_new" | "sched_waking" => {
            named.first().is_some_and(|p| own.contains(p))
        }
        _ => own.contains(&pid) && !irq,
    }
}
