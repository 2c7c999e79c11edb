//! Which records `report` reads: `-F EVENT[:FILTER]`, `--cpu`, `--pid`,
//! `--comm` and a `--from`/`--to` window, compiled once against the file's
//! formats and evaluated on each decoded record.
//!
//! Filters use the kernel's event filter syntax (Documentation/trace/events.rst
//! section 5), parsed by the validator's parser; `&&` binds tighter than `||`.

use rustc_hash::FxHashSet;
use tracedat::{Comms, Event, EventFormat, FieldValue, Record, Records, TraceFile};

use crate::compare::Cmp;
use crate::validate::filter::{self, Expr, Op, Value};

/// A bad `-F`, `--cpu` or `--from`/`--to`: what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// The text of a flag cannot be read (a usage error).
    #[error("{0}")]
    Syntax(String),
    /// The flag names something this file does not hold.
    #[error("{0}")]
    Unknown(String),
}

/// One compiled `FIELD OP VALUE`.
#[derive(Debug, Clone)]
struct Test {
    field: Field,
    op: Op,
    value: Want,
}

#[derive(Debug, Clone)]
enum Field {
    /// A field of the event's format, by name.
    Named(String),
    /// `cpu` / `CPU`: the record's CPU.
    Cpu,
    /// `comm` / `COMM`: the task's name.
    Comm,
}

#[derive(Debug, Clone)]
enum Want {
    Int(i128),
    Text(String),
}

/// An event's compiled filter.
#[derive(Debug, Clone)]
struct Compiled {
    expr: Expr,
    tests: Vec<Test>,
}

/// A filter (the recipe's filter syntax) compiled against one event format,
/// for a pass that evaluates it on that format's records (`[[answer]]`
/// `where`).
#[derive(Debug, Clone)]
pub(super) struct Filter(Compiled);

impl Filter {
    /// `text` compiled against `f`; the error says what is wrong, where.
    pub(super) fn compile(f: &EventFormat, text: &str) -> Result<Filter, String> {
        let (expr, preds) = filter::parse_expr(text).map_err(|e| {
            format!(
                "filter syntax at byte {} of `{text}`: {}; write FIELD OP VALUE joined with && \
                 and || (Documentation/trace/events.rst section 5)",
                e.span.start, e.message
            )
        })?;
        let tests = (preds.iter())
            .map(|p| compile_test(f, p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Filter(Compiled { expr, tests }))
    }

    /// Whether it holds for `ev` (a record of the format it was compiled
    /// for; `learned` names tasks for `comm`).
    pub(super) fn holds(&self, ev: &Event<'_>, learned: &Comms, file: &TraceFile) -> bool {
        eval(&self.0.expr, &self.0.tests, ev, learned, file)
    }
}

/// What `report` keeps. Build it with [`Select::new`]; [`Select::keeps`]
/// answers per record.
#[derive(Debug, Default)]
pub struct Select {
    /// Per format id: `None` not kept; `Some(filters)` kept when any of them
    /// holds (an empty list: always). `None` for the whole field: no `-F`.
    events: Option<Vec<Option<Vec<Compiled>>>>,
    cpus: Option<FxHashSet<u32>>,
    pids: Option<FxHashSet<i32>>,
    comms: Option<Vec<String>>,
    from: Option<u64>,
    to: Option<u64>,
    /// Task names learned from the stream (for `--comm` and `comm ==`).
    learned: Comms,
    /// Whether a filter tests `comm` (then the stream's names are learned).
    tests_comm: bool,
}

/// The command-line text a [`Select`] is built from (also an export's
/// meta.json `selection`, as given).
#[derive(Debug, Default, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct SelectArgs {
    /// `EVENT[:FILTER]` (EVENT: `system:event`, `system:*`, `event`).
    pub filters: Vec<String>,
    /// CPU lists: `0,2-3`.
    pub cpus: Vec<String>,
    /// Pids.
    pub pids: Vec<i32>,
    /// Task names (globs).
    pub comms: Vec<String>,
    /// Start: seconds after the first event, or `@TIMESTAMP` / `SECS.USECS`
    /// as the listing prints it (see `parse_time`).
    pub from: Option<String>,
    /// End (inclusive), same forms as `from`.
    pub to: Option<String>,
}

impl SelectArgs {
    /// Whether nothing narrows the records.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
            && self.cpus.is_empty()
            && self.pids.is_empty()
            && self.comms.is_empty()
            && self.from.is_none()
            && self.to.is_none()
    }
}

