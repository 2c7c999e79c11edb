//! `trace-cmd report`-like text output.
//!
//! [`Printer`] is the one implementation: it keeps per-file work (the line
//! head of each pid, the name column of each event, buffer prefixes) in caches
//! and writes digits by hand, because a listing prints every record of files
//! with tens of millions of them. [`format_record`] is a one-off `Printer`.

use std::cell::Cell;
use std::io::Write;

use rustc_hash::FxHashMap;

use crate::format::{EventFormat, Field, FieldLayout, FieldValue, read_uint};
use crate::printfmt::{Ctx, Kernel, PrintFmt, write_bprint};
use crate::{Comms, Event, Record, TraceFile};

impl Kernel for TraceFile {
    fn symbol(&self, addr: u64) -> Option<(&str, u64)> {
        TraceFile::symbol(self, addr)
    }
    fn kernel_string(&self, addr: u64) -> Option<&str> {
        self.printk_string(addr)
    }
    fn long_size(&self) -> usize {
        match TraceFile::long_size(self) {
            4 => 4,
            _ => 8,
        }
    }
}

/// How the body of an event is printed.
enum Body {
    /// Through the event's `print fmt`; `true`: after a `(SYMBOL+0xOFF) `
    /// prefix for `call_site`, as trace-cmd's kmem plugin prints it.
    Fmt(PrintFmt, bool),
    /// A handler of trace-cmd's plugins (sched_switch, sched_wakeup,
    /// function), reproduced.
    Plugin,
    /// `name=value` pairs (an event whose format the file lacks).
    Fields,
    /// The print fmt could not be parsed: `[FAILED TO PARSE]` and every
    /// field raw, as trace-cmd prints an event whose print fmt it could not
    /// parse ([`write_failed`]). One flag per field of `fields`: whether a
    /// character array is still printed as text (cleared by its first
    /// unprintable value, for the rest of the listing, as libtraceevent does).
    Failed(Vec<Cell<bool>>),
    /// A function_graph entry or exit, drawn as trace-cmd's function graph
    /// handlers draw it ([`Graph`]).
    Graph(Graph),
}

/// The fields trace-cmd's function graph handlers read: `func` and `depth`
/// of `ftrace:funcgraph_entry`, plus `calltime` and `rettime` (ns) of
/// `ftrace:funcgraph_exit`. Sizes and offsets come from the format, so the
/// layouts of old kernels (`int depth`, 4-byte `func` on 32-bit machines,
/// `calltime` before `overrun`) and of 6.x (`unsigned int depth`, `args[]`
/// after it, ignored as trace-cmd 3.1.6 ignores it) read alike.
struct Graph {
    func: At,
    depth: At,
    /// `(calltime, rettime)`: `Some` for the exit event.
    times: Option<(At, At)>,
}

/// Where an inline scalar field lies in a record.
#[derive(Clone, Copy)]
struct At {
    offset: usize,
    size: usize,
}

impl At {
    fn of(f: &Field) -> Option<At> {
        (f.layout == FieldLayout::Inline).then_some(At {
            offset: f.offset,
            size: f.size,
        })
    }

    /// The value read unsigned, as trace-cmd reads these fields (0 when the
    /// record is too short for it).
    fn read(self, ev: &Event<'_>) -> u64 {
        ev.data
            .get(self.offset..self.offset.saturating_add(self.size))
            .and_then(|b| read_uint(b, ev.big_endian))
            .unwrap_or(0)
    }
}

impl Graph {
    /// The graph fields of `f`, when it is one of the two events. Like
    /// trace-cmd, an entry is drawn only in a file that has the exit event
    /// (else its print fmt prints it: `--> func (depth)`).
    fn of(file: &TraceFile, f: &EventFormat) -> Option<Graph> {
        if f.system != "ftrace" {
            return None;
        }
        let field = |n: &str| f.field(n).and_then(At::of);
        let times = match f.name.as_str() {
            "funcgraph_entry" if file.format_by_name("ftrace", "funcgraph_exit").is_some() => None,
            "funcgraph_exit" => Some((field("calltime")?, field("rettime")?)),
            _ => return None,
        };
        Some(Graph {
            func: field("func")?,
            depth: field("depth")?,
            times,
        })
    }

    /// `rettime - calltime` of an exit record (wrapping, as trace-cmd's
    /// unsigned subtraction).
    fn duration(&self, ev: &Event<'_>) -> u64 {
        match &self.times {
            Some((call, ret)) => ret.read(ev).wrapping_sub(call.read(ev)),
            None => 0,
        }
    }
}

