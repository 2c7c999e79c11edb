//! A v7 trace.dat compressed with zstd, rewritten as trace-cmd built with
//! zlib writes it: the header names `zlib`, and every compressed block (the
//! metadata sections' and each CPU's data chunks) is one zlib-wrapped deflate
//! stream at level 9 (what `compress2(..., Z_BEST_COMPRESSION)` writes), with
//! the same `u32 compressed size, u32 uncompressed size` header. The blocks
//! change size, so every absolute offset moves: the header's first options
//! offset, the options' section offsets (16 to 21, the DONE chain, BUFFER's
//! section and per-CPU data offsets and sizes). Sections stay back to back
//! and CPU data page-aligned, as trace-cmd lays them out (the project's
//! trace.dat spec, section 9).
//!
//! The Debian trace-cmd 3.1.6 on the test hosts has no zlib (`trace-cmd list
//! -c`), so the tests make zlib files from zstd ones this way and compare our
//! listing of the result with trace-cmd's listing of the original.

use std::collections::HashMap;
use std::io::{Read, Write};

use super::Endian;

/// The zlib version the rewritten header names (trace-cmd writes its zlib's
/// `zlibVersion()`; readers compare at most the major number).
pub const ZLIB_VERSION: &str = "1.2.13";

/// Reads the input file's numbers in its byte order; panics past its end.
pub(super) struct In<'a> {
    pub(super) data: &'a [u8],
    pub(super) big: bool,
}

impl In<'_> {
    pub(super) fn bytes(&self, at: usize, n: usize) -> &[u8] {
        self.data
            .get(at..at + n)
            .unwrap_or_else(|| panic!("{n} bytes at {at}: past the end of the file"))
    }
    fn uint<const N: usize>(&self, at: usize) -> u64 {
        let b: [u8; N] = self.bytes(at, N).try_into().unwrap();
        crate::format::read_uint(&b, self.big).unwrap()
    }
    pub(super) fn u16(&self, at: usize) -> u16 {
        self.uint::<2>(at) as u16
    }
    pub(super) fn u32(&self, at: usize) -> u32 {
        self.uint::<4>(at) as u32
    }
    pub(super) fn u64(&self, at: usize) -> u64 {
        self.uint::<8>(at)
    }
    /// The NUL-terminated string at `at` and the offset after its NUL.
    pub(super) fn cstr(&self, at: usize) -> (&[u8], usize) {
        let len = self.data[at..]
            .iter()
            .position(|&b| b == 0)
            .unwrap_or_else(|| panic!("unterminated string at {at}"));
        (&self.data[at..at + len], at + len + 1)
    }
}

/// One `u32 compressed size, u32 uncompressed size, zstd frame` block at `at`,
/// as a zlib block; and the offset after the input block.
fn recompress(f: &In<'_>, at: usize, e: Endian) -> (Vec<u8>, usize) {
    let csize = f.u32(at) as usize;
    let usize_ = f.u32(at + 4) as usize;
    let mut plain = Vec::new();
    ruzstd::decoding::StreamingDecoder::new(f.bytes(at + 8, csize))
        .unwrap_or_else(|e| panic!("zstd block at {at}: {e}"))
        .read_to_end(&mut plain)
        .unwrap_or_else(|e| panic!("zstd block at {at}: {e}"));
    assert_eq!(plain.len(), usize_, "zstd block at {at}: uncompressed size");
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(&plain).unwrap();
    let packed = z.finish().unwrap();
    let mut out = e.u32(packed.len() as u32);
    out.extend(e.u32(usize_ as u32));
    out.extend(packed);
    (out, at + 8 + csize)
}

/// A BUFFER option: its section's offset and per CPU `(cpu, data offset,
/// data size)`, with the file offsets where those numbers sit.
struct BufferOption {
    section: u64,
    cpus: Vec<(u64, u64)>,
    /// File offsets of the section offset, then of each CPU's data offset
    /// (its size follows it).
    at: Vec<usize>,
}

fn buffer_option(f: &In<'_>, at: usize) -> BufferOption {
    let section = f.u64(at);
    let (_, next) = f.cstr(at + 8);
    let (_, next) = f.cstr(next);
    let count = f.u32(next + 4) as usize;
    let mut cpus = Vec::new();
    let mut offsets = vec![at];
    for k in 0..count {
        let entry = next + 8 + k * 20;
        offsets.push(entry + 4);
        cpus.push((f.u64(entry + 4), f.u64(entry + 12)));
    }
    BufferOption {
        section,
        cpus,
        at: offsets,
    }
}

/// The options of the options section whose payload spans `start..end`:
/// `(id, payload offset)`.
pub(super) fn options(f: &In<'_>, start: usize, end: usize) -> Vec<(u16, usize)> {
    let mut v = Vec::new();
    let mut at = start;
    while at < end {
        let id = f.u16(at);
        let len = f.u32(at + 2) as usize;
        v.push((id, at + 6));
        at += 6 + len;
        if id == 0 {
            break;
        }
    }
    v
}

