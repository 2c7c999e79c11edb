//! The analyses by name, and which of them a pass runs: the one place that
//! lists them ([`AnalysisName`]), says when each applies to a file
//! ([`Selection::for_file`]) and in which order one answers a trace's
//! question ([`ANSWER_ORDER`]).

use tracedat::TraceFile;

use super::{block, errno, faults, kmem, proctree, profile, telling};

/// The analyses, by the name `report --analysis NAME` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum AnalysisName {
    /// Per event, CPU, comm and pid counts, in total and over time.
    Counts,
    /// Syscall latency (sys_enter_X → sys_exit_X per task).
    Syscalls,
    /// Wakeup-to-run latency (sched_wakeup/sched_waking → sched_switch in).
    Wakeup,
    /// kprobe → kretprobe latency per task and function.
    Kretprobe,
    /// function_graph duration per function (funcgraph_exit).
    Funcgraph,
    /// Most frequent kernel stacks (ftrace kernel_stack records).
    Stacks,
    /// Interrupt handler time (irq_handler_entry → irq_handler_exit).
    Irq,
    /// Softirq time per vector (softirq_entry → softirq_exit).
    Softirq,
    /// Per task and CPU: running, preempted, wakeup latency, sleeping, blocked, interrupts.
    Profile,
    /// Failed syscalls by errno name, per syscall and per task.
    Errno,
    /// Block I/O issue-to-complete latency per device and request size.
    Block,
    /// Slab allocations (kmalloc, kmem_cache_alloc) by call site and size, with outstanding bytes.
    Kmem,
    /// Page faults: kernel ones by the function of their `ip`, all per task.
    Faults,
    /// Per event no other analysis answers: the top values of its telling
    /// fields (text, enums, symbols, task ids, signals, ports) per task.
    Fields,
    /// hwlat's samples: inner and outer gaps, per CPU.
    Hwlat,
    /// osnoise's periods: noise and interference, per CPU.
    Osnoise,
    /// timerlat's samples: IRQ and thread latency, per CPU.
    Timerlat,
    /// The process tree: forks (parent → child), programs exec'd, exit status, lifetime.
    Proctree,
}

impl AnalysisName {
    /// Every analysis, in report order.
    pub const ALL: [AnalysisName; 18] = [
        AnalysisName::Counts,
        AnalysisName::Syscalls,
        AnalysisName::Wakeup,
        AnalysisName::Kretprobe,
        AnalysisName::Funcgraph,
        AnalysisName::Stacks,
        AnalysisName::Irq,
        AnalysisName::Softirq,
        AnalysisName::Profile,
        AnalysisName::Errno,
        AnalysisName::Block,
        AnalysisName::Kmem,
        AnalysisName::Faults,
        AnalysisName::Fields,
        AnalysisName::Hwlat,
        AnalysisName::Osnoise,
        AnalysisName::Timerlat,
        AnalysisName::Proctree,
    ];

    /// The name as typed on the command line.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AnalysisName::Counts => "counts",
            AnalysisName::Syscalls => "syscalls",
            AnalysisName::Wakeup => "wakeup",
            AnalysisName::Kretprobe => "kretprobe",
            AnalysisName::Funcgraph => "funcgraph",
            AnalysisName::Stacks => "stacks",
            AnalysisName::Irq => "irq",
            AnalysisName::Softirq => "softirq",
            AnalysisName::Profile => "profile",
            AnalysisName::Errno => "errno",
            AnalysisName::Block => "block",
            AnalysisName::Kmem => "kmem",
            AnalysisName::Faults => "faults",
            AnalysisName::Fields => "fields",
            AnalysisName::Hwlat => "hwlat",
            AnalysisName::Osnoise => "osnoise",
            AnalysisName::Timerlat => "timerlat",
            AnalysisName::Proctree => "proctree",
        }
    }
}

/// Which analyses a pass runs. A default selection (`Selection::for_file`)
/// drops, after the pass, the analyses whose events never occurred; an explicit
/// one ([`Selection::new`] with names) reports them with no samples.
#[derive(Debug, Clone)]
pub struct Selection {
    names: Vec<AnalysisName>,
    explicit: bool,
    /// The `[[answer]]` tables to compute too.
    answers: Vec<crate::recipe::Answer>,
}

impl Selection {
    /// Exactly these (an empty list means `Selection::for_file`).
    pub fn new(file: &TraceFile, names: &[AnalysisName]) -> Selection {
        if names.is_empty() {
            return Selection::for_file(file);
        }
        let mut v = names.to_vec();
        v.sort_unstable();
        v.dedup();
        Selection {
            names: v,
            explicit: true,
            answers: Vec::new(),
        }
    }

