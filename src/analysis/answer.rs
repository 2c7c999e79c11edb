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

/// A key's value, as read from a record (borrowing its text) or decoded
/// from a key ([`Part::decode`]).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part<'a> {
    Int(i64),
    UInt(u64),
    Text(&'a [u8]),
    /// A kernel stack's return addresses, innermost first (none as read
    /// from its event: the stack is the record that follows).
    Stack(Vec<u64>),
}

/// The tags of [`Part::encode`]: what the bytes after them are.
const TAG_INT: u8 = 0;
const TAG_UINT: u8 = 1;
const TAG_TEXT: u8 = 2;
const TAG_STACK: u8 = 3;
/// A span's `from.` key that did not decode (the span's `to` then does not
/// count).
const TAG_ABSENT: u8 = 4;

impl<'a> Part<'a> {
    fn int(&self) -> Option<i64> {
        match self {
            Part::Int(v) => Some(*v),
            Part::UInt(v) => Some(*v as i64),
            Part::Text(_) | Part::Stack(_) => None,
        }
    }

    /// Appends it to `out` as a key's maps hold it: a tag, then an
    /// integer's 8 bytes, or a text's or stack's length (4 bytes) and its
    /// bytes or words. A key is its parts one after the other, hashed and
    /// compared as one byte string.
    #[inline(always)]
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Part::Int(v) => encode_int(TAG_INT, *v as u64, out),
            Part::UInt(v) => encode_int(TAG_UINT, *v, out),
            Part::Text(_) | Part::Stack(_) => self.encode_long(out),
        }
    }

    /// [`Part::encode`] of a text or stack (kept out of line, so that the
    /// integer parts of the common keys inline).
    #[inline(never)]
    fn encode_long(&self, out: &mut Vec<u8>) {
        match self {
            Part::Text(t) => {
                out.push(TAG_TEXT);
                out.extend_from_slice(&(t.len() as u32).to_le_bytes());
                out.extend_from_slice(t);
            }
            Part::Stack(frames) => {
                out.push(TAG_STACK);
                out.extend_from_slice(&(frames.len() as u32).to_le_bytes());
                for f in frames {
                    out.extend_from_slice(&f.to_le_bytes());
                }
            }
            Part::Int(_) | Part::UInt(_) => self.encode(out),
        }
    }

    /// The part [`Part::encode`] wrote at the start of `key` (`None`: an
    /// absent one), and the bytes after it.
    fn decode(key: &'a [u8]) -> (Option<Part<'a>>, &'a [u8]) {
        let (part, rest) = key.split_at(encoded_len(key));
        let word = |b: &[u8]| u64::from_le_bytes(b[..8].try_into().unwrap_or_default());
        let p = match part[0] {
            TAG_INT => Some(Part::Int(word(&part[1..]) as i64)),
            TAG_UINT => Some(Part::UInt(word(&part[1..]))),
            TAG_TEXT => Some(Part::Text(&part[5..])),
            TAG_STACK => Some(Part::Stack(part[5..].chunks_exact(8).map(word).collect())),
            _ => None,
        };
        (p, rest)
    }
}

/// Appends an integer part ([`Part::encode`]) in one copy.
#[inline]
fn encode_int(tag: u8, v: u64, out: &mut Vec<u8>) {
    let mut b = [tag; 9];
    b[1..].copy_from_slice(&v.to_le_bytes());
    out.extend_from_slice(&b);
}

/// The length of the encoded part at the start of `key` ([`Part::encode`]).
fn encoded_len(key: &[u8]) -> usize {
    let len = || u32::from_le_bytes([key[1], key[2], key[3], key[4]]) as usize;
    match key[0] {
        TAG_INT | TAG_UINT => 9,
        TAG_TEXT => 5 + len(),
        TAG_STACK => 5 + 8 * len(),
        _ => 1,
    }
}

