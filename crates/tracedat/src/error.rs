//! Error type shared by the reader, the writer and the format parser.

use std::path::PathBuf;

/// Everything that can go wrong while reading, writing or parsing trace.dat
/// data.
///
/// Every variant names where the problem is: a file offset (absolute byte
/// offset from the start of the trace.dat file), the section or item being
/// read, and for ring-buffer data the buffer name and CPU.
#[derive(thiserror::Error, Debug)]
pub enum Error {
    /// Opening, mapping or reading an input file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Writing the output stream failed.
    #[error("writing trace.dat: {0}")]
    Write(#[source] std::io::Error),
    /// The file ends before an item that should be there.
    #[error("truncated file: {what} at offset {offset} needs {need} bytes, only {available} left")]
    Truncated {
        /// Which item was being read (e.g. "header_page size").
        what: String,
        /// File offset of the item.
        offset: u64,
        /// Bytes the item needs.
        need: u64,
        /// Bytes available from `offset` to the end of the enclosing region.
        available: u64,
    },
    /// A value in the file header, a section or an option is invalid.
    #[error("bad {what} at offset {offset}: {detail}")]
    Corrupt {
        /// Which item was being read.
        what: String,
        /// File offset of the item.
        offset: u64,
        /// What is wrong with it.
        detail: String,
    },
    /// A ring-buffer page (or compressed chunk) of one CPU is invalid.
    #[error("buffer {buffer:?} cpu {cpu}: bad page data at offset {offset}: {detail}")]
    Page {
        /// Buffer name, "" for the top buffer.
        buffer: String,
        /// CPU number.
        cpu: u32,
        /// File offset of the page, or of the compressed chunk holding it.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// The file uses a feature this reader does not implement.
    #[error("unsupported {what} at offset {offset}: {detail}")]
    Unsupported {
        /// The feature.
        what: String,
        /// File offset where it was found.
        offset: u64,
        /// More information.
        detail: String,
    },
    /// An event format (or header_page) text could not be parsed.
    #[error("event format {system}/{name}: line {line}: {detail}")]
    Format {
        /// Event system (e.g. "sched"); "header_page" for the page header.
        system: String,
        /// Event name if already known, else "?".
        name: String,
        /// 1-based line number in the format text.
        line: usize,
        /// What is wrong.
        detail: String,
    },
    /// The input is not a trace.dat file at all: a directory, an empty file,
    /// or a file that does not start with the trace.dat magic.
    #[error("not a trace.dat file: {detail}")]
    NotTraceDat {
        /// What the input is instead, and what to give instead.
        detail: String,
    },
    /// The capture handed to the writer is inconsistent.
    #[error("invalid capture for writing: {0}")]
    Capture(String),
}

impl Error {
    pub(crate) fn corrupt(what: impl Into<String>, offset: u64, detail: impl Into<String>) -> Self {
        Error::Corrupt {
            what: what.into(),
            offset,
            detail: detail.into(),
        }
    }
}
