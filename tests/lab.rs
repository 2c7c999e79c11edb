//! Kernel lab: the features this machine's kernel lacks (function tracer,
//! function_graph, kprobes, hist triggers, function triggers, latency tracers),
//! proven on Debian's stock 6.1 and 6.12 kernels and its PREEMPT_RT 6.1 kernel
//! booted under QEMU by ../shared/kernel-lab.
//!
//! One test per kernel (`lab::debian_6_1`, `lab::debian_6_12`, `lab::rt_6_1`),
//! each booting once: the boot runs every recipe of tests/lab/ (check, then
//! run; on the RT kernel those of tests/lab/rt/ and the stack tracer's), checks every recipe of
//! recipes/, then records tracefs as the runs left it (tests/lab/guest.sh). The
//! assertions run here, on the copied-back output, with our trace.dat reader.
//! The guests never touch the host's tracefs, so the lab tests take no tracefs
//! lock and run beside the host's tests (nextest's `lab` test group,
//! .config/nextest.toml). Without QEMU or the lab script a test says so
//! loudly, and fails when `CI=true`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::common::{bin, repo, text};

/// The lab script: `$KERNEL_LAB_SCRIPT`, or `../shared/kernel-lab/run-in-kernel.sh`.
fn lab_script() -> PathBuf {
    std::env::var_os("KERNEL_LAB_SCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/kernel-lab/run-in-kernel.sh"))
}

/// Why the lab cannot run here, if it cannot.
fn missing() -> Option<String> {
    let script = lab_script();
    if !script.is_file() {
        return Some(format!("no kernel-lab script at {}", script.display()));
    }
    for tool in [
        "qemu-system-x86_64",
        "busybox",
        "cpio",
        "cc",
        "strip",
        "chrt",
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!(
                "`{tool}` is not installed (apt-get install qemu-system-x86 busybox-static cpio xz-utils gcc binutils util-linux)"
            ));
        }
    }
    None
}

/// The newest Debian 6.12 kernel package apt knows, else the one the lab README names.
fn kernel_612() -> String {
    newest_612("amd64")
}

/// The newest Debian 12 6.12 kernel package of `flavour` (`amd64`,
/// `arm64-unsigned`) apt knows, else 6.12.117's (the lab READMEs' example).
fn newest_612(flavour: &str) -> String {
    let suffix = format!("+deb12-{flavour}");
    let names = Command::new("apt-cache")
        .args(["pkgnames", "linux-image-6.12"])
        .output()
        .map(|o| text(&o.stdout))
        .unwrap_or_default();
    let mut v: Vec<(Vec<u32>, &str)> = names
        .lines()
        .filter_map(|n| {
            let ver = n
                .strip_prefix("linux-image-")?
                .strip_suffix(suffix.as_str())?;
            let nums: Option<Vec<u32>> = ver.split('.').map(|p| p.parse().ok()).collect();
            Some((nums?, n))
        })
        .collect();
    v.sort();
    v.last()
        .map(|(_, n)| n.to_string())
        .unwrap_or_else(|| format!("linux-image-6.12.117{suffix}"))
}

/// `$TRACE_RECIPE_LAB_OUT`: a folder where the lab's output is kept; a kernel
/// whose output there is complete (`TAG/done`) is not booted again, so changed
/// host-side assertions can be re-run on one boot's output. Unset: a temporary
/// folder, removed afterwards.
fn kept_output() -> Option<PathBuf> {
    std::env::var_os("TRACE_RECIPE_LAB_OUT").map(PathBuf::from)
}

/// The three lab kernels, as recipes' `# kernels:` headers name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// Debian 12's default, 6.1.
    Debian61,
    /// Debian 12's 6.12 (bookworm-security).
    Debian612,
    /// Debian 12's PREEMPT_RT 6.1 (`linux-image-rt-amd64`): the wakeup tracers,
    /// hwlat, osnoise, timerlat and the stack tracer.
    Rt61,
    /// Debian unstable's newest 7.2 (scripts/lab-kernel): fprobes, BTF
    /// fetchargs, eprobes, func-args, copy_trace_marker.
    Debian72,
}

impl Kernel {
    /// The name of `# kernels:` headers and of the output folder.
    fn tag(self) -> &'static str {
        match self {
            Kernel::Debian61 => "6.1",
            Kernel::Debian612 => "6.12",
            Kernel::Rt61 => "6.1-rt",
            Kernel::Debian72 => "7.2",
        }
    }

    /// The function that opens a path by a `struct filename`: renamed from
    /// do_filp_open to do_file_open (same arguments) after 6.18;
    /// tests/lab/guest.sh names the kernel's in the lab's recipes.
    fn open_fn(self) -> &'static str {
        match self {
            Kernel::Debian72 => "do_file_open",
            _ => "do_filp_open",
        }
    }

    /// Whether instances offer function_graph (6.11 and later).
    fn graph_in_instance(self) -> bool {
        matches!(self, Kernel::Debian612 | Kernel::Debian72)
    }
}

/// The kernel of Debian unstable's 7.2 series, put into the lab's cache by
/// scripts/lab-kernel (downloaded once, then cached).
fn kernel_72() -> String {
    let o = Command::new(repo().join("scripts/lab-kernel"))
        .args(["sid", "7.2", "amd64"])
        .output()
        .expect("run scripts/lab-kernel");
    assert!(
        o.status.success(),
        "scripts/lab-kernel sid 7.2 failed:\n{}",
        tail(&text(&o.stderr))
    );
    text(&o.stdout).trim().to_string()
}

/// The versioned package `linux-image-rt-amd64` depends on, else the one the lab README names.
fn kernel_rt() -> String {
    Command::new("apt-cache")
        .args(["depends", "linux-image-rt-amd64"])
        .output()
        .ok()
        .and_then(|o| {
            text(&o.stdout).lines().find_map(|l| {
                let name = l.trim().strip_prefix("Depends: ")?;
                name.starts_with("linux-image-6").then(|| name.to_string())
            })
        })
        .unwrap_or_else(|| "linux-image-6.1.0-56-rt-amd64".into())
}

fn payload(dir: &Path) -> PathBuf {
    let p = dir.join("payload");
    std::fs::create_dir_all(p.join("lab/rt")).unwrap();
    std::fs::create_dir_all(p.join("lab/answers")).unwrap();
    std::fs::create_dir_all(p.join("lab/persist")).unwrap();
    std::fs::create_dir_all(p.join("recipes")).unwrap();
    // Stripped: the payload travels in the guest's initramfs, which the
    // emulated guest unpacks (the debug build is 240 MB with its debug info).
    let strip = Command::new("strip")
        .arg("-o")
        .arg(p.join("trace-recipe"))
        .arg(bin())
        .output()
        .expect("run strip (binutils)");
    assert!(strip.status.success(), "{}", text(&strip.stderr));
    std::fs::copy(repo().join("tests/lab/guest.sh"), p.join("guest.sh")).unwrap();
    // The guest's busybox has no chrt: util-linux's, with its libraries (the lab copies them).
    let chrt = Command::new("sh")
        .args(["-c", "command -v chrt"])
        .output()
        .unwrap();
    std::fs::copy(text(&chrt.stdout).trim(), p.join("chrt")).unwrap();
    // perf-tools' funccount and funcslower (guest.sh `answers` runs them beside
    // recipes/funccount.toml and funcslower.toml): bash scripts, and the
    // guest's busybox has no bash: the host's, with its libraries.
    std::fs::create_dir_all(p.join("perf-tools")).unwrap();
    for tool in ["funccount", "funcslower"] {
        crate::perftools::perf_tool(tool, &p.join("perf-tools"));
    }
    std::fs::copy("/bin/bash", p.join("bash")).unwrap();
    for (from, to) in [
        ("tests/lab", "lab"),
        ("tests/lab/rt", "lab/rt"),
        ("tests/lab/answers", "lab/answers"),
        ("tests/lab/persist", "lab/persist"),
        ("recipes", "recipes"),
    ] {
        for e in std::fs::read_dir(repo().join(from)).unwrap() {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            if name.ends_with(".toml") || name == "marker.txt" || name == "guest.sh" {
                std::fs::copy(&path, p.join(to).join(name)).unwrap();
            }
        }
    }
    let cc = Command::new("cc")
        .args(["-O0", "-o"])
        .arg(p.join("segv"))
        .arg(repo().join("tests/lab/segv.c"))
        .output()
        .unwrap();
    assert!(cc.status.success(), "{}", text(&cc.stderr));
    p
}

/// Boots `package` (None: the lab's default, Debian 12's 6.1) and returns the output folder.
/// `guest_args` go to tests/lab/guest.sh (`faults`: also run the fault and kill trials).
fn boot(
    dir: &Path,
    payload: &Path,
    tag: &str,
    package: Option<&str>,
    guest_args: &[&str],
) -> PathBuf {
    boot_with(dir, payload, tag, package, &Guest::default(), guest_args)
}

/// What a boot runs other than tests/lab/guest.sh on the lab's command line.
#[derive(Default)]
struct Guest<'a> {
    /// The guest script, relative to the payload (default `guest.sh`).
    script: Option<&'a str>,
    /// More of the lab script's arguments (`--append ARGS`, `--qemu-args ARGS`).
    lab_args: &'a [&'a str],
}

/// [`boot`], running `guest`.
fn boot_with(
    dir: &Path,
    payload: &Path,
    tag: &str,
    package: Option<&str>,
    guest: &Guest<'_>,
    guest_args: &[&str],
) -> PathBuf {
    let out = dir.join(tag);
    // Niced: the guests take what CPU the host's tests leave (those wait on
    // workloads and deadlines, the guests only on their own progress).
    let mut c = Command::new("nice");
    c.args(["-n", "10"]).arg(lab_script());
    // One emulated CPU: under TCG with two, patching the kernel's text for
    // function_graph at the top level of 6.1 soft-locked the guest (seen here:
    // "soft lockup - CPU#0 stuck" until the timeout, as the lab README warns).
    // The RT boot runs the most (about 13 min here with the machine loaded):
    // the timeout leaves room for a slow CI host.
    c.args(["--smp", "1", "--timeout", "1800", "--out"])
        .arg(&out);
    if let Some(p) = package {
        c.args(["--kernel-package", p]);
    }
    // lab/answers/both.toml (guest.sh both) times block requests on
    // null_blk's /dev/nullb0.
    if guest_args.contains(&"both") {
        c.args(["--modules", "null_blk"]);
    }
    c.args(guest.lab_args);
    c.arg(payload)
        .args(["--", "sh"])
        .arg(format!("/payload/{}", guest.script.unwrap_or("guest.sh")))
        .args(guest_args);
    run_lab(c, out, tag)
}

/// Runs the lab command `c` (its `--out` is `out`) and returns `out`, or
/// `out` unbooted when `$TRACE_RECIPE_LAB_OUT` keeps a complete output
/// (`out/done`) there; fails the test when the guest failed.
fn run_lab(mut c: Command, out: PathBuf, tag: &str) -> PathBuf {
    if kept_output().is_some() && out.join("done").exists() {
        eprintln!(
            "kernel lab {tag}: asserting on the kept output in {} (no boot); remove it to boot again",
            out.display()
        );
        return out;
    }
    let t = Instant::now();
    let o = c.output().expect("run the kernel lab");
    eprintln!(
        "FIGURE kernel lab {tag}: {:.1} s (boot + every lab recipe)",
        t.elapsed().as_secs_f64()
    );
    assert!(
        o.status.success() && out.join("done").exists(),
        "kernel lab {tag} failed (status {:?}):\n{}\n{}",
        o.status.code(),
        tail(&text(&o.stdout)),
        tail(&text(&o.stderr))
    );
    out
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The records of event `event` in the trace.dat of lab recipe `name`, each as
/// its decoded fields (`pid` and `ts`, in ns, too; numbers as decimal text, strings as text,
/// arrays as their elements joined by `,`, and
/// for `ip`/`func` fields also `ip_sym`/`func_sym`, the kallsyms name, for a
/// stack's `caller` array `caller_sym`, its frames' names joined by `,`), read
/// with our own reader's field decoder, independent of how a line is printed.
fn records_of(
    out: &Path,
    name: &str,
    event: &str,
) -> Vec<std::collections::BTreeMap<String, String>> {
    use tracedat::{FieldValue, Record, TraceFile};
    let file = TraceFile::open(&out.join(name).join("run/trace.dat")).unwrap();
    let mut v = Vec::new();
    for rec in file.records() {
        let Ok(Record::Event(e)) = rec else { continue };
        if e.format.name != event {
            continue;
        }
        let mut m = std::collections::BTreeMap::new();
        m.insert("pid".to_string(), e.pid().to_string());
        m.insert("ts".to_string(), e.ts.to_string());
        for (k, val) in e.fields() {
            let text = match val {
                FieldValue::Int(i) => i.to_string(),
                FieldValue::UInt(u) => {
                    if matches!(k, "ip" | "func")
                        && let Some((sym, _)) = file.symbol(u)
                    {
                        m.insert(format!("{k}_sym"), sym.to_string());
                    }
                    u.to_string()
                }
                FieldValue::Str(s) | FieldValue::Bytes(s) => {
                    String::from_utf8_lossy(s).into_owned()
                }
                FieldValue::Array(items) => items
                    .iter()
                    .map(|i| match i {
                        FieldValue::Int(n) => n.to_string(),
                        FieldValue::UInt(n) => n.to_string(),
                        _ => "?".into(),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
            };
            m.insert(k.to_string(), text);
        }
        // A stack's `caller` holds as many 64-bit addresses as the record is
        // long (its format declares a fixed length), up to an all-ones end mark.
        if let Some(c) = e.format.field("caller").filter(|_| event == "kernel_stack") {
            let syms: Vec<&str> = e
                .data
                .get(c.offset..)
                .unwrap_or_default()
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                .take_while(|a| *a != u64::MAX)
                .filter_map(|a| file.symbol(a).map(|(sym, _)| sym))
                .collect();
            m.insert("caller_sym".into(), syms.join(","));
        }
        v.push(m);
    }
    v
}

/// The recipe `name` checked and ran cleanly; returns the report text of its trace.dat.
fn ran(out: &Path, name: &str) -> String {
    let d = out.join(name);
    let ctx = || {
        format!(
            "{}\n{}",
            read(&d.join("check.txt")),
            read(&d.join("run.txt"))
        )
    };
    assert_eq!(
        read(&d.join("check.rc")).trim(),
        "0",
        "{name}: check failed:\n{}",
        ctx()
    );
    assert_eq!(
        read(&d.join("run.rc")).trim(),
        "0",
        "{name}: run failed:\n{}",
        ctx()
    );
    let r = Command::new(bin())
        .arg("report")
        .arg(d.join("run/trace.dat"))
        .output()
        .unwrap();
    assert!(r.status.success(), "{name}: {}", text(&r.stderr));
    text(&r.stdout)
}

/// Event lines of a report whose event name is `event`.
fn lines_of<'a>(report: &'a str, event: &str) -> Vec<&'a str> {
    let needle = format!(" {event}: ");
    report.lines().filter(|l| l.contains(&needle)).collect()
}

/// Events of run `name`'s trace (`report`) that are the run's own by the
/// rule its threads are kept out with (report.json `recorder.excluded_tids`,
/// [`crate::common::is_runs_own`]), and all events.
fn own_events(out: &Path, name: &str, report: &str) -> (usize, usize) {
    let json: serde_json::Value =
        serde_json::from_str(&read(&out.join(format!("{name}/run/report.json")))).unwrap();
    let tids: std::collections::BTreeSet<i32> = json["recorder"]["excluded_tids"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| i32::try_from(t.as_i64()?).ok())
                .collect()
        })
        .unwrap_or_default();
    // main thread, guard and one reader per CPU (one CPU in the lab).
    assert!(tids.len() >= 3, "{name}: {json:#}");
    let lines: Vec<crate::common::ReportLine> = report
        .lines()
        .filter_map(crate::common::ReportLine::parse)
        .collect();
    let own = lines
        .iter()
        .filter(|l| crate::common::is_runs_own(l.event, l.pid(), false, l.fields, &tids))
        .count();
    (own, lines.len())
}

