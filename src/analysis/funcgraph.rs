//! function_graph records decoded once for the three parts of the
//! `funcgraph` analysis that read them: the per-function latency
//! (`latency`), function time (`functime`) and call paths (`callgraph`).
//!
//! `ftrace:funcgraph_entry` carries `func` (the function's address) and
//! `depth`; `ftrace:funcgraph_exit` carries them too, with `calltime` and
//! `rettime` (trace-clock units). Source of truth: the kernel's
//! kernel/trace/trace_entries.h (`FTRACE_ENTRY(funcgraph_entry, ...)` and
//! `FTRACE_ENTRY_PACKED(funcgraph_exit, ...)`) and
//! Documentation/trace/ftrace.rst ("function_graph").

use tracedat::{Event, EventFormat, IntField, TraceFile};

use super::callgraph::CallPaths;
use super::functime::FuncTime;
use super::histogram::Seen;
use super::latency::Groups;
use super::pass::{At, Finish, Pass};
use super::{Analysis, AnalysisName, Selection, function_name};

/// A function_graph call entered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Entry {
    /// Function address.
    pub(super) func: u64,
    /// Call depth (0 for the outermost call of the graph).
    pub(super) depth: u64,
}

/// A function_graph call returned.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Return {
    /// Function address.
    pub(super) func: u64,
    /// Call depth (0 for the outermost call of the graph).
    pub(super) depth: u64,
    /// `rettime - calltime` (0 if it runs backwards), trace-clock units.
    pub(super) time: u64,
}

/// One function_graph record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Call {
    Entry(Entry),
    Return(Return),
}

/// The fields of the two function_graph formats a file holds.
pub(super) struct Decoder {
    /// `funcgraph_entry`: its id, `func` and `depth`.
    entry: Option<(u16, IntField, IntField)>,
    /// `funcgraph_exit`: its id, `func`, `depth`, `calltime` and `rettime`.
    exit: Option<(u16, [IntField; 4])>,
    /// When both formats place their fields as x86-64 and arm64 kernels
    /// from 5.x to 6.18 do ([`COMMON_ENTRY`], [`COMMON_EXIT`]) in a
    /// little-endian file: whether `depth` is signed (it is unsigned since
    /// 6.14). Their records are then read at fixed offsets.
    common: Option<bool>,
}

/// `funcgraph_entry` of x86-64 and arm64 kernels 5.x–6.18: `unsigned long
/// func` at 8, `int depth` (6.14: `unsigned int`) at 16.
const COMMON_ENTRY: [(usize, u8); 2] = [(8, 8), (16, 4)];
/// `funcgraph_exit` of the same kernels: `func` at 8, `depth` at 16,
/// `calltime` at 24 and `rettime` at 32 (u64).
const COMMON_EXIT: [(usize, u8); 4] = [(8, 8), (16, 4), (24, 8), (32, 8)];

/// The little-endian u64 at byte `at` of `w`.
#[inline(always)]
fn le64<const N: usize>(w: &[u8; N], at: usize) -> u64 {
    u64::from_le_bytes(std::array::from_fn(|i| w[at + i]))
}

/// The `depth` at byte 16 of `w`, sign-extended when `signed`.
#[inline(always)]
fn depth_at<const N: usize>(w: &[u8; N], signed: bool) -> u64 {
    let d = u32::from_le_bytes(std::array::from_fn(|i| w[16 + i]));
    if signed {
        d as i32 as u64
    } else {
        u64::from(d)
    }
}

impl Decoder {
    /// The formats of `file` named `ftrace:funcgraph_entry` and
    /// `ftrace:funcgraph_exit` that have every field above (a format without
    /// them is left out, as if the file had none).
    pub(super) fn new(file: &TraceFile) -> Decoder {
        let format = |name: &str| {
            file.formats()
                .find(|f| f.system == "ftrace" && f.name == name)
        };
        Decoder::of(
            format("funcgraph_entry"),
            format("funcgraph_exit"),
            file.big_endian(),
        )
    }