/// `key` with its part `at` replaced by `part`.
fn with_part(key: &[u8], at: usize, part: &Part<'_>) -> Vec<u8> {
    let start: usize = (0..at).fold(0, |o, _| o + encoded_len(&key[o..]));
    let end = start + encoded_len(&key[start..]);
    let mut out = key[..start].to_vec();
    part.encode(&mut out);
    out.extend_from_slice(&key[end..]);
    out
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

    #[inline(always)]
    fn part<'e>(&self, ev: &'e Event<'_>) -> Option<Part<'e>> {
        match self {
            Read::Field(f) => decoded(f, ev),
            Read::Stack => Some(Part::Stack(Vec::new())),
            Read::CommonPid | Read::Cpu | Read::Int(_) => match self.word(ev)? {
                (TAG_INT, v) => Some(Part::Int(v as i64)),
                (_, v) => Some(Part::UInt(v)),
            },
        }
    }

    /// An integer read (`common_pid`, the CPU, a plain integer field): its
    /// tag ([`TAG_INT`] when signed, else [`TAG_UINT`]) and bits; `None`
    /// for the others, and for a record too short.
    #[inline(always)]
    fn word(&self, ev: &Event<'_>) -> Option<(u8, u64)> {
        match self {
            Read::CommonPid => Some((TAG_INT, i64::from(ev.pid()) as u64)),
            Read::Cpu => Some((TAG_UINT, u64::from(ev.cpu))),
            Read::Int(f) => {
                let v = f.get(&ev.data, ev.big_endian)?;
                Some((if f.place().2 { TAG_INT } else { TAG_UINT }, v))
            }
            Read::Field(_) | Read::Stack => None,
        }
    }

    /// Appends what it reads of `ev` to the key `out` ([`Part::encode`]);
    /// false (and nothing appended) when that does not decode.
    #[inline(always)]
    fn encode(&self, ev: &Event<'_>, out: &mut Vec<u8>) -> bool {
        match self {
            Read::Field(_) | Read::Stack => self.part(ev).map(|p| p.encode(out)).is_some(),
            Read::CommonPid | Read::Cpu | Read::Int(_) => (self.word(ev))
                .map(|(tag, v)| encode_int(tag, v, out))
                .is_some(),
        }
    }

    /// What it reads of `ev` as a value: a number.
    #[inline(always)]
    fn int(&self, ev: &Event<'_>) -> Option<i64> {
        match self {
            Read::Field(_) | Read::Stack => self.part(ev)?.int(),
            Read::CommonPid | Read::Cpu | Read::Int(_) => self.word(ev).map(|(_, v)| v as i64),
        }
    }
}

/// A field of `ev` that is not a plain integer, decoded (kept out of line,
/// so that [`Read::part`] of the integer ones inlines).
#[inline(never)]
fn decoded<'e>(f: &tracedat::Field, ev: &'e Event<'_>) -> Option<Part<'e>> {
    match f.decode(&ev.data, ev.big_endian)? {
        FieldValue::Int(v) => Some(Part::Int(v)),
        FieldValue::UInt(v) => Some(Part::UInt(v)),
        FieldValue::Str(s) | FieldValue::Bytes(s) => Some(Part::Text(s)),
        FieldValue::Array(_) => None,
    }
}

/// A span's match key: `reads` of `ev` as one key into `out` (cleared
/// first); false when one does not decode. Numbers are compared by value
/// whatever their fields' signedness (an eprobe's `u64` copy of a `pid_t`),
/// as the kernel's `onmatch` compares them: each is tagged [`TAG_INT`].
fn match_key_into(reads: &[Read], ev: &Event<'_>, out: &mut Vec<u8>) -> bool {
    out.clear();
    reads.iter().all(|r| {
        let at = out.len();
        let read = r.encode(ev, out);
        if read && out[at] == TAG_UINT {
            out[at] = TAG_INT;
        }
        read
    })
}

/// How one format's records take part in one answer: as the one event (or
/// a span's `to`), its keys and value fields read from it (`None`: from the
/// span's `from`, see [`Spans`]), and its `where`.
#[derive(Debug, Clone)]
struct Counted {
    keys: Vec<Option<Read>>,
    vals: Vec<Option<Read>>,
    filter: Option<Filter>,
    /// A one-event answer's `latency` on a record that carries its own
    /// duration: its `calltime` and `rettime` (ns).
    own: Option<(tracedat::IntField, tracedat::IntField)>,
}

/// How one format's records take part in a span ([`Spans`]).
#[derive(Debug, Clone)]
enum End {
    /// A `from`: its match fields, and the `from.` keys and values, in the
    /// answer's order.
    Opens {
        match_on: Vec<Read>,
        keys: Vec<Read>,
        vals: Vec<Read>,
    },
    /// A `to`: its match fields.
    Closes { match_on: Vec<Read> },
}

