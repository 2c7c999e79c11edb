//! One Parquet file per event: its records as rows, the record's time, CPU,
//! task and task name and the event's fields as typed columns, written a row
//! group at a time with the `parquet` crate's column writers.
//!
//! Columns (every field column is nullable: a record too short for a field
//! gives a null):
//!
//! | field of the format | Parquet column |
//! |---|---|
//! | integer of 1, 2, 4 or 8 bytes (pointers too) | INT32 or INT64, annotated as an integer of that width and sign |
//! | `char` array, `__data_loc char[]`, `char buf[]` | BYTE_ARRAY string, up to the first NUL (bytes that are not UTF-8 replaced by U+FFFD) |
//! | fixed array of 1, 2, 4 or 8-byte integers | LIST of such integers |
//! | anything else (dynamic arrays of numbers, odd sizes) | BYTE_ARRAY, the field's raw bytes |
//!
//! Memory is bounded whatever the file's size: a table's rows are written as
//! a row group once it holds [`GROUP_ROWS`] rows or [`GROUP_BYTES`] bytes, and
//! the largest table is written whenever all of them together hold more than
//! [`BUFFERED_BYTES`]. The rows are gathered ([`Rows`]) on the thread that
//! walks the records and written ([`Sink`]: encoded, compressed) on another,
//! one row group at a time, handed over without a queue; with the records'
//! decoding thread, an export keeps two CPUs busy.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parquet::basic::{Compression, LogicalType, Repetition, Type as Physical, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::{
    SerializedColumnWriter, SerializedFileWriter, SerializedRowGroupWriter,
};
use parquet::schema::types::{Type, TypePtr};
use tracedat::{EventFormat, Field, FieldValue, IntField};

use super::ExportError;

/// Rows a table holds before they are written as a row group.
const GROUP_ROWS: usize = 1 << 17;
/// Bytes (estimated) a table holds before they are written as a row group.
const GROUP_BYTES: usize = 16 << 20;
/// Bytes (estimated) all tables together hold before the largest is written:
/// with the group being written beside them, a 630 MiB trace.dat exports in
/// about 78 MiB of RSS, as fast as with twice as much held (16 MiB: 99 MiB;
/// BENCHMARKS.md).
pub(super) const BUFFERED_BYTES: usize = 8 << 20;

/// The values of one record a table takes besides the event's fields.
pub(super) struct Common<'a> {
    /// Timestamp in trace-clock units.
    pub(super) ts: u64,
    /// CPU.
    pub(super) cpu: u32,
    /// `common_pid`.
    pub(super) pid: i32,
    /// The task's name, when known.
    pub(super) comm: Option<&'a str>,
    /// The ring buffer (`""`: the top one); written only when the file has
    /// several.
    pub(super) buffer: &'a str,
}

/// Integer widths of Parquet columns: 8, 16, 32 or 64 bits, signed or not.
#[derive(Debug, Clone, Copy)]
struct Int {
    bytes: u8,
    signed: bool,
}

impl Int {
    fn wide(self) -> bool {
        self.bytes == 8
    }

    /// The column's Parquet type (`name`, with `repetition`).
    fn parquet(self, name: &str, repetition: Repetition) -> Result<Type, ParquetError> {
        let physical = match self.wide() {
            true => Physical::INT64,
            false => Physical::INT32,
        };
        Type::primitive_type_builder(name, physical)
            .with_repetition(repetition)
            .with_logical_type(Some(LogicalType::integer(
                8 * self.bytes as i8,
                self.signed,
            )))
            .build()
    }
}

/// Integer values: 32-bit for up to 4 bytes, else 64-bit (unsigned ones
/// keep their bits; the column's annotation says how to read them).
#[derive(Debug)]
enum Ints {
    Narrow(Vec<i32>),
    Wide(Vec<i64>),
}

impl Ints {
    fn new(int: Int) -> Ints {
        match int.wide() {
            true => Ints::Wide(Vec::new()),
            false => Ints::Narrow(Vec::new()),
        }
    }