fn body_for(file: &TraceFile, f: &EventFormat) -> Body {
    let plugin = match (f.system.as_str(), f.name.as_str()) {
        ("sched", "sched_switch") => [
            "prev_comm",
            "prev_pid",
            "prev_prio",
            "prev_state",
            "next_comm",
            "next_pid",
            "next_prio",
        ]
        .iter()
        .all(|n| f.field(n).is_some()),
        ("sched", "sched_wakeup" | "sched_wakeup_new") => ["comm", "pid", "prio", "target_cpu"]
            .iter()
            .all(|n| f.field(n).is_some()),
        ("ftrace", "function") => f.field("ip").is_some() && f.field("parent_ip").is_some(),
        ("timer", "hrtimer_start") => ["function", "expires", "softexpires"]
            .iter()
            .all(|n| f.field(n).is_some()),
        ("timer", "hrtimer_expire_entry") => {
            ["function", "now"].iter().all(|n| f.field(n).is_some())
        }
        ("tlb", "tlb_flush") => ["pages", "reason"].iter().all(|n| f.field(n).is_some()),
        ("ftrace", "kernel_stack" | "print") => true,
        ("ftrace", "bprint") => ["ip", "fmt", "buf"].iter().all(|n| f.field(n).is_some()),
        _ => false,
    };
    if plugin {
        return Body::Plugin;
    }
    if let Some(g) = Graph::of(file, f) {
        return Body::Graph(g);
    }
    let kmem = f.system == "kmem"
        && matches!(
            f.name.as_str(),
            "kfree"
                | "kmalloc"
                | "kmalloc_node"
                | "kmem_cache_alloc"
                | "kmem_cache_alloc_node"
                | "kmem_cache_free"
        )
        && f.field("call_site").is_some();
    match PrintFmt::parse(f, Kernel::long_size(file)) {
        Ok(p) => Body::Fmt(p, kmem),
        Err(e) => {
            eprintln!(
                "trace-recipe: note: event {}:{}: print fmt not understood ({e}); printed as trace-cmd prints an event it cannot parse: [FAILED TO PARSE] and the raw fields",
                f.system, f.name
            );
            Body::Failed(vec![Cell::new(true); f.fields.len()])
        }
    }
}

/// `prev_state` as trace-cmd's sched_switch plugin prints it: one letter per
/// set bit of `SDTtZXxW`, `|`-separated, `R` when none is set.
fn write_state(out: &mut Vec<u8>, v: u64) {
    let mut found = false;
    for (i, c) in b"SDTtZXxW".iter().enumerate() {
        if v & (1 << i) != 0 {
            if found {
                out.push(b'|');
            }
            found = true;
            out.push(*c);
        }
    }
    if !found {
        out.push(b'R');
    }
}

fn num_field(ev: &Event<'_>, name: &str) -> i64 {
    match ev.field(name) {
        Some(FieldValue::Int(i)) => i,
        Some(FieldValue::UInt(u)) => u as i64,
        _ => 0,
    }
}

fn str_field<'e>(ev: &'e Event<'_>, name: &str) -> &'e [u8] {
    match ev
        .format
        .field(name)
        .and_then(|f| f.raw(&ev.data, ev.big_endian))
    {
        Some(b) => b.split(|c| *c == 0).next().unwrap_or(&[]),
        None => &[],
    }
}

/// `NAME/0xOFF` of a code address as trace-cmd's plugins print a function
/// field (the offset is counted from the address to the symbol, so it is 0
/// at a symbol's start), `0x%08x` when unresolved.
fn write_func_field(file: &TraceFile, out: &mut Vec<u8>, addr: u64) -> std::io::Result<()> {
    match file.symbol(addr) {
        Some((name, off)) => write!(out, "{name}/0x{:x}", off.wrapping_neg()),
        None => write!(out, "0x{addr:08x}"),
    }
}

/// A task as the sched plugins print it, `COMM:PID [PRIO]`, from the fields
/// named `[comm, pid, prio]`: the pid read unsigned, the prio as an `int`
/// (sched_switch) or unsigned (`signed_prio` false: sched_wakeup).
fn write_task(
    ev: &Event<'_>,
    out: &mut Vec<u8>,
    [comm, pid, prio]: [&str; 3],
    signed_prio: bool,
) -> std::io::Result<()> {
    out.extend_from_slice(str_field(ev, comm));
    write!(out, ":{} [", unum_field(ev, pid))?;
    let prio = unum_field(ev, prio);
    if signed_prio {
        write!(out, "{}]", prio as i32)
    } else {
        write!(out, "{prio}]")
    }
}

/// A field's value read unsigned, as the plugins' `tep_get_field_val`
/// reads it (a pid or prio of -1 prints as 4294967295).
fn unum_field(ev: &Event<'_>, name: &str) -> u64 {
    ev.format
        .field(name)
        .and_then(|f| f.raw(&ev.data, ev.big_endian))
        .and_then(|b| read_uint(b, ev.big_endian))
        .unwrap_or(0)
}

