//! The `fields` analysis: for each recorded event no `[[answer]]` names, the
//! top values of its telling fields per task, so that a recipe that only
//! names events still answers "which" and "who".
//!
//! A field is telling when the event's format says it names something
//! rather than counts something:
//! * text: a character field the print fmt prints with `%s` (an exec's
//!   `filename`, a signal's target `comm`);
//! * an enum: a field the print fmt shows through `__print_symbolic` (a
//!   reset's `reason` and `state`, a softirq's `vec`), shown by its name;
//! * a symbol: a field printed with `%ps`/`%pS`/`%pF`/`%pf`/`%pB` (a
//!   kernel address), shown as the function it falls in;
//! * a task id: a field of C type `pid_t` (a signal's target `pid`);
//! * two numbers the kernel prints with `%d`/`%hu` but which are names: an
//!   `int sig` (shown as `SIGTERM (15)`) and `sport`/`dport` (ports).
//!
//! ([`tracedat::shown_fields`] reads the print fmt.) The events the other
//! analyses answer with their own tables are left to them: `sched_switch`,
//! the wakeups, `sched_stat_*` (the profile's), the forks, execs and exits
//! (the process tree's), `irq:*`, the syscalls, `kmem:*`, `block:*`,
//! `exceptions:*` (`faults`), `ftrace:*` and the probes' own events.
//!
//! A row is a task (`common_pid`, with its parent as the trace's forks
//! tell) and one value of each telling field; rows are counted, the top
//! [`LISTED`] of each event listed and the rest summed as `(other)`.
//! Memory is bounded: at most [`MAX_KEYS`] rows per event and
//! [`MAX_ALL_KEYS`] in all; the records of further rows count in `(other)`.
//! An event's print fmt is parsed at its first record (a file of
//! trace-cmd's holds every format of its kernel). Events are listed by name.
//! Per record the pass reads the telling fields into a reused buffer and
//! looks the row up by those bytes: nothing is allocated unless the row is
//! new.

use rustc_hash::FxHashMap;
use serde::Serialize;
use tracedat::{Field, FieldValue, IntField, Shown, TraceFile};

use super::pass::{At, Finish, Pass};
use super::{Analysis, AnalysisName, Selection, function_name};

/// Rows told apart per event.
const MAX_KEYS: usize = 1024;
/// Rows told apart over every event.
const MAX_ALL_KEYS: usize = 65536;
/// Rows listed per event (most records first).
const LISTED: usize = 10;

/// How a telling field is read and shown.
#[derive(Debug, Clone)]
enum How {
    Text(Field),
    Symbolic(IntField, Vec<(i64, String)>),
    Symbol(IntField),
    Pid(IntField),
    Signal(IntField),
    Port(IntField),
}

impl How {
    fn kind(&self) -> &'static str {
        match self {
            How::Text(_) => "text",
            How::Symbolic(..) => "enum",
            How::Symbol(_) => "symbol",
            How::Pid(_) => "pid",
            How::Signal(_) => "signal",
            How::Port(_) => "port",
        }
    }
}

/// The telling fields of `f`, in the order its print fmt prints them, then
/// the task ids, signals and ports it prints with plain conversions.
fn telling(f: &tracedat::EventFormat) -> Vec<(String, How)> {
    let mut v: Vec<(String, How)> = Vec::new();
    for (name, shown) in tracedat::shown_fields(f) {
        let Some(field) = f.field(&name) else {
            continue;
        };
        let how = match shown {
            Shown::Text => How::Text(field.clone()),
            Shown::Symbolic(t) => How::Symbolic(field.int(), t),
            Shown::Symbol => How::Symbol(field.int()),
        };
        v.push((name, how));
    }
    for field in &f.fields {
        if v.iter().any(|(n, _)| *n == field.name) || field.array_len.is_some() {
            continue;
        }
        let how = match (field.type_name.as_str(), field.name.as_str()) {
            ("pid_t", _) => How::Pid(field.int()),
            ("int", "sig") => How::Signal(field.int()),
            (_, "sport" | "dport") if field.size == 2 => How::Port(field.int()),
            _ => continue,
        };
        v.push((field.name.clone(), how));
    }
    v
}

/// Whether another analysis answers `system:name` with its own table (the
/// forks, execs and exits: the process tree, `proctree`; or,
/// for `sched_stat_*`, whose `comm` and `pid` are the task that ran or
/// waited, the profile: where each task's time went; they come with every
/// switch, so reading them here would cost the pass most).
fn answered_elsewhere(system: &str, name: &str) -> bool {
    matches!(
        system,
        "irq" | "syscalls" | "raw_syscalls" | "kmem" | "block" | "exceptions" | "ftrace"
    ) || (system == "sched"
        && (matches!(
            name,
            "sched_switch"
                | "sched_wakeup"
                | "sched_waking"
                | "sched_wakeup_new"
                | "sched_process_fork"
                | "sched_process_exec"
                | "sched_process_exit"
        ) || name.starts_with("sched_stat_")))
}

