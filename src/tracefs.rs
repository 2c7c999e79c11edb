//! tracefs: locating (and if needed mounting) it ([`Tracefs`]), the handle of
//! one ring buffer, the top level or a named instance ([`Instance`], after
//! libtracefs' `tracefs_instance`) with its file reads and writes, and the
//! `error_log` text the kernel leaves when it refuses a write; plus the table
//! of how each tracefs file reads back and is restored (`FILE_RULES`).
//!
//! Source of truth: Documentation/trace/ftrace.rst ("The File System") and
//! Documentation/trace/events.rst. Tracefs files report size 0 in `stat`, so every
//! read reads to the end.

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where tracefs is usually mounted.
pub(crate) const TRACEFS_MOUNT: &str = "/sys/kernel/tracing";
/// The older place, inside debugfs.
pub(crate) const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";
/// Prefix of every instance a run creates: `trace-recipe-NAME-PID`.
pub const INSTANCE_PREFIX: &str = "trace-recipe-";

/// Attempts at one tracefs write that keeps being interrupted (`EINTR`)
/// before it is reported as failed ([`Instance::write`]).
pub const WRITE_TRIES: usize = 8;

/// A failed tracefs operation: which file, what was written, the errno, and the
/// kernel's `error_log` entry when it left one.
#[derive(Debug, thiserror::Error)]
pub enum TracefsError {
    /// tracefs is not mounted and could not be mounted.
    #[error(
        "tracefs is not mounted at {TRACEFS_MOUNT} and mounting it failed: {source}\n  = help: mount it with `mount -t tracefs nodev {TRACEFS_MOUNT}` (needs root and CONFIG_FTRACE)"
    )]
    NotMounted {
        /// Why the mount failed.
        source: std::io::Error,
    },
    /// Not root: tracefs is writable only by root.
    #[error(
        "trace-recipe needs root: tracefs ({path}) can be read and written by root only, and this process lacks CAP_SYS_ADMIN\n  = help: run it with sudo"
    )]
    NotRoot {
        /// The tracefs root.
        path: PathBuf,
    },
    /// Reading a tracefs file failed.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The kernel refused a write.
    #[error("writing {:?} to {} failed: {source}{}", abbreviate(.value), .path.display(), .error_log.as_ref().map(|l| format!("\n  error_log: {}", l.trim_end().replace('\n', "\n             "))).unwrap_or_default())]
    Write {
        /// The file.
        path: PathBuf,
        /// The value written.
        value: String,
        /// The I/O error (errno).
        source: std::io::Error,
        /// The kernel's explanation from `error_log`, when it left one.
        error_log: Option<String>,
    },
    /// Creating or removing a directory (an instance) failed.
    #[error("cannot {op} {}: {source}", .path.display())]
    Dir {
        /// `mkdir` or `rmdir`.
        op: &'static str,
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// `value` cut to 200 characters for messages, with the full length said.
fn abbreviate(value: &str) -> String {
    match value.char_indices().nth(200) {
        Some((at, _)) => format!("{}... ({} bytes)", &value[..at], value.len()),
        None => value.to_string(),
    }
}

/// How a write opens its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// `O_TRUNC`: replace the content (`echo X > file`).
    Replace,
    /// `O_APPEND`: add to the content (`echo X >> file`), as triggers and probe
    /// definitions need.
    Append,
}

impl WriteMode {
    /// The shell redirection that opens a file this way: `>` or `>>`.
    pub(crate) fn redirection(self) -> &'static str {
        match self {
            WriteMode::Replace => ">",
            WriteMode::Append => ">>",
        }
    }
}

/// A mounted tracefs. Its `read*`, `exists` and `list` take paths relative to
/// the root; writes go through an [`Instance`].
///
/// Clones (and the instances made from them) share one record, per instance's
/// `error_log`, of the newest entry that was there before this process's
/// writes, so that a refused write is explained only by the entries written
/// after it, never by an older one.
#[derive(Debug, Clone)]
pub struct Tracefs {
    root: PathBuf,
    error_marks:
        std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Option<String>>>>,
}

