//! Spawning ourselves with a hidden subcommand and a pipe on fd 3.
//!
//! Both the held workload (`__held-exec`) and the rollback guard (`__guard`) are
//! this binary started again: the parent keeps the pipe's write end, the child
//! finds the read end on [`STUB_FD`]. A byte on the pipe means "go"; end-of-file
//! means the parent is gone (the kernel closes its end when it dies, however it
//! dies), which is what lets the guard notice a SIGKILL at once.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// The file descriptor the child reads.
pub const STUB_FD: i32 = 3;

/// Spawns `current_exe ARGS...` with the read end of a new pipe on fd 3; returns
/// the child and the write end (close-on-exec, so only we hold it). With
/// `new_session` the child calls setsid(2): it leaves our process group and
/// terminal, so Ctrl-C and a hang-up do not reach it.
pub fn spawn(
    args: &[&std::ffi::OsStr],
    new_session: bool,
    configure: impl FnOnce(&mut Command),
) -> std::io::Result<(Child, OwnedFd)> {
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(args);
    configure(&mut cmd);
    let read_raw = read.as_raw_fd();
    // SAFETY: only async-signal-safe calls (fcntl, dup2, setsid) run in the forked
    // child before exec, on fds this process owns.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself keeps FD_CLOEXEC: clear it by hand in that case.
            let rc = if read_raw == STUB_FD {
                libc::fcntl(STUB_FD, libc::F_SETFD, 0)
            } else {
                libc::dup2(read_raw, STUB_FD)
            };
            if rc < 0 || (new_session && libc::setsid() < 0) {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    drop(read);
    Ok((child, write))
}

/// In the child: waits on fd 3. `Some(byte)` when the parent sent one, `None` on
/// end-of-file (the parent closed its end or died) or when fd 3 is not a pipe of
/// ours (the hidden subcommand was run by hand).
pub fn wait_on_parent() -> Option<u8> {
    // SAFETY: fcntl(F_GETFD) only asks whether fd 3 is open.
    if unsafe { libc::fcntl(STUB_FD, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: fd 3 is open (checked above) and was handed to us by `spawn`;
    // nothing else in this process owns it.
    let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(STUB_FD) };
    let mut byte = [0u8; 1];
    loop {
        match rustix::io::read(&fd, &mut byte) {
            Ok(1) => return Some(byte[0]),
            Err(rustix::io::Errno::INTR) => continue,
            _ => return None,
        }
    }
}