/// What makes two answers' spans the same: their ends, match fields and
/// `from.` keys and values. Answers of one span share its [`Spans`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct SpanId {
    from: String,
    to: String,
    match_on: Vec<Source>,
    keys: Vec<Source>,
    vals: Vec<Source>,
}

/// An open span: its start, and its `from.` keys ([`Part::encode`], one
/// after the other) and values.
#[derive(Debug, Default)]
struct Open {
    start: u64,
    keys: Vec<u8>,
    vals: Vec<Option<i64>>,
    /// Whether it is open (an entry stays in the map once closed, so that
    /// a match key met again, a pid's next syscall, costs no allocation).
    live: bool,
}

/// The open spans of one [`SpanId`], paired for every answer of it.
struct Spans {
    id: SpanId,
    /// Per format id: its end (`None`: not one of this span).
    ends: Vec<Option<End>>,
    /// Per match key, its span. Closed entries are dropped when the map
    /// reaches twice [`MAX_OPEN`].
    open: KeyMap<Open>,
    /// How many entries of `open` are live.
    now: usize,
    /// The span the record at hand closed, if `closing`.
    closed: Open,
    closing: bool,
    /// The match key of the record at hand.
    matched: Vec<u8>,
    /// `from` events not followed ([`MAX_OPEN`] open), and whose match
    /// fields did not decode.
    untracked: u64,
    undecoded: u64,
}

impl Spans {
    /// No span open yet.
    fn new(id: SpanId, ends: Vec<Option<End>>) -> Spans {
        Spans {
            id,
            ends,
            open: KeyMap::default(),
            now: 0,
            closed: Open::default(),
            closing: false,
            matched: Vec::new(),
            untracked: 0,
            undecoded: 0,
        }
    }

    /// Opens or closes the span of `ev`'s match key, as its format's end
    /// says. A `to` ends its span whether the answers' `where` keep it or
    /// not.
    fn add(&mut self, ev: &Event<'_>) {
        let Some(Some(end)) = self.ends.get(usize::from(ev.format.id)) else {
            return;
        };
        match end {
            End::Opens {
                match_on,
                keys,
                vals,
            } => {
                if !match_key_into(match_on, ev, &mut self.matched) {
                    self.undecoded += 1;
                    return;
                }
                let fill = |o: &mut Open| {
                    o.start = ev.ts;
                    o.live = true;
                    o.keys.clear();
                    for k in keys {
                        if !k.encode(ev, &mut o.keys) {
                            o.keys.push(TAG_ABSENT);
                        }
                    }
                    o.vals.clear();
                    o.vals.extend(vals.iter().map(|v| v.int(ev)));
                };
                match self.open.get_mut(self.matched.as_slice()) {
                    Some(o) => {
                        self.now += usize::from(!o.live);
                        fill(o);
                    }
                    None if self.now < MAX_OPEN => {
                        if self.open.len() >= 2 * MAX_OPEN {
                            self.open.retain(|o| o.live);
                        }
                        let mut o = Open::default();
                        fill(&mut o);
                        self.open.insert(&self.matched, o);
                        self.now += 1;
                    }
                    None => self.untracked += 1,
                }
            }
            End::Closes { match_on } => {
                self.closing = false;
                if match_key_into(match_on, ev, &mut self.matched)
                    && let Some(o) = self.open.get_mut(self.matched.as_slice())
                    && o.live
                {
                    o.live = false;
                    std::mem::swap(o, &mut self.closed);
                    self.now -= 1;
                    self.closing = true;
                }
            }
        }
    }

    /// Whether records of format `id` open or close its spans.
    #[inline]
    fn sees(&self, id: usize) -> bool {
        self.ends.get(id).is_some_and(Option::is_some)
    }

    /// The span the record at hand (a `to`) closed.
    fn closed(&self) -> Option<&Open> {
        self.closing.then_some(&self.closed)
    }
}

/// The slots of [`KeyMap::small`]: one-part keys of an integer under this.
const SMALL: u64 = 1 << 16;

