//! `trace-cmd report`-like text output.
//!
//! [`Printer`] is the one implementation: it keeps per-file work (the line
//! head of each pid, the name column of each event, buffer prefixes) in caches
//! and writes digits by hand, because a listing prints every record of files
//! with tens of millions of them. [`format_record`] is a one-off `Printer`.

use std::cell::Cell;
use std::io::Write;

use rustc_hash::FxHashMap;

use crate::args::{Prototypes, write_args};
use crate::comms::TaskTable;
use crate::format::{EventFormat, Field, FieldLayout, FieldValue, read_uint};
use crate::printfmt::{Ctx, Kernel, PrintFmt, radix_digits, write_bprint};
use crate::text::{Text, push_prefix, rest_from};
use crate::{Comms, Event, Learner, Record, TraceFile};

impl Kernel for TraceFile {
    fn symbol(&self, addr: u64) -> Option<(&str, u64)> {
        TraceFile::symbol(self, addr)
    }
    fn kernel_string(&self, addr: u64) -> Option<&str> {
        self.printk_string(addr)
    }
    fn symbol_address(&self, name: &str) -> Option<u64> {
        TraceFile::symbol_address(self, name)
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
    /// Through the event's `print fmt`, after or instead of what a plugin of
    /// trace-cmd's prints first ([`Lead`]).
    Fmt(PrintFmt, Lead),
    /// A handler of trace-cmd's plugins (hrtimer, tlb, stacks, print,
    /// bprint), reproduced.
    Plugin,
    /// sched_switch as trace-cmd's sched_switch plugin prints it.
    Switch(Switch),
    /// sched_wakeup(_new) as trace-cmd's sched_switch plugin prints it.
    Wakeup(Wakeup),
    /// A function tracer event as trace-cmd's function plugin prints it
    /// ([`Printer::function`]).
    Function,
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

/// What trace-cmd's plugins print before, or instead of, an event's print fmt.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lead {
    /// Nothing: the print fmt alone.
    None,
    /// A `(SYMBOL+0xOFF) ` prefix for `call_site` (the kmem plugin).
    CallSite,
    /// The futex plugin's text instead of the print fmt, for the operations
    /// it knows ([`write_futex`]): the places in the format's fields of
    /// `uaddr`, `op`, `val`, `utime`, `uaddr2` and `val3`.
    Futex([usize; 6]),
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
        ("sched", "sched_switch") => match Switch::of(f) {
            Some(s) => return Body::Switch(s),
            None => false,
        },
        ("sched", "sched_wakeup" | "sched_wakeup_new") => match Wakeup::of(f) {
            Some(w) => return Body::Wakeup(w),
            None => false,
        },
        ("ftrace", "function") if f.field("ip").is_some() && f.field("parent_ip").is_some() => {
            return Body::Function;
        }
        ("timer", "hrtimer_start") => ["function", "expires", "softexpires"]
            .iter()
            .all(|n| f.field(n).is_some()),
        ("timer", "hrtimer_expire_entry") => {
            ["function", "now"].iter().all(|n| f.field(n).is_some())
        }
        ("tlb", "tlb_flush") => ["pages", "reason"].iter().all(|n| f.field(n).is_some()),
        ("ftrace", "kernel_stack" | "print") => true,
        ("ftrace", "raw_data") => f.field("id").is_some() && f.field("buf").is_some(),
        ("ftrace", "bprint") => ["ip", "fmt", "buf"].iter().all(|n| f.field(n).is_some()),
        _ => false,
    };
    if plugin {
        return Body::Plugin;
    }
    if let Some(g) = Graph::of(file, f) {
        return Body::Graph(g);
    }
    let call_site = f.system == "kmem"
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
    let futex = (f.system == "syscalls" && f.name == "sys_enter_futex")
        .then(|| {
            let at = |n: &str| f.fields.iter().position(|x| x.name == n);
            Some([
                at("uaddr")?,
                at("op")?,
                at("val")?,
                at("utime")?,
                at("uaddr2")?,
                at("val3")?,
            ])
        })
        .flatten();
    let lead = match (call_site, futex) {
        (true, _) => Lead::CallSite,
        (_, Some(at)) => Lead::Futex(at),
        _ => Lead::None,
    };
    match PrintFmt::parse(f, Kernel::long_size(file)).map(|p| p.with_symbols(file)) {
        Ok(p) => Body::Fmt(p, lead),
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

/// Field `f` of `ev` as a number: signed or not as declared, 0 when it is
/// not a scalar or the record is too short for it.
fn num_of(f: &Field, ev: &Event<'_>) -> i64 {
    match f.decode(&ev.data, ev.big_endian) {
        Some(FieldValue::Int(i)) => i,
        Some(FieldValue::UInt(u)) => u as i64,
        _ => 0,
    }
}

/// [`num_of`] the field named `name` (0 when the format lacks it).
fn num_field(ev: &Event<'_>, name: &str) -> i64 {
    ev.format.field(name).map_or(0, |f| num_of(f, ev))
}

/// Field `f` of `ev` read unsigned, as the plugins' `tep_get_field_val`
/// reads it (a pid or prio of -1 prints as 4294967295); 0 when it is not 1,
/// 2, 4 or 8 bytes or the record is too short for it.
fn unum_of(f: &Field, ev: &Event<'_>) -> u64 {
    f.raw(&ev.data, ev.big_endian)
        .and_then(|b| read_uint(b, ev.big_endian))
        .unwrap_or(0)
}

/// [`unum_of`] the field named `name` (0 when the format lacks it).
fn unum_field(ev: &Event<'_>, name: &str) -> u64 {
    ev.format.field(name).map_or(0, |f| unum_of(f, ev))
}

/// Appends `v` in decimal.
fn push_num(out: &mut Vec<u8>, v: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends `digits` right-aligned to `width` columns, `fill` before them.
fn push_padded(out: &mut Vec<u8>, digits: &[u8], width: usize, fill: u8) {
    out.extend(std::iter::repeat_n(
        fill,
        width.saturating_sub(digits.len()),
    ));
    out.extend_from_slice(digits);
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

/// The three fields the sched plugins print a task from, `COMM:PID [PRIO]`.
struct Task {
    comm: Field,
    pid: Field,
    prio: Field,
}

impl Task {
    /// The fields named `[comm, pid, prio]` of `f`, if it has them all.
    fn of(f: &EventFormat, [comm, pid, prio]: [&str; 3]) -> Option<Task> {
        Some(Task {
            comm: f.field(comm)?.clone(),
            pid: f.field(pid)?.clone(),
            prio: f.field(prio)?.clone(),
        })
    }

    /// `COMM:PID [PRIO]`: the pid read unsigned, the prio as an `int`
    /// (`signed_prio`: sched_switch) or unsigned (sched_wakeup).
    fn write(&self, ev: &Event<'_>, out: &mut Vec<u8>, signed_prio: bool) {
        // The comm: its bytes up to the first NUL.
        let comm = self.comm.raw(&ev.data, ev.big_endian).unwrap_or(&[]);
        let len = comm.iter().position(|c| *c == 0).unwrap_or(comm.len());
        push_prefix(out, rest_from(&ev.data, comm), len);
        out.push(b':');
        push_num(out, unum_of(&self.pid, ev));
        out.extend_from_slice(b" [");
        let prio = unum_of(&self.prio, ev);
        if signed_prio {
            push_num(out, prio as i32);
        } else {
            push_num(out, prio);
        }
        out.push(b']');
    }
}

/// The fields of sched_switch that trace-cmd's sched_switch plugin prints,
/// `PREV:PID [PRIO] STATE ==> NEXT:PID [PRIO]`.
struct Switch {
    prev: Task,
    prev_state: Field,
    next: Task,
}

impl Switch {
    /// `None` when `f` lacks one of the fields (then its print fmt prints
    /// it).
    fn of(f: &EventFormat) -> Option<Switch> {
        Some(Switch {
            prev: Task::of(f, ["prev_comm", "prev_pid", "prev_prio"])?,
            prev_state: f.field("prev_state")?.clone(),
            next: Task::of(f, ["next_comm", "next_pid", "next_prio"])?,
        })
    }

    fn write(&self, ev: &Event<'_>, out: &mut Vec<u8>) {
        self.prev.write(ev, out, true);
        out.push(b' ');
        write_state(out, num_of(&self.prev_state, ev) as u64);
        out.extend_from_slice(b" ==> ");
        self.next.write(ev, out, true);
    }
}

/// The fields of sched_wakeup(_new) that trace-cmd's sched_switch plugin
/// prints, `COMM:PID [PRIO][ success=N] CPU:NNN`.
struct Wakeup {
    task: Task,
    /// Old kernels' `success` field.
    success: Option<Field>,
    target_cpu: Field,
}

impl Wakeup {
    /// `None` when `f` lacks one of the fields (then its print fmt prints
    /// it).
    fn of(f: &EventFormat) -> Option<Wakeup> {
        Some(Wakeup {
            task: Task::of(f, ["comm", "pid", "prio"])?,
            success: f.field("success").cloned(),
            target_cpu: f.field("target_cpu")?.clone(),
        })
    }

    fn write(&self, ev: &Event<'_>, out: &mut Vec<u8>) {
        self.task.write(ev, out, false);
        if let Some(s) = &self.success {
            out.extend_from_slice(b" success=");
            push_num(out, num_of(s, ev) as i32);
        }
        out.extend_from_slice(b" CPU:");
        let mut ibuf = itoa::Buffer::new();
        let cpu = ibuf.format(unum_of(&self.target_cpu, ev));
        push_padded(out, cpu.as_bytes(), 3, b'0');
    }
}

/// The hrtimer and tlb handlers of trace-cmd's plugins; false for other
/// events.
fn write_plugin(file: &TraceFile, ev: &Event<'_>, out: &mut Vec<u8>) -> std::io::Result<bool> {
    let f = ev.format;
    match f.name.as_str() {
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

/// `syscalls:sys_enter_futex` as trace-cmd's futex plugin prints it:
/// `op=NAME[|FUTEX_PRIVATE_FLAG][|FUTEX_CLOCK_REALTIME] uaddr=0x%08x`, then
/// the arguments that operation uses (include/uapi/linux/futex.h: `op`'s low
/// bits name the operation, 128 and 256 are flags). `false` (nothing written)
/// for an operation the plugin does not know, which trace-cmd then prints
/// through the print fmt (libtraceevent's plugin_futex.c, as 1.7.1 ships it).
fn write_futex(ev: &Event<'_>, at: [usize; 6], out: &mut Vec<u8>) -> bool {
    /// How an argument is printed: not at all, in decimal, or as
    /// `0x` and at least eight hex digits.
    #[derive(Clone, Copy)]
    enum Arg {
        No,
        Dec,
        Hex,
    }
    use Arg::{Dec, Hex, No};
    /// Per operation, by number: its name and how `val`, `utime` (`val2`
    /// when decimal), `uaddr2` and `val3` are printed.
    const OPS: [(&str, [Arg; 4]); 13] = [
        ("FUTEX_WAIT", [Hex, Hex, No, No]),
        ("FUTEX_WAKE", [Dec, No, No, No]),
        ("FUTEX_FD", [Dec, No, No, No]),
        ("FUTEX_REQUEUE", [Dec, Dec, Hex, No]),
        ("FUTEX_CMP_REQUEUE", [Dec, Dec, Hex, Hex]),
        ("FUTEX_WAKE_OP", [Dec, Dec, Hex, Hex]),
        ("FUTEX_LOCK_PI", [No, Hex, No, No]),
        ("FUTEX_UNLOCK_PI", [No, No, No, No]),
        ("FUTEX_TRYLOCK_PI", [No, No, No, No]),
        ("FUTEX_WAIT_BITSET", [Hex, Hex, No, Hex]),
        ("FUTEX_WAKE_BITSET", [Dec, No, No, Hex]),
        ("FUTEX_WAIT_REQUEUE_PI", [Hex, Hex, Hex, Hex]),
        ("FUTEX_CMP_REQUEUE_PI", [Dec, Dec, Hex, Hex]),
    ];
    const PRIVATE: u64 = 128;
    const CLOCK_REALTIME: u64 = 256;
    let field = |i: usize| ev.format.fields.get(at[i]).map_or(0, |f| unum_of(f, ev));
    let op = field(1);
    let Some((name, args)) = usize::try_from(op & !(PRIVATE | CLOCK_REALTIME))
        .ok()
        .and_then(|cmd| OPS.get(cmd))
    else {
        return false;
    };
    out.extend_from_slice(b"op=");
    out.extend_from_slice(name.as_bytes());
    if op & PRIVATE != 0 {
        out.extend_from_slice(b"|FUTEX_PRIVATE_FLAG");
    }
    if op & CLOCK_REALTIME != 0 {
        out.extend_from_slice(b"|FUTEX_CLOCK_REALTIME");
    }
    // Writing into a Vec cannot fail.
    let _ = write!(out, " uaddr=0x{:08x}", field(0));
    let labels = [
        (2, "val", "val"),
        (3, "utime", "val2"),
        (4, "uaddr2", "uaddr2"),
        (5, "val3", "val3"),
    ];
    for (arg, (i, name, dec_label)) in args.iter().zip(labels) {
        let v = field(i);
        let _ = match arg {
            No => Ok(()),
            Dec => write!(out, " {dec_label}={v}"),
            Hex => write!(out, " {name}=0x{v:08x}"),
        };
    }
    true
}

/// Whether trace-cmd prints timestamps of this clock as `secs.usecs`
/// (nanosecond clocks) rather than as a raw integer.
pub fn clock_is_nanoseconds(clock: &str) -> bool {
    matches!(
        clock,
        "local" | "global" | "uptime" | "perf" | "tai" | "tsc2nsec"
    ) || clock.starts_with("mono")
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
            // trace_marker_raw records, as libtraceevent's function plugin
            // prints them: `# ID` in hex, then every byte from `buf` to the
            // record's end (its padding included) as ` %02x`.
            "raw_data" => {
                let id = ev.field("id").as_ref().and_then(as_u64).unwrap_or(0);
                write!(out, "# {id:x}")?;
                let at = f.field("buf").map_or(usize::MAX, |b| b.offset);
                for x in ev.data.get(at..).unwrap_or(&[]) {
                    write!(out, " {x:02x}")?;
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
    // trace-cmd ends the line itself: a last field of text ending in a
    // newline (7.2's `sys_enter_write` with the bytes written) adds no
    // empty line.
    if out.last() == Some(&b'\n') {
        out.pop();
    }
}

/// Write one record as one `trace-cmd report`-style line (plus a newline):
///
/// `[BUFFER: ]COMM-PID [CPU] TIME: EVENT_NAME: FIELDS`
///
/// * The `BUFFER: ` prefix (right-aligned to the longest buffer name, blank
///   for the top buffer) appears only when the file has several buffers.
/// * COMM comes from the saved cmdlines, else from the first sched_switch or
///   sched_wakeup(_new) printed before that names the pid (trace-cmd's
///   sched_switch plugin), `<idle>` for pid 0, else `<...>`.
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
/// slot (name column and body) per event format seen.
pub struct Printer<'a> {
    file: &'a TraceFile,
    time: TimeColumn,
    /// `{comm:>16}-{pid:<5} [` per pid.
    heads: FxHashMap<i32, Text>,
    /// Per format id, what its records print alike (index = id; the unknown
    /// format at the end).
    slots: Vec<Option<Slot>>,
    /// Comms learned from the records printed so far ([`Comms`]), from
    /// those trace-cmd learns from only (see [`Slot::learner`]).
    comms: Comms,
    /// trace-cmd's table of comms, where it differs from `comms`.
    table: TaskTable,
    /// Per CPU, the call chain the function plugin has seen (for indents).
    calls: FxHashMap<u32, Vec<Option<String>>>,
    /// The line [`Printer::write`] builds before handing it to its writer.
    line: Vec<u8>,
    /// A funcgraph_entry held back until the next record tells whether it is
    /// a leaf (`held`); one at most, as trace-cmd looks one record ahead.
    entry: HeldEntry,
    held: bool,
    /// The prototypes of the traced functions, when the run saved them: the
    /// arguments of `func-args`/`funcgraph-args` records are then printed as
    /// the kernel's `trace` file prints them ([`crate::args`]).
    prototypes: Option<&'a Prototypes>,
    /// function_graph's functions by address, as kallsyms names them (`None`:
    /// no symbol), up to [`GRAPH_NAMES`] of them: a graph calls the same few
    /// functions again and again, and each kallsyms lookup is a binary search.
    graph_names: FxHashMap<u64, Option<&'a str>>,
}

/// Function addresses [`Printer`] keeps the names of.
const GRAPH_NAMES: usize = 1 << 16;

/// What the records of one event format print alike, worked out on its
/// first record.
struct Slot {
    /// The name column, `: {name}: {pad}`.
    name: Text,
    body: Body,
    /// `Some` when its records name tasks as trace-cmd's sched_switch plugin
    /// registers them (sched_switch, sched_wakeup, sched_wakeup_new): the
    /// listing learns from those only, first name kept, so that a task the
    /// saved cmdlines miss keeps its pre-exec name as in trace-cmd's listing.
    learner: Option<Learner>,
}

impl Slot {
    /// The slot of `format`, `unknown` for the placeholder format of records
    /// whose type the file does not describe.
    fn new(file: &TraceFile, format: &EventFormat, unknown: bool) -> Slot {
        let name = if unknown {
            "[UNKNOWN EVENT]"
        } else {
            format.name.as_str()
        };
        let pad = 20usize.saturating_sub(name.len());
        Slot {
            name: Text::new(format!(": {name}: {:pad$}", "").as_bytes()),
            body: body_of(file, format, unknown),
            learner: match unknown {
                true => None,
                false => Learner::of(format).filter(Learner::registers),
            },
        }
    }
}

/// The body of `format`'s records (`unknown`: the placeholder format of
/// records whose type the file does not describe).
fn body_of(file: &TraceFile, format: &EventFormat, unknown: bool) -> Body {
    match unknown {
        true => Body::Fields,
        false => body_for(file, format),
    }
}

/// Writes the body of `ev` and returns true when it does not depend on the
/// records before it: every body but the function tracer's (its indent
/// follows the calls), function_graph's (an entry waits for the next record)
/// and a failed print fmt's (a text field prints as bytes for good once a
/// printed record had one that is not text); false for those, writing
/// nothing.
fn write_stateless(file: &TraceFile, body: &Body, ev: &Event<'_>, out: &mut Vec<u8>) -> bool {
    match body {
        Body::Fmt(_, Lead::Futex(at)) if write_futex(ev, *at, out) => {}
        Body::Fmt(p, lead) => {
            if *lead == Lead::CallSite
                && let Some((name, off)) = file.symbol(num_field(ev, "call_site") as u64)
            {
                out.push(b'(');
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b"+0x");
                write_hex_digits(out, u64::from(off as u32));
                out.extend_from_slice(b") ");
            }
            p.write(
                &Ctx {
                    fmt: ev.format,
                    data: &ev.data,
                    big: ev.big_endian,
                    kernel: file,
                },
                out,
            );
            // trace-cmd ends the line itself: a print fmt ending in a
            // newline (ext4's fsmap events) adds no empty line.
            if out.last() == Some(&b'\n') {
                out.pop();
            }
        }
        Body::Switch(s) => s.write(ev, out),
        Body::Wakeup(w) => w.write(ev, out),
        // Formatting into a Vec cannot fail.
        Body::Plugin | Body::Fields => write_fields(file, ev, out).unwrap_or(()),
        Body::Function | Body::Graph(_) | Body::Failed(_) => return false,
    }
    true
}

/// What a [`Printer`] prints of each record that does not depend on the
/// records before it (every event's body but the function tracer's,
/// function_graph's and a failed print fmt's), rendered apart from the
/// printer: on the thread that decodes the records, through
/// [`crate::Records::try_for_each_prepared`], while the printer's thread
/// writes the lines ([`Printer::append_prepared`]). Memory: one body per
/// event format seen.
pub struct Bodies<'a> {
    file: &'a TraceFile,
    /// Per format id, its body (the unknown format at the end).
    bodies: Vec<Option<Body>>,
}

impl Bodies<'_> {
    /// Appends what [`Printer::append_prepared`] takes for `rec`: a marker
    /// byte and the event's body when it is stateless, nothing otherwise.
    pub fn prepare(&mut self, rec: &Record<'_>, out: &mut Vec<u8>) {
        let Record::Event(ev) = rec else { return };
        let unknown = Printer::unknown(ev);
        let i = slot_index(ev, unknown);
        if i >= self.bodies.len() {
            self.bodies.resize_with(i + 1, || None);
        }
        let body = self.bodies[i].get_or_insert_with(|| body_of(self.file, ev.format, unknown));
        let start = out.len();
        out.push(PREPARED);
        if !write_stateless(self.file, body, ev, out) {
            out.truncate(start);
        }
    }
}

/// The byte before a body [`Bodies::prepare`] rendered.
const PREPARED: u8 = 1;

/// The index of `ev`'s format in per-format tables: its id, or one past the
/// largest id for the placeholder format.
fn slot_index(ev: &Event<'_>, unknown: bool) -> usize {
    match unknown {
        true => u16::MAX as usize + 1,
        false => ev.format.id as usize,
    }
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
    /// Its argument registers (`funcgraph-args`), when printed.
    args: Vec<u64>,
    /// Whether it carried any (and prototypes were given).
    has_args: bool,
}

impl<'a> Printer<'a> {
    /// A printer for the records of `file`.
    pub fn new(file: &'a TraceFile) -> Printer<'a> {
        Printer {
            file,
            time: TimeColumn::new(file.ns_timestamps()),
            heads: FxHashMap::default(),
            slots: Vec::new(),
            calls: FxHashMap::default(),
            comms: Comms::new(),
            table: TaskTable::new(),
            line: Vec::with_capacity(256),
            entry: HeldEntry::default(),
            held: false,
            prototypes: None,
            graph_names: FxHashMap::default(),
        }
    }

    /// The kallsyms name of function_graph's function `func`, kept for the
    /// next time.
    fn graph_name(&mut self, func: u64) -> Option<&'a str> {
        if let Some(name) = self.graph_names.get(&func) {
            return *name;
        }
        let file: &'a TraceFile = self.file;
        let name = file.symbol(func).map(|(name, _)| name);
        if self.graph_names.len() < GRAPH_NAMES {
            self.graph_names.insert(func, name);
        }
        name
    }

    /// This printer, printing the arguments that `func-args` and
    /// `funcgraph-args` records carry as the kernel's `trace` file prints
    /// them, named and typed by `prototypes` (trace-cmd 3.1.6 prints none;
    /// without prototypes neither do we). A function `prototypes` lacks
    /// prints `()`, as the kernel prints one its BTF lacks.
    pub fn with_prototypes(mut self, prototypes: &'a Prototypes) -> Printer<'a> {
        self.prototypes = Some(prototypes);
        self
    }

    /// The argument registers of `ev` (its trailing `args[]`, one `long`
    /// each), when prototypes were given and it carries any.
    fn arg_regs(&self, ev: &Event<'_>, into: &mut Vec<u64>) -> bool {
        into.clear();
        if self.prototypes.is_none() {
            return false;
        }
        let Some(f) = ev.format.field("args") else {
            return false;
        };
        if f.layout != FieldLayout::Trailing {
            return false;
        }
        // As wide as the writing kernel's `long` (never 0: chunks of it).
        let long = Kernel::long_size(self.file);
        let rest = ev.data.get(f.offset..).unwrap_or(&[]);
        into.extend(
            rest.chunks_exact(long)
                .filter_map(|b| read_uint(b, ev.big_endian)),
        );
        !into.is_empty()
    }

    /// `(NAME=VALUE, ...)` of a call of `func` with registers `regs`.
    fn write_call_args(&self, out: &mut Vec<u8>, func: u64, regs: &[u64]) {
        let params = (self.prototypes)
            .zip(self.file.symbol(func))
            .and_then(|(p, (name, _))| p.get(name));
        write_args(out, params, regs, Kernel::long_size(self.file) as u32);
    }

    /// Writes one record. Errors: only those of `out`.
    ///
    /// A `funcgraph_entry` is written with the record after it, which decides
    /// its shape (see [`Printer::finish`]): when that record is the
    /// `funcgraph_exit` of the same function, task, CPU and buffer, the two
    /// make one leaf line and the exit writes nothing of its own.
    pub fn write(&mut self, rec: &Record<'_>, out: &mut impl Write) -> std::io::Result<()> {
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        self.append(rec, &mut line);
        let written = out.write_all(&line);
        self.line = line;
        written
    }

    /// Appends what [`Printer::write`] writes for `rec` to `out`: for a
    /// caller that gathers many lines in one buffer before writing them.
    pub fn append(&mut self, rec: &Record<'_>, out: &mut Vec<u8>) {
        self.append_prepared(rec, &[], out);
    }

    /// The stage of the listing that may run apart from this printer, on
    /// the thread that decodes the records ([`Printer::append_prepared`]).
    pub fn bodies(&self) -> Bodies<'a> {
        Bodies {
            file: self.file,
            bodies: Vec::new(),
        }
    }

    /// [`Printer::append`] for a record whose body [`Bodies::prepare`]
    /// rendered into `prepared` (or left empty: then it is rendered here).
    pub fn append_prepared(&mut self, rec: &Record<'_>, prepared: &[u8], out: &mut Vec<u8>) {
        if self.held {
            self.held = false;
            if let Record::Event(ev) = rec
                && let Some(duration) = self.closes_entry(ev)
            {
                self.write_leaf(duration);
                out.extend_from_slice(&self.entry.line);
                return;
            }
            self.write_nested();
            out.extend_from_slice(&self.entry.line);
        }
        match rec {
            Record::Lost {
                buffer, cpu, count, ..
            } => {
                out.extend_from_slice(buffer_prefix(self.file, buffer).as_bytes());
                out.extend_from_slice(b"CPU:");
                push_num(out, *cpu);
                match count {
                    Some(n) => {
                        out.extend_from_slice(b" [");
                        push_num(out, *n);
                        out.extend_from_slice(b" EVENTS DROPPED]\n");
                    }
                    None => out.extend_from_slice(b" [EVENTS DROPPED]\n"),
                }
            }
            Record::Event(ev) => self.event(ev, prepared, out),
        }
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

    fn unknown(ev: &Event<'_>) -> bool {
        ev.format.id == 0 && ev.format.name == "UNKNOWN"
    }

    /// The index in `slots` of `ev`'s format (the unknown format last),
    /// its slot made on its first record.
    fn slot(&mut self, ev: &Event<'_>) -> usize {
        let unknown = Printer::unknown(ev);
        let i = slot_index(ev, unknown);
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        if self.slots[i].is_none() {
            self.slots[i] = Some(Slot::new(self.file, ev.format, unknown));
        }
        i
    }

    /// The duration (ns) of the held entry when `ev` is its
    /// `funcgraph_exit`: trace-cmd 3.1.6 pairs an entry with the next record
    /// when that is a funcgraph_exit of the same function from the same pid
    /// (read as a non-negative `int`). We also ask for the same CPU and
    /// buffer: 3.1.6 pairs across CPUs too, then reads records it has freed
    /// (later trace-cmd releases print the entry nested, as we do).
    fn closes_entry(&mut self, ev: &Event<'_>) -> Option<u64> {
        let (cpu, pid, func) = (self.entry.cpu, self.entry.pid, self.entry.func);
        // The buffer names compared only when not both empty: a call of
        // `memcmp` per record otherwise, even for empty names.
        let buffer = &self.entry.buffer;
        let same_buffer = match (ev.buffer.is_empty(), buffer.is_empty()) {
            (true, true) => true,
            (false, false) => ev.buffer == buffer,
            _ => false,
        };
        if ev.cpu != cpu || pid < 0 || ev.pid() != pid || !same_buffer {
            return None;
        }
        let i = self.slot(ev);
        match self.slots[i].as_ref().map(|s| &s.body) {
            Some(Body::Graph(g @ Graph { times: Some(_), .. })) if g.func.read(ev) == func => {
                Some(g.duration(ev))
            }
            _ => None,
        }
    }

    /// Completes the held entry's line as a leaf: `func();` after the
    /// exit's duration.
    fn write_leaf(&mut self, duration: u64) {
        let name = self.graph_name(self.entry.func);
        let e = &mut self.entry;
        write_overhead(&mut e.line, Some(duration));
        write_duration(&mut e.line, duration);
        write_graph_func(&mut e.line, e.depth, e.func, name);
        self.end_entry(b";\n");
    }

    /// Ends the held entry's line after its function: its arguments when it
    /// carries them (`funcgraph-args` and prototypes), else `()` as
    /// trace-cmd prints it; then `tail`.
    fn end_entry(&mut self, tail: &[u8]) {
        let mut line = std::mem::take(&mut self.entry.line);
        match self.entry.has_args {
            true => self.write_call_args(&mut line, self.entry.func, &self.entry.args),
            false => line.extend_from_slice(b"()"),
        }
        line.extend_from_slice(tail);
        self.entry.line = line;
    }

    /// Completes the held entry's line as a nested entry: `func() {`, no
    /// duration.
    fn write_nested(&mut self) {
        let name = self.graph_name(self.entry.func);
        let e = &mut self.entry;
        write_overhead(&mut e.line, None);
        e.line.extend_from_slice(b"           |  ");
        write_graph_func(&mut e.line, e.depth, e.func, name);
        self.end_entry(b" {\n");
    }

    /// Appends `ev`'s line to `out`, or, for a funcgraph_entry, moves it
    /// to `entry` and holds it back.
    fn event(&mut self, ev: &Event<'_>, prepared: &[u8], out: &mut Vec<u8>) {
        let file = self.file;
        let start = out.len();
        if file.buffers.len() > 1 {
            out.extend_from_slice(buffer_prefix(file, ev.buffer).as_bytes());
        }
        let pid = ev.pid();
        self.table.look_up(file, pid);
        let (comms, table) = (&self.comms, &self.table);
        let head = self.heads.entry(pid).or_insert_with(|| {
            let comm = match table.name(pid).or_else(|| comms.get(file, pid)) {
                Some(c) => c,
                None if pid == 0 => "<idle>",
                None => "<...>",
            };
            Text::new(format!("{comm:>16}-{pid:<5} [").as_bytes())
        });
        head.push_to(out);
        let mut ibuf = itoa::Buffer::new();
        push_padded(out, ibuf.format(ev.cpu).as_bytes(), 3, b'0');
        out.push(b']');
        self.time.push(out, ev.ts);
        let i = self.slot(ev);
        let Some(slot) = &self.slots[i] else {
            return;
        };
        slot.name.push_to(out);
        match &slot.body {
            Body::Function => self.function(ev, out),
            Body::Failed(text) => write_failed(ev, text, out),
            Body::Graph(g) => {
                let depth = g.depth.read(ev);
                if g.times.is_none() {
                    let mut args = std::mem::take(&mut self.entry.args);
                    self.entry.has_args = self.arg_regs(ev, &mut args);
                    self.entry.args = args;
                    let e = &mut self.entry;
                    e.line.clear();
                    e.line.extend_from_slice(&out[start..]);
                    out.truncate(start);
                    e.buffer.clear();
                    e.buffer.push_str(ev.buffer);
                    (e.cpu, e.pid) = (ev.cpu, ev.pid());
                    (e.func, e.depth) = (g.func.read(ev), depth);
                    self.held = true;
                    return;
                }
                let duration = g.duration(ev);
                write_overhead(out, Some(duration));
                write_duration(out, duration);
                write_indent(out, depth);
                out.push(b'}');
            }
            body => match prepared.split_first() {
                Some((&PREPARED, text)) => out.extend_from_slice(text),
                _ => {
                    write_stateless(file, body, ev, out);
                }
            },
        }
        if let Some(l) = self.slots[i].as_ref().and_then(|s| s.learner.as_ref()) {
            for pid in self.comms.learn_with(l, file, ev).into_iter().flatten() {
                self.heads.remove(&pid);
            }
            if self.table.register(l, ev) {
                for pid in self.table.twice() {
                    self.heads.remove(&pid);
                }
            }
        }
        out.push(b'\n');
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

/// The indent, then the function's symbol `name` (its address in bare hex
/// when kallsyms lacks it).
fn write_graph_func(line: &mut Vec<u8>, depth: u64, func: u64, name: Option<&str>) {
    write_indent(line, depth);
    match name {
        Some(name) => line.extend_from_slice(name.as_bytes()),
        None => write_hex_digits(line, func),
    }
}

impl Printer<'_> {
    /// A function tracer line as trace-cmd's function plugin prints it by
    /// default: the function's symbol, indented three spaces per level of
    /// the call chain it has seen on this CPU (a function's level is one
    /// more than its caller's when the caller was seen, else 1 below a new
    /// chain root), no parent.
    fn function(&mut self, ev: &Event<'_>, out: &mut Vec<u8>) {
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
        out.extend(std::iter::repeat_n(b' ', index * 3));
        match func {
            Some(f) => out.extend_from_slice(f.as_bytes()),
            None => write_hex(out, ip),
        }
        let mut regs = Vec::new();
        if self.arg_regs(ev, &mut regs) {
            self.write_call_args(out, ip, &regs);
        }
    }
}

/// The time column: [`format_ts`]'s text, appended without allocating,
/// the seconds formatted again only when they change.
struct TimeColumn {
    /// Whether the clock counts nanoseconds (`secs.usecs`).
    ns_clock: bool,
    /// The seconds of the last time appended, and ` {secs:5}.` of them.
    secs: u64,
    secs_text: Text,
}

impl TimeColumn {
    fn new(ns_clock: bool) -> TimeColumn {
        TimeColumn {
            ns_clock,
            secs: 0,
            secs_text: TimeColumn::secs_text(0),
        }
    }

    /// ` {secs:5}.`
    fn secs_text(secs: u64) -> Text {
        let mut t = vec![b' '];
        push_padded(&mut t, itoa::Buffer::new().format(secs).as_bytes(), 5, b' ');
        t.push(b'.');
        Text::new(&t)
    }

    /// Appends the column for timestamp `ts`.
    fn push(&mut self, out: &mut Vec<u8>, ts: u64) {
        let mut ibuf = itoa::Buffer::new();
        if !self.ns_clock {
            push_padded(out, ibuf.format(ts).as_bytes(), 12, b' ');
            return;
        }
        let mut secs = ts / 1_000_000_000;
        let mut usecs = (ts % 1_000_000_000 + 500) / 1000;
        if usecs >= 1_000_000 {
            usecs -= 1_000_000;
            secs += 1;
        }
        if secs != self.secs {
            self.secs = secs;
            self.secs_text = TimeColumn::secs_text(secs);
        }
        self.secs_text.push_to(out);
        push_padded(out, ibuf.format(usecs).as_bytes(), 6, b'0');
    }
}

fn write_hex(line: &mut Vec<u8>, v: u64) {
    line.extend_from_slice(b"0x");
    write_hex_digits(line, v);
}

/// `v` in lowercase hex, no prefix.
fn write_hex_digits(line: &mut Vec<u8>, v: u64) {
    line.extend_from_slice(radix_digits(v, b'x', &mut [0; 24]));
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
