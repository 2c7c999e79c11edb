//! Recording: one reader thread per CPU on the instance's
//! `per_cpu/cpuN/trace_pipe_raw`, writing whole sub-buffers to a raw file per CPU.
//!
//! While tracing is on, a reader moves full sub-buffers with `splice(2)` from
//! trace_pipe_raw through a pipe into its file (the kernel hands over whole
//! pages; nothing is copied through user space), many per call, and sleeps in
//! `poll(2)` with a short timeout when none is ready. Kernels that refuse to
//! splice it get `O_NONBLOCK` reads of one sub-buffer each instead. After
//! tracing is turned off, [`Recorder::finish`] lets every reader drain what is
//! left, the last partly filled sub-buffers included (splice only moves full
//! ones, so the drain reads), until `EAGAIN`; then reads each CPU's `stats`
//! (overrun, dropped events). See the spec's section 10 and
//! Documentation/trace/ftrace.rst (trace_pipe_raw, per_cpu/cpuN/stats).

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fs::{Mode, OFlags, open};
use rustix::io::Errno;

use crate::tracefs::{Instance, TracefsError, cpu_stat, lost_from_stats};

/// What one CPU's reader captured.
#[derive(Debug, Clone)]
pub struct CpuCapture {
    /// CPU number.
    pub cpu: u32,
    /// The raw file: whole sub-buffers, in read order.
    pub path: PathBuf,
    /// Bytes in the file (a multiple of the sub-buffer size).
    pub(crate) bytes: u64,
    /// The CPU's `stats` text, read after draining.
    pub stats: String,
    /// CPU time the reader thread used (user + system).
    pub(crate) cpu_time: Duration,
    /// The output file system filled up while recording: the raw file holds
    /// what fitted (whole sub-buffers), and every reader stopped there.
    pub(crate) truncated: bool,
    /// The piece `path` belongs to (`[output] rotate`; 0 without).
    pub(crate) piece: u64,
}

/// A reader thread; it returns the bytes it wrote, its CPU time, and its
/// last raw file with the piece it belongs to.
type ReaderThread = JoinHandle<std::io::Result<(u64, Duration, PathBuf, u64)>>;

/// The raw file of CPU `cpu` for piece `piece` of a rotating run
/// ([`Recorder::rotate`]): `cpuN.raw` for the first (and only, without
/// rotation), `cpuN.K.raw` for piece K after it.
pub(crate) fn raw_path(raw_dir: &Path, cpu: u32, piece: u64) -> PathBuf {
    match piece {
        0 => raw_dir.join(format!("cpu{cpu}.raw")),
        k => raw_dir.join(format!("cpu{cpu}.{k}.raw")),
    }
}

/// What an idle reader is given to start reading: its CPU's trace_pipe_raw,
/// its raw file, the sub-buffer size, and whether to read only once draining
/// is asked for ([`Readers::start`]).
struct Job {
    fd: OwnedFd,
    out: File,
    subbuf: usize,
    at_end: bool,
    cpu: u32,
    raw_dir: PathBuf,
}

/// Per-CPU reader threads started before anything is applied, each waiting for
/// its CPU's trace_pipe_raw (the instance does not exist yet). Started this
/// early so that their thread ids are known when the plan is built: the plan
/// keeps the run's own threads out of the trace (`set_event_notrace_pid`), and
/// the kernel's pid lists name threads, not processes. Dropping it ends the
/// threads without reading anything.
#[derive(Debug)]
pub struct Readers {
    threads: Vec<(u32, std::sync::mpsc::Sender<Job>, ReaderThread)>,
    tids: Vec<u32>,
    draining: Arc<AtomicBool>,
    full: Arc<AtomicBool>,
    wake_rd: Arc<OwnedFd>,
    wake: Option<OwnedFd>,
    bytes: Arc<AtomicU64>,
    /// The pieces of a rotating run: see [`Pieces`].
    pieces: Arc<Pieces>,
    writing: Vec<Arc<AtomicU64>>,
}

