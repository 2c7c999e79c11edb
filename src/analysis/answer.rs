//! The trace engine of `[[answer]]` (recipe format 1.3): every answer the
//! selection names computed in the one pass over trace.dat, as one more
//! [`Pass`], into the shared [`AnswerTable`] (`crate::answer`, the kernel
//! engine's too).
//!
//! * one event (`event`): its records aggregated by the `by` keys;
//! * a span (`from` → `to`): each `to` paired with the last `from` of the
//!   same `match` key (the fields equal on both ends, default
//!   `common_pid`), as the syscall and block analyses pair them; its
//!   duration is `to.ts - from.ts`, in µs for the table (each timestamp rounded
//!   to whole µs for the power-of-two buckets, as the kernel's
//!   `common_timestamp.usecs`; min, percentiles and max from the exact
//!   durations).
//!
//! Keys are shown as `crate::answer` says (the kernel engine's display).
//! `where` is the recipe's filter syntax on the (`to`) event, evaluated by
//! the evaluator of `report -F` (errno names such as `-ENOENT` as numbers).
//! Memory is bounded: at most [`MAX_KEYS`] distinct keys per answer (the
//! records of further keys are `dropped`, said in the table's notes) and
//! [`MAX_OPEN`] open spans (a `from` past it is not followed).

use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use tracedat::{Comms, Event, EventFormat, FieldValue, TraceFile};

use super::histogram::{Histogram, Seen};
use super::latency::SyscallTable;
use super::pass::{At, Finish, Pass};
use super::select::{Filter, event_matches};
use super::{Analysis, Selection, function_name};
use crate::answer::{
    AnswerRow, AnswerTable, Bucket, Cell, DEFAULT_TOP, EngineUsed, Latency, TableBuilder,
    TableHead, log2_bucket,
};
use crate::recipe::{Answer, AnswerBy, AnswerValue, FieldRef};

/// Distinct keys an answer tells apart; the records of further keys are
/// counted as dropped.
pub(crate) const MAX_KEYS: usize = 4096;
/// Open spans an answer follows at once.
pub(crate) const MAX_OPEN: usize = 65536;

/// What a key shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Show {
    Plain,
    Comm,
    Errno,
    Syscall,
    Sym,
    Log2,
    Stack,
}

/// What a key or value reads on one end.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Field(String),
    CommonPid,
    Cpu,
    /// The kernel stack recorded after the event (`ftrace:kernel_stack`).
    Stack,
}

/// One compiled `by` item.
#[derive(Debug, Clone)]
struct KeySpec {
    from: bool,
    source: Source,
    show: Show,
    /// A plain field's text where its event's print fmt shows it as text
    /// (`prev_state` as `S`, `R+`; a `__print_symbolic` enum by name).
    text: Option<tracedat::FieldText>,
}

/// A key's value as read from a record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Part {
    Int(i64),
    UInt(u64),
    /// Held inline up to 16 bytes (a comm), so that most text keys cost no
    /// allocation per record.
    Text(SmallVec<[u8; 16]>),
    /// A kernel stack's return addresses, innermost first.
    Stack(Box<[u64]>),
}

impl Part {
    fn int(&self) -> Option<i64> {
        match self {
            Part::Int(v) => Some(*v),
            Part::UInt(v) => Some(*v as i64),
            Part::Text(_) | Part::Stack(_) => None,
        }
    }
}

/// The aggregate of one row.
#[derive(Debug, Clone, Default)]
struct Acc {
    count: u64,
    /// Per value field: (sum, min, max).
    fields: Vec<(i128, i64, i64)>,
    /// Exact durations (trace-clock units).
    latency: Histogram,
    /// Spans per `log2` bucket of their whole-µs duration.
    buckets: Vec<u64>,
    /// Whole-µs durations summed.
    total_us: u64,
}

impl Acc {
    fn add(&mut self, vals: &[i64], span: Option<(u64, u64, Seen)>) {
        if self.fields.len() < vals.len() {
            self.fields.resize(vals.len(), (0, i64::MAX, i64::MIN));
        }
        self.count += 1;
        for (a, v) in self.fields.iter_mut().zip(vals) {
            a.0 += i128::from(*v);
            a.1 = a.1.min(*v);
            a.2 = a.2.max(*v);
        }
        if let Some((d, us, at)) = span {
            self.latency.add(d, at);
            let k = log2_bucket(us) as usize;
            if k >= self.buckets.len() {
                self.buckets.resize(k + 1, 0);
            }
            self.buckets[k] += 1;
            self.total_us = self.total_us.saturating_add(us);
        }
    }