impl Select {
    /// Compiles `args` against `file`'s formats. `None` when `args` narrows
    /// nothing (the caller then does no per-record work).
    pub fn new(file: &TraceFile, args: &SelectArgs) -> Result<Option<Select>, SelectError> {
        if args.is_empty() {
            return Ok(None);
        }
        let mut s = Select::default();
        if !args.filters.is_empty() {
            let events = compile_events(file, &args.filters)?;
            s.tests_comm = events
                .iter()
                .flatten()
                .flatten()
                .any(|c| c.tests.iter().any(|t| matches!(t.field, Field::Comm)));
            s.events = Some(events);
        }
        if !args.cpus.is_empty() {
            let mut set = FxHashSet::default();
            for list in &args.cpus {
                set.extend(parse_cpus(list)?);
            }
            s.cpus = Some(set);
        }
        if !args.pids.is_empty() {
            s.pids = Some(args.pids.iter().copied().collect());
        }
        if !args.comms.is_empty() {
            s.comms = Some(args.comms.clone());
        }
        if args.from.is_some() || args.to.is_some() {
            let first = first_ts(file)?;
            let at = |t: &Option<String>, flag: &str| {
                t.as_deref()
                    .map(|t| parse_time(t, first, file.clock(), flag))
                    .transpose()
            };
            s.from = at(&args.from, "--from")?;
            s.to = at(&args.to, "--to")?;
        }
        Ok(Some(s))
    }

    /// The records of `file` this selection keeps, in order (see [`Kept`]).
    pub fn records<'s, 'a>(&'s mut self, file: &'a TraceFile) -> Kept<'s, 'a> {
        Kept {
            file,
            records: file.records(),
            keep: self,
        }
    }

    /// Whether the event `ev` is kept.
    fn keeps(&mut self, file: &TraceFile, ev: &Event<'_>) -> bool {
        let ts = ev.ts;
        if self.from.is_some_and(|f| ts < f) || self.to.is_some_and(|t| ts > t) {
            return false;
        }
        if let Some(cpus) = &self.cpus
            && !cpus.contains(&ev.cpu)
        {
            return false;
        }
        if self.comms.is_some() || self.tests_comm {
            self.learned.learn(file, ev);
        }
        let pid = ev.pid();
        if let Some(pids) = &self.pids
            && !pids.contains(&pid)
        {
            return false;
        }
        if let Some(comms) = &self.comms {
            let name = task_name(&self.learned, file, pid);
            if !comms.iter().any(|c| crate::kernel::glob_match(c, &name)) {
                return false;
            }
        }
        match &self.events {
            None => true,
            Some(per_id) => match per_id.get(ev.format.id as usize) {
                Some(Some(filters)) => {
                    filters.is_empty()
                        || filters
                            .iter()
                            .any(|c| eval(&c.expr, &c.tests, ev, &self.learned, file))
                }
                _ => false,
            },
        }
    }
}

/// The records of a file that a [`Select`] keeps, in order, walked with
/// [`Kept::try_for_each_record`].
pub struct Kept<'s, 'a> {
    file: &'a TraceFile,
    records: Records<'a>,
    keep: &'s mut Select,
}