/// The sched_switch / sched_wakeup / hrtimer handlers of trace-cmd's
/// plugins.
fn write_plugin(file: &TraceFile, ev: &Event<'_>, out: &mut Vec<u8>) -> std::io::Result<bool> {
    let f = ev.format;
    match f.name.as_str() {
        "sched_switch" => {
            write_task(ev, out, ["prev_comm", "prev_pid", "prev_prio"], true)?;
            out.push(b' ');
            write_state(out, num_field(ev, "prev_state") as u64);
            out.extend_from_slice(b" ==> ");
            write_task(ev, out, ["next_comm", "next_pid", "next_prio"], true)?;
        }
        "sched_wakeup" | "sched_wakeup_new" => {
            write_task(ev, out, ["comm", "pid", "prio"], false)?;
            if f.field("success").is_some() {
                write!(out, " success={}", num_field(ev, "success") as i32)?;
            }
            write!(out, " CPU:{:03}", unum_field(ev, "target_cpu"))?;
        }
        "hrtimer_start" | "hrtimer_expire_entry" => {
            let timer = if f.field("timer").is_some() {
                "timer"
            } else {
                "hrtimer"
            };
            write!(out, "hrtimer=0x{:x}", num_field(ev, timer) as u64)?;
            let func = num_field(ev, "function") as u64;
            if f.name == "hrtimer_start" {
                out.extend_from_slice(b" function=");
                write_func_field(file, out, func)?;
                write!(
                    out,
                    " expires={} softexpires={}",
                    num_field(ev, "expires") as u64,
                    num_field(ev, "softexpires") as u64
                )?;
            } else {
                write!(out, " now={} function=", num_field(ev, "now") as u64)?;
                write_func_field(file, out, func)?;
            }
        }
        "tlb_flush" => {
            // trace-cmd's tlb plugin: its own names for the first four
            // reasons, none for the others.
            let pages = unum_field(ev, "pages");
            let reason = unum_field(ev, "reason");
            let name = match reason {
                0 => "flush on task switch",
                1 => "remote shootdown",
                2 => "local shootdown",
                3 => "local mm shootdown",
                _ => "",
            };
            write!(out, "pages={} reason={name} ({reason})", pages as i64)?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Whether trace-cmd prints timestamps of this clock as `secs.usecs`
/// (nanosecond clocks) rather than as a raw integer.
pub fn clock_is_nanoseconds(clock: &str) -> bool {
    matches!(clock, "local" | "global" | "uptime" | "perf" | "tai") || clock.starts_with("mono")
}

/// Format a timestamp as `trace-cmd report` prints it right after the
/// `[CPU]` column, padding included: `" SSSSS.UUUUUU"` (a space, seconds
/// right-aligned to 5, microseconds rounded to the nearest) for nanosecond
/// clocks, the raw integer right-aligned to 12 otherwise.
pub fn format_ts(ts: u64, clock: &str) -> String {
    if clock_is_nanoseconds(clock) {
        let mut secs = ts / 1_000_000_000;
        let mut usecs = (ts % 1_000_000_000 + 500) / 1000;
        if usecs >= 1_000_000 {
            usecs -= 1_000_000;
            secs += 1;
        }
        format!(" {secs:5}.{usecs:06}")
    } else {
        format!("{ts:12}")
    }
}

fn buffer_prefix(file: &TraceFile, buffer: &str) -> String {
    if file.buffers.len() <= 1 {
        return String::new();
    }
    let w = file.buffers.iter().map(|b| b.name.len()).max().unwrap_or(0);
    if buffer.is_empty() {
        format!("{:w$}  ", "")
    } else {
        format!("{buffer:>w$}: ")
    }
}

fn write_value(out: &mut impl Write, v: &FieldValue<'_>, hex: bool) -> std::io::Result<()> {
    match v {
        FieldValue::Int(i) => write!(out, "{i}"),
        FieldValue::UInt(u) if hex => write!(out, "0x{u:x}"),
        FieldValue::UInt(u) => write!(out, "{u}"),
        FieldValue::Str(s) => out.write_all(s),
        FieldValue::Bytes(b) => {
            for (i, x) in b.iter().enumerate() {
                if i > 0 {
                    out.write_all(b" ")?;
                }
                write!(out, "{x:02x}")?;
            }
            Ok(())
        }
        FieldValue::Array(a) => {
            out.write_all(b"[")?;
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.write_all(b", ")?;
                }
                write_value(out, x, hex)?;
            }
            out.write_all(b"]")
        }
    }
}

fn as_u64(v: &FieldValue<'_>) -> Option<u64> {
    match v {
        FieldValue::UInt(u) => Some(*u),
        FieldValue::Int(i) => Some(*i as u64),
        _ => None,
    }
}

fn write_symbol(file: &TraceFile, out: &mut impl Write, addr: u64) -> std::io::Result<()> {
    match file.symbol(addr) {
        Some((name, _)) => write!(out, "{name}"),
        None => write!(out, "0x{addr:x}"),
    }
}

fn write_fields(file: &TraceFile, ev: &Event<'_>, out: &mut Vec<u8>) -> std::io::Result<()> {
    let f = ev.format;
    if write_plugin(file, ev, out)? {
        return Ok(());
    }
    if f.system == "ftrace" {
        match f.name.as_str() {
            // user_stack prints through its print fmt, as trace-cmd does.
            "kernel_stack" => {
                out.write_all(b"<stack trace >")?;
                let long = ev.format.field("caller").map(|c| {
                    c.size
                        .checked_div(c.array_len.unwrap_or(1).max(1))
                        .unwrap_or(8)
                });
                let long = long.filter(|l| *l == 4 || *l == 8).unwrap_or(8);
                if let Some(c) = f.field("caller") {
                    let start = c.offset.min(ev.data.len());
                    for chunk in ev.data[start..].chunks_exact(long) {
                        let Some(addr) = crate::format::read_uint(chunk, ev.big_endian) else {
                            break;
                        };
                        if (long == 8 && addr == u64::MAX) || (long == 4 && addr == u32::MAX as u64)
                        {
                            break;
                        }
                        if addr == 0 {
                            continue;
                        }
                        match file.symbol(addr) {
                            Some((name, _)) => write!(out, "\n=> {name} ({addr:x})")?,
                            None => write!(out, "\n=> {addr:x}")?,
                        }
                    }
                }
                return Ok(());
            }
            "bprint" => {
                if let Some(ip) = ev.field("ip").as_ref().and_then(as_u64) {
                    write_symbol(file, out, ip)?;
                    out.write_all(b": ")?;
                }
                let fmt_addr = ev.field("fmt").as_ref().and_then(as_u64).unwrap_or(0);
                let args = ev
                    .format
                    .field("buf")
                    .and_then(|b| b.raw(&ev.data, ev.big_endian))
                    .unwrap_or(&[]);
                let cx = Ctx {
                    fmt: ev.format,
                    data: &ev.data,
                    big: ev.big_endian,
                    kernel: file,
                };
                let mark = out.len();
                let done = file
                    .printk_string(fmt_addr)
                    .is_some_and(|fmt| write_bprint(&cx, fmt, args, out).is_ok());
                if !done {
                    out.truncate(mark);
                    write!(out, "{fmt_addr:x}")?;
                }
                if out.last() == Some(&b'\n') {
                    out.pop();
                }
                return Ok(());
            }
            "print" => {
                if let Some(ip) = ev.field("ip").as_ref().and_then(as_u64) {
                    write_symbol(file, out, ip)?;
                    out.write_all(b": ")?;
                }
                if let Some(FieldValue::Str(s)) = ev.field("buf") {
                    let s = s.strip_suffix(b"\n").unwrap_or(s);
                    out.write_all(s)?;
                }
                return Ok(());
            }
            _ => {}
        }
    }
    for (i, fld) in f.fields.iter().enumerate() {
        let mark = out.len();
        if i > 0 {
            out.push(b' ');
        }
        // Function tracer events carry code addresses: shown as symbols.
        let code = f.system == "ftrace" && matches!(fld.name.as_str(), "ip" | "parent_ip" | "func");
        let written = match fld
            .decode(&ev.data, ev.big_endian)
            .as_ref()
            .and_then(as_u64)
        {
            Some(addr) if code => {
                write!(out, "{}=", fld.name)?;
                write_symbol(file, out, addr)?;
                true
            }
            _ => write_field(out, fld, &ev.data, ev.big_endian)?,
        };
        if !written {
            out.truncate(mark);
        }
    }
    Ok(())
}

/// An event whose print fmt could not be parsed, as trace-cmd 3.1.6
/// (libtraceevent 1.7) prints one it failed to parse: `[FAILED TO PARSE]`,
/// then ` NAME=VALUE` for every non-common field. The kind of a field comes
/// from its declared type, as libtraceevent reads it: an array (`[N]`, `[]`,
/// `__data_loc`, `__rel_loc`) of `char`, `u8` or `s8` is text while its
/// bytes up to the first NUL are printable (`text` flags, cleared for good by
/// the first value that is not), other arrays `ARRAY[b0, b1, ...]` in hex
/// bytes; scalars: pointers `0xHEX`; signed ones in decimal (`%2d` for 2
/// bytes, `0xHEX` of the 32-bit value for a 4-byte `long`); unsigned ones
/// `0xHEX` when the type says `long`, else decimal; a scalar of another size
/// than 1, 2, 4 or 8 bytes reads as 0.
fn write_failed(ev: &Event<'_>, text: &[Cell<bool>], out: &mut Vec<u8>) {
    let data: &[u8] = &ev.data;
    out.extend_from_slice(b"[FAILED TO PARSE]");
    for (f, text) in ev.format.fields.iter().zip(text) {
        out.push(b' ');
        out.extend_from_slice(f.name.as_bytes());
        out.push(b'=');
        let dynamic = matches!(f.layout, FieldLayout::DataLoc | FieldLayout::RelLoc);
        if f.array_len.is_some() || dynamic {
            // Where the bytes start and how many: the declared place and
            // size, or the `__data_loc`/`__rel_loc` word's (none when the
            // word lies past the record's end).
            let (start, len) = if dynamic {
                let loc = data
                    .get(f.offset..f.offset.saturating_add(4))
                    .and_then(|w| read_uint(w, ev.big_endian))
                    .unwrap_or(0);
                let rel = if f.layout == FieldLayout::RelLoc {
                    f.offset + 4
                } else {
                    0
                };
                ((loc & 0xffff) as usize + rel, (loc >> 16) as usize)
            } else {
                (f.offset, f.size)
            };
            let rest = data.get(start..).unwrap_or(&[]);
            let bytes = &rest[..len.min(rest.len())];
            let chars = ["char", "u8", "s8"].iter().any(|c| f.type_name.contains(c));
            let printable = |b: &u8| matches!(b, 0x20..=0x7e | 0x09..=0x0d);
            if chars && text.get() && bytes.iter().take_while(|b| **b != 0).all(printable) {
                // `%s` from the field's start: up to the first NUL, even
                // past a declared length of 0 (a trailing `char buf[]`).
                let end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
                out.extend_from_slice(&rest[..end]);
            } else {
                text.set(false);
                out.extend_from_slice(b"ARRAY[");
                for (i, b) in bytes.iter().enumerate() {
                    if i > 0 {
                        out.extend_from_slice(b", ");
                    }
                    let _ = write!(out, "{b:02x}");
                }
                out.push(b']');
            }
            continue;
        }
        let v = data
            .get(f.offset..f.offset.saturating_add(f.size))
            .filter(|raw| matches!(raw.len(), 1 | 2 | 4 | 8))
            .and_then(|raw| read_uint(raw, ev.big_endian))
            .unwrap_or(0);
        let long = f.type_name.contains("long");
        let mut ibuf = itoa::Buffer::new();
        if f.is_pointer || (long && !f.signed) {
            write_hex(out, v);
        } else if f.signed {
            match f.size {
                4 if long => write_hex(out, v as u32 as u64),
                4 => out.extend_from_slice(ibuf.format(v as u32 as i32).as_bytes()),
                2 => {
                    let s = ibuf.format(v as u16 as i16);
                    if s.len() < 2 {
                        out.push(b' ');
                    }
                    out.extend_from_slice(s.as_bytes());
                }
                1 => out.extend_from_slice(ibuf.format(v as u8 as i8).as_bytes()),
                _ => out.extend_from_slice(ibuf.format(v as i64).as_bytes()),
            }
        } else {
            out.extend_from_slice(ibuf.format(v).as_bytes());
        }
    }
}

/// Write one record as one `trace-cmd report`-style line (plus a newline):
///
/// `[BUFFER: ]COMM-PID [CPU] TIME: EVENT_NAME: FIELDS`
///
/// * The `BUFFER: ` prefix (right-aligned to the longest buffer name, blank
///   for the top buffer) appears only when the file has several buffers.
/// * COMM comes from the saved cmdlines, `<idle>` for pid 0, else `<...>`.
/// * TIME is [`format_ts`] for the file's clock.
/// * FIELDS is the event's `print fmt` evaluated as libtraceevent does
///   (see `printfmt`); sched_switch, sched_wakeup(_new) and function events
///   are printed as trace-cmd's plugins print them (`prev:pid [prio] S ==>
///   next:pid [prio]`, the function name indented by call depth); `print` (trace_marker) shows
///   `SYMBOL: TEXT`; `bprint` (`trace_printk`) shows `SYMBOL: ` and its
///   format string from the printk formats section filled with the
///   arguments packed in the record (the format's address in hex when the
///   section lacks it), and `kernel_stack` shows `<stack trace >` then one
///   `=> SYMBOL (ADDR)` line per frame, resolved through kallsyms. An event
///   whose print fmt cannot be evaluated is printed as `name=value` pairs
///   (strings as text, integers in decimal, pointers in hex, arrays as
///   `[a, b]`), and a note naming it goes to stderr once.
/// * A lost-events record is `CPU:N [K EVENTS DROPPED]` (or
///   `CPU:N [EVENTS DROPPED]` when the count is unknown).
///
/// To print many records, keep one [`Printer`] instead.
pub fn format_record(
    file: &TraceFile,
    rec: &Record<'_>,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let mut p = Printer::new(file);
    p.write(rec, out)?;
    p.finish(out)
}

/// Prints records of one file as [`format_record`] describes, reusing what is
/// the same for many records. Memory: one cached line head per pid and one
/// name column per event format seen.
pub struct Printer<'a> {
    file: &'a TraceFile,
    ns_clock: bool,
    /// `{comm:>16}-{pid:<5} [` per pid.
    heads: FxHashMap<i32, Box<[u8]>>,
    /// `: {name}: {pad}` per format id (index = id; the unknown format at the end).
    names: Vec<Option<Box<[u8]>>>,
    /// How each format's body is printed (index = id; unknown at the end).
    bodies: Vec<Option<Body>>,
    /// Comms learned from the records printed so far ([`Comms`]).
    comms: Comms,
    /// Per CPU, the call chain the function plugin has seen (for indents).
    calls: FxHashMap<u32, Vec<Option<String>>>,
    line: Vec<u8>,
    /// A funcgraph_entry held back until the next record tells whether it is
    /// a leaf (`held`); one at most, as trace-cmd looks one record ahead.
    entry: HeldEntry,
    held: bool,
}

