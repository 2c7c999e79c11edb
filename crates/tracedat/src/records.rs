//! Decoding ring-buffer pages and merging the per-CPU record streams.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::Error;
use crate::bytes::Cursor;
use crate::format::{EventFormat, FieldValue, read_uint};
use crate::reader::{
    BufferInfo, CpuRegion, MAX_CHUNK_SIZE, PageLayout, TraceFile, decompress_block,
};

const TS_SHIFT: u32 = 27;
const COMMIT_MASK: u64 = (1 << 27) - 1;
const MISSING_EVENTS: u64 = 1 << 31;
const MISSING_STORED: u64 = 1 << 30;

/// The payload bytes of one event record. Dereferences to `[u8]`.
///
/// For uncompressed files it borrows the memory-mapped file; for compressed
/// files it shares the decompressed chunk the record came from (kept alive
/// only as long as some `EventData` of it exists). A record given to a
/// [`Records::try_for_each_record`] callback borrows its page either way.
#[derive(Clone)]
pub struct EventData<'a>(DataRef<'a>);

#[derive(Clone)]
enum DataRef<'a> {
    Mapped(&'a [u8]),
    Shared(Arc<[u8]>, usize, usize),
}

impl Deref for EventData<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            DataRef::Mapped(s) => s,
            // Ranges are checked against the chunk when created.
            DataRef::Shared(a, s, e) => a.get(*s..*e).unwrap_or(&[]),
        }
    }
}

impl AsRef<[u8]> for EventData<'_> {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for EventData<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EventData({:02x?})", &**self)
    }
}

/// One record from the merged stream.
#[derive(Debug, Clone)]
pub enum Record<'a> {
    /// An event.
    Event(Event<'a>),
    /// Events were lost on `cpu` before the next record of that CPU (the
    /// page's commit word had bit 31 set). `count` is the number when the
    /// kernel stored it (bit 30), else `None`. `ts` is the timestamp of the
    /// event that follows (which is always the next record yielded).
    Lost {
        /// Buffer name ("" for the top buffer).
        buffer: &'a str,
        /// CPU number.
        cpu: u32,
        /// Number of lost events, when known.
        count: Option<u64>,
        /// Timestamp of the first event after the loss.
        ts: u64,
    },
}

impl Record<'_> {
    /// Timestamp of the record.
    pub fn ts(&self) -> u64 {
        match self {
            Record::Event(e) => e.ts,
            Record::Lost { ts, .. } => *ts,
        }
    }
    /// CPU of the record.
    pub fn cpu(&self) -> u32 {
        match self {
            Record::Event(e) => e.cpu,
            Record::Lost { cpu, .. } => *cpu,
        }
    }
}

/// One event record.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    /// Buffer name ("" for the top buffer).
    pub buffer: &'a str,
    /// CPU the event was recorded on.
    pub cpu: u32,
    /// Timestamp in trace-clock units (ns for ns clocks) with the file's
    /// DATE/OFFSET adjustment applied.
    pub ts: u64,
    /// The event's format (a placeholder named `UNKNOWN` with id 0 when the
    /// file has no format for the record's `common_type`).
    pub format: &'a EventFormat,
    /// The record payload (starting with `common_type`). Dereferences to
    /// `&[u8]`.
    pub data: EventData<'a>,
    /// Byte order of `data` (the traced kernel's).
    pub big_endian: bool,
}

impl Event<'_> {
    /// `common_type` of the record (0 if the record is too short).
    #[inline]
    pub fn type_id(&self) -> u16 {
        match self.data.get(0..2) {
            Some(&[a, b]) if self.big_endian => u16::from_be_bytes([a, b]),
            Some(&[a, b]) => u16::from_le_bytes([a, b]),
            _ => 0,
        }
    }

    /// `common_pid` (the task that emitted the event); -1 if the record is
    /// too short. Always inlined: it is read once per record of every pass.
    #[inline(always)]
    pub fn pid(&self) -> i32 {
        if let Some(at) = self.format.pid_offset() {
            return match self.data.get(at..).and_then(|b| b.first_chunk::<4>()) {
                Some(b) if self.big_endian => i32::from_be_bytes(*b),
                Some(b) => i32::from_le_bytes(*b),
                None => -1,
            };
        }
        match self.field("common_pid") {
            Some(FieldValue::Int(v)) => v as i32,
            Some(FieldValue::UInt(v)) => v as i32,
            _ => -1,
        }
    }

    /// Decode a field (event or common) by name; `None` if the format has no
    /// such field or the record is too short for it.
    pub fn field(&self, name: &str) -> Option<FieldValue<'_>> {
        self.format.field(name)?.decode(&self.data, self.big_endian)
    }

    /// The non-common fields in declaration order, decoded; fields that do
    /// not fit the record are skipped.
    pub fn fields(&self) -> impl Iterator<Item = (&str, FieldValue<'_>)> {
        self.format.fields.iter().filter_map(move |f| {
            f.decode(&self.data, self.big_endian)
                .map(|v| (f.name.as_str(), v))
        })
    }
}