/// One value of a row, as read from its first record.
#[derive(Debug, Clone)]
enum Val {
    Text(Box<[u8]>),
    Int(i64),
    /// The field was not in the record (too short).
    Missing,
}

struct Row {
    pid: i32,
    vals: Vec<Val>,
    count: u64,
}

/// One event's rows.
struct EventRows {
    name: String,
    fields: Vec<(String, How)>,
    index: FxHashMap<Box<[u8]>, usize>,
    rows: Vec<Row>,
    records: u64,
    /// Records of rows past the key limits.
    dropped: u64,
}

/// What a format is to the pass.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Not this pass's (another analysis or an answer takes it, or it has
    /// no telling field).
    Not,
    /// No record yet: its telling fields are found at its first.
    Unseen,
    /// Its index in `events`.
    Event(usize),
}

/// The pass's state.
pub(super) struct TellingPass {
    /// Per format id.
    slots: Vec<Slot>,
    events: Vec<EventRows>,
    keys: usize,
    /// The key of the record being read (reused).
    scratch: Vec<u8>,
}

/// The telling fields of one event, per task.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct EventFields {
    /// `system:event`.
    pub(crate) event: String,
    /// The telling fields, in the order the event prints them.
    pub(crate) fields: Vec<String>,
    /// What each is: `text`, `enum`, `symbol`, `pid`, `signal`, `port`.
    pub(crate) kinds: Vec<String>,
    /// The event's records.
    pub(crate) records: u64,
    /// Distinct rows (task and values) told apart.
    pub(crate) rows_total: usize,
    /// The rows with the most records (at most 10), most first.
    pub(crate) rows: Vec<FieldRow>,
    /// Records in no listed row (the other rows, and those past the key
    /// limits): the `(other)` row.
    pub(crate) other: u64,
}

/// One task and one value of each telling field.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct FieldRow {
    /// The task that recorded the event (`common_pid`).
    pub(crate) pid: i32,
    /// Its comm.
    pub(crate) comm: String,
    /// Its parent, when the trace's fork records tell it.
    pub(crate) parent_pid: Option<i32>,
    /// The parent's comm.
    pub(crate) parent_comm: Option<String>,
    /// The value of each telling field, as shown (an enum by its name, a
    /// symbol by its function, a signal by its name).
    pub(crate) values: Vec<String>,
    /// Records.
    pub(crate) count: u64,
}

/// Whether `f` may have a telling field, by a look at its fields and print
/// fmt that does not parse it (a file of trace-cmd's holds every format of
/// its kernel; each is parsed only when a record of it comes).
fn may_tell(f: &tracedat::EventFormat) -> bool {
    f.fields.iter().any(|x| {
        x.is_string
            || x.type_name == "pid_t"
            || matches!(x.name.as_str(), "sig" | "sport" | "dport")
    }) || f.print_fmt.contains("__print_symbolic")
        || f.print_fmt.contains("%p")
}

impl TellingPass {
    /// Whether `file` may have an event with telling fields no other
    /// analysis answers.
    pub(super) fn applies(file: &TraceFile) -> bool {
        file.formats()
            .any(|f| !answered_elsewhere(&f.system, &f.name) && may_tell(f))
    }

    /// The slot of `f` at its first record: its rows, or none.
    #[cold]
    fn first(&mut self, f: &tracedat::EventFormat) -> Slot {
        let fields = telling(f);
        let slot = if fields.is_empty() {
            Slot::Not
        } else {
            self.events.push(EventRows {
                name: format!("{}:{}", f.system, f.name),
                fields,
                index: FxHashMap::default(),
                rows: Vec::new(),
                records: 0,
                dropped: 0,
            });
            Slot::Event(self.events.len() - 1)
        };
        if let Some(s) = self.slots.get_mut(usize::from(f.id)) {
            *s = slot;
        }
        slot
    }
}

