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

/// A function_graph call entered.
#[derive(Clone, Copy)]
pub(super) struct Entry {
    /// Function address.
    pub(super) func: u64,
    /// Call depth (0 for the outermost call of the graph).
    pub(super) depth: u64,
}

/// A function_graph call returned.
#[derive(Clone, Copy)]
pub(super) struct Return {
    /// Function address.
    pub(super) func: u64,
    /// Call depth (0 for the outermost call of the graph).
    pub(super) depth: u64,
    /// `rettime - calltime` (0 if it runs backwards), trace-clock units.
    pub(super) time: u64,
}

/// One function_graph record.
#[derive(Clone, Copy)]
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
        let int = |f: &EventFormat, name: &str| f.field(name).map(|x| x.int());
        Decoder {
            entry: format("funcgraph_entry")
                .and_then(|f| Some((f.id, int(f, "func")?, int(f, "depth")?))),
            exit: format("funcgraph_exit").and_then(|f| {
                let fields = [
                    int(f, "func")?,
                    int(f, "depth")?,
                    int(f, "calltime")?,
                    int(f, "rettime")?,
                ];
                Some((f.id, fields))
            }),
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
        let (data, big): (&[u8], bool) = (&ev.data, ev.big_endian);
        // The reader gives each record its own format: the id is the format's.
        let id = ev.format.id;
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
