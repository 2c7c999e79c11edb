//! Markers: the lines user space wrote to the run's `trace_marker` (the
//! workload finds its path in `$TRACE_RECIPE_MARKER`), recorded as
//! `ftrace:print` events (Documentation/trace/ftrace.rst, "trace_marker").
//! Collected in the analysis pass, always (not an analysis to select), and
//! bounded: report.json keeps the count and the first [`MAX_MARKERS`], each
//! text cut to [`MAX_TEXT`] characters with its control characters escaped
//! (a marker is whatever a program wrote: hostile to a terminal).

use schemars::JsonSchema;
use serde::Serialize;
use tracedat::{Event, EventFormat, FieldValue, TraceFile};

use super::Analysis;
use super::names::Selection;
use super::pass::{At, Finish, Pass};

/// Markers report.json lists (the count covers all).
pub(crate) const MAX_MARKERS: usize = 100;
/// Characters of a marker's text kept; a longer one ends in `…`.
pub(crate) const MAX_TEXT: usize = 256;

/// report.json `markers`: what was written to the run's `trace_marker`.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub(crate) struct Markers {
    /// Markers in the trace.
    pub(crate) count: u64,
    /// The first [`MAX_MARKERS`] of them, in time order.
    pub(crate) first: Vec<Marker>,
}

/// One marker.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct Marker {
    /// Timestamp (trace-clock units: ns for the nanosecond clocks).
    pub(crate) ts_ns: u64,
    /// CPU it was written on.
    pub(crate) cpu: u32,
    /// The writing task's pid.
    pub(crate) pid: i32,
    /// The writing task's comm.
    pub(crate) comm: String,
    /// The text, without its trailing newline; control characters written
    /// as `\u{..}` escapes, backslashes doubled; at most [`MAX_TEXT`]
    /// characters (then ending in `…`).
    pub(crate) text: String,
}

/// Markers seen so far in a pass.
#[derive(Debug, Default)]
pub(crate) struct Collector {
    count: u64,
    /// (ts, cpu, pid, text) of the first [`MAX_MARKERS`].
    first: Vec<(u64, u32, i32, String)>,
}

impl Collector {
    /// Whether records of `f` are markers.
    pub(crate) fn is_marker(f: &EventFormat) -> bool {
        f.system == "ftrace" && f.name == "print"
    }

    /// Counts the marker `ev`, and keeps it while fewer than [`MAX_MARKERS`] are.
    pub(crate) fn add(&mut self, ev: &Event<'_>) {
        self.count += 1;
        if self.first.len() >= MAX_MARKERS {
            return;
        }
        let text = match ev.field("buf") {
            Some(FieldValue::Str(b) | FieldValue::Bytes(b)) => text_of(b),
            _ => String::new(),
        };
        self.first.push((ev.ts, ev.cpu, ev.pid(), text));
    }

    /// The markers, each with its task's comm (`comm`); `None` without any.
    pub(crate) fn finish(self, comm: &dyn Fn(i32) -> String) -> Option<Markers> {
        (self.count > 0).then(|| Markers {
            count: self.count,
            first: self
                .first
                .into_iter()
                .map(|(ts_ns, cpu, pid, text)| Marker {
                    ts_ns,
                    cpu,
                    pid,
                    comm: crate::untrusted::escape(&comm(pid)).into_owned(),
                    text,
                })
                .collect(),
        })
    }
}

/// A marker's bytes as bounded, escaped text (see [`Marker::text`]).
pub(super) fn text_of(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let s = s.trim_end_matches(['\0', '\n']);
    let mut cut: String = s.chars().take(MAX_TEXT).collect();
    if cut.len() < s.len() {
        cut.push('…');
    }
    crate::untrusted::escape(&cut).into_owned()
}

/// Markers are always collected: the pass handles the file's `ftrace:print`
/// formats.
pub(super) struct MarkerPass {
    markers: Collector,
    /// Per format id: whether its records are markers.
    marker: Vec<bool>,
}

impl Pass for MarkerPass {
    fn start(file: &TraceFile, _sel: &Selection) -> Option<MarkerPass> {
        let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
        let mut marker = vec![false; max_id + 1];
        for f in file.formats().filter(|f| Collector::is_marker(f)) {
            marker[f.id as usize] = true;
        }
        Some(MarkerPass {
            markers: Collector::default(),
            marker,
        })
    }

    fn handles(&self, id: u16) -> bool {
        self.marker.get(usize::from(id)).copied().unwrap_or(false)
    }

    #[inline]
    fn add(&mut self, at: &At<'_, '_>) {
        self.markers.add(at.ev);
    }

    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        out.markers = self.markers.finish(&|pid| cx.comm(pid));
    }
}

#[cfg(test)]
mod tests {
    use super::text_of;

    #[test]
    fn marker_text_is_bounded_and_escaped() {
        assert_eq!(text_of(b"phase 1 begins\n\0"), "phase 1 begins");
        assert_eq!(text_of(b"\x1b[2Jgone\\"), "\\u{1b}[2Jgone\\\\");
        let long = "x".repeat(1000);
        let t = text_of(long.as_bytes());
        assert_eq!(t.chars().count(), super::MAX_TEXT + 1);
        assert!(t.ends_with('…'));
    }
}