/// How a rotating run's readers cut pieces ([`Recorder::rotate_at`]): the
/// piece asked for, the raw bytes written since it was, and the bytes at which
/// a reader asks for the next one (0: never).
#[derive(Debug, Default)]
struct Pieces {
    asked: AtomicU64,
    bytes: AtomicU64,
    threshold: AtomicU64,
}

impl Pieces {
    /// Counts `n` bytes written into piece `piece`; the reader whose bytes
    /// take it to the threshold asks for the next piece.
    fn wrote(&self, piece: u64, n: u64) {
        let threshold = self.threshold.load(Ordering::Relaxed);
        if threshold == 0 {
            return;
        }
        if self.bytes.fetch_add(n, Ordering::SeqCst) + n >= threshold
            && self
                .asked
                .compare_exchange(piece, piece + 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.bytes.store(0, Ordering::SeqCst);
        }
    }
}

impl Readers {
    /// Starts one idle reader thread (`record-cpuN`) per CPU in `cpus`. Errors:
    /// a pipe or a thread could not be created.
    pub fn spawn(cpus: &[u32]) -> Result<Readers, RecordError> {
        let (wake_rd, wake) =
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| {
                RecordError::Open {
                    cpu: 0,
                    path: PathBuf::from("pipe"),
                    source: e.into(),
                }
            })?;
        let mut readers = Readers {
            threads: Vec::new(),
            tids: Vec::new(),
            draining: Arc::new(AtomicBool::new(false)),
            full: Arc::new(AtomicBool::new(false)),
            wake_rd: Arc::new(wake_rd),
            wake: Some(wake),
            bytes: Arc::new(AtomicU64::new(0)),
            pieces: Arc::new(Pieces::default()),
            writing: Vec::new(),
        };
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        for &cpu in cpus {
            let (job_tx, job_rx) = std::sync::mpsc::channel::<Job>();
            let (draining, full, bytes, wake) = (
                readers.draining.clone(),
                readers.full.clone(),
                readers.bytes.clone(),
                readers.wake_rd.clone(),
            );
            let (pieces, writing) = (readers.pieces.clone(), Arc::new(AtomicU64::new(0)));
            readers.writing.push(writing.clone());
            let tid_tx = tid_tx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("record-cpu{cpu}"))
                .spawn(move || {
                    let _ = tid_tx.send(rustix::thread::gettid().as_raw_nonzero().get() as u32);
                    drop(tid_tx);
                    match job_rx.recv() {
                        Ok(j) => {
                            crate::fault::hold_readers(&draining);
                            if j.at_end {
                                wait_for_drain(&draining, &wake);
                            }
                            let flags = Flags {
                                draining: &draining,
                                full: &full,
                                wake: &wake,
                            };
                            let out = Out {
                                file: j.out,
                                cpu: j.cpu,
                                raw_dir: j.raw_dir,
                                pieces: &pieces,
                                writing: &writing,
                            };
                            read_cpu(j.fd, out, j.subbuf, flags, &bytes)
                        }
                        Err(_) => Ok((0, Duration::ZERO, PathBuf::new(), 0)),
                    }
                })
                .map_err(|source| RecordError::Open {
                    cpu,
                    path: PathBuf::from(format!("thread record-cpu{cpu}")),
                    source,
                })?;
            readers.threads.push((cpu, job_tx, handle));
        }
        drop(tid_tx);
        readers.tids = tid_rx.iter().collect();
        Ok(readers)
    }

    /// The reader threads' ids (what `gettid(2)` returns in each).
    pub fn tids(&self) -> &[u32] {
        &self.tids
    }

    /// Hands each reader its CPU's `per_cpu/cpuN/trace_pipe_raw` of `instance`,
    /// to read `subbuf` bytes (the sub-buffer size) at a time into
    /// `raw_dir/cpuN.raw`. With `at_end`, the readers read nothing until
    /// [`Recorder::finish`] (then what the buffer holds): reading consumes, and a
    /// latency tracer swaps the live buffer into its max buffer at each new
    /// maximum, so a reader running meanwhile would empty the worst case's trace
    /// (kernel/trace/trace.c, `update_max_tr`). Also sets aside
    /// [`RESERVE_BYTES`] in `raw_dir` ([`Recorder::finish`] frees it), so that a
    /// run whose output file system fills up still has room for trace.dat's
    /// metadata and the reports. Errors: a file could not be opened or created
    /// (the readers are then ended).
    pub fn start(
        mut self,
        instance: &Instance,
        subbuf: usize,
        raw_dir: &Path,
        at_end: bool,
    ) -> Result<Recorder, RecordError> {
        let mut jobs = Vec::new();
        for (cpu, _, _) in &self.threads {
            let cpu = *cpu;
            let pipe = instance.path(&format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
            let fd = open(
                &pipe,
                OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| RecordError::Open {
                cpu,
                path: pipe.clone(),
                source: e.into(),
            })?;
            let out_path = raw_path(raw_dir, cpu, 0);
            let out = File::create(&out_path).map_err(|source| RecordError::Open {
                cpu,
                path: out_path.clone(),
                source,
            })?;
            jobs.push((
                Job {
                    fd,
                    out,
                    subbuf,
                    at_end,
                    cpu,
                    raw_dir: raw_dir.to_path_buf(),
                },
                out_path,
            ));
        }
        let mut rec = Recorder {
            threads: Vec::new(),
            draining: self.draining.clone(),
            full: self.full.clone(),
            wake: None,
            bytes: self.bytes.clone(),
            instance: instance.clone(),
            reserve: reserve(raw_dir),
            pieces: self.pieces.clone(),
            writing: std::mem::take(&mut self.writing),
        };
        for ((cpu, tx, handle), (job, out_path)) in
            std::mem::take(&mut self.threads).into_iter().zip(jobs)
        {
            // A reader that is gone already reports why when joined.
            let _ = tx.send(job);
            rec.threads.push((cpu, out_path, handle));
        }
        rec.wake = self.wake.take();
        crate::fault::fail_at("recorder").map_err(|source| RecordError::Read { cpu: 0, source })?;
        Ok(rec)
    }
}

