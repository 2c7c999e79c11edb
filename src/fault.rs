//! Test-only injection points, named, so the reliability tests can kill a run
//! or fail one of its stages at a chosen place and check that tracefs still ends
//! as it began. Unset variables cost one `getenv` per point.
//!
//! Compiled in only with the cargo feature `fault-injection`, which the tests
//! and `scripts/reliability.sh` enable (the package's dev-dependency on itself)
//! and release builds and the .deb do not: without it [`var`] reads nothing,
//! so every hook is a no-op and the variables are ignored.
//!
//! [`KILL_AT_ENV`] and [`FAIL_AT_ENV`] hold comma-separated point names:
//!
//! | point | where |
//! |---|---|
//! | `recording` | the run, once the workload is released and tracing is on |
//! | `drain` | the run, when the recorder has been told to drain |
//! | `undo:N` | the run's own rollback, before undo number N (journal order, 1-based) |
//! | `guard-undo:N` | the guard's replay of a dead run's journal, before undo N |
//! | `reset-undo:N` | `reset`'s replay of a journal, before undo N |
//! | `workload` | (fail only) starting the held workload |
//! | `guard` | (fail only) starting the rollback guard |
//! | `tracing_on` | (fail only) turning the instance's `tracing_on` on |
//! | `recorder` | (fail only) starting the recorder threads |
//! | `tables` | (fail only) saving the hist tables and the snapshot after recording |
//!
//! The numbered hooks: [`FAIL_STEP_ENV`] and [`KILL_STEP_ENV`] (a step of the
//! apply), [`FAIL_UNDO_ENV`] (an undo, wherever it is performed) and
//! [`FAIL_JOURNAL_ENV`] (a journal write). [`HOLD_READERS_ENV`] holds the
//! per-CPU readers back until a file exists, so that a test can overflow the
//! ring buffer on purpose. [`TRACEFS_ERRNO_ENV`] makes chosen tracefs writes
//! fail with `EBUSY` or `EINTR`, as a busy or interrupted kernel would.

/// Comma-separated points at which the process SIGKILLs itself.
pub const KILL_AT_ENV: &str = "TRACE_RECIPE_TEST_KILL_AT";

/// Comma-separated points at which the stage fails with an injected error.
pub const FAIL_AT_ENV: &str = "TRACE_RECIPE_TEST_FAIL_AT";

/// Test-only: when set to N, step N (1-based) of the apply fails as if the
/// kernel refused it, so tests can prove that every prefix of a plan rolls back
/// cleanly.
pub const FAIL_STEP_ENV: &str = "TRACE_RECIPE_TEST_FAIL_STEP";
/// Test-only: when set to N, the process SIGKILLs itself at step N (1-based),
/// after journaling its undo and before writing, so tests can prove the guard
/// (and `reset`) roll back a run killed at any step.
pub const KILL_STEP_ENV: &str = "TRACE_RECIPE_TEST_KILL_STEP";

/// Test-only: when set to N, the undo recorded N-th (1-based, in journal order)
/// fails without being performed, wherever it is performed: in the run's own
/// rollback, in the guard's replay and in `reset`'s sweep (they all inherit the
/// environment). Tests use it to prove a journal with a failed undo survives
/// until `reset` (run without it) finishes the job.
pub const FAIL_UNDO_ENV: &str = "TRACE_RECIPE_TEST_FAIL_UNDO";
/// Test-only: when set to N, writing the N-th undo record (1-based) to the
/// journal fails, as a full or broken disk would make it.
pub const FAIL_JOURNAL_ENV: &str = "TRACE_RECIPE_TEST_FAIL_JOURNAL";

/// A path: while it names no file, the per-CPU readers read nothing (they
/// start as soon as it exists, or when the recorder is told to drain). Tests
/// use it to fill a small ring buffer past its size with a known number of
/// events and check the lost count.
pub(crate) const HOLD_READERS_ENV: &str = "TRACE_RECIPE_TEST_HOLD_READERS";

/// Test-only: `ERRNO:FILE:N` or `ERRNO:FILE:NxK` — the N-th attempt (1-based)
/// of this process to write a tracefs file whose path ends with FILE (whole
/// components: `sched/sched_switch/enable`), and the K - 1 attempts after it
/// (default K = 1), fail with ERRNO (`EBUSY` or `EINTR`) before reaching the
/// kernel. A retried write is a new attempt. Tests use it to prove a busy file
/// is never half-applied and an interrupted write is tried again
/// ([`crate::tracefs::Instance::write`]).
pub const TRACEFS_ERRNO_ENV: &str = "TRACE_RECIPE_TEST_TRACEFS_ERRNO";

/// Attempts so far to write the file [`TRACEFS_ERRNO_ENV`] names.
static TRACEFS_ATTEMPTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// `Err` with the errno [`TRACEFS_ERRNO_ENV`] chooses when this attempt to
/// write the tracefs file `path` is one it names; `Ok` otherwise (always,
/// without the feature or the variable).
pub(crate) fn tracefs_write(path: &std::path::Path) -> std::io::Result<()> {
    let Some(spec) = var(TRACEFS_ERRNO_ENV) else {
        return Ok(());
    };
    let mut parts = spec.splitn(3, ':');
    let (Some(errno), Some(file), Some(which)) = (parts.next(), parts.next(), parts.next()) else {
        return Ok(());
    };
    let errno = match errno {
        "EBUSY" => libc::EBUSY,
        "EINTR" => libc::EINTR,
        _ => return Ok(()),
    };
    if !path.ends_with(file) {
        return Ok(());
    }
    let (first, times) = which.split_once('x').unwrap_or((which, "1"));
    let (Ok(first), Ok(times)) = (first.parse::<usize>(), times.parse::<usize>()) else {
        return Ok(());
    };
    let attempt = TRACEFS_ATTEMPTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    match (first..first + times).contains(&attempt) {
        true => Err(std::io::Error::from_raw_os_error(errno)),
        false => Ok(()),
    }
}

/// The value of the hook variable `name`: the one place the hooks read the
/// environment.
#[cfg(feature = "fault-injection")]
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Without the feature `fault-injection`: nothing, whatever the environment says.
#[cfg(not(feature = "fault-injection"))]
fn var(_name: &str) -> Option<String> {
    None
}

/// The value of the hook variable `name`, when set to a number.
pub(crate) fn number(name: &str) -> Option<usize> {
    var(name)?.parse().ok()
}

/// Waits while [`HOLD_READERS_ENV`] names a file that does not exist yet and
/// `draining` is false (checked every 10 ms: test-only).
pub(crate) fn hold_readers(draining: &std::sync::atomic::AtomicBool) {
    let Some(path) = var(HOLD_READERS_ENV) else {
        return;
    };
    let path = std::path::PathBuf::from(path);
    while !path.exists() && !draining.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Whether `point` is listed in the variable `var`.
fn listed(var: &str, point: &str) -> bool {
    self::var(var).is_some_and(|v| v.split(',').any(|p| p.trim() == point))
}

/// SIGKILLs this process when `point` is listed in [`KILL_AT_ENV`].
pub(crate) fn kill_at(point: &str) {
    if listed(KILL_AT_ENV, point) {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

/// `Err` (an injected I/O error naming the point) when `point` is listed in
/// [`FAIL_AT_ENV`].
pub(crate) fn fail_at(point: &str) -> std::io::Result<()> {
    match listed(FAIL_AT_ENV, point) {
        true => Err(std::io::Error::other(format!(
            "injected failure at `{point}` ({FAIL_AT_ENV})"
        ))),
        false => Ok(()),
    }
}