    fn merge(&mut self, o: &Acc) {
        if self.fields.len() < o.fields.len() {
            self.fields.resize(o.fields.len(), (0, i64::MAX, i64::MIN));
        }
        self.count += o.count;
        for (a, b) in self.fields.iter_mut().zip(&o.fields) {
            a.0 += b.0;
            a.1 = a.1.min(b.1);
            a.2 = a.2.max(b.2);
        }
        self.latency.merge(&o.latency);
        if self.buckets.len() < o.buckets.len() {
            self.buckets.resize(o.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.total_us = self.total_us.saturating_add(o.total_us);
    }
}

/// A field of one format, or a property of the record.
#[derive(Debug, Clone)]
enum Read {
    /// A plain integer field, read at its offset without decoding
    /// ([`tracedat::IntField`], which knows its sign).
    Int(tracedat::IntField),
    Field(tracedat::Field),
    CommonPid,
    Cpu,
    /// Filled in from the record that follows (see `Compiled::stack`).
    Stack,
}

impl Read {
    fn of(f: &EventFormat, s: &Source) -> Option<Read> {
        match s {
            Source::CommonPid => Some(Read::CommonPid),
            Source::Cpu => Some(Read::Cpu),
            Source::Stack => Some(Read::Stack),
            Source::Field(n) => {
                let field = f.field(n)?;
                let int = field.int();
                Some(match int.place().1 {
                    0 => Read::Field(field.clone()),
                    _ => Read::Int(int),
                })
            }
        }
    }

    fn part(&self, ev: &Event<'_>) -> Option<Part> {
        match self {
            Read::CommonPid => Some(Part::Int(i64::from(ev.pid()))),
            Read::Cpu => Some(Part::UInt(u64::from(ev.cpu))),
            Read::Stack => Some(Part::Stack(Box::default())),
            Read::Int(f) => {
                let v = f.get(&ev.data, ev.big_endian)?;
                Some(match f.place().2 {
                    true => Part::Int(v as i64),
                    false => Part::UInt(v),
                })
            }
            Read::Field(f) => match f.decode(&ev.data, ev.big_endian)? {
                FieldValue::Int(v) => Some(Part::Int(v)),
                FieldValue::UInt(v) => Some(Part::UInt(v)),
                FieldValue::Str(s) | FieldValue::Bytes(s) => {
                    Some(Part::Text(SmallVec::from_slice(s)))
                }
                FieldValue::Array(_) => None,
            },
        }
    }
}

/// A span's match key: `reads` of `ev` into `out` (cleared first); false
/// when one does not decode. Numbers are compared by value whatever their
/// fields' signedness (an eprobe's `u64` copy of a `pid_t`), as the kernel's
/// `onmatch` compares them.
fn parts_into(reads: &[Read], ev: &Event<'_>, out: &mut Vec<Part>) -> bool {
    out.clear();
    for r in reads {
        match r.part(ev) {
            Some(Part::UInt(v)) => out.push(Part::Int(v as i64)),
            Some(p) => out.push(p),
            None => return false,
        }
    }
    true
}

/// How one format's records take part in one answer.
#[derive(Debug, Clone)]
enum Role {
    /// The one event (or a span's `to`): its keys, value fields and match
    /// fields read from it (`None`: from the span's `from`), and its `where`.
    Counted {
        keys: Vec<Option<Read>>,
        vals: Vec<Option<Read>>,
        match_on: Vec<Read>,
        filter: Option<Filter>,
        /// A one-event answer's `latency` on a record that carries its own
        /// duration: its `calltime` and `rettime` (ns).
        own: Option<(tracedat::IntField, tracedat::IntField)>,
    },
    /// A span's `from`: its match fields, and the `from.` keys and values.
    Opens {
        match_on: Vec<Read>,
        keys: Vec<Option<Read>>,
        vals: Vec<Option<Read>>,
    },
}

/// An answer the trace engine cannot compute over a file: its name and why.
#[derive(Debug, thiserror::Error)]
#[error("answer `{name}`: {message}")]
pub struct AnswerError {
    /// The answer's name.
    pub name: String,
    /// What is wrong and what to do.
    pub message: String,
}

/// An open span: its start, and what its `from.` keys and values read.
type Open = (u64, Vec<Option<Part>>, Vec<Option<i64>>);

/// One answer compiled against a file, with its state.
struct Compiled {
    answer: Answer,
    values: Vec<AnswerValue>,
    keys: Vec<KeySpec>,
    /// Per `values` item reading a field: its index in the value fields.
    value_field: Vec<Option<usize>>,
    /// Per format id: its role (`None`: not in this answer).
    roles: Vec<Option<Role>>,
    span: bool,
    rows: FxHashMap<Vec<Part>, Acc>,
    /// Per match key, its open span; `None` once closed, so that a key met
    /// again (a pid's next syscall) costs no allocation. Closed entries are
    /// dropped when the map reaches twice [`MAX_OPEN`].
    open: FxHashMap<Vec<Part>, Option<Open>>,
    /// How many entries of `open` hold a span.
    open_now: usize,
    /// The key, values and match key of the record at hand, reused from
    /// record to record: a row's key is copied only when the row is new.
    key: Vec<Part>,
    vals: Vec<i64>,
    matched: Vec<Part>,
    /// A `by = ["stack"]` answer's stack key and its records' stacks.
    stack: Option<StackKey>,
    dropped: u64,
    unpaired: u64,
    untracked: u64,
    undecoded: u64,
}

/// How a `by = ["stack"]` answer finds each event's stack: the
/// `ftrace:kernel_stack` record its stacktrace trigger writes right after it
/// on the same CPU.
struct StackKey {
    /// The stack's index in the key.
    at: usize,
    /// Per format id: where a kernel_stack's `caller` words start.
    caller: Vec<Option<usize>>,
    /// The file's long size (4 or 8) and byte order.
    word: (usize, bool),
    /// Per CPU slot and [`context`]: the key and values of an event waiting
    /// for its stack.
    pending: Vec<[Option<Pending>; 4]>,
    /// Events whose next record on their CPU was no kernel stack.
    missing: u64,
}

/// The key and values of a `by = ["stack"]` event, waiting for its stack.
type Pending = (Vec<Part>, Vec<i64>);

/// The context a record was written in, from its `common_flags`: 0 a task,
/// 1 a softirq, 2 a hard irq, 3 an NMI (TRACE_FLAG_SOFTIRQ, _HARDIRQ, _NMI of
/// kernel/trace/trace.h). An event's stack is written in its context, so an
/// interrupt's records landing between the two are told apart.
fn context(ev: &Event<'_>) -> usize {
    match ev.data.get(2).copied().unwrap_or(0) {
        f if f & 0x40 != 0 => 3,
        f if f & 0x08 != 0 => 2,
        f if f & 0x10 != 0 => 1,
        _ => 0,
    }
}

/// The most frames of a hist trigger's `stacktrace` key
/// (kernel/trace/trace_events_hist.c, `HIST_STACKTRACE_DEPTH`) on the kernel
/// that wrote `file` (its UNAME option's release): 16 up to Linux 6 (the lab's
/// 6.1 and 6.12); Debian's 7.2 keeps deeper keys (20 frames seen in the kernel
/// lab, where 6.12 cut the same stack at 16), taken as up to 64 from Linux 7 on
/// (the release that raised it is not pinned). Without a release: 16.
fn hist_stack_depth(file: &TraceFile) -> usize {
    let major = file
        .uname()
        .and_then(|u| u.split_whitespace().nth(2))
        .and_then(|r| r.split('.').next()?.parse::<u32>().ok());
    match major {
        Some(m) if m >= 7 => 64,
        _ => 16,
    }
}

/// Innermost frames of a recorded stack that are ftrace's own code writing
/// the event (the tracepoint's probe and iterator), which a hist trigger's
/// `stacktrace` skips: measured on Debian 6.12 in the kernel lab
/// (`trace_event_raw_event_sched_switch`, `__traceiter_sched_switch`).
const EVENT_CODE_FRAMES: &[&str] = &[
    "trace_event_raw_event_",
    "__traceiter_",
    "perf_trace_",
    "ftrace_syscall_",
];

/// A stack key as both engines show it: the innermost
/// [`hist_stack_depth`] frames past ftrace's own ([`EVENT_CODE_FRAMES`]),
/// by function, outermost first, joined by `;`.
fn show_stack(file: &TraceFile, frames: &[u64]) -> String {
    let names: Vec<String> = frames
        .iter()
        .map(|a| function_name(file, *a))
        .skip_while(|n| EVENT_CODE_FRAMES.iter().any(|p| n.starts_with(p)))
        .take(hist_stack_depth(file))
        .collect();
    let mut names = names;
    names.reverse();
    names.join(";")
}

fn source(f: &FieldRef) -> Source {
    match f.name.as_str() {
        "common_pid" => Source::CommonPid,
        "cpu" | "common_cpu" => Source::Cpu,
        n => Source::Field(n.to_string()),
    }
}

/// `where` with errno names (`-ENOENT`, `ENOENT`) written as their numbers,
/// as the kernel's filters and the validator take them.
fn errno_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('E') {
        let (head, tail) = rest.split_at(i);
        let word_end = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit()))
            .unwrap_or(tail.len());
        let starts_word = !head.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        out.push_str(head);
        match crate::errno::number(&tail[..word_end]).filter(|_| starts_word) {
            Some(n) => out.push_str(&n.to_string()),
            None => out.push_str(&tail[..word_end.max(1)]),
        }
        rest = &tail[word_end.max(1)..];
    }
    out.push_str(rest);
    out
}

