//! Opening a trace.dat file (v6 and v7) and parsing its metadata.
//!
//! Why one file of ~1,200 lines: it is the one place the on-disk layout
//! (../shared/specs/trace-dat.md) is decoded, in the file's own order: file
//! header, metadata sections (v6) or the section/option walk (v7), then the CPU
//! regions that both versions share (`check_cpu_regions`). Its private helpers
//! check every offset and length against the file, which keeps hostile files
//! from reaching the rest of the crate.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use crate::bytes::{Cursor, parse_c_integer, text};
use crate::format::{EventFormat, parse_field_line};
use crate::{Error, MAGIC};

/// Largest page (sub-buffer) size accepted when reading.
const MAX_PAGE_SIZE: u64 = 1 << 26;
/// Largest decompressed size accepted for one metadata section.
const MAX_SECTION_SIZE: u64 = 1 << 28;
/// Largest decompressed size accepted for one ring-buffer data chunk.
pub(crate) const MAX_CHUNK_SIZE: u64 = 1 << 26;
/// Limit on chained v7 option sections.
const MAX_OPTION_SECTIONS: usize = 4096;

enum Backing {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Map(m) => m,
            Backing::Owned(v) => v,
        }
    }
}

/// Compression used by a v7 file: the name its header gives after the
/// version (trace-cmd's `lib/trace-cmd/trace-compress-*.c` plugins).
/// Either kind compresses blocks that start with a u32 compressed size and a
/// u32 uncompressed size in the file's byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed (all v6 files, v7 `none`).
    None,
    /// `zstd`: one zstd frame per block.
    Zstd,
    /// `zlib`: one zlib-wrapped deflate stream per block (RFC 1950: 2-byte
    /// header, deflate data, Adler-32), what zlib's `compress2` writes.
    Zlib,
}

/// Layout of a ring-buffer page, from the `header_page` text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageLayout {
    pub ts_offset: usize,
    pub commit_offset: usize,
    pub commit_size: usize,
    pub data_offset: usize,
    pub page_size: usize,
    pub big: bool,
}

/// Where one CPU's data of one buffer lives in the file.
#[derive(Debug, Clone)]
pub(crate) struct CpuRegion {
    pub cpu: u32,
    pub offset: u64,
    pub size: u64,
    pub compressed: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct BufferInfo {
    pub name: String,
    pub clock: Option<String>,
    pub page_size: usize,
    pub cpus: Vec<CpuRegion>,
}

/// An open trace.dat file (v6 or v7; uncompressed, zstd or zlib).
///
/// The file is memory-mapped; metadata (formats, kallsyms, saved cmdlines,
/// options) is parsed at [`TraceFile::open`], ring-buffer data is decoded
/// lazily by [`TraceFile::records`].
pub struct TraceFile {
    backing: Backing,
    version: u32,
    pub(crate) big_endian: bool,
    pub(crate) long_size: u8,
    pub(crate) layout: PageLayout,
    compression: Compression,
    formats: Vec<EventFormat>,
    /// Index into `formats` by id (`u32::MAX`: none); as long as the highest id + 1.
    format_index: Vec<u32>,
    pub(crate) unknown_format: EventFormat,
    /// The kallsyms section's text, parsed into `kallsyms` on the first
    /// symbol lookup (most reports look none up).
    kallsyms_text: Vec<u8>,
    kallsyms: OnceLock<Kallsyms>,
    printk: HashMap<u64, String>,
    /// The saved cmdlines' `(pid, comm)` lines in file order (trace-cmd's
    /// table of comms is built in that order; see [`crate::comms`]).
    cmdlines: Vec<(i32, String)>,
    /// Index in `cmdlines` by pid, the last line of a pid named twice;
    /// FxHash: looked up per record by the listing and the comm learner.
    cmdline_at: FxHashMap<i32, usize>,
    cpu_count: u32,
    clock: String,
    uname: Option<String>,
    writer_version: Option<String>,
    cpu_stats: Vec<String>,
    pub(crate) buffers: Vec<BufferInfo>,
    pub(crate) ts_offset: i64,
    pub(crate) tsc2nsec: Option<Tsc2Nsec>,
}

/// The TSC2NSEC option (id 14) of a `trace-cmd record --tsc2nsec` file: the
/// ring buffer counted TSC cycles, and readers turn each timestamp into
/// nanoseconds as `(ts * mult) >> shift`, in trace-cmd 3.1.6's 64-bit
/// arithmetic (libtracecmd's `timestamp_calc`): the low and high 32-bit halves
/// of the count multiplied apart, `mult` widened from a signed 32-bit value,
/// products wrapping, shift counts taken modulo 64 as x86-64 does. The
/// option's third value, an offset, is not applied by `trace-cmd report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tsc2Nsec {
    /// Multiplier (the kernel's `time_mult` of the perf page).
    pub mult: u32,
    /// Right shift (the kernel's `time_shift`).
    pub shift: u32,
}

impl Tsc2Nsec {
    /// `ts` (TSC cycles) in nanoseconds, as trace-cmd 3.1.6 converts it.
    #[inline]
    pub fn convert(self, ts: u64) -> u64 {
        // trace-cmd keeps `mult` in an `int`: a value of 2^31 or more
        // widens negative.
        let mult = self.mult as i32 as i64 as u64;
        let low = ts & 0xffff_ffff;
        let high = ts >> 32;
        let mut out = low.wrapping_mul(mult).wrapping_shr(self.shift);
        if high != 0 {
            out = out.wrapping_add(
                high.wrapping_mul(mult)
                    .wrapping_shl(32u32.wrapping_sub(self.shift)),
            );
        }
        out
    }
}

/// Options collected while reading option lists.
#[derive(Default)]
struct Opts {
    ts_offset: i64,
    cpu_stats: Vec<String>,
    trace_clock: Option<String>,
    uname: Option<String>,
    version: Option<String>,
    cpu_count: Option<u32>,
    tsc2nsec: Option<Tsc2Nsec>,
    /// v6: (flyrecord offset, name).
    v6_buffers: Vec<(u64, String)>,
    /// v7 buffers: top first in file order, then named.
    v7_buffers: Vec<(u64, BufferInfo)>,
    sections: HashMap<u16, u64>,
}

#[derive(Default)]
struct Meta {
    header_page: Vec<u8>,
    formats: Vec<EventFormat>,
    kallsyms: Vec<u8>,
    printk: Vec<u8>,
    cmdlines: Vec<u8>,
}

/// The bracketed clock name from a `trace_clock` text, e.g. `local` from
/// `"[local] global counter"`; a text without brackets is taken whole
/// (trimmed).
pub fn selected_clock(trace_clock: &str) -> Option<String> {
    let t = trace_clock.trim_matches(|c: char| c == '\0' || c.is_whitespace());
    if let Some(start) = t.find('[') {
        let rest = &t[start + 1..];
        let end = rest.find(']')?;
        let name = rest[..end].trim();
        return (!name.is_empty()).then(|| name.to_string());
    }
    let word = t.split_whitespace().next()?;
    Some(word.to_string())
}