/// The `hitcount:` of one hist table row.
fn hitcount(row: &str) -> u64 {
    row.split("hitcount:")
        .nth(1)
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn assert_lab(out: &Path, kernel: Kernel) {
    let tag = kernel.tag();
    let six_twelve = kernel.graph_in_instance();
    let release = read(&out.join("release.txt"));
    let series = match kernel {
        Kernel::Debian61 | Kernel::Rt61 => "6.1.",
        Kernel::Debian612 => "6.12.",
        Kernel::Debian72 => "7.2.",
    };
    assert!(
        release.starts_with(series) && release.contains("-rt-") == (kernel == Kernel::Rt61),
        "{tag}: booted {release}"
    );

    // The RT boot runs the latency tracers and the stack tracer of tests/lab/;
    // the other lab recipes run on 6.1, the same release (tests/lab/guest.sh).
    if kernel != Kernel::Rt61 {
        assert_lab_recipes(out, kernel);
    }

    // Every recipe of recipes/ made for this kernel checks clean here (not
    // checked in the RT boot: 6.1 checks them, the same release).
    let recipes = match kernel {
        Kernel::Rt61 => Vec::new(),
        _ => std::fs::read_dir(repo().join("recipes")).unwrap().collect(),
    };
    for e in recipes {
        let path = e.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let body = read(&path);
        let kernels = body
            .lines()
            .find_map(|l| l.strip_prefix("# kernels:"))
            .map(|k| {
                k.split(',')
                    .map(|s| s.trim().to_string())
                    .collect::<Vec<_>>()
            });
        let meant = kernels.is_none_or(|k| k.iter().any(|k| k == tag));
        let d = out.join(format!("recipe-{name}"));
        if meant {
            assert_eq!(
                read(&d.join("check.rc")).trim(),
                "0",
                "{tag}: recipes/{name}.toml does not check clean:\n{}",
                read(&d.join("check.txt"))
            );
        }
    }

    // On the freshly booted guest, a tracer run changes tracefs in exactly what
    // it declared irreversible (6.1: it runs at the top level and allocates the
    // top-level ring buffer) and in nothing else.
    assert_eq!(
        read(&out.join("fresh-run.rc")).trim(),
        "0",
        "{tag}: {}",
        read(&out.join("fresh-run.txt"))
    );
    // `FILE:LINE` lines (tests/lab/guest.sh tracefs_state), grouped by file.
    let state = |f: &str| -> std::collections::BTreeMap<String, String> {
        let mut m = std::collections::BTreeMap::<String, String>::new();
        for (k, v) in read(&out.join(f)).lines().filter_map(|l| l.split_once(':')) {
            let e = m.entry(k.to_string()).or_default();
            if !e.is_empty() {
                e.push('\n');
            }
            e.push_str(v.trim());
        }
        m
    };
    let (before, after) = (state("fresh-before.txt"), state("fresh-after.txt"));
    let report: serde_json::Value =
        serde_json::from_str(&read(&out.join("fresh-run/report.json"))).unwrap();
    let declared = report["irreversible"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let changed: Vec<String> = keys
        .into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| format!("{k}: {:?} -> {:?}", before.get(k), after.get(k)))
        .collect();
    let undeclared: Vec<&String> = changed
        .iter()
        .filter(|c| {
            !declared.iter().any(|d| {
                d["declared"] == true
                    && c.starts_with(&format!("{}: ", d["file"].as_str().unwrap_or("")))
                    && before
                        .get(d["file"].as_str().unwrap_or(""))
                        .map(String::as_str)
                        == d["before"].as_str()
            })
        })
        .collect();
    eprintln!(
        "FIGURE kernel lab {tag}: fresh boot, tracer run changed {} tracefs file(s), {} declared irreversible, {} undeclared",
        changed.len(),
        declared.len(),
        undeclared.len()
    );
    assert!(
        undeclared.is_empty(),
        "{tag}: undeclared changes {undeclared:?}; declared {declared:?}"
    );
    if !six_twelve {
        assert!(
            declared.len() == 1 && changed.len() == 1,
            "{tag}: the top-level run allocates the ring buffer, declared: {declared:?} {changed:?}"
        );
        assert!(
            read(&out.join("status.txt")).contains("top-level ring buffer allocated since boot")
        );
    }

    // `check --facts` with the guest's fact file, here, as a user without root
    // and without tracefs, reaches the guest's own verdict on every recipe.
    let facts = out.join("facts.json.zst");
    assert!(facts.is_file(), "{tag}: {}", read(&out.join("facts.txt")));
    let mut compared = 0;
    let mut differ = Vec::new();
    for e in std::fs::read_dir(out).unwrap() {
        let d = e.unwrap().path();
        let name = d.file_name().unwrap().to_str().unwrap().to_string();
        if !d.join("check.rc").is_file() {
            continue;
        }
        let recipe = match name.strip_prefix("recipe-") {
            _ if d.join("recipe.toml").is_file() => d.join("recipe.toml"),
            Some(n) => repo().join(format!("recipes/{n}.toml")),
            None if repo().join(format!("tests/lab/rt/{name}.toml")).is_file() => {
                repo().join(format!("tests/lab/rt/{name}.toml"))
            }
            None => repo().join(format!("tests/lab/{name}.toml")),
        };
        let o = crate::facts::check_offline_as_nobody(&facts, &recipe);
        let (guest, host) = (
            read(&d.join("check.rc")).trim().to_string(),
            o.status.code(),
        );
        compared += 1;
        if host.map(|c| c.to_string()) != Some(guest.clone()) {
            differ.push(format!(
                "{name}: guest check exit {guest}, host check --facts exit {host:?}\n{}\n{}",
                read(&d.join("check.txt")),
                text(&o.stdout) + &text(&o.stderr)
            ));
        }
    }
    eprintln!(
        "FIGURE kernel lab {tag}: check --facts as nobody agrees with the guest's check on {}/{compared} recipes",
        compared - differ.len()
    );
    // The RT boot checks its seven lab recipes; the others, every lab recipe
    // and every recipe of recipes/.
    let least = if kernel == Kernel::Rt61 { 7 } else { 10 };
    assert!(
        compared >= least && differ.is_empty(),
        "{tag}:\n{}",
        differ.join("\n")
    );

    // Fault and kill trials at the steps of a kprobe, a function tracer and a
    // hist trigger plan (tests/lab/guest.sh; in the 6.12 boot), and of the
    // stack tracer and a latency tracer (in the RT boot).
    let trials: &[&str] = match kernel {
        Kernel::Debian61 | Kernel::Debian72 => &[],
        Kernel::Debian612 => &["kprobe-fetch", "function-filter", "hist-trigger"],
        Kernel::Rt61 => &["stack-filter", "wakeup-rt", "osnoise"],
    };
    let faults = if trials.is_empty() {
        String::new()
    } else {
        read(&out.join("faults.txt"))
    };
    for &recipe in trials {
        let lines: Vec<Vec<&str>> = faults
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|w| w.first() == Some(&recipe))
            .collect();
        let want = match recipe {
            "kprobe-fetch" => 8,
            "stack-filter" | "wakeup-rt" | "osnoise" => 4,
            _ => 2,
        };
        assert!(
            lines.len() >= want,
            "{tag}: {recipe}: fewer than {want} fault trials:\n{faults}"
        );
        for w in lines {
            let (mode, step, rc, state) = (w[1], w[2], w[3], w[4]);
            assert_eq!(
                state,
                "clean",
                "{tag}: {recipe} {mode} at step {step} left tracefs changed:\n{}",
                read(&out.join(format!(
                    "fault-{recipe}-{mode}-{}.txt",
                    step.split('/').next().unwrap()
                )))
            );
            // A failed step exits 3 after rolling back; a killed run dies by SIGKILL (137).
            let want = if mode == "FAIL" { "3" } else { "137" };
            assert_eq!(rc, want, "{tag}: {recipe} {mode} at step {step}: exit {rc}");
        }
    }
    if !trials.is_empty() {
        eprintln!(
            "FIGURE kernel lab {tag}: fault and kill trials clean: {}/{}",
            faults.lines().filter(|l| l.contains(" clean ")).count(),
            faults.lines().count()
        );
    }

    // The stack tracer: the deepest stack of the run, each frame with its size,
    // the first frame's depth the maximum; with a filter, a stack through it.
    // The first maximum of a boot is the exception: check_stack()
    // (kernel/trace/trace_stack.c) learns the size of its own frame only then
    // and takes it off stack_max_size after the frames' depths were set, so
    // the first frame may be deeper than the maximum by that much (seen with
    // the filter on 6.1: 1320 bytes against 1304).
    for (name, through) in [("stack", None), ("stack-filter", Some("vfs_read+"))] {
        ran(out, name);
        let dir = out.join(name).join("run");
        let json: serde_json::Value =
            serde_json::from_str(&read(&dir.join("report.json"))).unwrap();
        let st = &json["stack_tracer"];
        let max = st["max_stack_bytes"].as_u64().unwrap_or(0);
        let frames = st["frames"].as_array().cloned().unwrap_or_default();
        assert!(
            max > 0
                && frames.len() >= 3
                && frames[0]["depth_bytes"]
                    .as_u64()
                    .is_some_and(|d| d >= max && d - max < 256),
            "{tag}: {name}: {st:#}"
        );
        // Each frame's size, and a location (`SYMBOL+OFF/LEN`, or a bare address
        // for code without a symbol, e.g. an ftrace trampoline).
        assert!(
            frames.iter().all(|f| f["size_bytes"].as_u64().is_some()
                && f["location"].as_str().is_some_and(|l| !l.is_empty())),
            "{tag}: {name}: {st:#}"
        );
        assert!(
            frames
                .iter()
                .any(|f| f["location"].as_str().is_some_and(|l| l.contains("+0x"))),
            "{tag}: {name}: {st:#}"
        );
        if let Some(f) = through {
            assert!(
                frames
                    .iter()
                    .any(|fr| fr["location"].as_str().is_some_and(|l| l.starts_with(f))),
                "{tag}: {name}: no frame {f}: {st:#}"
            );
        }
        assert_held(&json, &format!("{tag}: {name}"));
        let summary = read(&dir.join("summary.txt"));
        assert!(
            summary.contains(&format!(
                "deepest kernel stack: {max} bytes, {} frames",
                frames.len()
            )),
            "{tag}: {name}: {summary}"
        );
        eprintln!(
            "FIGURE kernel lab {tag}: {name}: deepest stack {max} bytes in {} frames",
            frames.len()
        );
    }
    // The stack tracer's global files are as the boot left them after its runs.
    let (boot, fin) = (
        read(&out.join("boot-state.txt")),
        read(&out.join("final-state.txt")),
    );
    for file in [
        "stack_max_size:",
        "stack_trace_filter:",
        "stack_tracer_enabled:",
    ] {
        let of = |state: &str| -> Vec<String> {
            state
                .lines()
                .filter(|l| l.starts_with(file))
                .map(str::to_string)
                .collect()
        };
        assert!(
            !of(&boot).is_empty() && of(&boot) == of(&fin),
            "{tag}: {file} at boot {:?}, after the runs {:?}",
            of(&boot),
            of(&fin)
        );
    }

    if kernel == Kernel::Debian612 {
        assert_lab_answers(out);
    }

    // tracefs in the guest is as the boot left it.
    let after = read(&out.join("after.txt"));
    let fields: BTreeMap<&str, &str> = after
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k, v.trim()))
        .collect();
    for (k, want) in [
        ("instances", ""),
        ("kprobe_events", ""),
        ("uprobe_events", ""),
        ("current_tracer", "nop"),
        ("max_graph_depth", "0"),
        ("tracing_thresh", "0"),
        ("set_ftrace_filter", ""),
        ("set_graph_function", ""),
        ("set_event_pid", ""),
        ("tracing_on", "1"),
        ("journals", ""),
    ] {
        assert_eq!(
            fields.get(k).copied(),
            Some(want),
            "{tag}: {k} after the runs:\n{after}"
        );
    }
    let status = read(&out.join("status.txt"));
    assert!(
        status.contains("nothing left behind by trace-recipe"),
        "{tag}: {status}"
    );
    assert!(
        status.contains("top level: as after a clean boot"),
        "{tag}: {status}"
    );
    if kernel != Kernel::Rt61 {
        assert_triggers_and_filters(out, kernel);
    }
}