impl Compiled {
    fn new(file: &TraceFile, a: &Answer) -> Result<Compiled, AnswerError> {
        let err = |message: String| AnswerError {
            name: a.name.clone(),
            message,
        };
        let span = a.is_span();
        let mut keys = Vec::new();
        for b in &a.by {
            let (f, show) = match b {
                AnswerBy::Comm => (None, Show::Comm),
                AnswerBy::Pid => (None, Show::Plain),
                AnswerBy::Cpu => {
                    keys.push(KeySpec {
                        from: false,
                        source: Source::Cpu,
                        show: Show::Plain,
                        text: None,
                    });
                    continue;
                }
                AnswerBy::Stack if span => {
                    return Err(err(
                        "`by = [\"stack\"]` is a one-event answer's: the stack of a span's `to` \
                         event is not the span's"
                            .into(),
                    ));
                }
                AnswerBy::Stack => {
                    keys.push(KeySpec {
                        from: false,
                        source: Source::Stack,
                        show: Show::Stack,
                        text: None,
                    });
                    continue;
                }
                AnswerBy::Field(f) => (Some(f), Show::Plain),
                AnswerBy::Errno(f) => (Some(f), Show::Errno),
                AnswerBy::Syscall(f) => (Some(f), Show::Syscall),
                AnswerBy::Sym(f) => (Some(f), Show::Sym),
                AnswerBy::Log2(f) => (Some(f), Show::Log2),
            };
            let k = match f {
                Some(f) => KeySpec {
                    from: f.from,
                    source: source(f),
                    show,
                    text: None,
                },
                None => KeySpec {
                    from: false,
                    source: Source::CommonPid,
                    show,
                    text: None,
                },
            };
            if k.from && !span {
                return Err(err(format!(
                    "`by` item `{b}`: `from.` names a span's first event, and this answer has one `event`"
                )));
            }
            keys.push(k);
        }
        let values = a.values_or_default();
        let mut fields: Vec<&FieldRef> = Vec::new();
        let mut value_field = Vec::new();
        for v in &values {
            let f = match v {
                AnswerValue::Count => None,
                AnswerValue::Latency => None,
                AnswerValue::Sum(f)
                | AnswerValue::Min(f)
                | AnswerValue::Max(f)
                | AnswerValue::Avg(f) => Some(f),
            };
            value_field.push(f.map(|f| match fields.iter().position(|x| *x == f) {
                Some(i) => i,
                None => {
                    fields.push(f);
                    fields.len() - 1
                }
            }));
        }
        let match_src: Vec<Source> = a
            .match_or_default()
            .iter()
            .map(|m| match m.as_str() {
                "common_pid" => Source::CommonPid,
                "cpu" | "common_cpu" => Source::Cpu,
                n => Source::Field(n.to_string()),
            })
            .collect();
        let (counted, opens) = match (&a.event, &a.from, &a.to) {
            (Some(e), None, None) => (e.as_str(), None),
            (None, Some(f), Some(t)) => (t.as_str(), Some(f.as_str())),
            _ => {
                return Err(err(
                    "give either `event` (one event) or both `from` and `to` (a span)".into(),
                ));
            }
        };
        let lacks = |f: &EventFormat, what: String| {
            let mut names: Vec<&str> = f.fields.iter().map(|x| x.name.as_str()).collect();
            names.truncate(16);
            err(format!(
                "{what}: `{}:{}` has no such field; its fields: {}",
                f.system,
                f.name,
                names.join(", ")
            ))
        };
        let ends = |f: &EventFormat, from: bool| -> Result<_, AnswerError> {
            let mut ks = Vec::new();
            for (k, b) in keys.iter().zip(&a.by) {
                ks.push(match k.from == from {
                    true => Some(
                        Read::of(f, &k.source)
                            .ok_or_else(|| lacks(f, format!("`by` item `{b}`")))?,
                    ),
                    false => None,
                });
            }
            let mut vs = Vec::new();
            for fr in &fields {
                vs.push(match fr.from == from {
                    true => Some(
                        Read::of(f, &source(fr))
                            .filter(|r| !matches!(r, Read::Field(x) if x.is_string))
                            .ok_or_else(|| lacks(f, format!("value field `{fr}` (a number)")))?,
                    ),
                    false => None,
                });
            }
            let mut ms = Vec::new();
            if span {
                for (m, s) in a.match_or_default().iter().zip(&match_src) {
                    ms.push(
                        Read::of(f, s).ok_or_else(|| lacks(f, format!("`match` field `{m}`")))?,
                    );
                }
            }
            Ok((ks, vs, ms))
        };
        let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
        let mut roles: Vec<Option<Role>> = vec![None; max_id + 1];
        let stack = (keys.iter().position(|k| k.source == Source::Stack)).map(|at| {
            let mut caller = vec![None; max_id + 1];
            for f in file.formats() {
                if f.system == "ftrace" && f.name == "kernel_stack" {
                    caller[f.id as usize] = f.field("caller").map(|c| c.offset);
                }
            }
            StackKey {
                at,
                caller,
                word: (usize::from(file.long_size()).clamp(4, 8), file.big_endian()),
                pending: Vec::new(),
                missing: 0,
            }
        });
        let where_text = a.filter.as_deref().map(errno_numbers);
        let timed = !span && values.contains(&AnswerValue::Latency);
        let mut found = (false, opens.is_none());
        for f in file.formats() {
            if event_matches(counted, f) {
                found.0 = true;
                let (keys, vals, match_on) = ends(f, false)?;
                let filter = (where_text.as_deref())
                    .map(|w| Filter::compile(f, w).map_err(|e| err(format!("`where`: {e}"))))
                    .transpose()?;
                let own = match timed {
                    false => None,
                    true => Some(own_duration(f).ok_or_else(|| {
                        err(format!(
                            "`latency` is a span's value, and `{}:{}` carries no duration of its \
                             own (as ftrace:funcgraph_exit's rettime - calltime): give `from` and \
                             `to` instead of `event`",
                            f.system, f.name
                        ))
                    })?),
                };
                roles[f.id as usize] = Some(Role::Counted {
                    keys,
                    vals,
                    match_on,
                    filter,
                    own,
                });
            } else if let Some(o) = opens
                && event_matches(o, f)
            {
                found.1 = true;
                let (keys, vals, match_on) = ends(f, true)?;
                roles[f.id as usize] = Some(Role::Opens {
                    match_on,
                    keys,
                    vals,
                });
            }
        }
        // A plain field's text, from the first format of its end that shows
        // it as text.
        for k in &mut keys {
            let Source::Field(name) = &k.source else {
                continue;
            };
            if k.show != Show::Plain {
                continue;
            }
            let end = if k.from {
                opens.unwrap_or(counted)
            } else {
                counted
            };
            k.text = file
                .formats()
                .filter(|f| event_matches(end, f))
                .find_map(|f| tracedat::FieldText::of(f, name));
        }
        if !found.0 || !found.1 {
            let missing = if found.0 {
                opens.unwrap_or(counted)
            } else {
                counted
            };
            return Err(err(format!(
                "this trace.dat has no event `{missing}` (no format of it): record it, or answer \
                 over a file that has it"
            )));
        }
        Ok(Compiled {
            answer: a.clone(),
            values,
            keys,
            value_field,
            roles,
            span,
            rows: FxHashMap::default(),
            open: FxHashMap::default(),
            open_now: 0,
            key: Vec::new(),
            vals: Vec::new(),
            matched: Vec::new(),
            stack,
            dropped: 0,
            unpaired: 0,
            untracked: 0,
            undecoded: 0,
        })
    }