    /// Appends `v` (as [`IntField::get`] gives it: sign-extended when signed).
    #[inline]
    fn push(&mut self, v: u64) {
        match self {
            Ints::Narrow(x) => x.push(v as u32 as i32),
            Ints::Wide(x) => x.push(v as i64),
        }
    }

    /// Empty values of the same width.
    fn fresh(&self) -> Ints {
        match self {
            Ints::Narrow(_) => Ints::Narrow(Vec::new()),
            Ints::Wide(_) => Ints::Wide(Vec::new()),
        }
    }
}

/// Text or bytes of many rows in one buffer, cut at `ends`.
#[derive(Debug, Default)]
struct Texts {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Texts {
    fn push(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
        self.ends.push(self.bytes.len());
    }

    /// Appends `b` as UTF-8: as it is when it is, else with U+FFFD for
    /// every byte sequence that is not.
    fn push_text(&mut self, b: &[u8]) {
        match std::str::from_utf8(b) {
            Ok(_) => self.push(b),
            Err(_) => self.push(String::from_utf8_lossy(b).as_bytes()),
        }
    }

    /// The values, sharing one buffer (no copy per value); empties `self`.
    fn take(&mut self) -> Vec<ByteArray> {
        let all = Bytes::from(std::mem::take(&mut self.bytes));
        let mut start = 0;
        let values = self
            .ends
            .iter()
            .map(|&end| {
                let v = ByteArray::from(all.slice(start..end));
                start = end;
                v
            })
            .collect();
        self.ends.clear();
        values
    }
}

/// What a field's column holds, and where the field is read from.
#[derive(Debug)]
enum Kind {
    /// A plain integer, read at a fixed place.
    Int(IntField, Int, Ints),
    /// Character data (text).
    Text(Texts),
    /// A fixed array of integers: its elements and the list levels.
    List(Int, Ints, Vec<i16>),
    /// Raw bytes.
    Bytes(Texts),
}

/// One column of a table: the event field it comes from, its values and
/// definition levels (0: null, 1: a value; for lists 1: empty, 2: an element).
#[derive(Debug)]
struct Column {
    field: usize,
    kind: Kind,
    defs: Vec<i16>,
}

impl Column {
    fn new(field: &Field, index: usize) -> Column {
        let int = field.int();
        let (_, size, signed) = int.place();
        let kind = if size != 0 {
            let i = Int {
                bytes: size,
                signed,
            };
            Kind::Int(int, i, Ints::new(i))
        } else if field.is_string {
            Kind::Text(Texts::default())
        } else if let Some((_, elem)) = field.elements() {
            let i = Int {
                bytes: elem as u8,
                signed: field.signed,
            };
            Kind::List(i, Ints::new(i), Vec::new())
        } else {
            Kind::Bytes(Texts::default())
        };
        Column {
            field: index,
            kind,
            defs: Vec::new(),
        }
    }

    fn parquet(&self, name: &str) -> Result<Type, ParquetError> {
        let optional = Repetition::OPTIONAL;
        match &self.kind {
            Kind::Int(_, int, _) => int.parquet(name, optional),
            Kind::Text(_) => Type::primitive_type_builder(name, Physical::BYTE_ARRAY)
                .with_repetition(optional)
                .with_logical_type(Some(LogicalType::String))
                .build(),
            Kind::Bytes(_) => Type::primitive_type_builder(name, Physical::BYTE_ARRAY)
                .with_repetition(optional)
                .build(),
            Kind::List(int, _, _) => {
                let element = int.parquet("element", Repetition::REQUIRED)?;
                let list = Type::group_type_builder("list")
                    .with_repetition(Repetition::REPEATED)
                    .with_fields(vec![Arc::new(element)])
                    .build()?;
                Type::group_type_builder(name)
                    .with_repetition(optional)
                    .with_logical_type(Some(LogicalType::List))
                    .with_fields(vec![Arc::new(list)])
                    .build()
            }
        }
    }

