//! Other people's trace.dat files (tests/corpus, see its README) printed by
//! our reader and compared line for line with `trace-cmd report`.
//!
//! Files are stored zstd-compressed (`NAME.dat.zst`) unless trace-cmd
//! already compressed them; the trace-cmd v7 fixture is compared too. Needs
//! trace-cmd; without it the test only checks that every file reads to the
//! end without error.

mod common;

use std::path::PathBuf;

use common::*;
use tracedat::TraceFile;

/// The corpus files as plain trace.dat paths (compressed ones unpacked into
/// `tmp`): tests/corpus's other people's files, the files the kernel lab's
/// guests recorded with their own trace-cmd (tests/lab-corpus, one
/// `TARGET.tar.zst` per kernel) and the trace-cmd v7 fixture.
fn corpus(tmp: &std::path::Path) -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests");
    let unzstd = |p: &std::path::Path| {
        let packed = std::fs::File::open(p).unwrap();
        ruzstd::decoding::StreamingDecoder::new(packed).unwrap()
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("corpus"))
        .expect("corpus dir")
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            if let Some(stem) = name.strip_suffix(".zst") {
                let out = tmp.join(stem);
                let mut w = std::fs::File::create(&out).unwrap();
                std::io::copy(&mut unzstd(&p), &mut w).unwrap();
                Some(out)
            } else {
                name.ends_with(".dat").then_some(p)
            }
        })
        .collect();
    for e in std::fs::read_dir(root.join("lab-corpus")).expect("lab-corpus dir") {
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with(".tar.zst") {
            let mut tar = tar::Archive::new(unzstd(&p));
            for entry in tar.entries().unwrap() {
                let mut entry = entry.unwrap();
                let out = tmp.join(entry.path().unwrap().file_name().unwrap());
                entry.unpack(&out).unwrap();
                v.push(out);
            }
        }
    }
    v.push(root.join("fixtures/trace-cmd-v7-zstd.dat"));
    v.sort();
    v
}

fn ours(path: &std::path::Path) -> String {
    let f = TraceFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // Made both ways (one thread, and two with the bodies rendered on the
    // decoding one) and compared by `our_listing`.
    let text = common::our_listing(&f);
    format!("cpus={}\n{}", f.cpu_count(), String::from_utf8_lossy(&text))
}

/// Differences we keep on purpose: on some runs (a few in a hundred file
/// listings, more under load) trace-cmd 3.1.6 prints a whole file that has no
/// trace_clock option with raw nanosecond timestamps (`[000]585229563745:`)
/// instead of `[000]   585.229564:` (seen on kinmax-buildroot-a.dat and
/// tgvm-tutorial3labsisop.dat). A trace-cmd line counts as intended when it is
/// ours up to the CPU column and after the timestamp, and its nanoseconds
/// round to our microsecond.
fn intended(ours: &str, theirs: &str) -> bool {
    /// (line up to the CPU column's `]`, timestamp, rest after its `:`).
    fn split(l: &str) -> Option<(&str, &str, &str)> {
        let cpu_end = l.find(']')? + 1;
        let (ts, rest) = l[cpu_end..].split_once(':')?;
        Some((&l[..cpu_end], ts.trim(), rest))
    }
    let (Some((head, ts, rest)), Some((their_head, their_ts, their_rest))) =
        (split(ours), split(theirs))
    else {
        return false;
    };
    let us = ts
        .split_once('.')
        .and_then(|(s, u)| Some(s.parse::<u64>().ok()? * 1_000_000 + u.parse::<u64>().ok()?));
    let ns = their_ts.parse::<u64>().ok();
    head == their_head
        && rest == their_rest
        && matches!((us, ns), (Some(us), Some(ns)) if (ns + 500) / 1000 == us)
}

#[test]
fn corpus_matches_trace_cmd_report() {
    let tmp = tempfile::tempdir().unwrap();
    let files = corpus(tmp.path());
    // 25 corpus files from 13 origins (tests/corpus/README.md), 103 from the
    // lab's guests (tests/lab-corpus/README.md) and the fixture.
    assert!(
        files.len() >= 129,
        "corpus is missing files: {}",
        files.len()
    );
    let mut total = 0usize;
    let mut same = 0usize;
    let mut report = String::new();
    for path in &files {
        let text = ours(path);
        if !have_trace_cmd() {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let theirs = trace_cmd_report(path, &[]);
        let a: Vec<&str> = text.lines().collect();
        let b: Vec<&str> = theirs
            .lines()
            .filter(|l| !l.starts_with("version = "))
            .collect();
        let mut n_same = 0;
        let mut shown = 0;
        for (x, y) in a.iter().zip(b.iter()) {
            if x == y || intended(x, y) {
                n_same += 1;
            } else if shown < 6 {
                shown += 1;
                report.push_str(&format!("{name}:\n  ours:   {x}\n  theirs: {y}\n"));
            }
        }
        let n = a.len().max(b.len());
        report.push_str(&format!(
            "{name}: {n_same}/{n} lines identical ({} ours, {} theirs)\n",
            a.len(),
            b.len()
        ));
        total += n;
        same += n_same;
    }
    if total == 0 {
        return;
    }
    let ratio = same as f64 / total as f64;
    eprintln!(
        "{report}corpus: {same}/{total} identical ({:.2} %)",
        ratio * 100.0
    );
    assert_eq!(same, total, "{report}only {:.2} % identical", ratio * 100.0);
}

#[test]
fn only_trace_cmds_raw_nanosecond_timestamps_are_intended() {
    let ours = "   trace-cmd-90    [000]   585.229564: sched_switch:         trace-cmd:90 [120] S ==> trace-cmd:91 [120]";
    let raw = "   trace-cmd-90    [000]585229563745: sched_switch:         trace-cmd:90 [120] S ==> trace-cmd:91 [120]";
    assert!(intended(ours, raw));
    // Another microsecond, another pid or another state is a real difference.
    assert!(!intended(
        ours,
        &raw.replace("585229563745", "585229565745")
    ));
    assert!(!intended(ours, &raw.replace("-90 ", "-91 ")));
    assert!(!intended(ours, &raw.replace(" S ==>", " R ==>")));
}

/// Every v7/zstd file of the corpus (trace-cmd's own: 4 and 16 CPUs, 335k
/// lines) rewritten with zlib, as trace-cmd built with zlib writes it
/// ([`tracedat::testing::zlib`]), lists as the original does (which the test
/// above compares with trace-cmd).
#[test]
fn v7_zstd_files_rewritten_with_zlib_list_as_the_originals() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rewritten = 0;
    for path in corpus(tmp.path()) {
        let f = TraceFile::open(&path).unwrap();
        if (f.version(), f.compression()) != (7, tracedat::Compression::Zstd) {
            continue;
        }
        let zlib = tmp.path().join("zlib.dat");
        let bytes = tracedat::testing::zlib::zstd_to_zlib(&std::fs::read(&path).unwrap());
        std::fs::write(&zlib, bytes).unwrap();
        let z = TraceFile::open(&zlib).unwrap();
        assert_eq!(z.compression(), tracedat::Compression::Zlib);
        assert!(ours(&zlib) == ours(&path), "{}", path.display());
        rewritten += 1;
    }
    assert_eq!(
        rewritten, 4,
        "the two corpus v7 files, the fixture and s390x's (big-endian) from the lab"
    );
}
