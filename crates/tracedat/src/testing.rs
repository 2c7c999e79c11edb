//! Builders for tests (feature `testing`): event formats, event payloads,
//! ring-buffer pages and a small v6 trace.dat builder that is independent of
//! [`crate::write_v6`], in any byte order, with 4- or 8-byte kernel longs,
//! hand-made pages, extra options and named buffers. Page layout:
//! Documentation/trace/ring-buffer-design.rst and the project's trace.dat spec.
//! Builders assert on misuse (they serve tests, not input). [`report`] is the
//! tests' one parser of `trace-cmd report` listings; [`zlib`] rewrites a v7
//! zstd file with zlib; [`tsc2nsec`] adds a TSC2NSEC option to a v7 file.

pub mod report;
pub mod tsc2nsec;
pub mod zlib;

/// The event system of [`small_format`] and [`big_format`].
pub const SYSTEM: &str = "synth";

/// The common fields every event format starts with (8 bytes: type, flags,
/// preempt count, pid), as in `events/SYSTEM/EVENT/format`.
pub const COMMON_FIELDS: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";

/// An event format file's text: `name`, `id`, the common fields, then `fields`
/// (format lines, offsets from 8) and `print fmt: PRINT` (e.g. `"x=%d", REC->x`).
pub fn event_format(name: &str, id: u16, fields: &str, print: &str) -> String {
    format!("name: {name}\nID: {id}\nformat:\n{COMMON_FIELDS}\n{fields}\nprint fmt: {print}\n")
}

/// A payload of event `id` from `pid`: the common fields, then `words` (kernel
/// longs, u64 each) in byte order `e`.
pub fn payload(e: Endian, id: u16, pid: i32, words: &[u64]) -> Vec<u8> {
    let mut v = e.u16(id);
    v.extend([0, 0]);
    v.extend(e.u32(pid as u32));
    for w in words {
        v.extend(e.u64(*w));
    }
    v
}

/// Format of event `small` (id 100): `u32 val` and `char name[8]`.
pub fn small_format() -> String {
    "name: small\nID: 100\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\
\n\
\tfield:unsigned int val;\toffset:8;\tsize:4;\tsigned:0;\n\
\tfield:char name[8];\toffset:12;\tsize:8;\tsigned:0;\n\
\n\
print fmt: \"val=%u name=%s\", REC->val, REC->name\n"
        .to_string()
}

/// Format of event `big` (id 101): `__data_loc char[] msg`.
pub fn big_format() -> String {
    "name: big\nID: 101\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\
\n\
\tfield:__data_loc char[] msg;\toffset:8;\tsize:4;\tsigned:0;\n\
\n\
print fmt: \"msg=%s\", __get_str(msg)\n"
        .to_string()
}

/// Byte order and kernel long size of the traced machine.
#[derive(Clone, Copy, Debug)]
pub struct Endian {
    /// Big-endian.
    pub big: bool,
    /// `sizeof(long)`: 4 or 8 bytes.
    pub long: usize,
}

impl Endian {
    /// Little-endian with 8-byte longs (x86_64, aarch64).
    pub const LITTLE64: Endian = Endian {
        big: false,
        long: 8,
    };

    /// `v` in this byte order.
    pub fn u16(&self, v: u16) -> Vec<u8> {
        if self.big {
            v.to_be_bytes().to_vec()
        } else {
            v.to_le_bytes().to_vec()
        }
    }
    /// `v` in this byte order.
    pub fn u32(&self, v: u32) -> Vec<u8> {
        if self.big {
            v.to_be_bytes().to_vec()
        } else {
            v.to_le_bytes().to_vec()
        }
    }
    /// `v` in this byte order.
    pub fn u64(&self, v: u64) -> Vec<u8> {
        if self.big {
            v.to_be_bytes().to_vec()
        } else {
            v.to_le_bytes().to_vec()
        }
    }
    /// `v` as a kernel long (truncated to 4 bytes on 32-bit).
    pub fn long(&self, v: u64) -> Vec<u8> {
        if self.long == 4 {
            self.u32(v as u32)
        } else {
            self.u64(v)
        }
    }
    /// Offset of a page's data: after the u64 timestamp and the long commit.
    pub fn data_offset(&self) -> usize {
        8 + self.long
    }
    /// The `events/header_page` text for pages of `page` bytes.
    pub fn header_page(&self, page: usize) -> String {
        let d = self.data_offset();
        format!(
            "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
\tfield: local_t commit;\toffset:8;\tsize:{l};\tsigned:1;\n\
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield: char data;\toffset:{d};\tsize:{s};\tsigned:0;\n",
            l = self.long,
            s = page - d
        )
    }
}