    /// Appends the field's value in `data` (a record of the format's
    /// `fields`); returns the bytes it added.
    #[inline]
    fn push(&mut self, fields: &[Field], data: &[u8], big: bool) -> usize {
        let Column { field, kind, defs } = self;
        let field = &fields[*field];
        let (def, bytes) = match kind {
            Kind::Int(at, int, v) => match at.get(data, big) {
                Some(x) => {
                    v.push(x);
                    (1, usize::from(int.bytes))
                }
                None => (0, 0),
            },
            Kind::Text(t) => match field.decode(data, big) {
                Some(FieldValue::Str(s)) => {
                    t.push_text(s);
                    (1, s.len() + 8)
                }
                _ => (0, 0),
            },
            Kind::Bytes(t) => match field.raw(data, big) {
                Some(b) => {
                    t.push(b);
                    (1, b.len() + 8)
                }
                None => (0, 0),
            },
            // A row of a list: one level per element (the first opens the
            // row: repetition 0), or one level for an empty list or a null.
            Kind::List(_, v, reps) => match field.decode(data, big) {
                Some(FieldValue::Array(items)) if !items.is_empty() => {
                    for (i, item) in items.iter().enumerate() {
                        v.push(match item {
                            FieldValue::Int(x) => *x as u64,
                            FieldValue::UInt(x) => *x,
                            _ => 0,
                        });
                        reps.push(i16::from(i > 0));
                        defs.push(2);
                    }
                    return items.len() * 12;
                }
                Some(FieldValue::Array(_)) => {
                    reps.push(0);
                    (1, 0)
                }
                _ => {
                    reps.push(0);
                    (0, 0)
                }
            },
        };
        defs.push(def);
        bytes + 2
    }

