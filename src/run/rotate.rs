//! `[output] rotate`: a long run recorded in pieces. While recording, once the
//! current piece's raw data reaches its threshold, the readers go on in new
//! raw files ([`Recorder::rotate_at`]); when every reader has switched, the
//! piece's raw files become `trace.K.dat` (K = 1, 2, ... in recording
//! order) and are deleted, and the oldest pieces are deleted while the pieces
//! kept, with room for the one being recorded, take more than `keep_mb`. The
//! run's last piece is `trace.dat`, written at the end like any run's.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use super::RunError;
use crate::output::OutputDir;
use crate::record::{CpuCapture, Recorder, raw_path};

/// Room for what a piece's metadata may gain after it was measured
/// ([`metadata_bytes`]): task names learned from the events and added to its
/// cmdlines, and the CPU stats.
const META_ALLOWANCE: u64 = 256 << 10;

/// The bytes of a trace.dat of `meta` without pages: what every piece holds
/// besides them.
pub(super) fn metadata_bytes(meta: &tracedat::CaptureMeta) -> u64 {
    /// A writer that only counts.
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    match tracedat::write_v6(&mut n, meta, &[]) {
        Ok(()) => n.0,
        Err(_) => 0,
    }
}

/// Bytes one reader may still write into a piece after it was asked to
/// switch: one splice (`record::PIPE_BYTES`).
const SPLICE_BYTES: u64 = 1 << 20;

/// The pieces of a rotating run.
#[derive(Debug)]
pub(super) struct Rotation {
    /// `size_mb` and `keep_mb`, in bytes.
    size: u64,
    keep: u64,
    /// Raw bytes after which a piece is cut ([`Recorder::rotate_at`]).
    pub(super) threshold: u64,
    /// The next piece to write as a trace.dat.
    next: u64,
    /// Pieces written, oldest first: name and size in bytes.
    kept: VecDeque<(String, u64)>,
    /// Pieces deleted, and their bytes.
    dropped: u64,
    dropped_bytes: u64,
}

/// How a run's pieces ended (report.json `pieces`).
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub(crate) struct Pieces {
    /// `[output] rotate` `size_mb`.
    pub(crate) size_mb: u64,
    /// `[output] rotate` `keep_mb`.
    pub(crate) keep_mb: u64,
    /// The pieces kept, oldest first (`trace.K.dat`, then `trace.dat`), with
    /// their sizes in bytes; the reports cover all of them.
    pub(crate) kept: Vec<(String, u64)>,
    /// Pieces deleted because the kept ones took more than `keep_mb`.
    pub(crate) dropped: u64,
    /// Their bytes.
    pub(crate) dropped_bytes: u64,
}

impl Rotation {
    /// The rotation of a run with `cpus` CPUs, a ring buffer of `ring_kb` KiB
    /// per CPU and `meta` bytes of metadata in each piece. A piece is cut
    /// when its raw data reaches `size_mb` less what may still come after the
    /// cut (a splice per CPU, and at the end the ring buffer's content) and
    /// trace.dat's metadata. Errors: that leaves less than half of `size_mb`.
    pub(super) fn new(
        rotate: &crate::recipe::Rotate,
        cpus: u64,
        ring_kb: u64,
        meta: u64,
    ) -> Result<Rotation, String> {
        let size = rotate.size_mb << 20;
        let margin = cpus * (SPLICE_BYTES + (ring_kb << 10)) + META_ALLOWANCE + meta;
        let threshold = size.saturating_sub(margin);
        if threshold < size / 2 {
            return Err(format!(
                "`[output] rotate` size_mb = {} is too small here: besides its events a piece must have room for {:.1} MiB (a splice and the ring buffer's {ring_kb} KiB on each of {cpus} CPUs, and {:.1} MiB of metadata), at most half of it\n  = help: raise `rotate.size_mb` to at least {}, or lower `[buffer] size_kb`",
                rotate.size_mb,
                margin as f64 / f64::from(1 << 20),
                meta as f64 / f64::from(1 << 20),
                (2 * margin).div_ceil(1 << 20)
            ));
        }
        Ok(Rotation {
            size,
            keep: rotate.keep_mb << 20,
            threshold,
            next: 0,
            kept: VecDeque::new(),
            dropped: 0,
            dropped_bytes: 0,
        })
    }

    /// One step while recording: each piece every reader is past is written
    /// with `cut(piece, name)` (which returns its size), and the oldest
    /// pieces past `keep_mb` are dropped.
    pub(super) fn tick(
        &mut self,
        rec: &Recorder,
        out: &OutputDir,
        mut cut: impl FnMut(u64, &str) -> Result<u64, RunError>,
    ) -> Result<(), RunError> {
        while rec.switched(self.next + 1) {
            self.write(self.next, out, &mut cut)?;
        }
        Ok(())
    }