impl Kept<'_, '_> {
    /// Calls `f` with each kept record, in order, through
    /// [`Records::try_for_each_record`] (no record is moved through a return
    /// value). A lost-events marker goes with the event after it (the first
    /// after the loss, on its CPU, which the reader gives next): both are
    /// kept or neither, as trace-cmd prints `CPU:N [N EVENTS DROPPED]` on the
    /// record that carries the loss, when its filters keep that record.
    ///
    /// Stops at the first error, of the file or of `f`, and returns it.
    pub fn try_for_each_record<E: From<tracedat::Error>>(
        self,
        mut f: impl FnMut(&Record<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.try_for_each_prepared(|_, _| {}, |rec, _| f(rec))
    }

    /// [`Kept::try_for_each_record`] with the first stage of
    /// [`Records::try_for_each_prepared`]: `prepare` sees every record, kept
    /// or not, on the thread that decodes; `f` gets what it made of a kept
    /// one (nothing for a lost-events marker).
    pub fn try_for_each_prepared<E: From<tracedat::Error>>(
        self,
        prepare: impl FnMut(&Record<'_>, &mut Vec<u8>) + Send,
        mut f: impl FnMut(&Record<'_>, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let Kept {
            file,
            records,
            keep,
        } = self;
        // A loss marker waits for the event after it: (buffer, CPU, count).
        let mut lost: Option<(String, u32, Option<u64>)> = None;
        records.try_for_each_prepared(prepare, |rec, prepared| match rec {
            Record::Lost {
                buffer, cpu, count, ..
            } => {
                lost = Some((buffer.to_string(), *cpu, *count));
                Ok(())
            }
            Record::Event(ev) => {
                let marker = lost.take();
                if !keep.keeps(file, ev) {
                    return Ok(());
                }
                if let Some((buffer, cpu, count)) = marker {
                    f(
                        &Record::Lost {
                            buffer: &buffer,
                            cpu,
                            count,
                            ts: ev.ts,
                        },
                        &[],
                    )?;
                }
                f(rec, prepared)
            }
        })
    }
}

/// The name the listing prints for `pid`.
fn task_name(learned: &Comms, file: &TraceFile, pid: i32) -> String {
    match learned.get(file, pid) {
        Some(n) => n.to_string(),
        None if pid == 0 => "<idle>".into(),
        None => "<...>".into(),
    }
}

fn compile_events(
    file: &TraceFile,
    specs: &[String],
) -> Result<Vec<Option<Vec<Compiled>>>, SelectError> {
    let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
    let mut per_id: Vec<Option<Vec<Compiled>>> = (0..=max_id).map(|_| None).collect();
    for spec in specs {
        // EVENT is everything before the first `:` that is followed by a
        // filter; `system:event` holds one `:` itself.
        let (event, text) = split_spec(file, spec);
        let matched: Vec<&EventFormat> =
            file.formats().filter(|f| event_matches(event, f)).collect();
        if matched.is_empty() {
            return Err(SelectError::Unknown(format!(
                "-F {spec:?}: this file has no event `{event}`; list the file's events with \
                 `trace-recipe report FILE --format json` (events) or write SYSTEM:EVENT, \
                 SYSTEM:* or EVENT"
            )));
        }
        let parsed = text
            .map(|t| {
                filter::parse_expr(t).map_err(|e| {
                    SelectError::Syntax(format!(
                        "-F {spec:?}: filter syntax at byte {} of `{t}`: {}; write FIELD OP VALUE \
                         joined with && and || (Documentation/trace/events.rst section 5)",
                        e.span.start, e.message
                    ))
                })
            })
            .transpose()?;
        for f in matched {
            let slot = per_id[f.id as usize].get_or_insert_with(Vec::new);
            let Some((expr, preds)) = &parsed else {
                // Unconditional: any other filter of this event no longer matters.
                slot.clear();
                slot.push(Compiled {
                    expr: Expr::Pred(0),
                    tests: Vec::new(),
                });
                continue;
            };
            let tests = preds
                .iter()
                .map(|p| compile_test(f, p))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| SelectError::Unknown(format!("-F {spec:?}: {e}")))?;
            // An unconditional entry (no tests) keeps everything already.
            if slot.iter().any(|c| c.tests.is_empty()) {
                continue;
            }
            slot.push(Compiled {
                expr: expr.clone(),
                tests,
            });
        }
    }
    // An unconditional entry is stored as "always": an empty list.
    for slot in per_id.iter_mut().flatten() {
        if slot.iter().any(|c| c.tests.is_empty()) {
            slot.clear();
        }
    }
    Ok(per_id)
}

/// Splits `EVENT[:FILTER]`: `sched:sched_switch:prev_pid == 1`,
/// `sched_switch:prev_pid == 1`, `sched:*`, `sched:sched_switch`.
fn split_spec<'a>(file: &TraceFile, spec: &'a str) -> (&'a str, Option<&'a str>) {
    let Some((a, rest)) = spec.split_once(':') else {
        return (spec.trim(), None);
    };
    // `a:rest`: a system when some format's system is `a` and `rest` starts
    // with an event name (or `*`) of it.
    let is_system = file.formats().any(|f| f.system == a.trim());
    if is_system {
        match rest.split_once(':') {
            Some((ev, filter)) => (&spec[..a.len() + 1 + ev.len()], Some(filter)),
            None => {
                let ev = rest.trim();
                let is_event = ev == "*"
                    || file
                        .formats()
                        .any(|f| f.system == a.trim() && crate::kernel::glob_match(ev, &f.name));
                if is_event {
                    (spec.trim(), None)
                } else {
                    (a.trim(), Some(rest))
                }
            }
        }
    } else {
        (a.trim(), Some(rest))
    }
}