    /// The column with no values yet.
    fn fresh(&self) -> Column {
        Column {
            field: self.field,
            kind: match &self.kind {
                Kind::Int(at, int, v) => Kind::Int(*at, *int, v.fresh()),
                Kind::Text(_) => Kind::Text(Texts::default()),
                Kind::List(int, v, _) => Kind::List(*int, v.fresh(), Vec::new()),
                Kind::Bytes(_) => Kind::Bytes(Texts::default()),
            },
            defs: Vec::new(),
        }
    }
}

/// The rows of one event not yet written: filled on the thread that walks
/// the records, written by a [`Sink`] (on another thread, as
/// `super::to_parquet` does it).
pub(super) struct Rows {
    /// The event's fields (the format's, in order).
    fields: Arc<[Field]>,
    ts: Vec<i64>,
    cpu: Vec<i32>,
    pid: Vec<i32>,
    comm: Texts,
    comm_defs: Vec<i16>,
    /// The buffer column, when the file has several buffers.
    buffer: Option<Texts>,
    columns: Vec<Column>,
    /// Rows held.
    rows: usize,
    /// Bytes held (an estimate: values and levels).
    pub(super) bytes: usize,
}

/// One event's Parquet file, written a row group at a time.
pub(super) struct Sink {
    writer: SerializedFileWriter<File>,
    path: PathBuf,
    /// Rows written.
    written: u64,
}

/// The names of the columns of `format`: the record's own (`ts_ns` or `ts`,
/// `cpu`, `pid`, `comm`, and `buffer` when asked) then the event's fields.
/// A record column whose name a field of the event has takes the kernel's
/// prefix (`common_pid`, `common_comm`: sched_wakeup has fields `pid` and
/// `comm`); a name still taken (a file may declare a field twice) gets
/// `_2`, `_3`, ...
pub(super) fn column_names(format: &EventFormat, ts: &str, buffer: bool) -> Vec<String> {
    let mut own = vec![ts, "cpu", "pid", "comm"];
    if buffer {
        own.push("buffer");
    }
    let fields: Vec<&str> = format.fields.iter().map(|f| f.name.as_str()).collect();
    let mut taken = std::collections::HashSet::new();
    let mut unique = |name: String| -> String {
        let mut n = name.clone();
        let mut i = 1;
        while !taken.insert(n.clone()) {
            i += 1;
            n = format!("{name}_{i}");
        }
        n
    };
    let mut names: Vec<String> = own
        .into_iter()
        .map(|o| match fields.contains(&o) {
            true => unique(format!("common_{o}")),
            false => unique(o.to_string()),
        })
        .collect();
    names.extend(fields.iter().map(|f| unique(f.to_string())));
    names
}

impl Rows {
    /// The rows of `format`'s records and the file they go to, `path`
    /// (created), its record time column named `ts` (`ts_ns` for nanosecond
    /// clocks), with a `buffer` column when `buffer`, and `meta` as the file's
    /// key-value metadata.
    pub(super) fn create(
        format: &EventFormat,
        path: &Path,
        ts: &str,
        buffer: bool,
        meta: Vec<(String, String)>,
    ) -> Result<(Rows, Sink), ExportError> {
        let columns: Vec<Column> = format
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| Column::new(f, i))
            .collect();
        let names = column_names(format, ts, buffer);
        let parquet_err = |e: ParquetError| ExportError::Parquet {
            path: path.to_path_buf(),
            source: e,
        };
        let required = Repetition::REQUIRED;
        let unsigned64 = Int {
            bytes: 8,
            signed: false,
        };
        let mut fields = vec![
            unsigned64.parquet(&names[0], required),
            Int {
                bytes: 4,
                signed: false,
            }
            .parquet(&names[1], required),
            Int {
                bytes: 4,
                signed: true,
            }
            .parquet(&names[2], required),
            Type::primitive_type_builder(&names[3], Physical::BYTE_ARRAY)
                .with_repetition(Repetition::OPTIONAL)
                .with_logical_type(Some(LogicalType::String))
                .build(),
        ];
        let own = fields.len() + usize::from(buffer);
        if buffer {
            fields.push(
                Type::primitive_type_builder(&names[4], Physical::BYTE_ARRAY)
                    .with_repetition(required)
                    .with_logical_type(Some(LogicalType::String))
                    .build(),
            );
        }
        for (c, name) in columns.iter().zip(&names[own..]) {
            fields.push(c.parquet(name));
        }
        let fields: Vec<TypePtr> = fields
            .into_iter()
            .map(|t| t.map(Arc::new))
            .collect::<Result<_, _>>()
            .map_err(parquet_err)?;
        let schema = Type::group_type_builder("schema")
            .with_fields(fields)
            .build()
            .map_err(parquet_err)?;
        let props = properties(meta);
        let writer = create_file(path, schema, props)?;
        let rows = Rows {
            fields: format.fields.clone().into(),
            ts: Vec::new(),
            cpu: Vec::new(),
            pid: Vec::new(),
            comm: Texts::default(),
            comm_defs: Vec::new(),
            buffer: buffer.then(Texts::default),
            columns,
            rows: 0,
            bytes: 0,
        };
        let sink = Sink {
            writer,
            path: path.to_path_buf(),
            written: 0,
        };
        Ok((rows, sink))
    }

    /// Whether no row is held.
    pub(super) fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The rows held, for a [`Sink`] to write; `self` is left with none.
    pub(super) fn take(&mut self) -> Rows {
        let fresh = Rows {
            fields: self.fields.clone(),
            ts: Vec::new(),
            cpu: Vec::new(),
            pid: Vec::new(),
            comm: Texts::default(),
            comm_defs: Vec::new(),
            buffer: self.buffer.as_ref().map(|_| Texts::default()),
            columns: self.columns.iter().map(Column::fresh).collect(),
            rows: 0,
            bytes: 0,
        };
        std::mem::replace(self, fresh)
    }