/// Payload of a `small` event.
pub fn small(e: Endian, pid: i32, val: u32, name: &[u8]) -> Vec<u8> {
    let mut v = e.u16(100);
    v.extend([0, 0]);
    v.extend(e.u32(pid as u32));
    v.extend(e.u32(val));
    let mut n = name.to_vec();
    n.resize(8, 0);
    v.extend(n);
    v
}

/// Payload of a `big` event (message stored via __data_loc).
pub fn big(e: Endian, pid: i32, msg: &[u8]) -> Vec<u8> {
    let mut v = e.u16(101);
    v.extend([0, 0]);
    v.extend(e.u32(pid as u32));
    let len = msg.len() as u32 + 1;
    v.extend(e.u32(12 | (len << 16)));
    v.extend(msg);
    v.push(0);
    while !v.len().is_multiple_of(4) {
        v.push(0);
    }
    v
}

/// Builds one ring-buffer page and records the events it should decode to.
pub struct Page {
    /// Byte order and long size.
    pub e: Endian,
    /// Page size in bytes.
    pub size: usize,
    /// The page's timestamp (ns).
    pub ts: u64,
    /// Timestamp of the last record added (ns).
    pub now: u64,
    /// The data written so far (record headers and payloads).
    pub body: Vec<u8>,
    /// (absolute ts, payload) of each event.
    pub events: Vec<(u64, Vec<u8>)>,
}

impl Page {
    /// An empty page of `size` bytes starting at `ts` ns.
    pub fn new(e: Endian, size: usize, ts: u64) -> Page {
        Page {
            e,
            size,
            ts,
            now: ts,
            body: Vec::new(),
            events: Vec::new(),
        }
    }
    fn hdr(&mut self, type_len: u32, delta: u32) {
        assert!(delta < 1 << 27);
        let w = if self.e.big {
            (type_len << 27) | delta
        } else {
            type_len | (delta << 5)
        };
        let b = self.e.u32(w);
        self.body.extend(b);
    }
    /// An event; payloads up to 112 bytes use type_len 1..28, longer ones
    /// type_len 0 with a length word.
    pub fn event(&mut self, delta: u32, payload: &[u8]) {
        assert!(payload.len().is_multiple_of(4));
        self.now += delta as u64;
        if payload.len() <= 112 && !payload.is_empty() {
            self.hdr(payload.len() as u32 / 4, delta);
        } else {
            self.hdr(0, delta);
            let l = self.e.u32(payload.len() as u32 + 4);
            self.body.extend(l);
        }
        self.body.extend(payload);
        self.events.push((self.now, payload.to_vec()));
    }
    /// Time extend (type 30).
    pub fn extend(&mut self, delta: u64) {
        self.now += delta;
        self.hdr(30, (delta & ((1 << 27) - 1)) as u32);
        let b = self.e.u32((delta >> 27) as u32);
        self.body.extend(b);
    }
    /// Absolute timestamp (type 31).
    pub fn absolute(&mut self, ts: u64) {
        self.now = ts;
        self.hdr(31, (ts & ((1 << 27) - 1)) as u32);
        let b = self.e.u32((ts >> 27) as u32);
        self.body.extend(b);
    }
    /// A discarded event: padding (type 29) with a non-zero delta, `len`
    /// bytes after the header word.
    pub fn discarded(&mut self, delta: u32, len: usize) {
        self.now += delta as u64;
        self.hdr(29, delta);
        let b = self.e.u32(len as u32);
        self.body.extend(b);
        self.body.extend(vec![0xaa; len - 4]);
    }
    /// Page bytes; `lost`: None, Some(None) = flag only, Some(Some(n)) =
    /// count stored after the data.
    pub fn finish(&self, lost: Option<Option<u64>>) -> Vec<u8> {
        let mut commit = self.body.len() as u64;
        match lost {
            Some(Some(_)) => commit |= 0xc000_0000,
            Some(None) => commit |= 0x8000_0000,
            None => {}
        }
        if self.e.long == 8 && lost.is_some() {
            // The kernel sign-extends the flag bits.
            commit |= 0xffff_ffff_0000_0000;
        }
        let mut p = self.e.u64(self.ts);
        p.extend(self.e.long(commit));
        p.extend(&self.body);
        if let Some(Some(n)) = lost {
            p.extend(self.e.long(n));
        }
        assert!(p.len() <= self.size, "page overflow");
        p.resize(self.size, 0);
        p
    }
}