/// A page of one CPU's data, borrowed from the map or shared from a chunk.
#[derive(Clone)]
enum PageBytes<'a> {
    Mapped(&'a [u8]),
    Shared(Arc<[u8]>, usize),
}

impl PageBytes<'_> {
    fn bytes(&self, page_size: usize) -> &[u8] {
        match self {
            PageBytes::Mapped(s) => s,
            PageBytes::Shared(a, start) => a.get(*start..start + page_size).unwrap_or(&[]),
        }
    }
}

/// Bytes of uncompressed data a stream reads between two releases of what it
/// has read ([`TraceFile::release`]).
const RELEASE_EVERY: usize = 8 << 20;

enum Source<'a> {
    Plain {
        data: &'a [u8],
        file_off: u64,
        next: usize,
        /// `data[..released]` was handed back to the kernel.
        released: usize,
    },
    /// Chunks compressed with the file's compression (zstd or zlib).
    Compressed {
        cursor: Cursor<'a>,
        chunks_left: u32,
        chunk: Option<(Arc<[u8]>, u64, usize)>,
        /// Bytes of the decompressed chunks all CPUs hold at once (shared).
        live: Arc<AtomicU64>,
    },
}

/// Most bytes of decompressed chunks all CPUs of a file may hold at once
/// (each CPU holds one chunk at a time, at most [`MAX_CHUNK_SIZE`]): 256 MiB.
const MAX_LIVE_CHUNKS: u64 = 256 << 20;

pub(crate) struct Item<'a> {
    ts: u64,
    lost: Option<Option<u64>>,
    data: EventData<'a>,
}

pub(crate) struct CpuStream<'a> {
    file: &'a TraceFile,
    buffer: &'a str,
    cpu: u32,
    layout: PageLayout,
    ts_offset: i64,
    tsc2nsec: Option<crate::reader::Tsc2Nsec>,
    src: Source<'a>,
    /// The page being read.
    page: Option<PageBytes<'a>>,
    /// Its events, decoded at once: (timestamp, start, end) in the page.
    entries: Vec<(u64, u32, u32)>,
    /// The next of `entries` to yield.
    pos: usize,
    /// Events lost before the page's first event (see [`Record::Lost`]).
    lost: Option<Option<u64>>,
    /// An error met in the page after `entries`: yielded after them.
    error: Option<Error>,
    done: bool,
}

impl<'a> CpuStream<'a> {
    fn new(
        file: &'a TraceFile,
        b: &'a BufferInfo,
        r: &CpuRegion,
        live: &Arc<AtomicU64>,
    ) -> Result<Self, Error> {
        let data = file.data();
        let mut layout = file.layout;
        layout.page_size = b.page_size;
        let err = |detail: String| Error::Page {
            buffer: b.name.clone(),
            cpu: r.cpu,
            offset: r.offset,
            detail,
        };
        let start = usize::try_from(r.offset).map_err(|_| err("offset out of range".into()))?;
        let src = if r.compressed {
            let region = data
                .get(start..)
                .ok_or_else(|| err("offset out of range".into()))?;
            let mut cursor = Cursor::new(region, r.offset, file.big_endian, "compressed cpu data");
            let chunks_left = cursor.u32("chunk count")?;
            Source::Compressed {
                cursor,
                chunks_left,
                chunk: None,
                live: live.clone(),
            }
        } else {
            let end = r
                .offset
                .checked_add(r.size)
                .and_then(|e| usize::try_from(e).ok())
                .ok_or_else(|| err("size out of range".into()))?;
            let region = data
                .get(start..end)
                .ok_or_else(|| err("data beyond end of file".into()))?;
            Source::Plain {
                data: region,
                file_off: r.offset,
                next: 0,
                released: 0,
            }
        };
        Ok(CpuStream {
            file,
            buffer: &b.name,
            cpu: r.cpu,
            layout,
            ts_offset: file.ts_offset,
            tsc2nsec: file.tsc2nsec,
            src,
            page: None,
            entries: Vec::new(),
            pos: 0,
            lost: None,
            error: None,
            done: false,
        })
    }

