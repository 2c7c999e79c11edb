//! Work on hostile input under a hard budget: memory, wall time and output
//! bytes. A template (a recipe's `{{ ... }}`, a user's summary template) is a
//! program written by someone else; minijinja's fuel counts its instructions,
//! but one instruction (`'x' * 100000000`, `a ~ a`, a filter) may allocate
//! without bound or run for seconds, and minijinja has no hook per
//! instruction. So the work runs in a forked child of this process (no
//! command is started: the child runs the closure it was given, on a copy of
//! this process's memory) under `RLIMIT_AS`, and the parent reads its answer
//! through a pipe, stopping it (SIGKILL) past the deadline or the byte cap.
//! An allocation past the budget aborts the child, a panic ends it; either
//! way the parent returns [`Exceeded`], never a crash.

use std::io::Read;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// What the work may use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// Address space the child may allocate beyond this process's, in bytes.
    pub(crate) memory: u64,
    /// Wall time for the whole work.
    pub(crate) time: Duration,
    /// Bytes of the answer.
    pub(crate) output: usize,
}

/// Which budget the work went past (or how it ended otherwise).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Exceeded {
    /// Still running at the deadline.
    #[error("it ran past its time budget of {} s", .0.as_secs_f64())]
    Time(Duration),
    /// Its answer was longer than the byte budget.
    #[error("its output went past the budget of {0} bytes")]
    Output(usize),
    /// It ended without an answer: an allocation past the memory budget (the
    /// allocator aborts), or a panic.
    #[error(
        "it stopped without finishing (more than {} MiB of memory, or an internal error)",
        .0 / (1 << 20)
    )]
    Memory(u64),
    /// The child could not be started (fork or pipe failed).
    #[error("it could not be confined: {0}")]
    Setup(String),
}

/// Runs `work` in a forked child under `budget` and returns the bytes it
/// produced. `work` must not touch files, the terminal or locks another
/// thread may hold (it runs in a copy of this process with one thread).
pub(crate) fn run<F>(budget: Budget, work: F) -> Result<Vec<u8>, Exceeded>
where
    F: FnOnce() -> Vec<u8>,
{
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Exceeded::Setup(std::io::Error::last_os_error().to_string()));
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and ours.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let limit = address_space().saturating_add(budget.memory);
    // SAFETY: the child runs `work` and leaves with `_exit`; it never returns
    // into the caller's stack or runs its destructors and exit handlers.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Exceeded::Setup(std::io::Error::last_os_error().to_string()));
    }
    if pid == 0 {
        drop(read);
        // Silence the child: an allocation past the limit or a panic would
        // print the allocator's or the panic's own message.
        // SAFETY: open with a NUL-terminated literal; dup2 of descriptors we own.
        unsafe {
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
            if null >= 0 {
                libc::dup2(null, 2);
            }
        }
        let rl = libc::rlimit {
            rlim_cur: limit,
            rlim_max: limit,
        };
        // SAFETY: setrlimit reads the struct; a failure leaves the limit
        // unset, and then the parent's deadline still bounds the work.
        unsafe { libc::setrlimit(libc::RLIMIT_AS, &rl) };
        let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
            Ok(bytes) => {
                let mut file = std::fs::File::from(write);
                match std::io::Write::write_all(&mut file, &bytes) {
                    Ok(()) => 0,
                    Err(_) => 1,
                }
            }
            Err(_) => 2,
        };
        // SAFETY: leaves the child at once, as fork's child must.
        unsafe { libc::_exit(code) };
    }
    drop(write);
    let answer = collect(read, budget);
    let status = reap(pid, answer.is_err());
    let bytes = answer?;
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(bytes)
    } else {
        Err(Exceeded::Memory(budget.memory))
    }
}

/// Reads the child's answer until it closes the pipe, within the deadline
/// and the byte cap.
fn collect(read: OwnedFd, budget: Budget) -> Result<Vec<u8>, Exceeded> {
    let deadline = Instant::now() + budget.time;
    let mut file = std::fs::File::from(read);
    let mut out = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&file.as_fd()),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Exceeded::Setup(e.to_string()));
        }
        if n == 0 {
            return Err(Exceeded::Time(budget.time));
        }
        match file.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(k) => {
                out.extend_from_slice(&chunk[..k]);
                if out.len() > budget.output {
                    return Err(Exceeded::Output(budget.output));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Exceeded::Setup(e.to_string())),
        }
    }
}

/// Waits for the child (killing it first when `kill`) and returns its wait
/// status.
fn reap(pid: libc::pid_t, kill: bool) -> libc::c_int {
    if kill {
        // SAFETY: `pid` is our own child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return status;
        }
    }
}

/// This process's address space in bytes (`/proc/self/statm`'s first field
/// in pages), 0 when unknown (the limit is then the budget alone, stricter).
fn address_space() -> u64 {
    let pages: u64 = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    pages.saturating_mul(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Budget = Budget {
        memory: 64 << 20,
        time: Duration::from_secs(5),
        output: 1 << 20,
    };

    #[test]
    fn the_answer_comes_back_and_each_budget_stops_the_work() {
        assert_eq!(run(SMALL, || b"ok".to_vec()), Ok(b"ok".to_vec()));
        assert_eq!(
            run(SMALL, || vec![b'x'; 2 << 20]),
            Err(Exceeded::Output(1 << 20))
        );
        let big = run(SMALL, || {
            let v = vec![1u8; 512 << 20];
            vec![v[v.len() - 1]]
        });
        assert_eq!(big, Err(Exceeded::Memory(64 << 20)));
        let quick = Budget {
            time: Duration::from_millis(200),
            ..SMALL
        };
        assert_eq!(
            run(quick, || loop {
                std::hint::spin_loop();
            }),
            Err(Exceeded::Time(Duration::from_millis(200)))
        );
        assert_eq!(
            run(SMALL, || panic!("inside")),
            Err(Exceeded::Memory(64 << 20))
        );
    }
}