    /// Appends one record (`data`, its payload, in the byte order `big`).
    /// Returns whether the table is full (to be written with [`Table::flush`]).
    #[inline]
    pub(super) fn push(&mut self, c: &Common<'_>, data: &[u8], big: bool) -> bool {
        self.ts.push(c.ts as i64);
        self.cpu.push(c.cpu as i32);
        self.pid.push(c.pid);
        let mut bytes = 18;
        match c.comm {
            Some(name) => {
                self.comm.push_text(name.as_bytes());
                self.comm_defs.push(1);
                bytes += name.len() + 8;
            }
            None => self.comm_defs.push(0),
        }
        if let Some(b) = &mut self.buffer {
            b.push_text(c.buffer.as_bytes());
            bytes += c.buffer.len() + 8;
        }
        for col in &mut self.columns {
            bytes += col.push(&self.fields, data, big);
        }
        self.rows += 1;
        self.bytes += bytes;
        self.rows >= GROUP_ROWS || self.bytes >= GROUP_BYTES
    }
}

impl Sink {
    /// Writes `rows` as one row group (none when it holds no row).
    pub(super) fn write(&mut self, mut rows: Rows) -> Result<(), ExportError> {
        if rows.rows == 0 {
            return Ok(());
        }
        Sink::write_group(&mut self.writer, &mut rows).map_err(|e| ExportError::Parquet {
            path: self.path.clone(),
            source: e,
        })?;
        self.written += rows.rows as u64;
        Ok(())
    }

    fn write_group(
        writer: &mut SerializedFileWriter<File>,
        rows: &mut Rows,
    ) -> Result<(), ParquetError> {
        let mut group = writer.next_row_group()?;
        let mut c = next_column(&mut group)?;
        c.typed::<Int64Type>().write_batch(&rows.ts, None, None)?;
        c.close()?;
        let mut c = next_column(&mut group)?;
        c.typed::<Int32Type>().write_batch(&rows.cpu, None, None)?;
        c.close()?;
        let mut c = next_column(&mut group)?;
        c.typed::<Int32Type>().write_batch(&rows.pid, None, None)?;
        c.close()?;
        let mut c = next_column(&mut group)?;
        c.typed::<ByteArrayType>()
            .write_batch(&rows.comm.take(), Some(&rows.comm_defs), None)?;
        c.close()?;
        if let Some(b) = &mut rows.buffer {
            let mut c = next_column(&mut group)?;
            c.typed::<ByteArrayType>()
                .write_batch(&b.take(), None, None)?;
            c.close()?;
        }
        for col in &mut rows.columns {
            let mut c = next_column(&mut group)?;
            let defs = Some(col.defs.as_slice());
            match &mut col.kind {
                Kind::Int(_, _, Ints::Narrow(v)) => {
                    c.typed::<Int32Type>().write_batch(v, defs, None)?;
                }
                Kind::Int(_, _, Ints::Wide(v)) => {
                    c.typed::<Int64Type>().write_batch(v, defs, None)?;
                }
                Kind::Text(t) | Kind::Bytes(t) => {
                    c.typed::<ByteArrayType>()
                        .write_batch(&t.take(), defs, None)?;
                }
                Kind::List(_, Ints::Narrow(v), reps) => {
                    c.typed::<Int32Type>().write_batch(v, defs, Some(reps))?;
                }
                Kind::List(_, Ints::Wide(v), reps) => {
                    c.typed::<Int64Type>().write_batch(v, defs, Some(reps))?;
                }
            }
            c.close()?;
        }
        group.close()?;
        Ok(())
    }

    /// Writes the file's footer; returns the rows written.
    pub(super) fn close(self) -> Result<u64, ExportError> {
        let path = self.path;
        self.writer
            .close()
            .map_err(|e| ExportError::Parquet { path, source: e })?;
        Ok(self.written)
    }
}