    fn page_err(&self, off: u64, detail: impl Into<String>) -> Error {
        Error::Page {
            buffer: self.buffer.to_string(),
            cpu: self.cpu,
            offset: off,
            detail: detail.into(),
        }
    }

    /// The next raw page: bytes and file offset (of the page, or of the
    /// compressed chunk containing it).
    fn next_page_bytes(&mut self) -> Result<Option<(PageBytes<'a>, u64)>, Error> {
        let ps = self.layout.page_size;
        match &mut self.src {
            Source::Plain {
                data,
                file_off,
                next,
                released,
            } => {
                let Some(p) = data.get(*next..*next + ps) else {
                    return Ok(None);
                };
                let off = *file_off + *next as u64;
                if *next - *released >= RELEASE_EVERY {
                    let start = *file_off as usize + *released;
                    self.file.release(start, start + (*next - *released));
                    *released = *next;
                }
                *next += ps;
                Ok(Some((PageBytes::Mapped(p), off)))
            }
            Source::Compressed {
                cursor,
                chunks_left,
                chunk,
                live,
            } => loop {
                if let Some((buf, off, pos)) = chunk {
                    if *pos + ps <= buf.len() {
                        let page = PageBytes::Shared(buf.clone(), *pos);
                        *pos += ps;
                        return Ok(Some((page, *off)));
                    }
                    live.fetch_sub(buf.len() as u64, Ordering::Relaxed);
                    *chunk = None;
                }
                if *chunks_left == 0 {
                    return Ok(None);
                }
                *chunks_left -= 1;
                let off = cursor.offset();
                // The chunk must fit in what the other CPUs' chunks leave of
                // the file's budget: refused from its header, before allocating.
                let room = MAX_LIVE_CHUNKS.saturating_sub(live.load(Ordering::Relaxed));
                let v = decompress_block(
                    self.file.compression(),
                    cursor,
                    MAX_CHUNK_SIZE.min(room),
                    "cpu data chunk",
                )
                .map_err(|e| Error::Page {
                    buffer: self.buffer.to_string(),
                    cpu: self.cpu,
                    offset: off,
                    detail: if room < MAX_CHUNK_SIZE {
                        format!(
                            "{e} (the chunks all CPUs hold at once are limited to {} MiB)",
                            MAX_LIVE_CHUNKS >> 20
                        )
                    } else {
                        e.to_string()
                    },
                })?;
                live.fetch_add(v.len() as u64, Ordering::Relaxed);
                if v.len() % ps != 0 {
                    return Err(Error::Page {
                        buffer: self.buffer.to_string(),
                        cpu: self.cpu,
                        offset: off,
                        detail: format!(
                            "chunk of {} bytes is not a whole number of {ps}-byte pages",
                            v.len()
                        ),
                    });
                }
                *chunk = Some((Arc::from(v), off, 0));
            },
        }
    }

    /// Load the next page with events and decode them into `entries`;
    /// false at the end of the stream.
    fn load_page(&mut self) -> Result<bool, Error> {
        let l = self.layout;
        loop {
            let Some((bytes, off)) = self.next_page_bytes()? else {
                return Ok(false);
            };
            let p = bytes.bytes(l.page_size);
            let get = |o: usize, n: usize| p.get(o..o + n).and_then(|b| read_uint(b, l.big));
            let ts = get(l.ts_offset, 8).ok_or_else(|| self.page_err(off, "page too short"))?;
            let commit = get(l.commit_offset, l.commit_size)
                .ok_or_else(|| self.page_err(off, "page too short"))?;
            let len = (commit & COMMIT_MASK) as usize;
            let end = l.data_offset + len;
            if end > l.page_size {
                return Err(self.page_err(
                    off,
                    format!(
                        "commit length {len} exceeds the page data area ({} bytes)",
                        l.page_size.saturating_sub(l.data_offset)
                    ),
                ));
            }
            let lost = if commit & MISSING_EVENTS != 0 {
                if commit & MISSING_STORED != 0 {
                    let n = get(end, l.commit_size).ok_or_else(|| {
                        self.page_err(off, "lost-event count does not fit in the page")
                    })?;
                    Some(Some(n))
                } else {
                    Some(None)
                }
            } else {
                None
            };
            if len == 0 {
                continue;
            }
            self.entries.clear();
            self.pos = 0;
            self.error = self.decode_page(p, off, ts, end).err();
            if self.entries.is_empty() && self.error.is_none() {
                continue;
            }
            self.lost = lost;
            self.page = Some(bytes);
            return Ok(true);
        }
    }

