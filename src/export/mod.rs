//! `export FILE --format parquet|perfetto -o PATH`: a trace.dat for other
//! tools.
//!
//! `--format perfetto` writes one file, a Perfetto trace for Perfetto's UI
//! and trace processor ([`perfetto`] says what it holds).
//!
//! `--format parquet` writes tables (for DuckDB, polars, pandas, Spark) to a
//! folder: one Parquet file per event ([`parquet`] says its columns),
//! `tasks.parquet` (pid, comm, tgid) and `meta.json` (the kernel, the clock,
//! the events lost per CPU, where the trace came from, what was exported).
//!
//! One streaming pass over the records [`Select`] keeps (the same `-F`,
//! `--cpu`, `--pid`, `--comm`, `--from`/`--to` as `report`): each record is
//! appended to its event's table, and tables are written a row group at a
//! time, so memory stays flat whatever the file's size. A record that cannot
//! be read ends the pass: the tables hold the records before it (each file is
//! complete Parquet), meta.json says `"complete": false` and why, and the
//! error is returned.
//!
//! The folder's file names come from the file's event names (hostile input):
//! only `[A-Za-z0-9_.-]` is kept, every other byte becomes `_`, and a name
//! two events share (or `tasks`, `meta`) takes its system as a prefix.

mod parquet;
mod perfetto;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rustc_hash::{FxHashMap, FxHashSet};
use schemars::JsonSchema;
use serde::Serialize;
use tracedat::{Comms, Event, EventFormat, IntField, Learner, Record, TraceFile};

use crate::analysis::{Select, SelectArgs};
use crate::report::{Lost, RunInfo};

use self::parquet::{Common, Rows, Sink};
pub use self::perfetto::{PerfettoSummary, to_perfetto};

/// meta.json's layout version.
pub const META_FORMAT_VERSION: u32 = 1;

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The output folder holds files already.
    #[error(
        "{} is not empty: give `-o` a new folder (or an empty one), so that no table of another export is mixed in",
        .0.display()
    )]
    NotEmpty(PathBuf),
    /// The output file exists.
    #[error(
        "{} exists: give `-o` a new file, so that no other trace is overwritten",
        .0.display()
    )]
    Exists(PathBuf),
    /// A file or folder could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The Parquet writer failed.
    #[error("cannot write the Parquet file {}: {source}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// Why.
        source: ::parquet::errors::ParquetError,
    },
    /// More tables are open than the process may open files.
    #[error(
        "cannot create {}: {source}; every event with records is a file held open until the end ({open} so far): raise the limit of open files (`ulimit -n`) or export fewer events with -F",
        path.display()
    )]
    TooManyFiles {
        /// The file that could not be created.
        path: PathBuf,
        /// Tables open then.
        open: usize,
        /// Why.
        source: std::io::Error,
    },
    /// A record of the trace cannot be read (what was written holds the
    /// records before it).
    #[error("{0} (what was written holds the records before it)")]
    Trace(#[from] tracedat::Error),
}

/// Where the trace came from, for meta.json.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Provenance {
    /// The path given on the command line.
    pub input: String,
    /// `trace.dat`, `output folder` or `bundle`.
    pub kind: String,
    /// The run that recorded it (from its report.json), for a run's output
    /// folder or bundle.
    pub run: Option<RunInfo>,
    /// The options that narrowed the records (`-F`, `--cpu`, `--pid`,
    /// `--comm`, `--from`, `--to`); all empty: every record.
    pub selection: SelectArgs,
}

