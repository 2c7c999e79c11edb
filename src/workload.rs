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
use std::path::Path;

use rustix::process::{Pid, Signal};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::stub;
use crate::untrusted::teprintln;

/// Hidden subcommand name.
pub(crate) const HELD_EXEC: &str = "__held-exec";

/// A held (or running) workload.
#[derive(Debug)]
pub(crate) struct Workload {
    child: Child,
    go: Option<OwnedFd>,
    /// The command line.
    pub(crate) command: Vec<String>,
}

/// How the workload ended.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct WorkloadExit {
    /// Exit code, when it exited.
    pub(crate) exit_code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub(crate) signal: Option<i32>,
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
pub(crate) fn resolvable(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

/// The environment variable that holds the path of the run's `trace_marker`
/// for the workload (recipe-format 1.2), e.g.
/// `/sys/kernel/tracing/instances/trace-recipe-NAME-PID/trace_marker`.
pub const MARKER_ENV: &str = "TRACE_RECIPE_MARKER";

impl Workload {
    /// Starts `command` held, in a process group of its own (its pid is the
    /// group's id), so a terminal's Ctrl-C reaches the run, not the workload, and
    /// the run can end the whole group with `killpg`. Errors: the stub could not
    /// be spawned.
    ///
    /// The workload finds its run's `trace_marker` (`marker`) in
    /// [`MARKER_ENV`]: what it writes there lands in the trace as
    /// `ftrace:print` records, in order with the kernel's events.
    pub(crate) fn spawn_held(command: &[String], marker: &Path) -> std::io::Result<Workload> {
        crate::fault::fail_at("workload")?;
        let mut args: Vec<&OsStr> = vec![OsStr::new(HELD_EXEC), OsStr::new("--")];
        args.extend(command.iter().map(OsStr::new));
        let (mut child, go) = stub::spawn(&args, false, |c| {
            c.process_group(0);
            c.env(MARKER_ENV, marker);
        })?;
        wait_held(&mut child, Duration::from_secs(5));
        Ok(Workload {
            child,
            go: Some(go),
            command: command.to_vec(),
        })
    }

    /// The workload's pid (the stub's, which `exec` keeps); also its process group id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets the workload `exec` its command.
    pub(crate) fn release(&mut self) -> std::io::Result<()> {
        if let Some(go) = self.go.take() {
            rustix::io::write(&go, b"g")?;
        }
        Ok(())
    }

    /// Its exit, if it has ended.
    pub(crate) fn try_wait(&mut self) -> std::io::Result<Option<WorkloadExit>> {
        Ok(self.child.try_wait()?.map(Into::into))
    }

    /// A pidfd of the workload: readable once it has exited (poll(2) on it to wait
    /// with a timeout).
    pub(crate) fn pidfd(&self) -> std::io::Result<OwnedFd> {
        Ok(pidfd_of(self.child.id())?)
    }

    /// Ends it and its process group: SIGTERM to the group, then SIGKILL to what
    /// is left of the group once the workload exits or `grace` passes; returns how
    /// the workload ended. A workload never released just exits (its fd 3 reads
    /// end-of-file). Waits block on a pidfd and on waitpid, never in a sleep loop.
    pub(crate) fn terminate(&mut self, grace: Duration) -> std::io::Result<WorkloadExit> {
        self.go = None;
        if let Some(s) = self.child.try_wait()? {
            signal_group(self.child.id(), Signal::KILL);
            return Ok(s.into());
        }
        let pidfd = self.pidfd()?;
        end_group(&pidfd, self.child.id(), grace);
        Ok(self.child.wait()?.into())
    }
}

/// Waits until the held stub sleeps in its read(2) of fd 3: `/proc/PID/syscall`
/// names the read syscall's number and fd `0x3` (fs/proc/base.c,
/// proc_pid_syscall). Until then the stub is still starting (loading itself,
/// mapping libraries), and what it does there must come before the plan puts
/// its pid in `set_event_pid` and enables the events: otherwise the start's
/// syscalls race the enables, and a hist trigger counts the ones that land
/// between the enables and `tracing_on` (it sees events through the trigger's
/// temporary buffer while the ring buffer is off) where the trace does not.
/// Returns as soon as the stub sleeps there, exits, or `limit` passes, and at
/// once where the file cannot be read (a kernel without
/// CONFIG_HAVE_ARCH_TRACEHOOK): waiting only narrows the race then.
fn wait_held(child: &mut Child, limit: Duration) {
    let path = format!("/proc/{}/syscall", child.id());
    let read_nr = libc::SYS_read.to_string();
    let start = Instant::now();
    while start.elapsed() < limit {
        let Ok(text) = std::fs::read_to_string(&path) else {
            return;
        };
        let mut fields = text.split_whitespace();
        if fields.next() == Some(read_nr.as_str()) && fields.next() == Some("0x3") {
            return;
        }
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A pidfd of process `pid`; open it while the process is known to exist (the
/// pid is not reused while the pidfd is open).
pub(crate) fn pidfd_of(pid: u32) -> rustix::io::Result<OwnedFd> {
    let pid = Pid::from_raw(pid as i32).ok_or(rustix::io::Errno::SRCH)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
}

/// Sends `sig` to process group `pgid`; a group that no longer exists is fine.
pub(crate) fn signal_group(pgid: u32, sig: Signal) {
    if let Some(pgid) = Pid::from_raw(pgid as i32) {
        let _ = rustix::process::kill_process_group(pgid, sig);
    }
}

/// Waits until the process behind `pidfd` exits, at most `limit`; true when it did.
pub(crate) fn wait_exit(pidfd: &OwnedFd, limit: Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = Timespec {
            tv_sec: left.as_secs() as _,
            tv_nsec: left.subsec_nanos() as _,
        };
        let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(n) if n > 0 => return true,
            Err(rustix::io::Errno::INTR) if !left.is_zero() => continue,
            _ => return false,
        }
    }
}

/// Ends process group `pgid` whose leader is behind `leader`: SIGTERM to the
/// group, a wait of up to `grace` for the leader, then SIGKILL to whatever is
/// left of the group.
pub(crate) fn end_group(leader: &OwnedFd, pgid: u32, grace: Duration) {
    signal_group(pgid, Signal::TERM);
    wait_exit(leader, grace);
    signal_group(pgid, Signal::KILL);
}

/// The record of a run's workload, `run-PID.workload` beside the run's journal:
/// it lets `status` name a workload still running after its run died. The run
/// writes it before the guard starts and removes it once the workload has ended;
/// a guard that ends an orphaned workload removes it too.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorkloadRecord {
    /// The run's pid.
    pub(crate) run_pid: u32,
    /// The run's start time (see [`process_start_time`]).
    pub(crate) run_start_time: u64,
    /// The workload's pid, also its process group id.
    pub pid: u32,
    /// The workload's start time.
    pub(crate) start_time: u64,
    /// The command line.
    pub(crate) command: Vec<String>,
    /// Whether the workload is ended when its run dies without rolling back
    /// (`[scope] on_abort = "kill"`, the default); `reset` and the sweep at the
    /// start of a run end it then, as the guard would have.
    #[serde(default = "yes")]
    pub(crate) end_on_abort: bool,
}

fn yes() -> bool {
    true
}

impl WorkloadRecord {
    /// Where the record of run `run_pid` lives in `dir`.
    pub(crate) fn path(dir: &std::path::Path, run_pid: u32) -> std::path::PathBuf {
        dir.join(format!("run-{run_pid}.workload"))
    }

    /// Writes the record into `dir` (created 0700 if needed).
    pub(crate) fn write(&self, dir: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let path = Self::path(dir, self.run_pid);
        std::fs::write(&path, serde_json::to_vec(self).unwrap_or_default())?;
        Ok(path)
    }

    /// Every record in `dir`, with its path.
    pub fn list(dir: &std::path::Path) -> Vec<(std::path::PathBuf, WorkloadRecord)> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "workload"))
                    .filter_map(|p| {
                        let r = serde_json::from_slice(&std::fs::read(&p).ok()?).ok()?;
                        Some((p, r))
                    })
                    .collect()
            })
            .unwrap_or_default();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Whether the workload still runs (same pid, same start time).
    pub(crate) fn workload_alive(&self) -> bool {
        process_start_time(self.pid) == Some(self.start_time)
    }

    /// Whether the run that started it still runs.
    pub(crate) fn run_alive(&self) -> bool {
        process_start_time(self.run_pid) == Some(self.run_start_time)
    }
}

/// Body of the hidden `__held-exec -- COMMAND...` subcommand: wait for the go byte
/// on fd 3, then exec. Returns only on failure, with the exit code to use.
pub(crate) fn held_exec(command: &[String]) -> i32 {
    if stub::wait_on_parent().is_none() {
        // The run ended before releasing us (or we were run by hand): run nothing.
        return 125;
    }
    let Some((program, args)) = command.split_first() else {
        return 125;
    };
    let err = Command::new(program).args(args).exec();
    teprintln!("trace-recipe: cannot run `{program}`: {err}");
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

/// Start time of process `pid` (field 22 of /proc/PID/stat), or `None` when it does
/// not exist.
pub(crate) fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The comm field (2) may contain spaces and parentheses: fields after the
    // last ')' are well formed. Field 3 is the first of them.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}