    /// Decodes the events of page `p` (data up to `end`, first timestamp
    /// `ts`) into `entries`. Errors: a record running past `end`; the events
    /// before it are kept.
    fn decode_page(
        &mut self,
        p: &[u8],
        file_off: u64,
        mut ts: u64,
        end: usize,
    ) -> Result<(), Error> {
        let big = self.layout.big;
        let rd4 = |o: usize| -> Option<u64> {
            if o + 4 > end {
                return None;
            }
            let b = *p.get(o..)?.first_chunk::<4>()?;
            Some(u64::from(if big {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }))
        };
        let mut pos = self.layout.data_offset;
        loop {
            let Some(hdr) = rd4(pos) else {
                return Ok(());
            };
            let (type_len, delta) = if big {
                (hdr >> 27, hdr & COMMIT_MASK)
            } else {
                (hdr & 31, hdr >> 5)
            };
            let at = pos;
            let short = |what: &str| Error::Page {
                buffer: self.buffer.to_string(),
                cpu: self.cpu,
                offset: file_off,
                detail: format!("{what} at page offset {at} runs past the commit length"),
            };
            match type_len {
                29 => {
                    if delta == 0 {
                        // Null padding: the rest of the page is unused.
                        return Ok(());
                    }
                    let skip = rd4(at + 4).ok_or_else(|| short("padding record"))? as usize;
                    ts = ts.wrapping_add(delta);
                    pos = at + 4 + skip.max(4);
                    continue;
                }
                30 => {
                    let ext = rd4(at + 4).ok_or_else(|| short("time extend record"))?;
                    ts = ts.wrapping_add((ext << TS_SHIFT) + delta);
                    pos = at + 8;
                    continue;
                }
                31 => {
                    let ext = rd4(at + 4).ok_or_else(|| short("time stamp record"))?;
                    let abs = (ext << TS_SHIFT) + delta;
                    let top = !((1u64 << 59) - 1);
                    ts = (ts & top) | (abs & !top);
                    pos = at + 8;
                    continue;
                }
                _ => {}
            }
            let (start, len) = if type_len == 0 {
                let l = rd4(at + 4).ok_or_else(|| short("event length"))? as usize;
                if l < 4 {
                    return Err(short("event with length below 4"));
                }
                (at + 8, (l - 4 + 3) & !3)
            } else {
                (at + 4, type_len as usize * 4)
            };
            if start + len > end {
                return Err(short("event"));
            }
            ts = ts.wrapping_add(delta);
            pos = start + len;
            // Pages are at most a few MiB: offsets fit in u32.
            // As trace-cmd: TSC2NSEC's conversion first, then the offsets.
            let shown = match self.tsc2nsec {
                Some(c) => c.convert(ts),
                None => ts,
            };
            self.entries.push((
                shown.wrapping_add_signed(self.ts_offset),
                start as u32,
                (start + len) as u32,
            ));
        }
    }

    /// Makes `entries[pos]` the stream's next event, loading pages as
    /// needed: false at the end of the stream. An error ends the stream.
    #[inline(always)]
    fn fill(&mut self) -> Result<bool, Error> {
        loop {
            if self.pos < self.entries.len() {
                return Ok(true);
            }
            if let Some(e) = self.error.take() {
                self.finish();
                return Err(e);
            }
            if self.done {
                return Ok(false);
            }
            match self.load_page() {
                Ok(true) => {}
                Ok(false) => {
                    self.finish();
                    return Ok(false);
                }
                Err(e) => {
                    self.finish();
                    return Err(e);
                }
            }
        }
    }

    /// Timestamp of the next event (after [`CpuStream::fill`] returned true).
    #[inline(always)]
    fn head_ts(&self) -> u64 {
        self.entries.get(self.pos).map_or(u64::MAX, |e| e.0)
    }