    fn add(&mut self, at: &At<'_, '_>, learned: &Comms) {
        let ev = at.ev;
        if let Some(st) = &mut self.stack
            && let Some((mut key, vs)) =
                (st.pending.get_mut(at.cpu)).and_then(|p| p[context(ev)].take())
        {
            match st.caller.get(usize::from(ev.format.id)).copied().flatten() {
                Some(from) => {
                    let (long, big) = st.word;
                    let frames = super::stacks::stack_frames(&ev.data, from, long, big);
                    key[st.at] = Part::Stack(frames.into());
                    self.count(&key, &vs, None);
                    return;
                }
                None => st.missing += 1,
            }
        }
        let Some(Some(role)) = self.roles.get(usize::from(ev.format.id)) else {
            return;
        };
        match role {
            Role::Opens {
                match_on,
                keys,
                vals,
            } => {
                let mut m = std::mem::take(&mut self.matched);
                if !parts_into(match_on, ev, &mut m) {
                    self.matched = m;
                    self.undecoded += 1;
                    return;
                }
                let ks = keys
                    .iter()
                    .map(|k| k.as_ref().and_then(|r| r.part(ev)))
                    .collect();
                let vs = (vals.iter())
                    .map(|v| v.as_ref().and_then(|r| r.part(ev)?.int()))
                    .collect();
                let span = Some((ev.ts, ks, vs));
                match self.open.get_mut(m.as_slice()) {
                    Some(o) => {
                        self.open_now += usize::from(o.is_none());
                        *o = span;
                    }
                    None if self.open_now < MAX_OPEN => {
                        if self.open.len() >= 2 * MAX_OPEN {
                            self.open.retain(|_, o| o.is_some());
                        }
                        self.open.insert(m.clone(), span);
                        self.open_now += 1;
                    }
                    None => self.untracked += 1,
                }
                self.matched = m;
            }
            Role::Counted {
                keys,
                vals,
                match_on,
                filter,
                own,
            } => {
                let opened = match self.span {
                    false => None,
                    // A `to` ends its span whether `where` keeps it or not.
                    true => {
                        let mut m = std::mem::take(&mut self.matched);
                        let o = match parts_into(match_on, ev, &mut m) {
                            true => self.open.get_mut(m.as_slice()).and_then(Option::take),
                            false => None,
                        };
                        self.matched = m;
                        self.open_now -= usize::from(o.is_some());
                        o
                    }
                };
                if let Some(f) = filter
                    && !f.holds(ev, learned, at.file)
                {
                    return;
                }
                if self.span && opened.is_none() {
                    self.unpaired += 1;
                    return;
                }
                let (mut key, mut vs) = (
                    std::mem::take(&mut self.key),
                    std::mem::take(&mut self.vals),
                );
                key.clear();
                vs.clear();
                let mut whole = true;
                for (i, k) in keys.iter().enumerate() {
                    let p = match k {
                        Some(r) => r.part(ev),
                        None => opened.as_ref().and_then(|o| o.1.get(i).cloned().flatten()),
                    };
                    match p {
                        Some(p) => key.push(p),
                        None => {
                            whole = false;
                            break;
                        }
                    }
                }
                for (i, v) in vals.iter().enumerate() {
                    if !whole {
                        break;
                    }
                    let x = match v {
                        Some(r) => r.part(ev).and_then(|p| p.int()),
                        None => opened.as_ref().and_then(|o| o.2.get(i).copied().flatten()),
                    };
                    match x {
                        Some(x) => vs.push(x),
                        None => whole = false,
                    }
                }
                if !whole {
                    (self.key, self.vals) = (key, vs);
                    self.undecoded += 1;
                    return;
                }
                let seen = Seen {
                    ts: ev.ts,
                    cpu: ev.cpu,
                };
                let ends = match own {
                    Some((call, ret)) => {
                        (call.get(&ev.data, ev.big_endian)).zip(ret.get(&ev.data, ev.big_endian))
                    }
                    None => opened.map(|(start, ..)| (start, ev.ts)),
                };
                let span = ends.map(|(start, end)| {
                    let us = usecs(end).saturating_sub(usecs(start));
                    (end.saturating_sub(start), us, seen)
                });
                match &mut self.stack {
                    // The key is complete with the stack recorded next on this CPU.
                    Some(st) => {
                        if at.cpu >= st.pending.len() {
                            st.pending.resize_with(at.cpu + 1, Default::default);
                        }
                        st.pending[at.cpu][context(ev)] = Some((key.clone(), vs.clone()));
                    }
                    None => self.count(&key, &vs, span),
                }
                (self.key, self.vals) = (key, vs);
            }
        }
    }

