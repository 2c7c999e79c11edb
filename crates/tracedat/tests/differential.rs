//! Every event format of four kernels (the fact files in the repository's
//! tests/facts: this host, Debian 6.1, Debian 6.12 and Debian arm64 6.12)
//! printed by our reader and by `trace-cmd report`, compared record by record.
//!
//! For each kernel, records of every event are generated with boundary and
//! random field values (zero, all ones, the signed extremes, random values,
//! empty, short and full strings, dynamic arrays of random length, pointers
//! into a small kallsyms) from a fixed seed, put in ring-buffer pages and
//! written with our writer ([`tracedat::write_v6`]) as a v6 file with
//! 8-byte longs and as one with 4-byte longs (the formats unchanged, as a
//! 32-bit kernel with these formats would write them: sizes come from the
//! formats). We have no v7 writer: the third layout is the 8-byte-long file
//! turned into v7 with zstd by `trace-cmd convert` (trace-cmd's writer, our
//! v7 reader). Each record gets its own timestamp, so both listings are cut
//! into records by it and compared record for record.
//!
//! A difference fails the test unless the event is listed, with its reason,
//! in tests/differential-intended.txt. `TRACEDAT_DIFF_RECORDS` sets the
//! records per event (default 2; scripts/reliability.sh runs more), and
//! `TRACEDAT_DIFF_SEED` the seed.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use tracedat::testing::{Endian, Page};
use tracedat::{CaptureMeta, CpuData, EventFormat, Printer, TraceFile};

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

/// Base of the kallsyms of the generated files: functions `difftest_fN` at
/// `BASE + N * 0x100`.
const BASE: u64 = 0xffff_ffff_8100_0000;
const SYMBOLS: u64 = 64;
const PIDS: [i32; 4] = [0, 1, 4242, 31337];

/// A value of `size` bytes (1, 2, 4, 8): a boundary value or a random one.
fn scalar(rng: &mut Rng, size: usize, signed: bool) -> u64 {
    let bits = size as u32 * 8;
    let mask = if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    };
    let v = match rng.below(10) {
        0 => 0,
        1 => 1,
        2 => mask,
        3 if signed => 1 << (bits - 1),
        3 => mask >> 1,
        4 => BASE + rng.below(SYMBOLS * 0x100),
        5 => rng.below(16),
        6 => 1 << rng.below(bits as u64),
        _ => rng.next(),
    };
    v & mask
}

fn put(e: Endian, buf: &mut [u8], at: usize, size: usize, v: u64) {
    let b = match size {
        1 => vec![v as u8],
        2 => e.u16(v as u16),
        4 => e.u32(v as u32),
        _ => e.u64(v),
    };
    if let Some(dst) = buf.get_mut(at..at + b.len()) {
        dst.copy_from_slice(&b);
    }
}

fn text(rng: &mut Rng, max: usize) -> Vec<u8> {
    let n = match rng.below(4) {
        0 => 0,
        1 => max,
        _ => rng.below(max as u64 + 1) as usize,
    };
    (0..n).map(|_| b'a' + rng.below(26) as u8).collect()
}

/// One record of `f` (payload padded to 4 bytes) from `pid`.
fn record(e: Endian, f: &EventFormat, pid: i32, rng: &mut Rng) -> Vec<u8> {
    let fixed = f
        .fields
        .iter()
        .chain(&f.common_fields)
        .map(|x| x.offset + x.size)
        .max()
        .unwrap_or(8);
    let mut d = vec![0u8; fixed];
    put(e, &mut d, 0, 2, f.id as u64);
    put(e, &mut d, 4, 4, pid as u32 as u64);
    for fld in &f.fields {
        use tracedat::FieldLayout as L;
        match fld.layout {
            L::Inline if fld.array_len.is_none() && matches!(fld.size, 1 | 2 | 4 | 8) => {
                let mut v = scalar(rng, fld.size, fld.signed);
                // The futex plugin names `op`'s low bits (13 operations) and
                // its flags 128 and 256: below 512, most values are known
                // operations, with and without flags, the rest unknown ones.
                // (The same draw as any field, so other records stay as they were.)
                if f.name == "sys_enter_futex" && fld.name == "op" {
                    v %= 512;
                    if v & 127 >= 16 {
                        v &= !127 | 15;
                    }
                }
                put(e, &mut d, fld.offset, fld.size, v);
            }
            L::Inline if fld.is_string => {
                let mut s = text(rng, fld.size.saturating_sub(1));
                s.resize(fld.size, 0);
                d[fld.offset..fld.offset + fld.size].copy_from_slice(&s);
            }
            L::Inline => {
                for b in d.iter_mut().skip(fld.offset).take(fld.size) {
                    *b = rng.next() as u8;
                }
            }
            L::DataLoc | L::RelLoc => {
                let bytes = if fld.is_string {
                    let mut s = text(rng, 40);
                    s.push(0);
                    s
                } else {
                    let n = 8 * rng.below(5) as usize;
                    (0..n).map(|_| rng.next() as u8).collect()
                };
                let start = d.len();
                d.extend(&bytes);
                let off = if fld.layout == L::RelLoc {
                    start - (fld.offset + 4)
                } else {
                    start
                };
                put(
                    e,
                    &mut d,
                    fld.offset,
                    4,
                    (off as u64) | ((bytes.len() as u64) << 16),
                );
            }
            L::Trailing => {}
        }
    }
    while !d.len().is_multiple_of(4) {
        d.push(0);
    }
    d
}