/// Appends the key bytes of one value: a length-prefixed text or 8 bytes.
#[inline]
fn push_key(scratch: &mut Vec<u8>, how: &How, ev: &tracedat::Event<'_>) {
    let int = |f: &IntField| f.get(&ev.data, ev.big_endian);
    match how {
        How::Text(f) => match f.decode(&ev.data, ev.big_endian) {
            Some(FieldValue::Str(s)) => {
                scratch.extend_from_slice(&(s.len() as u32).to_le_bytes());
                scratch.extend_from_slice(s);
            }
            _ => scratch.extend_from_slice(&u32::MAX.to_le_bytes()),
        },
        How::Symbolic(f, _) | How::Symbol(f) | How::Pid(f) | How::Signal(f) | How::Port(f) => {
            match int(f) {
                Some(v) => {
                    scratch.push(1);
                    scratch.extend_from_slice(&v.to_le_bytes());
                }
                None => scratch.push(0),
            }
        }
    }
}

/// The value of `how` in `ev`, kept for a new row.
fn value(how: &How, ev: &tracedat::Event<'_>) -> Val {
    match how {
        How::Text(f) => match f.decode(&ev.data, ev.big_endian) {
            Some(FieldValue::Str(s)) => Val::Text(s.into()),
            _ => Val::Missing,
        },
        How::Symbolic(f, _) | How::Symbol(f) | How::Pid(f) | How::Signal(f) | How::Port(f) => {
            match f.get(&ev.data, ev.big_endian) {
                // `get` sign-extends a signed field.
                Some(v) => Val::Int(v as i64),
                None => Val::Missing,
            }
        }
    }
}

/// How `v` of `how` is shown.
fn show(file: &TraceFile, how: &How, v: &Val) -> String {
    let n = match v {
        Val::Text(s) => return String::from_utf8_lossy(s).into_owned(),
        Val::Missing => return "?".to_string(),
        Val::Int(n) => *n,
    };
    match how {
        How::Symbolic(_, table) => table
            .iter()
            .find(|(k, _)| *k == n)
            .map_or_else(|| n.to_string(), |(_, s)| s.clone()),
        How::Symbol(_) => function_name(file, n as u64),
        How::Signal(_) => match signal_name(n) {
            Some(s) => format!("{s} ({n})"),
            None => n.to_string(),
        },
        How::Text(_) | How::Pid(_) | How::Port(_) => n.to_string(),
    }
}

/// The name of signal `n` in Linux's generic numbering (x86, arm, arm64,
/// riscv; include/uapi/asm-generic/signal.h).
fn signal_name(n: i64) -> Option<&'static str> {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    usize::try_from(n.checked_sub(1)?)
        .ok()
        .and_then(|i| NAMES.get(i).copied())
}

impl Pass for TellingPass {
    fn start(file: &TraceFile, sel: &Selection) -> Option<TellingPass> {
        if !sel.has(AnalysisName::Fields) {
            return None;
        }
        let named: Vec<&str> = (sel.answers().iter())
            .flat_map(|a| [&a.event, &a.from, &a.to])
            .filter_map(|e| e.as_deref())
            .collect();
        let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
        let mut slots = vec![Slot::Not; max_id + 1];
        for f in file.formats() {
            let name = format!("{}:{}", f.system, f.name);
            if !answered_elsewhere(&f.system, &f.name)
                && !named.contains(&name.as_str())
                && may_tell(f)
            {
                slots[usize::from(f.id)] = Slot::Unseen;
            }
        }
        Some(TellingPass {
            slots,
            events: Vec::new(),
            keys: 0,
            scratch: Vec::new(),
        })
    }

    fn handles(&self, id: u16) -> bool {
        !matches!(self.slots.get(usize::from(id)), None | Some(Slot::Not))
    }

