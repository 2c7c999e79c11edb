//! The workload: a command started held before `exec`, so its pid can be put in
//! the instance's `set_event_pid` before it runs a single instruction of its own.
//!
//! We spawn ourselves with the hidden subcommand `__held-exec` (see `stub`), which
//! waits for one byte on fd 3 and then `exec`s the command (keeping the pid). If we
//! die before releasing it, fd 3 reads end-of-file and the stub exits without
//! running anything.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::stub;

/// Hidden subcommand name.
pub const HELD_EXEC: &str = "__held-exec";

/// A held (or running) workload.
#[derive(Debug)]
pub struct Workload {
    child: Child,
    go: Option<OwnedFd>,
    /// The command line.
    pub command: Vec<String>,
}

/// How the workload ended.
#[derive(Debug, Clone, Copy, serde::Serialize, schemars::JsonSchema)]
pub struct WorkloadExit {
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
}

impl From<ExitStatus> for WorkloadExit {
    fn from(s: ExitStatus) -> Self {
        WorkloadExit {
            exit_code: s.code(),
            signal: s.signal(),
        }
    }
}

impl std::fmt::Display for WorkloadExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.exit_code, self.signal) {
            (Some(c), _) => write!(f, "exit status {c}"),
            (None, Some(s)) => write!(f, "killed by signal {s}"),
            (None, None) => write!(f, "unknown"),
        }
    }
}

/// Whether `program` can be run: a path that exists, or a name found in `PATH`.
pub fn resolvable(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

impl Workload {
    /// Starts `command` held. Errors: the stub could not be spawned.
    pub fn spawn_held(command: &[String]) -> std::io::Result<Workload> {
        let mut args: Vec<&OsStr> = vec![OsStr::new(HELD_EXEC), OsStr::new("--")];
        args.extend(command.iter().map(OsStr::new));
        let (child, go) = stub::spawn(&args, false, |_| {})?;
        Ok(Workload {
            child,
            go: Some(go),
            command: command.to_vec(),
        })
    }

    /// The workload's pid (the stub's, which `exec` keeps).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets the workload `exec` its command.
    pub fn release(&mut self) -> std::io::Result<()> {
        if let Some(go) = self.go.take() {
            rustix::io::write(&go, b"g")?;
        }
        Ok(())
    }

    /// Its exit, if it has ended.
    pub fn try_wait(&mut self) -> std::io::Result<Option<WorkloadExit>> {
        Ok(self.child.try_wait()?.map(Into::into))
    }

    /// Ends it: SIGTERM, then SIGKILL after `grace`; returns how it ended.
    /// A workload never released just exits (its fd 3 reads end-of-file).
    pub fn terminate(&mut self, grace: Duration) -> std::io::Result<WorkloadExit> {
        self.go = None;
        if let Some(s) = self.child.try_wait()? {
            return Ok(s.into());
        }
        // The workload's children too (a shell's pipeline, `make -j`): the whole
        // tree as it stands now, so none of it outlives the run.
        let tree = process_tree(self.child.id());
        signal_all(&tree, rustix::process::Signal::TERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(s) = self.child.try_wait()? {
                signal_all(&tree[1..], rustix::process::Signal::KILL);
                return Ok(s.into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        signal_all(&tree, rustix::process::Signal::KILL);
        Ok(self.child.wait()?.into())
    }
}

/// `root` and every process descending from it (from the parent pids in
/// /proc/PID/stat), root first.
fn process_tree(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter_map(|pid| {
                    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                    // Fields after the last ')' (the comm may hold anything): state, ppid.
                    let ppid = stat[stat.rfind(')')? + 1..]
                        .split_whitespace()
                        .nth(1)?
                        .parse()
                        .ok()?;
                    Some((pid, ppid))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    tree
}

fn signal_all(pids: &[u32], sig: rustix::process::Signal) {
    for pid in pids {
        if let Some(pid) = rustix::process::Pid::from_raw(*pid as i32) {
            let _ = rustix::process::kill_process(pid, sig);
        }
    }
}

/// Body of the hidden `__held-exec -- COMMAND...` subcommand: wait for the go byte
/// on fd 3, then exec. Returns only on failure, with the exit code to use.
pub fn held_exec(command: &[String]) -> i32 {
    if stub::wait_on_parent().is_none() {
        // The run ended before releasing us (or we were run by hand): run nothing.
        return 125;
    }
    let Some((program, args)) = command.split_first() else {
        return 125;
    };
    let err = Command::new(program).args(args).exec();
    eprintln!("trace-recipe: cannot run `{program}`: {err}");
    127
}

/// Pids of the running tasks whose name (`/proc/PID/comm`) is one of `comms`,
/// sorted; empty when `comms` is. Used to scope function tracers by task name.
pub fn pids_with_comm(comms: &[String]) -> Vec<u32> {
    if comms.is_empty() {
        return Vec::new();
    }
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|c| comms.iter().any(|n| n == c.trim_end_matches('\n')))
                })
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids
}