impl Tracefs {
    /// Uses tracefs at `root` as it is (tests, or a known mount point).
    pub fn at(root: impl Into<PathBuf>) -> Tracefs {
        Tracefs {
            root: root.into(),
            error_marks: Default::default(),
        }
    }

    /// Finds tracefs, mounting it at `TRACEFS_MOUNT` (falling back to debugfs's
    /// `tracing`) when it is not mounted. Returns a note saying what was mounted.
    ///
    /// Errors: [`TracefsError::NotRoot`] when it is not visible and we may not
    /// mount it; [`TracefsError::NotMounted`] when mounting fails.
    pub fn locate_or_mount() -> Result<(Tracefs, Option<String>), TracefsError> {
        for place in [TRACEFS_MOUNT, DEBUGFS_TRACING] {
            if Path::new(place).join("trace").exists() {
                return Ok((Tracefs::at(place), None));
            }
        }
        if !rustix::process::geteuid().is_root() {
            return Err(TracefsError::NotRoot {
                path: PathBuf::from(TRACEFS_MOUNT),
            });
        }
        match mount("tracefs", TRACEFS_MOUNT) {
            Ok(()) => Ok((
                Tracefs::at(TRACEFS_MOUNT),
                Some(format!(
                    "note: tracefs was not mounted; mounted it at {TRACEFS_MOUNT}"
                )),
            )),
            Err(first) => {
                if mount("debugfs", "/sys/kernel/debug").is_ok()
                    && Path::new(DEBUGFS_TRACING).join("trace").exists()
                {
                    return Ok((
                        Tracefs::at(DEBUGFS_TRACING),
                        Some(format!("note: mounted debugfs; using {DEBUGFS_TRACING}")),
                    ));
                }
                Err(TracefsError::NotMounted { source: first })
            }
        }
    }

    /// Fails with [`TracefsError::NotRoot`] unless this process may write tracefs.
    pub(crate) fn require_root(&self) -> Result<(), TracefsError> {
        if rustix::process::geteuid().is_root() {
            Ok(())
        } else {
            Err(TracefsError::NotRoot {
                path: self.root.clone(),
            })
        }
    }