/// The lab recipes every kernel but the RT one runs, each asserted on what it
/// recorded: the function tracer with a filter, function_graph and its flame
/// graph, the run's own threads left out (idle-self, call-graph-depth), a
/// kprobe with fetchargs, a kretprobe with a filter, a hist trigger and its
/// table in report.json, a function traceoff trigger.
fn assert_lab_recipes(out: &Path, kernel: Kernel) {
    let tag = kernel.tag();
    let six_twelve = kernel.graph_in_instance();
    // function tracer with a filter, scoped to the workload.
    let report = ran(out, "function-filter");
    let calls = lines_of(&report, "function");
    assert!(!calls.is_empty(), "{tag}: no function events:\n{report}");
    let traced = records_of(out, "function-filter", "function");
    for r in &traced {
        let f = r.get("ip_sym").map_or("", String::as_str);
        assert!(
            f == "vfs_read" || f.starts_with("vfs_writ"),
            "{tag}: unfiltered: {r:?}"
        );
    }
    assert!(
        traced
            .iter()
            .any(|r| r.get("ip_sym").is_some_and(|f| f == "vfs_read")),
        "{tag}: {report}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&read(&out.join("function-filter/run/report.json"))).unwrap();
    let workload = json["workload"]["pid"]
        .as_i64()
        .expect("the workload's pid");
    for l in &calls {
        let task = crate::common::ReportLine::parse(l)
            .unwrap_or_else(|| panic!("{tag}: not a report line: {l}"));
        assert_eq!(
            i64::from(task.pid()),
            workload,
            "{tag}: a call from another task than the workload: {l}"
        );
    }

    // function_graph with graph_functions and max_graph_depth: in an instance on
    // 6.12; 6.1 offers it at the top level only, which `check` says, and the run
    // works there and restores every top-level file (see after.txt below).
    let check = read(&out.join("function-graph/check.txt"));
    assert_eq!(
        check.contains("only at the top level"),
        !six_twelve,
        "{tag}: {check}"
    );
    let report = ran(out, "function-graph");
    let entries = records_of(out, "function-graph", "funcgraph_entry");
    assert!(
        entries
            .iter()
            .any(|r| r.get("func_sym").is_some_and(|f| f == "do_sys_openat2")),
        "{tag}: no graph of do_sys_openat2:\n{report}"
    );
    for r in entries
        .iter()
        .chain(&records_of(out, "function-graph", "funcgraph_exit"))
    {
        let depth: u32 = r
            .get("depth")
            .and_then(|d| d.parse().ok())
            .unwrap_or_else(|| panic!("{tag}: no depth in {r:?}"));
        assert!(depth < 3, "{tag}: max_graph_depth = 3 exceeded: {r:?}");
    }
    // The flame graph's input: self time per call path, as trace-cmd's drawing
    // of the same graph adds up.
    let dat = out.join("function-graph/run/trace.dat");
    let listing = crate::common::trace_cmd_report(&dat);
    let folded = Command::new(bin())
        .args(["report", "--format", "folded-funcgraph"])
        .arg(&dat)
        .output()
        .unwrap();
    assert!(folded.status.success(), "{tag}: {}", text(&folded.stderr));
    let ours = crate::common::parse_folded(&text(&folded.stdout));
    assert!(
        ours.keys().any(|p| p.starts_with("do_sys_openat2;")),
        "{tag}: {ours:?}"
    );
    assert_eq!(ours, crate::common::funcgraph_folded(&listing), "{tag}");

    // The run's own threads stay out of the trace: a whole-system trace of the
    // idle guest holds under 1 % of events from them, and a function_graph of
    // do_sys_openat2 no graph of their opens (with include_self it does, so the
    // check can fail).
    let (own, total) = own_events(out, "idle-self", &ran(out, "idle-self"));
    assert!(total > 0, "{tag}: the idle trace is empty");
    let share = 100.0 * own as f64 / total as f64;
    eprintln!(
        "FIGURE kernel lab {tag}: idle whole-system trace: {own} of {total} events ({share:.2} %) from the run itself"
    );
    assert!(
        share < 1.0,
        "{tag}: {own} of {total} events are the run's own"
    );
    let graph = |name: &str| {
        let d = out.join(name);
        assert_eq!(
            read(&d.join("run.rc")).trim(),
            "0",
            "{tag}: {name}: {}",
            read(&d.join("run.txt"))
        );
        let r = Command::new(bin())
            .arg("report")
            .arg(d.join("run/trace.dat"))
            .output()
            .unwrap();
        assert!(r.status.success(), "{tag}: {name}: {}", text(&r.stderr));
        let report = text(&r.stdout);
        let tool: Vec<String> = lines_of(&report, "funcgraph_entry")
            .into_iter()
            .filter(|l| l.contains("func=do_sys_openat2 "))
            .filter_map(crate::common::ReportLine::parse)
            .filter(|l| l.comm() == "trace-recipe" || l.comm().starts_with("record-cpu"))
            .map(|l| format!("{l:?}"))
            .collect();
        tool
    };
    let mine = graph("recipe-call-graph-depth");
    assert!(
        mine.is_empty(),
        "{tag}: call graphs of the run's own opens:\n{}",
        mine.join("\n")
    );
    // With include_self the run's threads are traced again; whether they open a
    // file while recording depends on the run (it reads /proc/kallsyms before),
    // so only report what was seen.
    eprintln!(
        "FIGURE kernel lab {tag}: call graphs of the run's own opens with include_self: {}",
        graph("recipe-call-graph-depth-self").len()
    );

    // kprobe with fetchargs and a string filter.
    let report = ran(out, "kprobe-fetch");
    let opens = records_of(out, "kprobe-fetch", "open_entry");
    assert!(!opens.is_empty(), "{tag}: {report}");
    for r in &opens {
        assert!(
            r.get("path")
                .is_some_and(|p| p == "/payload/lab/marker.txt")
                && r.get("dfd").is_some_and(|d| d == "-100"),
            "{tag}: {r:?}"
        );
    }

    assert!(
        !records_of(out, "kprobe-fetch", "kernel_stack").is_empty() && report.contains("=> "),
        "{tag}: `stacktrace = true` records a kernel stack with each hit:\n{report}"
    );

    // kretprobe with a filter on $retval.
    let report = ran(out, "kretprobe-filter");
    let rets = lines_of(&report, "open_ret");
    assert!(
        !rets.is_empty(),
        "{tag}: no failed open recorded:\n{report}"
    );
    let hist = read(&out.join("kretprobe-filter/run/hist/kprobes-open_ret.txt"));
    // The kernel prints signed keys as unsigned 64-bit numbers: -2 is 2^64 - 2.
    let row = hist
        .lines()
        .find(|l| l.contains("{ ret: 18446744073709551614 }") || l.contains("{ ret: -2 }"))
        .unwrap_or_else(|| panic!("{tag}: no row for ret -2 in the kretprobe's hist:\n{hist}"));
    assert!(
        hitcount(row) >= 1,
        "{tag}: the row for ret -2 counts no hit: {row}"
    );
    for r in &records_of(out, "kretprobe-filter", "open_ret") {
        assert!(
            r.get("ret").is_some_and(|v| v == "-2"),
            "{tag}: the filter keeps ret < 0 only: {r:?}"
        );
    }

    // hist trigger: the table is saved before rollback.
    ran(out, "hist-trigger");
    let hist = read(&out.join("hist-trigger/run/hist/kmem-kmalloc.txt"));
    let snapshot = read(&out.join("hist-trigger/run/snapshot.txt"));
    let snapped: Vec<&str> = snapshot
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    assert!(
        snapped.iter().any(|l| l.contains("sched_process_exec:")),
        "{tag}: snapshot.txt does not hold the exec that fired the snapshot trigger:\n{snapshot}"
    );
    // Data rows, not the header (which names bytes_req too): `{ call_site: ... }
    // hitcount: N  bytes_req: M` with N and M above zero.
    let rows: Vec<&str> = hist
        .lines()
        .filter(|l| l.starts_with("{ call_site:"))
        .collect();
    assert!(
        rows.iter().any(|r| hitcount(r) > 0
            && r.split("bytes_req:")
                .nth(1)
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .is_some_and(|b| b > 0)),
        "{tag}: no kmalloc call site with hits and bytes:\n{hist}"
    );

    // The same table as data in report.json: the rows of the file, summed
    // values that agree with the kernel's Totals, and the expectation on it.
    let json: serde_json::Value =
        serde_json::from_str(&read(&out.join("hist-trigger/run/report.json"))).unwrap();
    let table = &json["hist"][0];
    let parsed = table["rows"].as_array().cloned().unwrap_or_default();
    assert_eq!(table["event"], "kmem:kmalloc", "{tag}: {json:#}");
    assert_eq!(table["file"], "hist/kmem-kmalloc.txt", "{tag}");
    assert_eq!(
        parsed.len(),
        rows.len().min(200),
        "{tag}: report.json hist rows against the file:\n{table:#}\n{hist}"
    );
    assert!(
        parsed.iter().all(|r| r["keys"]["call_site"]
            .as_str()
            .is_some_and(|k| k.starts_with('['))
            && r["values"]["bytes_req"].as_u64().is_some()),
        "{tag}: {table:#}"
    );
    if table["dropped"] == 0 {
        assert_eq!(
            table["totals"]["hitcount"], table["hits"],
            "{tag}: the rows' hitcounts add up to the kernel's Hits: {table:#}"
        );
    }
    assert!(
        json["expectations"][0]["passed"] == true,
        "{tag}: {:#}",
        json["expectations"]
    );
    let summary = read(&out.join("hist-trigger/run/summary.txt"));
    assert!(
        summary.contains(&format!(
            "hist table of kmem:kmalloc (hist/kmem-kmalloc.txt): {} entries, {} hits",
            table["entries"], table["hits"]
        )),
        "{tag}: {summary}"
    );
    eprintln!(
        "FIGURE kernel lab {tag}: hist table of kmem:kmalloc: {} rows, {} hits, {} bytes",
        parsed.len(),
        table["hits"],
        table["totals"]["bytes_req"]
    );

    // function traceoff trigger ends the run at the fault, long before the workload.
    ran(out, "function-traceoff");
    let json: serde_json::Value =
        serde_json::from_str(&read(&out.join("function-traceoff/run/report.json"))).unwrap();
    assert_eq!(
        json["stop_reason"], "traceoff (tracing_on dropped to 0)",
        "{tag}"
    );
    let up: Vec<f64> = read(&out.join("function-traceoff/uptime.txt"))
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    assert!(
        up[1] - up[0] < 45.0,
        "{tag}: the run waited for the workload: {up:?}"
    );
}

// --- ftrig (issue 22 items 7 and 8) ---

/// A numeric field of a record of [`records_of`] (0 when missing).
fn num(r: &BTreeMap<String, String>, field: &str) -> u64 {
    r.get(field).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Function triggers that switch events, `:mod:` filters with notrace and
/// function-fork, set_graph_notrace, tracing_thresh, a glob of events with a
/// filter, the event triggers traceon / traceoff / disable_event / stacktrace
/// with a count, kprobes at an offset and on a module's function with @SYM,
/// $stackN, $argN and $comm (tests/lab/*.toml, each asserted on what it recorded).
fn assert_triggers_and_filters(out: &Path, kernel: Kernel) {
    let tag = kernel.tag();
    // function enable_event / disable_event on ksys_sync: forks until the
    // workload's sync, exits (an event in no [[events]]) after it. The
    // snapshot trigger on the same call swapped the live buffer, with the
    // forks the recorder had not read yet, into snapshot.txt (`TIME:` in s).
    ran(out, "function-event");
    let snapshot = read(&out.join("function-event/run/snapshot.txt"));
    let snapped: Vec<u64> = snapshot
        .lines()
        .filter(|l| l.contains(" sched_process_fork: "))
        .filter_map(|l| {
            let t = l.split(" sched_process_fork: ").next()?;
            let secs: f64 = t
                .split_whitespace()
                .last()?
                .strip_suffix(':')?
                .parse()
                .ok()?;
            Some((secs * 1e9) as u64)
        })
        .collect();
    let forks = records_of(out, "function-event", "sched_process_fork");
    let exits = records_of(out, "function-event", "sched_process_exit");
    let last_fork = forks
        .iter()
        .map(|r| num(r, "ts"))
        .chain(snapped.iter().copied())
        .max()
        .unwrap_or(0);
    let first_exit = exits.iter().map(|r| num(r, "ts")).min().unwrap_or(0);
    // The recorder moves full sub-buffers only while tracing (splice), so the
    // few forks before the sync were still in the live buffer when the
    // snapshot trigger swapped it out: snapshot.txt holds them (the two
    // subshells' at least), by the workload's shell.
    let json: serde_json::Value =
        serde_json::from_str(&read(&out.join("function-event/run/report.json"))).unwrap();
    let shell = format!("-{} ", json["workload"]["pid"]);
    assert!(
        snapped.len() >= 2
            && snapshot
                .lines()
                .filter(|l| l.contains(" sched_process_fork: "))
                .all(|l| l.contains(&shell))
            && exits.len() >= 2
            && last_fork < first_exit,
        "{tag}: function-event: forks {forks:?}\nexits {exits:?}\nsnapshot.txt:\n{snapshot}"
    );
    eprintln!(
        "FIGURE kernel lab {tag}: function triggers: {} forks before the sync ({} in the snapshot it took), {} exits after it",
        forks.len() + snapped.len(),
        snapped.len(),
        exits.len()
    );

    // :mod:virtio_ring with virtqueue_kick left out (notrace), the workload's
    // children traced too (function-fork); a kprobe on virtio_ring:virtqueue_kick
    // shows they call it. 6.12 and 7.2 have virtio_ring built in: the check says so.
    let mut calls = Vec::new();
    if matches!(tag, "6.12" | "7.2") {
        assert!(
            read(&out.join("function-mod/check.txt"))
                .contains("no loaded module `virtio_ring` has traceable functions"),
            "{tag}: function-mod"
        );
    } else {
        ran(out, "function-mod");
        let module: std::collections::BTreeSet<String> =
            read(&out.join("function-mod/module-functions.txt"))
                .lines()
                .map(str::to_string)
                .collect();
        calls = records_of(out, "function-mod", "function");
        let json: serde_json::Value =
            serde_json::from_str(&read(&out.join("function-mod/run/report.json"))).unwrap();
        let workload = json["workload"]["pid"].as_i64().unwrap_or(0).to_string();
        assert!(
            !module.is_empty()
                && !calls.is_empty()
                && !records_of(out, "function-mod", "kick").is_empty(),
            "{tag}: function-mod: {} module functions, {} calls",
            module.len(),
            calls.len()
        );
        for r in &calls {
            let f = r.get("ip_sym").map_or("", String::as_str);
            assert!(
                module.contains(f) && f != "virtqueue_kick",
                "{tag}: function-mod: {r:?}"
            );
        }
        assert!(
            calls.iter().any(|r| r["pid"] != workload),
            "{tag}: function-mod: no call from a child of the workload {workload}"
        );
    }

    // set_graph_notrace: function-graph.toml graphs do_filp_open (7.2:
    // do_file_open), this one not.
    let open_fn = kernel.open_fn();
    let graphed = |name: &str, f: &str| {
        records_of(out, name, "funcgraph_entry")
            .iter()
            .any(|r| r.get("func_sym").is_some_and(|s| s == f))
    };
    ran(out, "graph-notrace");
    assert!(
        graphed("function-graph", open_fn)
            && graphed("graph-notrace", "do_sys_openat2")
            && !graphed("graph-notrace", open_fn)
            && !graphed("graph-notrace", "path_openat"),
        "{tag}: graph-notrace"
    );

    // tracing_thresh: no entries, only returns of 5 us or more.
    ran(out, "graph-thresh");
    let returns = records_of(out, "graph-thresh", "funcgraph_exit");
    assert!(
        records_of(out, "graph-thresh", "funcgraph_entry").is_empty()
            && returns
                .iter()
                .any(|r| r.get("func_sym").is_some_and(|f| f == "do_sys_openat2")),
        "{tag}: graph-thresh: {returns:?}"
    );
    for r in &returns {
        assert!(
            num(r, "rettime").saturating_sub(num(r, "calltime")) >= 5000,
            "{tag}: graph-thresh: a return under 5 us: {r:?}"
        );
    }

    // signal:* with `sig == 11`, written to each event of the glob.
    ran(out, "glob-filter");
    let generated = records_of(out, "glob-filter", "signal_generate");
    let delivered = records_of(out, "glob-filter", "signal_deliver");
    assert!(
        !generated.is_empty()
            && !delivered.is_empty()
            && generated.iter().chain(&delivered).all(|r| r["sig"] == "11"),
        "{tag}: glob-filter: {generated:?} {delivered:?}"
    );

    // Event triggers: at the SIGSEGV tracing pauses (traceoff) and forks are
    // switched off (disable_event); the next exec resumes it (traceon); one
    // stack for the first exec only (stacktrace:1).
    ran(out, "event-triggers");
    let of = |event: &str| records_of(out, "event-triggers", event);
    let segv = of("signal_generate")
        .into_iter()
        .find(|r| r["sig"] == "11")
        .unwrap_or_else(|| panic!("{tag}: event-triggers: no SIGSEGV"));
    let (at, victim) = (num(&segv, "ts"), segv["pid"].clone());
    let exits = of("sched_process_exit");
    let forks = of("sched_process_fork");
    // (The exec whose trigger turns tracing on is not itself recorded.)
    assert!(
        !exits.iter().any(|r| r["pid"] == victim)
            && exits.iter().filter(|r| num(r, "ts") > at).count() >= 2,
        "{tag}: event-triggers: traceoff at {at} (pid {victim}), then traceon: {exits:?}"
    );
    assert!(
        !forks.is_empty() && forks.iter().all(|r| num(r, "ts") < at),
        "{tag}: event-triggers: forks after the disable_event at {at}: {forks:?}"
    );
    assert_eq!(
        of("kernel_stack").len(),
        1,
        "{tag}: event-triggers: stacktrace:1"
    );

    // recipes/stop-at-fault.toml: the function traceoff trigger on
    // force_sig_fault ends the run at the fault, well before its 60 s, and
    // the stacktrace trigger on the same call records the fault's stack in the
    // run's instance first (the plan writes a traceoff before the function's
    // other triggers, and the kernel runs them in the reverse order).
    let d = out.join("recipe-stop-at-fault");
    assert_eq!(
        read(&d.join("run.rc")).trim(),
        "0",
        "{tag}: {}",
        read(&d.join("run.txt"))
    );
    let json: serde_json::Value = serde_json::from_str(&read(&d.join("run/report.json"))).unwrap();
    assert_eq!(
        json["stop_reason"], "traceoff (tracing_on dropped to 0)",
        "{tag}: {json:#}"
    );
    let stacks = records_of(out, "recipe-stop-at-fault", "kernel_stack");
    assert!(
        json["duration_s"].as_f64().is_some_and(|s| s < 45.0)
            && stacks.len() == 1
            && stacks[0].get("caller_sym").is_some_and(|c| {
                c.split(',').any(|f| f == "force_sig_fault")
                    && c.split(',').any(|f| f.ends_with("exc_page_fault"))
            }),
        "{tag}: stop-at-fault: the fault's stack {stacks:?}\n{json:#}"
    );
    eprintln!(
        "FIGURE kernel lab {tag}: stop-at-fault ended after {:.1} s with the fault's stack {}",
        json["duration_s"].as_f64().unwrap_or(0.0),
        stacks[0]["caller_sym"]
    );

    // Function triggers traceoff at the workload's sync and traceon at its
    // fault: the exec between them (/payload/segv's) is not recorded, the
    // fault's SIGSEGV and the exec after it are. The event trigger
    // enable_event on that SIGSEGV switched signal_deliver on: every delivery
    // recorded comes after it, the first is the SIGSEGV's.
    ran(out, "function-traceon");
    let of = |event: &str| records_of(out, "function-traceon", event);
    let execs = of("sched_process_exec");
    let segv = of("signal_generate")
        .into_iter()
        .find(|r| r["sig"] == "11")
        .unwrap_or_else(|| panic!("{tag}: function-traceon: no SIGSEGV: {execs:?}"));
    let at = num(&segv, "ts");
    let ours: Vec<u64> = execs
        .iter()
        .filter(|r| r["filename"] == "/payload/trace-recipe")
        .map(|r| num(r, "ts"))
        .collect();
    assert!(
        !execs.iter().any(|r| r["filename"] == "/payload/segv")
            && ours.len() == 2
            && ours[0] < at
            && ours[1] > at,
        "{tag}: function-traceon: paused from the sync to the fault at {at}: {execs:?}"
    );
    let delivered = of("signal_deliver");
    assert!(
        delivered.first().is_some_and(|r| r["sig"] == "11")
            && delivered.iter().all(|r| num(r, "ts") > at),
        "{tag}: function-traceon: enable_event at the SIGSEGV {at}: {delivered:?}"
    );
    eprintln!(
        "FIGURE kernel lab {tag}: function traceoff/traceon: {} execs recorded, none between the sync and the fault; {} signal deliveries from the SIGSEGV on",
        execs.len(),
        delivered.len()
    );

    // Nested dereferences, a u8 array and bitfields (kprobe-deref): the path
    // through `struct filename` (its kernel copy and the caller's pointer),
    // its first 4 bytes "/pay", the second byte of its first 32-bit word
    // ('p', 112) and that word's low 4 bits ('/' is 0x2f: 15). 7.2's
    // `struct filename` no longer holds the caller's pointer at offset 8 (the
    // read there gives an empty string): `uname` is asserted up to 6.12.
    // The kernel declares the array `u8 head[]` with size 4; its print format
    // shows the elements, which the report line carries.
    let report = ran(out, "kprobe-deref");
    let opens = records_of(out, "kprobe-deref", "filp_open");
    let lines = lines_of(&report, "filp_open");
    assert!(
        !opens.is_empty()
            && opens.iter().all(|r| r["kname"] == "/payload/lab/marker.txt"
                && (r["uname"] == "/payload/lab/marker.txt" || kernel == Kernel::Debian72)
                && r["second"] == "112"
                && r["low"] == "15")
            && lines.len() == opens.len()
            && lines.iter().all(|l| l.contains(" head={47,112,97,121} ")),
        "{tag}: kprobe-deref: {opens:?}\n{report}"
    );
    eprintln!(
        "FIGURE kernel lab {tag}: kprobe-deref: {} opens read through struct filename: {}",
        opens.len(),
        lines[0].trim()
    );

    // kprobes at do_sys_openat2+OFFSET and on 9p:v9fs_file_open.
    ran(out, "kprobe-where");
    let offset = read(&out.join("kprobe-where/offset.txt"));
    let inside = records_of(out, "kprobe-where", "open_off");
    let module = records_of(out, "kprobe-where", "open_9p");
    assert!(
        !inside.is_empty()
            && inside
                .iter()
                .all(|r| num(r, "jiffies") > 0 && num(r, "ret_addr") >= 0xffff_ffff_8000_0000),
        "{tag}: kprobe-where +{offset}: {inside:?}"
    );
    assert!(
        !module.is_empty()
            && module.iter().all(|r| r["comm"] == "ls"
                && num(r, "jiffies") > 0
                && num(r, "inode") >= 0x8000_0000_0000_0000),
        "{tag}: kprobe-where 9p: {module:?}"
    );
    eprintln!(
        "FIGURE kernel lab {tag}: kprobe at do_sys_openat2+{}: {} hits; 9p:v9fs_file_open: {} hits; :mod:virtio_ring: {} calls",
        offset.trim(),
        inside.len(),
        module.len(),
        calls.len()
    );
}

// --- end ftrig ---

/// The lab's output folder for one kernel: `$TRACE_RECIPE_LAB_OUT` (kept) or a
/// temporary folder (removed when the returned guard drops), and the payload
/// built into it. `None` when the lab cannot run here (and not under CI).
fn lab_dir(tag: &str) -> Option<(Option<tempfile::TempDir>, PathBuf, PathBuf)> {
    lab_dir_with(tag, missing(), payload)
}

/// [`lab_dir`] for a lab that cannot run here for `why_not` (if set), with the
/// payload that `payload` builds into the folder it is given.
fn lab_dir_with(
    tag: &str,
    why_not: Option<String>,
    payload: fn(&Path) -> PathBuf,
) -> Option<(Option<tempfile::TempDir>, PathBuf, PathBuf)> {
    if let Some(why) = why_not {
        let msg = format!(
            "\n!!!!!!!! KERNEL LAB {tag} NOT RUN: {why}.\n!!!!!!!! kprobes, the function tracers, hist and function triggers are UNTESTED on this machine.\n"
        );
        eprintln!("{msg}");
        assert!(!crate::common::in_ci(), "{msg}");
        return None;
    }
    // Each kernel boots in a test of its own, beside the others and beside the
    // host's tracefs tests: the guest never touches the host's tracefs, so no
    // lab test takes the tracefs lock (nextest's `lab` test group bounds how
    // many guests run at once, .config/nextest.toml).
    let (temp, dir) = match kept_output() {
        Some(d) => (None, d),
        None => {
            let t = tempfile::tempdir().unwrap();
            let d = t.path().to_path_buf();
            (Some(t), d)
        }
    };
    let payload = payload(&dir.join(format!("payload-{tag}")));
    Some((temp, dir, payload))
}

/// Debian 12's default kernel, 6.1: every recipe of tests/lab/, and the
/// answers of both engines (tests/lab/guest.sh `both`).
#[test]
fn debian_6_1() {
    let tag = Kernel::Debian61.tag();
    let Some((_temp, dir, payload)) = lab_dir(tag) else {
        return;
    };
    let out = boot(&dir, &payload, tag, None, &["both"]);
    assert_lab(&out, Kernel::Debian61);
    assert_lab_probes(&out, tag);
    assert_lab_func_args(&out, tag);
    assert_answers_both(&out);
}

/// Debian 12's 6.12 (bookworm-security): every recipe of tests/lab/, the
/// fault and kill trials, the answers, and the answers of both engines
/// (tests/lab/guest.sh `faults answers both`).
#[test]
fn debian_6_12() {
    let tag = Kernel::Debian612.tag();
    let Some((_temp, dir, payload)) = lab_dir(tag) else {
        return;
    };
    let out = boot(
        &dir,
        &payload,
        tag,
        Some(&kernel_612()),
        &["faults", "answers", "both"],
    );
    assert_lab(&out, Kernel::Debian612);
    assert_lab_probes(&out, tag);
    assert_lab_func_args(&out, tag);
    assert_answers_both(&out);
}

/// Debian unstable's 7.2 (scripts/lab-kernel): every recipe of tests/lab/,
/// and the answers of both engines (tests/lab/guest.sh `both`).
#[test]
fn debian_7_2() {
    let tag = Kernel::Debian72.tag();
    let Some((_temp, dir, payload)) = lab_dir(tag) else {
        return;
    };
    let out = boot(&dir, &payload, tag, Some(&kernel_72()), &["both"]);
    assert_lab(&out, Kernel::Debian72);
    assert_lab_probes(&out, tag);
    assert_lab_func_args(&out, tag);
    assert_answers_both(&out);
}

/// Debian 12's PREEMPT_RT 6.1: what PREEMPT_RT changes, the recipes of
/// tests/lab/rt/ (the wakeup tracers, hwlat, osnoise, timerlat) and the stack
/// tracer's, with their fault and kill trials; the other lab recipes run on
/// 6.1 (`debian_6_1`), the same release.
#[test]
fn rt_6_1() {
    let tag = Kernel::Rt61.tag();
    let Some((_temp, dir, payload)) = lab_dir(tag) else {
        return;
    };
    let out = boot(&dir, &payload, tag, Some(&kernel_rt()), &["rt"]);
    assert_lab(&out, Kernel::Rt61);
    assert_rt(&out);
}

/// The run of `dir` (tests/lab/guest.sh) succeeded, its report.json names
/// `answer` as the analysis that answers the recipe's question, and its
/// summary's first section is that analysis, starting with `heading` and
/// holding each of `shows`. Returns the report.
fn assert_answer(
    out: &Path,
    dir: &str,
    answer: &str,
    heading: &str,
    shows: &[&str],
) -> serde_json::Value {
    let d = out.join(dir);
    assert_eq!(
        read(&d.join("run.rc")).trim(),
        "0",
        "{dir}: {}",
        read(&d.join("run.txt"))
    );
    let json: serde_json::Value = serde_json::from_str(&read(&d.join("run/report.json"))).unwrap();
    let summary = read(&d.join("run/summary.txt"));
    assert_eq!(json["answer"], answer, "{dir}: {summary}");
    let first = crate::common::first_section(&summary);
    assert!(
        first.starts_with(heading) && shows.iter().all(|s| first.contains(s)),
        "{dir}: the first section is not `{heading}` with {shows:?}:\n{summary}"
    );
    eprintln!(
        "FIGURE kernel lab: {dir}: summary answers with {answer}: {}",
        first.lines().next().unwrap_or("")
    );
    json
}

/// The answers of tests/lab/answers/both.toml, in the order they are
/// declared: one per answer shape the kernel engine takes.
const BOTH_ENGINES: [&str; 9] = [
    "opens_by_comm",
    "open_errno",
    "syscalls",
    "kmalloc_sites",
    "switch_stacks",
    "switch_states",
    "read_latency",
    "syscall_latency",
    "block_latency",
];

/// An answer table of report.json as (keys, count, cells) per row, then
/// `other` (if any) and `total`.
fn answer_rows(table: &serde_json::Value) -> Vec<(Vec<String>, u64, Vec<serde_json::Value>)> {
    let row = |r: &serde_json::Value| {
        let keys = (r["keys"].as_array().unwrap().iter())
            .map(|k| k.as_str().unwrap().to_string())
            .collect();
        let cells = r["cells"].as_array().unwrap().clone();
        (keys, r["count"].as_u64().unwrap(), cells)
    };
    let mut rows: Vec<_> = table["rows"].as_array().unwrap().iter().map(row).collect();
    if !table["other"].is_null() {
        rows.push(row(&table["other"]));
    }
    rows.push(row(&table["total"]));
    rows
}

/// tests/lab/answers/both.toml (run in the 6.1, 6.12 and 7.2 boots, guest.sh `both`):
/// each answer as the kernel's hist triggers computed it (the run's
/// report.json) equals the trace engine's answer over the same run's
/// trace.dat (`report --answer`, here): keys, counts and summed values
/// exactly, latency buckets exactly, latency totals within a microsecond per
/// span (the kernel's `common_timestamp.usecs`).
fn assert_answers_both(out: &Path) {
    let d = out.join("answers-both");
    assert_eq!(
        read(&d.join("run.rc")).trim(),
        "0",
        "answers-both: {}",
        read(&d.join("run.txt"))
    );
    let kernel: serde_json::Value =
        serde_json::from_str(&read(&d.join("run/report.json"))).unwrap();
    let json = d.join("trace-engine.json");
    let o = Command::new(bin())
        .arg("report")
        .arg(d.join("run/trace.dat"))
        .arg("--answer")
        .arg(repo().join("tests/lab/answers/both.toml"))
        .args(["--format", "json", "-o"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "report --answer: {}", text(&o.stderr));
    let trace: serde_json::Value = serde_json::from_str(&read(&json)).unwrap();
    for name in BOTH_ENGINES {
        let (k, t) = (&kernel["answers"][name], &trace["answers"][name]);
        assert_eq!(
            (k["engine"].as_str(), t["engine"].as_str()),
            (Some("kernel"), Some("trace")),
            "answers-both: {name}:\n{k}\n{t}"
        );
        let (kr, tr) = (answer_rows(k), answer_rows(t));
        let total = kr.last().map_or(0, |r| r.1);
        assert!(total > 0, "answers-both: {name} is empty: {k}");
        assert_eq!(
            kr.len(),
            tr.len(),
            "answers-both: {name}: rows differ:\nkernel {k}\ntrace {t}"
        );
        for (a, b) in kr.iter().zip(&tr) {
            let same = a.0 == b.0
                && a.1 == b.1
                && a.2.len() == b.2.len()
                && a.2
                    .iter()
                    .zip(&b.2)
                    .all(|(x, y)| match (&x["latency"], &y["latency"]) {
                        (serde_json::Value::Null, _) => x == y,
                        (lx, ly) => {
                            let us = |l: &serde_json::Value| l["total_us"].as_f64().unwrap_or(-1.0);
                            lx["buckets"] == ly["buckets"] && (us(lx) - us(ly)).abs() <= a.1 as f64
                        }
                    });
            assert!(
                same,
                "answers-both: {name}: the engines differ in row {:?}:\nkernel {:?}\ntrace  {:?}",
                a.0, a, b
            );
        }
        eprintln!(
            "FIGURE kernel lab: answers-both: {name}: {} rows, {total} counted, equal in both engines",
            kr.len() - 1
        );
    }
    // What the workload did, in the tables: three failing opens, stacks by
    // function without modules, 64 reads of 4 KiB from /dev/nullb0.
    let rows = |name: &str| answer_rows(&kernel["answers"][name]);
    assert!(
        rows("open_errno").contains(&(
            vec!["-ENOENT".to_string()],
            3,
            vec![serde_json::json!({"int": 3})]
        )),
        "{:?}",
        rows("open_errno")
    );
    assert!(!kernel["answers"]["syscalls"]["other"].is_null());
    let stacks = rows("switch_stacks");
    assert!(
        stacks
            .iter()
            .filter(|r| !r.0.is_empty())
            .all(|r| r.0[0].ends_with(";__schedule") && !r.0[0].contains('[')),
        "{stacks:?}"
    );
    assert!(rows("read_latency").last().unwrap().1 >= 64);
    // States as the kernel's print fmt shows them: letters, `R` for none and
    // `+` for preempted, never the bits.
    let states = rows("switch_states");
    assert!(
        states.iter().filter(|r| !r.0.is_empty()).all(|r| {
            let s = r.0[0].trim_end_matches('+');
            !s.is_empty()
                && s.split('|')
                    .all(|l| "SDTtXZPIR".contains(l) && l.len() == 1)
        }) && states.iter().any(|r| r.0 == ["S"]),
        "{states:?}"
    );
}

/// The answer table `name` of the run of `dir` (guest.sh `answers`), whose
/// summary leads with one of its answers: (keys, count, cells) per row (see
/// [`answer_rows`]).
fn answer_of_run(
    out: &Path,
    dir: &str,
    name: &str,
) -> Vec<(Vec<String>, u64, Vec<serde_json::Value>)> {
    let d = out.join(dir);
    let rc = read(&d.join("run.rc"));
    assert_eq!(rc.trim(), "0", "{dir}: {}", read(&d.join("run.txt")));
    let json: serde_json::Value = serde_json::from_str(&read(&d.join("run/report.json"))).unwrap();
    let summary = read(&d.join("run/summary.txt"));
    let table = &json["answers"][name];
    assert!(table.is_object(), "{dir}: no answer `{name}`:\n{summary}");
    let first = crate::common::first_section(&summary);
    let questions = json["answers"]
        .as_object()
        .into_iter()
        .flat_map(|a| a.values());
    assert!(
        questions
            .filter_map(|a| a["question"].as_str())
            .any(|q| first.starts_with(q)),
        "{dir}: the summary does not lead with an answer:\n{summary}"
    );
    answer_rows(table)
}

/// recipes/funccount.toml and funcslower.toml beside perf-tools' funccount
/// and funcslower (6.12 boot, guest.sh `answers`): the recipe counted a
/// workload's 1000 writes to /dev/null, `write_null` 1000 times, as
/// funccount did at the same time where the kernel has its function profiler,
/// else the kernel's function tracer at the top level (Debian's kernels are
/// built without the profiler, and funccount says so); funcslower and the
/// recipe each timed three sync(2) calls, every one over the 10 us threshold,
/// the recipe's durations those trace-cmd prints.
fn assert_perf_tools_function_answers(out: &Path) {
    let calls = answer_of_run(out, "answer-funccount", "calls");
    assert!(
        calls
            .iter()
            .any(|(k, n, _)| *k == ["write_null"] && *n == 1000),
        "funccount.toml: {calls:?}"
    );
    let theirs = read(&out.join("answer-funccount/perf-tools.txt"));
    let counted = theirs.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some("write_null")).then(|| w.next()?.parse::<u64>().ok())?
    });
    let (by, theirs_n) = match counted {
        Some(n) => ("perf-tools' funccount", n),
        // Debian's kernels have no function profiler, which funccount needs:
        // the top level's function tracer counted the same run.
        None => {
            assert!(
                theirs.contains("Have CONFIG_FUNCTION_PROFILER?"),
                "perf-tools' funccount:\n{theirs}"
            );
            let kernel = read(&out.join("answer-funccount/kernel-count.txt"));
            (
                "the top level's function tracer (perf-tools' funccount: no CONFIG_FUNCTION_PROFILER)",
                kernel.trim().parse().unwrap_or(0),
            )
        }
    };
    assert_eq!(theirs_n, 1000, "{by}:\n{theirs}");
    let ours = (calls.iter())
        .find(|(k, ..)| *k == ["write_null"])
        .map_or(0, |r| r.1);
    eprintln!("FIGURE kernel lab: funccount: write_null {ours} calls; {by}: {theirs_n}");

    let slow = answer_of_run(out, "answer-funcslower", "slow_calls");
    let syncs: Vec<_> = (slow.iter())
        .filter(|(k, ..)| k.get(1).is_some_and(|f| f == "ksys_sync"))
        .collect();
    assert!(
        syncs.len() == 1 && syncs[0].1 == 3,
        "funcslower.toml: three slow ksys_sync calls: {slow:?}"
    );
    let latency = &syncs[0].2[1]["latency"];
    let (min_us, max_us) = (latency["min_us"].as_f64(), latency["max_us"].as_f64());
    // Each call's duration as trace-cmd prints it (`funcgraph_exit: ! 423.337
    // us |  }`, no name: it names a return only after its entry): the answer's
    // shortest and longest are the same.
    let listing = crate::common::trace_cmd_report(&out.join("answer-funcslower/run/trace.dat"));
    let mut durations: Vec<f64> = (listing.lines())
        .filter(|l| l.contains("funcgraph_exit:"))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = w.iter().position(|t| *t == "us")?;
            w.get(at.checked_sub(1)?)?.parse().ok()
        })
        .collect();
    durations.sort_by(f64::total_cmp);
    let near =
        |a: Option<f64>, b: Option<&f64>| a.zip(b).is_some_and(|(a, b)| (a - b).abs() < 0.0015);
    assert!(
        durations.len() == 3
            && near(min_us, durations.first())
            && near(max_us, durations.last())
            && min_us >= Some(10.0),
        "funcslower.toml: {latency:#} against trace-cmd's {durations:?}:\n{listing}"
    );
    let min_us = min_us.unwrap_or_default();
    let theirs = read(&out.join("answer-funcslower/perf-tools.txt"));
    let lines = (theirs.lines())
        .filter(|l| l.contains("/* ksys_sync */"))
        .count();
    assert_eq!(lines, 3, "perf-tools' funcslower:\n{theirs}");
    eprintln!(
        "FIGURE kernel lab: funcslower: {} calls of ksys_sync over 10 us (the fastest {min_us} us, as trace-cmd prints it); perf-tools' funcslower lists {lines}",
        syncs[0].1
    );
}