/// Whether `event` (`system:event`, `system:*`, `event`, globs) names `f`.
pub(super) fn event_matches(event: &str, f: &EventFormat) -> bool {
    match event.split_once(':') {
        Some((sys, name)) => {
            crate::kernel::glob_match(sys.trim(), &f.system)
                && crate::kernel::glob_match(name.trim(), &f.name)
        }
        None => crate::kernel::glob_match(event, &f.name),
    }
}

fn compile_test(f: &EventFormat, p: &filter::Predicate) -> Result<Test, String> {
    let (name, _suffix) = p.field.split_once('.').unwrap_or((&p.field, ""));
    let op = p.op;
    let (field, text) = match name {
        "cpu" | "CPU" if f.field(name).is_none() => (Field::Cpu, false),
        "comm" | "COMM" if f.field(name).is_none() => (Field::Comm, true),
        _ => match f.field(name) {
            Some(fd) => (Field::Named(name.to_string()), fd.is_string),
            None => {
                let mut names: Vec<&str> = f.fields.iter().map(|x| x.name.as_str()).collect();
                names.truncate(12);
                return Err(format!(
                    "`{}:{}` has no field `{name}`; its fields: {}",
                    f.system,
                    f.name,
                    names.join(", ")
                ));
            }
        },
    };
    if op == Op::Glob && !text {
        return Err(format!(
            "`~` matches strings; field `{name}` is a number: use ==, !=, <, <=, >, >= or &"
        ));
    }
    let value = match (&p.value, text) {
        (Value::Quoted(s) | Value::Word(s), true) => Want::Text(s.clone()),
        (Value::Number(n), true) => Want::Text(n.clone()),
        (Value::Number(n), false) => Want::Int(
            parse_int(n).ok_or_else(|| format!("`{n}` is not a number field `{name}` can hold"))?,
        ),
        (Value::Quoted(s) | Value::Word(s), false) => {
            return Err(format!(
                "field `{name}` of `{}:{}` is a number, `{s}` is not; compare it with a number",
                f.system, f.name
            ));
        }
    };
    match (&value, op) {
        (Want::Text(_), Op::Cmp(Cmp::Eq | Cmp::Ne) | Op::Glob) | (Want::Int(_), _) => {}
        (Want::Text(_), _) => {
            return Err(format!(
                "`{}` does not apply to string field `{name}`: use ==, != or ~",
                p.op
            ));
        }
    }
    Ok(Test { field, op, value })
}

fn parse_int(n: &str) -> Option<i128> {
    let (neg, digits) = match n.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, n),
    };
    let v = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(h) => u64::from_str_radix(h, 16).ok()?,
        None => digits.parse::<u64>().ok()?,
    };
    Some(if neg { -i128::from(v) } else { i128::from(v) })
}

fn eval(e: &Expr, tests: &[Test], ev: &Event<'_>, learned: &Comms, file: &TraceFile) -> bool {
    match e {
        Expr::Pred(i) => tests.get(*i).is_some_and(|t| test(t, ev, learned, file)),
        Expr::Not(x) => !eval(x, tests, ev, learned, file),
        Expr::And(a, b) => eval(a, tests, ev, learned, file) && eval(b, tests, ev, learned, file),
        Expr::Or(a, b) => eval(a, tests, ev, learned, file) || eval(b, tests, ev, learned, file),
    }
}

fn test(t: &Test, ev: &Event<'_>, learned: &Comms, file: &TraceFile) -> bool {
    match (&t.field, &t.value) {
        (Field::Cpu, Want::Int(w)) => compare_int(i128::from(ev.cpu), t.op, *w),
        (Field::Comm, Want::Text(w)) => {
            compare_text(task_name(learned, file, ev.pid()).as_bytes(), t.op, w)
        }
        (Field::Named(n), want) => match (ev.field(n), want) {
            (Some(FieldValue::Int(v)), Want::Int(w)) => compare_int(i128::from(v), t.op, *w),
            (Some(FieldValue::UInt(v)), Want::Int(w)) => {
                // A negative value against an unsigned field: the kernel
                // compares the field's bits, so sign-extend the field's width.
                let w = if *w < 0 {
                    let size = ev.format.field(n).map_or(8, |f| f.size.clamp(1, 8));
                    let mask = if size == 8 {
                        u64::MAX
                    } else {
                        (1u64 << (size * 8)) - 1
                    };
                    i128::from((*w as i64 as u64) & mask)
                } else {
                    *w
                };
                compare_int(i128::from(v), t.op, w)
            }
            (Some(FieldValue::Str(s) | FieldValue::Bytes(s)), Want::Text(w)) => {
                compare_text(s.split(|c| *c == 0).next().unwrap_or(&[]), t.op, w)
            }
            _ => false,
        },
        _ => false,
    }
}