    /// `counts`, plus every analysis whose events have a format in `file`
    /// (a recorded event always has one).
    pub(crate) fn for_file(file: &TraceFile) -> Selection {
        let has = |sys: &str, pred: &dyn Fn(&tracedat::EventFormat) -> bool| {
            file.formats().any(|f| f.system == sys && pred(f))
        };
        let any = |pred: &dyn Fn(&tracedat::EventFormat) -> bool| file.formats().any(pred);
        let mut v = vec![AnalysisName::Counts];
        if has("syscalls", &|f| f.name.starts_with("sys_exit_")) || has("raw_syscalls", &|_| true) {
            v.push(AnalysisName::Syscalls);
        }
        if has("sched", &|f| f.name == "sched_switch")
            && has("sched", &|f| f.name.starts_with("sched_wak"))
        {
            v.push(AnalysisName::Wakeup);
        }
        if any(&|f| f.field("__probe_ret_ip").is_some()) {
            v.push(AnalysisName::Kretprobe);
        }
        if has("ftrace", &|f| f.name == "funcgraph_exit") {
            v.push(AnalysisName::Funcgraph);
        }
        if has("ftrace", &|f| {
            f.name == "kernel_stack" || f.name == "user_stack"
        }) {
            v.push(AnalysisName::Stacks);
        }
        if has("irq", &|f| f.name == "irq_handler_entry")
            && has("irq", &|f| f.name == "irq_handler_exit")
        {
            v.push(AnalysisName::Irq);
        }
        if has("irq", &|f| f.name == "softirq_entry") && has("irq", &|f| f.name == "softirq_exit") {
            v.push(AnalysisName::Softirq);
        }
        if profile::Profiler::applies(file) {
            v.push(AnalysisName::Profile);
        }
        if errno::Errors::applies(file) {
            v.push(AnalysisName::Errno);
        }
        if block::BlockIo::applies(file) {
            v.push(AnalysisName::Block);
        }
        if kmem::KmemPass::applies(file) {
            v.push(AnalysisName::Kmem);
        }
        if faults::FaultPass::applies(file) {
            v.push(AnalysisName::Faults);
        }
        if telling::TellingPass::applies(file) {
            v.push(AnalysisName::Fields);
        }
        if proctree::ProcTree::applies(file) {
            v.push(AnalysisName::Proctree);
        }
        for (name, event) in [
            (AnalysisName::Hwlat, "hwlat"),
            (AnalysisName::Osnoise, "osnoise"),
            (AnalysisName::Timerlat, "timerlat"),
        ] {
            if has("ftrace", &|f| f.name == event) {
                v.push(name);
            }
        }
        Selection {
            names: v,
            explicit: false,
            answers: Vec::new(),
        }
    }

    /// Whether `name` is selected.
    pub(crate) fn has(&self, name: AnalysisName) -> bool {
        self.names.contains(&name)
    }

    /// The same, computing `answers` too with the trace engine (those
    /// whose events and fields the file has: see [`super::check_answers`]).
    pub(crate) fn with_answers(mut self, answers: Vec<crate::recipe::Answer>) -> Selection {
        self.answers = answers;
        self
    }

    /// The answers to compute.
    pub(super) fn answers(&self) -> &[crate::recipe::Answer] {
        &self.answers
    }

    /// Whether the names were given (`report --analysis`): then every
    /// selected analysis is reported, with no samples if need be.
    pub(crate) fn explicit(&self) -> bool {
        self.explicit
    }

    /// The selected names, in report order.
    pub(crate) fn names(&self) -> &[AnalysisName] {
        &self.names
    }
}

/// The order in which [`super::Analysis::answer`] looks for the analysis that answers
/// a trace's question: the most specific question first (a noise tracer's
/// own samples, allocations, block
/// I/O, syscall latency, failed syscalls, softirqs (a recipe that records
/// them asks about them, interrupt handlers beside), interrupt handlers,
/// wakeups, probes,
/// function durations, stacks), then where the time went (a profile's page
/// faults are one of its measures), then page faults, then the telling fields
/// of the events no other analysis answers (which and who), then the process
/// tree (a recipe of forks, execs and exits only asks who started what), then
/// the counts.
pub(super) const ANSWER_ORDER: [AnalysisName; 18] = [
    AnalysisName::Hwlat,
    AnalysisName::Osnoise,
    AnalysisName::Timerlat,
    AnalysisName::Kmem,
    AnalysisName::Block,
    AnalysisName::Syscalls,
    AnalysisName::Errno,
    AnalysisName::Softirq,
    AnalysisName::Irq,
    AnalysisName::Wakeup,
    AnalysisName::Kretprobe,
    AnalysisName::Funcgraph,
    AnalysisName::Stacks,
    AnalysisName::Profile,
    AnalysisName::Faults,
    AnalysisName::Fields,
    AnalysisName::Proctree,
    AnalysisName::Counts,
];