impl Drop for Readers {
    /// Ends readers that were never started: each sees its job channel close.
    fn drop(&mut self) {
        for (_, tx, handle) in std::mem::take(&mut self.threads) {
            drop(tx);
            let _ = handle.join();
        }
    }
}

/// Per-CPU readers running in the background.
#[derive(Debug)]
pub struct Recorder {
    threads: Vec<(u32, PathBuf, ReaderThread)>,
    draining: Arc<AtomicBool>,
    /// Set by the reader that found the output file system full.
    full: Arc<AtomicBool>,
    /// The room set aside ([`RESERVE_BYTES`]), when it could be.
    reserve: Option<PathBuf>,
    /// The pieces of a rotating run, and the one each reader writes
    /// ([`Recorder::rotate_at`]).
    pieces: Arc<Pieces>,
    writing: Vec<Arc<AtomicU64>>,
    /// Write end of the readers' wake-up pipe: closing it (after setting
    /// `draining`) wakes every reader at once instead of at its next poll timeout.
    wake: Option<OwnedFd>,
    bytes: Arc<AtomicU64>,
    instance: Instance,
}

/// A reader could not be started or failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Opening a trace_pipe_raw or creating a raw file failed.
    #[error("cannot record CPU {cpu} ({}): {source}", .path.display())]
    Open {
        /// CPU number.
        cpu: u32,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A reader failed while recording.
    #[error("recording CPU {cpu} failed: {source}")]
    Read {
        /// CPU number.
        cpu: u32,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Reading stats failed.
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
}

impl Recorder {
    /// Whether a reader found the output file system full (every reader then
    /// stops: the run should stop too).
    pub(crate) fn output_full(&self) -> bool {
        self.full.load(Ordering::SeqCst)
    }

    /// Records in pieces: once `threshold` raw bytes (all CPUs) were written
    /// into a piece, the reader that wrote the last of them asks for the next,
    /// and every reader goes on in its raw file of it ([`raw_path`]) before
    /// its next sub-buffers: a piece gets at most one splice per CPU past the
    /// threshold. The files of a piece are complete once
    /// [`Recorder::switched`] says every reader is past it.
    pub(crate) fn rotate_at(&self, threshold: u64) {
        self.pieces.threshold.store(threshold, Ordering::SeqCst);
    }

    /// Whether every reader writes piece `piece` (or a later one): the raw
    /// files of the pieces before it are then complete.
    pub(crate) fn switched(&self, piece: u64) -> bool {
        self.writing
            .iter()
            .all(|w| w.load(Ordering::SeqCst) >= piece)
    }

    /// Raw bytes captured so far, all CPUs together.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Events recorded and lost so far, all CPUs, from per_cpu/cpuN/stats:
    /// (`entries` + `read events`, `overrun` + `dropped events`). A CPU whose
    /// stats cannot be read counts 0.
    pub(crate) fn live_counts(&self) -> (u64, u64) {
        self.threads
            .iter()
            .filter_map(|(cpu, _, _)| self.instance.read(&format!("per_cpu/cpu{cpu}/stats")).ok())
            .fold((0, 0), |(ev, lost), stats| {
                let (overrun, dropped) = lost_from_stats(&stats);
                let (entries, read) = (
                    cpu_stat(&stats, "entries:"),
                    cpu_stat(&stats, "read events:"),
                );
                (ev + entries + read, lost + overrun + dropped)
            })
    }

    /// Drains what is left (call after tracing was turned off), stops the readers,
    /// reads each CPU's stats and frees the room set aside. A reader that found
    /// the output file system full is no error: every capture is then marked
    /// [`CpuCapture::truncated`].
    pub fn finish(mut self) -> Result<Vec<CpuCapture>, RecordError> {
        self.draining.store(true, Ordering::SeqCst);
        self.wake = None;
        crate::fault::kill_at("drain");
        let mut out = Vec::new();
        let mut first_err = None;
        for (cpu, _, handle) in std::mem::take(&mut self.threads) {
            match handle.join() {
                Ok(Ok((bytes, cpu_time, path, piece))) => {
                    let stats = self.instance.read(&format!("per_cpu/cpu{cpu}/stats"))?;
                    out.push(CpuCapture {
                        cpu,
                        path,
                        bytes,
                        stats,
                        cpu_time,
                        truncated: false,
                        piece,
                    });
                }
                Ok(Err(source)) => {
                    first_err.get_or_insert(RecordError::Read { cpu, source });
                }
                Err(_) => {
                    first_err.get_or_insert(RecordError::Read {
                        cpu,
                        source: std::io::Error::other("reader thread panicked"),
                    });
                }
            }
        }
        if let Some(r) = self.reserve.take() {
            let _ = std::fs::remove_file(r);
        }
        let truncated = self.output_full();
        for c in &mut out {
            c.truncated = truncated;
        }
        if let Err(source) = crate::fault::fail_at("drain") {
            first_err.get_or_insert(RecordError::Read { cpu: 0, source });
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // Readers must not hold trace_pipe_raw open while the instance is removed.
        self.draining.store(true, Ordering::SeqCst);
        self.wake = None;
        for (_, _, handle) in std::mem::take(&mut self.threads) {
            let _ = handle.join();
        }
    }
}

/// The longest a reader sleeps before it moves the full sub-buffers there are
/// (fewer than `buffer_percent`): what `bytes()` (and so `[stop] max_size_mb`)
/// may lag by at a low rate. Idle wake-ups were most of a reader's CPU time at a
/// low rate: 20 a second per CPU with 50 ms (capture bench, kernel lab),
/// 2 with this.
const IDLE_WAIT: Duration = Duration::from_millis(500);

/// Bytes a pipe between trace_pipe_raw and the file may hold (pages moved per splice).
const PIPE_BYTES: usize = 1 << 20;

/// Room set aside in the raw folder while recording, freed when the readers
/// stop: what trace.dat's metadata (formats, printk formats, cmdlines; here
/// about 100 KB without kallsyms) and the reports need once the output file
/// system has filled up.
pub(crate) const RESERVE_BYTES: u64 = 1 << 20;

/// Sets aside [`RESERVE_BYTES`] as the file `reserve` of `raw_dir`
/// (`fallocate(2)`, so the blocks are really taken); `None` when the file
/// system has not that much room or cannot allocate (the run then records
/// without the reserve).
fn reserve(raw_dir: &Path) -> Option<PathBuf> {
    let path = raw_dir.join("reserve");
    let f = File::create(&path).ok()?;
    match rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, RESERVE_BYTES) {
        Ok(()) => Some(path),
        Err(_) => {
            let _ = std::fs::remove_file(&path);
            None
        }
    }
}

/// What a reader watches besides its CPU: whether draining was asked for,
/// whether a reader found the output file system full (all then stop), and the
/// wake-up pipe that says draining is asked for at once.
#[derive(Clone, Copy)]
struct Flags<'a> {
    draining: &'a AtomicBool,
    full: &'a AtomicBool,
    wake: &'a OwnedFd,
}