/// Parse `header_page` text into the page layout.
pub(crate) fn parse_header_page(
    text: &[u8],
    page_size: usize,
    big: bool,
) -> Result<PageLayout, Error> {
    let s = String::from_utf8_lossy(text);
    let mut ts = None;
    let mut commit = None;
    let mut data = None;
    for (i, line) in s.lines().enumerate() {
        let line = line.trim();
        if !line.starts_with("field:") {
            continue;
        }
        let f = parse_field_line(line).map_err(|e| Error::Format {
            system: "header_page".into(),
            name: "header_page".into(),
            line: i + 1,
            detail: e,
        })?;
        match f.name.as_str() {
            "timestamp" => ts = Some(f),
            "commit" => commit = Some(f),
            "data" => data = Some(f),
            _ => {}
        }
    }
    let missing = |what: &str| Error::Format {
        system: "header_page".into(),
        name: "header_page".into(),
        line: 0,
        detail: format!("no `{what}` field"),
    };
    let ts = ts.ok_or_else(|| missing("timestamp"))?;
    let commit = commit.ok_or_else(|| missing("commit"))?;
    let data = data.ok_or_else(|| missing("data"))?;
    let bad = |d: String| Error::Format {
        system: "header_page".into(),
        name: "header_page".into(),
        line: 0,
        detail: d,
    };
    if ts.size != 8 {
        return Err(bad(format!("timestamp size {} (must be 8)", ts.size)));
    }
    if commit.size != 4 && commit.size != 8 {
        return Err(bad(format!("commit size {} (must be 4 or 8)", commit.size)));
    }
    let page_size = if page_size == 0 {
        data.offset.saturating_add(data.size)
    } else {
        page_size
    };
    if page_size == 0 || page_size as u64 > MAX_PAGE_SIZE {
        return Err(bad(format!("page size {page_size} out of range")));
    }
    let commit_end = commit.offset.saturating_add(commit.size);
    if ts.offset.saturating_add(8) > page_size
        || commit_end > page_size
        || data.offset > page_size
        || data.offset < commit_end
    {
        return Err(bad(format!(
            "fields do not fit a {page_size}-byte page (data offset {})",
            data.offset
        )));
    }
    Ok(PageLayout {
        ts_offset: ts.offset,
        commit_offset: commit.offset,
        commit_size: commit.size,
        data_offset: data.offset,
        page_size,
        big,
    })
}

/// Sub-buffer size described by a `header_page` text: offset + size of its
/// `data` field.
pub fn subbuffer_size(header_page: &[u8]) -> Result<usize, Error> {
    Ok(parse_header_page(header_page, 0, false)?.page_size)
}

/// The `expect` bytes a block's decoder yields: at most `expect + 1` are read
/// (so a stream longer than its header says is caught without decoding it
/// all), and the count must equal the header's. `name` prefixes the decoder's
/// errors.
fn inflate_block(mut dec: impl Read, expect: u64, name: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(expect.min(1 << 24) as usize);
    (&mut dec)
        .take(expect + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("{name}: {e}"))?;
    if out.len() as u64 != expect {
        return Err(format!(
            "decompressed {} bytes, header says {expect}",
            out.len()
        ));
    }
    Ok(out)
}

/// Decompress one `u32 compressed size, u32 uncompressed size, data` block.
/// The uncompressed size is checked against `limit` before anything is
/// allocated; errors name `what` and the block's file offset.
pub(crate) fn decompress_block(
    comp: Compression,
    c: &mut Cursor<'_>,
    limit: u64,
    what: &str,
) -> Result<Vec<u8>, Error> {
    let off = c.offset();
    let csize = c.u32(&format!("{what} compressed size"))?;
    let usize_ = c.u32(&format!("{what} uncompressed size"))?;
    let src = c.take(csize as u64, &format!("{what} compressed data"))?;
    let expect = usize_ as u64;
    let corrupt = |e: String| Error::corrupt(what.to_string(), off, e);
    if comp != Compression::None && expect > limit {
        return Err(corrupt(format!(
            "uncompressed size {expect} exceeds limit {limit}"
        )));
    }
    match comp {
        Compression::Zstd => ruzstd::decoding::StreamingDecoder::new(src)
            .map_err(|e| format!("zstd: {e}"))
            .and_then(|dec| inflate_block(dec, expect, "zstd"))
            .map_err(corrupt),
        Compression::Zlib => {
            inflate_block(flate2::read::ZlibDecoder::new(src), expect, "zlib").map_err(corrupt)
        }
        Compression::None => Err(Error::corrupt(
            what.to_string(),
            off,
            "compressed flag set but the file declares no compression",
        )),
    }
}

/// `open(2)` flags of Linux (include/uapi/asm-generic/fcntl.h): do not block on
/// a FIFO, do not make a terminal the controlling one.
const O_NONBLOCK: i32 = 0o4000;
const O_NOCTTY: i32 = 0o400;

