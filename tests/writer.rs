//! tracedat's writer and reader on real captures from this kernel, checked
//! against trace-cmd: events recorded in an instance of ours by trace-recipe's
//! own [`Recorder`] (the one capture path), written by `write_v6`, printed by
//! our reader and by `trace-cmd report`, listings compared through the one
//! report-line parser ([`tracedat::testing::report`]). Each capture holds the
//! tracefs lock ([`TracefsGuard`]) and leaves tracefs as it found it.

use std::path::{Path, PathBuf};

use trace_recipe::record::Readers;
use trace_recipe::tracefs::{Instance, WriteMode};
use tracedat::testing::report::{ReportLine, assert_same_heads, heads};
use tracedat::{CaptureMeta, Compression, CpuData, Record, TraceFile, write_v6};

use crate::common::{TracefsGuard, trace_cmd, trace_cmd_report, tracefs};

const EVENTS: &[(&str, &str)] = &[
    ("sched", "sched_switch"),
    ("sched", "sched_process_exec"),
    ("syscalls", "sys_enter_openat"),
];

/// A finished capture: what `write_v6` needs, the raw per-CPU page files in `dir`.
struct Capture {
    meta: CaptureMeta,
    cpus: Vec<CpuData>,
    dir: tempfile::TempDir,
    page_size: usize,
    /// Sum of `read events` over the CPUs' stats.
    read_events: u64,
}

/// The capture's instance, switched off and removed however the test ends (a
/// failed assertion included), so that the guard finds tracefs as it was.
struct Scratch(Instance);

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = self.0.destroy() {
            eprintln!("could not remove {}: {e}", self.0.dir());
        }
    }
}

