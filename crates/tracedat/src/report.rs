//! `trace-cmd report`-like text output.

use std::io::Write;

use crate::format::FieldValue;
use crate::{Event, Record, TraceFile};

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

fn write_fields(file: &TraceFile, ev: &Event<'_>, out: &mut impl Write) -> std::io::Result<()> {
    let f = ev.format;
    if f.system == "ftrace" {
        match f.name.as_str() {
            "kernel_stack" | "user_stack" => {
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
                        match (f.name.as_str(), file.symbol(addr)) {
                            ("kernel_stack", Some((name, _))) => {
                                write!(out, "\n=> {name} ({addr:x})")?
                            }
                            _ => write!(out, "\n=> {addr:x}")?,
                        }
                    }
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
        let Some(v) = fld.decode(&ev.data, ev.big_endian) else {
            continue;
        };
        if i > 0 {
            out.write_all(b" ")?;
        }
        write!(out, "{}=", fld.name)?;
        write_value(out, &v, fld.is_pointer)?;
    }
    Ok(())
}

/// Write one record as one `trace-cmd report`-style line (plus a newline):
///
/// `[BUFFER: ]COMM-PID [CPU] TIME: EVENT_NAME: FIELDS`
///
/// * The `BUFFER: ` prefix (right-aligned to the longest buffer name, blank
///   for the top buffer) appears only when the file has several buffers.
/// * COMM comes from the saved cmdlines, `<idle>` for pid 0, else `<...>`.
/// * TIME is [`format_ts`] for the file's clock.
/// * FIELDS are `name=value` pairs separated by spaces (strings as text,
///   integers in decimal, pointers in hex, arrays as `[a, b]`), not the
///   event's print fmt; `print` (trace_marker) shows `SYMBOL: TEXT`, and
///   `kernel_stack` shows `<stack trace >` then one `=> SYMBOL (ADDR)` line
///   per frame, resolved through kallsyms.
/// * A lost-events record is `CPU:N [K EVENTS DROPPED]` (or
///   `CPU:N [EVENTS DROPPED]` when the count is unknown).
pub fn format_record(
    file: &TraceFile,
    rec: &Record<'_>,
    out: &mut impl Write,
) -> std::io::Result<()> {
    match rec {
        Record::Lost {
            buffer, cpu, count, ..
        } => {
            let p = buffer_prefix(file, buffer);
            match count {
                Some(n) => writeln!(out, "{p}CPU:{cpu} [{n} EVENTS DROPPED]"),
                None => writeln!(out, "{p}CPU:{cpu} [EVENTS DROPPED]"),
            }
        }
        Record::Event(ev) => {
            let p = buffer_prefix(file, ev.buffer);
            let pid = ev.pid();
            let comm = match file.comm(pid) {
                Some(c) => c,
                None if pid == 0 => "<idle>",
                None => "<...>",
            };
            let name = if ev.format.id == 0 && ev.format.name == "UNKNOWN" {
                "[UNKNOWN EVENT]"
            } else {
                ev.format.name.as_str()
            };
            let pad = 20usize.saturating_sub(name.len());
            write!(
                out,
                "{p}{comm:>16}-{pid:<5} [{:03}]{}: {name}: {:pad$}",
                ev.cpu,
                format_ts(ev.ts, file.clock()),
                ""
            )?;
            write_fields(file, ev, out)?;
            out.write_all(b"\n")
        }
    }
}

/// Prints records like [`format_record`], reusing what is the same for every
/// record of a file (clock kind, buffer prefixes).
pub struct Printer<'a> {
    file: &'a TraceFile,
}

impl<'a> Printer<'a> {
    /// A printer for the records of `file`.
    pub fn new(file: &'a TraceFile) -> Printer<'a> {
        Printer { file }
    }

    /// Writes one record as [`format_record`] does.
    pub fn write(&mut self, rec: &Record<'_>, out: &mut impl Write) -> std::io::Result<()> {
        format_record(self.file, rec, out)
    }
}
