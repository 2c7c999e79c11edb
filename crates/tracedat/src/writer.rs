//! Writing v6 trace.dat files.

use std::io::{Read, Write};
use std::path::PathBuf;

use crate::reader::{selected_clock, subbuffer_size};
use crate::{Error, MAGIC};

/// Everything besides ring-buffer pages that goes into a trace.dat.
///
/// All texts are stored verbatim; sizes are taken from what is given here,
/// so read tracefs/procfs files fully before filling this in.
#[derive(Debug, Clone, Default)]
pub struct CaptureMeta {
    /// The recorded instance's `events/header_page` text (required: it fixes
    /// the page size and layout).
    pub header_page: Vec<u8>,
    /// `events/header_event` text.
    pub header_event: Vec<u8>,
    /// Each `events/ftrace/*/format` text.
    pub ftrace_formats: Vec<Vec<u8>>,
    /// `(system name, format texts)` for systems other than `ftrace`.
    pub event_formats: Vec<(String, Vec<Vec<u8>>)>,
    /// `/proc/kallsyms` (may be empty).
    pub kallsyms: Vec<u8>,
    /// `printk_formats` (may be empty).
    pub printk_formats: Vec<u8>,
    /// `saved_cmdlines` (may be empty).
    pub cmdlines: Vec<u8>,
    /// Number of `per_cpu/cpuN` directories (max N + 1).
    pub cpu_count: u32,
    /// The whole `trace_clock` file, e.g. `"[local] global counter ...\n"`.
    pub trace_clock: String,
    /// `"sysname nodename release machine"`.
    pub uname: String,
    /// Writer name and version, e.g. `"trace-recipe 0.1.0"`.
    pub version: String,
    /// Per CPU (index = cpu), the `per_cpu/cpuN/stats` text.
    pub cpu_stats: Vec<String>,
}

/// The line a CPUSTAT option (after the kernel's `per_cpu/cpuN/stats` text)
/// carries when the recording of that CPU was cut short because its output
/// file system filled up: what is stored is a prefix of what the kernel
/// recorded (whole sub-buffers), readable as it is. `trace-cmd report --stat`
/// prints it with the stats; [`crate::TraceFile::truncated`] finds it.
pub const TRUNCATED_STAT: &str = "truncated: the output file system was full\n";

/// One CPU's raw data: a file holding whole sub-buffers exactly as read from
/// `per_cpu/cpuN/trace_pipe_raw`.
#[derive(Debug, Clone)]
pub struct CpuData {
    /// CPU number (< `CaptureMeta::cpu_count`).
    pub cpu: u32,
    /// File with the raw pages; its size must be a multiple of the page size.
    pub path: PathBuf,
}

struct Out<W: Write> {
    w: W,
    pos: u64,
}

impl<W: Write> Out<W> {
    fn put(&mut self, b: &[u8]) -> Result<(), Error> {
        self.w.write_all(b).map_err(Error::Write)?;
        self.pos += b.len() as u64;
        Ok(())
    }
    fn u16(&mut self, v: u16) -> Result<(), Error> {
        self.put(&v.to_ne_bytes())
    }
    fn u32(&mut self, v: u32) -> Result<(), Error> {
        self.put(&v.to_ne_bytes())
    }
    fn u64(&mut self, v: u64) -> Result<(), Error> {
        self.put(&v.to_ne_bytes())
    }
    fn sized32(&mut self, what: &str, b: &[u8]) -> Result<(), Error> {
        let n = u32::try_from(b.len())
            .map_err(|_| Error::Capture(format!("{what} is larger than 4 GiB")))?;
        self.u32(n)?;
        self.put(b)
    }
    fn sized64(&mut self, b: &[u8]) -> Result<(), Error> {
        self.u64(b.len() as u64)?;
        self.put(b)
    }
    fn option(&mut self, id: u16, payload: &[u8]) -> Result<(), Error> {
        let n = u32::try_from(payload.len())
            .map_err(|_| Error::Capture(format!("option {id} is larger than 4 GiB")))?;
        self.u16(id)?;
        self.u32(n)?;
        self.put(payload)
    }
}

fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// Write a v6, uncompressed trace.dat to `out`, storing the capture as the
/// top buffer.
///
/// The file is streamed: all offsets are computed first from `meta` and the
/// sizes of the CPU files, then everything is written strictly in order and
/// each CPU file is copied through a small buffer. Byte order is the host's
/// (the traced kernel's). Page size is the sub-buffer size from
/// `meta.header_page` (offset + size of its `data` field).
///
/// Layout (see the trace.dat spec, sections 3 and 4): header, header_page,
/// header_event, ftrace and event formats, kallsyms (u32 size), printk
/// formats (u32 size), cmdlines (u64 size), CPU count, options TRACECLOCK,
/// UNAME, VERSION, one CPUSTAT per CPU (`"CPU: N\n"` + stats), DONE, then
/// `flyrecord`, the CPU table, the `[clock]` trailer, zero padding and the
/// page-aligned per-CPU data. CPUs without data get (aligned offset, 0).
///
/// Errors: [`Error::Capture`] for an unusable header_page, a CPU number out
/// of range or listed twice, a CPU file whose size is not a multiple of the
/// page size or that changes size while being copied; [`Error::Io`] for CPU
/// files that cannot be read; [`Error::Write`] for output errors.
pub fn write_v6(out: impl Write, meta: &CaptureMeta, cpus: &[CpuData]) -> Result<(), Error> {
    write_v6_then(out, meta, cpus, |_, _, _| Ok(()))
}

/// [`write_v6`], calling `copied(path, offset, len)` after each piece of a CPU
/// file (`len` bytes at `offset`, at most 64 KiB) has been written to `out`
/// (flushed out of this function's buffer): a caller short of disk space
/// punches that piece out of the CPU file there, so that the copy needs
/// little more room than the original. Errors: those of [`write_v6`], and
/// `copied`'s as [`Error::Io`] naming the CPU file.
pub fn write_v6_then(
    out: impl Write,
    meta: &CaptureMeta,
    cpus: &[CpuData],
    mut copied: impl FnMut(&std::path::Path, u64, u64) -> std::io::Result<()>,
) -> Result<(), Error> {
    let page_size = subbuffer_size(&meta.header_page)
        .map_err(|e| Error::Capture(format!("header_page: {e}")))?;
    let layout = crate::reader::parse_header_page(&meta.header_page, page_size, false)
        .map_err(|e| Error::Capture(format!("header_page: {e}")))?;
    let page_size_u32 = u32::try_from(page_size)
        .map_err(|_| Error::Capture(format!("page size {page_size} too large")))?;
    if page_size == 0 {
        return Err(Error::Capture("header_page gives page size 0".into()));
    }
    let clock = selected_clock(&meta.trace_clock).ok_or_else(|| {
        Error::Capture(format!("trace_clock {:?} names no clock", meta.trace_clock))
    })?;

    // Sizes of the CPU files, indexed by CPU.
    let n = meta.cpu_count as usize;
    let mut sizes: Vec<Option<(u64, &PathBuf)>> = vec![None; n];
    for c in cpus {
        let slot = sizes.get_mut(c.cpu as usize).ok_or_else(|| {
            Error::Capture(format!(
                "cpu {} is out of range (cpu_count {})",
                c.cpu, meta.cpu_count
            ))
        })?;
        if slot.is_some() {
            return Err(Error::Capture(format!("cpu {} is listed twice", c.cpu)));
        }
        let len = std::fs::metadata(&c.path)
            .map_err(|source| Error::Io {
                path: c.path.clone(),
                source,
            })?
            .len();
        if len % page_size as u64 != 0 {
            return Err(Error::Capture(format!(
                "{}: size {len} is not a multiple of the page size {page_size}",
                c.path.display()
            )));
        }
        *slot = Some((len, &c.path));
    }

    let mut o = Out {
        w: std::io::BufWriter::with_capacity(1 << 16, out),
        pos: 0,
    };
    o.put(&MAGIC)?;
    o.put(b"tracing")?;
    o.put(b"6\0")?;
    o.put(&[
        u8::from(cfg!(target_endian = "big")),
        layout.commit_size as u8,
    ])?;
    o.u32(page_size_u32)?;
    o.put(b"header_page\0")?;
    o.sized64(&meta.header_page)?;
    o.put(b"header_event\0")?;
    o.sized64(&meta.header_event)?;
    o.u32(
        u32::try_from(meta.ftrace_formats.len())
            .map_err(|_| Error::Capture("too many ftrace formats".into()))?,
    )?;
    for f in &meta.ftrace_formats {
        o.sized64(f)?;
    }
    o.u32(
        u32::try_from(meta.event_formats.len())
            .map_err(|_| Error::Capture("too many systems".into()))?,
    )?;
    for (sys, fmts) in &meta.event_formats {
        if sys.as_bytes().contains(&0) {
            return Err(Error::Capture(format!("system name {sys:?} contains NUL")));
        }
        o.put(&cstr(sys))?;
        o.u32(u32::try_from(fmts.len()).map_err(|_| Error::Capture("too many formats".into()))?)?;
        for f in fmts {
            o.sized64(f)?;
        }
    }
    o.sized32("kallsyms", &meta.kallsyms)?;
    o.sized32("printk_formats", &meta.printk_formats)?;
    o.sized64(&meta.cmdlines)?;
    o.u32(meta.cpu_count)?;

    o.put(b"options  \0")?;
    o.option(4, &cstr(&meta.trace_clock))?;
    o.option(5, &cstr(&meta.uname))?;
    o.option(9, &cstr(&meta.version))?;
    for cpu in 0..n {
        let stats = meta.cpu_stats.get(cpu).map(|s| s.as_str()).unwrap_or("");
        o.option(2, &cstr(&format!("CPU: {cpu}\n{stats}")))?;
    }
    o.u16(0)?;

    o.put(b"flyrecord\0")?;
    let trailer = format!("[{clock}]");
    let table_end = o.pos + 16 * n as u64 + 8 + trailer.len() as u64;
    let ps = page_size as u64;
    let data_start = table_end.div_ceil(ps) * ps;
    let mut off = data_start;
    for s in &sizes {
        let len = s.map(|(l, _)| l).unwrap_or(0);
        o.u64(off)?;
        o.u64(len)?;
        off += len;
    }
    o.u64(trailer.len() as u64)?;
    o.put(trailer.as_bytes())?;
    debug_assert_eq!(o.pos, table_end);
    let pad = vec![0u8; (data_start - o.pos) as usize];
    o.put(&pad)?;

    let mut buf = vec![0u8; 1 << 16];
    for (len, path) in sizes.iter().flatten() {
        let io = |source| Error::Io {
            path: (*path).clone(),
            source,
        };
        let f = std::fs::File::open(path).map_err(io)?;
        let mut r = f.take(*len);
        let mut done = 0u64;
        loop {
            let k = r.read(&mut buf).map_err(io)?;
            if k == 0 {
                break;
            }
            o.put(&buf[..k])?;
            o.w.flush().map_err(Error::Write)?;
            copied(path, done, k as u64).map_err(io)?;
            done += k as u64;
        }
        if done != *len {
            return Err(Error::Capture(format!(
                "{}: shrank from {len} to {done} bytes while writing",
                path.display()
            )));
        }
    }
    o.w.flush().map_err(Error::Write)?;
    Ok(())
}