/// A funcgraph_entry whose line waits for the next record.
#[derive(Default)]
struct HeldEntry {
    /// The line up to its body (head, time, name column).
    line: Vec<u8>,
    buffer: String,
    cpu: u32,
    pid: i32,
    func: u64,
    depth: u64,
}

impl<'a> Printer<'a> {
    /// A printer for the records of `file`.
    pub fn new(file: &'a TraceFile) -> Printer<'a> {
        Printer {
            file,
            ns_clock: clock_is_nanoseconds(file.clock()),
            heads: FxHashMap::default(),
            names: Vec::new(),
            bodies: Vec::new(),
            calls: FxHashMap::default(),
            comms: Comms::new(),
            line: Vec::with_capacity(256),
            entry: HeldEntry::default(),
            held: false,
        }
    }

    /// Writes one record. Errors: only those of `out`.
    ///
    /// A `funcgraph_entry` is written with the record after it, which decides
    /// its shape (see [`Printer::finish`]): when that record is the
    /// `funcgraph_exit` of the same function, task, CPU and buffer, the two
    /// make one leaf line and the exit writes nothing of its own.
    pub fn write(&mut self, rec: &Record<'_>, out: &mut impl Write) -> std::io::Result<()> {
        if self.held {
            self.held = false;
            if let Record::Event(ev) = rec
                && let Some(duration) = self.closes_entry(ev)
            {
                self.write_leaf(duration);
                return out.write_all(&self.entry.line);
            }
            self.write_nested();
            out.write_all(&self.entry.line)?;
        }
        self.line.clear();
        match rec {
            Record::Lost {
                buffer, cpu, count, ..
            } => {
                self.line
                    .extend_from_slice(buffer_prefix(self.file, buffer).as_bytes());
                match count {
                    Some(n) => writeln!(self.line, "CPU:{cpu} [{n} EVENTS DROPPED]")?,
                    None => writeln!(self.line, "CPU:{cpu} [EVENTS DROPPED]")?,
                }
            }
            Record::Event(ev) => {
                if self.event(ev)? {
                    return Ok(());
                }
            }
        }
        out.write_all(&self.line)
    }

    /// Writes what [`Printer::write`] still holds back: a `funcgraph_entry`
    /// that was the last record, as a nested entry (`func() {`). Call it once
    /// after the last record; a printer dropped without it loses that line.
    pub fn finish(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if self.held {
            self.held = false;
            self.write_nested();
            out.write_all(&self.entry.line)?;
        }
        Ok(())
    }

    /// The index of `ev`'s format in `names` and `bodies` (the unknown
    /// format last).
    fn slot(ev: &Event<'_>) -> usize {
        if Printer::unknown(ev) {
            u16::MAX as usize + 1
        } else {
            ev.format.id as usize
        }
    }

    fn unknown(ev: &Event<'_>) -> bool {
        ev.format.id == 0 && ev.format.name == "UNKNOWN"
    }

    /// How `ev`'s format is printed, worked out on its first record.
    fn body(&mut self, ev: &Event<'_>) -> &Body {
        let slot = Printer::slot(ev);
        if slot >= self.bodies.len() {
            self.bodies.resize_with(slot + 1, || None);
        }
        let file = self.file;
        self.bodies[slot].get_or_insert_with(|| {
            if Printer::unknown(ev) {
                Body::Fields
            } else {
                body_for(file, ev.format)
            }
        })
    }

    /// The duration (ns) of the held entry when `ev` is its
    /// `funcgraph_exit`: trace-cmd 3.1.6 pairs an entry with the next record
    /// when that is a funcgraph_exit of the same function from the same pid
    /// (read as a non-negative `int`). We also ask for the same CPU and
    /// buffer: 3.1.6 pairs across CPUs too, then reads records it has freed
    /// (later trace-cmd releases print the entry nested, as we do).
    fn closes_entry(&mut self, ev: &Event<'_>) -> Option<u64> {
        let (cpu, pid, func) = (self.entry.cpu, self.entry.pid, self.entry.func);
        if ev.cpu != cpu || pid < 0 || ev.pid() != pid || ev.buffer != self.entry.buffer {
            return None;
        }
        match self.body(ev) {
            Body::Graph(g @ Graph { times: Some(_), .. }) if g.func.read(ev) == func => {
                Some(g.duration(ev))
            }
            _ => None,
        }
    }

    /// Completes the held entry's line as a leaf: `func();` after the
    /// exit's duration.
    fn write_leaf(&mut self, duration: u64) {
        let e = &mut self.entry;
        write_overhead(&mut e.line, Some(duration));
        write_duration(&mut e.line, duration);
        write_graph_func(self.file, &mut e.line, e.depth, e.func);
        e.line.extend_from_slice(b"();\n");
    }

    /// Completes the held entry's line as a nested entry: `func() {`, no
    /// duration.
    fn write_nested(&mut self) {
        let e = &mut self.entry;
        write_overhead(&mut e.line, None);
        e.line.extend_from_slice(b"           |  ");
        write_graph_func(self.file, &mut e.line, e.depth, e.func);
        e.line.extend_from_slice(b"() {\n");
    }

    /// Appends `ev`'s line to `line`; true when it is a funcgraph_entry,
    /// moved to `entry` and held back instead.
    fn event(&mut self, ev: &Event<'_>) -> std::io::Result<bool> {
        let file = self.file;
        if file.buffers.len() > 1 {
            self.line
                .extend_from_slice(buffer_prefix(file, ev.buffer).as_bytes());
        }
        let pid = ev.pid();
        let comms = &self.comms;
        let head = self.heads.entry(pid).or_insert_with(|| {
            let comm = match comms.get(file, pid) {
                Some(c) => c,
                None if pid == 0 => "<idle>",
                None => "<...>",
            };
            format!("{comm:>16}-{pid:<5} [")
                .into_bytes()
                .into_boxed_slice()
        });
        self.line.extend_from_slice(head);
        let mut ibuf = itoa::Buffer::new();
        let cpu = ibuf.format(ev.cpu).as_bytes();
        self.line
            .extend_from_slice(&b"000"[..3usize.saturating_sub(cpu.len())]);
        self.line.extend_from_slice(cpu);
        self.line.push(b']');
        write_ts(&mut self.line, ev.ts, self.ns_clock);
        let unknown = Printer::unknown(ev);
        let slot = Printer::slot(ev);
        if slot >= self.names.len() {
            self.names.resize(slot + 1, None);
        }
        let name = self.names[slot].get_or_insert_with(|| {
            let name = if unknown {
                "[UNKNOWN EVENT]"
            } else {
                ev.format.name.as_str()
            };
            let pad = 20usize.saturating_sub(name.len());
            format!(": {name}: {:pad$}", "")
                .into_bytes()
                .into_boxed_slice()
        });
        self.line.extend_from_slice(name);
        self.body(ev);
        let Some(body) = &self.bodies[slot] else {
            return Ok(false);
        };
        match body {
            Body::Fmt(p, kmem) => {
                if *kmem && let Some((name, off)) = file.symbol(num_field(ev, "call_site") as u64) {
                    write!(self.line, "({name}+0x{:x}) ", off as u32)?;
                }
                p.write(
                    &Ctx {
                        fmt: ev.format,
                        data: &ev.data,
                        big: ev.big_endian,
                        kernel: file,
                    },
                    &mut self.line,
                )?;
                // trace-cmd ends the line itself: a print fmt ending in a
                // newline (ext4's fsmap events) adds no empty line.
                if self.line.last() == Some(&b'\n') {
                    self.line.pop();
                }
            }
            Body::Plugin if ev.format.name == "function" && ev.format.system == "ftrace" => {
                self.function(ev)
            }
            Body::Plugin | Body::Fields => write_fields(file, ev, &mut self.line)?,
            Body::Failed(text) => write_failed(ev, text, &mut self.line),
            Body::Graph(g) => {
                let depth = g.depth.read(ev);
                if g.times.is_none() {
                    let e = &mut self.entry;
                    std::mem::swap(&mut self.line, &mut e.line);
                    e.buffer.clear();
                    e.buffer.push_str(ev.buffer);
                    (e.cpu, e.pid) = (ev.cpu, ev.pid());
                    (e.func, e.depth) = (g.func.read(ev), depth);
                    self.held = true;
                    return Ok(true);
                }
                let duration = g.duration(ev);
                write_overhead(&mut self.line, Some(duration));
                write_duration(&mut self.line, duration);
                write_indent(&mut self.line, depth);
                self.line.push(b'}');
            }
        }
        if matches!(ev.format.system.as_str(), "sched" | "task") {
            for pid in self.comms.learn(file, ev).into_iter().flatten() {
                self.heads.remove(&pid);
            }
        }
        self.line.push(b'\n');
        Ok(false)
    }
}

/// trace-cmd's mark of a function graph duration (ns), two columns: `$ `
/// over 1 s, `# ` over 1 ms, `! ` over 100 us, `+ ` over 10 us, else (and
/// for a nested entry, `None`) blank. trace-cmd 3.1.6 has no `@` and `*`
/// marks (the kernel's own output has them for 100 ms and 10 ms).
fn write_overhead(line: &mut Vec<u8>, duration: Option<u64>) {
    let mark: &[u8] = match duration {
        Some(d) if d > 1_000_000_000 => b"$ ",
        Some(d) if d > 1_000_000 => b"# ",
        Some(d) if d > 100_000 => b"! ",
        Some(d) if d > 10_000 => b"+ ",
        _ => b"  ",
    };
    line.extend_from_slice(mark);
}

/// A duration column as trace-cmd draws it: microseconds, then `.` and three
/// digits of nanoseconds while the microseconds take fewer than 7 digits,
/// ` us `, blanks up to 7 characters of number, `|  `.
fn write_duration(line: &mut Vec<u8>, duration: u64) {
    let mut ibuf = itoa::Buffer::new();
    let us = ibuf.format(duration / 1000).as_bytes();
    let mut len = us.len();
    line.extend_from_slice(us);
    if len < 7 {
        let ns = duration % 1000;
        line.extend_from_slice(&[
            b'.',
            b'0' + (ns / 100) as u8,
            b'0' + (ns / 10 % 10) as u8,
            b'0' + (ns % 10) as u8,
        ]);
        len += 4;
    }
    line.extend_from_slice(b" us ");
    line.extend(std::iter::repeat_n(b' ', 7usize.saturating_sub(len)));
    line.extend_from_slice(b"|  ");
}

/// Most blanks a function graph line is indented by: trace-cmd indents two
/// per level of `depth` as an `int` (up to 2^31 blanks for a hostile depth);
/// real depths stay below 100.
const MAX_GRAPH_INDENT: usize = 1024;

/// Two blanks per level of `depth`, counted as trace-cmd counts them (the
/// low 32 bits of `depth * 2` as an `int`, nothing when negative), at most
/// [`MAX_GRAPH_INDENT`].
fn write_indent(line: &mut Vec<u8>, depth: u64) {
    let n = usize::try_from(depth.wrapping_mul(2) as u32 as i32).unwrap_or(0);
    line.extend(std::iter::repeat_n(b' ', n.min(MAX_GRAPH_INDENT)));
}

/// The indent, then the function's symbol (its address in bare hex when
/// kallsyms lacks it).
fn write_graph_func(file: &TraceFile, line: &mut Vec<u8>, depth: u64, func: u64) {
    write_indent(line, depth);
    match file.symbol(func) {
        Some((name, _)) => line.extend_from_slice(name.as_bytes()),
        None => write_hex_digits(line, func),
    }
}

impl Printer<'_> {
    /// A function tracer line as trace-cmd's function plugin prints it by
    /// default: the function's symbol, indented three spaces per level of
    /// the call chain it has seen on this CPU (a function's level is one
    /// more than its caller's when the caller was seen, else 1 below a new
    /// chain root), no parent.
    fn function(&mut self, ev: &Event<'_>) {
        let ip = num_field(ev, "ip") as u64;
        let pip = num_field(ev, "parent_ip") as u64;
        let func = self.file.symbol(ip).map(|(n, _)| n);
        let parent = self.file.symbol(pip).map(|(n, _)| n);
        let mut index = 0;
        if let Some(parent) = parent {
            // By CPU id in a map: a file may claim CPU 0xFFFFFFF0.
            let stack = self.calls.entry(ev.cpu).or_default();
            let found = stack
                .iter()
                .take_while(|e| e.is_some())
                .position(|e| e.as_deref() == Some(parent));
            let set = |stack: &mut Vec<Option<String>>, pos: usize, name: Option<&str>| {
                let Some(name) = name else { return };
                if pos >= stack.len() {
                    stack.resize(pos + 1, None);
                }
                stack[pos] = Some(name.to_string());
            };
            match found {
                Some(i) => {
                    set(stack, i + 1, func);
                    index = i;
                }
                None => {
                    set(stack, 0, Some(parent));
                    set(stack, 1, func);
                }
            }
        }
        self.line.extend(std::iter::repeat_n(b' ', index * 3));
        match func {
            Some(f) => self.line.extend_from_slice(f.as_bytes()),
            None => write_hex(&mut self.line, ip),
        }
    }
}