/// recipes/opensnoop.toml and execsnoop.toml (eprobes; 6.12 boot, guest.sh
/// `answers`): a shell's two failing opens and one that succeeds, and the
/// two programs it runs (bash and chrt of the payload), each with the shell
/// as parent.
fn assert_eprobe_snoops(out: &Path) {
    let failed = answer_of_run(out, "answer-opensnoop", "failed_opens");
    for path in ["/nonexistent-a", "/nonexistent-b"] {
        assert!(
            failed
                .iter()
                .any(|(k, n, _)| *k == ["cat", path, "-ENOENT"] && *n == 1),
            "opensnoop.toml: {path}: {failed:?}"
        );
    }
    let opens = answer_of_run(out, "answer-opensnoop", "opens");
    assert!(
        (opens.iter()).any(|(k, n, _)| *k == ["cat", "/payload/lab/marker.txt"] && *n >= 1),
        "opensnoop.toml: {opens:?}"
    );
    let execs = answer_of_run(out, "answer-execsnoop", "execs");
    let of = |program: &str| {
        (execs.iter())
            .find(|(k, ..)| k.len() == 4 && k[1] == "sh" && k[3].ends_with(program))
            .map(|(k, ..)| k[0].clone())
    };
    let (bash, chrt) = (of("/payload/bash"), of("/payload/chrt"));
    assert!(
        bash.is_some() && bash == chrt,
        "execsnoop.toml: bash and chrt, both of the workload's shell: {execs:?}"
    );
    eprintln!(
        "FIGURE kernel lab: opensnoop and execsnoop: the shell's failed opens, its programs and their parent"
    );
}