    /// The next event (after [`CpuStream::fill`] returned true), consumed.
    #[inline(always)]
    fn take(&mut self) -> Item<'a> {
        let (ts, start, end) = self.entries.get(self.pos).copied().unwrap_or((0, 0, 0));
        self.pos += 1;
        let (start, end) = (start as usize, end as usize);
        let data = match &self.page {
            Some(PageBytes::Mapped(s)) => {
                EventData(DataRef::Mapped(s.get(start..end).unwrap_or(&[])))
            }
            Some(PageBytes::Shared(a, base)) => {
                EventData(DataRef::Shared(a.clone(), base + start, base + end))
            }
            None => EventData(DataRef::Mapped(&[])),
        };
        Item {
            ts,
            lost: self.lost.take(),
            data,
        }
    }

    fn finish(&mut self) {
        self.done = true;
        self.page = None;
        self.entries = Vec::new();
        self.pos = 0;
    }
}

/// Iterator over all records of a [`TraceFile`], merged by timestamp.
///
/// Created by [`TraceFile::records`]. Yields `Err` for a corrupt page or
/// chunk; the CPU stream that failed ends there while the other CPUs go on,
/// so iteration always terminates.
pub struct Records<'a> {
    file: &'a TraceFile,
    streams: Vec<CpuStream<'a>>,
    /// The stream with the earliest next event, yielded from until its next
    /// event is later than the heap's top: it stays out of the heap
    /// meanwhile, so a run of one CPU's events costs no heap operation.
    current: Option<usize>,
    /// The other streams with events, by (timestamp of the next event,
    /// index): ties go to the lower index, as in one heap of all streams.
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    pending: Option<Event<'a>>,
    errors: VecDeque<Error>,
    started: bool,
    /// [`Records::pipelined`]'s choice; `None`: [`Records::pipeline_pays`].
    pipeline: Option<bool>,
}

/// Bytes of ring-buffer data from which [`Records::try_for_each_record`]
/// decodes on a second thread: 1 MiB (a smaller file is read in
/// milliseconds, less than the thread costs to start).
pub const PIPELINE_MIN_BYTES: u64 = 1 << 20;

/// Records per batch a decoding thread hands over (32 bytes each, besides
/// what `prepare` made of them).
pub const BATCH: usize = 2048;

/// Records on their way from the decoding thread to the walking one, with
/// what `prepare` made of them: record `i`'s is `prepared[ends[i-1]..ends[i]]`,
/// and the counts of the lost-events marks, in order, of those whose `lost`
/// is set.
#[derive(Default)]
struct Batch<'a> {
    items: Vec<Handed<'a>>,
    ends: Vec<u32>,
    prepared: Vec<u8>,
    losts: Vec<Option<u64>>,
}

/// A record as the decoding thread hands it over: its payload (in the
/// map), timestamp, stream (an index in `Records::streams`) and whether a
/// lost-events mark comes before it. 32 bytes, a third of a [`Record`].
#[derive(Clone, Copy)]
struct Handed<'a> {
    data: &'a [u8],
    ts: u64,
    stream: u32,
    lost: bool,
}

impl Batch<'_> {
    fn clear(&mut self) {
        self.items.clear();
        self.ends.clear();
        self.prepared.clear();
        self.losts.clear();
    }
}

/// Batches on their way from the decoding thread at most: with the one it
/// fills and the one being walked, the memory is bounded at a few hundred
/// KiB besides the pages (mapped, never copied).
const BATCHES: usize = 2;

impl TraceFile {
    /// The format of a record whose payload is `data` (its `common_type`,
    /// the first two bytes in the file's byte order), or the placeholder
    /// format when the file has none of that id or the payload is shorter.
    #[inline(always)]
    fn format_of(&self, data: &[u8]) -> &EventFormat {
        (data.first_chunk::<2>())
            .map(|b| match self.big_endian {
                true => u16::from_be_bytes(*b),
                false => u16::from_le_bytes(*b),
            })
            .and_then(|id| self.format_by_id(id))
            .unwrap_or(&self.unknown_format)
    }

    /// All records of all buffers and CPUs, merged in timestamp order; ties
    /// go to the earlier buffer, then the lower CPU (as trace-cmd does).
    /// Memory use is bounded: one page (uncompressed) or one decompressed
    /// chunk (zstd) per CPU at a time.
    pub fn records(&self) -> Records<'_> {
        Records::new(self)
    }
}

impl<'a> Records<'a> {
    fn new(file: &'a TraceFile) -> Self {
        let mut streams = Vec::new();
        let mut errors = VecDeque::new();
        let live = Arc::new(AtomicU64::new(0));
        for b in &file.buffers {
            let mut regions: Vec<&CpuRegion> = b.cpus.iter().collect();
            regions.sort_by_key(|r| r.cpu);
            for r in regions {
                match CpuStream::new(file, b, r, &live) {
                    Ok(s) => streams.push(s),
                    Err(e) => errors.push_back(e),
                }
            }
        }
        Records {
            file,
            streams,
            current: None,
            heap: BinaryHeap::new(),
            pending: None,
            errors,
            started: false,
            pipeline: None,
        }
    }