/// `path` as text with control characters escaped (it may come from elsewhere).
fn escaped(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

impl TraceFile {
    /// Open and memory-map a trace.dat file, parsing all metadata. Only a
    /// regular file is read (a FIFO or device is refused without blocking).
    ///
    /// Accepts v6 and v7 files, uncompressed or compressed with zstd or zlib
    /// (another compression name is reported as [`Error::Unsupported`]).
    /// Errors name the file offset and the item that is wrong.
    pub fn open(path: &Path) -> Result<TraceFile, Error> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        // Judged before opening (a FIFO would block, a device never ends) and
        // again on the open file (it may have been swapped meanwhile): only a
        // regular file is read, opened without blocking.
        let judge = |meta: &std::fs::Metadata| -> Result<(), Error> {
            if meta.is_file() {
                return Ok(());
            }
            let what = if meta.is_dir() {
                "a directory; give the trace.dat file in it"
            } else {
                "not a regular file (a FIFO, device or socket is never read)"
            };
            Err(Error::NotTraceDat {
                detail: format!("{} is {what}", escaped(path)),
            })
        };
        judge(&std::fs::metadata(path).map_err(io)?)?;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(O_NONBLOCK | O_NOCTTY)
            .open(path)
            .map_err(io)?;
        let meta = f.metadata().map_err(io)?;
        judge(&meta)?;
        if meta.len() == 0 {
            return Err(Error::NotTraceDat {
                detail: format!("{} is empty", path.display()),
            });
        }
        // SAFETY: the mapping is read-only; if another process truncates the
        // file while it is mapped, accesses may fault (SIGBUS) — the usual
        // caveat of memory-mapped input that the API documents.
        let map = unsafe { memmap2::Mmap::map(&f) }.map_err(io)?;
        Self::parse(Backing::Map(map))
    }

    /// Parse a trace.dat held in memory (same rules as [`TraceFile::open`]).
    pub fn from_bytes(data: Vec<u8>) -> Result<TraceFile, Error> {
        Self::parse(Backing::Owned(data))
    }

    fn parse(backing: Backing) -> Result<TraceFile, Error> {
        let data = backing.bytes();
        let (
            FileHeader {
                version,
                big,
                long_size,
                page_size,
            },
            mut c,
        ) = read_file_header(data)?;
        let mut opts = Opts::default();
        let (compression, meta) = read_metadata(data, &mut c, version, big, &mut opts)?;
        let layout = page_layout(&meta.header_page, long_size, page_size, big)?;
        let (buffers, cpu_count) = if version >= 7 {
            read_v7_buffers(data, big, compression, page_size, &mut opts)?
        } else {
            read_v6_buffers(data, &mut c, big, page_size, &mut opts)?
        };
        check_cpu_regions(data, &buffers, &layout)?;

        let clock = opts
            .trace_clock
            .as_deref()
            .and_then(selected_clock)
            .or_else(|| buffers.first().and_then(|b| b.clock.clone()))
            .unwrap_or_else(|| "local".to_string());

        let top = meta.formats.iter().map(|f| f.id as usize + 1).max();
        let mut format_index = vec![u32::MAX; top.unwrap_or(0)];
        for (i, f) in meta.formats.iter().enumerate().rev() {
            format_index[f.id as usize] = i as u32;
        }

        let printk = parse_printk(&meta.printk);
        let cmdlines = parse_cmdlines(&meta.cmdlines);
        let cmdline_at = cmdlines
            .iter()
            .enumerate()
            .map(|(i, (pid, _))| (*pid, i))
            .collect();

        Ok(TraceFile {
            version,
            big_endian: big,
            long_size,
            layout,
            compression,
            formats: meta.formats,
            format_index,
            unknown_format: EventFormat::unknown(),
            kallsyms_text: meta.kallsyms,
            kallsyms: OnceLock::new(),
            printk,
            cmdlines,
            cmdline_at,
            cpu_count,
            clock,
            uname: opts.uname,
            writer_version: opts.version,
            cpu_stats: opts.cpu_stats,
            buffers,
            ts_offset: opts.ts_offset,
            tsc2nsec: opts.tsc2nsec,
            backing,
        })
    }

    pub(crate) fn data(&self) -> &[u8] {
        self.backing.bytes()
    }

    /// Drops the mapped bytes `start..end` from this process's resident set,
    /// so reading a file from start to end keeps RSS flat: the kernel keeps
    /// them in its page cache, and touching them again maps them back with
    /// the same contents. Does nothing for in-memory files; errors are
    /// ignored (the advice is only an optimisation).
    pub(crate) fn release(&self, start: usize, end: usize) {
        if let Backing::Map(m) = &self.backing
            && end > start
            && end <= m.len()
        {
            // SAFETY: the mapping is a read-only, never-written file mapping.
            // MADV_DONTNEED only unmaps its pages from this process; any later
            // access (through slices still borrowed from it) faults them back
            // in from the file, unchanged, so no reference sees different bytes.
            let _ = unsafe {
                m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
            };
        }
    }

    /// File format version: 6 or 7.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Whether the file (and its ring-buffer data) is big-endian.
    pub fn big_endian(&self) -> bool {
        self.big_endian
    }

    /// The `long size` header byte (the writer's userspace long size).
    pub fn long_size(&self) -> u8 {
        self.long_size
    }

    /// Page (sub-buffer) size in bytes from the file header.
    pub fn page_size(&self) -> usize {
        self.layout.page_size
    }

    /// Compression of the file's sections and data.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Number of CPUs: the header's CPU count (v6), replaced by a CPUCOUNT
    /// option when present; in v7 without CPUCOUNT, highest listed CPU + 1.
    pub fn cpu_count(&self) -> u32 {
        self.cpu_count
    }

    /// Trace clock name, e.g. `local`: the bracketed word of the TRACECLOCK
    /// option, else the top buffer's clock (v6 clock trailer or v7 BUFFER
    /// option), else `local`.
    pub fn clock(&self) -> &str {
        &self.clock
    }

    /// The TSC2NSEC conversion every timestamp goes through, when the file
    /// has that option (with a nonzero multiplier).
    pub fn tsc2nsec(&self) -> Option<Tsc2Nsec> {
        self.tsc2nsec
    }

    /// Whether timestamps count nanoseconds (printed `secs.usecs`): the
    /// clock is one of [`crate::clock_is_nanoseconds`]'s, or a TSC2NSEC
    /// option converts them (trace-cmd 3.1.6 then shows microseconds
    /// whatever the clock's name).
    pub fn ns_timestamps(&self) -> bool {
        self.tsc2nsec.is_some() || crate::clock_is_nanoseconds(&self.clock)
    }

    /// The UNAME option (`sysname nodename release machine`), if present.
    pub fn uname(&self) -> Option<&str> {
        self.uname.as_deref()
    }

    /// The VERSION option (the writing tool's version), if present.
    pub fn writer_version(&self) -> Option<&str> {
        self.writer_version.as_deref()
    }

    /// The CPUSTAT option texts in file order, without the trailing NUL.
    /// Each normally starts with `CPU: N` followed by that CPU's
    /// `per_cpu/cpuN/stats` text; trace-cmd also stores `\nBuffer: NAME\n\n`
    /// entries before the CPUs of a named buffer.
    pub fn cpu_stats(&self) -> &[String] {
        &self.cpu_stats
    }

    /// Whether the recording was cut short because its output file system
    /// filled up: a CPUSTAT option carries [`crate::TRUNCATED_STAT`]. The
    /// pages stored are still whole and readable.
    pub fn truncated(&self) -> bool {
        self.cpu_stats
            .iter()
            .any(|s| s.lines().any(|l| l == crate::TRUNCATED_STAT.trim_end()))
    }

    /// All event formats stored in the file (ftrace ones first).
    pub fn formats(&self) -> impl Iterator<Item = &EventFormat> {
        self.formats.iter()
    }

    /// The format with this id, if stored.
    pub fn format_by_id(&self, id: u16) -> Option<&EventFormat> {
        self.format_index
            .get(id as usize)
            .and_then(|&i| self.formats.get(i as usize))
    }

    /// Whether `format` is the placeholder an [`Event`](crate::Event) of this
    /// file carries when the file has no format for its `common_type` (or
    /// the record is too short to hold one); any other format of an event
    /// is [`TraceFile::format_by_id`] of its `common_type`.
    #[inline]
    pub fn is_unknown(&self, format: &EventFormat) -> bool {
        std::ptr::eq(format, &self.unknown_format)
    }

    /// The format `system`/`name`, if stored.
    pub fn format_by_name(&self, system: &str, name: &str) -> Option<&EventFormat> {
        self.formats
            .iter()
            .find(|f| f.system == system && f.name == name)
    }

    /// Buffer names in merge order: `""` for the top buffer (always first
    /// when present), then named (`-B` / instance) buffers in file order.
    pub fn buffers(&self) -> Vec<String> {
        self.buffers.iter().map(|b| b.name.clone()).collect()
    }

    /// Timestamp offset in nanoseconds applied to every record (DATE option,
    /// converted from microseconds, plus OFFSET options).
    pub fn ts_offset(&self) -> i64 {
        self.ts_offset
    }

    /// The command name recorded for `pid` in the saved cmdlines.
    pub fn comm(&self, pid: i32) -> Option<&str> {
        let at = *self.cmdline_at.get(&pid)?;
        self.cmdlines.get(at).map(|(_, comm)| comm.as_str())
    }

    /// The saved cmdlines' `(pid, comm)` lines in file order, a pid named
    /// twice as often as it is (lines that are not `PID COMM` are left out).
    pub fn saved_cmdlines(&self) -> &[(i32, String)] {
        &self.cmdlines
    }

    /// Look up a kernel address in kallsyms as libtraceevent does, so that
    /// aliases (several symbols at one address) resolve to the same name
    /// trace-cmd prints: symbols sorted stably by address, then a binary
    /// search (glibc's `bsearch` midpoints) accepting a symbol whose address
    /// equals `addr`, or that lies below `addr` with the next symbol above
    /// it. Addresses beyond the last symbol are not resolved. Returns the
    /// name and the offset of `addr` from the symbol.
    pub fn symbol(&self, addr: u64) -> Option<(&str, u64)> {
        let k = self
            .kallsyms
            .get_or_init(|| parse_kallsyms(&self.kallsyms_text));
        let addr_at = |i: usize| k.symbols.get(i).map_or(u64::MAX, |s| s.0);
        let i = glibc_bsearch(k.symbols.len(), |mid| {
            let a = addr_at(mid);
            let inside = addr > a && mid + 1 < k.symbols.len() && addr < addr_at(mid + 1);
            match addr.cmp(&a) {
                _ if inside => Ordering::Equal,
                o => o,
            }
        })?;
        let (a, name) = k.get(i)?;
        Some((name, addr - a))
    }

    /// The address of the kernel symbol named `name` (the lowest where
    /// several share it), `None` when kallsyms has no such name.
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.kallsyms
            .get_or_init(|| parse_kallsyms(&self.kallsyms_text))
            .address_of(name)
    }

    /// The string stored in printk_formats for a kernel string address.
    pub fn printk_string(&self, addr: u64) -> Option<&str> {
        self.printk.get(&addr).map(|s| s.as_str())
    }
}
/// The index glibc's `bsearch` stops at in a sorted table of `len`
/// entries, where `cmp(i)` compares the key with entry `i`: midpoints
/// `(lo + hi) / 2`, the first entry met that compares equal. libtraceevent
/// looks symbols and comms up this way, so where several entries compare
/// equal, this picks the one trace-cmd prints.
pub(crate) fn glibc_bsearch(len: usize, mut cmp: impl FnMut(usize) -> Ordering) -> Option<usize> {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = (lo + hi) / 2;
        match cmp(mid) {
            Ordering::Less => hi = mid,
            Ordering::Greater => lo = mid + 1,
            Ordering::Equal => return Some(mid),
        }
    }
    None
}