/// Read a tracefs or procfs file completely, with large reads.
///
/// Use this (not `std::fs::read`) for the texts that go into
/// [`CaptureMeta`]: these files report size 0, so `std::fs::read` starts
/// with a 32-byte probe read, and `events/header_page` (at least on Linux
/// 6.18) returns end-of-file after the first read whatever its size; a small
/// first read therefore truncates it (and [`write_v6`] then rejects it).
///
/// Each read asks for 1 MiB (`READ_CHUNK`) into one buffer per thread,
/// allocated and zeroed once: `check` and `run` read a file per event format,
/// thousands of them, and a fresh zeroed megabyte for each was a quarter of
/// `trace-recipe facts`' CPU time (far more under emulation, where every
/// page of it faults).
pub fn read_tracefs_file(path: &std::path::Path) -> Result<Vec<u8>, Error> {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        if buf.len() < READ_CHUNK {
            buf.resize(READ_CHUNK, 0);
        }
        let mut out = Vec::new();
        loop {
            match f.read(&mut buf[..]) {
                Ok(0) => return Ok(out),
                Ok(k) => out.extend_from_slice(&buf[..k]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io(e)),
            }
        }
    })
}

/// How much [`read_tracefs_file`] asks for in each read (bytes).
const READ_CHUNK: usize = 1 << 20;
