//! Truncated and corrupted files must give `Err` or `Ok`, never a panic or a
//! hang, both when opening and when iterating and formatting all records.

mod common;

use std::path::PathBuf;
use std::process::Command;

use tracedat::testing::Endian;
use tracedat::{TraceFile, format_record};

/// Open and fully iterate `bytes`; returns whether everything succeeded.
fn exercise(bytes: Vec<u8>) -> bool {
    let f = match TraceFile::from_bytes(bytes) {
        Ok(f) => f,
        Err(e) => {
            // Errors are displayable and say where.
            let msg = e.to_string();
            assert!(!msg.is_empty());
            return false;
        }
    };
    let _ = (
        f.cpu_count(),
        f.clock(),
        f.uname(),
        f.cpu_stats(),
        f.buffers(),
    );
    let mut sink = Vec::new();
    let mut ok = true;
    let mut n = 0usize;
    // What the iterator gives up to its first error, and that error: the
    // callback walk must give the same, then stop there.
    let mut given = Vec::new();
    let mut first_error = None;
    for r in f.records() {
        n += 1;
        assert!(n < 10_000_000, "record iteration does not end");
        if first_error.is_none() {
            match &r {
                Ok(r) => given.push(shape(r)),
                Err(e) => first_error = Some(e.to_string()),
            }
        }
        match r {
            Ok(r) => {
                sink.clear();
                format_record(&f, &r, &mut sink).unwrap();
                if let tracedat::Record::Event(e) = &r {
                    let _ = e.pid();
                    let _ = e.fields().count();
                }
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                ok = false;
            }
        }
    }
    // Both walks, on this thread and with a decoding thread ahead of it.
    for pipelined in [false, true] {
        let mut walked = Vec::new();
        let end = f.records().pipelined(pipelined).try_for_each_record(
            |r| -> Result<(), tracedat::Error> {
                walked.push(shape(r));
                Ok(())
            },
        );
        assert_eq!(
            walked, given,
            "the callback walk (pipelined: {pipelined}) gives the iterator's records"
        );
        assert_eq!(end.err().map(|e| e.to_string()), first_error);
    }
    ok
}

/// What tells records apart: kind, CPU, timestamp, format id, payload and
/// lost count.
fn shape(r: &tracedat::Record<'_>) -> (u32, u64, u16, Vec<u8>, Option<Option<u64>>) {
    match r {
        tracedat::Record::Event(e) => (e.cpu, e.ts, e.format.id, e.data.to_vec(), None),
        tracedat::Record::Lost { cpu, count, ts, .. } => (*cpu, *ts, 0, Vec::new(), Some(*count)),
    }
}

/// Offsets to try: every one in `dense` bytes from the start, then `sparse`
/// evenly spread ones.
fn offsets(len: usize, dense: usize, sparse: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..len.min(dense)).collect();
    if len > dense {
        let step = ((len - dense) / sparse.max(1)).max(1);
        v.extend((dense..len).step_by(step));
    }
    v
}

fn torture(name: &str, good: &[u8], dense: usize, sparse: usize) {
    assert!(
        exercise(good.to_vec()),
        "{name}: the intact file must read cleanly"
    );
    // Everything before the flyrecord section (header, formats, kallsyms,
    // printk formats, cmdlines, options) is metadata: a file cut there must be
    // refused. Cuts inside the CPU data may still read (with fewer records or an
    // error while iterating), but must not panic or hang.
    // v7 files keep their sections anywhere, listed from the fixed-size header
    // (magic, version, endianness, long size, page size): only that is known to
    // come first.
    let flyrecord = good
        .windows(10)
        .position(|w| w == b"flyrecord\0")
        .unwrap_or(17);
    let mut metadata_cuts = 0;
    for at in offsets(good.len(), dense, sparse) {
        let read = exercise(good[..at].to_vec());
        if at <= flyrecord {
            metadata_cuts += 1;
            assert!(
                !read,
                "{name}: a file cut at {at}, inside its metadata, was accepted"
            );
        }
    }
    assert!(
        metadata_cuts >= flyrecord.min(dense),
        "{name}: too few cuts inside the metadata ({metadata_cuts}, flyrecord at {flyrecord})"
    );
    for at in offsets(good.len(), dense, sparse) {
        for v in [0x00u8, 0xff, good[at] ^ 0x80, good[at].wrapping_add(1)] {
            let mut b = good.to_vec();
            b[at] = v;
            exercise(b);
        }
    }
}

