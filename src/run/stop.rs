//! Why a run stops: the [`StopReason`] of recording, and the signals a run
//! handles (SIGINT, SIGTERM, SIGHUP) — [`Signals`] installs the handlers for
//! the run's length, and the first [`Signal`] sets the reason.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The first of SIGINT, SIGTERM or SIGHUP that arrived while a run's handlers
/// are installed (0: none). Signal dispositions are per process, so this is too.
static SIGNAL: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    if SIGNAL
        .compare_exchange(0, sig as usize, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        const MSG: &[u8] = b"\ntrace-recipe: already stopping: rolling back tracefs, please wait\n";
        // SAFETY: write(2) is async-signal-safe; MSG is a static buffer.
        unsafe { libc::write(2, MSG.as_ptr().cast(), MSG.len()) };
    }
}

/// A signal that ended a run (SIGINT, SIGTERM or SIGHUP: the ones a run
/// handles). Displays as its name (`SIGINT`), or its number for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal(i32);

impl Signal {
    /// The signal's number (signal(7)); a run it ends exits with 128 + it.
    pub fn number(self) -> i32 {
        self.0
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            libc::SIGINT => f.write_str("SIGINT"),
            libc::SIGTERM => f.write_str("SIGTERM"),
            libc::SIGHUP => f.write_str("SIGHUP"),
            n => write!(f, "{n}"),
        }
    }
}

/// Why recording stopped. Its `Display` is the text of the `stopped:` line
/// and of report.json's `stop_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A signal arrived.
    Signal(Signal),
    /// The workload exited.
    WorkloadExited,
    /// The recipe's `duration` passed.
    Duration,
    /// `[stop] on_traceoff`: a trigger turned tracing off.
    Traceoff,
    /// `[stop] max_size_mb` was reached.
    MaxSize,
    /// The output file system filled up: the recorder kept what fitted.
    OutputFull,
    /// `collect-boot`: the trace is the previous boot's, which ended.
    BootEnded,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::Signal(s) => write!(f, "signal {s}"),
            StopReason::WorkloadExited => f.write_str("workload exited"),
            StopReason::Duration => f.write_str("duration"),
            StopReason::Traceoff => f.write_str("traceoff (tracing_on dropped to 0)"),
            StopReason::MaxSize => f.write_str("max_size_mb"),
            StopReason::OutputFull => f.write_str("output file system full"),
            StopReason::BootEnded => f.write_str("the previous boot ended (flight recorder)"),
        }
    }
}

/// A run's handlers of SIGINT, SIGTERM and SIGHUP: the first signal sets the
/// reason the run stops; any later one only prints that the run is already
/// stopping and rolling back. Dropping it puts back the dispositions it
/// replaced, so a library caller has its own signal handling again once `run`
/// returns.
pub(super) struct Signals {
    replaced: Vec<(libc::c_int, libc::sigaction)>,
}

impl Signals {
    pub(super) fn register() -> Signals {
        SIGNAL.store(0, Ordering::SeqCst);
        let mut replaced = Vec::new();
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: sigaction(2) with a zeroed-then-filled struct; the handler
            // only touches an atomic and calls write(2), both async-signal-safe.
            unsafe {
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                new.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut new.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &new, &mut old) == 0 {
                    replaced.push((sig, old));
                }
            }
        }
        Signals { replaced }
    }

    /// The first signal that arrived, if any.
    pub(super) fn get(&self) -> Option<Signal> {
        match SIGNAL.load(Ordering::SeqCst) {
            0 => None,
            s => Some(Signal(s as i32)),
        }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for (sig, old) in self.replaced.drain(..) {
            // SAFETY: restores the disposition sigaction(2) returned earlier.
            unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) };
        }
    }
}