    /// The tracefs root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Absolute path of `rel` (relative to the tracefs root; a leading `/` is
    /// ignored, so `format!("{instance}/trace")` works for the top level too).
    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        // `{instance}/file` with the top level's instance "" is `/file`.
        self.root.join(rel.trim_start_matches('/'))
    }

    /// Reads a whole tracefs file as text.
    pub fn read(&self, rel: &str) -> Result<String, TracefsError> {
        let bytes = self.read_bytes(rel)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Reads a whole tracefs file as bytes.
    ///
    /// The first `read(2)` asks for 64 KiB: some tracefs files (`events/header_page`,
    /// `header_event`) answer only a read at offset 0 and return end-of-file for
    /// any later read, so a small first read would truncate them.
    pub(crate) fn read_bytes(&self, rel: &str) -> Result<Vec<u8>, TracefsError> {
        let path = self.path(rel);
        read_all(&path).map_err(|source| TracefsError::Read { path, source })
    }

    /// Whether `rel` exists.
    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    /// Names of the files and directories in directory `rel`, sorted (empty
    /// when it cannot be read).
    pub fn list(&self, rel: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.path(rel))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir() || t.is_file()))
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// Names of the instances (directories under `instances/`), sorted.
    pub fn instances(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path("instances"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

/// One ring buffer of tracefs and its files, as libtracefs' `tracefs_instance`:
/// the top level (the root, libtracefs' NULL instance) or a named instance
/// under `instances/`. File names are relative to the instance; a write that
/// the kernel refuses is explained by this instance's `error_log` entries that
/// the write caused (Documentation/trace/ftrace.rst, "Instances", "error_log").
/// Probe definitions (`kprobe_events`, `uprobe_events`) and global knobs live
/// at the top level only.
#[derive(Debug, Clone)]
pub struct Instance {
    tracefs: Tracefs,
    /// `None`: the top level.
    name: Option<String>,
}

impl Instance {
    /// The top level of `tracefs`.
    pub fn top(tracefs: &Tracefs) -> Instance {
        Instance {
            tracefs: tracefs.clone(),
            name: None,
        }
    }

    /// The instance `instances/NAME` of `tracefs` (which may not exist yet:
    /// see [`Instance::create`]).
    pub fn named(tracefs: &Tracefs, name: &str) -> Instance {
        Instance {
            tracefs: tracefs.clone(),
            name: Some(name.to_string()),
        }
    }

    /// The instance whose directory relative to tracefs is `dir`, as plans
    /// and journals name it: `instances/NAME`, or "" for the top level.
    pub(crate) fn at_dir(tracefs: &Tracefs, dir: &str) -> Instance {
        match dir.strip_prefix("instances/") {
            Some(name) => Instance::named(tracefs, name),
            None => Instance::top(tracefs),
        }
    }

    /// The instance that holds `rel` (a path relative to tracefs, as plans and
    /// journals name files), and the path inside it:
    /// `instances/NAME/events/a/b/filter` is `events/a/b/filter` of `NAME`;
    /// anything else is the top level's.
    pub(crate) fn holding<'a>(tracefs: &Tracefs, rel: &'a str) -> (Instance, &'a str) {
        match rel
            .strip_prefix("instances/")
            .and_then(|rest| rest.split_once('/'))
        {
            Some((name, file)) => (Instance::named(tracefs, name), file),
            None => (Instance::top(tracefs), rel),
        }
    }

    /// The tracefs this instance belongs to.
    pub(crate) fn tracefs(&self) -> &Tracefs {
        &self.tracefs
    }

    /// The instance's name; `None` for the top level.
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The instance's directory relative to tracefs: `instances/NAME`, or ""
    /// for the top level.
    pub fn dir(&self) -> String {
        instance_file(self.name(), "")
    }

    /// `file` of this instance as a path relative to tracefs.
    pub(crate) fn rel(&self, file: &str) -> String {
        instance_file(self.name(), file)
    }

    /// Absolute path of `file` of this instance.
    pub(crate) fn path(&self, file: &str) -> PathBuf {
        self.tracefs.path(&self.rel(file))
    }

    /// Whether `file` (or the instance itself, for "") exists.
    pub fn exists(&self, file: &str) -> bool {
        self.path(file).exists()
    }

    /// Reads a whole file of this instance as text; see [`Tracefs::read`].
    pub fn read(&self, file: &str) -> Result<String, TracefsError> {
        self.tracefs.read(&self.rel(file))
    }

    /// Reads a whole file of this instance as bytes; see `Tracefs::read_bytes`.
    pub fn read_bytes(&self, file: &str) -> Result<Vec<u8>, TracefsError> {
        self.tracefs.read_bytes(&self.rel(file))
    }

    /// Names in directory `dir` of this instance, sorted; see [`Tracefs::list`].
    pub fn list(&self, dir: &str) -> Vec<String> {
        self.tracefs.list(&self.rel(dir))
    }

    /// Writes `value` to `file` of this instance in one `write(2)`. A write
    /// interrupted by a signal (`EINTR`: the kernel applied nothing) is tried
    /// again, [`WRITE_TRIES`] times in all; any other refusal, `EBUSY`
    /// included, is returned at once (the caller rolls back: a busy file stays
    /// busy while whatever holds it does, and waiting for it would be a guess
    /// at a time). Errors:
    /// [`TracefsError::Write`] with the errno and the entries this write added
    /// to the instance's `error_log` (never an older entry: the first write of
    /// a [`Tracefs`] and its clones into an instance marks the newest entry
    /// already there). The top level's `error_log` also explains refused
    /// probe definitions.
    pub fn write(&self, file: &str, value: &str, mode: WriteMode) -> Result<(), TracefsError> {
        let path = self.path(file);
        self.mark_error_log();
        let mut opts = OpenOptions::new();
        opts.write(true);
        match mode {
            WriteMode::Replace => opts.truncate(true),
            WriteMode::Append => opts.append(true),
        };
        opts.custom_flags(libc::O_CLOEXEC);
        // The filter files parse a pattern when whitespace ends it; one left
        // unterminated is parsed when the file is closed, where the kernel
        // drops the error (kernel/trace/ftrace.c, `ftrace_regex_write` and
        // `ftrace_regex_release`): a newline makes a refused pattern fail here.
        let terminated;
        let value_bytes = match file.rsplit('/').next() {
            Some(
                "set_ftrace_filter" | "set_ftrace_notrace" | "set_graph_function"
                | "set_graph_notrace" | "stack_trace_filter",
            ) if !value.ends_with('\n') => {
                terminated = format!("{value}\n");
                terminated.as_bytes()
            }
            _ => value.as_bytes(),
        };
        let attempt = || {
            crate::fault::tracefs_write(&path)?;
            opts.open(&path).and_then(|mut f| f.write_all(value_bytes))
        };
        let mut result = attempt();
        for _ in 1..WRITE_TRIES {
            match &result {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => result = attempt(),
                _ => break,
            }
        }
        result.map_err(|source| TracefsError::Write {
            error_log: self.error_log_since_mark(),
            path,
            value: value.to_string(),
            source,
        })
    }

    /// Creates the named instance (`mkdir instances/NAME`): the kernel gives it
    /// its own ring buffer, events and options. Errors: [`TracefsError::Dir`]
    /// (it exists, or instances are unsupported); the top level always exists.
    pub fn create(&self) -> Result<(), TracefsError> {
        self.dir_op("mkdir", |p| std::fs::create_dir(p))
    }

    /// Quiesces and removes the named instance: turns its tracing and every
    /// event in it off (a probe event still enabled in it, or tracing on, keeps
    /// rmdir from succeeding on some kernels; failures there are ignored), then
    /// `rmdir instances/NAME`. Errors: [`TracefsError::Dir`], e.g. EBUSY while
    /// a reader holds one of its files open.
    pub fn destroy(&self) -> Result<(), TracefsError> {
        let _ = self.write("tracing_on", "0", WriteMode::Replace);
        let _ = self.write("events/enable", "0", WriteMode::Replace);
        self.dir_op("rmdir", |p| std::fs::remove_dir(p))
    }

    /// The entries of this instance's `error_log`, oldest first: each starts
    /// with a `[timestamp]` line, followed by its command and caret lines.
    fn error_log_entries(&self) -> Vec<String> {
        let mut entries: Vec<String> = Vec::new();
        for line in self.read("error_log").unwrap_or_default().lines() {
            match entries.last_mut() {
                Some(e) if !line.starts_with('[') => {
                    e.push('\n');
                    e.push_str(line);
                }
                _ => entries.push(line.to_string()),
            }
        }
        entries
    }

    /// Records the newest entry of this instance's `error_log` the first time
    /// the [`Tracefs`] (or a clone) writes into it: later entries are then
    /// ours to explain.
    fn mark_error_log(&self) {
        let mut marks = self
            .tracefs
            .error_marks
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        marks
            .entry(self.dir())
            .or_insert_with(|| self.error_log_entries().pop());
    }

    /// The entries of this instance's `error_log` after the marked one,
    /// joined, or `None` when the kernel added none; moves the mark to the
    /// newest entry. When the marked entry has rotated out of the log (it keeps
    /// the last 16), every entry is new.
    fn error_log_since_mark(&self) -> Option<String> {
        let entries = self.error_log_entries();
        let mut marks = self
            .tracefs
            .error_marks
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let dir = self.dir();
        let mark = marks.get(&dir).cloned().flatten();
        let start = mark
            .and_then(|m| entries.iter().rposition(|e| *e == m))
            .map_or(0, |i| i + 1);
        marks.insert(dir, entries.last().cloned());
        let new = &entries[start..];
        (!new.is_empty()).then(|| new.join("\n"))
    }

    fn dir_op(
        &self,
        op: &'static str,
        f: impl FnOnce(&Path) -> std::io::Result<()>,
    ) -> Result<(), TracefsError> {
        let path = self.tracefs.path(&self.dir());
        let result = match self.name {
            Some(_) => f(&path),
            None => Err(std::io::Error::from(std::io::ErrorKind::InvalidInput)),
        };
        result.map_err(|source| TracefsError::Dir { op, path, source })
    }
}

/// `file` of instance `name` (`None`: the top level) as a path relative to
/// tracefs, without touching it: `instances/NAME/FILE`, or `FILE`; with `file`
/// "" the instance's directory. What plans and journals record; [`Instance`]
/// is the handle that reads and writes it.
pub(crate) fn instance_file(name: Option<&str>, file: &str) -> String {
    match (name, file) {
        (Some(n), "") => format!("instances/{n}"),
        (Some(n), f) => format!("instances/{n}/{f}"),
        (None, f) => f.to_string(),
    }
}

/// A tracing switch that lives in /proc/sys rather than tracefs. A closed set:
/// a journal names one by [`Sysctl::name`] and is replayed only for these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sysctl {
    /// `kernel.stack_tracer_enabled`: the stack tracer on (1) or off (0).
    StackTracerEnabled,
}