    /// Counts one record (or span) in the row of `key`.
    fn count(&mut self, key: &[Part], vs: &[i64], span: Option<(u64, u64, Seen)>) {
        let n = self.rows.len();
        match self.rows.get_mut(key) {
            Some(acc) => acc.add(vs, span),
            None if n < MAX_KEYS => self.rows.entry(key.to_vec()).or_default().add(vs, span),
            None => self.dropped += 1,
        }
    }

    fn finish(self, cx: &Finish<'_>) -> AnswerTable {
        let table = SyscallTable::of(cx.file);
        let show = |k: &KeySpec, p: &Part| -> String {
            if let (Some(text), Some(v)) = (&k.text, p.int()) {
                return text.render(v as u64);
            }
            match (k.show, p) {
                (_, Part::Stack(frames)) => show_stack(cx.file, frames),
                (Show::Comm, p) => cx.comm(p.int().unwrap_or(-1) as i32),
                (_, Part::Text(t)) => String::from_utf8_lossy(t).into_owned(),
                (Show::Errno, p) => match p.int().unwrap_or(0) {
                    n if n < 0 => crate::errno::name(-n).map_or(n.to_string(), |e| format!("-{e}")),
                    n => n.to_string(),
                },
                (Show::Syscall, p) => table.name(p.int().unwrap_or(-1)),
                (Show::Sym, p) => function_name(cx.file, p.int().unwrap_or(0) as u64),
                (Show::Log2, p) => format!("2^{}", log2_bucket(p.int().unwrap_or(0) as u64)),
                (Show::Plain | Show::Stack, Part::Int(v)) => v.to_string(),
                (Show::Plain | Show::Stack, Part::UInt(v)) => v.to_string(),
            }
        };
        // Rows whose shown keys are equal (two pids of one comm) are one row.
        let mut merged: FxHashMap<Vec<String>, Acc> = FxHashMap::default();
        for (key, acc) in &self.rows {
            let shown = self.keys.iter().zip(key).map(|(k, p)| show(k, p)).collect();
            merged.entry(shown).or_default().merge(acc);
        }
        let mut builder = TableBuilder::new(&self.values);
        let mut merged: Vec<(Vec<String>, Acc)> = merged.into_iter().collect();
        merged.sort_by(|a, b| a.0.cmp(&b.0));
        for (keys, acc) in merged {
            builder.add(self.row(keys, &acc));
        }
        let mut notes = Vec::new();
        if self.dropped > 0 {
            notes.push(format!(
                "{} events of keys past the first {MAX_KEYS} were not counted",
                self.dropped
            ));
        }
        if self.unpaired > 0 {
            notes.push(format!(
                "{} `to` events had no open `from` of their match key (a span begun before the trace)",
                self.unpaired
            ));
        }
        if self.untracked > 0 {
            notes.push(format!(
                "{} `from` events were not followed ({MAX_OPEN} spans open at once)",
                self.untracked
            ));
        }
        let no_stack = (self.stack.as_ref()).map_or(0, |s| {
            s.missing + s.pending.iter().flatten().flatten().count() as u64
        });
        if no_stack > 0 {
            notes.push(format!(
                "{no_stack} events had no kernel stack recorded after them and were not counted (record the event with `stacktrace = true`)"
            ));
        }
        if self.undecoded > 0 {
            notes.push(format!(
                "{} events were too short for a key or value field",
                self.undecoded
            ));
        }
        let head = TableHead {
            question: self.answer.question.clone(),
            engine: EngineUsed::Trace,
            keys: self.answer.by.iter().map(ToString::to_string).collect(),
            dropped: self.dropped,
            notes,
        };
        let top = self.answer.top.map_or(DEFAULT_TOP, |t| t as usize);
        builder.finish(self.answer.sort.as_ref(), top, head)
    }