/// Timestamp of record `i`: 1 ms apart, so each prints uniquely.
fn ts(i: usize) -> u64 {
    1_000_000_000 + i as u64 * 1_000_000
}

/// The `[CPU] TIME:` token that starts record `i`'s first line.
fn stamp(i: usize) -> String {
    let t = ts(i);
    format!(
        "[000] {:5}.{:06}:",
        t / 1_000_000_000,
        t % 1_000_000_000 / 1000
    )
}

/// A listing cut into records: the text of record `i` runs from its stamp's
/// line to the line before the next record's.
fn split(listing: &str, n: usize) -> Vec<String> {
    let mut out = vec![String::new(); n];
    let mut i = None;
    let mut next = 0;
    for line in listing.lines() {
        if next < n && line.contains(&stamp(next)) {
            i = Some(next);
            next += 1;
        }
        if let Some(i) = i {
            out[i].push_str(line);
            out[i].push('\n');
        }
    }
    out
}

/// `system:event` → reason, from tests/differential-intended.txt (`#`
/// comments; `EVENT  REASON` per line, EVENT `*` for the reason's kind
/// everywhere is not allowed: each event is named).
fn intended() -> BTreeMap<String, String> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/differential-intended.txt");
    std::fs::read_to_string(p)
        .expect("differential-intended.txt")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (ev, why) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            assert!(
                !why.trim().is_empty(),
                "intended difference without a reason: {l}"
            );
            (ev.to_string(), why.trim().to_string())
        })
        .collect()
}

struct Diff {
    event: String,
    ours: String,
    theirs: String,
}

/// Writes one file of every format of `formats` with `per_event` records of
/// each and compares the two listings. Returns the differences.
/// A layout of the generated file.
#[derive(Clone, Copy)]
struct Layout {
    e: Endian,
    /// Converted to v7 + zstd by `trace-cmd convert`.
    v7: bool,
}

fn compare(
    dir: &Path,
    label: &str,
    formats: &[(String, String)],
    layout: Layout,
    per_event: usize,
    seed: u64,
) -> Vec<Diff> {
    let mut crashed: Vec<String> = Vec::new();
    loop {
        let (diffs, crash) = compare_once(dir, label, formats, layout, per_event, seed, &crashed);
        match crash {
            Some(ev) => {
                assert!(
                    crashed.len() < 100,
                    "{label}: trace-cmd crashed on 100 events"
                );
                crashed.push(ev)
            }
            None => {
                return crashed
                    .into_iter()
                    .map(|event| Diff {
                        event,
                        ours: String::new(),
                        theirs: "trace-cmd report crashed on this event\n".into(),
                    })
                    .chain(diffs)
                    .collect();
            }
        }
    }
}