    /// After the readers stopped: every piece before the last one a reader
    /// reached is written with `cut` too, and a capture whose last raw file
    /// was one of them goes on with an empty file of that last piece.
    pub(super) fn settle(
        &mut self,
        captures: &mut [CpuCapture],
        raw_dir: &Path,
        out: &OutputDir,
        mut cut: impl FnMut(u64, &str) -> Result<u64, RunError>,
    ) -> Result<(), RunError> {
        let last = captures.iter().map(|c| c.piece).max().unwrap_or(0);
        while self.next < last {
            self.write(self.next, out, &mut cut)?;
        }
        for c in captures.iter_mut().filter(|c| c.piece < last) {
            let next = raw_path(raw_dir, c.cpu, last);
            std::fs::File::create(&next).map_err(|source| crate::output::OutputError::Io {
                path: next.clone(),
                source,
            })?;
            (c.path, c.piece) = (next, last);
        }
        Ok(())
    }

    /// Writes piece `piece` as `trace.{piece + 1}.dat` and drops the oldest
    /// pieces while the kept ones and room for the next take more than `keep_mb`.
    fn write(
        &mut self,
        piece: u64,
        out: &OutputDir,
        cut: &mut impl FnMut(u64, &str) -> Result<u64, RunError>,
    ) -> Result<(), RunError> {
        let name = format!("trace.{}.dat", piece + 1);
        let size = cut(piece, &name)?;
        self.next = piece + 1;
        self.kept.push_back((name, size));
        self.drop_past(out, self.size)
    }

    /// Deletes the oldest pieces while they and `more` bytes take more than `keep_mb`.
    fn drop_past(&mut self, out: &OutputDir, more: u64) -> Result<(), RunError> {
        while self.kept.iter().map(|(_, s)| s).sum::<u64>() + more > self.keep {
            let Some((name, size)) = self.kept.pop_front() else {
                break;
            };
            out.remove(&name)?;
            self.dropped += 1;
            self.dropped_bytes += size;
        }
        Ok(())
    }

    /// The run's last piece, `trace.dat` of `last` bytes, is written: drops
    /// the oldest pieces past `keep_mb` with it, and returns the kept pieces'
    /// paths, oldest first (trace.dat last), and what report.json says of them.
    pub(super) fn finish(
        mut self,
        out: &OutputDir,
        last: u64,
        rotate: &crate::recipe::Rotate,
    ) -> Result<(Vec<PathBuf>, Pieces), RunError> {
        self.drop_past(out, last)?;
        self.kept.push_back(("trace.dat".into(), last));
        let paths = self.kept.iter().map(|(n, _)| out.path().join(n)).collect();
        Ok((
            paths,
            Pieces {
                size_mb: rotate.size_mb,
                keep_mb: rotate.keep_mb,
                kept: self.kept.into_iter().collect(),
                dropped: self.dropped,
                dropped_bytes: self.dropped_bytes,
            },
        ))
    }
}

/// What writing a piece reads: the instance (formats, stats, clock) and what
/// the run knew before recording.
pub(super) struct PieceSource<'a> {
    pub(super) inst: &'a crate::tracefs::Instance,
    pub(super) plan: &'a crate::plan::Plan,
    pub(super) valid: &'a crate::validate::ValidRecipe,
    pub(super) facts: &'a crate::kernel::KernelFacts,
    pub(super) header_page: &'a str,
    pub(super) kallsyms: &'a [u8],
    pub(super) out: &'a OutputDir,
    pub(super) raw_dir: &'a Path,
}

impl PieceSource<'_> {
    /// Writes the raw files of piece `piece` as the trace.dat `name`, with
    /// each CPU's stats as they read now, deletes them, and returns the
    /// file's size.
    pub(super) fn cut(&self, piece: u64, name: &str) -> Result<u64, RunError> {
        let captures: Vec<CpuCapture> = self
            .facts
            .cpus
            .iter()
            .map(|&cpu| CpuCapture {
                cpu,
                path: raw_path(self.raw_dir, cpu, piece),
                bytes: 0,
                stats: self
                    .inst
                    .read(&format!("per_cpu/cpu{cpu}/stats"))
                    .unwrap_or_default(),
                cpu_time: std::time::Duration::ZERO,
                truncated: false,
                piece,
            })
            .filter(|c| c.path.exists())
            .collect();
        let meta = super::output::capture_meta(
            self.inst,
            self.plan,
            self.valid,
            self.facts,
            self.header_page,
            &captures,
            self.kallsyms.to_vec(),
        )?;
        let cpus: Vec<tracedat::CpuData> = captures
            .iter()
            .map(|c| tracedat::CpuData {
                cpu: c.cpu,
                path: c.path.clone(),
            })
            .collect();
        let path = self.out.write_trace_dat(name, &meta, &cpus, false)?;
        for c in &captures {
            let _ = std::fs::remove_file(&c.path);
        }
        std::fs::metadata(&path)
            .map(|m| m.len())
            .map_err(|source| crate::output::OutputError::Io { path, source }.into())
    }
}