/// The slot in [`KeyMap::small`] of a key that is one integer part under
/// [`SMALL`] (a pid, a syscall id): the value and its tag's bit.
#[inline(always)]
fn small_slot(key: &[u8]) -> Option<usize> {
    let b: &[u8; 9] = key.try_into().ok()?;
    let v = u64::from_le_bytes([b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8]]);
    (v < SMALL && b[0] <= TAG_UINT).then_some(((v as usize) << 1) | usize::from(b[0]))
}

/// Values by key ([`Part::encode`]): a key of one small integer (the pids
/// and syscall ids most keys are) found by index, without hashing or
/// comparing it; the others by hash.
struct KeyMap<V> {
    /// Per slot ([`small_slot`]), its entry's index in `smalls` plus one (0:
    /// none).
    small: Vec<u32>,
    /// The entries of small keys: slot and value.
    smalls: Vec<(usize, V)>,
    others: FxHashMap<Box<[u8]>, V>,
}

impl<V> Default for KeyMap<V> {
    fn default() -> Self {
        KeyMap {
            small: Vec::new(),
            smalls: Vec::new(),
            others: FxHashMap::default(),
        }
    }
}

impl<V> KeyMap<V> {
    /// How many keys it holds.
    fn len(&self) -> usize {
        self.smalls.len() + self.others.len()
    }

    /// The value of `key`.
    #[inline]
    fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        match small_slot(key) {
            Some(s) => {
                let i = (*self.small.get(s)? as usize).checked_sub(1)?;
                Some(&mut self.smalls[i].1)
            }
            None => self.others.get_mut(key),
        }
    }

    /// Adds `key` (not in the map yet) with `v`.
    fn insert(&mut self, key: &[u8], v: V) -> &mut V {
        match small_slot(key) {
            Some(s) => {
                if s >= self.small.len() {
                    self.small.resize(s + 1, 0);
                }
                self.smalls.push((s, v));
                self.small[s] = self.smalls.len() as u32;
                &mut self.smalls.last_mut().expect("just pushed").1
            }
            None => self.others.entry(key.into()).or_insert(v),
        }
    }

    /// Keeps the entries whose value `keep` says.
    fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        self.smalls.retain(|(_, v)| keep(v));
        self.small.fill(0);
        for (i, (s, _)) in self.smalls.iter().enumerate() {
            self.small[*s] = i as u32 + 1;
        }
        self.others.retain(|_, v| keep(v));
    }

    /// Every key (encoded) and its value.
    fn iter(&self) -> impl Iterator<Item = (Vec<u8>, &V)> {
        let small = self.smalls.iter().map(|(s, v)| {
            let mut key = Vec::with_capacity(9);
            encode_int((*s & 1) as u8, (*s >> 1) as u64, &mut key);
            (key, v)
        });
        small.chain(self.others.iter().map(|(k, v)| (k.to_vec(), v)))
    }
}

/// The rows of one answer.
#[derive(Default)]
struct Rows {
    /// Per key ([`Part::encode`]), its aggregate.
    map: KeyMap<Acc>,
    /// Records of keys past the first [`MAX_KEYS`].
    dropped: u64,
}