    fn refill(&mut self, i: usize) {
        match self.streams[i].fill() {
            Ok(true) => self.heap.push(Reverse((self.streams[i].head_ts(), i))),
            Ok(false) => {}
            Err(e) => self.errors.push_back(e),
        }
    }

    /// The stream that holds the next record in merged order (its event
    /// ready in `entries[pos]`); `None` when every stream is done, `Err`
    /// when the chosen stream failed (it ends there).
    #[inline(always)]
    fn next_stream(&mut self) -> Option<Result<usize, Error>> {
        // The current stream (the earliest at the last record) gives the
        // next record unless the heap's top is now earlier: then the top
        // becomes current and this one takes its place in the heap (one
        // sift instead of a pop and a push). A stream is refilled here,
        // before its record is taken, so nothing is called between taking
        // a record and returning it.
        let i = loop {
            let Some(i) = self.current else {
                let Reverse((_, i)) = self.heap.pop()?;
                self.current = Some(i);
                continue;
            };
            let stream = &mut self.streams[i];
            match stream.fill() {
                Ok(true) => {
                    let key = (stream.head_ts(), i);
                    match self.heap.peek_mut() {
                        Some(mut top) if top.0 < key => {
                            self.current = Some(top.0.1);
                            *top = Reverse(key);
                        }
                        _ => break i,
                    }
                }
                Ok(false) => self.current = None,
                Err(e) => {
                    self.current = None;
                    return Some(Err(e));
                }
            }
        };
        Some(Ok(i))
    }

