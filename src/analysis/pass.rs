//! The analyses of one pass, each a [`Pass`] held in one field of
//! [`Passes`]: started when the selection runs it, fed the records of the
//! formats it handles (decided once per format, so the others never see
//! them), and finished into its section of the [`Analysis`].
//!
//! Adding an analysis: a module with its pass (an `impl Pass`), a name in
//! [`super::AnalysisName`] (and where it applies in
//! [`super::Selection::for_file`]), and one line in the `passes!` list below.

use tracedat::{Event, TraceFile};

use super::latency::{Latencies, LatencyReport};
use super::names::{AnalysisName, Selection};
use super::{Analysis, comm_of};
use crate::analysis::histogram::Histogram;
use rustc_hash::FxHashMap;

/// One record as a pass sees it.
pub(super) struct At<'r, 'e> {
    /// The file it comes from (its formats and symbols).
    pub(super) file: &'r TraceFile,
    /// The record.
    pub(super) ev: &'r Event<'e>,
    /// Its `common_pid`.
    pub(super) pid: i32,
    /// The pid's dense slot (pids in order of their first event).
    pub(super) task: usize,
    /// Its CPU's dense slot (CPUs in order of their first event): a file may
    /// claim any CPU id, and per-CPU state is sized by the CPUs seen.
    pub(super) cpu: usize,
    /// Its event's index in the pass's event names (0: a format the file lacks).
    pub(super) counted: usize,
    /// The comms learned so far (for a filter on `comm`).
    pub(super) learned: &'r tracedat::Comms,
}

/// What a pass's `finish` gets: the file, the selection, and the comms
/// learned over the whole pass.
pub(super) struct Finish<'a> {
    pub(super) file: &'a TraceFile,
    pub(super) sel: &'a Selection,
    pub(super) learned: &'a tracedat::Comms,
    /// `system:event` by the index [`At::counted`] gives.
    pub(super) event_names: &'a [String],
}

impl Finish<'_> {
    /// The comm of `pid` ([`comm_of`]).
    pub(super) fn comm(&self, pid: i32) -> String {
        comm_of(self.file, self.learned, pid)
    }

    /// Whether a section with something in it (`has`) or not is kept: a
    /// default selection drops the empty ones.
    pub(super) fn keeps(&self, has: bool) -> bool {
        has || self.sel.explicit()
    }
}

/// One analysis of the pass (statically dispatched through [`Passes`]).
pub(super) trait Pass: Sized {
    /// The pass when `sel` runs it over `file`, else `None`.
    fn start(file: &TraceFile, sel: &Selection) -> Option<Self>;
    /// Whether records of format `id` mean something to it (the others are
    /// not fed to it).
    fn handles(&self, id: u16) -> bool;
    /// Whether it is fed the records whose format the file lacks too.
    fn sees_unknown(&self) -> bool {
        false
    }
    /// Feeds one record of a format it handles.
    fn add(&mut self, at: &At<'_, '_>);
    /// Writes its section(s) into `out` (see [`Analysis::section`]).
    fn finish(self, cx: &Finish<'_>, out: &mut Analysis);
}

impl Analysis {
    /// Notes the section of `name`: `kept` when it is reported (else the
    /// analysis is dropped from `selected`), `shows` when it has something
    /// to show ([`Analysis::answer`]).
    pub(super) fn section(&mut self, name: AnalysisName, kept: bool, shows: bool) {
        if kept {
            self.sections.push(name);
        }
        if shows {
            self.shows.push(name);
        }
    }

    /// Adds the latency report of one analysis (`tasks`: its per-task
    /// distributions, when it keeps them), kept as [`Finish::keeps`] says.
    pub(super) fn latency(
        &mut self,
        cx: &Finish<'_>,
        name: AnalysisName,
        report: LatencyReport,
        tasks: FxHashMap<i32, Histogram>,
    ) {
        if !tasks.is_empty() {
            self.task_latency.push((report.analysis.clone(), tasks));
        }
        let kept = cx.keeps(!report.groups.is_empty() || report.unpaired > 0);
        self.section(name, kept, !report.groups.is_empty());
        if kept {
            self.latencies.push(report);
        }
    }
}

/// Declares [`Passes`]: one `Option` field per pass, in the order they are
/// fed and finished.
macro_rules! passes {
    ($($field:ident: $ty:ty,)*) => {
        /// Every pass of one run over a file (`None`: not selected).
        pub(super) struct Passes {
            $($field: Option<$ty>,)*
        }

        impl Passes {
            /// The passes `sel` runs over `file`.
            pub(super) fn new(file: &TraceFile, sel: &Selection) -> Passes {
                Passes {
                    $($field: <$ty as Pass>::start(file, sel),)*
                }
            }

            /// The passes records of format `id` go to (`None`: a format
            /// the file lacks), one bit each.
            pub(super) fn feeds(&self, id: Option<u16>) -> Feeds {
                let mut m = 0;
                let mut bit = 1;
                $(
                    if let Some(p) = self.$field.as_ref()
                        && match id {
                            Some(id) => p.handles(id),
                            None => p.sees_unknown(),
                        }
                    {
                        m |= bit;
                    }
                    bit <<= 1;
                )*
                let _ = bit;
                Feeds(m)
            }

            /// Feeds `at` to the passes of `feeds`.
            #[inline(always)]
            pub(super) fn add(&mut self, feeds: Feeds, at: &At<'_, '_>) {
                let mut bit = 1;
                $(
                    if feeds.0 & bit != 0
                        && let Some(p) = self.$field.as_mut()
                    {
                        p.add(at);
                    }
                    bit <<= 1;
                )*
                let _ = bit;
            }

            /// Finishes every pass into `out`.
            pub(super) fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
                $(
                    if let Some(p) = self.$field {
                        p.finish(cx, out);
                    }
                )*
            }
        }
    };
}

/// The passes a format's records go to, one bit per field of [`Passes`].
#[derive(Clone, Copy, Default)]
pub(super) struct Feeds(u32);

impl Feeds {
    /// Whether they go to none.
    #[inline]
    pub(super) fn none(self) -> bool {
        self.0 == 0
    }
}

passes! {
    funcgraph: super::funcgraph::Functions,
    latency: Latencies,
    profile: super::profile::Profiler,
    errno: super::errno::Errors,
    block: super::block::BlockIo,
    kmem: super::kmem::KmemPass,
    faults: super::faults::FaultPass,
    noise: super::noise::Noise,
    stacks: super::stacks::StackPass,
    markers: super::markers::MarkerPass,
    answers: super::answer::Answers,
    telling: super::telling::TellingPass,
    proctree: super::proctree::ProcTree,
}