/// A buffer of a synthetic file: its name (`""` = top level) and per-CPU pages.
pub struct Buffer {
    /// Instance name, `""` for the top level.
    pub name: String,
    /// Raw data per CPU (whole pages).
    pub cpus: Vec<Vec<u8>>,
}

/// A synthetic v6 trace.dat, built by [`File::build`].
pub struct File {
    /// Byte order and long size.
    pub e: Endian,
    /// Page size in bytes.
    pub page: usize,
    /// Extra options (after TRACECLOCK).
    pub options: Vec<(u16, Vec<u8>)>,
    /// The `trace_clock` text (e.g. `[local] global`).
    pub clock: &'static str,
    /// Top buffer first.
    pub buffers: Vec<Buffer>,
    /// The saved_cmdlines text (`PID COMM` lines).
    pub cmdlines: String,
    /// The kallsyms text (`ADDR TYPE NAME` lines).
    pub kallsyms: String,
}

/// `s` with its NUL terminator.
pub fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

impl File {
    /// The file's bytes.
    pub fn build(&self) -> Vec<u8> {
        let e = self.e;
        let mut f = vec![0x17, 0x08, 0x44];
        f.extend(b"tracing6\0");
        f.push(u8::from(e.big));
        f.push(e.long as u8);
        f.extend(e.u32(self.page as u32));
        f.extend(b"header_page\0");
        let hp = e.header_page(self.page);
        f.extend(e.u64(hp.len() as u64));
        f.extend(hp.as_bytes());
        f.extend(b"header_event\0");
        f.extend(e.u64(0));
        f.extend(e.u32(0)); // ftrace formats
        f.extend(e.u32(1));
        f.extend(cstr(SYSTEM));
        f.extend(e.u32(2));
        for t in [small_format(), big_format()] {
            f.extend(e.u64(t.len() as u64));
            f.extend(t.as_bytes());
        }
        f.extend(e.u32(self.kallsyms.len() as u32));
        f.extend(self.kallsyms.as_bytes());
        f.extend(e.u32(0));
        f.extend(e.u64(self.cmdlines.len() as u64));
        f.extend(self.cmdlines.as_bytes());
        let ncpu = self.buffers[0].cpus.len();
        f.extend(e.u32(ncpu as u32));
        f.extend(b"options  \0");
        f.extend(e.u16(4));
        let tc = cstr(&format!("[{}] global", self.clock));
        f.extend(e.u32(tc.len() as u32));
        f.extend(tc);
        for (id, p) in &self.options {
            f.extend(e.u16(*id));
            f.extend(e.u32(p.len() as u32));
            f.extend(p);
        }
        let mut patch = Vec::new();
        for b in &self.buffers[1..] {
            f.extend(e.u16(3));
            let p = cstr(&b.name);
            f.extend(e.u32(8 + p.len() as u32));
            patch.push(f.len());
            f.extend(e.u64(0));
            f.extend(p);
        }
        f.extend(e.u16(0));
        for (i, b) in self.buffers.iter().enumerate() {
            if i > 0 {
                let at = patch[i - 1];
                let off = e.u64(f.len() as u64);
                f[at..at + 8].copy_from_slice(&off);
            }
            f.extend(b"flyrecord\0");
            let table = f.len();
            f.extend(vec![0u8; 16 * ncpu]);
            let trailer = format!("[{}]", self.clock);
            f.extend(e.u64(trailer.len() as u64));
            f.extend(trailer.as_bytes());
            let aligned = f.len().div_ceil(self.page) * self.page;
            f.resize(aligned, 0);
            for (cpu, data) in b.cpus.iter().enumerate() {
                let off = f.len() as u64;
                let ent = [e.u64(off), e.u64(data.len() as u64)].concat();
                f[table + 16 * cpu..table + 16 * cpu + 16].copy_from_slice(&ent);
                f.extend(data);
            }
        }
        f
    }
}

/// Expected record, as the reader should yield it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)] // the fields say what the reader must yield
pub enum Want {
    /// An event in `buffer` on `cpu` at `ts` ns with payload `data`.
    Event {
        buffer: String,
        cpu: u32,
        ts: u64,
        data: Vec<u8>,
    },
    /// A lost-events mark (`count` when the page stored it).
    Lost {
        buffer: String,
        cpu: u32,
        count: Option<u64>,
        ts: u64,
    },
}