/// meta.json: what an export holds and where it came from.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Meta {
    /// Layout version ([`META_FORMAT_VERSION`]).
    pub format_version: u32,
    /// `trace-recipe VERSION`.
    pub tool: String,
    /// When the export was made (RFC 3339, UTC).
    pub exported: String,
    /// Whether every record the selection keeps was read. `false`: a record
    /// could not be read (`error` says which); the tables hold the records
    /// before it.
    pub complete: bool,
    /// Why the export stopped early, when it did.
    pub error: Option<String>,
    /// The trace file.
    pub source: Source,
    /// Where it came from.
    pub provenance: Provenance,
    /// The traced kernel: `uname` (the file's UNAME option: sysname,
    /// nodename, release, machine) and its release.
    pub kernel: Kernel,
    /// The trace clock (`local`, `global`, `mono`, `boot`, `counter`,
    /// `x86-tsc`, ...).
    pub clock: String,
    /// The name of the records' time column: `ts_ns` (nanoseconds) for the
    /// clocks that count nanoseconds, `ts` (the clock's own counts) for the
    /// others.
    pub ts_column: String,
    /// Events lost per CPU (keys: CPU numbers), as the kernel counted them:
    /// `overrun` and `dropped` from the file's per-CPU stats, `in_pages` from
    /// the sub-buffers read (with a selection, only those before kept
    /// records), `total` each counted once.
    pub(crate) lost_events: BTreeMap<String, Lost>,
    /// The per-CPU `total`s added up.
    pub lost_total: u64,
    /// One entry per event with records: its table.
    pub events: Vec<EventTable>,
    /// Records whose `common_type` no format of the file names (not
    /// exported).
    pub unknown_records: u64,
    /// The task table.
    pub tasks: TaskTable,
}

/// The trace file an export read.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Source {
    /// trace.dat version: 6 or 7.
    pub version: u32,
    /// The tool that wrote it (its VERSION option), if it said.
    pub writer: Option<String>,
    /// Byte order of the traced machine: `little` or `big`.
    pub byte_order: String,
    /// Its `long` size in bytes.
    pub long_size: u8,
    /// Ring-buffer page size in bytes.
    pub page_size: usize,
    /// Number of CPUs.
    pub cpus: u32,
    /// Ring buffers: `""` the top one, then instances (`-B`).
    pub buffers: Vec<String>,
}

/// The traced kernel.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Kernel {
    /// The UNAME option: `sysname nodename release machine`.
    pub uname: Option<String>,
    /// Its release (`uname -r`).
    pub release: Option<String>,
}

/// One event's table.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EventTable {
    /// The event's system (`sched`).
    pub system: String,
    /// Its name (`sched_switch`).
    pub name: String,
    /// Its id in the file (`common_type`).
    pub id: u16,
    /// The Parquet file, in the export's folder.
    pub file: String,
    /// Rows: its records.
    pub rows: u64,
}

/// tasks.parquet.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TaskTable {
    /// The Parquet file, in the export's folder.
    pub file: String,
    /// Rows: one per task.
    pub rows: u64,
}

/// The folder `dir`, created when missing; refused when it holds anything.
fn prepare(dir: &Path) -> Result<(), ExportError> {
    let write = |e| ExportError::Write {
        path: dir.to_path_buf(),
        source: e,
    };
    std::fs::create_dir_all(dir).map_err(write)?;
    if std::fs::read_dir(dir).map_err(write)?.next().is_some() {
        return Err(ExportError::NotEmpty(dir.to_path_buf()));
    }
    Ok(())
}

/// `name` as a file name: `[A-Za-z0-9_.-]` kept, every other byte `_`, no
/// leading `.`, at most 100 bytes.
fn safe_name(name: &str) -> String {
    let mut s: String = name
        .bytes()
        .take(100)
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => b as char,
            _ => '_',
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        s.insert(0, '_');
    }
    s
}