/// The fixed start of every trace.dat, as [`read_file_header`] reads it.
struct FileHeader {
    version: u32,
    big: bool,
    long_size: u8,
    page_size: usize,
}

/// The file header: magic, `tracing`, version (6 or 7), endianness, long
/// size, page size. Returns it with the cursor after it.
fn read_file_header(data: &[u8]) -> Result<(FileHeader, Cursor<'_>), Error> {
    let mut want = MAGIC.to_vec();
    want.extend_from_slice(b"tracing");
    let n = data.len().min(want.len());
    if data.is_empty() || data[..n] != want[..n] {
        return Err(Error::NotTraceDat {
            detail: if data.is_empty() {
                "the input is empty".into()
            } else {
                "it does not start with the trace.dat magic (17 08 44 `tracing`); \
                 is it the output of `trace-recipe run` or `trace-cmd record`?"
                    .into()
            },
        });
    }
    let mut c = Cursor::new(data, 0, false, "file header");
    c.expect(&MAGIC, "magic")?;
    c.expect(b"tracing", "`tracing` tag")?;
    let voff = c.offset();
    let vtext = c.cstr("version")?;
    let version: u32 = std::str::from_utf8(vtext)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::corrupt("file header: version", voff, "not a decimal number"))?;
    if !(6..=7).contains(&version) {
        return Err(Error::Unsupported {
            what: "file version".into(),
            offset: voff,
            detail: format!("version {version} (only 6 and 7 are supported)"),
        });
    }
    let eoff = c.offset();
    let big = match c.u8("endian flag")? {
        0 => false,
        1 => true,
        x => {
            return Err(Error::corrupt(
                "file header: endian flag",
                eoff,
                format!("{x}"),
            ));
        }
    };
    c.big = big;
    let long_size = c.u8("long size")?;
    let poff = c.offset();
    let page_size = c.u32("page size")? as u64;
    if page_size == 0 || page_size > MAX_PAGE_SIZE {
        return Err(Error::corrupt(
            "file header: page size",
            poff,
            format!("{page_size} out of range"),
        ));
    }
    let page_size = page_size as usize;
    Ok((
        FileHeader {
            version,
            big,
            long_size,
            page_size,
        },
        c,
    ))
}

/// The compression and the metadata (header page, event formats, kallsyms,
/// printk formats, saved cmdlines): v7 reads its options first, at the offset
/// its header gives, and the metadata from the sections they list; v6 has the
/// metadata inline after the header (its options come later, with its CPU
/// count, in [`read_v6_buffers`]).
fn read_metadata(
    data: &[u8],
    c: &mut Cursor<'_>,
    version: u32,
    big: bool,
    opts: &mut Opts,
) -> Result<(Compression, Meta), Error> {
    let mut meta = Meta::default();
    let compression;
    if version >= 7 {
        let coff = c.offset();
        let cname = text(c.cstr("compression name")?);
        // The version (zlib's or libzstd's, e.g. "1.2.13", "1.5.4") is not
        // checked: both stream formats are fixed across library versions.
        let _cver = c.cstr("compression version")?;
        compression = match cname.as_str() {
            "none" | "" => Compression::None,
            "zstd" => Compression::Zstd,
            "zlib" => Compression::Zlib,
            other => {
                return Err(Error::Unsupported {
                    what: "compression".into(),
                    offset: coff,
                    detail: format!("{other:?} (supported: none, zstd, zlib)"),
                });
            }
        };
        let first_opts = c.u64("first options offset")?;
        read_v7_options(data, big, compression, first_opts, opts)?;
        read_v7_meta(data, big, compression, opts, &mut meta)?;
    } else {
        compression = Compression::None;
        read_meta_header_info(c, &mut meta)?;
        read_meta_ftrace(c, &mut meta)?;
        read_meta_events(c, &mut meta)?;
        meta.kallsyms = read_sized(c, 4, "kallsyms")?.to_vec();
        meta.printk = read_sized(c, 4, "printk formats")?.to_vec();
        meta.cmdlines = read_sized(c, 8, "saved cmdlines")?.to_vec();
    }
    Ok((compression, meta))
}