impl Sysctl {
    /// Every sysctl a plan may write.
    pub(crate) const ALL: &[Sysctl] = &[Sysctl::StackTracerEnabled];

    /// The name under /proc/sys, as journals record it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Sysctl::StackTracerEnabled => "kernel/stack_tracer_enabled",
        }
    }

    /// The file.
    pub(crate) fn path(self) -> std::path::PathBuf {
        std::path::Path::new("/proc/sys").join(self.name())
    }

    /// Reads it (whitespace trimmed).
    pub(crate) fn read(self) -> Result<String, TracefsError> {
        let path = self.path();
        std::fs::read_to_string(&path)
            .map(|v| v.trim().to_string())
            .map_err(|source| TracefsError::Read { path, source })
    }

    /// Writes `value` to it.
    pub(crate) fn write(self, value: &str) -> Result<(), TracefsError> {
        let path = self.path();
        std::fs::write(&path, format!("{value}\n")).map_err(|source| TracefsError::Write {
            path,
            value: value.to_string(),
            source,
            error_log: None,
        })
    }

    /// The sysctl a journal names, if it is one of [`Sysctl::ALL`].
    pub(crate) fn named(name: &str) -> Option<Sysctl> {
        Sysctl::ALL.iter().copied().find(|s| s.name() == name)
    }
}