/// The file name of each format's table, by format id: `NAME.parquet`, or
/// `SYSTEM.NAME.parquet` for a name that two formats share once made safe
/// (or that is `tasks` or `meta`), with `.ID` added if still not unique.
fn table_names(file: &TraceFile) -> FxHashMap<u16, String> {
    let mut uses: FxHashMap<String, usize> = FxHashMap::default();
    for f in file.formats() {
        *uses.entry(safe_name(&f.name)).or_default() += 1;
    }
    let mut taken: FxHashSet<String> = ["tasks", "meta"].map(String::from).into_iter().collect();
    let mut names = FxHashMap::default();
    for f in file.formats() {
        let plain = safe_name(&f.name);
        let mut name = match uses[&plain] == 1 && !taken.contains(&plain) {
            true => plain,
            false => format!("{}.{plain}", safe_name(&f.system)),
        };
        if taken.contains(&name) {
            name = format!("{name}.{}", f.id);
        }
        taken.insert(name.clone());
        names.insert(f.id, format!("{name}.parquet"));
    }
    names
}

/// How the records of one format tell a task's thread group.
#[derive(Debug, Clone, Copy)]
enum GroupTell {
    /// `task:task_newtask`: `pid` is new; with CLONE_THREAD in
    /// `clone_flags` it joins its creator's group, else it leads its own.
    NewTask { pid: IntField, flags: IntField },
    /// `sched:sched_process_exec`: `pid` leads its group after exec
    /// (fs/exec.c `de_thread` gives the leader's pid to the thread that
    /// execs).
    Exec { pid: IntField },
    /// Nothing.
    None,
}

/// include/uapi/linux/sched.h.
const CLONE_THREAD: u64 = 0x0001_0000;

impl GroupTell {
    fn of(format: &EventFormat) -> GroupTell {
        let int = |name: &str| format.field(name).map(tracedat::Field::int);
        match (format.system.as_str(), format.name.as_str()) {
            ("task", "task_newtask") => match (int("pid"), int("clone_flags")) {
                (Some(pid), Some(flags)) => GroupTell::NewTask { pid, flags },
                _ => GroupTell::None,
            },
            ("sched", "sched_process_exec") => match int("pid") {
                Some(pid) => GroupTell::Exec { pid },
                None => GroupTell::None,
            },
            _ => GroupTell::None,
        }
    }
}

/// The tasks met: every pid of a record or named by one, and the saved
/// cmdlines'; their thread group where the trace tells it.
#[derive(Default)]
struct Tasks {
    pids: FxHashSet<i32>,
    tgids: FxHashMap<i32, i32>,
}

/// What the records of an export tell of tasks: their names (the saved
/// cmdlines, then the events that name tasks, as `report` learns them) and
/// thread groups. Both exports feed it every record they write.
#[derive(Default)]
struct TaskBook {
    comms: Comms,
    tasks: Tasks,
    /// By format id, worked out at the format's first record.
    per_id: Vec<Option<(Option<Learner>, GroupTell)>>,
}

/// A task's row: pid, its last name where known, its thread group where
/// known.
type TaskRow<'a> = (i32, Option<&'a str>, Option<i32>);

impl TaskBook {
    /// Learns what `ev` (a record of `file`) tells of tasks.
    fn see(&mut self, file: &TraceFile, ev: &Event<'_>) {
        let id = usize::from(ev.format.id);
        if id >= self.per_id.len() {
            self.per_id.resize_with(id + 1, || None);
        }
        let (learner, group) = self.per_id[id]
            .get_or_insert_with(|| (Learner::of(ev.format), GroupTell::of(ev.format)));
        let pid = ev.pid();
        if let Some(l) = learner
            && !self.comms.knows(l, ev)
        {
            for p in self.comms.learn_with(l, file, ev).into_iter().flatten() {
                self.tasks.pids.insert(p);
            }
        }
        self.tasks.learn(*group, ev, pid);
        self.tasks.pids.insert(pid);
    }

    /// The name of `pid` as of the records seen (`<idle>` for 0).
    fn comm<'a>(&'a self, file: &'a TraceFile, pid: i32) -> Option<&'a str> {
        match self.comms.get(file, pid) {
            None if pid == 0 => Some("<idle>"),
            c => c,
        }
    }