impl Rows {
    /// Counts one record (or span) in the row of `key`.
    #[inline]
    fn count(&mut self, key: &[u8], vs: &[i64], span: Option<(u64, u64, Seen)>) {
        let n = self.map.len();
        match self.map.get_mut(key) {
            Some(acc) => acc.add(vs, span),
            None if n < MAX_KEYS => self.map.insert(key, Acc::default()).add(vs, span),
            None => self.dropped += 1,
        }
    }
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

/// One answer compiled against a file, with its state.
struct Compiled {
    answer: Answer,
    values: Vec<AnswerValue>,
    keys: Vec<KeySpec>,
    /// Per `values` item reading a field: its index in the value fields.
    value_field: Vec<Option<usize>>,
    /// Per format id: how it counts (`None`: not in this answer).
    roles: Vec<Option<Counted>>,
    /// A span's ends, until [`Answers::start`] makes them shared [`Spans`].
    ends: Option<(SpanId, Vec<Option<End>>)>,
    /// A span's index in [`Answers::spans`].
    span: Option<usize>,
    rows: Rows,
    /// The key and values of the record at hand, reused from record to
    /// record: a row's key is copied only when the row is new.
    key: Vec<u8>,
    vals: Vec<i64>,
    /// A `by = ["stack"]` answer's stack key and its records' stacks.
    stack: Option<StackKey>,
    unpaired: u64,
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

/// The key and values of a `by = ["stack"]` event, waiting for its stack
/// (its stack part empty).
type Pending = (Vec<u8>, Vec<i64>);

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
        let mut roles: Vec<Option<Counted>> = vec![None; max_id + 1];
        let mut span_ends: Vec<Option<End>> = vec![None; max_id + 1];
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
                roles[f.id as usize] = Some(Counted {
                    keys,
                    vals,
                    filter,
                    own,
                });
                if span {
                    span_ends[f.id as usize] = Some(End::Closes { match_on });
                }
            } else if let Some(o) = opens
                && event_matches(o, f)
            {
                found.1 = true;
                let (keys, vals, match_on) = ends(f, true)?;
                span_ends[f.id as usize] = Some(End::Opens {
                    match_on,
                    keys: keys.into_iter().flatten().collect(),
                    vals: vals.into_iter().flatten().collect(),
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
        let ends = opens.map(|from| {
            let id = SpanId {
                from: from.to_string(),
                to: counted.to_string(),
                match_on: match_src,
                keys: (keys.iter().filter(|k| k.from))
                    .map(|k| k.source.clone())
                    .collect(),
                vals: fields
                    .iter()
                    .filter(|f| f.from)
                    .map(|f| source(f))
                    .collect(),
            };
            (id, span_ends)
        });
        Ok(Compiled {
            answer: a.clone(),
            values,
            keys,
            value_field,
            roles,
            ends,
            span: None,
            rows: Rows::default(),
            key: Vec::new(),
            vals: Vec::new(),
            stack,
            unpaired: 0,
            undecoded: 0,
        })
    }

    /// Whether records of format `id` mean something to it: its event (or
    /// span's `to`), or any record when it keys by stack.
    #[inline]
    fn sees(&self, id: usize) -> bool {
        self.stack.is_some() || self.roles.get(id).is_some_and(Option::is_some)
    }

    /// Counts `at` if its format is this answer's event (or span's `to`),
    /// with `spans` already fed it; completes a `by = ["stack"]` key with
    /// the stack it is.
    fn add(&mut self, at: &At<'_, '_>, learned: &Comms, spans: &[Spans]) {
        let ev = at.ev;
        if let Some(st) = &mut self.stack
            && let Some((key, vs)) =
                (st.pending.get_mut(at.cpu)).and_then(|p| p[context(ev)].take())
        {
            match st.caller.get(usize::from(ev.format.id)).copied().flatten() {
                Some(from) => {
                    let (long, big) = st.word;
                    let frames = super::stacks::stack_frames(&ev.data, from, long, big);
                    let key = with_part(&key, st.at, &Part::Stack(frames));
                    self.rows.count(&key, &vs, None);
                    return;
                }
                None => st.missing += 1,
            }
        }
        let Some(Some(role)) = self.roles.get(usize::from(ev.format.id)) else {
            return;
        };
        let opened = self.span.map(|i| spans[i].closed());
        if let Some(f) = &role.filter
            && !f.holds(ev, learned, at.file)
        {
            return;
        }
        let opened = match opened {
            Some(None) => {
                self.unpaired += 1;
                return;
            }
            Some(o) => o,
            None => None,
        };
        let (key, vs) = (&mut self.key, &mut self.vals);
        key.clear();
        vs.clear();
        let mut from_keys = opened.map_or(&[][..], |o| o.keys.as_slice());
        let whole = role.keys.iter().all(|k| match k {
            Some(r) => r.encode(ev, key),
            None => {
                let n = encoded_len(from_keys);
                let (part, rest) = from_keys.split_at(n);
                from_keys = rest;
                key.extend_from_slice(part);
                part[0] != TAG_ABSENT
            }
        });
        let mut from_vals = opened.map_or(&[][..], |o| o.vals.as_slice()).iter();
        let whole = whole
            && role.vals.iter().all(|v| {
                let x = match v {
                    Some(r) => r.int(ev),
                    None => from_vals.next().copied().flatten(),
                };
                x.map(|x| vs.push(x)).is_some()
            });
        if !whole {
            self.undecoded += 1;
            return;
        }
        let seen = Seen {
            ts: ev.ts,
            cpu: ev.cpu,
        };
        let ends = match role.own {
            Some((call, ret)) => {
                (call.get(&ev.data, ev.big_endian)).zip(ret.get(&ev.data, ev.big_endian))
            }
            None => opened.map(|o| (o.start, ev.ts)),
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
            None => self.rows.count(key, vs, span),
        }
    }

    /// Its table, `spans` ([`Answers::spans`]) giving its span's counts.
    fn finish(self, cx: &Finish<'_>, spans: &[Spans]) -> AnswerTable {
        let (untracked, from_undecoded) = self
            .span
            .map_or((0, 0), |i| (spans[i].untracked, spans[i].undecoded));
        let undecoded = self.undecoded + from_undecoded;
        let dropped = self.rows.dropped;
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
        for (key, acc) in self.rows.map.iter() {
            let mut rest = &key[..];
            let shown = (self.keys.iter())
                .map_while(|k| {
                    let (p, r) = Part::decode(rest);
                    rest = r;
                    Some(show(k, &p?))
                })
                .collect();
            merged.entry(shown).or_default().merge(acc);
        }
        let mut builder = TableBuilder::new(&self.values);
        let mut merged: Vec<(Vec<String>, Acc)> = merged.into_iter().collect();
        merged.sort_by(|a, b| a.0.cmp(&b.0));
        for (keys, acc) in merged {
            builder.add(self.row(keys, &acc));
        }
        let mut notes = Vec::new();
        if dropped > 0 {
            notes.push(format!(
                "{} events of keys past the first {MAX_KEYS} were not counted",
                dropped
            ));
        }
        if self.unpaired > 0 {
            notes.push(format!(
                "{} `to` events had no open `from` of their match key (a span begun before the trace)",
                self.unpaired
            ));
        }
        if untracked > 0 {
            notes.push(format!(
                "{} `from` events were not followed ({MAX_OPEN} spans open at once)",
                untracked
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
        if undecoded > 0 {
            notes.push(format!(
                "{undecoded} events were too short for a key or value field"
            ));
        }
        let head = TableHead {
            question: self.answer.question.clone(),
            engine: EngineUsed::Trace,
            keys: self.answer.by.iter().map(ToString::to_string).collect(),
            dropped,
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
    /// The spans of the span answers, one per [`SpanId`]: answers of the
    /// same span (bench's `syscall_time` and `task_time`) pair it once.
    spans: Vec<Spans>,
    /// Whether an answer keys by stack, and so sees every record (the
    /// stack follows its event).
    stacks: bool,
}

impl Pass for Answers {
    fn start(file: &TraceFile, sel: &Selection) -> Option<Answers> {
        let mut answers: Vec<Compiled> = (sel.answers().iter())
            .filter_map(|a| Compiled::new(file, a).ok())
            .collect();
        let mut spans: Vec<Spans> = Vec::new();
        for a in &mut answers {
            if let Some((id, ends)) = a.ends.take() {
                a.span = Some(match spans.iter().position(|s| s.id == id) {
                    Some(i) => i,
                    None => {
                        spans.push(Spans::new(id, ends));
                        spans.len() - 1
                    }
                });
            }
        }
        let stacks = answers.iter().any(|a| a.stack.is_some());
        (!answers.is_empty()).then_some(Answers {
            answers,
            spans,
            stacks,
        })
    }

    fn handles(&self, id: u16) -> bool {
        let id = usize::from(id);
        self.stacks
            || self.answers.iter().any(|a| a.sees(id))
            || self.spans.iter().any(|s| s.sees(id))
    }

    fn sees_unknown(&self) -> bool {
        self.stacks
    }

    #[inline]
    fn add(&mut self, at: &At<'_, '_>) {
        // Only the spans and answers a record means something to are
        // called (most see one end of a span, or one event, of the pass's).
        let id = usize::from(at.ev.format.id);
        for s in &mut self.spans {
            if s.sees(id) {
                s.add(at.ev);
            }
        }
        for a in &mut self.answers {
            if a.sees(id) {
                a.add(at, at.learned, &self.spans);
            }
        }
    }

    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        for a in self.answers {
            let name = a.answer.name.clone();
            out.answers.push((name, a.finish(cx, &self.spans)));
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