/// How a kind of tracefs file reads back: the rule that turns what a read
/// returns into the value that, written back, restores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Readback {
    /// The first word (`tracing_on`, `current_tracer`, `max_graph_depth`, ...).
    FirstWord,
    /// The bracketed choice of a list (`trace_clock`: `local [mono] global`).
    Bracketed,
    /// One function per line; `#` comment lines when empty
    /// (`#### all functions enabled ####`).
    FunctionList,
    /// One pid per line; `no pid` when empty.
    PidList,
    /// Every line (probe definitions, `set_event`), joined by newlines.
    Lines,
    /// An event filter: `none` when unset, cleared by writing `0`.
    Filter,
    /// An event's `enable`: `0`/`1`, with `*` when a trigger soft-disables it.
    Enable,
    /// `buffer_size_kb`: `1408`, or `7 (expanded: 1408)` while the top-level
    /// ring buffer is still unallocated since boot.
    BufferSize,
}

/// One kind of tracefs file: how it reads back and, for the top-level files
/// `status` checks, its value after a clean boot (in restore form, see
/// [`restore_value`]). Sources: Documentation/trace/ftrace.rst, events.rst,
/// kprobetrace.rst, uprobetracer.rst.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FileRule {
    /// The file's name (the last path component).
    pub(crate) name: &'static str,
    /// How it reads back.
    pub(crate) readback: Readback,
    /// Its boot default, when `status` compares the top level's with it.
    pub(crate) boot_default: Option<&'static str>,
}