    /// One row per task met or named in the saved cmdlines, by pid.
    fn rows<'a>(&'a self, file: &'a TraceFile) -> Vec<TaskRow<'a>> {
        let mut pids: Vec<i32> = self
            .tasks
            .pids
            .iter()
            .copied()
            .chain(file.saved_cmdlines().iter().map(|(pid, _)| *pid))
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids.into_iter()
            .map(|pid| {
                let tgid = match pid {
                    0 => Some(0),
                    _ => self.tasks.tgids.get(&pid).copied(),
                };
                (pid, self.comm(file, pid), tgid)
            })
            .collect()
    }
}

impl Tasks {
    fn learn(&mut self, tell: GroupTell, ev: &Event<'_>, creator: i32) {
        let read = |f: IntField| f.get(&ev.data, ev.big_endian);
        match tell {
            GroupTell::NewTask { pid, flags } => {
                let (Some(pid), Some(flags)) = (read(pid), read(flags)) else {
                    return;
                };
                let pid = pid as i32;
                let tgid = match flags & CLONE_THREAD {
                    0 => Some(pid),
                    _ => self.tgids.get(&creator).copied(),
                };
                if let Some(t) = tgid {
                    self.tgids.insert(pid, t);
                }
                self.pids.insert(pid);
            }
            GroupTell::Exec { pid } => {
                if let Some(pid) = read(pid) {
                    self.tgids.insert(pid as i32, pid as i32);
                }
            }
            GroupTell::None => {}
        }
    }
}

/// Work for the thread that writes the Parquet tables.
enum Job {
    /// A table's file: the next index.
    Open(Sink),
    /// Rows of the table of that index, to be written as a row group.
    Write(usize, Rows),
}

/// The thread that writes the Parquet tables: opens and writes them as the
/// jobs say, then, once the jobs end, writes their footers; returns the rows
/// written per table, by index. Stops at its first error (the walking thread
/// learns of it when its next job cannot be sent).
fn write_groups(jobs: std::sync::mpsc::Receiver<Job>) -> Result<Vec<u64>, ExportError> {
    let mut sinks: Vec<Sink> = Vec::new();
    for job in jobs {
        match job {
            Job::Open(sink) => sinks.push(sink),
            Job::Write(i, rows) => match sinks.get_mut(i) {
                Some(sink) => sink.write(rows)?,
                None => unreachable!("a table is opened before its rows are written"),
            },
        }
    }
    sinks.into_iter().map(Sink::close).collect()
}