/// Appends [`format_ts`]'s text without allocating.
fn write_ts(line: &mut Vec<u8>, ts: u64, ns_clock: bool) {
    let mut ibuf = itoa::Buffer::new();
    if ns_clock {
        let mut secs = ts / 1_000_000_000;
        let mut usecs = (ts % 1_000_000_000 + 500) / 1000;
        if usecs >= 1_000_000 {
            usecs -= 1_000_000;
            secs += 1;
        }
        let s = ibuf.format(secs).as_bytes();
        line.push(b' ');
        line.extend(std::iter::repeat_n(b' ', 5usize.saturating_sub(s.len())));
        line.extend_from_slice(s);
        line.push(b'.');
        let u = ibuf.format(usecs).as_bytes();
        line.extend(std::iter::repeat_n(b'0', 6usize.saturating_sub(u.len())));
        line.extend_from_slice(u);
    } else {
        let s = ibuf.format(ts).as_bytes();
        line.extend(std::iter::repeat_n(b' ', 12usize.saturating_sub(s.len())));
        line.extend_from_slice(s);
    }
}

fn write_hex(line: &mut Vec<u8>, v: u64) {
    line.extend_from_slice(b"0x");
    write_hex_digits(line, v);
}

/// `v` in lowercase hex, no prefix.
fn write_hex_digits(line: &mut Vec<u8>, v: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = (64 - v.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        line.push(HEX[((v >> (i * 4)) & 0xf) as usize]);
    }
}