fn write(inst: &Instance, file: &str, value: &str) {
    inst.write(file, value, WriteMode::Replace)
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Some processes and a marker, while tracing.
fn load(inst: &Instance) {
    for args in [
        &["ls", "/"][..],
        &["cat", "/etc/hostname"],
        &["sh", "-c", "true"],
        &["uname", "-a"],
    ] {
        let _ = std::process::Command::new(args[0])
            .args(&args[1..])
            .output();
    }
    write(inst, "trace_marker", "hello from tracedat");
}

/// Records `events` (`(system, name)`) in a fresh instance while `load` runs,
/// through [`Readers`] / [`trace_recipe::record::Recorder`] as a run does (the
/// readers' own threads kept out by `set_event_notrace_pid`), and collects
/// everything `write_v6` needs. `setup` configures the instance first.
fn capture(
    tag: &str,
    events: &[(&str, &str)],
    setup: impl Fn(&Instance),
    load: impl Fn(&Instance),
) -> Capture {
    let guard = TracefsGuard::acquire();
    let t = tracefs();
    let top = Instance::top(&t);
    let name = format!("trace-recipe-writer-{tag}-{}", std::process::id());
    let inst = Instance::named(&t, &name);
    inst.create().unwrap();
    let scratch = Scratch(inst.clone());
    write(&inst, "tracing_on", "0");
    setup(&inst);
    for (sys, ev) in events {
        write(&inst, &format!("events/{sys}/{ev}/enable"), "1");
    }
    let mut cpu_ids: Vec<u32> = inst
        .list("per_cpu")
        .iter()
        .filter_map(|c| c.strip_prefix("cpu")?.parse().ok())
        .collect();
    cpu_ids.sort_unstable();
    let header_page = inst.read_bytes("events/header_page").unwrap();
    let page_size = tracedat::subbuffer_size(&header_page).expect("header_page");
    let dir = tempfile::tempdir().unwrap();
    let readers = Readers::spawn(&cpu_ids).unwrap();
    let tids: Vec<String> = readers.tids().iter().map(u32::to_string).collect();
    write(&inst, "set_event_notrace_pid", &tids.join(" "));
    let recorder = readers.start(&inst, page_size, dir.path(), false).unwrap();
    write(&inst, "tracing_on", "1");
    load(&inst);
    write(&inst, "tracing_on", "0");
    let mut captured = recorder.finish().unwrap();
    captured.sort_by_key(|c| c.cpu);

    let cpu_count = cpu_ids.iter().max().map_or(1, |m| m + 1);
    let mut read_events = 0;
    let mut cpu_stats = vec![String::new(); cpu_count as usize];
    for c in &captured {
        read_events += c
            .stats
            .lines()
            .find_map(|l| l.strip_prefix("read events:")?.trim().parse::<u64>().ok())
            .unwrap_or(0);
        cpu_stats[c.cpu as usize] = c.stats.clone();
    }
    let mut ftrace_formats = Vec::new();
    for ev in inst.list("events/ftrace") {
        if let Ok(f) = inst.read_bytes(&format!("events/ftrace/{ev}/format")) {
            ftrace_formats.push(f);
        }
    }
    let mut event_formats: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
    for (sys, ev) in events {
        let f = top
            .read_bytes(&format!("events/{sys}/{ev}/format"))
            .unwrap();
        match event_formats.iter_mut().find(|(s, _)| s == sys) {
            Some((_, v)) => v.push(f),
            None => event_formats.push((sys.to_string(), vec![f])),
        }
    }
    let uname = std::process::Command::new("uname")
        .arg("-snrm")
        .output()
        .unwrap();
    let meta = CaptureMeta {
        header_page,
        header_event: inst.read_bytes("events/header_event").unwrap(),
        ftrace_formats,
        event_formats,
        kallsyms: trace_recipe::tracefs::read_all(Path::new("/proc/kallsyms")).unwrap(),
        printk_formats: top.read_bytes("printk_formats").unwrap(),
        cmdlines: top.read_bytes("saved_cmdlines").unwrap(),
        cpu_count,
        trace_clock: inst.read("trace_clock").unwrap(),
        uname: String::from_utf8_lossy(&uname.stdout).trim().to_string(),
        version: "trace-recipe writer test".into(),
        cpu_stats,
    };
    let cpus = captured
        .into_iter()
        .map(|c| CpuData {
            cpu: c.cpu,
            path: c.path,
        })
        .collect();
    drop(scratch);
    guard.assert_unchanged();
    Capture {
        meta,
        cpus,
        dir,
        page_size,
        read_events,
    }
}

fn write_file(cap: &Capture, name: &str) -> PathBuf {
    let p = cap.dir.path().join(name);
    write_v6(std::fs::File::create(&p).unwrap(), &cap.meta, &cap.cpus).expect("write_v6");
    p
}

/// Our reader's listing of `f`, as `trace-cmd report` prints it (without the
/// `cpus=N` header): one [`tracedat::Printer`] for the whole file, which, like
/// trace-cmd, names a task from the sched events read before its line.
fn our_listing(f: &TraceFile) -> String {
    let mut out = Vec::new();
    let mut printer = tracedat::Printer::new(f);
    for r in f.records() {
        printer.write(&r.unwrap(), &mut out).unwrap();
    }
    printer.finish(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The events of a listing, by name.
fn event_names(listing: &str) -> Vec<&str> {
    listing
        .lines()
        .filter_map(ReportLine::parse)
        .map(|l| l.event)
        .collect()
}

/// trace-cmd reads `p` without a warning, and `trace-cmd dump -v` calls it valid.
fn check_valid_with_trace_cmd(p: &Path) {
    let out = duct::cmd!("trace-cmd", "report", "--verbose=warn", "-i", p)
        .stdout_null()
        .stderr_capture()
        .run()
        .expect("trace-cmd report");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err, "", "trace-cmd report --verbose=warn printed warnings");
    let dump = duct::cmd!("trace-cmd", "dump", "-v", "-i", p)
        .stderr_to_stdout()
        .stdout_capture()
        .unchecked()
        .run()
        .expect("trace-cmd dump");
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(
        text.contains("is a valid trace-cmd file"),
        "trace-cmd dump -v: {text}"
    );
}

/// `trace-cmd convert` of `p` to file version 7 with `compression`.
fn convert_v7(p: &Path, out: &Path, compression: &str) {
    trace_cmd(&[
        "convert".as_ref(),
        "--file-version".as_ref(),
        "7".as_ref(),
        "--compression".as_ref(),
        compression.as_ref(),
        "-i".as_ref(),
        p.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
}

/// Decodes raw pages independently of the library: (ts, payload) per record
/// (Documentation/trace/ring-buffer-design.rst; type_len 29 padding, 30 time
/// extend, 31 absolute time stamp, 0 a length word, 1-28 a length in words).
fn decode_raw_pages(raw: &[u8], page: usize) -> Vec<(u64, Vec<u8>)> {
    let mut v = Vec::new();
    for p in raw.chunks_exact(page) {
        let mut ts = u64::from_le_bytes(p[0..8].try_into().unwrap());
        let commit = u64::from_le_bytes(p[8..16].try_into().unwrap()) & ((1 << 27) - 1);
        let end = 16 + commit as usize;
        let mut i = 16;
        let u32_at = |i: usize| u32::from_le_bytes(p[i..i + 4].try_into().unwrap()) as u64;
        while i + 4 <= end {
            let h = u32_at(i);
            let (tl, d) = (h & 31, h >> 5);
            match tl {
                29 if d == 0 => break,
                29 => {
                    ts += d;
                    i += 4 + u32_at(i + 4) as usize;
                }
                30 => {
                    ts += (u32_at(i + 4) << 27) + d;
                    i += 8;
                }
                31 => {
                    ts = (u32_at(i + 4) << 27) + d;
                    i += 8;
                }
                0 => {
                    ts += d;
                    let len = (u32_at(i + 4) as usize - 4 + 3) & !3;
                    v.push((ts, p[i + 8..i + 8 + len].to_vec()));
                    i += 8 + len;
                }
                n => {
                    ts += d;
                    let len = n as usize * 4;
                    v.push((ts, p[i + 4..i + 4 + len].to_vec()));
                    i += 4 + len;
                }
            }
        }
    }
    v
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn a_real_capture_written_by_tracedat_reads_like_trace_cmd_in_v6_and_v7() {
        let cap = capture("capture", EVENTS, |_| {}, load);
        let p = write_file(&cap, "ours.dat");
        check_valid_with_trace_cmd(&p);

        let theirs = trace_cmd_report(&p);
        let f = TraceFile::open(&p).expect("open");
        assert_eq!(f.version(), 6);
        assert_eq!(f.cpu_count(), cap.meta.cpu_count);
        assert_eq!(f.clock(), "local");
        assert_eq!(f.uname(), Some(cap.meta.uname.as_str()));
        assert_eq!(f.buffers(), vec![String::new()]);
        assert_eq!(f.cpu_stats().len(), cap.meta.cpu_count as usize);
        assert!(f.cpu_stats()[0].starts_with("CPU: 0\n"));
        let text = our_listing(&f);
        assert!(!heads(&text).is_empty(), "no events captured");
        assert_same_heads(&text, &theirs, "v6 file");
        // Every event the kernel says was read is in the file.
        assert_eq!(heads(&text).len() as u64, cap.read_events, "{text}");
        let names = event_names(&text);
        for name in [
            "sched_switch",
            "sched_process_exec",
            "sys_enter_openat",
            "print",
        ] {
            assert!(names.contains(&name), "no {name} event:\n{text}");
        }
        // Field decoding: the exec of `ls` shows its filename, the marker text.
        let mut saw_exec = false;
        let mut saw_marker = false;
        for r in f.records() {
            let Record::Event(e) = r.unwrap() else {
                continue;
            };
            if e.format.name == "sched_process_exec"
                && let Some(tracedat::FieldValue::Str(s)) = e.field("filename")
            {
                saw_exec |= s.ends_with(b"/ls");
            }
            if e.format.name == "print"
                && let Some(tracedat::FieldValue::Str(s)) = e.field("buf")
            {
                saw_marker |= s.starts_with(b"hello from tracedat");
            }
        }
        assert!(saw_exec && saw_marker, "{text}");
        assert!(text.contains(": hello from tracedat"), "{text}");

        // trace-cmd's own v7/zstd conversion of our file reads the same.
        let v7 = cap.dir.path().join("theirs-v7.dat");
        convert_v7(&p, &v7, "zstd");
        let g = TraceFile::open(&v7).expect("open v7");
        assert_eq!(g.version(), 7);
        assert_eq!(g.compression(), Compression::Zstd);
        assert_eq!(g.clock(), "local");
        let theirs7 = trace_cmd_report(&v7);
        assert_same_heads(&our_listing(&g), &theirs7, "v7 zstd conversion");
        // Same records, byte for byte, as from the v6 file.
        let records = |f: &TraceFile| -> Vec<_> {
            f.records()
                .map(|r| match r.unwrap() {
                    Record::Event(e) => (e.cpu, e.ts, e.data.to_vec()),
                    Record::Lost { .. } => panic!("unexpected lost record"),
                })
                .collect()
        };
        assert_eq!(records(&f), records(&g));

        // And v7 uncompressed.
        let v7n = cap.dir.path().join("theirs-v7-none.dat");
        convert_v7(&p, &v7n, "none");
        let h = TraceFile::open(&v7n).expect("open v7 none");
        assert_eq!(h.compression(), Compression::None);
        assert_same_heads(&our_listing(&h), &theirs7, "v7 uncompressed conversion");
    }

    #[test]
    fn the_written_file_holds_every_raw_page_record_in_timestamp_order() {
        let cap = capture("roundtrip", EVENTS, |_| {}, load);
        let p = write_file(&cap, "rt.dat");
        let f = TraceFile::open(&p).unwrap();
        let mut total = 0;
        for c in &cap.cpus {
            let raw = std::fs::read(&c.path).unwrap();
            let want = decode_raw_pages(&raw, cap.page_size);
            let got: Vec<_> = f
                .records()
                .filter_map(|r| match r.unwrap() {
                    Record::Event(e) if e.cpu == c.cpu => Some((e.ts, e.data.to_vec())),
                    _ => None,
                })
                .collect();
            assert_eq!(got, want, "cpu {}", c.cpu);
            total += got.len();
        }
        assert!(total > 0);
        // Merged order is by timestamp, ties by CPU.
        let keys: Vec<_> = f
            .records()
            .map(|r| {
                let r = r.unwrap();
                (r.ts(), r.cpu())
            })
            .collect();
        assert!(keys.windows(2).all(|w| w[0] <= w[1]));
    }

    /// A task the saved cmdlines do not name (the kernel keeps 128 by
    /// default, so a busy trace loses some) is named in trace-cmd's listing
    /// only by the sched_switch records printed before its line, first name
    /// kept: an exec'd child keeps its parent's name there. Seen in CI as
    /// `ls-9117` from us, `writer::tracefs-9117` from trace-cmd.
    #[test]
    fn tasks_without_a_saved_cmdline_are_named_as_trace_cmd_names_them() {
        let mut cap = capture("nocmdlines", EVENTS, |_| {}, load);
        cap.meta.cmdlines.clear();
        let p = write_file(&cap, "nocmdlines.dat");
        let theirs = trace_cmd_report(&p);
        let f = TraceFile::open(&p).expect("open");
        assert!(f.saved_cmdlines().is_empty());
        let ours = our_listing(&f);
        assert!(
            event_names(&ours).contains(&"sched_process_exec"),
            "no exec captured:\n{ours}"
        );
        assert_same_heads(&ours, &theirs, "file without saved cmdlines");
    }

    #[test]
    fn lost_events_in_real_pages_print_like_trace_cmd() {
        let cap = capture(
            "lost",
            EVENTS,
            |_| {},
            |inst| {
                for _ in 0..20 {
                    load(inst);
                }
            },
        );
        // Patch copies of the raw files: on each CPU, the first page with room
        // after its data gets "lost, count stored" (count 392 + cpu), and another
        // page "lost, count unknown" (pages read while tracing are mostly full,
        // and the kernel stores a count only where it fits).
        let ps = cap.page_size;
        let mut patched = Vec::new();
        let mut n_patched = 0;
        for c in &cap.cpus {
            let mut raw = std::fs::read(&c.path).unwrap();
            let (mut stored, mut unknown) = (false, false);
            for page in raw.chunks_exact_mut(ps) {
                let commit = u64::from_le_bytes(page[8..16].try_into().unwrap());
                let len = (commit & ((1 << 27) - 1)) as usize;
                let store = !stored && 16 + len + 8 <= ps;
                if len == 0 || (!store && unknown) {
                    continue;
                }
                let flags: u64 = if store { 0xc000_0000 } else { 0x8000_0000 };
                // The kernel sign-extends the flags into the upper half.
                let word = (len as u64) | flags | 0xffff_ffff_0000_0000;
                page[8..16].copy_from_slice(&word.to_le_bytes());
                if store {
                    page[16 + len..24 + len].copy_from_slice(&(392 + c.cpu as u64).to_le_bytes());
                    stored = true;
                } else {
                    unknown = true;
                }
                n_patched += 1;
                if stored && unknown {
                    break;
                }
            }
            let path = cap.dir.path().join(format!("patched{}.raw", c.cpu));
            std::fs::write(&path, raw).unwrap();
            patched.push(CpuData { cpu: c.cpu, path });
        }
        assert!(n_patched >= 2, "capture too small to patch");
        let p = cap.dir.path().join("lost.dat");
        write_v6(std::fs::File::create(&p).unwrap(), &cap.meta, &patched).unwrap();
        let report = trace_cmd_report(&p);
        assert!(report.contains("EVENTS DROPPED]"), "{report}");
        let f = TraceFile::open(&p).unwrap();
        let text = our_listing(&f);
        assert_same_heads(&text, &report, "lost events");
        let lost: Vec<_> = f
            .records()
            .filter_map(|r| match r.unwrap() {
                Record::Lost { cpu, count, .. } => Some((cpu, count)),
                _ => None,
            })
            .collect();
        assert_eq!(lost.len(), n_patched, "{text}");
        assert!(
            lost.iter().any(|(_, count)| count.is_some()),
            "no page with a stored count: {lost:?}"
        );
        for c in &cap.cpus {
            if lost.contains(&(c.cpu, Some(392 + c.cpu as u64))) {
                assert!(text.contains(&format!("CPU:{} [{} EVENTS DROPPED]", c.cpu, 392 + c.cpu)));
            }
        }
    }

    #[test]
    fn kernel_stacks_and_the_counter_clock_print_like_trace_cmd() {
        let cap = capture(
            "stack",
            &[("sched", "sched_switch")],
            |inst| {
                write(inst, "trace_clock", "counter");
                inst.write(
                    "events/sched/sched_switch/trigger",
                    "stacktrace",
                    WriteMode::Append,
                )
                .unwrap();
            },
            load,
        );
        assert!(cap.meta.trace_clock.contains("[counter]"));
        let p = write_file(&cap, "stack.dat");
        check_valid_with_trace_cmd(&p);
        let report = trace_cmd_report(&p);
        let f = TraceFile::open(&p).unwrap();
        assert_eq!(f.clock(), "counter");
        let text = our_listing(&f);
        assert_same_heads(&text, &report, "counter clock");
        assert!(event_names(&text).contains(&"kernel_stack"), "{text}");
        // The stack frames print the same symbols as trace-cmd.
        let frames = |s: &str| -> Vec<String> {
            s.lines()
                .filter(|l| l.starts_with("=> "))
                .map(|l| l.to_string())
                .collect()
        };
        assert_eq!(frames(&text), frames(&report));
    }

    /// Every event of many subsystems, recorded here and written by our writer,
    /// printed by our reader: at least 99 % of the lines are identical to
    /// `trace-cmd report`'s whole lines (print fmt rendering, symbols, comms).
    #[test]
    fn every_event_of_many_subsystems_prints_like_trace_cmd() {
        let systems = [
            "sched",
            "irq",
            "timer",
            "kmem",
            "signal",
            "task",
            "workqueue",
            "raw_syscalls",
            "syscalls",
            "block",
            "writeback",
            "filemap",
            "net",
            "skb",
            "sock",
            "tcp",
            "ipi",
            "mmap_lock",
            "rcu",
            "power",
            "percpu",
            "pagemap",
            "vmscan",
            "oom",
            "lock",
        ];
        let top = Instance::top(&tracefs());
        let mut events: Vec<(String, String)> = Vec::new();
        for sys in systems {
            for ev in top.list(&format!("events/{sys}")) {
                if top.exists(&format!("events/{sys}/{ev}/format")) {
                    events.push((sys.to_string(), ev));
                }
            }
        }
        events.sort();
        let refs: Vec<(&str, &str)> = events
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let cap = capture("broad", &refs, |i| write(i, "buffer_size_kb", "2048"), load);
        let p = write_file(&cap, "broad.dat");
        let theirs = trace_cmd_report(&p);
        let f = TraceFile::open(&p).expect("open");
        let mut out = format!("cpus={}\n", f.cpu_count()).into_bytes();
        let mut printer = tracedat::Printer::new(&f);
        for r in f.records() {
            printer.write(&r.unwrap(), &mut out).unwrap();
        }
        printer.finish(&mut out).unwrap();
        let ours = String::from_utf8_lossy(&out);
        let (a, b): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), theirs.lines().collect());
        let mut same = 0;
        let mut diffs = String::new();
        let mut shown = std::collections::HashMap::new();
        for (x, y) in a.iter().zip(b.iter()) {
            if x == y {
                same += 1;
                continue;
            }
            let name = ReportLine::parse(y).map_or("", |l| l.event);
            let n = shown.entry(name).or_insert(0);
            *n += 1;
            if *n <= 2 {
                diffs.push_str(&format!("ours:   {x}\ntheirs: {y}\n"));
            }
        }
        let n = a.len().max(b.len());
        eprintln!("{diffs}{same}/{n} identical");
        assert!(n > 100, "too few events: {ours}");
        assert!(same * 100 >= n * 99, "{diffs}{same}/{n} identical");
    }
}