/// Hands `on_record` every record of `file` (those `keep` keeps, when
/// given), in time order. A record that cannot be read ends the pass and is
/// returned as `Ok(Some(error))`, for the caller to write what was read all
/// the same; an error of `on_record` (a write) ends it too, and is returned.
fn walk(
    file: &TraceFile,
    keep: Option<&mut Select>,
    mut on_record: impl FnMut(&Record<'_>) -> Result<(), ExportError>,
) -> Result<Option<tracedat::Error>, ExportError> {
    let walked = match keep {
        Some(k) => k.records(file).try_for_each_record(&mut on_record),
        None => file.records().try_for_each_record(&mut on_record),
    };
    match walked {
        Ok(()) => Ok(None),
        Err(ExportError::Trace(e)) => Ok(Some(e)),
        Err(e) => Err(e),
    }
}

/// Writes `file`'s records (those `keep` keeps, when given) into `dir` (new
/// or empty; created) as Parquet tables, tasks.parquet and meta.json, with
/// `provenance` in meta.json. Returns meta.json's content.
///
/// Errors: `dir` not empty or not writable, a Parquet write, too many events
/// for the open-file limit, or a record that cannot be read (then the tables
/// and meta.json are written first, with the records before it).
pub fn to_parquet(
    file: &TraceFile,
    keep: Option<&mut Select>,
    dir: &Path,
    provenance: Provenance,
) -> Result<Meta, ExportError> {
    prepare(dir)?;
    let names = table_names(file);
    let ns = file.ns_timestamps();
    let ts_column = if ns { "ts_ns" } else { "ts" };
    let buffers = file.buffers();
    let several = buffers.len() > 1;
    let big = file.big_endian();

    let mut tables: Vec<(u16, Rows)> = Vec::new();
    // By format id: its table's index in `tables`.
    let mut per_id: Vec<Option<usize>> = Vec::new();
    let mut book = TaskBook::default();
    let mut in_pages: BTreeMap<u32, u64> = BTreeMap::new();
    let mut unknown = 0u64;
    // Bytes all tables hold.
    let mut held = 0usize;

    // The row groups are encoded, compressed and written by a thread of
    // their own (each table's file is its [`Sink`], held there), while this
    // one walks the records. A group is handed over without a queue (the
    // walk waits until the writer takes it), so the memory stays bounded at
    // what the tables hold and the one group being written.
    let (unread, written) = std::thread::scope(|scope| {
        let (jobs, for_writer) = std::sync::mpsc::sync_channel::<Job>(0);
        let mut writer = Some(scope.spawn(move || write_groups(for_writer)));
        // A job for the writing thread; when it has stopped, its error. The
        // sending end is moved in: dropping `send` ends the jobs.
        let stopped = &mut writer;
        let mut send = move |job: Job| -> Result<(), ExportError> {
            if jobs.send(job).is_ok() {
                return Ok(());
            }
            match stopped.take().map(|w| w.join()) {
                Some(Ok(Err(e))) => Err(e),
                Some(Err(panic)) => std::panic::resume_unwind(panic),
                _ => unreachable!("the writing thread stops only on an error"),
            }
        };
        let on_record = |rec: &Record<'_>| -> Result<(), ExportError> {
            let ev = match rec {
                Record::Event(ev) => ev,
                Record::Lost { cpu, count, .. } => {
                    *in_pages.entry(*cpu).or_default() += count.unwrap_or(0);
                    return Ok(());
                }
            };
            if file.is_unknown(ev.format) {
                unknown += 1;
                return Ok(());
            }
            let id = usize::from(ev.format.id);
            if id >= per_id.len() {
                per_id.resize_with(id + 1, || None);
            }
            let table = match &mut per_id[id] {
                Some(t) => *t,
                empty => {
                    let path = dir.join(&names[&ev.format.id]);
                    let meta = vec![
                        ("trace-recipe.system".into(), ev.format.system.clone()),
                        ("trace-recipe.event".into(), ev.format.name.clone()),
                        ("trace-recipe.clock".into(), file.clock().to_string()),
                        ("trace-recipe.print_fmt".into(), ev.format.print_fmt.clone()),
                    ];
                    let (rows, sink) = Rows::create(ev.format, &path, ts_column, several, meta)
                        .map_err(|e| match e {
                            ExportError::Write { path, source }
                                if source.raw_os_error() == Some(libc::EMFILE) =>
                            {
                                ExportError::TooManyFiles {
                                    path,
                                    open: tables.len(),
                                    source,
                                }
                            }
                            e => e,
                        })?;
                    send(Job::Open(sink))?;
                    tables.push((ev.format.id, rows));
                    *empty.insert(tables.len() - 1)
                }
            };
            book.see(file, ev);
            let pid = ev.pid();
            let rows = &mut tables[table].1;
            let before = rows.bytes;
            let full = rows.push(
                &Common {
                    ts: ev.ts,
                    cpu: ev.cpu,
                    pid,
                    comm: book.comm(file, pid),
                    buffer: ev.buffer,
                },
                &ev.data,
                big,
            );
            held = held + rows.bytes - before;
            if full {
                held -= rows.bytes;
                send(Job::Write(table, rows.take()))?;
            }
            if held > parquet::BUFFERED_BYTES
                && let Some((i, (_, largest))) = tables
                    .iter_mut()
                    .enumerate()
                    .max_by_key(|(_, (_, t))| t.bytes)
            {
                held -= largest.bytes;
                send(Job::Write(i, largest.take()))?;
            }
            Ok(())
        };
        let unread = walk(file, keep, on_record)?;
        for (i, (_, rows)) in tables.iter_mut().enumerate() {
            if !rows.is_empty() {
                send(Job::Write(i, rows.take()))?;
            }
        }
        drop(send);
        let written = match writer.take().map(|w| w.join()) {
            Some(Ok(written)) => written?,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => unreachable!("the writing thread is joined once"),
        };
        Ok::<_, ExportError>((unread, written))
    })?;
    let mut events = Vec::new();
    for ((id, _), rows) in tables.iter().zip(written) {
        if let Some(f) = file.format_by_id(*id) {
            events.push(EventTable {
                system: f.system.clone(),
                name: f.name.clone(),
                id: *id,
                file: names[id].clone(),
                rows,
            });
        }
    }
    events.sort_by(|a, b| (&a.system, &a.name, a.id).cmp(&(&b.system, &b.name, b.id)));
    let rows = book.rows(file);
    parquet::write_tasks(&dir.join("tasks.parquet"), &rows)?;
    let lost_events = Lost::per_cpu(file, &in_pages);
    let meta = Meta {
        format_version: META_FORMAT_VERSION,
        tool: format!("trace-recipe {}", env!("CARGO_PKG_VERSION")),
        exported: jiff::Timestamp::now().to_string(),
        complete: unread.is_none(),
        error: unread.as_ref().map(ToString::to_string),
        source: Source {
            version: file.version(),
            writer: file.writer_version().map(str::to_string),
            byte_order: if big { "big" } else { "little" }.into(),
            long_size: file.long_size(),
            page_size: file.page_size(),
            cpus: file.cpu_count(),
            buffers,
        },
        provenance,
        kernel: Kernel {
            uname: file.uname().map(str::to_string),
            release: crate::report::uname_release(file).map(str::to_string),
        },
        clock: file.clock().to_string(),
        ts_column: ts_column.to_string(),
        lost_total: lost_events.values().map(|l| l.total).sum(),
        lost_events,
        events,
        unknown_records: unknown,
        tasks: TaskTable {
            file: "tasks.parquet".into(),
            rows: rows.len() as u64,
        },
    };
    let path = dir.join("meta.json");
    std::fs::write(&path, crate::output::to_json(&meta))
        .map_err(|e| ExportError::Write { path, source: e })?;
    match unread {
        Some(e) => Err(ExportError::Trace(e)),
        None => Ok(meta),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_keep_only_safe_bytes() {
        assert_eq!(safe_name("sched_switch"), "sched_switch");
        assert_eq!(safe_name("../../etc/passwd"), "_.._.._etc_passwd");
        assert_eq!(safe_name(".hidden"), "_.hidden");
        assert_eq!(safe_name(""), "_");
        assert_eq!(safe_name("a\nb\u{1b}[31m"), "a_b__31m");
        assert_eq!(safe_name(&"x".repeat(300)).len(), 100);
    }

    #[test]
    fn column_names_never_repeat() {
        let f = EventFormat::parse(
            "sched",
            "name: sched_wakeup\nID: 3\nformat:\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\
\tfield:int cpu;\toffset:28;\tsize:4;\tsigned:1;\n\
\tfield:int common_cpu;\toffset:32;\tsize:4;\tsigned:1;\n\
\tfield:int pid;\toffset:36;\tsize:4;\tsigned:1;\n\nprint fmt: \"\"\n",
        )
        .unwrap();
        assert_eq!(
            parquet::column_names(&f, "ts_ns", true),
            [
                "ts_ns",
                "common_cpu",
                "common_pid",
                "common_comm",
                "buffer",
                "comm",
                "pid",
                "cpu",
                "common_cpu_2",
                "pid_2"
            ]
        );
    }
}