/// Whether a write failed for want of room: the file system is full
/// (`ENOSPC`), a quota is spent (`EDQUOT`) or the file is at its size limit
/// (`EFBIG`).
pub(crate) fn out_of_space(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG)
    )
}

/// A reader's raw file, and the piece it belongs to ([`Recorder::rotate`]).
struct Out<'a> {
    file: File,
    cpu: u32,
    raw_dir: PathBuf,
    /// The pieces of a rotating run.
    pieces: &'a Pieces,
    /// The piece this reader writes (what [`Recorder::switched`] reads).
    writing: &'a AtomicU64,
}

impl Out<'_> {
    /// Goes on in the raw file of the piece asked for, when a newer one was.
    fn follow(&mut self) -> std::io::Result<()> {
        let asked = self.pieces.asked.load(Ordering::SeqCst);
        if asked > self.writing.load(Ordering::SeqCst) {
            self.file = File::create(raw_path(&self.raw_dir, self.cpu, asked))?;
            self.writing.store(asked, Ordering::SeqCst);
        }
        Ok(())
    }

    /// The piece written now.
    fn piece(&self) -> u64 {
        self.writing.load(Ordering::SeqCst)
    }

    /// Counts `n` bytes written into the current piece.
    fn wrote(&self, n: u64) {
        self.pieces.wrote(self.piece(), n);
    }
}

