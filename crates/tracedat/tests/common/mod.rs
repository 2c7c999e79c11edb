//! Shared helpers for this crate's integration tests: trace-cmd invocation and
//! our reader's listing. Listings are compared through
//! [`tracedat::testing::report`], the tests' one report-line parser. (Captures
//! from the live kernel are trace-recipe's tests: they record through its
//! `Recorder`.)
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use tracedat::testing::Endian;
use tracedat::{EventFormat, Printer, TraceFile};

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

pub fn trace_cmd_report(path: &std::path::Path, extra: &[&str]) -> String {
    let (out, _) = run(Command::new("trace-cmd")
        .arg("report")
        .args(extra)
        .arg("-i")
        .arg(path));
    out
}

/// Our reader's records printed by one [`Printer`] (which, like trace-cmd,
/// names a task its saved cmdlines lack from the events seen before): a
/// listing as `trace-cmd report` prints it, without the `cpus=N` header.
///
/// The listing is made twice, by the iterator on this thread and by the
/// pipelined walk with the events' bodies rendered on its decoding thread
/// ([`tracedat::Bodies`]), and the two must be equal byte for byte.
pub fn our_report(f: &TraceFile) -> String {
    String::from_utf8(our_listing(f)).expect("utf8")
}

/// [`our_report`]'s bytes, made and compared both ways, for a file whose
/// listing need not be UTF-8.
pub fn our_listing(f: &TraceFile) -> Vec<u8> {
    let mut out = Vec::new();
    let mut printer = Printer::new(f);
    for r in f.records() {
        let r = r.expect("record");
        printer.write(&r, &mut out).expect("format");
    }
    printer.finish(&mut out).expect("format");

    let mut pipelined = Vec::new();
    let mut printer = Printer::new(f);
    let mut bodies = printer.bodies();
    f.records()
        .pipelined(true)
        .try_for_each_prepared(
            |rec, into| bodies.prepare(rec, into),
            |rec, prepared| -> Result<(), tracedat::Error> {
                printer.append_prepared(rec, prepared, &mut pipelined);
                Ok(())
            },
        )
        .expect("records");
    printer.finish(&mut pipelined).expect("format");
    assert!(
        out == pipelined,
        "the pipelined listing differs from the plain one"
    );
    out
}

/// The repository's fact files (tests/facts: `trace-recipe facts` of this
/// host and the lab kernels).
pub fn facts_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/facts")
}

/// `(system, format text)` of every event of a fact file.
pub fn kernel_formats(path: &Path) -> Vec<(String, String)> {
    let packed = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut json = String::new();
    ruzstd::decoding::StreamingDecoder::new(packed)
        .unwrap()
        .read_to_string(&mut json)
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let formats = v["formats"].as_object().expect("formats");
    formats
        .iter()
        .filter_map(|(k, t)| {
            let (sys, _) = k.split_once(':')?;
            Some((sys.to_string(), t.as_str()?.to_string()))
        })
        .collect()
}

/// A record of format `f` with the named fields set; its size is the
/// format's, rounded up to 4 bytes.
pub fn payload(e: Endian, f: &EventFormat, values: &[(&str, u64)]) -> Vec<u8> {
    let end = f
        .common_fields
        .iter()
        .chain(&f.fields)
        .map(|x| x.offset + x.size)
        .max()
        .unwrap();
    let mut d = vec![0u8; end.div_ceil(4) * 4];
    for (name, v) in values {
        let x = f.field(name).unwrap();
        let b = match x.size {
            2 => e.u16(*v as u16),
            4 => e.u32(*v as u32),
            8 => e.u64(*v),
            n => panic!("size {n}"),
        };
        d[x.offset..x.offset + x.size].copy_from_slice(&b);
    }
    d
}
