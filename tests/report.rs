//! Analyses and report formats on recorded traces: latency numbers agree with
//! numbers computed independently from `trace-cmd report -t`, templates render
//! the same numbers as report.json, report.html loads in headless Chromium and
//! shows its charts, and `[output] max_lost_percent` decides the exit code.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{
    ReportLine, TracefsGuard, assert_exit, repo, text, trace_recipe, write_recipe,
};

const LATENCY_RECIPE: &str = r#"name = "lat"
description = "syscall and wakeup latency"
duration = "30s"
[buffer]
size_kb = 4096
[scope]
follow_forks = true
[[events]]
name = "syscalls:sys_enter_read"
[[events]]
name = "syscalls:sys_exit_read"
[[events]]
name = "syscalls:sys_enter_clock_nanosleep"
[[events]]
name = "syscalls:sys_exit_clock_nanosleep"
[[events]]
name = "sched:sched_wakeup"
[[events]]
name = "sched:sched_switch"
[output]
reports = ["summary", "json", "html"]
"#;

const WORKLOAD: &str =
    "for i in 1 2 3 4 5 6 7 8; do sleep 0.01; head -c 200000 /dev/zero > /dev/null; done";

/// Runs `recipe` with `sh -c WORKLOAD` into `out`; returns the exit code and stderr.
fn run(recipe: &Path, out: &Path, workload: &str) -> (Option<i32>, String) {
    let o = crate::common::run_recipe(recipe, out, &["sh", "-c", workload]);
    (o.status.code(), text(&o.stderr))
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `report DAT --format json --analysis ANALYSES`, parsed.
fn report_json(dat: &Path, analyses: &str) -> serde_json::Value {
    let o = trace_recipe(&[
        "report",
        dat.to_str().unwrap(),
        "--format",
        "json",
        "--analysis",
        analyses,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `comm:pid [prio]` (trace-cmd's sched plugin) → pid.
fn sched_pid(s: &str) -> i32 {
    let who = s.trim().split(" [").next().unwrap();
    who.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// Nearest-rank quantile of sorted values.
fn quantile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Compares one JSON latency group with exact values.
fn assert_group(g: &serde_json::Value, mut exact: Vec<u64>, what: &str) {
    exact.sort_unstable();
    assert!(
        !exact.is_empty(),
        "{what}: no samples in trace-cmd's listing"
    );
    assert_eq!(g["count"], exact.len() as u64, "{what}: count");
    assert_eq!(g["min_ns"], exact[0], "{what}: min");
    assert_eq!(g["max_ns"], *exact.last().unwrap(), "{what}: max");
    assert_eq!(g["total_ns"], exact.iter().sum::<u64>(), "{what}: total");
    for (key, q) in [("p50_ns", 0.5), ("p90_ns", 0.9), ("p99_ns", 0.99)] {
        let want = quantile(&exact, q);
        let got = g[key].as_u64().unwrap();
        assert!(
            got.abs_diff(want) <= want / 128 + 1,
            "{what}: {key} {got} vs exact {want}"
        );
    }
    let rows: u64 = g["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    assert_eq!(rows, exact.len() as u64, "{what}: histogram rows add up");
}

#[test]
fn a_user_template_renders_the_numbers_of_report_json() {
    let fixture = repo().join("crates/tracedat/tests/fixtures/trace-cmd-v7-zstd.dat");
    let dir = tempfile::tempdir().unwrap();
    let tpl = dir.path().join("t.j2");
    std::fs::write(
        &tpl,
        "total={{ total_events }} lost={{ lost_total }}\n{% for n, c in events|items %}{{ n }}={{ c }}\n{% endfor %}",
    )
    .unwrap();
    let o = trace_recipe(&[
        "report",
        fixture.to_str().unwrap(),
        "--format",
        "summary",
        "--template",
        tpl.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j = trace_recipe(&["report", fixture.to_str().unwrap(), "--format", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    let mut want = format!(
        "total={} lost={}\n",
        report["total_events"], report["lost_total"]
    );
    for (n, c) in report["events"].as_object().unwrap() {
        want.push_str(&format!("{n}={c}\n"));
    }
    assert_eq!(text(&o.stdout), want);

    // A broken template: what, where, what to do; nothing on stdout.
    std::fs::write(&tpl, "ok\n{% for x in %}\n").unwrap();
    let o = trace_recipe(&[
        "report",
        fixture.to_str().unwrap(),
        "--format",
        "summary",
        "--template",
        tpl.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    let err = text(&o.stderr);
    assert!(
        err.contains(tpl.to_str().unwrap()) && err.contains("line 2") && err.contains("help:"),
        "{err}"
    );
}

#[test]
fn a_recipe_template_that_does_not_compile_is_refused_by_check_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.j2"), "{{ unclosed\n").unwrap();
    let recipe = write_recipe(
        dir.path(),
        "r.toml",
        "name = \"t\"\ndescription = \"t\"\n[[events]]\nname = \"sched:sched_switch\"\n[output]\ntemplate = \"bad.j2\"\nmax_lost_percent = 150\n",
    );
    let o = trace_recipe(&["check", recipe.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let out = text(&o.stdout);
    assert!(out.contains("r.toml:6:"), "{out}");
    assert!(out.contains("bad.j2"), "{out}");
    assert!(
        out.contains("r.toml:7:") && out.contains("max_lost_percent"),
        "{out}"
    );
}

/// Chromium's binary, or None (then a test fails under CI=true).
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

fn headless(chrome: &str, profile: &Path) -> Command {
    let mut c = Command::new(chrome);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--enable-logging=stderr",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// Chromium's binary; `None` (the test then returns) when it is missing,
/// which fails under CI=true.
fn chromium_or_skip() -> Option<&'static str> {
    let chrome = chromium();
    if chrome.is_none() {
        assert!(
            !crate::common::in_ci(),
            "chromium is missing: scripts/test installs it"
        );
        eprintln!("skipped: chromium is not installed (scripts/test installs it)");
    }
    chrome
}

/// A report.html as headless Chromium shows it.
struct Loaded {
    /// The DOM after loading (`--dump-dom`).
    dom: String,
    /// A screenshot 1000 px wide and `height` high, as pixels of `channels` bytes.
    pixels: Vec<u8>,
    channels: usize,
}

/// Checks that the page at `html_path` fetches nothing from anywhere, loads
/// it in headless Chromium (the page may log no error) and takes a
/// screenshot `height` px high, kept at `keep` when given.
fn load_in_chromium(chrome: &str, html_path: &Path, height: u32, keep: Option<&Path>) -> Loaded {
    let html = std::fs::read_to_string(html_path).unwrap();
    // Self-contained: nothing is fetched from anywhere, and nothing runs.
    for needle in [
        "<script", "<link", "<img", "src=", "url(", "@import", "onload",
    ] {
        assert!(!html.contains(needle), "report.html uses `{needle}`");
    }
    let url = format!("file://{}", html_path.display());
    let profile = tempfile::tempdir().unwrap();
    let dom = headless(chrome, profile.path())
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(dom.status.success(), "{}", text(&dom.stderr));
    let log = text(&dom.stderr);
    assert!(
        !log.contains("CONSOLE") && !log.contains("Uncaught"),
        "the page logged errors:\n{log}"
    );
    let shot = profile.path().join("shot.png");
    let s = headless(chrome, profile.path())
        .arg(format!("--window-size=1000,{height}"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(s.status.success(), "{}", text(&s.stderr));
    if let Some(keep) = keep {
        std::fs::copy(&shot, keep).unwrap();
    }
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    buf.truncate(info.buffer_size());
    Loaded {
        dom: text(&dom.stdout),
        pixels: buf,
        channels,
    }
}

/// A recipe whose stacks (a `stacktrace` trigger on sched_switch) feed a
/// flame graph, whose sched events feed the profile, and whose second
/// expectation fails.
const FLAME_RECIPE: &str = r#"name = "flame"
description = "where tasks switch out, and a failed expectation"
duration = "30s"
[scope]
follow_forks = true
[[events]]
name = "sched:sched_switch"
stacktrace = true
[[events]]
name = "sched:sched_wakeup"
[[expect]]
that = "count(sched:sched_wakeup) >= 1"
[[expect]]
that = "count(sched:sched_switch) < 3"
[output]
reports = ["summary", "json", "html"]
"#;

/// Folded stacks counted from `trace-cmd report`'s listing: each `<stack
/// trace >` record under the event before it on its CPU (`sched:` or
/// `syscalls:` by the event's name), its `=> SYMBOL (ADDR)` frames outermost first.
fn folded_from_listing(listing: &str) -> std::collections::BTreeMap<String, u64> {
    let mut last_on_cpu: HashMap<String, String> = HashMap::new();
    let mut stacks: Vec<(String, Vec<&str>)> = Vec::new();
    for l in listing.lines() {
        if let Some(frame) = l.strip_prefix("=> ") {
            stacks
                .last_mut()
                .unwrap()
                .1
                .push(frame.split(' ').next().unwrap());
            continue;
        }
        let Some(r) = ReportLine::parse(l) else {
            continue;
        };
        let cpu = l
            .split('[')
            .nth(1)
            .unwrap()
            .split(']')
            .next()
            .unwrap()
            .to_string();
        if r.event == "kernel_stack" {
            let event = last_on_cpu.get(&cpu).cloned().unwrap_or_default();
            stacks.push((event, Vec::new()));
        } else {
            let system = if r.event.starts_with("sys_") {
                "syscalls"
            } else {
                "sched"
            };
            last_on_cpu.insert(cpu, format!("{system}:{}", r.event));
        }
    }
    let mut folded = std::collections::BTreeMap::new();
    for (event, frames) in stacks {
        let path: Vec<&str> = std::iter::once(event.as_str())
            .chain(frames.into_iter().rev())
            .collect();
        *folded.entry(path.join(";")).or_insert(0) += 1;
    }
    folded
}

/// function_graph recorded in the kernel lab (6.1 and 6.12, kept in
/// crates/tracedat/tests/funcgraph/): `report --format folded-funcgraph` gives
/// each call path the self time trace-cmd's drawing of the graph adds up, and
/// report.html draws it.
#[test]
fn funcgraph_folded_call_paths_agree_with_trace_cmd_on_lab_recordings() {
    let dir = tempfile::tempdir().unwrap();
    for kernel in ["6.1.0-56-amd64", "6.12.117+deb12-amd64"] {
        let zst = repo().join(format!(
            "crates/tracedat/tests/funcgraph/lab-{kernel}.dat.zst"
        ));
        let dat = dir.path().join(format!("{kernel}.dat"));
        let bytes = zstd::decode_all(std::fs::File::open(&zst).unwrap()).unwrap();
        std::fs::write(&dat, bytes).unwrap();
        let o = trace_recipe(&[
            "report",
            dat.to_str().unwrap(),
            "--format",
            "folded-funcgraph",
        ]);
        assert!(o.status.success(), "{kernel}: {}", text(&o.stderr));
        let ours = crate::common::parse_folded(&text(&o.stdout));
        assert!(
            ours.keys()
                .any(|p| p.starts_with("do_sys_openat2;do_filp_open;path_openat")),
            "{kernel}: {ours:?}"
        );
        let theirs = crate::common::funcgraph_folded(&crate::common::trace_cmd_report(&dat));
        assert_eq!(ours, theirs, "{kernel}");
        let o = trace_recipe(&["report", dat.to_str().unwrap(), "--format", "html"]);
        let page = text(&o.stdout);
        assert!(
            page.contains(r#"id="flame-funcgraph""#) && page.contains("<title>do_sys_openat2 ("),
            "{kernel}: no function_graph flame graph"
        );
    }
}

#[test]
fn top_stacks_of_a_trace_cmd_file_match_its_listing() {
    let fixture = repo().join("crates/tracedat/tests/fixtures/trace-cmd-v7-zstd.dat");
    let listing = std::fs::read_to_string(
        repo().join("crates/tracedat/tests/fixtures/trace-cmd-v7-zstd.report"),
    )
    .unwrap();
    // trace-cmd prints each kernel_stack as `<stack trace >` then `=> SYMBOL (ADDR)` lines.
    let mut stacks: Vec<Vec<&str>> = Vec::new();
    for l in listing.lines() {
        if l.contains("<stack trace >") {
            stacks.push(Vec::new());
        } else if let Some(frame) = l.strip_prefix("=> ") {
            stacks
                .last_mut()
                .unwrap()
                .push(frame.split(' ').next().unwrap());
        }
    }
    let o = trace_recipe(&["report", fixture.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &report["stacks"];
    assert_eq!(s["total"], stacks.len() as u64);
    let top = &s["top"][0];
    let same = stacks.iter().filter(|st| **st == stacks[0]).count();
    assert_eq!(top["count"], same as u64);
    let frames: Vec<&str> = top["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().split('+').next().unwrap())
        .collect();
    assert_eq!(frames, stacks[0]);
    assert_eq!(top["event"], "sched:sched_process_exec");
}

/// A v7 file as trace-cmd built with zlib writes it (the trace-cmd fixture
/// rewritten block by block by `tracedat::testing::zlib`; this host's
/// trace-cmd 3.1.6 has only zstd): `report` lists it line for line as
/// trace-cmd lists the zstd original, and its analyses count the same.
#[test]
fn a_zlib_trace_cmd_file_lists_as_trace_cmd_lists_its_zstd_original() {
    let zstd = repo().join("crates/tracedat/tests/fixtures/trace-cmd-v7-zstd.dat");
    let dir = tempfile::tempdir().unwrap();
    let zlib = dir.path().join("trace-cmd-v7-zlib.dat");
    let bytes = tracedat::testing::zlib::zstd_to_zlib(&std::fs::read(&zstd).unwrap());
    std::fs::write(&zlib, bytes).unwrap();
    let ours = |dat: &Path, args: &[&str]| {
        let mut all = vec!["report", dat.to_str().unwrap()];
        all.extend(args);
        let o = trace_recipe(&all);
        assert_exit(&o, 0);
        text(&o.stdout)
    };
    let listing = ours(&zlib, &[]);
    assert!(listing.contains(": hello-fixture\n"), "{listing}");
    assert_eq!(listing, crate::common::trace_cmd_report(&zstd));
    assert_eq!(listing, ours(&zstd, &[]));
    let counts = |dat: &Path| {
        let r: serde_json::Value = serde_json::from_str(&ours(dat, &["--format", "json"])).unwrap();
        (
            r["total_events"].clone(),
            r["events"].clone(),
            r["cpus"].clone(),
        )
    };
    assert_eq!(counts(&zlib), counts(&zstd));
}

/// LATENCY_RECIPE run once around `sh -c WORKLOAD` for the tests that read
/// it (the latency numbers, report.html in Chromium): the folder holds the
/// recipe, the output folder `out` and the run's `stderr`.
fn latency_recording() -> PathBuf {
    crate::common::shared_recording("report-latency", |dir| {
        let guard = TracefsGuard::acquire();
        let recipe = write_recipe(dir, "lat.toml", LATENCY_RECIPE);
        let (code, stderr) = run(&recipe, &dir.join("out"), WORKLOAD);
        assert_eq!(code, Some(0), "{stderr}");
        std::fs::write(dir.join("stderr"), &stderr).unwrap();
        guard.assert_unchanged();
    })
}

/// Runs a recipe of sched_switch (with `switch_filter`, if any) and
/// sched_process_exit, both with `stacktrace = true`, around `sh -c WORKLOAD`
/// under the tracefs lock; returns the temporary folder and the trace.dat in it.
fn record_stacks(switch_filter: &str, workload: &str) -> (tempfile::TempDir, PathBuf) {
    let guard = TracefsGuard::acquire();
    let dir = tempfile::tempdir().unwrap();
    let recipe = write_recipe(
        dir.path(),
        "stacks.toml",
        &format!(
            "name = \"stacks\"\ndescription = \"t\"\nduration = \"30s\"\n[scope]\nfollow_forks = true\n[[events]]\nname = \"sched:sched_switch\"\n{switch_filter}stacktrace = true\n[[events]]\nname = \"sched:sched_process_exit\"\nstacktrace = true\n"
        ),
    );
    let out = dir.path().join("out");
    let (code, stderr) = run(&recipe, &out, workload);
    guard.assert_unchanged();
    assert_eq!(code, Some(0), "{stderr}");
    (dir, out.join("trace.dat"))
}

const PER_TASK_RECIPE: &str = r#"name = "per-task"
description = "Which of the workload's tasks waits longest to run after a wakeup, and which handlers interrupt it?"
duration = "30s"
[buffer]
size_kb = 8192
[[events]]
name = "sched:sched_wakeup"
[[events]]
name = "sched:sched_wakeup_new"
[[events]]
name = "sched:sched_switch"
[[events]]
name = "sched:sched_process_fork"
[[events]]
name = "irq:irq_handler_entry"
[[events]]
name = "irq:irq_handler_exit"
[[events]]
name = "irq:softirq_entry"
[[events]]
name = "irq:softirq_exit"
[[events]]
name = "exceptions:page_fault_user"
[scope]
# The workload's children are its tasks too: the (scope) group follows them
# through their fork records (without it, only the workload's own pid is in
# scope and its children's wakeups are not recorded).
follow_forks = true
[output]
reports = ["summary", "json"]
"#;

/// Two busy loops on two cores while small synced writes run: wakeups wait
/// for a CPU, the disk interrupts the loops, children fork.
const PER_TASK_WORKLOAD: &str = "(while [ ! -e $STOP ]; do :; done) & (while [ ! -e $STOP ]; do :; done) & \
    for i in 1 2 3 4 5 6; do sleep 0.005; dd if=/dev/zero of=$SCRATCH bs=64k count=4 conv=fsync 2>/dev/null; done; \
    touch $STOP; wait";

/// A recorded run of `recipe` (with `workload` if given, else for the
/// recipe's duration while `sh -c BACKGROUND` runs) and its `trace-cmd
/// report -t` listing. `$SCRATCH` and `$STOP` in the commands name files of
/// the run's folder.
fn per_task_run(
    recipe: &str,
    workload: Option<&str>,
    background: &str,
) -> (tempfile::TempDir, serde_json::Value, String) {
    let guard = TracefsGuard::acquire();
    let dir = tempfile::tempdir().unwrap();
    let recipe = write_recipe(dir.path(), "per-task.toml", recipe);
    let out = dir.path().join("out");
    let fill = |cmd: &str| {
        cmd.replace("$SCRATCH", dir.path().join("scratch").to_str().unwrap())
            .replace("$STOP", dir.path().join("stop").to_str().unwrap())
    };
    let mut bg = Command::new("sh")
        .arg("-c")
        .arg(fill(background))
        .spawn()
        .unwrap();
    let (code, stderr) = match workload {
        Some(w) => run(&recipe, &out, &fill(w)),
        None => {
            let o = crate::common::run_recipe(&recipe, &out, &[]);
            (o.status.code(), text(&o.stderr))
        }
    };
    std::fs::write(dir.path().join("stop"), "").unwrap();
    bg.wait().unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    guard.assert_unchanged();
    let listing = crate::common::trace_cmd(&[
        "report".as_ref(),
        "-t".as_ref(),
        out.join("trace.dat").as_os_str(),
    ]);
    (dir, json(&out.join("report.json")), listing)
}

/// One task's or group's samples, with where the longest ended.
#[derive(Default, Debug)]
struct Samples {
    values: Vec<u64>,
    max: (u64, u64, u32),
}

impl Samples {
    fn add(&mut self, d: u64, ts: u64, cpu: u32) {
        if self.values.is_empty() || d > self.max.0 {
            self.max = (d, ts, cpu);
        }
        self.values.push(d);
    }
}

/// `key=value` of a trace-cmd field list.
fn field<'a>(fields: &'a str, key: &str) -> &'a str {
    fields
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in `{fields}`"))
}

/// Compares a report's `tasks` list with samples per pid: the longest maxes,
/// with their timestamp and CPU.
fn assert_tasks(report: &serde_json::Value, per_pid: &HashMap<i32, Samples>, what: &str) {
    let mut want: Vec<(u64, i32, u64, u32, usize)> = per_pid
        .iter()
        .map(|(pid, s)| (s.max.0, *pid, s.max.1, s.max.2, s.values.len()))
        .collect();
    want.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let got: Vec<(u64, i32, u64, u32, usize)> = report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["max_ns"].as_u64().unwrap(),
                t["pid"].as_i64().unwrap() as i32,
                t["max_at_ns"].as_u64().unwrap(),
                t["max_cpu"].as_u64().unwrap() as u32,
                t["count"].as_u64().unwrap() as usize,
            )
        })
        .collect();
    assert!(!got.is_empty(), "{what}: no tasks");
    assert_eq!(report["tasks_total"], per_pid.len(), "{what}: tasks in all");
    assert_eq!(got, want[..got.len()], "{what}: top tasks by max");
}

/// Wakeup and irq latency computed from a `trace-cmd report -t` listing.
#[derive(Default)]
struct PerTask {
    parent: HashMap<i32, i32>,
    wake_all: Samples,
    wake_task: HashMap<i32, Samples>,
    irq_all: Samples,
    irq_handler: HashMap<String, Samples>,
    irq_task: HashMap<i32, Samples>,
}

impl PerTask {
    fn of(listing: &str) -> PerTask {
        let mut p = PerTask::default();
        let mut woken: HashMap<i32, u64> = HashMap::new();
        let mut irq_open: HashMap<u32, (String, String, u64, i32)> = HashMap::new();
        for l in listing.lines().filter_map(ReportLine::parse) {
            let (ts, cpu) = (l.ns(), l.cpu);
            match l.event {
                "sched_wakeup" => {
                    woken.entry(sched_pid(l.fields)).or_insert(ts);
                }
                "sched_wakeup_new" => {
                    let child = sched_pid(l.fields);
                    woken.entry(child).or_insert(ts);
                    p.parent.insert(child, l.pid());
                }
                "sched_process_fork" => {
                    let child = field(l.fields, "child_pid").parse().unwrap();
                    p.parent
                        .insert(child, field(l.fields, "pid").parse().unwrap());
                }
                "sched_switch" => {
                    let (prev, next) = l.fields.split_once(" ==> ").unwrap();
                    woken.remove(&sched_pid(prev));
                    let next = sched_pid(next);
                    if let Some(t) = woken.remove(&next) {
                        p.wake_all.add(ts - t, ts, cpu);
                        p.wake_task.entry(next).or_default().add(ts - t, ts, cpu);
                    }
                }
                "irq_handler_entry" => {
                    let irq = field(l.fields, "irq").to_string();
                    let name = field(l.fields, "name").to_string();
                    irq_open.insert(cpu, (irq, name, ts, l.pid()));
                }
                "irq_handler_exit" => {
                    if let Some((irq, name, t, pid)) = irq_open.remove(&cpu)
                        && irq == field(l.fields, "irq")
                    {
                        p.irq_all.add(ts - t, ts, cpu);
                        p.irq_handler.entry(name).or_default().add(ts - t, ts, cpu);
                        p.irq_task.entry(pid).or_default().add(ts - t, ts, cpu);
                    }
                }
                _ => {}
            }
        }
        p
    }

    /// Whether `pid` is `root` or descends from it.
    fn descends(&self, mut pid: i32, root: i32) -> bool {
        for _ in 0..64 {
            if pid == root {
                return true;
            }
            match self.parent.get(&pid) {
                Some(q) => pid = *q,
                None => return false,
            }
        }
        false
    }
}

/// The latency analysis `name` of a report.
fn analysis<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["latency"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["analysis"] == name)
        .unwrap_or_else(|| panic!("no {name} analysis: {:?}", report["analyses"]))
}

/// The group `key` of a latency analysis.
fn group<'a>(l: &'a serde_json::Value, key: &str) -> &'a serde_json::Value {
    l["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == key)
        .unwrap_or_else(|| panic!("no group {key}: {l:#}"))
}

/// A group's samples and where its longest ended.
fn assert_samples(g: &serde_json::Value, s: &Samples, what: &str) {
    assert_group(g, s.values.clone(), what);
    assert_eq!(
        (&g["max_ns"], &g["max_at_ns"], &g["max_cpu"]),
        (
            &serde_json::json!(s.max.0),
            &serde_json::json!(s.max.1),
            &serde_json::json!(s.max.2)
        ),
        "{what}: max and where"
    );
}

/// Interrupts: a system-wide run while synced writes make the disk interrupt.
const IRQ_RECIPE: &str = r#"name = "irqs"
description = "Which interrupt handler runs longest, and which tasks does it stop?"
duration = "2s"
[[events]]
name = "irq:irq_handler_entry"
[[events]]
name = "irq:irq_handler_exit"
[output]
reports = ["summary", "json"]
"#;

/// `profile`: what `trace-cmd report --profile` measures, with no
/// `sched_waking` (trace-cmd ends a sleep at `sched_wakeup`, we at the first
/// of the two), system-wide and with the run's own threads (the filter that
/// keeps them out drops the switches between two of them, or one of them and
/// the idle task, which trace-cmd's profile of the CPU's tasks would miss).
/// System-wide, so that every task's switches and wakeups are in the file:
/// scoped to the workload's pid, the trace held the switches between the
/// workload and other tasks but not those tasks' wakeups, and trace-cmd and we
/// read such partial records differently (reports.md); with the machine loaded
/// by other work, such tasks took turns with the workload and a comparison
/// failed.
const PROFILE_RECIPE: &str = r#"name = "profile"
description = "Where did each task's time go: running, waiting for a CPU, sleeping, blocked, interrupted?"
duration = "2s"
[buffer]
size_kb = 8192
[[events]]
name = "sched:sched_wakeup"
[[events]]
name = "sched:sched_wakeup_new"
[[events]]
name = "sched:sched_switch"
[[events]]
name = "irq:irq_handler_entry"
[[events]]
name = "irq:irq_handler_exit"
[[events]]
name = "irq:softirq_entry"
[[events]]
name = "irq:softirq_exit"
[[events]]
name = "exceptions:page_fault_user"
[scope]
system_wide = true
include_self = true
[output]
reports = ["summary", "json"]
"#;

/// One `Event:` line of `trace-cmd report --profile`: count, total, max and
/// the max's timestamp in µs.
type ProfileLine = (u64, u64, u64, u64);

/// `trace-cmd report --profile` per pid: `EVENT:KEY` → line.
fn trace_cmd_profile(dat: &Path) -> HashMap<i32, HashMap<String, ProfileLine>> {
    let text =
        crate::common::trace_cmd(&["report".as_ref(), "--profile".as_ref(), dat.as_os_str()]);
    let mut out: HashMap<i32, HashMap<String, ProfileLine>> = HashMap::new();
    let mut pid = None;
    for l in text.lines() {
        let l = l.trim();
        if let Some(task) = l.strip_prefix("task: ") {
            pid = task.rsplit_once('-').and_then(|(_, p)| p.parse().ok());
            continue;
        }
        let (Some(pid), Some(ev)) = (pid, l.strip_prefix("Event: ")) else {
            continue;
        };
        let (name, rest) = ev.split_once(" (").unwrap();
        let (count, rest) = rest.split_once(')').unwrap();
        let num = |key: &str| -> u64 {
            rest.split_once(key).map_or(0, |(_, r)| {
                r.trim_start()
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
        };
        let ts_us = rest.split_once("Max: ").map_or(0, |(_, r)| {
            let ts = r.split_once("(ts:").unwrap().1.split(')').next().unwrap();
            let (s, us) = ts.split_once('.').unwrap();
            s.parse::<u64>().unwrap() * 1_000_000 + us.parse::<u64>().unwrap()
        });
        out.entry(pid).or_default().insert(
            name.to_string(),
            (count.parse().unwrap(), num("Total:"), num("Max:"), ts_us),
        );
    }
    out
}

/// Sums trace-cmd's lines whose name starts with `prefix`: count, total, and the largest max.
fn sum_lines(lines: &HashMap<String, ProfileLine>, prefixes: &[&str]) -> ProfileLine {
    let mut sum = (0, 0, 0, 0);
    let mut keys: Vec<&String> = lines
        .keys()
        .filter(|k| prefixes.iter().any(|p| k.starts_with(p)))
        .collect();
    keys.sort();
    for k in keys {
        let l = lines[k];
        sum.0 += l.0;
        sum.1 += l.1;
        if l.2 > sum.2 {
            (sum.2, sum.3) = (l.2, l.3);
        }
    }
    sum
}

/// What the listing of a profile's trace tells about each task, beside the
/// numbers: which tasks to compare.
#[derive(Default)]
struct ProfileListing {
    /// Tasks forked during the trace: their first run follows
    /// sched_wakeup_new, a wakeup for us, none for trace-cmd.
    new: Vec<i32>,
    /// Tasks whose switches in the file do not alternate in and out
    /// (trace-cmd pairs differently across a missing switch), or that were
    /// switched out in state I (`W` in the listing, which trace-cmd's profile
    /// counts apart).
    broken: Vec<i32>,
    /// Per pid and state (`S`, `D`): the switch-outs followed by the task's
    /// next switch-in with no `sched_wakeup` of it in between, as (ns, ts of
    /// the switch-in). trace-cmd ends such a sleep at the switch-in, we only
    /// at a recorded wakeup (reports.md). A whole-system trace that lost
    /// nothing has none; a pid-scoped one has them for tasks outside the
    /// scope, whose switches with the tasks in scope are recorded but not
    /// their wakeups.
    unwoken: HashMap<(i32, char), Vec<(u64, u64)>>,
}

impl ProfileListing {
    fn of(listing: &str) -> ProfileListing {
        let mut p = ProfileListing::default();
        let mut on_cpu: HashMap<i32, bool> = HashMap::new();
        // pid → state letter and ts of its last switch-out, while no wakeup came.
        let mut out: HashMap<i32, (char, u64)> = HashMap::new();
        for l in listing.lines().filter_map(ReportLine::parse) {
            match l.event {
                "sched_wakeup_new" => p.new.push(sched_pid(l.fields)),
                "sched_wakeup" => {
                    out.remove(&sched_pid(l.fields));
                }
                "sched_switch" => {
                    let (prev, next) = l.fields.split_once(" ==> ").unwrap();
                    let (pp, np) = (sched_pid(prev), sched_pid(next));
                    let state = prev.trim_end().chars().last().unwrap();
                    if on_cpu.insert(pp, false) == Some(false) || state == 'W' {
                        p.broken.push(pp);
                    }
                    if on_cpu.insert(np, true) == Some(true) {
                        p.broken.push(np);
                    }
                    if let Some((s @ ('S' | 'D'), since)) = out.remove(&np) {
                        let spans = p.unwoken.entry((np, s)).or_default();
                        spans.push((l.ns() - since, l.ns()));
                    }
                    out.insert(pp, (state, l.ns()));
                }
                _ => {}
            }
        }
        p
    }
}

/// Compares a report's `profile` with `trace-cmd report --profile` of `dat`
/// (whose `trace-cmd report -t` listing is `listing`), task by task; returns
/// how many tasks were compared and how many of them had sleeps with no
/// recorded wakeup, which trace-cmd counts and we do not. With `complete`
/// (a whole-system trace that lost nothing), there must be none.
fn assert_profile_agrees(
    dat: &Path,
    profile: &serde_json::Value,
    listing: &str,
    complete: bool,
) -> (u32, u32) {
    let theirs = trace_cmd_profile(dat);
    let p = ProfileListing::of(listing);
    assert!(
        !complete || p.unwoken.is_empty(),
        "sleeps with no recorded wakeup: {:?}",
        p.unwoken
    );
    // trace-cmd's count: ours plus the task's sleeps in `state` with no
    // recorded wakeup, each ended at the switch-in.
    let with_unwoken = |mut l: ProfileLine, pid: i32, state: char| -> ProfileLine {
        for &(d, end) in p.unwoken.get(&(pid, state)).into_iter().flatten() {
            if l.0 == 0 || d > l.2 {
                (l.2, l.3) = (d, (end + 500) / 1000);
            }
            l.0 += 1;
            l.1 += d;
        }
        l
    };
    let span = |t: &serde_json::Value, k: &str| -> ProfileLine {
        let s = &t[k];
        let n = |f: &str| s[f].as_u64().unwrap();
        let at = n("max_at_ns");
        (
            n("count"),
            n("total_ns"),
            n("max_ns"),
            if n("count") == 0 {
                0
            } else {
                (at + 500) / 1000
            },
        )
    };
    let (mut compared, mut unwoken) = (0, 0);
    for t in profile["tasks"].as_array().unwrap() {
        let pid = t["pid"].as_i64().unwrap() as i32;
        let Some(tc) = theirs.get(&pid).filter(|_| !p.broken.contains(&pid)) else {
            continue;
        };
        let what = format!("{} {pid}", t["comm"]);
        // trace-cmd names a switch with prev_state 256 (preempted, 6.x) `W`.
        assert_eq!(
            span(t, "preempted"),
            sum_lines(tc, &["sched_switch:R", "sched_switch:W"]),
            "{what}: preempted"
        );
        // A task preempted at the end of the trace was never switched back in:
        // that preemption has no closed `preempted` span.
        let (preemptions, spans) = (t["preemptions"].as_u64().unwrap(), span(t, "preempted").0);
        assert!(
            (spans..=spans + 1).contains(&preemptions),
            "{what}: {preemptions} preemptions, {spans} closed preempted spans"
        );
        assert_eq!(
            with_unwoken(span(t, "sleeping"), pid, 'S'),
            sum_lines(tc, &["sched_switch:S"]),
            "{what}: sleeping"
        );
        assert_eq!(
            with_unwoken(span(t, "blocked"), pid, 'D'),
            sum_lines(tc, &["sched_switch:D"]),
            "{what}: blocked"
        );
        if !p.new.contains(&pid) {
            assert_eq!(
                span(t, "wakeup"),
                sum_lines(tc, &["sched_wakeup:"]),
                "{what}: wakeup"
            );
        }
        assert_eq!(
            span(t, "softirq"),
            sum_lines(tc, &["softirq_entry:"]),
            "{what}: softirq"
        );
        assert_eq!(
            span(t, "irq"),
            sum_lines(tc, &["irq_handler_entry:"]),
            "{what}: irq"
        );
        assert_eq!(
            t["page_faults"],
            sum_lines(tc, &["page_fault_user:"]).0,
            "{what}: page faults"
        );
        compared += 1;
        if p.unwoken.contains_key(&(pid, 'S')) || p.unwoken.contains_key(&(pid, 'D')) {
            unwoken += 1;
        }
    }
    (compared, unwoken)
}

/// A kept trace of PROFILE_RECIPE's events but page faults (so no kallsyms
/// in the file), scoped to the pid of PER_TASK_WORKLOAD (as the live test
/// above was before it went system-wide) while two other tasks slept and woke
/// every 0.3 and 0.5 ms and another helper's qemu ran: a qemu thread,
/// outside the scope, was switched out sleeping to the workload and switched
/// in from it, with its wakeup (by a task outside the scope) not recorded.
/// trace-cmd counts that sleep (52 us, ended at the switch-in), we do not;
/// every other number of every task agrees.
#[test]
fn a_pid_scoped_profile_differs_from_trace_cmd_only_by_sleeps_with_no_recorded_wakeup() {
    let dir = tempfile::tempdir().unwrap();
    let dat = crate::common::unpacked_trace("tests/profile/pid-scoped.dat.zst", dir.path());
    let report = report_json(&dat, "profile");
    let listing = crate::common::trace_cmd(&["report".as_ref(), "-t".as_ref(), dat.as_os_str()]);
    let (compared, unwoken) = assert_profile_agrees(&dat, &report["profile"], &listing, false);
    assert!(compared >= 2, "{compared} tasks compared");
    assert_eq!(unwoken, 1, "tasks with a sleep with no recorded wakeup");
}

/// Runs a recipe of `body` (after its name, description and duration)
/// around `sh -c WORKLOAD` under the tracefs lock, asserts exit 0 and tracefs
/// as before; returns the temporary folder and the output folder in it.
fn run_ok(body: &str, workload: &str) -> (tempfile::TempDir, PathBuf) {
    let guard = TracefsGuard::acquire();
    let dir = tempfile::tempdir().unwrap();
    let recipe = write_recipe(
        dir.path(),
        "r.toml",
        &format!("name = \"r\"\ndescription = \"t\"\nduration = \"30s\"\n{body}"),
    );
    let out = dir.path().join("out");
    let (code, stderr) = run(&recipe, &out, workload);
    guard.assert_unchanged();
    assert_eq!(code, Some(0), "{stderr}");
    (dir, out)
}

/// `report DAT --format text`, which must succeed.
fn our_listing(dat: &Path) -> String {
    let o = trace_recipe(&["report", dat.to_str().unwrap(), "--format", "text"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    text(&o.stdout)
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    /// A real recording of `timer:timer_start` (every task) and of writes to
    /// the instance's `trace_marker_raw` (payloads of 1, 2, 3, 12 bytes and
    /// none), listed by us as trace-cmd 3.1.6 lists it, line for line:
    /// timer_start's flags as libtraceevent builds `flags & (M | D | P | I)`
    /// (the parenthesised `|` chain rotated above the `&`: `D|P|I` on every
    /// line), raw_data as its function plugin prints it (`# ID` and the
    /// bytes, padding included), and `maple_tree:ma_read`, whose print fmt
    /// holds a literal tab that libtraceevent cannot parse past, as
    /// `[FAILED TO PARSE]` and its raw fields.
    #[test]
    fn timer_start_flags_and_trace_marker_raw_list_as_trace_cmd_lists_them() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(
            dir.path(),
            "raw.toml",
            "name = \"raw\"\ndescription = \"t\"\nduration = \"30s\"\n[scope]\nsystem_wide = true\n[[events]]\nname = \"timer:timer_start\"\n[[events]]\nname = \"maple_tree:ma_read\"\n",
        );
        let out = dir.path().join("out");
        let (code, stderr) = run(
            &recipe,
            &out,
            "r=$(dirname $TRACE_RECIPE_MARKER)/trace_marker_raw; for p in ABCDE ABCDEF ABCDEFG ABCDEFGHIJKLMNOP ABCD; do printf $p > $r; done; sleep 0.5",
        );
        guard.assert_unchanged();
        assert_eq!(code, Some(0), "{stderr}");
        let dat = out.join("trace.dat");
        let theirs = crate::common::trace_cmd_report(&dat);
        let o = trace_recipe(&["report", dat.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let ours = text(&o.stdout);
        let lines = crate::common::listing_lines;
        assert!(lines(&theirs).iter().any(|l| l.contains("timer_start:")));
        assert!(
            lines(&theirs)
                .iter()
                .any(|l| l.contains("ma_read:              [FAILED TO PARSE] fn=0x")),
            "{theirs}"
        );
        assert!(
            lines(&theirs)
                .iter()
                .any(|l| l.ends_with("raw_data:             # 44434241 45 00 00 00")),
            "{theirs}"
        );
        assert_eq!(lines(&ours), lines(&theirs));
    }

    #[test]
    fn latency_analyses_agree_with_numbers_computed_from_trace_cmd() {
        let out = latency_recording().join("out");
        let stderr = std::fs::read_to_string(latency_recording().join("stderr")).unwrap();
        // stderr is a pipe here: no progress display, only the run's own lines.
        assert!(
            !stderr.contains("MiB  lost") && !stderr.contains('\r'),
            "progress drawn off a terminal:\n{stderr}"
        );
        let dat = out.join("trace.dat");

        let listing = crate::common::trace_cmd(&[
            "report".as_ref(),
            "-t".as_ref(),
            "-i".as_ref(),
            dat.as_os_str(),
        ]);
        // Independent pairing on trace-cmd's text.
        let mut syscalls: HashMap<String, Vec<u64>> = HashMap::new();
        let mut sys_open: HashMap<i32, (String, u64)> = HashMap::new();
        let mut wakeups = Vec::new();
        let mut woken: HashMap<i32, u64> = HashMap::new();
        for l in listing.lines().filter_map(ReportLine::parse) {
            let (pid, ts) = (l.pid(), l.ns());
            if let Some(name) = l.event.strip_prefix("sys_enter_") {
                sys_open.insert(pid, (name.to_string(), ts));
            } else if let Some(name) = l.event.strip_prefix("sys_exit_") {
                if let Some((n, t)) = sys_open.remove(&pid)
                    && n == name
                {
                    syscalls.entry(n).or_default().push(ts - t);
                }
            } else if l.event == "sched_wakeup" {
                woken.entry(sched_pid(l.fields)).or_insert(ts);
            } else if l.event == "sched_switch" {
                let (prev, next) = l.fields.split_once(" ==> ").unwrap();
                woken.remove(&sched_pid(prev));
                if let Some(t) = woken.remove(&sched_pid(next)) {
                    wakeups.push(ts - t);
                }
            }
        }

        let report = report_json(&dat, "syscalls,wakeup");
        assert_eq!(
            report["analyses"],
            serde_json::json!(["syscalls", "wakeup"])
        );
        let latency = report["latency"].as_array().unwrap();
        let by_name = |n: &str| latency.iter().find(|l| l["analysis"] == n).unwrap();
        let sys = by_name("syscalls");
        for name in ["read", "clock_nanosleep"] {
            let g = sys["groups"]
                .as_array()
                .unwrap()
                .iter()
                .find(|g| g["key"] == name)
                .unwrap_or_else(|| panic!("no `{name}` group: {sys:#}"));
            assert_group(g, syscalls[name].clone(), name);
        }
        // Eight `sleep 0.01`: each clock_nanosleep lasts at least 10 ms.
        assert!(syscalls["clock_nanosleep"].iter().all(|d| *d >= 10_000_000));
        let all = &by_name("wakeup")["groups"][0];
        assert_eq!(all["key"], "(all)");
        assert_group(all, wakeups, "wakeup (all)");

        // The run's own report.json chose the same analyses by itself, and its
        // summary shows the same numbers.
        let run_report = json(&out.join("report.json"));
        assert_eq!(
            run_report["analyses"],
            serde_json::json!(["counts", "syscalls", "wakeup", "profile", "errno"])
        );
        // The run knows its workload: wakeup leads with the workload's `(scope)`,
        // which `report` on the bare file cannot know; the rest is the same.
        let mut run_latency = run_report["latency"].clone();
        let wakeup = run_latency
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|l| l["analysis"] == "wakeup")
            .unwrap();
        let scope = wakeup["groups"].as_array_mut().unwrap().remove(0);
        assert_eq!(scope["key"], "(scope)");
        assert_eq!(run_latency, report["latency"]);
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(summary.contains("syscalls: syscall latency"), "{summary}");
        let read = &sys["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["key"] == "read")
            .unwrap();
        let line = summary
            .lines()
            .find(|l| l.trim_start().starts_with("read "))
            .unwrap();
        assert!(
            line.contains(&format!(" {} ", read["count"])),
            "summary line `{line}` vs {read}"
        );
    }

    #[test]
    fn report_html_loads_in_headless_chromium_and_shows_the_charts() {
        let Some(chrome) = chromium_or_skip() else {
            return;
        };
        let out = latency_recording().join("out");
        let page = load_in_chromium(chrome, &out.join("report.html"), 5000, None);
        let dom_text = &page.dom;
        // One timeline row per CPU with events, one histogram per latency analysis.
        let report = json(&out.join("report.json"));
        assert!(dom_text.contains(r#"class="timeline""#), "{dom_text}");
        let cpus = report["cpus"].as_object().unwrap().len();
        let timeline = dom_text.split(r#"class="timeline""#).nth(1).unwrap();
        let timeline = timeline.split("</svg>").next().unwrap();
        assert_eq!(timeline.matches(r##"fill="#f0f0f0""##).count(), cpus);
        assert!(timeline.matches("fill-opacity").count() >= cpus);
        let latencies = report["latency"].as_array().unwrap().len();
        assert_eq!(latencies, 2);
        assert_eq!(
            dom_text.matches(r#"class="histogram""#).count(),
            2 * latencies
        );
        assert!(dom_text.contains(&format!(
            ">{} ({:.3} %)<",
            report["lost_total"],
            report["lost_percent"].as_f64().unwrap()
        )));

        // The screenshot (tall enough for the profile tables above them) shows the
        // charts: the timeline's blue and the histograms' orange.
        let mut colors = std::collections::HashSet::new();
        let (mut orange, mut blue) = (0, 0);
        for px in page.pixels.chunks_exact(page.channels) {
            let (r, g, b) = (px[0], px[1], px[2]);
            colors.insert((r, g, b));
            if r.abs_diff(0xd0) < 8 && g.abs_diff(0x70) < 8 && b.abs_diff(0x2a) < 8 {
                orange += 1;
            }
            if b > 150 && r < 120 && g < 160 {
                blue += 1;
            }
        }
        assert!(
            colors.len() > 50,
            "blank screenshot: {} colours",
            colors.len()
        );
        assert!(orange > 500, "no histogram bars on screen ({orange} px)");
        assert!(blue > 100, "no timeline on screen ({blue} px)");
    }

    /// A real run with a stacktrace trigger and a failing expectation: its
    /// stacks.folded holds the stacks trace-cmd lists, and its report.html,
    /// loaded in headless Chromium, shows the failed expectation first, the
    /// profile table and a flame graph of those stacks (screenshot kept in
    /// `$TRACE_RECIPE_SCREENSHOT` when set, for a person to look at).
    #[test]
    fn report_html_shows_the_failed_expectation_first_the_profile_and_a_flame_graph() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        {
            let guard = TracefsGuard::acquire();
            let recipe = write_recipe(dir.path(), "flame.toml", FLAME_RECIPE);
            let (code, stderr) = run(&recipe, &out, WORKLOAD);
            // Exit 5: an expectation failed; everything was written.
            assert_eq!(code, Some(5), "{stderr}");
            guard.assert_unchanged();
        }
        // The folded stacks are the stacks of trace.dat, as trace-cmd lists them.
        let folded = std::fs::read_to_string(out.join("stacks.folded")).unwrap();
        let ours = crate::common::parse_folded(&folded);
        let listing = crate::common::trace_cmd_report(&out.join("trace.dat"));
        let theirs = folded_from_listing(&listing);
        assert!(
            theirs
                .keys()
                .any(|p| p.starts_with("sched:sched_switch;") && p.contains(";__schedule;")),
            "{listing}"
        );
        assert_eq!(ours, theirs);
        let report = json(&out.join("report.json"));
        assert_eq!(
            ours.values().sum::<u64>(),
            report["stacks"]["total"].as_u64().unwrap()
        );
        // `report` writes the same from the folder, and from the file with -o.
        let o = trace_recipe(&["report", out.to_str().unwrap(), "--format", "folded"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(text(&o.stdout), folded);
        let to = dir.path().join("again.folded");
        let dat = out.join("trace.dat");
        let o = trace_recipe(&[
            "report",
            dat.to_str().unwrap(),
            "--format",
            "folded",
            "-o",
            to.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(std::fs::read_to_string(&to).unwrap(), folded);
        // `report` of the folder draws the same page, with what only the run knew
        // (its expectations); narrowed, the run's expectations are left out.
        let o = trace_recipe(&["report", out.to_str().unwrap(), "--format", "html"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let page = text(&o.stdout);
        assert!(
            page.contains(
                r#"<tr class="fail"><td>FAIL</td><td><code>count(sched:sched_switch) &lt; 3</code>"#
            ) && page.contains(r#"<svg class="flamegraph""#),
            "{page}"
        );
        let o = trace_recipe(&[
            "report",
            out.to_str().unwrap(),
            "--format",
            "html",
            "--cpu",
            "0",
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(!text(&o.stdout).contains(r#"id="expectations""#));
        // No function_graph here: nothing to fold, said on stderr.
        let o = trace_recipe(&[
            "report",
            dat.to_str().unwrap(),
            "--format",
            "folded-funcgraph",
        ]);
        assert!(o.status.success() && o.stdout.is_empty());
        assert!(
            text(&o.stderr).contains("no funcgraph_entry"),
            "{}",
            text(&o.stderr)
        );

        let Some(chrome) = chromium_or_skip() else {
            return;
        };
        let keep = std::env::var_os("TRACE_RECIPE_SCREENSHOT").map(PathBuf::from);
        let page = load_in_chromium(chrome, &out.join("report.html"), 2400, keep.as_deref());
        let dom = &page.dom;
        // Expectations: the failed one first, though the recipe lists it second.
        let expect = dom.split(r#"id="expectations""#).nth(1).unwrap();
        let expect = expect.split("</table>").next().unwrap();
        let rows: Vec<&str> = expect.split("<tr class=").skip(1).collect();
        assert_eq!(rows.len(), 2, "{expect}");
        assert!(
            rows[0].starts_with(r#""fail""#)
                && rows[0].contains("FAIL")
                && rows[0].contains("count(sched:sched_switch) &lt; 3")
                && rows[0].contains(&format!(">{}<", report["events"]["sched:sched_switch"])),
            "{expect}"
        );
        assert!(rows[1].starts_with(r#""pass""#), "{expect}");
        // The profile table, led by the workload's row, marked as the run's scope.
        let table = dom.split(r#"class="profile""#).nth(1).unwrap();
        let table = table.split("</table>").next().unwrap();
        let pid = report["workload"]["pid"].as_u64().unwrap();
        let first = table.split("<tr>").nth(2).unwrap_or_default();
        assert!(
            first.starts_with(&format!("<td>{pid}</td><td>sh <b>(scope)</b></td>")),
            "{table}"
        );
        // The flame graph: one frame per distinct path prefix, real kernel symbols.
        let flame = dom.split(r#"<svg class="flamegraph""#).nth(1).unwrap();
        let flame = flame.split("</svg>").next().unwrap();
        let total: u64 = ours.values().sum();
        assert!(
            flame.contains(&format!(
                "<title>sched:sched_switch ({total} records, 100.00%)</title>"
            )),
            "{flame}"
        );
        for frame in [
            "__schedule",
            "schedule",
            "trace_event_raw_event_sched_switch",
        ] {
            assert!(
                flame.contains(&format!("<title>{frame} (")),
                "no `{frame}` frame: {flame}"
            );
        }

        // The screenshot shows the flame graph's warm colours.
        let warm = page
            .pixels
            .chunks_exact(page.channels)
            .filter(|px| px[0] > 200 && px[1] > 60 && px[1] < 230 && px[2] < 80)
            .count();
        assert!(warm > 5000, "no flame graph on screen ({warm} px)");
    }

    #[test]
    fn losing_more_than_max_lost_percent_exits_4_after_writing_everything() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        // An 8 KiB buffer that keeps the oldest events, 5000 markers written while
        // the readers are held back: a few hundred fit, the rest are dropped, every time.
        let recipe = write_recipe(
            dir.path(),
            "lossy.toml",
            "name = \"lost\"\ndescription = \"t\"\nduration = \"60s\"\n[buffer]\nsize_kb = 8\noverwrite = false\n[[events]]\nname = \"sched:sched_process_exec\"\nfilter = 'filename == \"/no/such/program\"'\n[output]\nmax_lost_percent = 1\n",
        );
        let (code, stderr, report, markers) =
            crate::capture::overflow_with_markers(dir.path(), &recipe, 5000);
        guard.assert_unchanged();
        let out = dir.path().join("out-lossy");
        assert!(out.join("trace.dat").is_file() && out.join("summary.txt").is_file());
        let lost = report["lost_total"].as_u64().unwrap();
        assert_eq!(markers + lost, 5000, "{report:#}");
        assert!(
            report["lost_percent"].as_f64().unwrap() > 50.0,
            "{report:#}"
        );
        assert_eq!(code, Some(4), "{stderr}");
        assert!(stderr.contains("max_lost_percent"), "{stderr}");
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.contains(&format!("lost events: {lost}")),
            "{summary}"
        );
    }

    #[test]
    fn a_stack_is_recorded_only_for_an_event_its_filter_keeps() {
        // The kernel calls a stacktrace trigger even for an event its filter
        // discards; the plan gives the trigger the event's filter. sched_switch
        // fires all the time and its filter keeps none; every exit keeps its stack.
        let (_dir, dat) = record_stacks(
            "filter = 'next_comm == \"no-such-task\"'\n",
            "for i in 1 2 3 4; do sleep 0.01; ls / > /dev/null; done",
        );
        let listing = crate::common::trace_cmd_report(&dat);
        let count = |what: &str| listing.lines().filter(|l| l.contains(what)).count();
        assert_eq!(count("sched_switch:"), 0, "{listing}");
        let exits = count("sched_process_exit:");
        assert!(
            exits >= 5,
            "the workload's exits were not recorded: {listing}"
        );
        assert_eq!(count("<stack trace >"), exits, "{listing}");
    }

    #[test]
    fn top_stacks_of_a_real_run_are_ranked_by_the_counts_in_trace_cmds_listing() {
        let (_dir, dat) = record_stacks(
            "",
            "for i in 1 2 3 4 5 6; do sleep 0.01; ls / > /dev/null; done; cat /proc/version > /dev/null",
        );
        // Count each distinct stack (its frames' symbols and addresses) in trace-cmd's listing.
        let listing = crate::common::trace_cmd_report(&dat);
        let mut stacks: Vec<Vec<&str>> = Vec::new();
        for l in listing.lines() {
            if l.contains("<stack trace >") {
                stacks.push(Vec::new());
            } else if let Some(frame) = l.trim_start().strip_prefix("=> ") {
                stacks.last_mut().unwrap().push(frame.trim());
            }
        }
        let mut counts: std::collections::BTreeMap<&[&str], u64> = Default::default();
        for st in &stacks {
            *counts.entry(st.as_slice()).or_default() += 1;
        }
        let distinct_counts: std::collections::BTreeSet<u64> = counts.values().copied().collect();
        assert!(
            distinct_counts.len() >= 2,
            "the workload must give stacks of different frequencies, or ranking is untested: {counts:#?}"
        );
        let o = trace_recipe(&["report", dat.to_str().unwrap(), "--format", "json"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let s = &report["stacks"];
        assert_eq!(s["total"], stacks.len() as u64);
        assert_eq!(s["distinct"], counts.len() as u64);
        let top = s["top"].as_array().unwrap();
        assert_eq!(top[0]["count"], *distinct_counts.last().unwrap(), "{s:#}");
        let mut previous = u64::MAX;
        for entry in top {
            let n = entry["count"].as_u64().unwrap();
            assert!(n <= previous, "top stacks are not ranked by count: {s:#}");
            previous = n;
            let symbols: Vec<&str> = entry["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap().split('+').next().unwrap())
                .collect();
            // trace-cmd prints a frame as `SYMBOL (ADDRESS)`. Where several kernel
            // symbols share an address (`__do_sys_vfork` / `__x64_sys_vfork`) the two
            // readers may name it differently, so frames are matched on the tracepoint
            // frame and the syscall entry frame at the two ends, and on their number.
            let same = counts.iter().any(|(frames, c)| {
                let name = |f: &&str| f.split(' ').next().unwrap_or("").to_string();
                *c == n
                    && frames.len() == symbols.len()
                    && frames.first().map(name).as_deref() == symbols.first().copied()
                    && frames.last().map(name).as_deref() == symbols.last().copied()
            });
            assert!(
                same,
                "no stack seen {n} times with frames {symbols:?} in trace-cmd's listing: {counts:#?}"
            );
        }
    }

    #[test]
    fn per_task_wakeup_latency_agrees_with_trace_cmd_and_leads_with_the_workload() {
        let (_dir, report, listing) =
            per_task_run(PER_TASK_RECIPE, Some(PER_TASK_WORKLOAD), "true");
        let workload = report["workload"]["pid"].as_i64().unwrap() as i32;
        let p = PerTask::of(&listing);
        let wakeup = analysis(&report, "wakeup");
        assert_eq!(wakeup["groups"][0]["key"], "(scope)", "{wakeup:#}");
        assert_eq!(wakeup["groups"][1]["key"], "(all)");
        let mut scoped = Samples::default();
        let mut pids: Vec<&i32> = p
            .wake_task
            .keys()
            .filter(|pid| p.descends(**pid, workload))
            .collect();
        pids.sort();
        assert!(pids.len() >= 3, "workload tasks woken: {pids:?}");
        for pid in pids {
            let s = &p.wake_task[pid];
            scoped.values.extend(&s.values);
            if (s.max.0, std::cmp::Reverse(s.max.1))
                > (scoped.max.0, std::cmp::Reverse(scoped.max.1))
            {
                scoped.max = s.max;
            }
        }
        assert_samples(&wakeup["groups"][0], &scoped, "wakeup (scope)");
        // The run records only the workload's tasks (set_event_pid), so the
        // other tasks' wakeups are not in the file: (all) may equal (scope).
        assert!(scoped.values.len() <= p.wake_all.values.len());
        assert_samples(group(wakeup, "(all)"), &p.wake_all, "wakeup (all)");
        assert_tasks(wakeup, &p.wake_task, "wakeup");
    }

    #[test]
    fn per_handler_and_per_task_irq_time_agrees_with_trace_cmd() {
        let (_dir, report, listing) = per_task_run(
            IRQ_RECIPE,
            None,
            "while [ ! -e $STOP ]; do dd if=/dev/zero of=$SCRATCH bs=64k count=4 conv=fsync 2>/dev/null; done",
        );
        let p = PerTask::of(&listing);
        let irq = analysis(&report, "irq");
        assert!(!p.irq_handler.is_empty(), "no interrupt in the listing");
        assert_eq!(irq["groups"][0]["key"], "(all)");
        assert_samples(group(irq, "(all)"), &p.irq_all, "irq (all)");
        for (name, s) in &p.irq_handler {
            assert_samples(group(irq, name), s, name);
        }
        assert_tasks(irq, &p.irq_task, "irq");
        let summary = std::fs::read_to_string(_dir.path().join("out/summary.txt")).unwrap();
        assert!(summary.contains("irq: interrupt handler time"), "{summary}");
    }

    #[test]
    fn the_profile_agrees_with_trace_cmd_report_profile() {
        let (dir, report, listing) = per_task_run(PROFILE_RECIPE, Some(PER_TASK_WORKLOAD), "true");
        let profile = &report["profile"];
        assert_eq!(
            profile["measures"],
            serde_json::json!([
                "running",
                "preempted",
                "wakeup",
                "sleeping",
                "blocked",
                "irq",
                "softirq",
                "page_faults"
            ])
        );
        assert_eq!(report["lost_total"], 0, "the comparison needs every record");
        let (compared, _) =
            assert_profile_agrees(&dir.path().join("out/trace.dat"), profile, &listing, true);
        assert!(compared >= 1, "tasks compared: {compared}\n{profile:#}");
        // The loops' shells sleep and block between their children.
        let waited = profile["tasks"].as_array().unwrap().iter().any(|t| {
            t["sleeping"]["count"].as_u64() > Some(0) || t["blocked"]["count"].as_u64() > Some(0)
        });
        assert!(waited, "{profile:#}");
        // Per CPU, busy and idle time add up to at most the recording.
        for c in profile["cpus"].as_array().unwrap() {
            let on = c["busy_ns"].as_u64().unwrap() + c["idle_ns"].as_u64().unwrap();
            assert!(on > 0 && on <= 3_000_000_000, "{c:#}");
        }
        let summary = std::fs::read_to_string(dir.path().join("out/summary.txt")).unwrap();
        assert!(
            summary.contains("profile: where each task's time went"),
            "{summary}"
        );
    }

    /// The `stacktrace` and `userstacktrace` options (a kernel and a user stack
    /// after every event of the instance, ftrace.rst "trace_options"): each
    /// openat of the workload comes with both; trace.dat carries kallsyms, so
    /// trace-cmd names the kernel frames as our summary does, and lists the file
    /// as our `report` does; the summary tells user stacks from kernel ones.
    #[test]
    fn the_stacktrace_and_userstacktrace_options_record_both_stacks_symbolized() {
        let (_dir, out) = run_ok(
            "[tracer]\noptions = { stacktrace = true, userstacktrace = true }\n[[events]]\nname = \"syscalls:sys_enter_openat\"\n",
            "cat /etc/hostname /etc/passwd > /dev/null",
        );
        let listing = crate::common::trace_cmd_report(&out.join("trace.dat"));
        let count = |what: &str| listing.lines().filter(|l| l.contains(what)).count();
        let opens = count("sys_enter_openat:");
        assert!(
            opens >= 2,
            "the workload's opens were not recorded: {listing}"
        );
        assert_eq!(count("kernel_stack:"), opens, "{listing}");
        assert_eq!(count("user_stack:"), opens, "{listing}");
        // Kernel frames by name (the syscall entry path), not bare addresses.
        assert!(
            listing.contains("=> do_syscall_64"),
            "kernel frames not symbolized: {listing}"
        );
        // Our listing is trace-cmd's, user_stack's print fmt included.
        assert_eq!(our_listing(&out.join("trace.dat")), listing);
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.contains("top kernel and user stacks")
                && summary.contains("(user stack):")
                && summary.contains("=> do_syscall_64"),
            "{summary}"
        );
    }

    /// Every event of the kernel (`*:*`, 2,300 on this host): the run applies
    /// and rolls back all of them, records events of many systems, and trace-cmd
    /// lists the file line for line as we do, except for the events
    /// crates/tracedat/tests/differential-intended.txt lists with the reason.
    #[test]
    fn all_events_run_and_list_as_trace_cmd_lists_them() {
        let (_dir, out) = run_ok("[[events]]\nname = \"*:*\"\n", "ls / > /dev/null");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
                .unwrap();
        let systems: std::collections::BTreeSet<&str> = report["events"]
            .as_object()
            .unwrap()
            .keys()
            .filter_map(|k| k.split(':').next())
            .collect();
        assert!(systems.len() >= 8, "{systems:?}");
        let theirs = crate::common::trace_cmd_report(&out.join("trace.dat"));
        let ours = our_listing(&out.join("trace.dat"));
        let intended =
            std::fs::read_to_string(repo().join("crates/tracedat/tests/differential-intended.txt"))
                .unwrap();
        let intended: Vec<&str> = intended
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_whitespace().next()?.split(':').nth(1))
            .collect();
        assert_eq!(ours.lines().count(), theirs.lines().count());
        let mut kept = 0;
        for (a, b) in ours.lines().zip(theirs.lines()) {
            if a == b {
                continue;
            }
            let event = ReportLine::parse(b).map(|r| r.event.to_string());
            assert!(
                event.as_deref().is_some_and(|e| intended.contains(&e)),
                "a difference not listed as intended:\nours:   {a}\ntheirs: {b}"
            );
            kept += 1;
        }
        eprintln!(
            "FIGURE all events: {} events of {} systems, {} lines, {kept} intended differences",
            report["total_events"],
            systems.len(),
            ours.lines().count()
        );
    }
}

/// A run folder of one `func-args` call and one `funcgraph-args` leaf, as a
/// 7.2 kernel records them (tests/lab/func-args.toml): `ftrace:function` and
/// `ftrace:funcgraph_entry` with `unsigned long args[]` (six registers) after
/// their fields, `vfs_read` in kallsyms. Returns the folder.
fn func_args_folder(dir: &Path) -> PathBuf {
    use tracedat::testing::{Endian, Page, event_format};
    let e = Endian::LITTLE64;
    // ip/parent_ip of function, func/depth of funcgraph_entry, then args[].
    let with_args = |name: &str, id: u16, a: &str, b: &str, print: &str| {
        let fields = format!(
            "\tfield:unsigned long {a};\toffset:8;\tsize:8;\tsigned:0;\n\
             \tfield:unsigned long {b};\toffset:16;\tsize:8;\tsigned:0;\n\
             \tfield:unsigned long args[];\toffset:24;\tsize:0;\tsigned:0;\n"
        );
        event_format(name, id, &fields, print)
    };
    let function = with_args(
        "function",
        1,
        "ip",
        "parent_ip",
        "\" %ps <-- %ps\", (void *)REC->ip, (void *)REC->parent_ip",
    );
    let entry = with_args(
        "funcgraph_entry",
        11,
        "func",
        "depth",
        "\"--> %ps (%lu)\", (void *)REC->func, REC->depth",
    );
    let exit = event_format(
        "funcgraph_exit",
        10,
        "\tfield:unsigned long func;\toffset:8;\tsize:8;\tsigned:0;\n\
         \tfield:unsigned long depth;\toffset:16;\tsize:8;\tsigned:0;\n\
         \tfield:unsigned int overrun;\toffset:24;\tsize:4;\tsigned:0;\n\
         \tfield:unsigned long long calltime;\toffset:32;\tsize:8;\tsigned:0;\n\
         \tfield:unsigned long long rettime;\toffset:40;\tsize:8;\tsigned:0;\n",
        "\"<-- %ps (%lu) (start: %llx  end: %llx) over: %u\", (void *)REC->func, REC->depth, REC->calltime, REC->rettime, REC->depth",
    );
    let (vfs_read, ksys_read) = (0xffff_ffff_8140_0000u64, 0xffff_ffff_8140_1000u64);
    // vfs_read(file, buf, count = 16, pos), then two registers it does not take.
    let regs = [
        0xff38_0976_422e_5a80,
        0x80_1710,
        16,
        0xff7d_75e8_c05d_3bc0,
        7,
        8,
    ];
    let mut page = Page::new(e, 4096, 1_000_000);
    page.event(
        10,
        &tracedat::testing::payload(e, 1, 127, &[&[vfs_read, ksys_read][..], &regs].concat()),
    );
    page.event(
        10,
        &tracedat::testing::payload(e, 11, 127, &[&[vfs_read, 0][..], &regs].concat()),
    );
    page.event(
        10,
        &tracedat::testing::payload(e, 10, 127, &[vfs_read, 0, 0, 1_000_020, 1_002_020]),
    );
    let raw = dir.join("cpu0.raw");
    std::fs::write(&raw, page.finish(None)).unwrap();
    let meta = tracedat::CaptureMeta {
        header_page: e.header_page(4096).into_bytes(),
        header_event: Vec::new(),
        ftrace_formats: vec![function.into_bytes(), entry.into_bytes(), exit.into_bytes()],
        event_formats: Vec::new(),
        kallsyms: format!("{vfs_read:x} T vfs_read\n{ksys_read:x} T ksys_read\n").into_bytes(),
        printk_formats: Vec::new(),
        cmdlines: b"127 dd\n".to_vec(),
        cpu_count: 1,
        trace_clock: "[local] global".into(),
        uname: "Linux h 7.2.13+deb14-amd64 x86_64".into(),
        version: "test".into(),
        cpu_stats: vec![String::new()],
    };
    let run = dir.join("run");
    std::fs::create_dir(&run).unwrap();
    tracedat::write_v6(
        std::fs::File::create(run.join("trace.dat")).unwrap(),
        &meta,
        &[tracedat::CpuData { cpu: 0, path: raw }],
    )
    .unwrap();
    run
}

/// `report --format text` of a run folder: the listing's lines after `cpus=`.
fn listing(run: &Path) -> Vec<String> {
    let o = trace_recipe(&["report", run.to_str().unwrap(), "--format", "text"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    text(&o.stdout)
        .lines()
        .skip(1)
        .map(str::to_string)
        .collect()
}

/// func-args / funcgraph-args (issue 35 item 4): with the prototypes the run
/// saved (func-args.txt), the listing prints each call's arguments as the
/// kernel's `trace` file does (kernel/trace/trace_output.c
/// `print_function_args`: pointers and unsigned integers in hex, as many
/// parameters as the prototype has); without them, as trace-cmd 3.1.6 does
/// (no arguments: `vfs_read`, `vfs_read();`).
#[test]
fn func_args_are_listed_by_the_saved_prototypes_as_the_kernel_prints_them() {
    let dir = tempfile::tempdir().unwrap();
    let run = func_args_folder(dir.path());
    let plain = listing(&run);
    assert!(
        plain[0].ends_with("function:             vfs_read"),
        "{plain:?}"
    );
    assert!(plain[1].ends_with("|  vfs_read();"), "{plain:?}");
    std::fs::write(
        run.join("func-args.txt"),
        "vfs_read file:p buf:p count:u pos:p\n",
    )
    .unwrap();
    let args = "(file=0xff380976422e5a80, buf=0x801710, count=0x10, pos=0xff7d75e8c05d3bc0)";
    let lines = listing(&run);
    assert!(
        lines[0].ends_with(&format!("function:             vfs_read{args}")),
        "{lines:?}"
    );
    assert!(
        lines[1].ends_with(&format!("|  vfs_read{args};")),
        "{lines:?}"
    );
    // A function the prototypes lack prints `()`, as the kernel prints one its BTF lacks.
    std::fs::write(run.join("func-args.txt"), "ksys_read fd:s\n").unwrap();
    let lines = listing(&run);
    assert!(lines[0].ends_with("vfs_read()"), "{lines:?}");
}

/// A hostile func-args.txt (control characters, a huge name, thousands of
/// parameters) prints escaped and bounded; one that is not a regular file is
/// refused, naming it.
#[test]
fn a_hostile_func_args_file_is_escaped_bounded_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = func_args_folder(dir.path());
    let evil = format!(
        "vfs_read \x1b]0;pwned\x07:p {}:u{}\n",
        "n".repeat(1 << 20),
        " x:s".repeat(5000)
    );
    std::fs::write(run.join("func-args.txt"), evil).unwrap();
    let lines = listing(&run);
    assert!(
        lines[0].contains("vfs_read(\\u{1b}]0;pwned\\u{7}=0xff380976422e5a80, nnnn"),
        "{}",
        &lines[0][..200.min(lines[0].len())]
    );
    assert!(
        lines
            .iter()
            .all(|l| !l.contains('\x1b') && !l.contains('\x07'))
    );
    // The name cut to 512 characters; the registers run out after six.
    assert!(lines[0].len() < 1000, "{}", lines[0].len());
    assert!(lines[0].ends_with("x=7, x=8, ...)"), "{}", lines[0]);
    std::fs::remove_file(run.join("func-args.txt")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", run.join("func-args.txt")).unwrap();
    let o = trace_recipe(&["report", run.to_str().unwrap(), "--format", "text"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("func-args.txt"),
        "{}",
        text(&o.stderr)
    );
}