    #[inline]
    fn add(&mut self, at: &At<'_, '_>) {
        let ev = at.ev;
        let i = match self.slots.get(usize::from(ev.format.id)) {
            Some(Slot::Event(i)) => *i,
            Some(Slot::Unseen) => match self.first(ev.format) {
                Slot::Event(i) => i,
                _ => return,
            },
            _ => return,
        };
        let e = &mut self.events[i];
        e.records += 1;
        self.scratch.clear();
        self.scratch.extend_from_slice(&at.pid.to_le_bytes());
        for (_, how) in &e.fields {
            push_key(&mut self.scratch, how, ev);
        }
        if let Some(r) = e.index.get(self.scratch.as_slice()) {
            e.rows[*r].count += 1;
            return;
        }
        if e.rows.len() >= MAX_KEYS || self.keys >= MAX_ALL_KEYS {
            e.dropped += 1;
            return;
        }
        self.keys += 1;
        e.index.insert(self.scratch.as_slice().into(), e.rows.len());
        e.rows.push(Row {
            pid: at.pid,
            vals: e.fields.iter().map(|(_, how)| value(how, ev)).collect(),
            count: 1,
        });
    }

    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        let mut v = Vec::new();
        for mut e in self.events.into_iter().filter(|e| e.records > 0) {
            e.rows
                .sort_by(|a, b| b.count.cmp(&a.count).then(a.pid.cmp(&b.pid)));
            let rows_total = e.rows.len();
            let rows: Vec<FieldRow> = (e.rows.iter().take(LISTED))
                .map(|r| {
                    let parent = out.forks.get(&r.pid).copied();
                    FieldRow {
                        pid: r.pid,
                        comm: cx.comm(r.pid),
                        parent_pid: parent,
                        parent_comm: parent.map(|p| cx.comm(p)),
                        values: (e.fields.iter().zip(&r.vals))
                            .map(|((_, how), val)| show(cx.file, how, val))
                            .collect(),
                        count: r.count,
                    }
                })
                .collect();
            let listed: u64 = rows.iter().map(|r| r.count).sum();
            v.push(EventFields {
                event: e.name,
                kinds: e.fields.iter().map(|(_, h)| h.kind().to_string()).collect(),
                fields: e.fields.into_iter().map(|(n, _)| n).collect(),
                records: e.records,
                rows_total,
                rows,
                other: e.records - listed,
            });
        }
        v.sort_by(|a, b| a.event.cmp(&b.event));
        let has = !v.is_empty();
        let kept = cx.keeps(has);
        out.section(AnalysisName::Fields, kept, has);
        out.fields = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(fields: &str, print_fmt: &str) -> tracedat::EventFormat {
        let text = format!(
            "name: t\nID: 1\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n{fields}\nprint fmt: {print_fmt}\n"
        );
        tracedat::EventFormat::parse("s", &text).unwrap()
    }

    fn rule(f: &tracedat::EventFormat) -> Vec<(String, &'static str)> {
        telling(f).into_iter().map(|(n, h)| (n, h.kind())).collect()
    }

    /// The rule on 6.18's signal_generate and tcp_receive_reset: text,
    /// enums and symbols from the print fmt, then `pid_t`, `sig`, ports;
    /// the numbers that measure (errno, code, group, result, addresses'
    /// bytes, the cookie) are not telling.
    #[test]
    fn telling_fields_follow_the_format() {
        let signal = format(
            "\tfield:int sig;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:int errno;\toffset:12;\tsize:4;\tsigned:1;\n\
\tfield:int code;\toffset:16;\tsize:4;\tsigned:1;\n\tfield:char comm[16];\toffset:20;\tsize:16;\tsigned:0;\n\
\tfield:pid_t pid;\toffset:36;\tsize:4;\tsigned:1;\n\tfield:int group;\toffset:40;\tsize:4;\tsigned:1;\n\
\tfield:int result;\toffset:44;\tsize:4;\tsigned:1;",
            "\"sig=%d errno=%d code=%d comm=%s pid=%d grp=%d res=%d\", REC->sig, REC->errno, REC->code, REC->comm, REC->pid, REC->group, REC->result",
        );
        let want = [("comm", "text"), ("sig", "signal"), ("pid", "pid")];
        assert_eq!(rule(&signal), want.map(|(n, k)| (n.to_string(), k)));
        let reset = format(
            "\tfield:const void * skaddr;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:__u16 sport;\toffset:16;\tsize:2;\tsigned:0;\n\
\tfield:__u16 dport;\toffset:18;\tsize:2;\tsigned:0;\n\tfield:__u16 family;\toffset:20;\tsize:2;\tsigned:0;\n\
\tfield:__u8 saddr[4];\toffset:22;\tsize:4;\tsigned:0;\n\tfield:__u64 sock_cookie;\toffset:64;\tsize:8;\tsigned:0;",
            "\"family=%s sport=%hu dport=%hu saddr=%pI4 sock_cookie=%llx\", __print_symbolic(REC->family, { 2, \"AF_INET\" }, { 10, \"AF_INET6\" }), REC->sport, REC->dport, REC->saddr, REC->sock_cookie",
        );
        let want = [("family", "enum"), ("sport", "port"), ("dport", "port")];
        assert_eq!(rule(&reset), want.map(|(n, k)| (n.to_string(), k)));
        assert!(may_tell(&reset) && may_tell(&signal));
        let plain = format(
            "\tfield:unsigned long n;\toffset:8;\tsize:8;\tsigned:0;",
            "\"n=%lu\", REC->n",
        );
        assert!(rule(&plain).is_empty() && !may_tell(&plain));
        assert_eq!(
            [1, 9, 15, 31, 0, 32, -1].map(signal_name),
            [
                Some("SIGHUP"),
                Some("SIGKILL"),
                Some("SIGTERM"),
                Some("SIGSYS"),
                None,
                None,
                None
            ]
        );
    }
}