#[test]
fn truncated_header_names_the_offset() {
    let (file, _) = tracedat::testing::standard(Endian {
        big: false,
        long: 8,
    });
    let b = file.build();
    let err = TraceFile::from_bytes(b[..40].to_vec())
        .err()
        .expect("must fail");
    let msg = err.to_string();
    assert!(msg.contains("offset"), "{msg}");
    let err = TraceFile::from_bytes(b"\x17\x08\x44tracing9\0".to_vec())
        .err()
        .unwrap();
    assert!(err.to_string().contains("version 9"), "{err}");
    assert!(TraceFile::from_bytes(Vec::new()).is_err());
}

#[test]
fn corrupt_synthetic_little_endian() {
    let (file, _) = tracedat::testing::standard(Endian {
        big: false,
        long: 8,
    });
    torture("synthetic LE", &file.build(), 2000, 2500);
}

#[test]
fn corrupt_synthetic_big_endian_32bit() {
    let (file, _) = tracedat::testing::standard(Endian { big: true, long: 4 });
    torture("synthetic BE", &file.build(), 2000, 2500);
}

/// The trace-cmd v7 fixture (zstd, or rewritten with zlib), sampled: opening
/// it parses ~2 MB of event formats (slow in debug builds), so truncations
/// spread over the file (cheap: a cut section fails before decompression),
/// every header byte, a few bytes of the big formats section, and the tail
/// holding the options, the buffer data and the strings section.
fn sample_v7_fixture(good: Vec<u8>) {
    assert!(exercise(good.clone()));
    for at in offsets(good.len(), 64, 300) {
        exercise(good[..at].to_vec());
    }
    let tail = good.len().saturating_sub(10_000);
    let mut spots: Vec<usize> = (0..64).collect();
    spots.extend((64..tail).step_by(tail / 10));
    spots.extend((tail..good.len()).step_by(157));
    for at in spots {
        for v in [0xffu8, good[at] ^ 0x01] {
            let mut b = good.clone();
            b[at] = v;
            exercise(b);
        }
    }
}

#[test]
fn corrupt_trace_cmd_v7_zstd_fixture() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trace-cmd-v7-zstd.dat");
    sample_v7_fixture(std::fs::read(p).unwrap());
}

#[test]
fn corrupt_trace_cmd_v7_uncompressed_conversion() {
    if !common::have_trace_cmd() {
        eprintln!("skipping: needs trace-cmd");
        return;
    }
    let (mut file, _) = tracedat::testing::standard(Endian {
        big: false,
        long: 8,
    });
    file.buffers.truncate(1);
    let dir = tempfile::tempdir().unwrap();
    let v6 = dir.path().join("s.dat");
    std::fs::write(&v6, file.build()).unwrap();
    for comp in ["none", "zstd"] {
        let v7 = dir.path().join(format!("s7-{comp}.dat"));
        common::run(
            Command::new("trace-cmd")
                .args([
                    "convert",
                    "--file-version",
                    "7",
                    "--compression",
                    comp,
                    "-i",
                ])
                .arg(&v6)
                .arg("-o")
                .arg(&v7),
        );
        let good = std::fs::read(&v7).unwrap();
        torture(comp, &good, 1000, 1500);
        if comp == "zstd" {
            // The same file as trace-cmd built with zlib writes it.
            let zlib = tracedat::testing::zlib::zstd_to_zlib(&good);
            torture("zlib", &zlib, 1000, 1500);
        }
    }
}