    /// The row of `keys` from its aggregate: one cell per value.
    fn row(&self, keys: Vec<String>, acc: &Acc) -> AnswerRow {
        let cells = (self.values.iter().zip(&self.value_field))
            .map(|(v, f)| {
                let (sum, min, max) = f
                    .and_then(|i| acc.fields.get(i).copied())
                    .unwrap_or((0, 0, 0));
                match v {
                    AnswerValue::Count => Cell::Int(acc.count as i64),
                    AnswerValue::Sum(_) => {
                        Cell::Int(sum.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
                    }
                    AnswerValue::Min(_) => Cell::Int(min),
                    AnswerValue::Max(_) => Cell::Int(max),
                    AnswerValue::Avg(_) => Cell::Float(sum as f64 / acc.count.max(1) as f64),
                    AnswerValue::Latency => latency_cell(acc),
                }
            })
            .collect();
        AnswerRow {
            keys,
            count: acc.count,
            cells,
        }
    }
}

/// The `calltime` and `rettime` (ns) of a format whose records carry their
/// own duration (`ftrace:funcgraph_exit`, kernel/trace/trace_entries.h).
fn own_duration(f: &EventFormat) -> Option<(tracedat::IntField, tracedat::IntField)> {
    Some((f.field("calltime")?.int(), f.field("rettime")?.int()))
}

/// A timestamp of `ns` nanoseconds in whole microseconds as a hist trigger's
/// `common_timestamp.usecs` gives it: rounded to the nearest
/// (kernel/trace/trace.c, `ns2usecs`).
fn usecs(ns: u64) -> u64 {
    ns.saturating_add(500) / 1000
}

/// The `latency` cell of a row: exact min, percentiles and max (µs), the
/// whole-µs power-of-two buckets and total.
fn latency_cell(acc: &Acc) -> Cell {
    let h = &acc.latency;
    if h.count() == 0 {
        return Cell::None;
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    Cell::Latency(Latency {
        min_us: us(h.min()),
        p50_us: us(h.quantile(0.5)),
        p90_us: us(h.quantile(0.9)),
        p99_us: us(h.quantile(0.99)),
        max_us: us(h.max()),
        total_us: acc.total_us as f64,
        exact: true,
        buckets: (acc.buckets.iter().enumerate())
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| Bucket {
                log2: k as u32,
                count: *n,
            })
            .collect(),
    })
}

/// The `answers` pass: every answer of the selection that the file's
/// formats allow ([`check_answers`] says why the others cannot be).
pub(super) struct Answers {
    answers: Vec<Compiled>,
    /// Whether an answer keys by stack, and so sees every record (the
    /// stack follows its event).
    stacks: bool,
}

impl Pass for Answers {
    fn start(file: &TraceFile, sel: &Selection) -> Option<Answers> {
        let answers: Vec<Compiled> = (sel.answers().iter())
            .filter_map(|a| Compiled::new(file, a).ok())
            .collect();
        let stacks = answers.iter().any(|a| a.stack.is_some());
        (!answers.is_empty()).then_some(Answers { answers, stacks })
    }