/// recipes/call-graph-depth.toml, kretprobe-returns.toml,
/// irq-handler-time.toml and function-callers.toml (run in the 6.12 boot,
/// guest.sh `answers`) and stop-at-fault.toml (run in every boot): each
/// summary leads with the analysis that answers the recipe's question.
fn assert_lab_answers(out: &Path) {
    assert_perf_tools_function_answers(out);
    assert_eprobe_snoops(out);
    let json = assert_answer(
        out,
        "answer-call-graph-depth",
        "funcgraph",
        "funcgraph: function duration",
        &["do_sys_openat2", "by total time"],
    );
    // Total and self time per function: the graphed function's calls hold
    // its callees' (depth 3 keeps some), so its self time is less.
    let functions = json["functions"]["functions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let top = functions
        .iter()
        .find(|f| f["function"] == "do_sys_openat2")
        .unwrap_or_else(|| panic!("no do_sys_openat2 row: {functions:#?}"));
    let n = |f: &str| top[f].as_u64().unwrap_or(0);
    assert!(
        n("count") >= 1 && n("self_ns") < n("total_ns") && n("max_ns") <= n("total_ns"),
        "{top:#}"
    );
    let json = assert_answer(
        out,
        "answer-kretprobe-returns",
        "errno",
        "errno: failed syscalls",
        &["open_ret", " -2 ENOENT x"],
    );
    let open_ret = &json["errno"]["syscalls"][0];
    assert!(
        open_ret["syscall"] == "open_ret"
            && open_ret["errors"][0]["errno"] == "ENOENT"
            && open_ret["errors"][0]["count"].as_u64() >= Some(2),
        "the workload's two failed opens: {:#}",
        json["errno"]
    );
    let json = assert_answer(
        out,
        "answer-irq-handler-time",
        "irq",
        "irq: interrupt handler time",
        &["(all)"],
    );
    assert_answer(
        out,
        "answer-function-callers",
        "stacks",
        "top kernel stacks",
        &["=> ", "read"],
    );
    // The fault's stack answers where it happened; what each task did until
    // then (profile) follows.
    let json_fault = assert_answer(
        out,
        "recipe-stop-at-fault",
        "stacks",
        "top kernel stacks (1 recorded",
        &["=> force_sig_fault+", "exc_page_fault+"],
    );
    let summary = read(&out.join("recipe-stop-at-fault/run/summary.txt"));
    assert!(
        json_fault["analyses"]
            .as_array()
            .is_some_and(|a| a.iter().any(|a| a == "profile"))
            && summary
                .split("profile: where each task's time went")
                .nth(1)
                .is_some_and(|p| p.contains(" segv ")),
        "{summary}"
    );
    let irq = json["latency"]
        .as_array()
        .and_then(|l| l.iter().find(|l| l["analysis"] == "irq"))
        .cloned()
        .unwrap_or_default();
    assert!(
        irq["groups"].as_array().is_some_and(|g| g.len() >= 2),
        "(all) and at least one handler: {irq:#}"
    );
}

/// The PREEMPT_RT kernel's own tracers (tests/lab/rt/): each latency tracer,
/// run over a real-time workload, reports a max latency above 0 in report.json,
/// the same number as the header of its max-latency trace saved beside it, and
/// leaves the top-level latency and stack tracer files as the boot left them.
fn assert_rt(out: &Path) {
    for (name, tracer) in [
        ("wakeup", "wakeup"),
        ("wakeup-rt", "wakeup_rt"),
        ("wakeup-dl", "wakeup_dl"),
    ] {
        ran(out, name);
        let dir = out.join(name).join("run");
        let json: serde_json::Value =
            serde_json::from_str(&read(&dir.join("report.json"))).unwrap();
        assert_eq!(
            json["workload"]["exit"]["exit_code"], 0,
            "6.1-rt: {name}: the real-time workload failed: {:#}",
            json["workload"]
        );
        let t = &json["tracer"];
        assert_eq!(t["name"], tracer, "6.1-rt: {name}: {json:#}");
        let max = t["max_latency_us"].as_u64().unwrap_or(0);
        assert!(max > 0, "6.1-rt: {name}: no max latency: {t:#}");
        // The max trace as the kernel printed it, with the events of the worst
        // case: the recorder reads the live buffer only once tracing is off, so
        // it consumes none before the kernel swaps them into the max buffer.
        let trace = read(&dir.join("tracer/max_latency_trace.txt"));
        assert!(
            trace.starts_with(&format!("# tracer: {tracer}\n")),
            "6.1-rt: {name}: {trace}"
        );
        assert_eq!(
            t["max_latency_trace"], "tracer/max_latency_trace.txt",
            "6.1-rt: {name}: no max-latency trace:\n{trace}"
        );
        assert!(
            trace.contains(&format!("# latency: {max} us, ")),
            "6.1-rt: {name}: the max trace is not the one of {max} us:\n{}",
            &trace[..trace.len().min(2000)]
        );
        let events = trace
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .count();
        assert!(
            events > 0,
            "6.1-rt: {name}: the max trace holds no event:\n{trace}"
        );
        assert_held(&json, &format!("6.1-rt: {name}"));
        let summary = read(&dir.join("summary.txt"));
        assert!(
            summary.contains(&format!("tracer:   {tracer}: max latency {max} us")),
            "6.1-rt: {name}: {summary}"
        );
        eprintln!(
            "FIGURE kernel lab 6.1-rt: {tracer}: max latency {max} us on {} (cpu {})",
            t["task"], t["cpu"]
        );
    }
    // recipes/function-callers.toml: each call of the one function, and a
    // kernel stack with it (options/func_stack_trace).
    let d = out.join("recipe-function-callers");
    assert_eq!(
        read(&d.join("run.rc")).trim(),
        "0",
        "6.1-rt: {}",
        read(&d.join("run.txt"))
    );
    let calls = records_of(out, "recipe-function-callers", "function");
    let stacks = records_of(out, "recipe-function-callers", "kernel_stack");
    assert!(
        !calls.is_empty()
            && calls
                .iter()
                .all(|r| r.get("ip_sym").is_some_and(|f| f == "vfs_read"))
            && stacks.len() >= calls.len() / 2,
        "6.1-rt: function-callers: {} calls, {} stacks: {calls:?}",
        calls.len(),
        stacks.len()
    );
    eprintln!(
        "FIGURE kernel lab 6.1-rt: function-callers {} calls of vfs_read with {} stacks",
        calls.len(),
        stacks.len()
    );
    assert_noise(out);
    let after = read(&out.join("after.txt"));
    for want in [
        "tracing_max_latency: 0\n",
        "stack_max_size: 0\n",
        "stack_tracer_enabled: 0\n",
        "stack_trace_filter: \n",
    ] {
        assert!(
            after.contains(want),
            "6.1-rt: want {want:?} after the runs:\n{after}"
        );
    }
}

/// hwlat, osnoise and timerlat on the RT kernel (tests/lab/rt/hwlat.toml,
/// osnoise.toml, recipes/timerlat.toml): each run's per-CPU results in
/// report.json `tracer` hold real samples (emulation makes them large: only
/// their presence and sign are asserted), its latency groups pass the recipe's
/// expectations, summary.txt shows the per-CPU table, trace-cmd prints the
/// tracer's own entries of our trace.dat as we do, and after every run of the
/// boot the guest's whole tracefs (hwlat_detector/ and osnoise/ included) is as
/// at boot.
fn assert_noise(out: &Path) {
    // The recipe's question, answered first in its summary.
    assert_answer(out, "recipe-timerlat", "timerlat", "timerlat: ", &[]);
    for (name, tracer, dir) in [
        ("hwlat", "hwlat", "hwlat"),
        ("osnoise", "osnoise", "osnoise"),
        ("timerlat", "timerlat", "recipe-timerlat"),
    ] {
        let d = out.join(dir);
        assert_eq!(
            read(&d.join("run.rc")).trim(),
            "0",
            "6.1-rt: {name}: {}",
            read(&d.join("run.txt"))
        );
        let run = d.join("run");
        let json: serde_json::Value =
            serde_json::from_str(&read(&run.join("report.json"))).unwrap();
        let t = &json["tracer"];
        assert_eq!(t["name"], tracer, "6.1-rt: {name}: {json:#}");
        let cpus = t[tracer].as_array().cloned().unwrap_or_default();
        assert!(!cpus.is_empty(), "6.1-rt: {name}: no per-CPU rows: {t:#}");
        let n = |c: &serde_json::Value, k: &str| c[k].as_u64().unwrap_or(0);
        for c in &cpus {
            match tracer {
                "hwlat" => assert!(
                    n(c, "samples") > 0 && n(c, "max_inner_us") + n(c, "max_outer_us") > 0,
                    "6.1-rt: hwlat: {c:#}"
                ),
                "osnoise" => assert!(
                    n(c, "samples") >= 5
                        && n(c, "runtime_us") > 0
                        && n(c, "max_single_noise_us") <= n(c, "max_noise_us")
                        && n(c, "noise_us") >= n(c, "max_noise_us")
                        && n(c, "irq_count") > 0,
                    "6.1-rt: osnoise: {c:#}"
                ),
                _ => {
                    for ctx in ["irq", "thread"] {
                        let l = &c[ctx];
                        assert!(
                            n(l, "count") > 10
                                && n(l, "max_ns") > 0
                                && n(l, "p50_ns") <= n(l, "p99_ns")
                                && n(l, "p99_ns") <= n(l, "max_ns")
                                && n(l, "max_at_ns") > 0,
                            "6.1-rt: timerlat {ctx}: {c:#}"
                        );
                    }
                }
            }
        }
        // Every sampling tracer's maximum is its entries' largest gap, noise or
        // thread latency (µs), whatever the kernel's tracing_max_latency says.
        let largest = cpus
            .iter()
            .map(|c| match tracer {
                "hwlat" => n(c, "max_inner_us").max(n(c, "max_outer_us")),
                "osnoise" => n(c, "max_noise_us"),
                _ => n(&c["thread"], "max_ns") / 1000,
            })
            .max();
        assert_eq!(
            t["max_latency_us"].as_u64(),
            largest,
            "6.1-rt: {name}: max_latency_us: {t:#}"
        );
        // Only CPU 0 was sampled by osnoise (`cpus = "0"`).
        if tracer == "osnoise" {
            assert!(
                cpus.iter().all(|c| c["cpu"] == 0),
                "6.1-rt: osnoise: {cpus:#?}"
            );
        }
        assert!(
            json["latency"]
                .as_array()
                .is_some_and(|l| l.iter().any(|l| l["analysis"] == tracer)),
            "6.1-rt: {name}: no `{tracer}` latency analysis: {:#}",
            json["latency"]
        );
        assert_held(&json, &format!("6.1-rt: {name}"));
        let summary = read(&run.join("summary.txt"));
        assert!(
            summary.contains(&format!("{tracer} per CPU")),
            "6.1-rt: {name}: {summary}"
        );
        // trace-cmd reads our trace.dat and prints the tracer's entries as we do.
        let dat = run.join("trace.dat");
        let theirs = crate::common::trace_cmd_report(&dat);
        let ours = Command::new(bin())
            .arg("report")
            .arg(&dat)
            .output()
            .unwrap();
        assert!(
            ours.status.success(),
            "6.1-rt: {name}: {}",
            text(&ours.stderr)
        );
        let ours = text(&ours.stdout);
        let entries = |listing: &str| -> Vec<String> {
            crate::common::event_lines(listing)
                .into_iter()
                .filter(|l| crate::common::event_name(l) == Some(tracer))
                .map(|l| l.trim_end().to_string())
                .collect()
        };
        let (a, b) = (entries(&ours), entries(&theirs));
        assert!(
            !a.is_empty() && a == b,
            "6.1-rt: {name}: our report and trace-cmd's differ on the {tracer} entries:\nours:\n{}\ntrace-cmd:\n{}",
            a.join("\n"),
            b.join("\n")
        );
        eprintln!(
            "FIGURE kernel lab 6.1-rt: {name}: {} CPUs, {} entries; {}",
            cpus.len(),
            a.len(),
            serde_json::to_string(&cpus[0]).unwrap_or_default()
        );
    }
    // Every global file, hwlat's and osnoise's too, is as at boot after all the runs.
    let (boot, fin) = (
        read(&out.join("boot-state.txt")),
        read(&out.join("final-state.txt")),
    );
    assert!(
        boot.contains("hwlat_detector/width:") && boot.contains("osnoise/period_us:"),
        "6.1-rt: the state holds no hwlat/osnoise files:\n{boot}"
    );
    let diff: Vec<String> = diff_lines(&boot, &fin);
    assert!(
        diff.is_empty(),
        "6.1-rt: tracefs after all runs differs from boot:\n{}",
        diff.join("\n")
    );
}

/// Run `what`'s report.json has expectations and each held (`what`: `KERNEL: NAME`).
fn assert_held(json: &serde_json::Value, what: &str) {
    assert!(
        json["expectations"]
            .as_array()
            .is_some_and(|e| !e.is_empty() && e.iter().all(|e| e["passed"] == true)),
        "{what}: {:#}",
        json["expectations"]
    );
}

/// Lines only in `a` (`-`) or only in `b` (`+`).
fn diff_lines(a: &str, b: &str) -> Vec<String> {
    let (sa, sb): (
        std::collections::BTreeSet<&str>,
        std::collections::BTreeSet<&str>,
    ) = (a.lines().collect(), b.lines().collect());
    sa.difference(&sb)
        .map(|l| format!("- {l}"))
        .chain(sb.difference(&sa).map(|l| format!("+ {l}")))
        .collect()
}

/// fprobes, fexits, tracepoint probes and event probes (issue 35 items 2 and 3)
/// in one boot's output `out` (tests/lab/fprobe-btf.toml, tprobe-exec.toml and
/// eprobe-exec.toml, checked and run by tests/lab/guest.sh like every lab
/// recipe); `tag` is the kernel's (`6.1`, `6.1-rt`, `6.12`, `7.2`).
///
/// Every kernel (eprobes are 5.15's): the workload's execve seen through an
/// eprobe on syscalls:sys_enter_execve carries its real arguments, `ls`, `-d`,
/// `/payload/lab`, read from user memory through the event's `argv`, the
/// path searched (one event per PATH directory tried, one of them `/bin/ls`)
/// and the held stub's name (`$comm:string`). From 6.5 (6.12, 7.2): vfs_read's
/// arguments by BTF name, the file name read through
/// `file->f_path.dentry->d_name.name` (`marker.txt`, 16 bytes asked), the fexit's
/// return values (16, 15, then 0 at the end of the 31-byte file) and the
/// sched_process_exec tracepoint's raw arguments (`p->pid` equals the pid
/// before the exec and the task's, `bprm->filename` is the absolute path the
/// workload was exec'd by). Before 6.5 (6.1, 6.1-rt), `check` refuses the
/// fprobe and tprobe recipes as this kernel's lack, naming Linux 6.5.
fn assert_lab_probes(out: &Path, tag: &str) {
    ran(out, "eprobe-exec");
    let execs = records_of(out, "eprobe-exec", "exec_args");
    assert!(
        !execs.is_empty()
            && execs.iter().all(|r| r["a0"] == "ls"
                && r["a1"] == "-d"
                && r["a2"] == "/payload/lab"
                && r["comm"] == "trace-recipe")
            && execs.iter().any(|r| r["file"] == "/bin/ls"),
        "{tag}: eprobe-exec: {execs:?}"
    );
    eprintln!(
        "FIGURE kernel lab {tag}: eprobe on sys_enter_execve: {} execve attempts with argv {} {} {}",
        execs.len(),
        execs[0]["a0"],
        execs[0]["a1"],
        execs[0]["a2"]
    );
    // arm64 has fprobes from 6.14 (kernel/trace/Kconfig: before, they need
    // ftrace_regs holding a pt_regs, which arm64's do not).
    let since = match tag {
        "6.1" | "6.1-rt" => Some("Linux 6.5"),
        "arm64-6.12" => Some("Linux 6.14 on aarch64"),
        _ => None,
    };
    if let Some(since) = since {
        for name in ["fprobe-btf", "tprobe-exec"] {
            let check = read(&out.join(name).join("check.txt"));
            assert!(
                read(&out.join(name).join("check.rc")).trim() != "0"
                    && check.contains("error (this kernel)")
                    && check.contains(since),
                "{tag}: {name} must be refused for what this kernel lacks:\n{check}"
            );
        }
        return;
    }
    ran(out, "fprobe-btf");
    let entries = records_of(out, "fprobe-btf", "read_entry");
    assert!(
        entries.len() >= 2
            && entries
                .iter()
                .all(|r| r["name"] == "marker.txt" && r["count"] == "16" && num(r, "file") != 0),
        "{tag}: fprobe-btf: {entries:?}"
    );
    let rets: std::collections::BTreeSet<String> = records_of(out, "fprobe-btf", "read_exit")
        .into_iter()
        .map(|r| r["ret"].clone())
        .collect();
    assert!(
        ["16", "15", "0"].iter().all(|v| rets.contains(*v)),
        "{tag}: fprobe-btf: vfs_read returned {rets:?}"
    );
    eprintln!(
        "FIGURE kernel lab {tag}: fprobe by BTF: {} reads of {} (count {}), fexit returns {rets:?}",
        entries.len(),
        entries[0]["name"],
        entries[0]["count"]
    );
    ran(out, "tprobe-exec");
    let execs = records_of(out, "tprobe-exec", "exec_tp");
    assert!(
        execs.iter().any(|r| r["filename"] == "/bin/sh"
            && r["task_pid"] == r["old_pid"]
            && r["task_pid"] == r["pid"]),
        "{tag}: tprobe-exec: {execs:?}"
    );
    eprintln!(
        "FIGURE kernel lab {tag}: tprobe on sched_process_exec: {} execs, bprm->filename {}",
        execs.len(),
        execs[0]["filename"]
    );
}

/// `report --format text` of output folder `run` (with the prototypes it keeps).
fn folder_listing(run: &Path) -> String {
    let o = Command::new(bin())
        .args(["report", "--format", "text"])
        .arg(run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}: {}", run.display(), text(&o.stderr));
    text(&o.stdout)
}

/// The workload's pid of output folder `run` (its report.json).
fn workload_pid(run: &Path) -> i64 {
    let json: serde_json::Value = serde_json::from_str(&read(&run.join("report.json"))).unwrap();
    json["workload"]["pid"]
        .as_i64()
        .expect("the workload's pid")
}

/// The calls of the listing (or `trace` file) `text` of task `pid` as
/// `vfs_read(ARGS)`: what follows the name column up to the parent.
fn func_args_calls(text: &str, pid: i64, kernel: bool) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.split_whitespace()
                .next()
                .and_then(|task| task.rsplit_once('-'))
                .is_some_and(|(_, p)| p.parse::<i64>().ok() == Some(pid))
        })
        .filter_map(|l| {
            let call = &l[l.find("vfs_read(")?..];
            Some(match kernel {
                true => call.split(" <-").next().unwrap_or(call).to_string(),
                false => call.to_string(),
            })
        })
        .collect()
}

