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
use tracedat::{Printer, TraceFile};

/// The corpus files as plain trace.dat paths (compressed ones unpacked into
/// `tmp`).
fn corpus(tmp: &std::path::Path) -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("corpus"))
        .expect("corpus dir")
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            if let Some(stem) = name.strip_suffix(".zst") {
                let packed = std::fs::File::open(&p).unwrap();
                let mut dec = ruzstd::decoding::StreamingDecoder::new(packed).unwrap();
                let out = tmp.join(stem);
                let mut w = std::fs::File::create(&out).unwrap();
                std::io::copy(&mut dec, &mut w).unwrap();
                Some(out)
            } else {
                name.ends_with(".dat").then_some(p)
            }
        })
        .collect();
    v.push(root.join("fixtures/trace-cmd-v7-zstd.dat"));
    v.sort();
    v
}

fn ours(path: &std::path::Path) -> String {
    let f = TraceFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = format!("cpus={}\n", f.cpu_count()).into_bytes();
    let mut p = Printer::new(&f);
    for r in f.records() {
        let r = r.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        p.write(&r, &mut out).unwrap();
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Differences we keep on purpose, as (file name, predicate on trace-cmd's
/// line). Empty: every line is expected to be identical.
fn intended(_file: &str, _theirs: &str) -> bool {
    false
}

#[test]
fn corpus_matches_trace_cmd_report() {
    let tmp = tempfile::tempdir().unwrap();
    let files = corpus(tmp.path());
    assert!(files.len() >= 10, "corpus is missing");
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
            if x == y || intended(&name, y) {
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
    assert!(
        ratio >= 0.99,
        "{report}only {:.2} % identical",
        ratio * 100.0
    );
}