#[test]
fn directory_empty_and_foreign_inputs_say_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let msg = |p: &std::path::Path| TraceFile::open(p).err().expect("must fail").to_string();
    let m = msg(dir.path());
    assert!(m.contains("is a directory"), "{m}");
    let empty = dir.path().join("empty.dat");
    std::fs::write(&empty, b"").unwrap();
    let m = msg(&empty);
    assert!(
        m.contains("not a trace.dat file") && m.contains("is empty"),
        "{m}"
    );
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, b"hello, this is text\n").unwrap();
    let m = msg(&text);
    assert!(m.contains("does not start with the trace.dat magic"), "{m}");
    // A cut-off header is a truncated trace.dat, not a foreign file.
    let short = dir.path().join("short.dat");
    std::fs::write(&short, b"\x17\x08Dtra").unwrap();
    let m = msg(&short);
    assert!(m.contains("truncated"), "{m}");
}

/// The trace-cmd fixture rewritten with zlib ([`tracedat::testing::zlib`]).
fn zlib_fixture() -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trace-cmd-v7-zstd.dat");
    tracedat::testing::zlib::zstd_to_zlib(&std::fs::read(p).unwrap())
}

/// `(offset, id)` of each section of a little-endian v7 file, walked from the
/// end of its header as trace-cmd walks them.
fn sections(b: &[u8]) -> Vec<(usize, u16)> {
    let cstr_end = |at: usize| at + b[at..].iter().position(|&c| c == 0).unwrap() + 1;
    let mut at = cstr_end(cstr_end(18)) + 8;
    let mut v = Vec::new();
    while at < b.len() {
        v.push((at, u16::from_le_bytes([b[at], b[at + 1]])));
        at += 16 + u64::from_le_bytes(b[at + 8..at + 16].try_into().unwrap()) as usize;
    }
    v
}

#[test]
fn corrupt_zlib_rewrite_of_the_trace_cmd_fixture() {
    sample_v7_fixture(zlib_fixture());
}

/// A bad zlib block (its stream, its checksum, either size in its header) is
/// an error that names the section or CPU and the block's offset.
#[test]
fn a_bad_zlib_block_names_its_section_or_cpu_and_offset() {
    let good = zlib_fixture();
    let secs = sections(&good);
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    // Each case: what it does to a block at `at` (u32 compressed size, u32
    // uncompressed size, stream), and what the error says.
    type Spoil = fn(&mut Vec<u8>, usize);
    let cases: [(&str, Spoil, &str); 6] = [
        ("stream header", |b, at| b[at + 8] = 0x00, "zlib: "),
        (
            "stream cut short",
            |b, at| {
                let c = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
                b[at..at + 4].copy_from_slice(&(c / 2).to_le_bytes());
            },
            "zlib: ",
        ),
        (
            "checksum",
            |b, at| {
                let c = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
                b[at + 8 + c - 1] ^= 0x01;
            },
            "zlib: ",
        ),
        (
            "uncompressed size one more",
            |b, at| {
                let u = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap());
                b[at + 4..at + 8].copy_from_slice(&(u + 1).to_le_bytes());
            },
            "bytes, header says",
        ),
        (
            "uncompressed size one less",
            |b, at| {
                let u = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap());
                b[at + 4..at + 8].copy_from_slice(&(u - 1).to_le_bytes());
            },
            "bytes, header says",
        ),
        (
            "uncompressed size 4 GiB",
            |b, at| b[at + 4..at + 8].copy_from_slice(&u32::MAX.to_le_bytes()),
            "uncompressed size 4294967295 exceeds limit",
        ),
    ];

    // A metadata section: the file does not open.
    let formats = secs.iter().find(|s| s.1 == 18).unwrap().0 + 16;
    assert!(u32_at(&good, formats) > 1000);
    for (what, spoil, says) in cases {
        let mut b = good.clone();
        spoil(&mut b, formats);
        let msg = TraceFile::from_bytes(b).err().expect(what).to_string();
        let head = format!("bad event formats at offset {formats}: ");
        assert!(
            msg.starts_with(&head) && msg.contains(says),
            "{what}: {msg}"
        );
    }

    // A chunk of CPU data: the records before it, then the error.
    // The last buffer section: the instance's, the one with data.
    let buffer = secs.iter().rfind(|s| s.1 == 3).unwrap().0 + 16;
    let data = buffer.div_ceil(4096) * 4096;
    assert_eq!(u32_at(&good, data), 1, "one chunk");
    let chunk = data + 4;
    for (what, spoil, says) in cases {
        let mut b = good.clone();
        spoil(&mut b, chunk);
        let f = TraceFile::from_bytes(b).expect(what);
        let err = f.records().find_map(|r| r.err()).expect(what);
        let head =
            format!("buffer \"tracedat-test-fixture\" cpu 0: bad page data at offset {chunk}: ");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&head) && msg.contains(says),
            "{what}: {msg}"
        );
    }
}