/// The page header layout: from `header_page`, or, for a file without one,
/// the classic layout for its long size.
fn page_layout(
    header_page: &[u8],
    long_size: u8,
    page_size: usize,
    big: bool,
) -> Result<PageLayout, Error> {
    let layout = if header_page.is_empty() {
        // No header_page: assume the classic layout for the long size.
        let ls = if long_size == 4 { 4 } else { 8 };
        PageLayout {
            ts_offset: 0,
            commit_offset: 8,
            commit_size: ls,
            data_offset: 8 + ls,
            page_size,
            big,
        }
    } else {
        parse_header_page(header_page, page_size, big)?
    };
    Ok(layout)
}

/// v7: the buffers the options listed, each checked against its flyrecord
/// section header (id 3, compressed flag); and the CPU count (the option's,
/// else the highest CPU with data + 1).
fn read_v7_buffers(
    data: &[u8],
    big: bool,
    compression: Compression,
    page_size: usize,
    opts: &mut Opts,
) -> Result<(Vec<BufferInfo>, u32), Error> {
    let mut buffers = Vec::new();
    for (sec_off, mut b) in std::mem::take(&mut opts.v7_buffers) {
        // The buffer section header tells whether the data is compressed.
        let mut sc = Cursor::new(data, 0, big, "buffer section");
        sc.pos = usize::try_from(sec_off)
            .unwrap_or(usize::MAX)
            .min(data.len());
        if sc.offset() != sec_off {
            return Err(Error::Truncated {
                what: format!("buffer {:?} section", b.name),
                offset: sec_off,
                need: 16,
                available: 0,
            });
        }
        let id = sc.u16("section id")?;
        let flags = sc.u16("section flags")?;
        if id != 3 {
            return Err(Error::corrupt(
                format!("buffer {:?} section", b.name),
                sec_off,
                format!("section id {id}, expected 3 (flyrecord)"),
            ));
        }
        let compressed = flags & 1 != 0;
        if compressed && compression == Compression::None {
            return Err(Error::corrupt(
                format!("buffer {:?} section", b.name),
                sec_off,
                "compressed flag set but the file declares no compression",
            ));
        }
        if b.name.is_empty() || b.page_size == 0 {
            b.page_size = page_size;
        }
        for r in &mut b.cpus {
            r.compressed = compressed;
        }
        buffers.push(b);
    }
    let cpu_count = opts.cpu_count.unwrap_or_else(|| {
        buffers
            .iter()
            .flat_map(|b| b.cpus.iter().map(|r| r.cpu.saturating_add(1)))
            .max()
            .unwrap_or(0)
    });
    Ok((buffers, cpu_count))
}

/// v6, after the metadata: the CPU count, the options, the top buffer's
/// flyrecord, then each instance buffer's flyrecord at the offset its option
/// gave. Returns the buffers and the CPU count (the option's, if any).
fn read_v6_buffers(
    data: &[u8],
    c: &mut Cursor<'_>,
    big: bool,
    page_size: usize,
    opts: &mut Opts,
) -> Result<(Vec<BufferInfo>, u32), Error> {
    let mut buffers = Vec::new();
    // v6: CPU count field, then options, then the top flyrecord.
    let mut count = c.u32("cpu count")?;
    let toff = c.offset();
    let tag = c.take(10, "options/data tag")?;
    let tag = if tag == b"options  \0" {
        read_option_list(c, false, opts)?;
        let toff = c.offset();
        let t = c.take(10, "data tag")?;
        (t, toff)
    } else {
        (tag, toff)
    };
    if let Some(n) = opts.cpu_count {
        count = n;
    }
    match tag.0 {
        b"flyrecord\0" => {}
        b"latency  \0" => {
            return Err(Error::Unsupported {
                what: "data format".into(),
                offset: tag.1,
                detail: "latency (text) trace data".into(),
            });
        }
        other => {
            return Err(Error::corrupt(
                "data tag",
                tag.1,
                format!(
                    "expected \"flyrecord\", found {:?}",
                    String::from_utf8_lossy(other)
                ),
            ));
        }
    }
    let has_clock = opts.trace_clock.is_some();
    let top = read_v6_flyrecord(c, count, has_clock, page_size, String::new())?;
    buffers.push(top);
    for (off, name) in std::mem::take(&mut opts.v6_buffers) {
        let mut bc = Cursor::new(data, 0, big, "buffer flyrecord");
        bc.pos = usize::try_from(off).unwrap_or(usize::MAX).min(data.len());
        if bc.offset() != off {
            return Err(Error::Truncated {
                what: format!("buffer {name:?} flyrecord"),
                offset: off,
                need: 10,
                available: 0,
            });
        }
        bc.expect(b"flyrecord\0", &format!("buffer {name:?} flyrecord tag"))?;
        let b = read_v6_flyrecord(&mut bc, count, has_clock, page_size, name)?;
        buffers.push(b);
    }
    Ok((buffers, count))
}

