//! `[collect]`: context commands run before tracing starts and after the run is
//! rolled back, their output saved in the output folder under `collect/`.
//!
//! Each command runs through duct with no shell (argv as given), stdin from
//! /dev/null and stderr merged into stdout, for at most the recipe's `timeout`
//! and `max_output_kb`; past either it is killed. A failure is recorded in
//! [`Collected`] (report.json `collected`); whether it fails the run is the
//! caller's decision (`[collect] required`).

use std::io::Read;
use std::path::Path;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::recipe::Collect;

/// Default time a command may run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default output kept per command, in KiB.
pub const DEFAULT_MAX_KB: u64 = 1024;

/// One collected command as report.json records it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Collected {
    /// `before` or `after`.
    pub phase: String,
    /// The argv run.
    pub command: Vec<String>,
    /// Its output file, relative to the output folder (`collect/before-1-uname.txt`).
    pub file: String,
    /// The exit code; `null` when it did not start, was killed or died by a signal.
    pub exit: Option<i32>,
    /// Why it failed (did not start, exit code, timeout, output cap); `null` when it succeeded.
    pub error: Option<String>,
}

/// Runs the `phase` (`"before"` or `"after"`) commands of `collect`, writing each
/// output to `out/collect/PHASE-N-PROGRAM.txt`. Never fails: every problem,
/// including a file that cannot be written, is in the returned records.
pub fn run_phase(collect: &Collect, phase: &str, out: &Path) -> Vec<Collected> {
    let commands = if phase == "before" {
        &collect.before
    } else {
        &collect.after
    };
    let timeout = collect
        .timeout
        .as_deref()
        .and_then(|t| crate::recipe::parse_duration(t).ok())
        .unwrap_or(DEFAULT_TIMEOUT);
    let cap = collect.max_output_kb.unwrap_or(DEFAULT_MAX_KB) * 1024;
    let mut records = Vec::new();
    for (i, c) in commands.iter().enumerate() {
        let argv = c.argv().unwrap_or_default();
        let program = argv
            .first()
            .and_then(|p| Path::new(p).file_name())
            .map(|n| {
                n.to_string_lossy().replace(
                    |c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_' && c != '.',
                    "_",
                )
            })
            .unwrap_or_else(|| "command".into());
        let file = format!("collect/{phase}-{}-{program}.txt", i + 1);
        let (output, exit, mut error) = match argv.split_first() {
            None => (Vec::new(), None, Some("empty command".to_string())),
            Some((program, args)) => run_one(program, args, timeout, cap),
        };
        let path = out.join(&file);
        let written = std::fs::create_dir_all(out.join("collect"))
            .and_then(|()| std::fs::write(&path, &output));
        if let Err(e) = written {
            error.get_or_insert(format!("cannot write {}: {e}", path.display()));
        }
        records.push(Collected {
            phase: phase.to_string(),
            command: argv,
            file,
            exit,
            error,
        });
    }
    records
}

/// Runs one command: its output (at most `cap` bytes), exit code and error.
fn run_one(
    program: &str,
    args: &[String],
    timeout: Duration,
    cap: u64,
) -> (Vec<u8>, Option<i32>, Option<String>) {
    let handle = match duct::cmd(program, args)
        .stdin_null()
        .stderr_to_stdout()
        .unchecked()
        .reader()
    {
        Ok(h) => Arc::new(h),
        Err(e) => {
            return (
                Vec::new(),
                None,
                Some(format!("cannot start `{program}`: {e}")),
            );
        }
    };
    let (tx, rx) = mpsc::channel();
    let reader = Arc::clone(&handle);
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let read = (&*reader).take(cap + 1).read_to_end(&mut buf);
        let _ = tx.send((buf, read));
    });
    let mut error = None;
    let (mut buf, read) = match rx.recv_timeout(timeout) {
        Ok(done) => done,
        Err(_) => {
            let _ = handle.kill();
            error = Some(format!("killed after the timeout of {timeout:?}"));
            // The pipe closes once the command is gone; a grandchild that keeps
            // it open forfeits the output rather than holding up the run.
            rx.recv_timeout(Duration::from_secs(1))
                .unwrap_or((Vec::new(), Ok(0)))
        }
    };
    if buf.len() as u64 > cap {
        buf.truncate(cap as usize);
        let _ = handle.kill();
        error.get_or_insert(format!("killed after writing more than {} KiB", cap / 1024));
    }
    if let Err(e) = read {
        error.get_or_insert(format!("cannot read its output: {e}"));
    }
    let exit = match handle.try_wait() {
        Ok(Some(o)) => o.status.code(),
        _ => None,
    };
    if error.is_none() && exit != Some(0) {
        error = Some(match exit {
            Some(code) => format!("exited with {code}"),
            None => "ended by a signal".to_string(),
        });
    }
    (buf, exit, error)
}