    /// The decoder of these two formats, in a file of this byte order.
    fn of(entry: Option<&EventFormat>, exit: Option<&EventFormat>, big_endian: bool) -> Decoder {
        let int = |f: &EventFormat, name: &str| f.field(name).map(|x| x.int());
        let entry = entry.and_then(|f| Some((f.id, int(f, "func")?, int(f, "depth")?)));
        let exit = exit.and_then(|f| {
            let fields = [
                int(f, "func")?,
                int(f, "depth")?,
                int(f, "calltime")?,
                int(f, "rettime")?,
            ];
            Some((f.id, fields))
        });
        // Where the fields are, and whether each is signed.
        let places = |fields: &[IntField]| -> (Vec<(usize, u8)>, Vec<bool>) {
            fields
                .iter()
                .map(|x| {
                    let (at, size, signed) = x.place();
                    ((at, size), signed)
                })
                .unzip()
        };
        let common = match (entry, exit) {
            (Some((_, func, depth)), Some((_, fields))) if !big_endian => {
                let (entry_at, entry_signed) = places(&[func, depth]);
                let (exit_at, exit_signed) = places(&fields);
                let signed = entry_signed[1];
                (entry_at == COMMON_ENTRY
                    && exit_at == COMMON_EXIT
                    && entry_signed == [false, signed]
                    && exit_signed == [false, signed, false, false])
                .then_some(signed)
            }
            _ => None,
        };
        Decoder {
            entry,
            exit,
            common,
        }
    }

    /// Whether the file has `funcgraph_entry` records to read.
    pub(super) fn has_entry(&self) -> bool {
        self.entry.is_some()
    }

    /// Whether the file has `funcgraph_exit` records to read.
    pub(super) fn has_exit(&self) -> bool {
        self.exit.is_some()
    }

    /// Whether records of format `id` are function_graph records.
    pub(super) fn handles(&self, id: u16) -> bool {
        self.entry.is_some_and(|e| e.0 == id) || self.exit.is_some_and(|e| e.0 == id)
    }

    /// The call `ev` records; `None` for another event or a record too short
    /// for its fields.
    #[inline]
    pub(super) fn decode(&self, ev: &Event<'_>) -> Option<Call> {
        // The reader gives each record its own format: the id is the format's.
        self.read(ev.format.id, &ev.data, ev.big_endian)
    }

    /// [`Decoder::decode`] of a record of format `id`, payload `data`.
    #[inline(always)]
    fn read(&self, id: u16, data: &[u8], big: bool) -> Option<Call> {
        if let (Some(signed), Some((exit, _)), Some((entry, _, _))) =
            (self.common, self.exit, self.entry)
        {
            if id == exit {
                let w = data.first_chunk::<40>()?;
                return Some(Call::Return(Return {
                    func: le64(w, 8),
                    depth: depth_at(w, signed),
                    time: le64(w, 32).saturating_sub(le64(w, 24)),
                }));
            }
            if id == entry {
                let w = data.first_chunk::<20>()?;
                return Some(Call::Entry(Entry {
                    func: le64(w, 8),
                    depth: depth_at(w, signed),
                }));
            }
            return None;
        }
        if let Some((_, [func, depth, calltime, rettime])) = self.exit.filter(|e| e.0 == id) {
            let (a, b) = (calltime.get(data, big)?, rettime.get(data, big)?);
            return Some(Call::Return(Return {
                func: func.get(data, big)?,
                depth: depth.get(data, big)?,
                time: b.saturating_sub(a),
            }));
        }
        let (_, func, depth) = self.entry.filter(|e| e.0 == id)?;
        Some(Call::Entry(Entry {
            func: func.get(data, big)?,
            depth: depth.get(data, big)?,
        }))
    }
}

/// The `funcgraph` analysis: function_graph records decoded once and fed to
/// its three parts (function time, call paths, and from the function time
/// the per-function latency).
pub(super) struct Functions {
    calls: Decoder,
    time: FuncTime,
    paths: Option<CallPaths>,
}

impl Pass for Functions {
    fn start(file: &TraceFile, sel: &Selection) -> Option<Functions> {
        sel.has(AnalysisName::Funcgraph).then(|| {
            let calls = Decoder::new(file);
            Functions {
                time: FuncTime::new(&calls),
                paths: CallPaths::new(&calls),
                calls,
            }
        })
    }