/// Every tracefs file the tool writes, restores or checks; any other file
/// reads back as [`Readback::FirstWord`] with no boot default.
pub(crate) const FILE_RULES: &[FileRule] = &[
    rule("tracing_on", Readback::FirstWord, Some("1")),
    rule("current_tracer", Readback::FirstWord, Some("nop")),
    rule("set_event", Readback::Lines, Some("")),
    rule("set_event_pid", Readback::PidList, Some("")),
    rule("set_event_notrace_pid", Readback::PidList, Some("")),
    rule("set_ftrace_pid", Readback::PidList, Some("")),
    rule("set_ftrace_notrace_pid", Readback::PidList, Some("")),
    rule("set_ftrace_filter", Readback::FunctionList, Some("")),
    rule("set_ftrace_notrace", Readback::FunctionList, Some("")),
    rule("set_graph_function", Readback::FunctionList, Some("")),
    rule("set_graph_notrace", Readback::FunctionList, Some("")),
    rule("stack_trace_filter", Readback::FunctionList, None),
    rule("tracing_thresh", Readback::FirstWord, Some("0")),
    rule("kprobe_events", Readback::Lines, Some("")),
    rule("uprobe_events", Readback::Lines, Some("")),
    rule("dynamic_events", Readback::Lines, Some("")),
    rule("trace_clock", Readback::Bracketed, Some("local")),
    // hwlat_detector/mode: `none [round-robin] per-cpu`.
    rule("mode", Readback::Bracketed, None),
    rule("buffer_size_kb", Readback::BufferSize, None),
    rule("filter", Readback::Filter, None),
    rule("enable", Readback::Enable, None),
];

const fn rule(
    name: &'static str,
    readback: Readback,
    boot_default: Option<&'static str>,
) -> FileRule {
    FileRule {
        name,
        readback,
        boot_default,
    }
}

/// The rule of `file` (a path relative to tracefs; only its last component counts).
pub(crate) fn file_rule(file: &str) -> FileRule {
    let name = file.rsplit('/').next().unwrap_or(file);
    FILE_RULES
        .iter()
        .find(|r| r.name == name)
        .copied()
        .unwrap_or(FileRule {
            name: "",
            readback: Readback::FirstWord,
            boot_default: None,
        })
}

/// The value to write to `file` to restore what reading it returned (`old`),
/// by its [`Readback`] rule. Also the canonical form in which `status`
/// compares a file with its boot default.
pub(crate) fn restore_value(file: &str, old: &str) -> String {
    let items = |skip: &dyn Fn(&str) -> bool| {
        old.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !skip(l))
            .collect::<Vec<_>>()
    };
    match file_rule(file).readback {
        Readback::FirstWord => old.split_whitespace().next().unwrap_or("").to_string(),
        Readback::Bracketed => bracketed(old)
            .or_else(|| (!file.ends_with("trace_clock")).then(|| old.split_whitespace().next())?)
            .unwrap_or("local")
            .to_string(),
        Readback::FunctionList => items(&|l| l.starts_with('#')).join(" "),
        Readback::PidList => items(&|l| l == "no pid").join(" "),
        Readback::Lines => items(&|_| false).join("\n"),
        Readback::Filter => match old.trim() {
            "none" | "" => "0".into(),
            f => f.to_string(),
        },
        Readback::Enable => old.trim().trim_end_matches('*').to_string(),
        Readback::BufferSize => old
            .split("expanded: ")
            .nth(1)
            .and_then(|e| e.split(')').next())
            .unwrap_or_else(|| old.split_whitespace().next().unwrap_or(""))
            .to_string(),
    }
}

/// First line of `value` in `[brackets]` among words, e.g. the current clock of
/// `trace_clock` (`"local global [mono]"` → `mono`).
pub(crate) fn bracketed(value: &str) -> Option<&str> {
    value
        .split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
}

/// Words of a list file such as `available_tracers`, brackets removed.
pub(crate) fn words(value: &str) -> Vec<String> {
    value
        .split_whitespace()
        .map(|w| w.trim_start_matches('[').trim_end_matches(']').to_string())
        .collect()
}

/// Reads `path` to the end with large reads (see `Tracefs::read_bytes`).
pub fn read_all(path: &Path) -> std::io::Result<Vec<u8>> {
    tracedat::read_tracefs_file(path).map_err(|e| match e {
        tracedat::Error::Io { source, .. } => source,
        other => std::io::Error::other(other.to_string()),
    })
}