/// func-args (issue 35 item 4; tests/lab/func-args.toml and the func-args
/// block of tests/lab/guest.sh) in one boot's output `out`. On 7.2: the run's
/// listing (`report FOLDER --format text`, with the prototypes the run saved
/// in func-args.txt) names vfs_read's arguments by BTF, `count=0x10` in each
/// of dd's 16-byte reads; and for the run made while the top-level buffer
/// traced vfs_read with func-args too, every call of ours is, in order, a call
/// the kernel's `trace` file prints for the same task, argument text equal
/// (the same registers: file, buffer and position pointers included). And
/// funcgraph-args (tests/lab/funcgraph-args.toml): each of dd's vfs_read
/// entries lists its arguments, and the rw_verify_area it calls lists
/// `read_write=0` (READ) with the same file, position and count (the
/// registers named right, by two prototypes). Before 6.15 (6.1, 6.12),
/// `check` refuses either option naming Linux 6.15.
fn assert_lab_func_args(out: &Path, tag: &str) {
    let d = out.join("func-args");
    if tag != "7.2" {
        for option in ["func-args", "funcgraph-args"] {
            let check = read(&out.join(option).join("check.txt"));
            assert!(
                read(&out.join(option).join("check.rc")).trim() != "0"
                    && check.contains("error (this kernel)")
                    && check.contains(&format!("no trace option `{option}`"))
                    && check.contains("Linux 6.15"),
                "{tag}: {option} must be refused for what this kernel lacks:\n{check}"
            );
        }
        return;
    }
    assert_lab_funcgraph_args(out, tag);
    ran(out, "func-args");
    let listing = |run: &str| folder_listing(&d.join(run));
    let pid_of = |run: &str| workload_pid(&d.join(run));
    let ours = func_args_calls(&listing("run"), pid_of("run"), false);
    let reads = ours
        .iter()
        .filter(|c| {
            c.starts_with("vfs_read(file=0x")
                && c.contains(", buf=0x")
                && c.ends_with(")")
                && c.contains(", count=0x10, pos=0x")
        })
        .count();
    assert!(
        reads >= 2,
        "{tag}: func-args: vfs_read's arguments by name, count=0x10: {ours:?}"
    );
    assert_eq!(
        read(&d.join("paired.rc")).trim(),
        "0",
        "{}",
        read(&d.join("paired.txt"))
    );
    let pid = pid_of("paired");
    let ours = func_args_calls(&listing("paired"), pid, false);
    let kernel = func_args_calls(&read(&d.join("kernel-trace.txt")), pid, true);
    let mut k = kernel.iter();
    assert!(
        ours.len() >= 2 && ours.iter().all(|c| k.any(|kc| kc == c)),
        "{tag}: func-args: our listing's calls are not the kernel's, in order:\nours: {ours:#?}\nkernel: {kernel:#?}"
    );
    eprintln!(
        "FIGURE kernel lab {tag}: func-args: {} calls listed as the kernel's trace file prints them, e.g. {}",
        ours.len(),
        ours[0]
    );
}