/// The writer's properties: zstd, row-group statistics (min, max, nulls:
/// for readers to skip groups; no page index), no dictionary (zstd packs
/// repeating values as small: on the bench's traces the files came out the
/// same size within 0.1 % with text columns in dictionaries, while hashing
/// every value for a dictionary took a third of the writing thread's time),
/// `meta` as the file's key-value metadata.
fn properties(meta: Vec<(String, String)>) -> WriterProperties {
    WriterProperties::builder()
        .set_created_by(format!("trace-recipe {}", env!("CARGO_PKG_VERSION")))
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_dictionary_enabled(false)
        .set_key_value_metadata(Some(
            meta.into_iter().map(|(k, v)| KeyValue::new(k, v)).collect(),
        ))
        .build()
}

/// A Parquet writer of `schema` to the new file `path`.
fn create_file(
    path: &Path,
    schema: Type,
    props: WriterProperties,
) -> Result<SerializedFileWriter<File>, ExportError> {
    let file = File::create_new(path).map_err(|e| ExportError::Write {
        path: path.to_path_buf(),
        source: e,
    })?;
    SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props)).map_err(|e| {
        ExportError::Parquet {
            path: path.to_path_buf(),
            source: e,
        }
    })
}

/// Writes tasks.parquet to `path`: columns `pid` (INT32), `comm` (string,
/// null when unknown) and `tgid` (INT32, null when unknown), one row per
/// `(pid, comm, tgid)` of `rows`, as one row group (a task is a few bytes;
/// pids are at most 4 Mi).
pub(super) fn write_tasks(
    path: &Path,
    rows: &[(i32, Option<&str>, Option<i32>)],
) -> Result<(), ExportError> {
    let parquet_err = |e: ParquetError| ExportError::Parquet {
        path: path.to_path_buf(),
        source: e,
    };
    let int = Int {
        bytes: 4,
        signed: true,
    };
    let fields = vec![
        int.parquet("pid", Repetition::REQUIRED),
        Type::primitive_type_builder("comm", Physical::BYTE_ARRAY)
            .with_repetition(Repetition::OPTIONAL)
            .with_logical_type(Some(LogicalType::String))
            .build(),
        int.parquet("tgid", Repetition::OPTIONAL),
    ];
    let fields: Vec<TypePtr> = fields
        .into_iter()
        .map(|t| t.map(Arc::new))
        .collect::<Result<_, _>>()
        .map_err(parquet_err)?;
    let schema = Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
        .map_err(parquet_err)?;
    let mut writer = create_file(path, schema, properties(Vec::new()))?;
    let pids: Vec<i32> = rows.iter().map(|r| r.0).collect();
    let mut comms = Texts::default();
    let comm_defs: Vec<i16> = rows
        .iter()
        .map(|r| match r.1 {
            Some(c) => {
                comms.push_text(c.as_bytes());
                1
            }
            None => 0,
        })
        .collect();
    let tgids: Vec<i32> = rows.iter().filter_map(|r| r.2).collect();
    let tgid_defs: Vec<i16> = rows.iter().map(|r| i16::from(r.2.is_some())).collect();
    let mut write = || -> Result<(), ParquetError> {
        let mut group = writer.next_row_group()?;
        let mut c = next_column(&mut group)?;
        c.typed::<Int32Type>().write_batch(&pids, None, None)?;
        c.close()?;
        let mut c = next_column(&mut group)?;
        c.typed::<ByteArrayType>()
            .write_batch(&comms.take(), Some(&comm_defs), None)?;
        c.close()?;
        let mut c = next_column(&mut group)?;
        c.typed::<Int32Type>()
            .write_batch(&tgids, Some(&tgid_defs), None)?;
        c.close()?;
        group.close()?;
        Ok(())
    };
    write().map_err(parquet_err)?;
    writer.close().map_err(parquet_err)?;
    Ok(())
}

/// The next column of `group`; an error when the schema has no more.
fn next_column<'a>(
    group: &'a mut SerializedRowGroupWriter<'_, File>,
) -> Result<SerializedColumnWriter<'a>, ParquetError> {
    group
        .next_column()?
        .ok_or_else(|| ParquetError::General("a column of the schema has no values".into()))
}