fn compare_int(v: i128, op: Op, w: i128) -> bool {
    match op {
        Op::Cmp(c) => c.holds(&v, &w),
        Op::BitAnd => v & w != 0,
        Op::Glob => false,
    }
}

fn compare_text(v: &[u8], op: Op, w: &str) -> bool {
    let v = String::from_utf8_lossy(v);
    match op {
        Op::Cmp(c @ (Cmp::Eq | Cmp::Ne)) => c.holds(v.as_ref(), w),
        Op::Glob => crate::kernel::glob_match(w, &v),
        _ => false,
    }
}

/// `0,2-3` → 0, 2, 3.
fn parse_cpus(list: &str) -> Result<Vec<u32>, SelectError> {
    let bad = || {
        SelectError::Syntax(format!(
            "--cpu {list:?}: write CPU numbers and ranges, e.g. `0,2-3`"
        ))
    };
    let mut out = Vec::new();
    for part in list.split(',').map(str::trim) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let a: u32 = a.trim().parse().map_err(|_| bad())?;
        let b: u32 = b.trim().parse().map_err(|_| bad())?;
        if a > b || b - a > 65_535 {
            return Err(bad());
        }
        out.extend(a..=b);
    }
    Ok(out)
}

/// The timestamp of the file's first record.
fn first_ts(file: &TraceFile) -> Result<u64, SelectError> {
    match file.records().next() {
        Some(Ok(r)) => Ok(r.ts()),
        Some(Err(e)) => Err(SelectError::Unknown(format!(
            "cannot read the first record: {e}"
        ))),
        None => Ok(0),
    }
}

/// A `--from`/`--to` value: `SECS` (a decimal number of seconds after the
/// file's first record, `first`), or `@TS` where TS is an event's timestamp
/// as the text listing prints it (`12345.678901` for nanosecond clocks, the
/// raw counter otherwise).
pub(crate) fn parse_time(t: &str, first: u64, clock: &str, flag: &str) -> Result<u64, SelectError> {
    let bad = || {
        SelectError::Syntax(format!(
            "{flag} {t:?}: write seconds after the first event (`1.5`) or an event's timestamp \
             as the listing prints it, after `@` (`@12345.678901`)"
        ))
    };
    let (abs, num) = match t.trim().strip_prefix('@') {
        Some(n) => (true, n.trim()),
        None => (false, t.trim()),
    };
    let ns = |n: &str| -> Option<u64> {
        let (s, frac) = n.split_once('.').unwrap_or((n, ""));
        if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let secs: u64 = s.parse().ok()?;
        let frac: u64 = if frac.is_empty() {
            0
        } else {
            format!("{frac:0<9}").parse().ok()?
        };
        secs.checked_mul(1_000_000_000)?.checked_add(frac)
    };
    if abs && !tracedat::clock_is_nanoseconds(clock) {
        return num.parse::<u64>().map_err(|_| bad());
    }
    let v = ns(num).ok_or_else(bad)?;
    if abs {
        // The listing rounds to microseconds: a printed timestamp covers
        // the half-microsecond either side. Widen `from` down and `to` up.
        Ok(match flag {
            "--from" => v.saturating_sub(500),
            _ => v.saturating_add(499),
        })
    } else if tracedat::clock_is_nanoseconds(clock) {
        Ok(first.saturating_add(v))
    } else {
        Err(SelectError::Syntax(format!(
            "{flag} {t:?}: this file's clock `{clock}` does not count nanoseconds; give an \
             event's timestamp after `@`"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_seconds_after_the_first_event_or_printed_timestamps() {
        assert_eq!(
            parse_time("1.5", 100, "local", "--from").unwrap(),
            1_500_000_100
        );
        assert_eq!(
            parse_time("@12.000001", 0, "local", "--from").unwrap(),
            12_000_000_500
        );
        assert_eq!(
            parse_time("@12.000001", 0, "local", "--to").unwrap(),
            12_000_001_499
        );
        assert!(parse_time("soon", 0, "local", "--to").is_err());
        assert!(parse_time("1.5", 0, "counter", "--to").is_err());
        assert_eq!(parse_time("@777", 0, "counter", "--to").unwrap(), 777);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("0,2-3").unwrap(), [0, 2, 3]);
        assert!(parse_cpus("x").is_err());
        assert!(parse_cpus("3-1").is_err());
    }
}