/// Every CPU region checked against the file and the page layout now, so that
/// page iteration only has to check page contents.
fn check_cpu_regions(
    data: &[u8],
    buffers: &[BufferInfo],
    layout: &PageLayout,
) -> Result<(), Error> {
    for b in buffers {
        for r in &b.cpus {
            let end = r.offset.checked_add(r.size);
            let ok = if r.compressed {
                r.offset
                    .checked_add(4)
                    .is_some_and(|e| e <= data.len() as u64)
            } else {
                end.is_some_and(|e| e <= data.len() as u64)
            };
            if !ok {
                return Err(Error::Truncated {
                    what: format!("buffer {:?} cpu {} data", b.name, r.cpu),
                    offset: r.offset,
                    need: r.size,
                    available: (data.len() as u64).saturating_sub(r.offset),
                });
            }
            if !r.compressed && r.size % b.page_size as u64 != 0 {
                return Err(Error::corrupt(
                    format!("buffer {:?} cpu {} data size", b.name, r.cpu),
                    r.offset,
                    format!(
                        "{} bytes is not a multiple of the page size {}",
                        r.size, b.page_size
                    ),
                ));
            }
            if b.page_size < layout.data_offset {
                return Err(Error::corrupt(
                    format!("buffer {:?} page size", b.name),
                    r.offset,
                    format!(
                        "{} is smaller than the page header ({} bytes)",
                        b.page_size, layout.data_offset
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn read_sized<'a>(c: &mut Cursor<'a>, width: usize, what: &str) -> Result<&'a [u8], Error> {
    let n = c.uint(width, &format!("{what} size"))?;
    c.take(n, what)
}

fn read_meta_header_info(c: &mut Cursor<'_>, meta: &mut Meta) -> Result<(), Error> {
    c.expect(b"header_page\0", "header_page tag")?;
    meta.header_page = read_sized(c, 8, "header_page")?.to_vec();
    c.expect(b"header_event\0", "header_event tag")?;
    read_sized(c, 8, "header_event")?;
    Ok(())
}

fn parse_format_at(
    c: &Cursor<'_>,
    system: &str,
    text: &[u8],
    off: u64,
) -> Result<EventFormat, Error> {
    let s = String::from_utf8_lossy(text);
    EventFormat::parse(system, &s)
        .map_err(|e| Error::corrupt(format!("{}: event format", c.section), off, e.to_string()))
}

fn read_meta_ftrace(c: &mut Cursor<'_>, meta: &mut Meta) -> Result<(), Error> {
    let n = c.u32("ftrace format count")?;
    for i in 0..n {
        let off = c.offset();
        let t = read_sized(c, 8, &format!("ftrace format #{i}"))?;
        meta.formats.push(parse_format_at(c, "ftrace", t, off)?);
    }
    Ok(())
}

fn read_meta_events(c: &mut Cursor<'_>, meta: &mut Meta) -> Result<(), Error> {
    let n = c.u32("event system count")?;
    for _ in 0..n {
        let sys = text(c.cstr("event system name")?);
        let m = c.u32(&format!("event count of system {sys}"))?;
        for i in 0..m {
            let off = c.offset();
            let t = read_sized(c, 8, &format!("format #{i} of system {sys}"))?;
            meta.formats.push(parse_format_at(c, &sys, t, off)?);
        }
    }
    Ok(())
}

/// Read an option list (v6: ends with a bare u16 0; v7: ends with DONE
/// carrying the next options offset, which is returned).
fn read_option_list(c: &mut Cursor<'_>, v7: bool, opts: &mut Opts) -> Result<u64, Error> {
    loop {
        let ooff = c.offset();
        let id = c.u16("option id")?;
        if id == 0 && !v7 {
            return Ok(0);
        }
        let len = c.u32(&format!("option {id} length"))?;
        let payload = c.take(len as u64, &format!("option {id} payload"))?;
        let mut p = Cursor::new(payload, c.offset() - len as u64, c.big, "option");
        match id {
            0 => {
                // v7 DONE: u64 offset of the next options section.
                return if payload.len() >= 8 {
                    p.u64("next options offset")
                } else {
                    Ok(0)
                };
            }
            1 => {
                // DATE: microseconds, "0x..." text.
                let v = parse_c_integer(&text(payload));
                opts.ts_offset = opts.ts_offset.saturating_add(v.saturating_mul(1000));
            }
            2 => opts.cpu_stats.push(text(payload)),
            3 => {
                let off = p.u64("BUFFER offset")?;
                let name = text(p.cstr("BUFFER name")?);
                if v7 {
                    let clock = text(p.cstr("BUFFER clock")?);
                    let page_size = p.u32("BUFFER page size")? as usize;
                    let n = p.u32("BUFFER cpu count")?;
                    let cpus = read_cpu_regions(&mut p, n, true, &name)?;
                    if page_size as u64 > MAX_PAGE_SIZE {
                        return Err(Error::corrupt(
                            "option BUFFER page size",
                            ooff,
                            format!("{page_size} out of range"),
                        ));
                    }
                    let info = BufferInfo {
                        name,
                        clock: (!clock.is_empty()).then_some(clock),
                        page_size,
                        cpus,
                    };
                    if info.name.is_empty() {
                        opts.v7_buffers.retain(|(_, b)| !b.name.is_empty());
                        opts.v7_buffers.insert(0, (off, info));
                    } else {
                        opts.v7_buffers.push((off, info));
                    }
                } else {
                    opts.v6_buffers.push((off, name));
                }
            }
            4 => opts.trace_clock = Some(text(payload)),
            5 => opts.uname = Some(text(payload)),
            7 => {
                let v = parse_c_integer(&text(payload));
                opts.ts_offset = opts.ts_offset.saturating_add(v);
            }
            8 => opts.cpu_count = Some(p.u32("CPUCOUNT")?),
            9 => opts.version = Some(text(payload)),
            // TSC2NSEC: u32 mult, u32 shift, u64 offset; trace-cmd skips a
            // shorter one, and a zero multiplier converts nothing.
            14 if payload.len() >= 16 => {
                let mult = p.u32("TSC2NSEC mult")?;
                let shift = p.u32("TSC2NSEC shift")?;
                opts.tsc2nsec = (mult != 0).then_some(Tsc2Nsec { mult, shift });
            }
            16..=21 if v7 => {
                let off = p.u64("section offset option")?;
                opts.sections.insert(id, off);
            }
            _ => {}
        }
    }
}

/// Read a v7 section header at `off`: returns (id, flags, payload cursor).
fn v7_section<'a>(
    data: &'a [u8],
    big: bool,
    off: u64,
    section: &'static str,
) -> Result<(u16, u16, Cursor<'a>), Error> {
    let mut c = Cursor::new(data, 0, big, section);
    c.pos = usize::try_from(off).unwrap_or(usize::MAX).min(data.len());
    if c.offset() != off {
        return Err(Error::Truncated {
            what: format!("{section} section header"),
            offset: off,
            need: 16,
            available: 0,
        });
    }
    let id = c.u16("section id")?;
    let flags = c.u16("section flags")?;
    let _desc = c.u32("section description")?;
    let size = c.u64("section size")?;
    let start = c.offset();
    let body = c.take(size, "section payload")?;
    Ok((id, flags, Cursor::new(body, start, big, section)))
}

fn section_bytes<'a>(
    data: &'a [u8],
    big: bool,
    comp: Compression,
    off: u64,
    want: u16,
    section: &'static str,
) -> Result<(Cow<'a, [u8]>, u64), Error> {
    let (id, flags, mut c) = v7_section(data, big, off, section)?;
    if id != want {
        return Err(Error::corrupt(
            format!("{section} section"),
            off,
            format!("section id {id}, expected {want}"),
        ));
    }
    let base = c.base;
    if flags & 1 != 0 {
        let v = decompress_block(comp, &mut c, MAX_SECTION_SIZE, section)?;
        Ok((Cow::Owned(v), base))
    } else {
        Ok((Cow::Borrowed(c.data), base))
    }
}

fn read_v7_options(
    data: &[u8],
    big: bool,
    comp: Compression,
    first: u64,
    opts: &mut Opts,
) -> Result<(), Error> {
    let mut next = first;
    let mut seen = HashSet::new();
    while next != 0 {
        if !seen.insert(next) || seen.len() > MAX_OPTION_SECTIONS {
            return Err(Error::corrupt(
                "options section chain",
                next,
                "loops or is too long",
            ));
        }
        let (bytes, base) = section_bytes(data, big, comp, next, 0, "options")?;
        let mut c = Cursor::new(&bytes, base, big, "options");
        next = read_option_list(&mut c, true, opts)?;
    }
    Ok(())
}

fn read_v7_meta(
    data: &[u8],
    big: bool,
    comp: Compression,
    opts: &Opts,
    meta: &mut Meta,
) -> Result<(), Error> {
    type Reader = fn(&mut Cursor<'_>, &mut Meta) -> Result<(), Error>;
    let items: [(u16, &'static str, Reader); 6] = [
        (16, "header info", read_meta_header_info),
        (17, "ftrace formats", read_meta_ftrace),
        (18, "event formats", read_meta_events),
        (19, "kallsyms", |c, m| {
            m.kallsyms = read_sized(c, 4, "kallsyms")?.to_vec();
            Ok(())
        }),
        (20, "printk formats", |c, m| {
            m.printk = read_sized(c, 4, "printk formats")?.to_vec();
            Ok(())
        }),
        (21, "saved cmdlines", |c, m| {
            m.cmdlines = read_sized(c, 8, "saved cmdlines")?.to_vec();
            Ok(())
        }),
    ];
    for (id, name, f) in items {
        let Some(&off) = opts.sections.get(&id) else {
            continue;
        };
        let (bytes, base) = section_bytes(data, big, comp, off, id, name)?;
        let mut c = Cursor::new(&bytes, base, big, name);
        f(&mut c, meta)?;
    }
    Ok(())
}

/// The CPU table of buffer `name`: `count` entries of `u32 cpu id` (v7, when
/// `with_id`; v6 numbers them 0, 1, ...), `u64 offset`, `u64 size`, checked to
/// fit in what `c` has left before anything is read or allocated. CPUs with no
/// data (size 0) are left out.
fn read_cpu_regions(
    c: &mut Cursor<'_>,
    count: u32,
    with_id: bool,
    name: &str,
) -> Result<Vec<CpuRegion>, Error> {
    let entry: u64 = if with_id { 20 } else { 16 };
    let need = u64::from(count) * entry;
    if need > c.remaining() as u64 {
        return Err(Error::Truncated {
            what: format!("buffer {name:?} cpu table ({count} cpus)"),
            offset: c.offset(),
            need,
            available: c.remaining() as u64,
        });
    }
    let mut cpus = Vec::new();
    for i in 0..count {
        let cpu = if with_id { c.u32("cpu id")? } else { i };
        let offset = c.u64("cpu data offset")?;
        let size = c.u64("cpu data size")?;
        if size > 0 {
            cpus.push(CpuRegion {
                cpu,
                offset,
                size,
                compressed: false,
            });
        }
    }
    Ok(cpus)
}

fn read_v6_flyrecord(
    c: &mut Cursor<'_>,
    count: u32,
    has_clock: bool,
    page_size: usize,
    name: String,
) -> Result<BufferInfo, Error> {
    let cpus = read_cpu_regions(c, count, false, &name)?;
    let mut clock = None;
    if has_clock {
        let t = read_sized(c, 8, "clock trailer")?;
        clock = selected_clock(&text(t));
    }
    Ok(BufferInfo {
        name,
        clock,
        page_size,
        cpus,
    })
}

/// Kernel symbols: per symbol, its address and where its name lies in
/// `names` (one string for all, not one allocation each).
struct Kallsyms {
    names: String,
    /// (address, start, end), by address.
    symbols: Vec<(u64, usize, usize)>,
    /// Indexes into `symbols` by name (then address), made on the first
    /// lookup by name.
    by_name: OnceLock<Vec<u32>>,
}

impl Kallsyms {
    /// The address and name of symbol `i`.
    fn get(&self, i: usize) -> Option<(u64, &str)> {
        let &(addr, start, end) = self.symbols.get(i)?;
        Some((addr, self.names.get(start..end)?))
    }

    /// The lowest address of a symbol named `name`: a binary search of the
    /// symbols sorted by name once (a hostile file's many names cost a
    /// search each, not a walk of every symbol).
    fn address_of(&self, name: &str) -> Option<u64> {
        let name_of = |i: u32| self.get(i as usize).map_or("", |(_, n)| n);
        let order = self.by_name.get_or_init(|| {
            // `symbols` is by address: a stable sort by name keeps each
            // name's lowest address first.
            let mut v: Vec<u32> = (0..self.symbols.len() as u32).collect();
            v.sort_by(|a, b| name_of(*a).cmp(name_of(*b)));
            v
        });
        let at = order.partition_point(|i| name_of(*i) < name);
        let i = *order.get(at)?;
        (name_of(i) == name).then(|| self.get(i as usize).map(|(a, _)| a))?
    }
}

/// `ADDR TYPE NAME [MODULE]` lines (as /proc/kallsyms), by address; lines
/// that do not parse and address 0 are left out. A line that is not UTF-8 is
/// read lossily (U+FFFD for each bad sequence), as if the whole text were:
/// no bad sequence spans a newline.
fn parse_kallsyms(b: &[u8]) -> Kallsyms {
    let mut names = String::new();
    let mut symbols = Vec::new();
    // libtraceevent 1.7.1 (`tep_parse_kallsyms`) leaves out absolute symbols
    // (types `A`, `a`: x86-64's per-CPU offsets, small numbers that would
    // otherwise name user-space addresses) and arm's `$`-names.
    let mut add = |addr: u64, ty: &[u8], name: &str| {
        if addr != 0 && !matches!(ty, b"A" | b"a") && !name.starts_with('$') {
            names.push_str(name);
            symbols.push((addr, names.len() - name.len(), names.len()));
        }
    };
    // A text that is UTF-8 (kallsyms are ASCII) is checked once, and each
    // name taken from it is not checked again.
    let text = std::str::from_utf8(b).ok();
    for (start, line) in memchr::memchr_iter(b'\n', b)
        .chain([b.len()])
        .scan(0, |start, end| {
            let line = b.get(*start..end).map(|line| (*start, line));
            *start = end + 1;
            line
        })
    {
        if let Some((addr, ty, name)) = canonical_symbol_line(line) {
            let name = match text {
                Some(t) => t.get(start + name.start..start + name.end),
                None => line.get(name).and_then(|n| std::str::from_utf8(n).ok()),
            };
            if let Some(name) = name {
                add(addr, &[ty], name);
            }
        } else if let Some((addr, ty, name)) = symbol_line(&String::from_utf8_lossy(line)) {
            add(addr, ty.as_bytes(), name);
        }
    }
    // libtraceevent keeps registered symbols in a list (newest first) and
    // sorts them stably by address: aliases end up in reverse file order.
    // The same order from a stable sort of the file order (one pass when
    // the file is sorted already, as /proc/kallsyms mostly is) with each
    // run of aliases then reversed.
    symbols.sort_by_key(|(a, _, _)| *a);
    for aliases in symbols.chunk_by_mut(|x, y| x.0 == y.0) {
        aliases.reverse();
    }
    Kallsyms {
        names,
        symbols,
        by_name: OnceLock::new(),
    }
}

/// The address (hex) and name of a kallsyms line: its first and third
/// words, split at whitespace.
fn symbol_line(line: &str) -> Option<(u64, &str, &str)> {
    let mut words = line.split_whitespace();
    let addr = u64::from_str_radix(words.next()?, 16).ok()?;
    let ty = words.next()?;
    Some((addr, ty, words.next()?))
}

/// [`symbol_line`] of a line as /proc/kallsyms writes them, `ADDR T NAME`
/// with single spaces (then anything), read byte by byte: the address and
/// where in `b` the name (ASCII) lies; `None` for any other line, which
/// `symbol_line` then reads: both give the same for the lines this one
/// reads.
fn canonical_symbol_line(b: &[u8]) -> Option<(u64, u8, std::ops::Range<usize>)> {
    // Whitespace as `split_whitespace` has it, in the ASCII range.
    let space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\x0B' | b'\x0C' | b'\r');
    let mut addr = 0u64;
    let mut digits = 0;
    for &c in b {
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            b' ' => break,
            _ => return None,
        };
        addr = (addr << 4) | u64::from(v);
        digits += 1;
    }
    if !(1..=16).contains(&digits) {
        return None;
    }
    // `ADDR T NAME`: one type byte between single spaces, then the name up
    // to the next whitespace or the end; only ASCII (multi-byte whitespace
    // is whitespace to `split_whitespace`).
    let (&ty, rest) = b.get(digits + 1..)?.split_first()?;
    let (&gap, rest) = rest.split_first()?;
    if !ty.is_ascii() || space(ty) || gap != b' ' {
        return None;
    }
    let len = rest
        .iter()
        .position(|&c| space(c) || !c.is_ascii())
        .unwrap_or(rest.len());
    match rest.get(len) {
        Some(&c) if !space(c) => None,
        _ if len == 0 => None,
        _ => {
            let start = b.len() - rest.len();
            Some((addr, ty, start..start + len))
        }
    }
}

fn parse_printk(b: &[u8]) -> HashMap<u64, String> {
    let s = String::from_utf8_lossy(b);
    s.lines()
        .filter_map(|l| {
            let (a, rest) = l.split_once(':')?;
            let a = a.trim();
            let a = a.strip_prefix("0x").unwrap_or(a);
            let addr = u64::from_str_radix(a, 16).ok()?;
            let t = rest.trim();
            let t = t.strip_prefix('"').unwrap_or(t);
            let t = t.strip_suffix('"').unwrap_or(t);
            Some((addr, t.to_string()))
        })
        .collect()
}

/// The `PID COMM` lines of a saved cmdlines text, in file order.
fn parse_cmdlines(b: &[u8]) -> Vec<(i32, String)> {
    let s = String::from_utf8_lossy(b);
    s.lines()
        .filter_map(|l| {
            let (pid, comm) = l.trim_start().split_once(' ')?;
            Some((pid.parse().ok()?, comm.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_names() {
        assert_eq!(
            selected_clock("[local] global counter\n").as_deref(),
            Some("local")
        );
        assert_eq!(selected_clock("local [boot] tai").as_deref(), Some("boot"));
        assert_eq!(selected_clock("[local]").as_deref(), Some("local"));
        assert_eq!(selected_clock("").as_deref(), None);
    }

    #[test]
    fn header_page_layout() {
        let hp = b"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
        assert_eq!(subbuffer_size(hp).unwrap(), 4096);
        assert!(subbuffer_size(b"garbage").is_err());
        // Huge numbers are errors, not overflows.
        let huge = format!(
            "\tfield: u64 timestamp;\toffset:{m};\tsize:8;\tsigned:0;\n\
\tfield: local_t commit;\toffset:{m};\tsize:8;\tsigned:1;\n\
\tfield: char data;\toffset:{m};\tsize:{m};\tsigned:0;\n",
            m = usize::MAX
        );
        assert!(subbuffer_size(huge.as_bytes()).is_err());
        assert!(parse_header_page(huge.as_bytes(), 4096, false).is_err());
    }

    #[test]
    fn kallsyms_lookup_tables() {
        let k = parse_kallsyms(b"ffffffff81000000 T _stext\nffffffff81000100 t foo\t[mod]\nzz\n0000000000000000 A zero\n");
        let names = |k: &Kallsyms| -> Vec<String> {
            (0..k.symbols.len())
                .map(|i| k.get(i).unwrap().1.to_string())
                .collect()
        };
        assert_eq!(names(&k), ["_stext", "foo"]);
        assert_eq!(k.get(1).map(|s| s.0), Some(0xffffffff81000100));
        // By address, aliases in reverse file order (as libtraceevent's
        // stable sort of its newest-first list); CRLF line ends read too.
        let k = parse_kallsyms(
            b"ffffffff81000300 T c1\nffffffff81000100 T a1\nffffffff81000300 T c2\r\nffffffff81000100 t a2\nffffffff81000200 T b\nffffffff81000300 T c3",
        );
        assert_eq!(names(&k), ["a2", "a1", "b", "c3", "c2", "c1"]);
        // Lines split at other whitespace (no-break space, vertical tab)
        // split as before; a name that is not UTF-8 is read lossily.
        let k = parse_kallsyms(
            "ffffffff81000200\u{A0}T\u{A0}nbsp\nffffffff81000300 T\x0Bvt\nffffffff81000400 T b\u{e9}\n"
                .as_bytes(),
        );
        assert_eq!(names(&k), ["nbsp", "vt", "b\u{e9}"]);
        let k = parse_kallsyms(b"ffffffff81000100 T ok\nffffffff81000200 T a\xffb\n");
        assert_eq!(names(&k), ["ok", "a\u{FFFD}b"]);
        // The byte-by-byte reading of canonical lines reads what the split
        // at whitespace reads, or leaves the line to it.
        let lines = [
            "ffffffff81000000 T _stext",
            "ffffffff81000100 t foo\t[mod]",
            "FFFFFFFF81000000 t Upper",
            "ffffffff81000000 T  double",
            "ffffffff81000000 TT two",
            "ffffffff81000000\tT tab",
            "+ff T plus",
            "11111111111111111 T toolong",
            "ffffffff81000000 T na\u{A0}me",
            "ffffffff81000000 T nam\u{e9}",
            "ffffffff81000000 T end\x0Bvt",
            "ffffffff81000000 T",
            "ffffffff81000000 \u{e9} x",
            " ffffffff81000000 T lead",
            "0 T zero",
            "",
        ];
        let mut read = 0;
        for l in lines {
            if let Some((addr, ty, name)) = canonical_symbol_line(l.as_bytes()) {
                let ty = std::str::from_utf8(std::slice::from_ref(&ty)).unwrap();
                assert_eq!(Some((addr, ty, &l[name])), symbol_line(l), "{l:?}");
                read += 1;
            }
        }
        assert_eq!(read, 5, "the canonical lines are read byte by byte");
        let c = parse_cmdlines(b"12 bash\n1 init\nbad\n");
        assert_eq!(c, [(12, "bash".into()), (1, "init".into())]);
        let p = parse_printk(b"0xffffffff8281a5a4 : \"Start context switch\"\n");
        assert_eq!(
            p.get(&0xffffffff8281a5a4).map(|s| s.as_str()),
            Some("Start context switch")
        );
    }
}