fn read_cpu(
    fd: std::os::fd::OwnedFd,
    mut out: Out<'_>,
    subbuf: usize,
    flags: Flags<'_>,
    bytes: &AtomicU64,
) -> std::io::Result<(u64, Duration, PathBuf, u64)> {
    let read = splice_cpu(&fd, &mut out, subbuf, flags, bytes)
        .and_then(|spliced| Ok(spliced + read_pages(&fd, &mut out, subbuf, flags, bytes)?));
    let total = match read {
        Ok(total) => total,
        // Out of room: keep the whole sub-buffers that fitted, and stop every reader.
        Err(e) if out_of_space(&e) => {
            flags.full.store(true, Ordering::SeqCst);
            let len = out.file.metadata()?.len();
            let kept = len - len % subbuf as u64;
            out.file.set_len(kept)?;
            kept
        }
        Err(e) => return Err(e),
    };
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    let piece = out.piece();
    Ok((
        total,
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32),
        raw_path(&out.raw_dir, out.cpu, piece),
        piece,
    ))
}

/// Moves full sub-buffers trace_pipe_raw → pipe → `out` until draining is
/// asked for and none is ready, or until the kernel refuses to splice (then
/// [`read_pages`] does the work), or another reader found the output full.
/// Returns the bytes moved.
fn splice_cpu(
    fd: &std::os::fd::OwnedFd,
    out: &mut Out<'_>,
    subbuf: usize,
    flags: Flags<'_>,
    bytes: &AtomicU64,
) -> std::io::Result<u64> {
    let Flags {
        draining,
        full,
        wake,
    } = flags;
    use rustix::pipe::{PipeFlags, SpliceFlags, fcntl_setpipe_size, pipe_with, splice};
    let Ok((rd, wr)) = pipe_with(PipeFlags::CLOEXEC) else {
        return Ok(0);
    };
    let cap = fcntl_setpipe_size(&wr, PIPE_BYTES).unwrap_or(64 * 1024);
    let chunk = (cap / subbuf).max(1) * subbuf;
    let mut total = 0u64;
    loop {
        let drain = draining.load(Ordering::SeqCst);
        if full.load(Ordering::SeqCst) {
            return Ok(total);
        }
        out.follow()?;
        match splice(fd, None, &wr, None, chunk, SpliceFlags::NONBLOCK) {
            Ok(0) | Err(Errno::AGAIN) => {
                if drain {
                    return Ok(total);
                }
                wait(fd, wake);
            }
            Ok(n) => {
                let mut left = n;
                while left > 0 {
                    match splice(&rd, None, &out.file, None, left, SpliceFlags::MOVE) {
                        Ok(0) => return Err(std::io::Error::other("pipe emptied early")),
                        Ok(m) => left -= m,
                        Err(Errno::INTR) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                total += n as u64;
                bytes.fetch_add(n as u64, Ordering::Relaxed);
                out.wrote(n as u64);
            }
            Err(Errno::INTR) => {}
            Err(_) if total == 0 => return Ok(0),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Reads one sub-buffer at a time (zero-filled to its full size) into `out`
/// until draining is asked for and the CPU's buffer is empty, or another
/// reader found the output full.
fn read_pages(
    fd: &std::os::fd::OwnedFd,
    out: &mut Out<'_>,
    subbuf: usize,
    flags: Flags<'_>,
    bytes: &AtomicU64,
) -> std::io::Result<u64> {
    let Flags {
        draining,
        full,
        wake,
    } = flags;
    let mut page = vec![0u8; subbuf];
    let mut total = 0u64;
    loop {
        // Read the flag before reading, so that a page that arrives after the
        // drain request is still read before we stop at EAGAIN.
        let drain = draining.load(Ordering::SeqCst);
        if full.load(Ordering::SeqCst) {
            break;
        }
        out.follow()?;
        match rustix::io::read(fd, &mut page) {
            Ok(0) | Err(Errno::AGAIN) => {
                if drain {
                    break;
                }
                wait(fd, wake);
            }
            Ok(n) => {
                page[n..].fill(0);
                out.file.write_all(&page)?;
                total += subbuf as u64;
                bytes.fetch_add(subbuf as u64, Ordering::Relaxed);
                out.wrote(subbuf as u64);
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(total)
}

/// Waits until draining is asked for (`wake` hangs up when it is).
fn wait_for_drain(draining: &AtomicBool, wake: &OwnedFd) {
    while !draining.load(Ordering::SeqCst) {
        let mut fds = [PollFd::new(wake, PollFlags::IN)];
        let _ = poll(&mut fds, None);
    }
}

/// Waits until `fd` has data (for trace_pipe_raw: its CPU's buffer is filled
/// to the instance's `buffer_percent`, 50 by default), the recorder is told to
/// drain (`wake` hangs up), or [`IDLE_WAIT`] passes.
fn wait(fd: &impl AsFd, wake: &OwnedFd) {
    let mut fds = [
        PollFd::new(fd, PollFlags::IN),
        PollFd::new(wake, PollFlags::IN),
    ];
    let timeout = Timespec {
        tv_sec: IDLE_WAIT.as_secs() as i64,
        tv_nsec: IDLE_WAIT.subsec_nanos() as i64,
    };
    let _ = poll(&mut fds, Some(&timeout));
}