    fn handles(&self, id: u16) -> bool {
        self.calls.handles(id)
    }

    #[inline]
    fn add(&mut self, at: &At<'_, '_>) {
        let ev = at.ev;
        let Some(call) = self.calls.decode(ev) else {
            return;
        };
        if let Call::Return(ret) = &call {
            let seen = Seen {
                ts: ev.ts,
                cpu: ev.cpu,
            };
            self.time.add(ret, seen, at.pid, at.task, at.cpu);
        }
        if let Some(c) = self.paths.as_mut() {
            c.add(&call, at.task);
        }
    }

    /// The call paths (when any), the per-function latency (by the function
    /// each address falls in: `func` is the function's patch site, its
    /// address + 4 on arm64 and on x86 with IBT) and the total and self time
    /// per function.
    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        out.funcgraph_folded = (self.paths)
            .map(|c| c.finish(cx.file))
            .filter(|f| !f.is_empty());
        let mut groups = Groups::default();
        for (func, calls) in self.time.durations() {
            groups.merge(&function_name(cx.file, func), calls);
        }
        let name = AnalysisName::Funcgraph;
        let title = "function duration (function_graph, rettime - calltime)";
        let (report, tasks) = groups.report(name, title, "function", &|pid| cx.comm(pid));
        out.latency(cx, name, report, tasks);
        out.functions = self.time.finish(cx.file).filter(|f| cx.keeps(f.calls > 0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The formats of five kernels (crates/tracedat/tests/funcgraph): the
    /// three of the common layout are read at fixed offsets, and every
    /// kernel's records read alike by either way.
    #[test]
    fn records_of_every_layout_read_alike_at_fixed_offsets_and_by_field() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/tracedat/tests/funcgraph");
        for (kernel, common) in [
            ("4.13.9-i686", None),
            ("arm64-lisa", None),
            ("6.1.0-56-amd64", Some(true)),
            ("6.12.117+deb12-amd64", Some(true)),
            ("6.18.44-host", Some(false)),
        ] {
            let read = |ext: &str| {
                let text = std::fs::read_to_string(dir.join(format!("{kernel}.{ext}"))).unwrap();
                EventFormat::parse("ftrace", &text).unwrap()
            };
            let (entry, exit) = (read("entry"), read("exit"));
            let fast = Decoder::of(Some(&entry), Some(&exit), false);
            assert_eq!(fast.common, common, "{kernel}");
            let by_field = Decoder {
                common: None,
                ..Decoder::of(Some(&entry), Some(&exit), false)
            };
            // func 0xffffffff81001234, depth -1 (all ones), 1000 to 1500.
            let record = |f: &EventFormat| {
                let mut d = vec![0u8; 48];
                d[..2].copy_from_slice(&f.id.to_le_bytes());
                for (name, v) in [
                    ("func", 0xffff_ffff_8100_1234u64),
                    ("depth", u64::MAX),
                    ("calltime", 1000),
                    ("rettime", 1500),
                ] {
                    if let Some(x) = f.field(name) {
                        d[x.offset..x.offset + x.size].copy_from_slice(&v.to_le_bytes()[..x.size]);
                    }
                }
                d
            };
            for f in [&entry, &exit] {
                let d = record(f);
                let call = fast.read(f.id, &d, false);
                assert!(call.is_some(), "{kernel} {}", f.name);
                assert_eq!(call, by_field.read(f.id, &d, false), "{kernel} {}", f.name);
                // A record one byte too short for its last field reads as none.
                let end = ["func", "depth", "calltime", "rettime"]
                    .iter()
                    .filter_map(|name| f.field(name))
                    .map(|x| x.offset + x.size)
                    .max()
                    .unwrap();
                assert_eq!(
                    fast.read(f.id, &d[..end - 1], false),
                    None,
                    "{kernel} {}",
                    f.name
                );
            }
            let Some(Call::Return(r)) = fast.read(exit.id, &record(&exit), false) else {
                panic!("{kernel}: no return");
            };
            assert_eq!(r.time, 500, "{kernel}");
        }
    }
}
