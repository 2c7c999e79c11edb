//! Shared helpers for this crate's integration tests: trace-cmd invocation and
//! our reader's listing. Listings are compared through
//! [`tracedat::testing::report`], the tests' one report-line parser. (Captures
//! from the live kernel are trace-recipe's tests: they record through its
//! `Recorder`.)
#![allow(dead_code)]

use std::process::Command;

use tracedat::{Printer, TraceFile};

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
pub fn our_report(f: &TraceFile) -> String {
    let mut out = Vec::new();
    let mut printer = Printer::new(f);
    for r in f.records() {
        let r = r.expect("record");
        printer.write(&r, &mut out).expect("format");
    }
    printer.finish(&mut out).expect("format");
    String::from_utf8(out).expect("utf8")
}