fn mount(fstype: &str, target: &str) -> Result<(), std::io::Error> {
    let src = CString::new("nodev").map_err(std::io::Error::other)?;
    let fs = CString::new(fstype).map_err(std::io::Error::other)?;
    let tgt = CString::new(target).map_err(std::io::Error::other)?;
    // SAFETY: all pointers are valid NUL-terminated strings that outlive the call;
    // data is null, which mount(2) accepts.
    let rc = unsafe { libc::mount(src.as_ptr(), tgt.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The number after `name` (e.g. `overrun:`) in a `per_cpu/cpuN/stats` text; 0 if absent.
pub(crate) fn cpu_stat(stats: &str, name: &str) -> u64 {
    stats
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
        .unwrap_or(0)
}

/// Overrun + dropped events from a `per_cpu/cpuN/stats` text.
pub(crate) fn lost_from_stats(stats: &str) -> (u64, u64) {
    (
        cpu_stat(stats, "overrun:"),
        cpu_stat(stats, "dropped events:"),
    )
}

/// A kernel effect of applying a plan that no undo can reverse (schema in
/// report.json's `irreversible`).
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub(crate) struct Irreversible {
    /// What happens, one sentence.
    pub(crate) effect: String,
    /// The tracefs file that shows it.
    pub(crate) file: String,
    /// How the file reads before.
    pub(crate) before: String,
    /// How it reads after.
    pub(crate) after: String,
    /// Whether it was declared before the run (`check --plan`, the run's first
    /// lines); `false`: only observed afterwards.
    pub(crate) declared: bool,
}

#[cfg(test)]
mod tests {
    use super::{Instance, Tracefs, lost_from_stats, restore_value};

    #[test]
    fn a_path_belongs_to_its_instance_or_to_the_top_level() {
        let t = Tracefs::at("/nonexistent");
        let (i, file) = Instance::holding(&t, "instances/trace-recipe-x-1/events/a/b/filter");
        assert_eq!(
            (i.name(), file),
            (Some("trace-recipe-x-1"), "events/a/b/filter")
        );
        assert_eq!(i.dir(), "instances/trace-recipe-x-1");
        assert_eq!(i.rel(file), "instances/trace-recipe-x-1/events/a/b/filter");
        let (i, file) = Instance::holding(&t, "kprobe_events");
        assert_eq!((i.name(), file), (None, "kprobe_events"));
        assert_eq!(Instance::holding(&t, "events/a/b/filter").0.dir(), "");
        assert_eq!(
            Instance::at_dir(&t, "instances/x").rel("trace"),
            "instances/x/trace"
        );
        assert_eq!(Instance::at_dir(&t, "").rel("trace"), "trace");
    }

    #[test]
    fn before_images_become_the_value_that_restores_them() {
        assert_eq!(
            restore_value("i/trace_clock", "local [mono] global\n"),
            "mono"
        );
        assert_eq!(restore_value("max_graph_depth", "0\n"), "0");
        assert_eq!(
            restore_value("set_graph_function", "#### all functions enabled ####\n"),
            ""
        );
        assert_eq!(
            restore_value("set_graph_function", "vfs_read\nvfs_write\n"),
            "vfs_read vfs_write"
        );
        assert_eq!(restore_value("set_ftrace_pid", "no pid\n"), "");
        assert_eq!(restore_value("set_event_pid", "12\n34\n"), "12 34");
        assert_eq!(restore_value("events/a/b/filter", "none\n"), "0");
        assert_eq!(restore_value("events/a/b/filter", "ret < 0\n"), "ret < 0");
        assert_eq!(
            restore_value("buffer_size_kb", "7 (expanded: 1408)\n"),
            "1408"
        );
        assert_eq!(restore_value("events/a/b/enable", "0*\n"), "0");
    }

    #[test]
    fn lost_counts_come_from_stats() {
        let s = "entries: 0\noverrun: 12\ncommit overrun: 0\nbytes: 0\ndropped events: 3\nread events: 9\n";
        assert_eq!(lost_from_stats(s), (12, 3));
    }
}