    fn handles(&self, id: u16) -> bool {
        let id = usize::from(id);
        self.stacks || (self.answers.iter()).any(|a| a.roles.get(id).is_some_and(Option::is_some))
    }

    fn sees_unknown(&self) -> bool {
        self.stacks
    }

    #[inline]
    fn add(&mut self, at: &At<'_, '_>) {
        for a in &mut self.answers {
            a.add(at, at.learned);
        }
    }

    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        for a in self.answers {
            let name = a.answer.name.clone();
            out.answers.push((name, a.finish(cx)));
        }
    }
}

/// The answers of `answers` the trace engine cannot compute over `file`
/// (an event or field it lacks, a `where` that does not compile), each
/// with why.
pub(crate) fn check_answers(file: &TraceFile, answers: &[Answer]) -> Vec<AnswerError> {
    (answers.iter())
        .filter_map(|a| Compiled::new(file, a).err())
        .collect()
}

/// A file's `[[answer]]` tables; its other keys (a whole recipe's) are
/// not read here.
#[derive(Debug, serde::Deserialize)]
struct AnswerFile {
    #[serde(default)]
    answer: Vec<Answer>,
}

/// The `[[answer]]` tables of `text` (a recipe, or a file of answers only),
/// read from `path` (named in errors). Errors: TOML that does not parse, an
/// item that is not one or a key an answer does not have (with line and
/// column), no answer at all.
pub(crate) fn parse_answers(path: &std::path::Path, text: &str) -> Result<Vec<Answer>, String> {
    let shown = crate::untrusted::escape_path(path);
    let mut unknown = Vec::new();
    let de = toml::Deserializer::parse(text).map_err(|e| format!("{shown}: {e}"))?;
    let f: AnswerFile = serde_ignored::deserialize(de, |p| {
        let p = p.to_string();
        if p.starts_with("answer.") {
            unknown.push(p);
        }
    })
    .map_err(|e| format!("{shown}: {e}"))?;
    if let Some(p) = unknown.first() {
        return Err(format!(
            "{shown}: unknown key `{p}`: an [[answer]] takes name, question, event, from, to, \
             match, by, values, where, sort, top and engine"
        ));
    }
    if f.answer.is_empty() {
        return Err(format!(
            "{shown}: no [[answer]] table; write one with `name`, `event` (or `from`/`to`), `by` \
             and `values` (docs: Answers)"
        ));
    }
    Ok(f.answer)
}

#[cfg(test)]
mod tests {
    use super::errno_numbers;

    #[test]
    fn errno_names_in_where_become_numbers() {
        assert_eq!(
            errno_numbers("ret == -ENOENT || ret == -EACCES"),
            "ret == -2 || ret == -13"
        );
        assert_eq!(
            errno_numbers("comm == \"EXE\" && ret < 0"),
            "comm == \"EXE\" && ret < 0"
        );
        assert_eq!(errno_numbers("ret == -EFOO"), "ret == -EFOO");
    }
}