/// [`compare`] without the events `skip`; also the event trace-cmd crashed
/// on (the first whose record it did not print) if it did.
fn compare_once(
    dir: &Path,
    label: &str,
    formats: &[(String, String)],
    layout: Layout,
    per_event: usize,
    seed: u64,
    skip: &[String],
) -> (Vec<Diff>, Option<String>) {
    let e = layout.e;
    let mut rng = Rng(seed | 1);
    let parsed: Vec<(String, EventFormat)> = formats
        .iter()
        .filter_map(|(sys, t)| Some((sys.clone(), EventFormat::parse(sys, t).ok()?)))
        .collect();
    let page = 4096;
    let mut pages = Vec::new();
    let mut events = Vec::new();
    let mut p = Page::new(e, page, ts(0));
    for (_, f) in &parsed {
        if skip.contains(&format!("{}:{}", f.system, f.name)) {
            continue;
        }
        for _ in 0..per_event {
            let pid = PIDS[rng.below(PIDS.len() as u64) as usize];
            let d = record(e, f, pid, &mut rng);
            // Room for the header word, a length word and the payload.
            if d.len() + 8 > page - e.data_offset() {
                continue;
            }
            let i = events.len();
            if p.body.len() + d.len() + 8 + e.data_offset() > page {
                pages.extend(p.finish(None));
                p = Page::new(e, page, ts(i));
            }
            p.event((ts(i) - p.now) as u32, &d);
            events.push(format!("{}:{}", f.system, f.name));
        }
    }
    pages.extend(p.finish(None));
    let cpu_file = dir.join(format!("{label}.cpu0"));
    std::fs::write(&cpu_file, &pages).unwrap();

    let mut meta = CaptureMeta {
        header_page: e.header_page(page).into_bytes(),
        cpu_count: 1,
        trace_clock: "[local] global\n".into(),
        uname: "Linux difftest 6.0 x86_64".into(),
        version: "difftest".into(),
        cmdlines: "1 systemd\n4242 worker\n31337 a-long-comm-name\n".into(),
        ..Default::default()
    };
    meta.kallsyms = (0..SYMBOLS)
        .map(|n| format!("{:016x} T difftest_f{n}\n", BASE + n * 0x100))
        .collect::<String>()
        .into_bytes();
    let mut systems: BTreeMap<&str, Vec<Vec<u8>>> = BTreeMap::new();
    for ((sys, t), _) in formats.iter().zip(0..) {
        if sys == "ftrace" {
            meta.ftrace_formats.push(t.clone().into_bytes());
        } else {
            systems.entry(sys).or_default().push(t.clone().into_bytes());
        }
    }
    meta.event_formats = systems
        .into_iter()
        .map(|(s, v)| (s.to_string(), v))
        .collect();
    let path = dir.join(format!("{label}.dat"));
    let out = std::fs::File::create(&path).unwrap();
    tracedat::write_v6(
        out,
        &meta,
        &[CpuData {
            cpu: 0,
            path: cpu_file,
        }],
    )
    .unwrap();
    let path = if layout.v7 {
        let v7 = dir.join(format!("{label}.v7.dat"));
        run(std::process::Command::new("trace-cmd")
            .args([
                "convert",
                "--file-version",
                "7",
                "--compression",
                "zstd",
                "-i",
            ])
            .arg(&path)
            .arg("-o")
            .arg(&v7));
        let f = TraceFile::open(&v7).unwrap();
        assert_eq!(
            (f.version(), f.compression()),
            (7, tracedat::Compression::Zstd)
        );
        v7
    } else {
        path
    };

    let ours = {
        let f = TraceFile::open(&path).unwrap();
        let mut out = Vec::new();
        let mut printer = Printer::new(&f);
        for r in f.records() {
            printer.write(&r.unwrap(), &mut out).unwrap();
        }
        printer.finish(&mut out).unwrap();
        String::from_utf8_lossy(&out).into_owned()
    };
    // Line-buffered, so a crash loses no finished record.
    let o = std::process::Command::new("stdbuf")
        .args(["-oL", "trace-cmd", "report", "-i"])
        .arg(&path)
        .output()
        .unwrap();
    let theirs = String::from_utf8_lossy(&o.stdout);
    let (ours, theirs) = (split(&ours, events.len()), split(&theirs, events.len()));
    if !o.status.success() {
        let at = theirs.iter().position(|t| t.is_empty()).unwrap_or_else(|| {
            panic!(
                "{label}: trace-cmd failed ({}) after printing every record",
                o.status
            )
        });
        return (Vec::new(), Some(events[at].clone()));
    }
    let diffs = events
        .into_iter()
        .zip(ours.into_iter().zip(theirs))
        .filter(|(_, (a, b))| a != b)
        .map(|(event, (ours, theirs))| Diff {
            event,
            ours,
            theirs,
        })
        .collect();
    (diffs, None)
}