/// A standard synthetic file exercising every record type: a top buffer and
/// a named buffer `inst`, two CPUs each, several pages, lost-event flags.
/// Returns the file and the records in the order the reader must yield them.
pub fn standard(e: Endian) -> (File, Vec<Want>) {
    let page = 4096;
    let mut per_stream: Vec<(usize, u32, Vec<Want>)> = Vec::new();
    let mut buffers = Vec::new();
    for (bi, name) in ["", "inst"].iter().enumerate() {
        let mut cpus = Vec::new();
        for cpu in 0..2u32 {
            let base = 1_000_000_000 + cpu as u64 * 7 + bi as u64 * 3;
            let mut wants = Vec::new();
            let mut data = Vec::new();
            // Page 1: small events, a time extend, a discarded event, a big event.
            let mut p = Page::new(e, page, base);
            p.event(0, &small(e, 42, 1, b"one"));
            p.event(100, &small(e, 43, 2, b"two"));
            p.extend(5 << 27);
            p.event(7, &small(e, 42, 3, b"three"));
            p.discarded(9, 24);
            p.event(1, &big(e, 44, &[b'x'; 150]));
            p.event(2, &small(e, 0, 4, b"idle"));
            data.extend(p.finish(None));
            for (ts, d) in &p.events {
                wants.push(Want::Event {
                    buffer: name.to_string(),
                    cpu,
                    ts: *ts,
                    data: d.clone(),
                });
            }
            // Page 2: lost events with stored count, absolute timestamp.
            let t2 = p.now + 1000;
            let mut p = Page::new(e, page, t2);
            p.event(3, &small(e, 45, 5, b"five"));
            p.absolute(t2 + 50_000);
            p.event(4, &small(e, 45, 6, b"six"));
            data.extend(p.finish(Some(Some(17 + cpu as u64))));
            let mut first = true;
            for (ts, d) in &p.events {
                if first {
                    wants.push(Want::Lost {
                        buffer: name.to_string(),
                        cpu,
                        count: Some(17 + cpu as u64),
                        ts: *ts,
                    });
                    first = false;
                }
                wants.push(Want::Event {
                    buffer: name.to_string(),
                    cpu,
                    ts: *ts,
                    data: d.clone(),
                });
            }
            // Page 3: empty (commit 0), skipped.
            data.extend(Page::new(e, page, t2 + 60_000).finish(None));
            // Page 4: lost flag without count.
            let t4 = t2 + 70_000;
            let mut p = Page::new(e, page, t4);
            p.event(0, &small(e, 46, 7, b"seven"));
            data.extend(p.finish(Some(None)));
            wants.push(Want::Lost {
                buffer: name.to_string(),
                cpu,
                count: None,
                ts: t4,
            });
            wants.push(Want::Event {
                buffer: name.to_string(),
                cpu,
                ts: t4,
                data: p.events[0].1.clone(),
            });
            cpus.push(data);
            per_stream.push((bi, cpu, wants));
        }
        buffers.push(Buffer {
            name: name.to_string(),
            cpus,
        });
    }
    // Merge: by ts, then buffer, then cpu; a Lost stays glued to its event.
    type Group = (u64, usize, u32, usize, Vec<Want>);
    let mut groups: Vec<Group> = Vec::new();
    for (bi, cpu, wants) in per_stream {
        let mut seq = 0;
        let mut pending: Vec<Want> = Vec::new();
        for w in wants {
            match &w {
                Want::Lost { .. } => pending.push(w),
                Want::Event { ts, .. } => {
                    let ts = *ts;
                    pending.push(w);
                    groups.push((ts, bi, cpu, seq, std::mem::take(&mut pending)));
                    seq += 1;
                }
            }
        }
    }
    // Stable per stream (seq), then global order by (ts, buffer, cpu) is a
    // k-way merge; emulate it.
    let mut heads: Vec<Vec<Group>> = Vec::new();
    for g in groups {
        match heads.iter_mut().find(|h| h[0].1 == g.1 && h[0].2 == g.2) {
            Some(h) => h.push(g),
            None => heads.push(vec![g]),
        }
    }
    heads.sort_by_key(|h| (h[0].1, h[0].2));
    let mut idx = vec![0usize; heads.len()];
    let mut out = Vec::new();
    loop {
        let mut best: Option<usize> = None;
        for (i, h) in heads.iter().enumerate() {
            if idx[i] < h.len() && best.is_none_or(|b| h[idx[i]].0 < heads[b][idx[b]].0) {
                best = Some(i);
            }
        }
        let Some(b) = best else { break };
        out.extend(heads[b][idx[b]].4.clone());
        idx[b] += 1;
    }
    let file = File {
        e,
        page,
        options: vec![(5, cstr("Linux synth 6.0 x86_64"))],
        clock: "local",
        buffers,
        cmdlines: "42 alpha\n43 beta\n45 gamma\n".into(),
        kallsyms: String::new(),
    };
    (file, out)
}