/// funcgraph-args on 7.2 (see [`assert_lab_func_args`]): in our listing of
/// the run's workload, each `vfs_read(file=F, buf=B, count=0x10, pos=P) {`
/// is followed by `rw_verify_area(read_write=0, file=F, ppos=P, count=0x10);`
/// (other calls, an interrupt's, may come between).
fn assert_lab_funcgraph_args(out: &Path, tag: &str) {
    ran(out, "funcgraph-args");
    let d = out.join("funcgraph-args/run");
    let listing = folder_listing(&d);
    let pid = workload_pid(&d);
    let needle = format!("-{pid} ");
    let calls: Vec<&str> = listing
        .lines()
        .filter(|l| l.contains(&needle) && l.contains(": funcgraph_entry: "))
        .filter_map(|l| l.split("|  ").nth(1).map(str::trim))
        .collect();
    // `NAME=VALUE` of a listed call.
    let arg = |call: &str, name: &str| -> Option<String> {
        let inner = call.split_once('(')?.1.rsplit_once(')')?.0;
        inner
            .split(", ")
            .find_map(|a| a.strip_prefix(&format!("{name}=")))
            .map(str::to_string)
    };
    // Each vfs_read entry with the first rw_verify_area after it (an
    // interrupt's entries may come between: seen on 7.2).
    let mut pairs = 0;
    for (i, read_call) in calls.iter().enumerate() {
        if !read_call.starts_with("vfs_read(") || !read_call.ends_with(") {") {
            continue;
        }
        let verify = calls[i + 1..]
            .iter()
            .take_while(|c| !c.starts_with("vfs_read("))
            .find(|c| c.starts_with("rw_verify_area("))
            .copied()
            .unwrap_or("(none)");
        assert!(
            verify.starts_with("rw_verify_area(")
                && arg(verify, "read_write").as_deref() == Some("0")
                && arg(verify, "file") == arg(read_call, "file")
                && arg(verify, "ppos") == arg(read_call, "pos")
                && arg(verify, "count") == arg(read_call, "count")
                && arg(read_call, "count").as_deref() == Some("0x10")
                && arg(read_call, "buf").is_some_and(|b| b.starts_with("0x")),
            "{tag}: funcgraph-args: {read_call} then {verify}\n{listing}"
        );
        pairs += 1;
    }
    assert!(pairs >= 2, "{tag}: funcgraph-args: {calls:#?}");
    eprintln!(
        "FIGURE kernel lab {tag}: funcgraph-args: {pairs} vfs_read entries, each calling rw_verify_area with the same file, position and count, e.g. {}",
        calls[0]
    );
}

// --- arm64 (issue 35 items 1 and 7) ---

/// The Rust target the arm64 guest's binary is built for (with Debian's
/// `gcc-aarch64-linux-gnu` as linker, .cargo/config.toml).
const ARM64_TARGET: &str = "aarch64-unknown-linux-gnu";

/// The lab recipes of tests/lab/ that apply to arm64 (no x86 registers, no
/// x86 instruction offsets), those of tests/lab/arm64/ (in the guest's lab/
/// too), and those of recipes/ that tests/lab/guest.sh runs.
const ARM64_RECIPES: &[&str] = &[
    "tests/lab/arm64/kprobe-arm64.toml",
    "tests/lab/arm64/kprobe-btf.toml",
    "tests/lab/function-filter.toml",
    "tests/lab/function-graph.toml",
    "tests/lab/idle-self.toml",
    "tests/lab/glob-filter.toml",
    "tests/lab/event-triggers.toml",
    "tests/lab/hist-trigger.toml",
    "tests/lab/function-traceoff.toml",
    "tests/lab/kretprobe-filter.toml",
    "tests/lab/fprobe-btf.toml",
    "tests/lab/tprobe-exec.toml",
    "tests/lab/eprobe-exec.toml",
    "tests/lab/stack.toml",
    "tests/lab/stack-filter.toml",
    "recipes/call-graph-depth.toml",
    "recipes/stop-at-fault.toml",
];

/// The foreign-architecture lab script: `$KERNEL_LAB_FOREIGN_SCRIPT`, or
/// `../shared/kernel-lab/run-in-foreign-kernel.sh`.
fn foreign_lab_script() -> PathBuf {
    std::env::var_os("KERNEL_LAB_FOREIGN_SCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/kernel-lab/run-in-foreign-kernel.sh"))
}

/// Whether `sh -c SCRIPT` succeeds.
fn sh_ok(script: &str) -> bool {
    Command::new("sh")
        .args(["-c", script])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Why the arm64 lab cannot run here, if it cannot (scripts/test installs what it needs).
fn arm64_missing() -> Option<String> {
    let script = foreign_lab_script();
    if !script.is_file() {
        return Some(format!("no kernel-lab script at {}", script.display()));
    }
    for tool in [
        "qemu-system-aarch64",
        "aarch64-linux-gnu-gcc",
        "aarch64-linux-gnu-strip",
        "busybox",
        "cpio",
    ] {
        if !sh_ok(&format!("command -v {tool}")) {
            return Some(format!(
                "`{tool}` is not installed (apt-get install qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross busybox-static cpio)"
            ));
        }
    }
    if !sh_ok(&format!(
        "test -d \"$(rustc --print sysroot)/lib/rustlib/{ARM64_TARGET}\""
    )) {
        return Some(format!(
            "Rust's {ARM64_TARGET} target is not installed (rustup target add {ARM64_TARGET})"
        ));
    }
    if !sh_ok("dpkg --print-foreign-architectures | grep -qx arm64") {
        return Some(
            "apt does not know arm64 packages (dpkg --add-architecture arm64; apt-get update)"
                .into(),
        );
    }
    None
}

/// trace-recipe cross-built for arm64 (`cargo build --target
/// aarch64-unknown-linux-gnu`, into the target folder of this test's binary),
/// our crate optimized as the host's lab binary is (opt-level 1; its
/// dependencies are at 2 in the dev profile): under emulation an unoptimized
/// build took two minutes for `trace-recipe facts`. No debug info and no
/// incremental data: the payload is stripped, and this build runs once per
/// suite beside the guests, where its CPU is the suite's time.
fn arm64_binary() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let o = Command::new(cargo)
        .args(["build", "--bin", "trace-recipe", "--target", ARM64_TARGET])
        .args(["--config", "profile.dev.package.trace-recipe.opt-level=1"])
        .args(["--config", "profile.dev.debug=false"])
        .args(["--config", "profile.dev.package.\"*\".debug=false"])
        .args(["--config", "profile.dev.incremental=false"])
        .current_dir(repo())
        .output()
        .expect("run cargo");
    assert!(
        o.status.success(),
        "cargo build --target {ARM64_TARGET} failed:\n{}",
        tail(&text(&o.stderr))
    );
    // bin() is TARGET_DIR/debug/trace-recipe.
    let target = bin()
        .parent()
        .and_then(Path::parent)
        .expect("the target folder")
        .to_path_buf();
    target.join(ARM64_TARGET).join("debug/trace-recipe")
}

/// The arm64 guest's payload in `dir`: the cross-built binary, tests/lab/guest.sh
/// and its arm64 wrapper (tests/lab/arm64/guest.sh, `arm64.sh` there), [`ARM64_RECIPES`], the marker file and the faulting
/// program, statically linked for arm64.
fn arm64_payload(dir: &Path) -> PathBuf {
    let p = dir.join("payload");
    std::fs::create_dir_all(p.join("lab")).unwrap();
    std::fs::create_dir_all(p.join("recipes")).unwrap();
    // Stripped: the payload travels in the guest's initramfs (230 MB with debug info).
    let strip = Command::new("aarch64-linux-gnu-strip")
        .arg("-o")
        .arg(p.join("trace-recipe"))
        .arg(arm64_binary())
        .output()
        .unwrap();
    assert!(strip.status.success(), "{}", text(&strip.stderr));
    for (from, to) in [
        ("tests/lab/guest.sh", "guest.sh"),
        ("tests/lab/arm64/guest.sh", "arm64.sh"),
        ("tests/lab/marker.txt", "lab/marker.txt"),
    ] {
        std::fs::copy(repo().join(from), p.join(to)).unwrap();
    }
    for r in ARM64_RECIPES {
        let to = match r.strip_prefix("tests/lab/") {
            Some(lab) => Path::new("lab").join(Path::new(lab).file_name().unwrap()),
            None => PathBuf::from(r),
        };
        std::fs::copy(repo().join(r), p.join(to)).unwrap();
    }
    let cc = Command::new("aarch64-linux-gnu-gcc")
        .args(["-static", "-O0", "-o"])
        .arg(p.join("segv"))
        .arg(repo().join("tests/lab/segv.c"))
        .output()
        .unwrap();
    assert!(cc.status.success(), "{}", text(&cc.stderr));
    p
}

/// Boots Debian 12's arm64 6.12 under `qemu-system-aarch64` (TCG) with the
/// arm64 trace-cmd unpacked into the guest, runs tests/lab/arm64/guest.sh, and
/// returns the output folder.
fn boot_arm64(dir: &Path, payload: &Path, tag: &str) -> PathBuf {
    let out = dir.join(tag);
    let mut c = Command::new("nice");
    c.args(["-n", "10"])
        .arg(foreign_lab_script())
        .args(["--arch", "aarch64", "--kernel-package"])
        .arg(newest_612("arm64-unsigned"))
        // Debian's arm64 trace-cmd and its libraries; libgcc-s1 for our binary.
        .args([
            "--debs",
            "trace-cmd libtraceevent1 libtracefs1 libzstd1 libc6 zlib1g libtraceevent1-plugin libgcc-s1",
        ])
        .args(["--smp", "1", "--mem", "1024", "--timeout", "1800", "--out"])
        .arg(&out)
        .arg(payload)
        .args(["--", "sh", "/payload/arm64.sh"]);
    run_lab(c, out, tag)
}

/// Our text listing of `dat` (`trace-recipe report --format text`).
fn our_listing(dat: &Path) -> String {
    let o = Command::new(bin())
        .args(["report", "--format", "text"])
        .arg(dat)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}: {}", dat.display(), text(&o.stderr));
    text(&o.stdout)
}

/// The first line where listings `ours` and `theirs` differ (or where one ends).
fn first_difference(ours: &str, theirs: &str) -> Option<String> {
    let (a, b): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), theirs.lines().collect());
    (0..a.len().max(b.len()))
        .find(|&i| a.get(i) != b.get(i))
        .map(|i| {
            format!(
                "line {}:\nours:      {:?}\ntrace-cmd: {:?}",
                i + 1,
                a.get(i),
                b.get(i)
            )
        })
}