#[test]
fn every_format_of_four_kernels_prints_as_trace_cmd_prints_it() {
    if !have_trace_cmd() {
        eprintln!("trace-cmd not installed: differential test skipped");
        return;
    }
    let per_event: usize = std::env::var("TRACEDAT_DIFF_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let seed: u64 = std::env::var("TRACEDAT_DIFF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(21);
    let intended = intended();
    let tmp = tempfile::tempdir().unwrap();
    let mut unexplained: BTreeMap<String, Vec<Diff>> = BTreeMap::new();
    let mut listed = 0;
    let mut compared = 0;
    // Listed events that did differ: an entry that never does is stale.
    let mut seen = std::collections::BTreeSet::new();
    for kernel in ["host", "debian-6.1", "debian-6.12", "debian-arm64-6.12"] {
        let formats = kernel_formats(&facts_dir().join(format!("{kernel}.json.zst")));
        assert!(formats.len() > 1000, "{kernel}: {} formats", formats.len());
        let long4 = Endian {
            big: false,
            long: 4,
        };
        let layouts = [
            ("v6-64", Endian::LITTLE64, false),
            ("v6-32", long4, false),
            ("v7-zstd", Endian::LITTLE64, true),
        ];
        for (name, e, v7) in layouts {
            let label = format!("{kernel}-{name}");
            let diffs = compare(
                tmp.path(),
                &label,
                &formats,
                Layout { e, v7 },
                per_event,
                seed,
            );
            compared += formats.len();
            for d in diffs {
                if intended.contains_key(&d.event) {
                    listed += 1;
                    seen.insert(d.event.clone());
                } else {
                    unexplained
                        .entry(format!("{label} {}", d.event))
                        .or_default()
                        .push(d);
                }
            }
        }
    }
    let mut report = String::new();
    for (k, v) in &unexplained {
        let d = &v[0];
        report.push_str(&format!(
            "{k} ({} records)\n  ours:   {}  theirs: {}",
            v.len(),
            d.ours.replace('\n', "\n          "),
            d.theirs.replace('\n', "\n          ")
        ));
        report.push('\n');
    }
    eprintln!(
        "differential: {compared} formats compared, {listed} listed differences, {} events with unexplained ones",
        unexplained.len()
    );
    assert!(unexplained.is_empty(), "unexplained differences:\n{report}");
    let stale: Vec<&String> = intended.keys().filter(|e| !seen.contains(*e)).collect();
    eprintln!("differential: listed events that printed alike here: {stale:?}");
}

/// The kernel's `ftrace/bprint` format (x86_64, 6.x).
const BPRINT: &str = "name: bprint\nID: 6\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\
\tfield:const char * fmt;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:u32 buf[];\toffset:24;\tsize:0;\tsigned:0;\n\n\
print fmt: \"%ps: %s\", (void *)REC->ip, REC->fmt\n";

/// The metadata of a one-CPU file of `page`-byte pages (local clock, pid 1
/// named `systemd`), without formats or symbols.
fn small_meta(e: Endian, page: usize) -> CaptureMeta {
    CaptureMeta {
        header_page: e.header_page(page).into_bytes(),
        cpu_count: 1,
        trace_clock: "[local] global\n".into(),
        uname: "Linux difftest 6.0 x86_64".into(),
        version: "difftest".into(),
        cmdlines: "1 systemd\n".into(),
        ..Default::default()
    }
}

/// A v6 file `DIR/NAME.dat` of `meta` and one CPU's `pages`.
fn one_cpu_file(dir: &Path, name: &str, meta: &CaptureMeta, pages: Vec<u8>) -> PathBuf {
    let cpu_file = dir.join(format!("{name}.cpu0"));
    std::fs::write(&cpu_file, pages).unwrap();
    let path = dir.join(format!("{name}.dat"));
    tracedat::write_v6(
        std::fs::File::create(&path).unwrap(),
        meta,
        &[CpuData {
            cpu: 0,
            path: cpu_file,
        }],
    )
    .unwrap();
    path
}

/// `%ps`/`%pS` of addresses that only an absolute symbol (`A`/`a`: x86-64's
/// per-CPU offsets, from 0 up) or an arm `$`-name would cover, as in
/// `exceptions:page_fault_user` records: libtraceevent 1.7.1 does not load
/// those symbols, so trace-cmd prints user-space addresses raw and a kernel
/// address past a `$x` as an offset from the symbol before it.
#[test]
fn absolute_and_dollar_symbols_name_no_address_as_in_trace_cmd() {
    if !have_trace_cmd() {
        eprintln!("trace-cmd not installed: comparison skipped");
        return;
    }
    let e = Endian::LITTLE64;
    let fmt = "name: upf\nID: 901\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:unsigned long address;\toffset:8;\tsize:8;\tsigned:0;\n\
\tfield:unsigned long ip;\toffset:16;\tsize:8;\tsigned:0;\n\n\
print fmt: \"address=%ps ip=%pS\", (void *)REC->address, (void *)REC->ip\n";
    let page = 4096;
    let mut p = Page::new(e, page, ts(0));
    let cases = [
        (0x5555_5555_1000u64, 0x7fff_0000_1234u64),
        (0x2_9000, 0x1_0010),
        (0xffff_ffff_8100_0150, 0xffff_ffff_8100_0210),
    ];
    for (i, (address, ip)) in cases.iter().enumerate() {
        let d = tracedat::testing::payload(e, 901, 1, &[*address, *ip]);
        p.event(if i == 0 { 0 } else { 1_000_000 }, &d);
    }
    let tmp = tempfile::tempdir().unwrap();
    let meta = CaptureMeta {
        event_formats: vec![("exceptions".into(), vec![fmt.as_bytes().to_vec()])],
        kallsyms: "0000000000000000 A fixed_percpu_data\n\
0000000000001000 A cpu_number\n\
0000000000028000 a __per_cpu_end\n\
ffffffff81000000 T _stext\n\
ffffffff81000100 t $x\n\
ffffffff81000200 T next_fn\n\
ffffffff81000300 T last_fn\n"
            .into(),
        ..small_meta(e, page)
    };
    let path = one_cpu_file(tmp.path(), "upf", &meta, p.finish(None));
    let theirs = trace_cmd_report(&path, &[]);
    let theirs = theirs.strip_prefix("cpus=1\n").unwrap_or(&theirs);
    let ours = our_report(&TraceFile::open(&path).unwrap());
    assert_eq!(ours, theirs);
    assert!(
        ours.contains("address=0x555555551000 ip=0x7fff00001234"),
        "{ours}"
    );
    assert!(ours.contains("address=_stext ip=next_fn+0x10"), "{ours}");
}

/// `trace_printk` records (bprint) as trace-cmd prints them: formats from
/// printk_formats (escaped there) with embedded and trailing newlines, tabs,
/// `%pS %ps`, widths, 8-byte arguments. Left out on purpose: a `-` or `0`
/// flag, a precision or `%pB` in a trace_printk format make trace-cmd 3.1.6
/// print `[FAILED TO PARSE]` or drop the conversion (seen); we print them.
#[test]
fn trace_printk_records_print_as_trace_cmd_prints_them() {
    if !have_trace_cmd() {
        eprintln!("trace-cmd not installed: bprint comparison skipped");
        return;
    }
    let e = Endian::LITTLE64;
    let sym = BASE + 0x310;
    // (format as printk_formats escapes it, packed argument words)
    let cases: [(&str, Vec<u8>); 5] = [
        (r"plain line\n", vec![]),
        (
            r"hex %lx %llx %x no newline",
            [0xdeadu64, u64::MAX]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .chain(9u32.to_le_bytes())
                .collect(),
        ),
        (r"two\nlines %d\n", 7u32.to_le_bytes().to_vec()),
        (
            r"sym %pS %ps\n",
            [sym, sym].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        (
            r"tab\there %5d|%3d\n",
            [3u32, 4].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
    ];
    let mut printk = String::new();
    let page = 4096;
    let mut p = Page::new(e, page, ts(0));
    for (i, (fmt, args)) in cases.iter().enumerate() {
        let addr = 0xffff_ffff_8280_0000u64 + i as u64 * 0x40;
        printk.push_str(&format!("0x{addr:x} : \"{fmt}\"\n"));
        let mut d = e.u16(6);
        d.extend([0, 0]);
        d.extend(e.u32(1));
        d.extend(e.u64(BASE + 0x100));
        d.extend(e.u64(addr));
        d.extend(args);
        while !d.len().is_multiple_of(4) {
            d.push(0);
        }
        p.event(if i == 0 { 0 } else { 1_000_000 }, &d);
    }
    let tmp = tempfile::tempdir().unwrap();
    let meta = CaptureMeta {
        ftrace_formats: vec![BPRINT.as_bytes().to_vec()],
        printk_formats: printk.into_bytes(),
        kallsyms: (0..SYMBOLS)
            .map(|n| format!("{:016x} T difftest_f{n}\n", BASE + n * 0x100))
            .collect::<String>()
            .into_bytes(),
        ..small_meta(e, page)
    };
    let path = one_cpu_file(tmp.path(), "bprint", &meta, p.finish(None));
    let theirs = trace_cmd_report(&path, &[]);
    let theirs = theirs.strip_prefix("cpus=1\n").unwrap_or(&theirs);
    let ours = our_report(&TraceFile::open(&path).unwrap());
    assert_eq!(ours, theirs);
    // The cases are exercised: a continuation line and a resolved symbol.
    assert!(ours.contains("\nlines 7\n"), "{ours}");
    assert!(ours.contains("difftest_f3+0x10 difftest_f3\n"), "{ours}");
}

/// An event whose print fmt neither reader can parse (`__print_u32_array`, a
/// helper of old vendor kernels; trappy's thermal events use it): trace-cmd
/// prints `[FAILED TO PARSE]` and the raw fields, and so do we, field kind by
/// field kind (character arrays as text until a value is not printable, other
/// arrays as bytes, pointers and `long`s in hex, signed widths), in both long
/// sizes.
#[test]
fn unparsable_print_fmts_print_raw_fields_as_trace_cmd_prints_them() {
    if !have_trace_cmd() {
        eprintln!("trace-cmd not installed: comparison skipped");
        return;
    }
    let fields = [
        "char comm[16]",
        "__data_loc char[] name",
        "__data_loc u32[] load",
        "u8 mask[4]",
        "unsigned long freq",
        "long delta",
        "int temp",
        "short trip",
        "signed char level",
        "u64 total",
        "void * dev",
        "size_t count",
    ];
    let (sizes, signed) = (
        [16, 4, 4, 4, 8, 8, 4, 2, 1, 8, 8, 8],
        [0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0],
    );
    let mut text = String::from(
        "name: unparsable\nID: 900\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n",
    );
    let mut offset = 8;
    for ((decl, size), signed) in fields.iter().zip(sizes).zip(signed) {
        text.push_str(&format!(
            "\tfield:{decl};\toffset:{offset};\tsize:{size};\tsigned:{signed};\n"
        ));
        offset += size;
    }
    text.push_str(
        "\nprint fmt: \"load={%s} freq=%lu\", \
__print_u32_array(__get_dynamic_array(load), REC->count), REC->freq\n",
    );
    let formats = [("difftest".to_string(), text)];
    let tmp = tempfile::tempdir().unwrap();
    let long4 = Endian {
        big: false,
        long: 4,
    };
    for (label, e) in [
        ("unparsable-64", Endian::LITTLE64),
        ("unparsable-32", long4),
    ] {
        let diffs = compare(tmp.path(), label, &formats, Layout { e, v7: false }, 40, 21);
        let report: String = diffs
            .iter()
            .take(3)
            .map(|d| format!("  ours:   {}  theirs: {}", d.ours, d.theirs))
            .collect();
        assert!(
            diffs.is_empty(),
            "{label}: {} records differ\n{report}",
            diffs.len()
        );
        // Every record was printed, each kind of field seen.
        let f = TraceFile::open(&tmp.path().join(format!("{label}.dat"))).unwrap();
        let mut out = Vec::new();
        let mut printer = Printer::new(&f);
        for r in f.records() {
            printer.write(&r.unwrap(), &mut out).unwrap();
        }
        let ours = String::from_utf8_lossy(&out);
        assert_eq!(
            ours.matches("[FAILED TO PARSE] comm=").count(),
            40,
            "{ours}"
        );
        for kind in [" mask=ARRAY[", " dev=0x", " freq=0x", " load=ARRAY["] {
            assert!(ours.contains(kind), "{kind} missing:\n{ours}");
        }
    }
}