/// A version 7 file's header: the reader in its byte order, that order and
/// long size, the compression name, and the offset of the u64 first options
/// offset. Panics on another version.
pub(super) fn open_v7(file: &[u8]) -> (In<'_>, Endian, &[u8], usize) {
    assert!(
        file.get(3..12) == Some(b"tracing7\0".as_slice()),
        "not a version 7 trace.dat"
    );
    let f = In {
        data: file,
        big: file[12] != 0,
    };
    let e = Endian {
        big: f.big,
        long: file[13] as usize,
    };
    let (name, at) = f.cstr(18);
    let name = &file[18..18 + name.len()];
    let (_, at) = f.cstr(at);
    (f, e, name, at)
}

/// `file`, a version 7 trace.dat compressed with zstd, rewritten with zlib.
/// Panics on anything else, and on options whose offsets it does not know to
/// move (22 and up: latency text, BTF, modules).
pub fn zstd_to_zlib(file: &[u8]) -> Vec<u8> {
    let (f, e, name, at) = open_v7(file);
    let page = f.u32(14) as usize;
    assert_eq!(name, b"zstd", "compression");
    let first_options = f.u64(at);
    let sections = at + 8;

    // Every section's header offset, and every option, before moving any.
    let mut headers = Vec::new();
    let mut opts = Vec::new();
    let mut at = sections;
    while at < file.len() {
        let (id, flags, size) = (f.u16(at), f.u16(at + 2), f.u64(at + 8) as usize);
        headers.push(at);
        if id == 0 {
            assert_eq!(flags & 1, 0, "compressed options section at {at}");
            opts.extend(options(&f, at + 16, at + 16 + size));
        }
        at += 16 + size;
    }
    assert_eq!(at, file.len(), "sections must end at the end of the file");
    let buffers: Vec<BufferOption> = opts
        .iter()
        .filter(|(id, _)| *id == 3)
        .map(|&(_, at)| buffer_option(&f, at))
        .collect();

    let mut out = file[..18].to_vec();
    out.extend(super::cstr("zlib"));
    out.extend(super::cstr(ZLIB_VERSION));
    let first_options_at = out.len();
    out.extend(e.u64(0));
    // Old offset of a section or of a CPU's data -> new offset (and new size).
    let mut moved: HashMap<u64, (u64, u64)> = HashMap::new();
    // New offsets of the options sections' payloads (patched last).
    let mut options_sections = Vec::new();
    for &at in &headers {
        let (id, flags, size) = (f.u16(at), f.u16(at + 2), f.u64(at + 8) as usize);
        let new = out.len();
        moved.insert(at as u64, (new as u64, 0));
        out.extend(f.bytes(at, 8)); // id, flags, description
        out.extend(e.u64(0));
        let payload = at + 16;
        let compressed = flags & 1 != 0;
        if id == 3 {
            let mut cpus: Vec<(u64, u64)> = buffers
                .iter()
                .filter(|b| b.section == at as u64)
                .flat_map(|b| b.cpus.iter().copied())
                .collect();
            cpus.sort();
            if cpus.is_empty() {
                out.extend(f.bytes(payload, size));
            }
            for (data, len) in cpus {
                out.resize(out.len().div_ceil(page) * page, 0);
                let start = out.len();
                let data = data as usize;
                if compressed {
                    let chunks = f.u32(data);
                    out.extend(e.u32(chunks));
                    let mut next = data + 4;
                    for _ in 0..chunks {
                        let (block, after) = recompress(&f, next, e);
                        out.extend(block);
                        next = after;
                    }
                    assert_eq!(next - data - 4, len as usize, "cpu data size at {data}");
                } else {
                    out.extend(f.bytes(data, len as usize));
                }
                // trace-cmd's size leaves out the chunk count.
                let size = (out.len() - start - if compressed { 4 } else { 0 }) as u64;
                moved.insert(data as u64, (start as u64, size));
            }
        } else if compressed {
            let (block, after) = recompress(&f, payload, e);
            assert_eq!(after, payload + size, "section at {at}: one block");
            out.extend(block);
        } else {
            if id == 0 {
                options_sections.push((payload, new + 16));
            }
            out.extend(f.bytes(payload, size));
        }
        let size = (out.len() - new - 16) as u64;
        out[new + 8..new + 16].copy_from_slice(&e.u64(size));
    }

    // Every offset to a section or CPU data, moved.
    let to = |old: u64| {
        moved
            .get(&old)
            .copied()
            .unwrap_or_else(|| panic!("nothing at {old}"))
    };
    let mut put = |at: usize, v: u64| out[at..at + 8].copy_from_slice(&e.u64(v));
    put(first_options_at, to(first_options).0);
    let shift = |old: usize| {
        let (from, to) = options_sections
            .iter()
            .rfind(|(from, _)| *from <= old)
            .unwrap();
        old - from + to
    };
    for (id, at) in opts {
        match id {
            0 => {
                let next = f.u64(at);
                if next != 0 {
                    put(shift(at), to(next).0);
                }
            }
            16..=21 => put(shift(at), to(f.u64(at)).0),
            3 => {
                let b = buffer_option(&f, at);
                put(shift(b.at[0]), to(b.section).0);
                for (&at, (data, _)) in b.at[1..].iter().zip(b.cpus) {
                    let (data, size) = to(data);
                    put(shift(at), data);
                    put(shift(at) + 8, size);
                }
            }
            22.. => panic!("option {id}: this helper does not move its offsets"),
            _ => {}
        }
    }
    out
}