/// A file of `pages` pages per CPU on two CPUs, interleaved in time, each
/// page with 60 small events and every seventh with a lost-events mark: some
/// thousands of records, several of the decoding thread's batches.
fn many_records(e: Endian, pages: usize) -> tracedat::testing::File {
    use tracedat::testing::{Buffer, File, Page, cstr, small};
    let page = 4096;
    let cpus = (0..2u64)
        .map(|cpu| {
            let mut data = Vec::new();
            for n in 0..pages as u64 {
                let mut p = Page::new(e, page, 1_000_000 + n * 10_000 + cpu * 13);
                for i in 0..60u32 {
                    p.event(100 + i, &small(e, 40 + cpu as i32, i, b"x"));
                }
                let lost = n.is_multiple_of(7).then_some(Some(n));
                data.extend(p.finish(lost));
            }
            data
        })
        .collect();
    File {
        e,
        page,
        options: vec![(5, cstr("Linux synth 6.0 x86_64"))],
        clock: "local",
        buffers: vec![Buffer {
            name: String::new(),
            cpus,
        }],
        cmdlines: "40 a\n41 b\n".into(),
        kallsyms: String::new(),
    }
}

/// The walk with a decoding thread gives the records of the walk without one,
/// in the same order, across batch boundaries, up to and including the first
/// error of a page corrupted mid-file (`exercise` compares them on every
/// corrupted byte of the smaller files).
#[test]
fn pipelined_walk_gives_the_records_and_error_of_the_plain_walk() {
    let e = Endian {
        big: false,
        long: 8,
    };
    let good = many_records(e, 60).build();
    let f = TraceFile::from_bytes(good.clone()).unwrap();
    let mut plain = Vec::new();
    f.records()
        .pipelined(false)
        .try_for_each_record(|r| -> Result<(), tracedat::Error> {
            plain.push(shape(r));
            Ok(())
        })
        .unwrap();
    assert!(plain.len() > 3 * tracedat::BATCH, "{} records", plain.len());
    assert!(exercise(good.clone()));

    // A commit length past its page in the middle of CPU 0's data: the page
    // whose timestamp is 1_300_000 (its 31st).
    let ts = 1_300_000u64.to_le_bytes();
    let at = good.windows(8).position(|w| w == ts).unwrap();
    let mut bad = good;
    bad[at + 8..at + 16].copy_from_slice(&5000u64.to_le_bytes());
    assert!(!exercise(bad));
}

/// An error of the callback stops the walk with a decoding thread where it
/// stops the walk without one: the same records seen, that error returned.
#[test]
fn pipelined_walk_stops_at_the_callback_error() {
    let e = Endian {
        big: false,
        long: 8,
    };
    let f = TraceFile::from_bytes(many_records(e, 60).build()).unwrap();
    for pipelined in [false, true] {
        let mut seen = 0usize;
        let end = f.records().pipelined(pipelined).try_for_each_record(
            |_| -> Result<(), tracedat::Error> {
                seen += 1;
                match seen {
                    5000 => Err(tracedat::Error::Capture("stop here".into())),
                    _ => Ok(()),
                }
            },
        );
        assert_eq!(seen, 5000, "pipelined: {pipelined}");
        assert!(end.unwrap_err().to_string().contains("stop here"));
    }
}