    /// Calls `f` with each record in the order the iterator yields them,
    /// building each record in place rather than returning it: in a loop
    /// over millions of records the copy of a returned record costs more
    /// than its decoding. The record borrows the page being read, so it
    /// lives for the call only (its payload is never copied, even from a
    /// compressed chunk).
    ///
    /// Stops at the first error, of the file (a corrupt page or chunk, as
    /// the iterator would yield it) or of `f`, and returns it.
    ///
    /// On a machine with more than one CPU, an uncompressed file of at least
    /// [`PIPELINE_MIN_BYTES`] is walked by two threads ([`Records::pipelined`]):
    /// this one calls `f` while a second decodes the pages and merges the
    /// CPUs' streams ahead of it, [`BATCH`] records at a time. The records,
    /// their order and the errors are the same either way.
    pub fn try_for_each_record<E: From<Error>>(
        self,
        mut f: impl FnMut(&Record<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.try_for_each_prepared(|_, _| {}, |rec, _| f(rec))
    }

    /// [`Records::try_for_each_record`] with a first stage that may run on
    /// the decoding thread: `prepare` is work `f` could do itself (a
    /// listing's event text, which does not depend on the records before
    /// it). What `prepare` appends to the buffer it is given for a record
    /// goes to `f` with the record; `f` gets an empty slice for a record
    /// `prepare` was not called on. On one thread `prepare` is called on every
    /// record, in order; pipelined, on as many as keep the decoding thread
    /// from being the slower of the two (of every four records of a batch,
    /// one more while batches wait for `f`, one fewer while `f` waits for
    /// them), still in order.
    pub fn try_for_each_prepared<E: From<Error>>(
        self,
        mut prepare: impl FnMut(&Record<'_>, &mut Vec<u8>) + Send,
        mut f: impl FnMut(&Record<'_>, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let pipelined = self.pipeline.unwrap_or_else(|| self.pipeline_pays());
        if pipelined {
            return self.walk_pipelined(prepare, f);
        }
        let mut prepared = Vec::new();
        self.walk(|rec| {
            prepared.clear();
            prepare(rec, &mut prepared);
            f(rec, &prepared)
        })
    }

    /// This walk, with the pipeline of [`Records::try_for_each_record`] forced
    /// on (`true`) or off (`false`) instead of chosen by the file and the
    /// machine. On a compressed file it stays off: a record of a compressed
    /// chunk holds its chunk, and the chunks a file may hold at once are
    /// bounded (256 MiB) only while one record is in hand.
    pub fn pipelined(mut self, on: bool) -> Self {
        self.pipeline = Some(on && !self.compressed());
        self
    }

    fn compressed(&self) -> bool {
        (self.streams.iter()).any(|s| matches!(s.src, Source::Compressed { .. }))
    }

    /// Whether a second thread would pay for itself: more than one CPU to
    /// run on (`sched_getaffinity`), uncompressed data, and enough of it.
    fn pipeline_pays(&self) -> bool {
        let bytes: u64 = (self.file.buffers.iter())
            .flat_map(|b| b.cpus.iter().map(|r| r.size))
            .sum();
        bytes >= PIPELINE_MIN_BYTES
            && !self.compressed()
            && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
    }

    /// The walk on two threads: a scoped thread decodes and merges the
    /// records ([`Records::decode_batches`]) and hands them over in
    /// [`Batch`]es of [`BATCH`] (at most [`BATCHES`] of them on their way,
    /// their vectors reused), while the calling thread builds each record
    /// where `f` reads it and calls `f` in order. The decoding thread stops at
    /// the first error of the file, sent after the records before it; when
    /// `f` fails, dropping the receiving end stops the decoding thread at its
    /// next batch. Only for uncompressed files (records borrow the map).
    fn walk_pipelined<E: From<Error>>(
        self,
        prepare: impl FnMut(&Record<'_>, &mut Vec<u8>) + Send,
        mut f: impl FnMut(&Record<'_>, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        use std::sync::mpsc::{channel, sync_channel};
        // Batches sent and not yet received.
        let queued = AtomicU64::new(0);
        let file = self.file;
        let big = file.big_endian;
        let streams: Vec<(&'a str, u32)> = self.streams.iter().map(|s| (s.buffer, s.cpu)).collect();
        std::thread::scope(|scope| {
            let (full_tx, full_rx) = sync_channel::<Result<Batch<'a>, Error>>(BATCHES);
            let (empty_tx, empty_rx) = channel::<Batch<'a>>();
            let queued = &queued;
            scope.spawn(move || self.decode_batches(prepare, &full_tx, &empty_rx, queued));
            for batch in full_rx {
                queued.fetch_sub(1, Ordering::Relaxed);
                let mut batch = batch?;
                let (mut start, mut losts) = (0, batch.losts.iter());
                for (item, &end) in batch.items.iter().zip(&batch.ends) {
                    let (buffer, cpu) = streams
                        .get(item.stream as usize)
                        .copied()
                        .unwrap_or(("", 0));
                    if item.lost
                        && let Some(&count) = losts.next()
                    {
                        let lost = Record::Lost {
                            buffer,
                            cpu,
                            count,
                            ts: item.ts,
                        };
                        f(&lost, &[])?;
                    }
                    // Built where `f` reads it (see `walk`).
                    f(
                        &Record::Event(Event {
                            buffer,
                            cpu,
                            ts: item.ts,
                            format: file.format_of(item.data),
                            data: EventData(DataRef::Mapped(item.data)),
                            big_endian: big,
                        }),
                        batch.prepared.get(start..end as usize).unwrap_or(&[]),
                    )?;
                    start = end as usize;
                }
                batch.clear();
                // The decoding thread may be done: then the batch is dropped.
                let _ = empty_tx.send(batch);
            }
            Ok(())
        })
    }

    /// The decoding thread of [`Records::walk_pipelined`]: the merge of
    /// [`Records::walk`], each record kept as a [`Handed`] of a batch, with
    /// `prepare` called on as many as keep this thread from being the slower
    /// (see [`Records::try_for_each_prepared`]): of every four records of a
    /// batch, one more while batches wait for the walking thread (the queue
    /// full), one fewer while it waits for them (nothing queued).
    fn decode_batches(
        mut self,
        mut prepare: impl FnMut(&Record<'_>, &mut Vec<u8>),
        full: &std::sync::mpsc::SyncSender<Result<Batch<'a>, Error>>,
        empty: &std::sync::mpsc::Receiver<Batch<'a>>,
        queued: &AtomicU64,
    ) {
        use std::sync::mpsc::TrySendError;
        let file = self.file;
        let big = file.big_endian;
        // Sends a batch or an error, counted in `queued`; false when the
        // walking thread has stopped.
        let send = |what: Result<Batch<'a>, Error>| {
            queued.fetch_add(1, Ordering::Relaxed);
            full.send(what).is_ok()
        };
        self.started = true;
        for i in 0..self.streams.len() {
            self.refill(i);
        }
        if let Some(e) = self.errors.pop_front() {
            send(Err(e));
            return;
        }
        let mut batch = Batch::default();
        let mut share = 4;
        while let Some(i) = self.next_stream() {
            let i = match i {
                Ok(i) => i,
                Err(e) => {
                    if !batch.items.is_empty() && !send(Ok(batch)) {
                        return;
                    }
                    send(Err(e));
                    return;
                }
            };
            let s = &mut self.streams[i];
            let (ts, start, end) = s.entries.get(s.pos).copied().unwrap_or((0, 0, 0));
            s.pos += 1;
            let lost = s.lost.take();
            let data: &'a [u8] = match &s.page {
                Some(PageBytes::Mapped(p)) => p.get(start as usize..end as usize).unwrap_or(&[]),
                // Compressed files are walked on one thread.
                _ => &[],
            };
            if batch.items.len() % 4 < share {
                let rec = Record::Event(Event {
                    buffer: s.buffer,
                    cpu: s.cpu,
                    ts,
                    format: file.format_of(data),
                    data: EventData(DataRef::Mapped(data)),
                    big_endian: big,
                });
                prepare(&rec, &mut batch.prepared);
            }
            batch.ends.push(batch.prepared.len() as u32);
            if let Some(count) = lost {
                batch.losts.push(count);
            }
            batch.items.push(Handed {
                data,
                ts,
                stream: i as u32,
                lost: lost.is_some(),
            });
            if batch.items.len() < BATCH {
                continue;
            }
            if queued.fetch_add(1, Ordering::Relaxed) == 0 {
                share = share.saturating_sub(1);
            }
            match full.try_send(Ok(batch)) {
                Ok(()) => {}
                Err(TrySendError::Full(b)) => {
                    share = (share + 1).min(4);
                    if full.send(b).is_err() {
                        return;
                    }
                }
                Err(TrySendError::Disconnected(_)) => return,
            }
            batch = empty.try_recv().unwrap_or_default();
        }
        if !batch.items.is_empty() {
            send(Ok(batch));
        }
    }

    /// The walk on the calling thread.
    fn walk<E: From<Error>>(
        mut self,
        mut f: impl FnMut(&Record<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.started = true;
        for i in 0..self.streams.len() {
            self.refill(i);
        }
        if let Some(e) = self.errors.pop_front() {
            return Err(e.into());
        }
        let big = self.file.big_endian;
        while let Some(i) = self.next_stream() {
            let s = &mut self.streams[i?];
            let (ts, start, end) = s.entries.get(s.pos).copied().unwrap_or((0, 0, 0));
            s.pos += 1;
            let lost = s.lost.take();
            let page = match &s.page {
                Some(p) => p.bytes(s.layout.page_size),
                None => &[],
            };
            let data = page.get(start as usize..end as usize).unwrap_or(&[]);
            if let Some(count) = lost {
                f(&Record::Lost {
                    buffer: s.buffer,
                    cpu: s.cpu,
                    count,
                    ts,
                })?;
            }
            // Built where `f` reads it: a record moved after it is built
            // costs a stall per field copied.
            f(&Record::Event(Event {
                buffer: s.buffer,
                cpu: s.cpu,
                ts,
                format: self.file.format_of(data),
                data: EventData(DataRef::Mapped(data)),
                big_endian: big,
            }))?;
        }
        Ok(())
    }

    #[inline(always)]
    fn make_event(&self, i: usize, it: Item<'a>) -> Event<'a> {
        let s = &self.streams[i];
        let file = self.file;
        Event {
            buffer: s.buffer,
            cpu: s.cpu,
            ts: it.ts,
            format: file.format_of(&it.data),
            data: it.data,
            big_endian: file.big_endian,
        }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, Error>;

    // Inlined into the caller's loop: a record is too large to be returned
    // in registers, and the copy through memory costs more than its decoding.
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if !self.started {
            self.started = true;
            for i in 0..self.streams.len() {
                self.refill(i);
            }
        }
        if let Some(e) = self.pending.take() {
            return Some(Ok(Record::Event(e)));
        }
        if let Some(e) = self.errors.pop_front() {
            return Some(Err(e));
        }
        let i = match self.next_stream()? {
            Ok(i) => i,
            Err(e) => return Some(Err(e)),
        };
        let it = self.streams[i].take();
        let lost = it.lost;
        let ev = self.make_event(i, it);
        if let Some(count) = lost {
            let rec = Record::Lost {
                buffer: ev.buffer,
                cpu: ev.cpu,
                count,
                ts: ev.ts,
            };
            self.pending = Some(ev);
            return Some(Ok(rec));
        }
        Some(Ok(Record::Event(ev)))
    }
}
