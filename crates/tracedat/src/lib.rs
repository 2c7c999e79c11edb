//! Reading and writing trace-cmd `trace.dat` files.
//!
//! * [`write_v6`] writes a version 6, uncompressed file from a tracefs
//!   capture ([`CaptureMeta`] plus per-CPU raw `trace_pipe_raw` pages).
//! * [`TraceFile`] reads version 6 and 7 files (uncompressed, zstd or zlib) and
//!   yields their records merged in timestamp order ([`TraceFile::records`]).
//! * [`format_record`] prints a record like `trace-cmd report`; [`Printer`]
//!   with [`Prototypes`] prints function arguments as the kernel does.
//!
//! The layout follows the project's trace.dat spec
//! (`../shared/specs/trace-dat.md` beside the repository), checked against trace-cmd 3.1.6. Every
//! length, offset and count read from a file is bounds-checked: corrupt input
//! gives an [`Error`] naming the offset, never a panic.

#![warn(missing_docs)]

mod args;
mod bytes;
mod comms;
mod error;
mod format;
mod printfmt;
mod reader;
mod records;
mod report;
#[cfg(feature = "testing")]
pub mod testing;
mod text;
mod writer;

pub use args::{ArgKind, Param, Prototypes, write_args};
pub use comms::{Comms, Learner, names_tasks};
pub use error::Error;
pub use format::{EventFormat, Field, FieldLayout, FieldValue, IntField};
pub use printfmt::{FieldText, Shown, shown_fields};
pub use reader::{Compression, TraceFile, Tsc2Nsec, selected_clock, subbuffer_size};
pub use records::{BATCH, Event, EventData, PIPELINE_MIN_BYTES, Record, Records};
pub use report::{Bodies, Printer, clock_is_nanoseconds, format_record, format_ts};
pub use writer::{
    CaptureMeta, CpuData, TRUNCATED_STAT, read_tracefs_file, write_v6, write_v6_then,
};

/// The three magic bytes at the start of every trace.dat.
pub(crate) const MAGIC: [u8; 3] = [0x17, 0x08, 0x44];