/// The arm64 boot's output `out` (tests/lab/arm64/guest.sh): every recipe of
/// [`ARM64_RECIPES`] checked and ran with its events, the argument registers'
/// values (the file pointer in `%x0` a kernel address: `-cpu max` gives the
/// guest 52-bit addresses, its linear map starts at 0xfff0000000000000), trace.dat
/// files read across architectures, tracefs as the boot left it.
fn assert_arm64(out: &Path) {
    let tag = "arm64-6.12";
    let release = read(&out.join("release.txt"));
    assert!(
        release.starts_with("6.12.") && release.trim_end().ends_with("-arm64"),
        "{tag}: booted {release}"
    );
    let facts = zstd::decode_all(
        std::fs::File::open(out.join("facts.json.zst"))
            .unwrap_or_else(|e| panic!("{tag}: {e}: {}", read(&out.join("facts.txt")))),
    )
    .unwrap();
    let facts: serde_json::Value = serde_json::from_slice(&facts).unwrap();
    assert_eq!(facts["arch"], "aarch64", "{tag}");
    // Every lab recipe checked and ran (fprobes and tracepoint probes are
    // refused, below), each with events but the stack tracer's and the hist
    // trigger's (their results are the stack and the table).
    for r in ARM64_RECIPES.iter().filter(|r| r.starts_with("tests/lab/")) {
        let name = Path::new(r).file_stem().unwrap().to_str().unwrap();
        if matches!(name, "fprobe-btf" | "tprobe-exec") {
            continue;
        }
        let report = ran(out, name);
        assert!(
            !crate::common::event_lines(&report).is_empty()
                || matches!(name, "stack" | "stack-filter" | "hist-trigger"),
            "{tag}: {name} recorded no event:\n{report}"
        );
    }

    // The function tracer with a filter and function_graph.
    let calls = records_of(out, "function-filter", "function");
    assert!(
        calls
            .iter()
            .any(|r| r.get("ip_sym").is_some_and(|f| f == "vfs_read"))
            && calls.iter().all(|r| r
                .get("ip_sym")
                .is_some_and(|f| f == "vfs_read" || f.starts_with("vfs_writ"))),
        "{tag}: function-filter: {calls:?}"
    );
    let entries = records_of(out, "function-graph", "funcgraph_entry");
    assert!(
        entries
            .iter()
            .any(|r| r.get("func_sym").is_some_and(|f| f == "do_sys_openat2"))
            && entries.iter().all(|r| num(r, "depth") < 3),
        "{tag}: function-graph: {entries:?}"
    );

    // kprobes by arm64's argument registers (tests/lab/kprobe-arm64.toml).
    let marker = "/payload/lab/marker.txt";
    let opens = records_of(out, "kprobe-arm64", "open_entry");
    assert!(
        !opens.is_empty()
            && opens
                .iter()
                .all(|r| r["dfd"] == "-100" && r["path"] == marker),
        "{tag}: open_entry (%x0, %x1): {opens:?}"
    );
    assert!(
        !records_of(out, "kprobe-arm64", "kernel_stack").is_empty(),
        "{tag}: kprobe-arm64: no stack"
    );
    let filp = records_of(out, "kprobe-arm64", "filp_open");
    assert!(
        !filp.is_empty()
            && filp.iter().all(|r| r["dfd"] == "-100"
                && r["kname"] == marker
                && r["head"] == "47,112,97,121"),
        "{tag}: filp_open (+0(+0(%x1))): {filp:?}"
    );
    let reads = records_of(out, "kprobe-arm64", "read_entry");
    let pos: std::collections::BTreeSet<u64> = reads.iter().map(|r| num(r, "pos")).collect();
    assert!(
        reads.len() >= 3
            && reads
                .iter()
                .all(|r| r["file"] == reads[0]["file"] && num(r, "file") >= 0x8000_0000_0000_0000)
            && pos == [0, 16, 31].into(),
        "{tag}: read_entry (%x0, %x2 = 16, +0(%x3)): {reads:?}"
    );
    eprintln!(
        "FIGURE kernel lab {tag}: kprobes by register: {} opens (dfd -100 in %x0), {} reads of 16 bytes at {pos:?}",
        opens.len(),
        reads.len()
    );
    let rets = records_of(out, "kretprobe-filter", "open_ret");
    assert!(
        !rets.is_empty() && rets.iter().all(|r| r["ret"] == "-2"),
        "{tag}: kretprobe-filter: {rets:?}"
    );
    // An eprobe; fprobes and tracepoint probes refused (arm64 has them from
    // 6.14); vfs_read's arguments by BTF names in a kprobe and a kretprobe.
    assert_lab_probes(out, tag);
    let entries = records_of(out, "kprobe-btf", "read_entry");
    assert!(
        entries.len() >= 2
            && entries
                .iter()
                .all(|r| r["name"] == "marker.txt" && r["count"] == "16" && num(r, "file") != 0),
        "{tag}: kprobe-btf: {entries:?}"
    );
    let rets: std::collections::BTreeSet<String> = records_of(out, "kprobe-btf", "read_exit")
        .into_iter()
        .filter(|r| r["count"] == "16")
        .map(|r| r["ret"].clone())
        .collect();
    assert!(
        ["16", "15", "0"].iter().all(|v| rets.contains(*v)),
        "{tag}: kprobe-btf: vfs_read returned {rets:?}"
    );

    // Events, a filter on a glob, triggers.
    let segv = records_of(out, "glob-filter", "signal_generate");
    assert!(
        !segv.is_empty() && segv.iter().all(|r| r["sig"] == "11"),
        "{tag}: glob-filter: {segv:?}"
    );
    assert_eq!(
        records_of(out, "event-triggers", "kernel_stack").len(),
        1,
        "{tag}: event-triggers: stacktrace:1"
    );
    let json: serde_json::Value =
        serde_json::from_str(&read(&out.join("hist-trigger/run/report.json"))).unwrap();
    assert!(
        json["hist"][0]["hits"].as_u64().is_some_and(|h| h > 0),
        "{tag}: hist-trigger: {:#}",
        json["hist"]
    );
    assert_held(&json, &format!("{tag}: hist-trigger"));
    for name in ["function-traceoff", "recipe-stop-at-fault"] {
        let d = out.join(name);
        assert_eq!(
            read(&d.join("run.rc")).trim(),
            "0",
            "{tag}: {name}: {}",
            read(&d.join("run.txt"))
        );
        let json: serde_json::Value =
            serde_json::from_str(&read(&d.join("run/report.json"))).unwrap();
        assert_eq!(
            json["stop_reason"], "traceoff (tracing_on dropped to 0)",
            "{tag}: {name}"
        );
    }
    // The fault's stack, as arm64 takes it: a data abort from user space.
    let stacks = records_of(out, "recipe-stop-at-fault", "kernel_stack");
    assert!(
        stacks.len() == 1
            && stacks[0].get("caller_sym").is_some_and(|c| {
                c.split(',').any(|f| f == "force_sig_fault")
                    && c.split(',').any(|f| f == "do_mem_abort")
            }),
        "{tag}: stop-at-fault: {stacks:?}"
    );
    // The stack tracer: the deepest stack, as arm64's lists it (seen: 8
    // frames down to el0_svc_common; with the filter one frame, vfs_read's own,
    // and stack_max_size above the first frame's depth, unlike x86's).
    for (name, frames_at_least, first) in [("stack", 3, ""), ("stack-filter", 1, "vfs_read+")] {
        let json: serde_json::Value =
            serde_json::from_str(&read(&out.join(name).join("run/report.json"))).unwrap();
        let st = &json["stack_tracer"];
        let frames = st["frames"].as_array().cloned().unwrap_or_default();
        assert!(
            st["max_stack_bytes"].as_u64().is_some_and(|m| m > 0)
                && frames.len() >= frames_at_least
                && frames[0]["location"]
                    .as_str()
                    .is_some_and(|l| l.starts_with(first)),
            "{tag}: {name}: {st:#}"
        );
        assert_held(&json, &format!("{tag}: {name}"));
    }
    // The run's own threads stay out of a whole-system trace.
    let (own, total) = own_events(out, "idle-self", &ran(out, "idle-self"));
    assert!(
        total > 0 && own * 100 < total,
        "{tag}: idle-self: {own} of {total} events are the run's own"
    );

    // trace.dat across architectures: ours from arm64, listed by the host's
    // trace-cmd (x86_64) line for line as by our reader; trace-cmd's from
    // arm64 (Debian's 3.1.6 in the guest), listed by our reader line for line
    // as by the host's trace-cmd.
    for name in ["idle-self", "kprobe-arm64", "function-graph"] {
        let dat = out.join(name).join("run/trace.dat");
        let theirs = crate::common::trace_cmd_report(&dat);
        assert!(
            !crate::common::event_lines(&theirs).is_empty(),
            "{tag}: {name}: trace-cmd lists no event:\n{theirs}"
        );
        let diff = first_difference(&our_listing(&dat), &theirs);
        assert!(
            diff.is_none(),
            "{tag}: {name}: {}",
            diff.unwrap_or_default()
        );
    }
    let d = out.join("trace-cmd");
    assert_eq!(
        read(&d.join("record.rc")).trim(),
        "0",
        "{tag}: trace-cmd record: {}",
        read(&d.join("record.txt"))
    );
    let dat = d.join("trace.dat");
    let theirs = crate::common::trace_cmd_report(&dat);
    let events = crate::common::event_lines(&theirs);
    for needle in [" sched_switch: ", " sys_enter_"] {
        assert!(
            events.iter().any(|l| l.contains(needle)),
            "{tag}: trace-cmd's arm64 recording has no{needle}event:\n{theirs}"
        );
    }
    let diff = first_difference(&our_listing(&dat), &theirs);
    assert!(
        diff.is_none(),
        "{tag}: trace-cmd's arm64 trace.dat: {}",
        diff.unwrap_or_default()
    );
    eprintln!(
        "FIGURE kernel lab {tag}: trace-cmd's arm64 trace.dat: {} events listed by us as by trace-cmd",
        events.len()
    );

    // tracefs is as the boot left it, and trace-recipe says so.
    let diff = diff_lines(
        &read(&out.join("boot-state.txt")),
        &read(&out.join("final-state.txt")),
    );
    assert!(
        diff.is_empty(),
        "{tag}: tracefs after all runs differs from boot:\n{}",
        diff.join("\n")
    );
    let status = read(&out.join("status.txt"));
    assert!(
        status.contains("nothing left behind by trace-recipe"),
        "{tag}: {status}"
    );
}

/// Debian 12's arm64 6.12 under `qemu-system-aarch64 -M virt -cpu max` (TCG):
/// the lab recipes that apply to arm64, our binary cross-built, Debian's arm64
/// trace-cmd, trace.dat files read across architectures (tests/lab/arm64/guest.sh).
#[test]
fn arm64_6_12() {
    let tag = "arm64-6.12";
    let Some((_temp, dir, payload)) = lab_dir_with(tag, arm64_missing(), arm64_payload) else {
        return;
    };
    let out = boot_arm64(&dir, &payload, tag);
    assert_arm64(&out);
}

/// The flight recorder on Debian 12's 6.12, booted with a boot-mapped instance
/// (tests/lab/persist/guest.sh): boot 1 arms it with
/// tests/lab/persist/persistent.toml, runs a known program and reboots with
/// `echo b > /proc/sysrq-trigger` (QEMU's reset keeps RAM); boot 2 runs
/// `collect-boot`. Asserted: trace.dat as trace-cmd and we read it holds boot
/// 1's events, the summary says whose, and the instance's settings are those
/// of a fresh boot again.
#[test]
fn persistent_6_12() {
    let tag = "persistent-6.12";
    let Some((_temp, dir, payload)) = lab_dir(tag) else {
        return;
    };
    let out = boot_with(&dir, &payload, tag, Some(&kernel_612()), &FLIGHT, &["b"]);
    assert_flight(&out);
}

/// [`persistent_6_12`] with a crash instead of a reboot: `echo c >
/// /proc/sysrq-trigger` panics the kernel, `panic=-1` (on the lab's command
/// line) resets at once, and the next boot collects the same way.
#[test]
fn persistent_panic_6_12() {
    let tag = "persistent-panic-6.12";
    let Some((_temp, dir, payload)) = lab_dir(tag) else {
        return;
    };
    let out = boot_with(&dir, &payload, tag, Some(&kernel_612()), &FLIGHT, &["c"]);
    assert_flight(&out);
}

/// The flight recorder's boots: a boot-mapped instance `boot_map` of 8 MiB,
/// and QEMU resetting (RAM kept) where the lab's `-no-reboot` would stop.
const FLIGHT: Guest = Guest {
    script: Some("lab/persist/guest.sh"),
    lab_args: &[
        "--append",
        "reserve_mem=8M:4096:trace trace_instance=boot_map@trace",
        "--qemu-args",
        "-action reboot=reset",
    ],
};

/// What tests/lab/persist/guest.sh left in `out` after its two boots.
fn assert_flight(out: &Path) {
    let file = |n: &str| read(&out.join(n));
    assert_eq!(file("check.rc").trim(), "0", "check: {}", file("check.txt"));
    assert_eq!(file("arm.rc").trim(), "0", "run: {}", file("arm.txt"));
    assert!(
        file("arm.txt").contains("armed: instances/boot_map records until the next reboot"),
        "{}",
        file("arm.txt")
    );
    for f in ["arm.json", "kallsyms", "modules", "plan.txt", "recipe.toml"] {
        assert!(out.join("armed").join(f).is_file(), "run folder lacks {f}");
    }
    assert!(
        file("status-armed.txt").contains("armed flight recorder (recipe `persistent`"),
        "{}",
        file("status-armed.txt")
    );
    let armed = file("state-armed.txt");
    assert!(
        armed.contains("events/sched/sched_process_exec/enable:1"),
        "{armed}"
    );
    assert_ne!(file("too-soon.rc").trim(), "0");
    assert!(
        file("too-soon.txt").contains("not collected yet: arming it again would clear it"),
        "{}",
        file("too-soon.txt")
    );
    assert!(
        !out.join("too-soon").exists(),
        "a refused run leaves no folder"
    );
    assert_eq!(file("collect.rc").trim(), "0", "{}", file("collect.txt"));
    let summary = file("collected/summary.txt");
    assert!(
        summary.starts_with(
            "flight recorder: the previous boot's trace, from boot-mapped instance `boot_map`"
        ),
        "{summary}"
    );
    assert!(
        summary.contains("armed by recipe `persistent` in boot"),
        "{summary}"
    );
    // Boot 1's kernel text, found from boot 2's through last_boot_info's delta
    // (this boot minus the last, as crate::flight::shift_kallsyms takes it).
    let addr =
        |n: &str| u64::from_str_radix(file(n).split_whitespace().next().unwrap(), 16).unwrap();
    let delta: i64 = file("last_boot_info")
        .lines()
        .find_map(|l| l.trim().strip_prefix("text delta:"))
        .map(|v| v.trim().parse().unwrap())
        .expect("last_boot_info has a text delta");
    // The kernel does not always say: one CI-like run read `text delta: 0`
    // while _stext had moved (the arm record's kallsyms, which collect-boot
    // always carries, resolve the symbols then; asserted below).
    if delta != 0 {
        assert_eq!(
            addr("stext1"),
            addr("stext2").wrapping_sub(delta as u64),
            "_stext moved by {delta}"
        );
    } else {
        eprintln!(
            "FIGURE kernel lab persistent: last_boot_info says text delta 0; _stext moved by {}",
            addr("stext2").wrapping_sub(addr("stext1")) as i64
        );
    }
    let dat = out.join("collected/trace.dat");
    let theirs = Command::new("trace-cmd")
        .arg("report")
        .arg(&dat)
        .output()
        .unwrap();
    assert!(
        theirs.status.success(),
        "trace-cmd report: {}",
        text(&theirs.stderr)
    );
    let ours = Command::new(bin())
        .arg("report")
        .arg(&dat)
        .output()
        .unwrap();
    assert!(
        ours.status.success(),
        "trace-recipe report: {}",
        text(&ours.stderr)
    );
    for listing in [text(&theirs.stdout), text(&ours.stdout)] {
        assert!(
            listing
                .lines()
                .any(|l| l.contains("sched_process_exec") && l.contains("/tmp/flight-known")),
            "no exec of the known program from before the reboot:\n{}",
            tail(&listing)
        );
        // The marker's caller, named from the armed boot's kallsyms.
        assert!(
            listing
                .lines()
                .any(|l| l.contains("tracing_mark_write")
                    && l.contains("flight-marker-before-reboot")),
            "{}",
            tail(&listing)
        );
        assert!(listing.contains("sys_enter_openat"), "{}", tail(&listing));
    }
    // Released: the instance's settings as boot 1 found them, and as boot 2 did.
    assert_eq!(
        diff_lines(&file("state-fresh.txt"), &file("state-released.txt")),
        Vec::<String>::new()
    );
    assert_eq!(
        diff_lines(&file("state-booted.txt"), &file("state-released.txt")),
        Vec::<String>::new()
    );
    assert!(
        file("instances.txt").lines().eq(["boot_map"]),
        "{}",
        file("instances.txt")
    );
    assert_eq!(
        file("state-dir.txt").trim(),
        "",
        "the arm record is consumed"
    );
    assert!(
        !file("status-after.txt").contains("armed flight recorder"),
        "{}",
        file("status-after.txt")
    );
    // Armed again and collected in the same boot: the release undoes the arming.
    assert_eq!(file("rearm.rc").trim(), "0", "{}", file("rearm.txt"));
    assert!(
        file("state-rearmed.txt").contains("events/syscalls/sys_enter_openat/enable:1"),
        "{}",
        file("state-rearmed.txt")
    );
    assert_eq!(file("collect2.rc").trim(), "0", "{}", file("collect2.txt"));
    assert!(!diff_lines(&file("state-rearmed.txt"), &file("state-released2.txt")).is_empty());
    assert_eq!(
        diff_lines(&file("state-booted.txt"), &file("state-released2.txt")),
        Vec::<String>::new()
    );
    assert_ne!(file("nosuch.rc").trim(), "0");
    assert!(
        file("nosuch.txt").contains("no boot-mapped instance `nosuch`"),
        "{}",
        file("nosuch.txt")
    );
}