/// Appends one scalar as [`write_value`] prints its [`FieldValue`]; false if
/// `raw` is not 1, 2, 4 or 8 bytes (then the caller prints it as bytes).
fn write_scalar(line: &mut Vec<u8>, raw: &[u8], f: &Field, big: bool) -> bool {
    let Some(v) = read_uint(raw, big) else {
        return false;
    };
    let mut ibuf = itoa::Buffer::new();
    if f.signed {
        let v = match raw.len() {
            1 => v as u8 as i8 as i64,
            2 => v as u16 as i16 as i64,
            4 => v as u32 as i32 as i64,
            _ => v as i64,
        };
        line.extend_from_slice(ibuf.format(v).as_bytes());
    } else if f.is_pointer {
        write_hex(line, v);
    } else {
        line.extend_from_slice(ibuf.format(v).as_bytes());
    }
    true
}

/// Appends `name=value`; the common cases (inline scalars, strings) without
/// building a [`FieldValue`], the rest through [`Field::decode`].
fn write_field(line: &mut Vec<u8>, f: &Field, data: &[u8], big: bool) -> std::io::Result<bool> {
    if f.layout == FieldLayout::Inline && f.array_len.is_none() && !f.is_string {
        let Some(raw) = f.raw(data, big) else {
            return Ok(false);
        };
        line.extend_from_slice(f.name.as_bytes());
        line.push(b'=');
        if !write_scalar(line, raw, f, big) {
            write_value(line, &FieldValue::Bytes(raw), f.is_pointer)?;
        }
        return Ok(true);
    }
    let Some(v) = f.decode(data, big) else {
        return Ok(false);
    };
    line.extend_from_slice(f.name.as_bytes());
    line.push(b'=');
    write_value(line, &v, f.is_pointer)?;
    Ok(true)
}
