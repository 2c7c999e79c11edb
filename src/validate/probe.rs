//! `[[kprobes]]` and `[[uprobes]]`: the probe definition line, its fetchargs and
//! types, the target (kernel symbol, or ELF symbol resolved to a file offset),
//! and the filter against the event format the kernel will create.
//!
//! Sources of truth: Documentation/trace/kprobetrace.rst and uprobetracer.rst
//! ("Synopsis of kprobe_events" / "Synopsis of uprobe_tracer", "Types"),
//! fprobetrace.rst (fprobes, fexit and tracepoint probes, BTF arguments and
//! fields) and eprobetrace.rst (event probes, `$FIELD`).
//!
//! Why this file is long: the fetcharg grammar, the registers of each
//! architecture kprobetrace.rst lists (judged by the facts' architecture, not
//! this machine's), the uprobe target's symbol and offset, and their unit tests
//! are one concern, the probe definition line.

use std::ops::Range;

use tracedat::EventFormat;

use super::{Ctx, Span, check_predicates, filter};
use crate::btf::{BtfFacts, FieldPath, Proto, Shape, Ty};
use crate::diagnostic::Fault;
use crate::kernel::{KernelFacts, ProbeFeature};
use crate::recipe::Probe;
use crate::suggest;

/// Which probe kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeKind {
    /// `p:` in kprobe_events.
    Kprobe,
    /// `r:` in kprobe_events.
    Kretprobe,
    /// `p:` in uprobe_events.
    Uprobe,
    /// `r:` in uprobe_events.
    Uretprobe,
    /// `f:GROUP/EVENT FUNC` in dynamic_events: a function's entry (Linux 6.5).
    Fprobe,
    /// `f:GROUP/EVENT FUNC%return` in dynamic_events: its exit (Linux 6.5).
    Fexit,
    /// `t:GROUP/EVENT TRACEPOINT` in dynamic_events (Linux 6.5).
    Tprobe,
    /// `e:GROUP/EVENT SYSTEM.EVENT` in dynamic_events: on an event (Linux 5.15).
    Eprobe,
}

/// The kinds `[[kprobes]]` takes, as recipes spell them.
const KERNEL_KINDS: &str = "kprobe, kretprobe, fprobe, fexit, tprobe, eprobe";

impl ProbeKind {
    fn parse(kind: &str, kernel: bool) -> Option<ProbeKind> {
        match (kind, kernel) {
            ("kprobe", true) => Some(ProbeKind::Kprobe),
            ("kretprobe", true) => Some(ProbeKind::Kretprobe),
            ("fprobe", true) => Some(ProbeKind::Fprobe),
            ("fexit", true) => Some(ProbeKind::Fexit),
            ("tprobe", true) => Some(ProbeKind::Tprobe),
            ("eprobe", true) => Some(ProbeKind::Eprobe),
            ("uprobe", false) => Some(ProbeKind::Uprobe),
            ("uretprobe", false) => Some(ProbeKind::Uretprobe),
            _ => None,
        }
    }
    /// A return probe (`$retval` allowed, `__probe_func`/`__probe_ret_ip` fields).
    pub(crate) fn is_return(self) -> bool {
        matches!(
            self,
            ProbeKind::Kretprobe | ProbeKind::Uretprobe | ProbeKind::Fexit
        )
    }
    /// The letter that starts its definition line.
    fn letter(self) -> char {
        match self {
            ProbeKind::Kprobe | ProbeKind::Uprobe => 'p',
            ProbeKind::Kretprobe | ProbeKind::Uretprobe => 'r',
            ProbeKind::Fprobe | ProbeKind::Fexit => 'f',
            ProbeKind::Tprobe => 't',
            ProbeKind::Eprobe => 'e',
        }
    }
    /// As recipes spell it.
    fn name(self) -> &'static str {
        match self {
            ProbeKind::Kprobe => "kprobe",
            ProbeKind::Kretprobe => "kretprobe",
            ProbeKind::Uprobe => "uprobe",
            ProbeKind::Uretprobe => "uretprobe",
            ProbeKind::Fprobe => "fprobe",
            ProbeKind::Fexit => "fexit",
            ProbeKind::Tprobe => "tprobe",
            ProbeKind::Eprobe => "eprobe",
        }
    }
    /// The kernel document of its fetchargs.
    fn doc(self) -> &'static str {
        match self {
            ProbeKind::Kprobe | ProbeKind::Kretprobe => "kprobetrace.rst",
            ProbeKind::Uprobe | ProbeKind::Uretprobe => "uprobetracer.rst",
            ProbeKind::Fprobe | ProbeKind::Fexit | ProbeKind::Tprobe => "fprobetrace.rst",
            ProbeKind::Eprobe => "eprobetrace.rst",
        }
    }
    /// Example fetchargs of its kind, with the registers of `arch` (`uname -m`).
    fn example(self, arch: &str) -> String {
        match self {
            ProbeKind::Kprobe | ProbeKind::Kretprobe => {
                format!("\"+0({}):string\", \"$retval:s32\"", arg_register(arch, 1))
            }
            ProbeKind::Uprobe | ProbeKind::Uretprobe => {
                format!("\"+0($retval):string\", \"{}:x64\"", arg_register(arch, 0))
            }
            ProbeKind::Fprobe | ProbeKind::Tprobe => {
                "\"count\", \"$arg2\", \"file->f_path.dentry->d_name.name:string\"".into()
            }
            ProbeKind::Fexit => "\"$retval\", \"$retval->name:string\"".into(),
            ProbeKind::Eprobe => "\"$prev_pid:u32\", \"+0(+u0($argv)):ustring\"".into(),
        }
    }
    /// Whether it sits where BTF names the arguments: a function's entry or
    /// exit, or a tracepoint (not an event probe, not a uprobe).
    fn has_btf(self) -> bool {
        !matches!(
            self,
            ProbeKind::Uprobe | ProbeKind::Uretprobe | ProbeKind::Eprobe
        )
    }
    /// The feature of `dynamic_events` it needs, if any.
    fn feature(self) -> Option<ProbeFeature> {
        match self {
            ProbeKind::Fprobe | ProbeKind::Fexit => Some(ProbeFeature::Fprobe),
            ProbeKind::Tprobe => Some(ProbeFeature::Tprobe),
            ProbeKind::Eprobe => Some(ProbeFeature::Eprobe),
            _ => None,
        }
    }
    /// The system name recipes and reports use for the run's own probes of this
    /// kind: `kprobes` or `uprobes` (the kernel's group is `trace_recipe_PID`).
    pub(crate) fn recipe_system(self) -> &'static str {
        if self.is_kernel() {
            "kprobes"
        } else {
            "uprobes"
        }
    }
    /// A kernel probe (`[[kprobes]]`) rather than a user one (uprobe_events).
    pub(crate) fn is_kernel(self) -> bool {
        !matches!(self, ProbeKind::Uprobe | ProbeKind::Uretprobe)
    }
    /// The global tracefs file that holds its definition.
    pub(crate) fn events_file(self) -> &'static str {
        match self {
            ProbeKind::Kprobe | ProbeKind::Kretprobe => "kprobe_events",
            ProbeKind::Uprobe | ProbeKind::Uretprobe => "uprobe_events",
            _ => "dynamic_events",
        }
    }
}

/// A probe that passed every check: what to append to its events file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedProbe {
    /// The kind.
    pub(crate) kind: ProbeKind,
    /// The event name (the recipe's `event`).
    pub(crate) event: String,
    /// Everything after `p:GROUP/EVENT `: the target (for uprobes `PATH:0xOFFSET`)
    /// and the fetchargs `NAME=FETCHARG[:TYPE]`, in recipe order.
    pub(crate) spec: String,
    /// Filter to write to the probe event in the run's instance.
    pub(crate) filter: Option<String>,
    /// Add a `stacktrace` trigger to the probe event.
    pub(crate) stacktrace: bool,
    /// The recipe entry.
    pub(crate) span: Span,
}

impl ResolvedProbe {
    /// The line that defines the probe in group `group`:
    /// `p:GROUP/EVENT TARGET ARGS` (`r:` for return probes, `f:` for fprobes
    /// and fexits, whose spec ends its function in `%return`, `t:` for
    /// tracepoint probes, `e:` for event probes).
    pub(crate) fn definition(&self, group: &str) -> String {
        format!(
            "{}:{group}/{} {}",
            self.kind.letter(),
            self.event,
            self.spec
        )
    }
    /// The line that removes exactly this probe: `-:GROUP/EVENT`.
    pub(crate) fn removal(&self, group: &str) -> String {
        format!("-:{group}/{}", self.event)
    }
}

/// Field names the kernel reserves in probe events (kernel/trace/trace_probe.c).
const RESERVED: &[&str] = &[
    "common_type",
    "common_flags",
    "common_preempt_count",
    "common_pid",
    "common_tgid",
    "__probe_ip",
    "__probe_ret_ip",
    "__probe_func",
];
/// `MAX_EVENT_NAME_LEN - 1`.
const MAX_NAME: usize = 63;
/// `MAX_TRACE_ARGS`.
const MAX_ARGS: usize = 128;
/// `MAX_ARRAY_LEN`.
const MAX_ARRAY: u64 = 64;
/// The registers `%REG` names on each architecture, as its
/// `regs_query_register_offset` knows them (arch/*/kernel/ptrace.c), by the
/// `uname -m` names of the architectures kprobetrace.rst lists. `None` for
/// another architecture: its registers are not checked.
fn registers(arch: &str) -> Option<(&'static str, &'static [&'static str])> {
    const X86_64: &[&str] = &[
        "ax", "bx", "cx", "dx", "si", "di", "bp", "sp", "r8", "r9", "r10", "r11", "r12", "r13",
        "r14", "r15", "ip", "flags", "cs", "ss", "orig_ax",
    ];
    const AARCH64: &[&str] = &[
        "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13",
        "x14", "x15", "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26",
        "x27", "x28", "x29", "x30", "sp", "pc", "pstate",
    ];
    const ARM: &[&str] = &[
        "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "fp", "ip", "sp", "lr",
        "pc", "cpsr", "ORIG_r0",
    ];
    const RISCV64: &[&str] = &[
        "epc", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "s0", "s1", "a0", "a1", "a2", "a3", "a4",
        "a5", "a6", "a7", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4",
        "t5", "t6", "status", "badaddr", "cause", "orig_a0",
    ];
    const S390X: &[&str] = &[
        "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "r13",
        "r14", "r15",
    ];
    const PPC64: &[&str] = &[
        "gpr0",
        "gpr1",
        "gpr2",
        "gpr3",
        "gpr4",
        "gpr5",
        "gpr6",
        "gpr7",
        "gpr8",
        "gpr9",
        "gpr10",
        "gpr11",
        "gpr12",
        "gpr13",
        "gpr14",
        "gpr15",
        "gpr16",
        "gpr17",
        "gpr18",
        "gpr19",
        "gpr20",
        "gpr21",
        "gpr22",
        "gpr23",
        "gpr24",
        "gpr25",
        "gpr26",
        "gpr27",
        "gpr28",
        "gpr29",
        "gpr30",
        "gpr31",
        "nip",
        "msr",
        "orig_gpr3",
        "ctr",
        "link",
        "xer",
        "ccr",
        "softe",
        "trap",
        "dar",
        "dsisr",
    ];
    Some(match arch {
        "x86_64" => ("x86_64", X86_64),
        "aarch64" | "arm64" => ("aarch64", AARCH64),
        a if a.starts_with("armv") || a == "arm" => ("arm", ARM),
        "riscv64" => ("riscv64", RISCV64),
        "s390x" => ("s390x", S390X),
        "ppc64le" | "ppc64" => ("ppc64", PPC64),
        _ => return None,
    })
}

/// `%REG` that holds a function's argument `n` (0 or 1) on `arch` (`uname -m`)
/// by its calling convention, for examples in messages; x86-64's (`%di`,
/// `%si`) for an architecture [`registers`] does not know.
fn arg_register(arch: &str, n: usize) -> &'static str {
    let pair = match registers(arch).map(|(name, _)| name) {
        Some("aarch64") => ["%x0", "%x1"],
        Some("arm") => ["%r0", "%r1"],
        Some("riscv64") => ["%a0", "%a1"],
        Some("s390x") => ["%r2", "%r3"],
        Some("ppc64") => ["%gpr3", "%gpr4"],
        _ => ["%di", "%si"],
    };
    pair[n.min(1)]
}

/// How a fetched value is laid out in the event, for the synthesized format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    size: u8,
    signed: bool,
    string: bool,
}

/// Whether `s` is a name the kernel accepts for events, groups and fetchargs
/// (`[A-Za-z_][A-Za-z0-9_]*`, trace_probe.c `is_good_name`).
pub(crate) fn is_good_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Checks every probe of `table` (`"kprobes"` or `"uprobes"`) and appends the
/// valid ones to `out`.
pub(super) fn resolve_probes(
    cx: &mut Ctx<'_>,
    table: &str,
    probes: &[Probe],
    out: &mut Vec<ResolvedProbe>,
) {
    let kernel = table == "kprobes";
    let mut files_said = std::collections::BTreeSet::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, p) in probes.iter().enumerate() {
        let entry = cx.span(&path!(table, i));
        let ev_span = cx.span(&path!(table, i, "event"));
        if !is_good_name(&p.event) || p.event.len() > MAX_NAME {
            cx.recipe(
                ev_span.clone(),
                format!(
                    "probe event name {:?} is not a C identifier of at most {MAX_NAME} characters",
                    p.event
                ),
                Some("use letters, digits and `_`, starting with a letter or `_`".into()),
            );
        } else if !names.insert(p.event.clone()) {
            cx.recipe(
                ev_span,
                format!("probe event `{}` is defined twice", p.event),
                Some("give each probe its own `event` name".into()),
            );
        }
        let kind_span = cx.span(&path!(table, i, "kind"));
        let Some(kind) = ProbeKind::parse(&p.kind, kernel) else {
            let kinds = if kernel {
                KERNEL_KINDS
            } else {
                "uprobe, uretprobe"
            };
            cx.recipe(
                kind_span,
                format!("unknown probe kind `{}` in `[[{table}]]`", p.kind),
                Some(format!("kinds here are: {kinds}")),
            );
            continue;
        };
        let before = cx.diags.len();
        // A kind this kernel lacks is one problem, not one per fetcharg.
        if !kind_available(cx, kind, kind_span, &mut files_said) {
            continue;
        }
        let target = match kind {
            ProbeKind::Uprobe | ProbeKind::Uretprobe => user_target(cx, table, i, &p.target),
            ProbeKind::Kprobe | ProbeKind::Kretprobe => {
                kernel_target(cx, table, i, kind, &p.target)
            }
            ProbeKind::Fprobe | ProbeKind::Fexit => function_target(cx, table, i, kind, &p.target),
            ProbeKind::Tprobe => tracepoint_target(cx, table, i, &p.target),
            ProbeKind::Eprobe => event_target(cx, table, i, &p.target),
        };
        let mut spec = target.clone().unwrap_or_default();
        let env = Env::new(cx.facts, kind, &p.target);
        let mut fields = Vec::new();
        if p.fetch.len() > MAX_ARGS {
            let span = cx.key_span(&path!(table, i, "fetch"));
            cx.recipe(
                span,
                format!(
                    "{} fetchargs, the kernel takes at most {MAX_ARGS}",
                    p.fetch.len()
                ),
                None,
            );
        }
        for (name, arg) in &p.fetch {
            let key = path!(table, i, "fetch", name.as_str());
            if !is_good_name(name) || RESERVED.contains(&name.as_str()) {
                let span = cx.key_span(&key);
                cx.recipe(
                    span,
                    format!("fetcharg name `{name}` is not allowed"),
                    Some("use a C identifier that is not a common field or `__probe_*`".into()),
                );
                continue;
            }
            match fetcharg(arg, kind, &env) {
                Ok(layout) => {
                    spec.push_str(&format!(" {name}={arg}"));
                    fields.push((name.clone(), layout));
                }
                Err(bad) => {
                    // The field still exists for the filter's check (one problem, not two).
                    let ty = arg.rsplit_once(':').map(|(_, t)| (t, 0));
                    fields.push((name.clone(), untyped_layout(ty, 0, kind)));
                    let span = cx.inner_span(&key, &bad.at);
                    let help = bad.help.unwrap_or_else(|| {
                        format!(
                            "write FETCHARG[:TYPE] as in Documentation/trace/{}, e.g. {}",
                            kind.doc(),
                            kind.example(&cx.facts.arch)
                        )
                    });
                    let msg = format!("fetcharg `{name}`: {}", bad.msg);
                    match bad.fault {
                        Fault::Kernel => cx.kernel(span, msg, Some(help)),
                        Fault::Recipe => cx.recipe(span, msg, Some(help)),
                    }
                }
            }
        }
        if let Some(f) = &p.filter {
            let fpath = path!(table, i, "filter");
            match filter::parse(f) {
                Err(e) => {
                    let span = cx.inner_span(&fpath, &e.span);
                    cx.recipe(span, format!("filter syntax: {}", e.message), None);
                }
                Ok(preds) => {
                    if let Some(format) = probe_format(kind, &p.event, &fields) {
                        let name = format!("{table}:{}", p.event);
                        let fbefore = cx.diags.len();
                        // A probe is no syscall exit: its filter needs no errno rewrite.
                        let _ = check_predicates(
                            cx,
                            &fpath,
                            &name,
                            &format,
                            &preds,
                            &mut Default::default(),
                        );
                        // The fields are the recipe's own fetchargs, not the kernel's.
                        for d in &mut cx.diags[fbefore..] {
                            d.fault = crate::diagnostic::Fault::Recipe;
                        }
                    }
                }
            }
        }
        if let Some(format) = probe_format(kind, &p.event, &fields) {
            cx.probe_formats
                .insert(format!("{table}:{}", p.event), format);
        }
        if cx.diags.len() == before && target.is_some() {
            out.push(ResolvedProbe {
                kind,
                event: p.event.clone(),
                spec,
                filter: p.filter.clone(),
                stacktrace: p.stacktrace,
                span: entry,
            });
        }
    }
}

/// Whether this kernel has what `kind` needs; says what it lacks: its events
/// file (at the table, once per file: `said`), or its dynamic-event feature
/// (at `span`, the entry's `kind`).
fn kind_available(
    cx: &mut Ctx<'_>,
    kind: ProbeKind,
    span: Span,
    said: &mut std::collections::BTreeSet<&'static str>,
) -> bool {
    let (has, file, config) = match kind.events_file() {
        "kprobe_events" => (
            cx.facts.has_kprobe_events,
            "kprobe_events",
            "CONFIG_KPROBE_EVENTS",
        ),
        "uprobe_events" => (
            cx.facts.has_uprobe_events,
            "uprobe_events",
            "CONFIG_UPROBE_EVENTS",
        ),
        _ => (
            cx.facts.has_dynamic_events,
            "dynamic_events",
            "CONFIG_DYNAMIC_EVENTS",
        ),
    };
    let table = if kind.is_kernel() {
        "kprobes"
    } else {
        "uprobes"
    };
    if !has {
        if !said.insert(file) {
            return false;
        }
        let span = cx.key_span(&path!(table));
        cx.kernel(
            span,
            format!("this kernel has no `{file}` ({config}): it cannot define `[[{table}]]`"),
            Some(format!(
                "run this recipe on a kernel built with {config} (e.g. a distribution kernel; see the kernel lab in README.md)"
            )),
        );
        return false;
    }
    if let Some(f) = kind.feature()
        && !cx.facts.has_probe_feature(f)
    {
        let (major, minor) = f.since(&cx.facts.arch);
        let why = match cx.facts.probe_syntax {
            Some(_) => format!(
                "its tracefs README does not list `{}` among the dynamic events, or its build configuration (/proc/config.gz, /boot/config-RELEASE) leaves the option out",
                f.readme_mark()
            ),
            None => "judged by its release (the fact file keeps no README)".to_string(),
        };
        cx.kernel(
            span,
            format!(
                "this kernel ({}) has no {}: {why}",
                cx.facts.release,
                f.what()
            ),
            Some(format!(
                "{} come with Linux {major}.{minor} on {}, in kernels built with them; use kind = \"kprobe\" / \"kretprobe\" here, or run on a kernel that has them",
                f.what(),
                cx.facts.arch
            )),
        );
        return false;
    }
    true
}

/// When `[[events]]` entry `i` names one of the recipe's own probes
/// (`kprobes:NAME` / `uprobes:NAME`), checks its filter against the probe's
/// format and folds its filter and stacktrace into that probe; returns whether it
/// did (the entry is then no tracepoint).
pub(super) fn fold_event_into_probe(
    cx: &mut Ctx<'_>,
    i: usize,
    ev: &crate::recipe::Event,
    probes: &mut [ResolvedProbe],
) -> bool {
    let Some(format) = cx.probe_formats.get(&ev.name).cloned() else {
        return false;
    };
    let (table, name) = ev.name.split_once(':').unwrap_or_default();
    let probe = probes
        .iter_mut()
        .find(|p| p.event == name && p.kind.is_kernel() == (table == "kprobes"));
    if let Some(f) = &ev.filter {
        let fpath = path!("events", i, "filter");
        match filter::parse(f) {
            Err(e) => {
                let span = cx.inner_span(&fpath, &e.span);
                cx.recipe(span, format!("filter syntax: {}", e.message), None);
                return true;
            }
            Ok(preds) => {
                let before = cx.diags.len();
                // A probe is no syscall exit: its filter needs no errno rewrite.
                let _ = check_predicates(
                    cx,
                    &fpath,
                    &ev.name,
                    &format,
                    &preds,
                    &mut Default::default(),
                );
                for d in &mut cx.diags[before..] {
                    d.fault = crate::diagnostic::Fault::Recipe;
                }
            }
        }
    }
    if let Some(p) = probe {
        if ev.filter.is_some() && p.filter.is_some() {
            let span = cx.span(&path!("events", i, "filter"));
            cx.recipe(
                span,
                format!("probe `{}` has a filter already", ev.name),
                Some("give the filter in one place: the probe's `filter` or this entry's".into()),
            );
        } else if ev.filter.is_some() {
            p.filter = ev.filter.clone();
        }
        p.stacktrace |= ev.stacktrace;
    }
    true
}

/// `SYMBOL[+OFFS]` or `MODULE:SYMBOL`, checked against the kernel's symbols.
fn kernel_target(
    cx: &mut Ctx<'_>,
    table: &str,
    i: usize,
    kind: ProbeKind,
    target: &str,
) -> Option<String> {
    let tpath = path!(table, i, "target");
    let span = cx.span(&tpath);
    let (module, rest) = match target.split_once(':') {
        Some((m, s)) => (Some(m), s),
        None => (None, target),
    };
    let (symbol, offs) = match rest.split_once('+') {
        Some((s, o)) => (s, Some(o)),
        None => (rest, None),
    };
    let sym_ok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'$'))
    };
    // A C symbol never starts with a digit: `0xffffffff81234567` (or a
    // decimal number) is an address, which kprobe_events would take but which
    // moves with every boot (KASLR) and is checked against nothing here.
    if symbol.starts_with(|c: char| c.is_ascii_digit()) {
        cx.recipe(
            span,
            format!(
                "kprobe target `{target}` is a raw address: raw addresses are not supported as targets (they change with every boot and cannot be checked)"
            ),
            Some("name the function: target = \"SYMBOL\" or \"SYMBOL+OFFS\" (see /proc/kallsyms for the symbol at that address)".into()),
        );
        return None;
    }
    if !sym_ok(symbol) || module.is_some_and(|m| !sym_ok(m)) {
        cx.recipe(
            span,
            format!("kprobe target `{target}` is not SYMBOL[+OFFS] or MODULE:SYMBOL"),
            Some("e.g. target = \"do_sys_openat2\" or \"ext4:ext4_file_open\"".into()),
        );
        return None;
    }
    if let Some(o) = offs {
        match parse_number(o) {
            None => {
                cx.recipe(
                    span,
                    format!("offset `{o}` in `{target}` is not a number"),
                    None,
                );
                return None;
            }
            Some(n) if n != 0 && kind.is_return() => {
                cx.recipe(
                    span,
                    "a kretprobe sits on a function's entry: it takes no `+OFFS`",
                    Some("leave out the offset, or use kind = \"kprobe\"".into()),
                );
                return None;
            }
            Some(_) => {}
        }
    }
    if let Some(symbols) = cx.facts.kernel_symbols() {
        let key = match module {
            Some(m) => format!("{m}:{symbol}"),
            None => symbol.to_string(),
        };
        if !symbols.contains(&key) {
            unknown(
                cx,
                span,
                format!("this kernel has no function `{key}` to probe"),
                &key,
                symbols.iter().map(String::as_str),
                "see /proc/kallsyms for the functions of this kernel",
            );
            return None;
        }
    }
    Some(target.to_string())
}

/// An fprobe's or fexit's function, checked against the functions ftrace can
/// trace (`available_filter_functions`, where read) or the kernel's symbols;
/// as the definition spells it (`FUNC` or `FUNC%return`).
fn function_target(
    cx: &mut Ctx<'_>,
    table: &str,
    i: usize,
    kind: ProbeKind,
    target: &str,
) -> Option<String> {
    let span = cx.span(&path!(table, i, "target"));
    if !is_symbol(target) {
        cx.recipe(
            span,
            format!("{} target `{target}` is not a function name", kind.name()),
            Some("name the function alone, e.g. target = \"vfs_read\" (fprobes take no offset and no module)".into()),
        );
        return None;
    }
    let known: Option<Vec<&str>> = match &cx.facts.filter_functions {
        Ok(f) if !f.names.is_empty() => Some(f.names.iter().map(String::as_str).collect()),
        _ => cx
            .facts
            .kernel_symbols()
            .map(|s| s.iter().map(String::as_str).collect()),
    };
    if let Some(known) = known
        && !known.contains(&target)
    {
        unknown(
            cx,
            span,
            format!(
                "this kernel has no function `{target}` that ftrace can trace (an fprobe sits on ftrace)"
            ),
            target,
            known.iter().copied(),
            "see available_filter_functions for the functions of this kernel",
        );
        return None;
    }
    Some(match kind {
        ProbeKind::Fexit => format!("{target}%return"),
        _ => target.to_string(),
    })
}

/// A tprobe's tracepoint: one the kernel's BTF has a stub for, or one an event
/// of the kernel is named after.
fn tracepoint_target(cx: &mut Ctx<'_>, table: &str, i: usize, target: &str) -> Option<String> {
    let span = cx.span(&path!(table, i, "target"));
    if !is_good_name(target) {
        cx.recipe(
            span,
            format!("tprobe target `{target}` is not a tracepoint name"),
            Some("name the tracepoint alone, e.g. target = \"sched_switch\"".into()),
        );
        return None;
    }
    let from_btf = cx.facts.btf.as_ref().map(|b| &b.tracepoints);
    let from_events = cx
        .facts
        .events
        .iter()
        .filter_map(|e| e.split_once(':').map(|(_, n)| n));
    let known: std::collections::BTreeSet<&str> = from_btf
        .into_iter()
        .flat_map(|t| t.keys().map(String::as_str))
        .chain(from_events)
        .collect();
    if !known.contains(target) {
        unknown(
            cx,
            span,
            format!("this kernel has no tracepoint `{target}`"),
            target,
            known.iter().copied(),
            "see available_events (and the kernel's `__probestub_*` functions) for its tracepoints",
        );
        return None;
    }
    Some(target.to_string())
}

/// An eprobe's event, `system:event`, which must exist; as the definition
/// spells it (`system.event`).
fn event_target(cx: &mut Ctx<'_>, table: &str, i: usize, target: &str) -> Option<String> {
    let span = cx.span(&path!(table, i, "target"));
    let Some((system, event)) = target
        .split_once(':')
        .filter(|(s, e)| is_good_name(s) && is_good_name(e))
    else {
        cx.recipe(
            span,
            format!("eprobe target `{target}` is not `system:event`"),
            Some("name the event it sits on, e.g. target = \"syscalls:sys_enter_execve\"".into()),
        );
        return None;
    };
    if !cx.facts.events.contains(target) {
        unknown(
            cx,
            span,
            format!("this kernel has no event `{target}` to put an eprobe on"),
            target,
            cx.facts.events.iter().map(String::as_str),
            "see available_events",
        );
        return None;
    }
    Some(format!("{system}.{event}"))
}

/// A C symbol: letters, digits, `_`, `.` (as in `foo.isra.0`), not starting with a digit.
fn is_symbol(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
}

/// `PATH:SYMBOL` (resolved from the ELF file) or `PATH:0xOFFSET`, as `PATH:0xOFFSET`
/// A kernel problem at `span`: `msg`, with the three names of `known`
/// nearest to `name` as a did-you-mean, or `otherwise` (where to look) when
/// none is near.
fn unknown<'k>(
    cx: &mut Ctx<'_>,
    span: Span,
    msg: String,
    name: &str,
    known: impl IntoIterator<Item = &'k str>,
    otherwise: &str,
) {
    let near = suggest::nearest_n(name, known, 3);
    let help = if near.is_empty() {
        otherwise.to_string()
    } else {
        format!("did you mean {}?", backticked(&near))
    };
    cx.kernel(span, msg, Some(help));
}

/// with PATH made absolute.
fn user_target(cx: &mut Ctx<'_>, table: &str, i: usize, target: &str) -> Option<String> {
    let span = cx.span(&path!(table, i, "target"));
    let Some((file, _)) = crate::host::split_target(target) else {
        cx.recipe(
            span,
            format!("uprobe target `{target}` is not PATH:SYMBOL or PATH:0xOFFSET"),
            Some("e.g. target = \"/bin/bash:readline\"".into()),
        );
        return None;
    };
    if file.chars().any(char::is_whitespace) {
        cx.recipe(
            span,
            "uprobe_events cannot name a path that contains white space",
            Some("use a path (or a symlink to the file) without spaces".into()),
        );
        return None;
    }
    match cx.host.uprobe_targets.get(target) {
        Some(Ok(resolved)) => Some(resolved.clone()),
        Some(Err((msg, help))) => {
            let (msg, help) = (msg.clone(), help.clone());
            cx.recipe(span, msg, help);
            None
        }
        None => {
            cx.recipe(
                span,
                format!("uprobe target `{target}` was not looked up on this host"),
                None,
            );
            None
        }
    }
}

fn backticked<S: AsRef<str>>(names: &[S]) -> String {
    names
        .iter()
        .map(|n| format!("`{}`", n.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Decimal or `0x` hex.
fn parse_number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// A fetcharg the kernel would refuse: what is wrong, where in its text,
/// whose fault (a BTF name the kernel's types lack is the kernel's), and what
/// to do (`None`: the kind's general advice).
#[derive(Debug)]
struct Bad {
    msg: String,
    at: Range<usize>,
    fault: Fault,
    help: Option<String>,
}

impl From<(String, Range<usize>)> for Bad {
    fn from((msg, at): (String, Range<usize>)) -> Bad {
        Bad {
            msg,
            at,
            fault: Fault::Recipe,
            help: None,
        }
    }
}

/// What checking one probe's fetchargs needs besides their text: the traced
/// architecture, the kernel's BTF features and the prototype BTF names start
/// at, an eprobe's event format.
struct Env<'a> {
    arch: &'a str,
    release: &'a str,
    btf_args: bool,
    btf_fields: bool,
    return_args: bool,
    /// The function (or tracepoint) BTF fetches start at, as named in messages.
    owner: String,
    /// Its prototype, when the BTF digest has it.
    proto: Option<&'a Proto>,
    /// The BTF digest, for field walks.
    btf: Option<&'a BtfFacts>,
    /// The BTF digest was asked for `owner` and the kernel's BTF lacks it.
    proto_missing: bool,
    /// A kprobe placed past the function's entry (`SYMBOL+OFFS`) or in a
    /// module: BTF names nothing there.
    no_btf_here: bool,
    /// An eprobe's event format (its fields are `$FIELD`).
    event: Option<EventFormat>,
}

impl<'a> Env<'a> {
    fn new(facts: &'a KernelFacts, kind: ProbeKind, target: &str) -> Env<'a> {
        let (module, rest) = match target.split_once(':') {
            Some((m, r)) if kind != ProbeKind::Eprobe => (Some(m), r),
            _ => (None, target),
        };
        let (symbol, offs) = rest.split_once('+').unwrap_or((rest, "0"));
        let past_entry = !matches!(offs, "0" | "0x0" | "");
        let btf = facts.btf.as_ref();
        let proto = btf.and_then(|b| match kind {
            ProbeKind::Tprobe => b.tracepoints.get(symbol),
            _ => b.functions.get(symbol),
        });
        Env {
            arch: &facts.arch,
            release: &facts.release,
            btf_args: facts.has_probe_feature(ProbeFeature::BtfArgs),
            btf_fields: facts.has_probe_feature(ProbeFeature::BtfFields),
            return_args: facts.has_probe_feature(ProbeFeature::ReturnArgs),
            owner: symbol.to_string(),
            proto,
            btf,
            proto_missing: proto.is_none()
                && btf.is_some_and(|b| b.complete || b.looked_up.contains(symbol)),
            no_btf_here: module.is_some() || past_entry,
            event: match kind {
                ProbeKind::Eprobe => facts.formats.get(target).and_then(|text| {
                    EventFormat::parse(target.split(':').next().unwrap_or(""), text).ok()
                }),
                _ => None,
            },
        }
    }
}

/// Checks `FETCHARG[:TYPE]`; returns the field layout it produces, or what
/// is wrong and the byte range (in `text`) it is about.
fn fetcharg(text: &str, kind: ProbeKind, env: &Env<'_>) -> Result<Layout, Bad> {
    // The type follows the last ':' outside parentheses.
    let mut depth = 0i32;
    let mut colon = None;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ':' if depth == 0 => colon = Some(i),
            _ => {}
        }
    }
    let (arg, ty) = match colon {
        Some(c) => (&text[..c], Some((&text[c + 1..], c + 1))),
        None => (text, None),
    };
    if let Some(result) = btf_fetch(arg, ty, text.len(), kind, env) {
        return result;
    }
    let source = fetch_source(arg, 0, kind, env)?;
    let Some((ty, at)) = ty else {
        if source == Source::Comm && kind == ProbeKind::Eprobe {
            return Err(Bad::from((
                "in an eprobe `$comm` without a type records an address: write `$comm:string`"
                    .to_string(),
                0..text.len(),
            )));
        }
        return Ok(match source {
            Source::Comm => STRING,
            _ => WORD,
        });
    };
    let whole = at..text.len();
    let bad = |msg: String| Err(Bad::from((msg, whole.clone())));
    let (layout, base, array) = parse_type(ty, whole.clone(), kind)?;
    let memory = matches!(source, Source::Memory | Source::Imm | Source::Field);
    if layout.string {
        if !(memory || source == Source::Comm) {
            return bad(format!(
                "type `{base}` needs a memory dereference such as +0(%si) or @ADDR, or $comm"
            ));
        }
    } else if source == Source::Comm {
        return bad("`$comm` is a string: its type can only be `string`".into());
    }
    if array && layout.string && base != "string" {
        return bad(format!("`{base}` cannot be an array"));
    }
    Ok(layout)
}

/// A string field (`__data_loc char[]`).
const STRING: Layout = Layout {
    size: 4,
    signed: false,
    string: true,
};
/// An unsigned machine word (the default fetch type, `x64`/`u64`).
const WORD: Layout = Layout {
    size: 8,
    signed: false,
    string: false,
};

/// Parses TYPE (`u32`, `string`, `b4@0/32`, `u8[16]`, ...) at `whole` of the
/// fetch text: its layout, its base type, whether it is an array.
fn parse_type(
    ty: &str,
    whole: Range<usize>,
    kind: ProbeKind,
) -> Result<(Layout, &str, bool), (String, Range<usize>)> {
    let bad = |msg: String| Err((msg, whole.clone()));
    let (base, array) = match ty.split_once('[') {
        Some((b, rest)) => {
            let n = rest.strip_suffix(']').and_then(|n| n.parse::<u64>().ok());
            match n {
                Some(n) if (1..=MAX_ARRAY).contains(&n) => (b, true),
                _ => {
                    return bad(format!(
                        "array type `{ty}` needs a length 1..{MAX_ARRAY}: TYPE[N]"
                    ));
                }
            }
        }
        None => (ty, false),
    };
    let layout = match base {
        "string" | "ustring" | "symstr" => {
            if base != "string" && !kind.is_kernel() {
                return bad(format!("type `{base}` exists for kprobes only"));
            }
            STRING
        }
        "symbol" if kind.is_kernel() => WORD,
        "char" if kind.is_kernel() => Layout {
            size: 1,
            signed: false,
            string: false,
        },
        b if b.starts_with('b') => bitfield(b).ok_or_else(|| {
            (
                format!("bitfield type `{b}` is not b<width>@<offset>/<container size 8|16|32|64>"),
                whole.clone(),
            )
        })?,
        b => {
            let (sign, bits) = b.split_at(b.len().min(1));
            match (sign, bits) {
                ("u" | "s" | "x", "8" | "16" | "32" | "64") => Layout {
                    size: bits.parse::<u8>().unwrap_or(64) / 8,
                    signed: sign == "s",
                    string: false,
                },
                _ => {
                    let types = if kind.is_kernel() {
                        "u8..u64, s8..s64, x8..x64, char, string, ustring, symbol, symstr, b<w>@<o>/<s>"
                    } else {
                        "u8..u64, s8..s64, x8..x64, string, b<w>@<o>/<s>"
                    };
                    return bad(format!(
                        "unknown type `{b}`; types are {types}, and TYPE[N] arrays"
                    ));
                }
            }
        }
    };
    Ok((layout, base, array))
}

/// A BTF fetch (`count`, `$arg2`, `$retval`, `file->f_path.dentry`, with an
/// optional TYPE) on a kind that has BTF names, checked against the kernel's
/// features and, where the digest has them, its types (Documentation/trace/
/// fprobetrace.rst, "BTF arguments"). `None`: not a BTF fetch, or a plain
/// `$argN`/`$retval` without a prototype to type it (the caller checks it).
fn btf_fetch(
    arg: &str,
    ty: Option<(&str, usize)>,
    len: usize,
    kind: ProbeKind,
    env: &Env<'_>,
) -> Option<Result<Layout, Bad>> {
    if !kind.has_btf() {
        return None;
    }
    let path = FieldPath::parse(arg).ok()?;
    let named = !path.root.starts_with('$');
    if path.root == "$retval" && !kind.is_return() {
        return None;
    }
    if !named && path.fields.is_empty() && env.proto.is_none() {
        return None;
    }
    let root_at = 0..path.root.len();
    let kernel = |msg: String, at: Range<usize>, help: String| {
        Some(Err(Bad {
            msg,
            at,
            fault: Fault::Kernel,
            help: Some(help),
        }))
    };
    let recipe = |msg: String, at: Range<usize>, help: String| {
        Some(Err(Bad {
            msg,
            at,
            fault: Fault::Recipe,
            help: Some(help),
        }))
    };
    let bare_help = format!(
        "use $argN, registers or memory fetchargs here, e.g. \"+0({}):string\"",
        arg_register(env.arch, 1)
    );
    if named || !path.fields.is_empty() {
        if !env.btf_args {
            return kernel(
                format!(
                    "this kernel ({}) has no {}: `{arg}` needs Linux 6.5",
                    env.release,
                    ProbeFeature::BtfArgs.what()
                ),
                0..arg.len(),
                bare_help,
            );
        }
        if !path.fields.is_empty() && !env.btf_fields {
            return kernel(
                format!(
                    "this kernel ({}) has no {}: `{arg}` needs Linux 6.6",
                    env.release,
                    ProbeFeature::BtfFields.what()
                ),
                0..arg.len(),
                "fetch the member by its offset instead, e.g. \"+8($arg1):u64\"".into(),
            );
        }
        if env.no_btf_here {
            return recipe(
                format!(
                    "`{arg}` is a BTF name, and BTF names a function's arguments only at its entry (a kprobe on SYMBOL without offset or module)"
                ),
                0..arg.len(),
                bare_help,
            );
        }
        if named && kind.is_return() && !env.return_args {
            return kernel(
                format!(
                    "this kernel ({}) has no {}: `{}` cannot be read at a function's exit",
                    env.release,
                    ProbeFeature::ReturnArgs.what(),
                    path.root
                ),
                root_at,
                "read it at the entry (kind = \"fprobe\") or use $retval here".into(),
            );
        }
    }
    let Some(proto) = env.proto else {
        if env.proto_missing {
            return kernel(
                format!(
                    "the kernel's BTF has no prototype of `{}`: `{arg}` cannot be resolved",
                    env.owner
                ),
                0..arg.len(),
                bare_help,
            );
        }
        // Not in this digest: nothing to check against.
        return Some(Ok(untyped_layout(ty, len, kind)));
    };
    let owner = &env.owner;
    let root = match path.root {
        "$retval" => {
            if proto.ret.shape == Shape::Void {
                return kernel(
                    format!("`{owner}` returns void: there is no `$retval`"),
                    root_at,
                    "fetch its arguments instead".into(),
                );
            }
            proto.ret.clone()
        }
        r if r.starts_with("$arg") => {
            let n: usize = r[4..].parse().unwrap_or(0);
            match proto.params.get(n.wrapping_sub(1)) {
                Some(v) => v.ty.clone(),
                None => {
                    return kernel(
                        format!(
                            "`{owner}` has {} argument{}: there is no `{r}`",
                            proto.params.len(),
                            if proto.params.len() == 1 { "" } else { "s" }
                        ),
                        root_at,
                        format!(
                            "its arguments are: {}",
                            crate::btf::list_vars(&proto.params, 20)
                        ),
                    );
                }
            }
        }
        name => match proto.params.iter().find(|v| v.name == name) {
            Some(v) => v.ty.clone(),
            None => {
                let near = suggest::nearest(name, proto.params.iter().map(|v| v.name.as_str()));
                return kernel(
                    format!(
                        "`{owner}` has no argument `{name}`{}",
                        near.map(|n| format!(" (did you mean `{n}`?)"))
                            .unwrap_or_default()
                    ),
                    root_at,
                    format!(
                        "its arguments are: {}",
                        crate::btf::list_vars(&proto.params, 20)
                    ),
                );
            }
        },
    };
    let end = match env.btf.and_then(|b| b.walk(&root, &path)) {
        None => return Some(Ok(untyped_layout(ty, len, kind))),
        Some(Err((msg, at))) => {
            return kernel(
                msg,
                at,
                "fields are the kernel's struct members (BTF); see the listing".into(),
            );
        }
        Some(Ok(t)) => t,
    };
    Some(typed_layout(arg, &end, ty, len, kind))
}

/// A BTF fetch's layout when its type is unknown here: the TYPE's, else a word.
fn untyped_layout(ty: Option<(&str, usize)>, len: usize, kind: ProbeKind) -> Layout {
    ty.and_then(|(t, at)| parse_type(t, at..len, kind).ok())
        .map_or(WORD, |(l, _, _)| l)
}

/// A BTF fetch that ends at type `end`: with `:string`/`:ustring` it must be
/// a `char *` or `char[]`; without a TYPE the kernel takes the layout from
/// BTF (integers by size and sign, pointers as words) and refuses a struct.
fn typed_layout(
    arg: &str,
    end: &Ty,
    ty: Option<(&str, usize)>,
    len: usize,
    kind: ProbeKind,
) -> Result<Layout, Bad> {
    let whole = 0..arg.len();
    match ty {
        Some((t, at)) => {
            let (layout, base, _) = parse_type(t, at..len, kind)?;
            if layout.string
                && base != "symstr"
                && !matches!(end.shape, Shape::PtrChar | Shape::CharArray)
            {
                return Err(Bad {
                    msg: format!(
                        "`{arg}` is a `{}`, not a `char *` or `char[]`: `:{base}` needs one",
                        end.c
                    ),
                    at: at..len,
                    fault: Fault::Kernel,
                    help: Some(
                        "fetch a char pointer or array member, or drop the string type".into(),
                    ),
                });
            }
            Ok(layout)
        }
        None => match &end.shape {
            Shape::Int { size, signed } => Ok(Layout {
                size: *size,
                signed: *signed,
                string: false,
            }),
            Shape::Agg(key) => Err(Bad {
                msg: format!(
                    "`{arg}` is a `{}` (a struct by value): fetch one of its members",
                    end.c
                ),
                at: whole,
                fault: Fault::Recipe,
                help: Some(format!("write `{arg}.MEMBER` (see the members of `{key}`)")),
            }),
            Shape::CharArray => Err(Bad {
                msg: format!("`{arg}` is a `{}`: fetch it as a string", end.c),
                at: whole,
                fault: Fault::Recipe,
                help: Some(format!("write \"{arg}:string\"")),
            }),
            _ => Ok(WORD),
        },
    }
}

fn bitfield(b: &str) -> Option<Layout> {
    let (width, rest) = b.strip_prefix('b')?.split_once('@')?;
    let (offset, container) = rest.split_once('/')?;
    let (w, o, c): (u32, u32, u32) = (
        width.parse().ok()?,
        offset.parse().ok()?,
        container.parse().ok()?,
    );
    (matches!(c, 8 | 16 | 32 | 64) && w >= 1 && w + o <= c).then_some(Layout {
        size: (c / 8) as u8,
        signed: false,
        string: false,
    })
}

/// What a fetcharg reads (its type rules depend on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Register,
    Memory,
    Stack,
    Retval,
    Comm,
    Arg,
    Imm,
    /// An eprobe's `$FIELD`.
    Field,
}

/// Checks the FETCHARG part (no type); `at` is its offset in the whole text;
/// registers are those of `arch` (the traced kernel's `uname -m`).
fn fetch_source(
    arg: &str,
    at: usize,
    kind: ProbeKind,
    env: &Env<'_>,
) -> Result<Source, (String, Range<usize>)> {
    let here = at..at + arg.len().max(1);
    let err = |m: String| Err((m, here.clone()));
    let doc_kinds = match kind {
        ProbeKind::Uprobe | ProbeKind::Uretprobe => "uprobes",
        ProbeKind::Eprobe => "eprobes",
        _ => "kprobes",
    };
    if kind == ProbeKind::Eprobe {
        if arg.starts_with('%') || arg.starts_with("$stack") {
            return err(format!(
                "`{arg}`: an eprobe reads the event's fields (`$FIELD`), not registers or the stack"
            ));
        }
        if let Some(var) = arg.strip_prefix('$') {
            let fields = env.event.as_ref().map(|f| {
                f.fields
                    .iter()
                    .filter(|f| !f.name.starts_with("common_"))
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
            });
            return match fields {
                Some(names) if names.contains(&var) => Ok(Source::Field),
                _ if var == "comm" => Ok(Source::Comm),
                None => Ok(Source::Field),
                Some(names) => err(format!(
                    "the event has no field `{var}`; its fields are: {}, and `$comm`",
                    backticked(&names)
                )),
            };
        }
    }
    if let Some(reg) = arg.strip_prefix('%') {
        if let Some((name, regs)) = registers(env.arch)
            && !regs.contains(&reg)
        {
            let near = suggest::nearest(reg, regs.iter().copied());
            return err(format!(
                "`%{reg}` is not a register on {name}{}",
                near.map(|n| format!(" (did you mean `%{n}`?)"))
                    .unwrap_or_default()
            ));
        }
        return Ok(Source::Register);
    }
    if let Some(addr) = arg.strip_prefix('@') {
        let ok = if kind.is_kernel() {
            parse_number(addr).is_some() || {
                let sym = addr.split(['+', '-']).next().unwrap_or("");
                let off = &addr[sym.len()..];
                is_good_name(sym) && (off.is_empty() || parse_number(&off[1..]).is_some())
            }
        } else {
            parse_number(addr.strip_prefix('+').unwrap_or(addr)).is_some()
        };
        if !ok {
            return err(if kind.is_kernel() {
                format!("`@{addr}` is not @ADDR or @SYM[+|-OFFS]")
            } else {
                format!("`@{addr}` is not @ADDR or @+OFFSET")
            });
        }
        return Ok(Source::Memory);
    }
    if let Some(imm) = arg.strip_prefix('\\') {
        let ok = parse_number(imm.strip_prefix('-').unwrap_or(imm)).is_some()
            || (imm.len() >= 2 && imm.starts_with('"') && imm.ends_with('"'));
        return if ok {
            Ok(Source::Imm)
        } else {
            err(format!(
                "`\\{imm}` is not an immediate (\\NUMBER or \\\"TEXT\\\")"
            ))
        };
    }
    if let Some(var) = arg.strip_prefix('$') {
        return match var {
            "stack" => Ok(Source::Stack),
            "comm" => Ok(Source::Comm),
            "retval" if kind.is_return() => Ok(Source::Retval),
            "retval" => err(
                "`$retval` exists only on return probes (kind = \"kretprobe\", \"fexit\" or \"uretprobe\")"
                    .into(),
            ),
            v if v
                .strip_prefix("stack")
                .is_some_and(|n| n.parse::<u32>().is_ok()) =>
            {
                Ok(Source::Stack)
            }
            v if v
                .strip_prefix("arg")
                .is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n >= 1)) =>
            {
                if kind.is_kernel() {
                    Ok(Source::Arg)
                } else {
                    err("`$argN` exists for kprobes only".into())
                }
            }
            v => err(format!(
                "`${v}` is not a fetch variable of {doc_kinds}: $stack, $stackN, $retval, $comm{}",
                if kind.is_kernel() {
                    ", $argN (N >= 1)"
                } else {
                    ""
                }
            )),
        };
    }
    // +|-[u]OFFS(FETCHARG)
    if arg.starts_with(['+', '-']) {
        let Some(open) = arg.find('(') else {
            return err(format!("`{arg}` is not +|-[u]OFFS(FETCHARG)"));
        };
        if !arg.ends_with(')') {
            return err(format!("`{arg}` lacks its closing `)`"));
        }
        let offs = &arg[1..open];
        let offs = offs.strip_prefix('u').unwrap_or(offs);
        if parse_number(offs).is_none() {
            return err(format!("`{offs}` in `{arg}` is not an offset"));
        }
        let inner = &arg[open + 1..arg.len() - 1];
        fetch_source(inner, at + open + 1, kind, env)?;
        return Ok(Source::Memory);
    }
    err(format!(
        "`{arg}` is not a fetcharg: %REG, @ADDR, $stack, $stackN, $retval, $comm, \\IMM or +|-OFFS(FETCHARG){}",
        if kind.is_kernel() {
            ", @SYM, $argN"
        } else {
            ", @+OFFSET"
        }
    ))
}

/// The format the kernel will create for this probe (common fields, the
/// `__probe_*` fields of its kind, one field per fetcharg), for filter checks.
fn probe_format(kind: ProbeKind, event: &str, fields: &[(String, Layout)]) -> Option<EventFormat> {
    let mut text = format!(
        "name: {event}\nID: 0\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
    );
    let mut offset = 8;
    let fixed: &[&str] = match kind {
        ProbeKind::Eprobe => &[],
        _ if kind.is_return() => &["__probe_func", "__probe_ret_ip"],
        _ => &["__probe_ip"],
    };
    for f in fixed {
        text.push_str(&format!(
            "\tfield:unsigned long {f};\toffset:{offset};\tsize:8;\tsigned:0;\n"
        ));
        offset += 8;
    }
    for (name, l) in fields {
        let ty = if l.string {
            "__data_loc char[]".to_string()
        } else {
            format!("{}{}", if l.signed { "s" } else { "u" }, l.size * 8)
        };
        text.push_str(&format!(
            "\tfield:{ty} {name};\toffset:{offset};\tsize:{};\tsigned:{};\n",
            l.size,
            u8::from(l.signed)
        ));
        offset += usize::from(l.size);
    }
    text.push_str("\nprint fmt: \"\"\n");
    EventFormat::parse("probe", &text).ok()
}

#[cfg(test)]
impl ResolvedProbe {
    /// The unit tests' probe: a kretprobe `open_ret` on `do_sys_openat2`'s
    /// return value, filtered to failures.
    pub(crate) fn open_ret() -> ResolvedProbe {
        ResolvedProbe {
            kind: ProbeKind::Kretprobe,
            event: "open_ret".into(),
            spec: "do_sys_openat2 ret=$retval:s32".into(),
            filter: Some("ret < 0".into()),
            stacktrace: false,
            span: None,
        }
    }
}

#[cfg(test)]
impl Env<'static> {
    /// An `arch` kernel with every probe feature and no BTF digest.
    fn bare(arch: &'static str) -> Env<'static> {
        Env {
            arch,
            release: "7.2.0",
            btf_args: true,
            btf_fields: true,
            return_args: true,
            owner: String::new(),
            proto: None,
            btf: None,
            proto_missing: false,
            no_btf_here: false,
            event: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(arg: &str, kind: ProbeKind) -> bool {
        fetcharg(arg, kind, &Env::bare("x86_64")).is_ok()
    }

    #[test]
    fn kprobe_fetchargs_follow_kprobetrace_rst() {
        use ProbeKind::*;
        for a in [
            "%di",
            "%ax:u32",
            "@jiffies",
            "@jiffies+8:u64",
            "@0x1000",
            "$stack",
            "$stack3",
            "$comm",
            "$comm:string",
            "$arg1",
            "+0(%si):string",
            "+8(+0(%di)):x64",
            "-4(%sp):s32",
            "+u0(%si):ustring",
            "%di:symbol",
            "%ax:b4@3/32",
            "+0(%di):u8[16]",
            "\\42",
            "%di:char",
        ] {
            assert!(ok(a, Kprobe), "{a}");
        }
        assert!(ok("$retval:s32", Kretprobe));
        for a in [
            "$retval",
            "%zz",
            "$arg0",
            "+0(%di",
            "%di:u7",
            "%di:string",
            "$comm:u32",
            "%ax:b40@0/32",
            "%di:u8[0]",
            "1foo",
        ] {
            assert!(!ok(a, Kprobe), "{a}");
        }
        // A bare name is a BTF argument: a kernel without BTF names refuses it
        // as its own lack (Linux 6.5).
        assert!(ok("foo", Kprobe));
        let old = Env {
            btf_args: false,
            ..Env::bare("x86_64")
        };
        let bad = fetcharg("foo", Kprobe, &old).unwrap_err();
        assert!(
            bad.fault == Fault::Kernel && bad.msg.contains("needs Linux 6.5"),
            "{bad:?}"
        );
    }

    /// vfs_read's prototype and the structs to a file's name, as a digest keeps them.
    fn vfs_read_btf() -> BtfFacts {
        serde_json::from_value(serde_json::json!({
            "functions": {
                "vfs_read": "|i8s|ssize_t;file|p>struct file|struct file *;buf|pc|char *;count|i8u|size_t;pos|p|loff_t *"
            },
            "tracepoints": {},
            "structs": {
                "struct file": "f_path|s>struct path|struct path",
                "struct path": "dentry|p>struct dentry|struct dentry *",
                "struct dentry": "d_name|s>struct qstr|struct qstr;d_iname|ac|unsigned char[40]",
                "struct qstr": "len|i4u|u32;name|pc|const unsigned char *"
            },
            "complete": false,
            "looked_up": ["vfs_read", "nosuch"]
        }))
        .unwrap()
    }

    #[test]
    fn btf_fetches_walk_the_prototype_and_its_structs() {
        use ProbeKind::*;
        let btf = vfs_read_btf();
        let env = Env {
            owner: "vfs_read".into(),
            proto: Some(&btf.functions["vfs_read"]),
            btf: Some(&btf),
            ..Env::bare("x86_64")
        };
        // Layouts come from BTF: size_t is a u64, ssize_t an s64.
        assert_eq!(fetcharg("count", Fprobe, &env).unwrap(), WORD);
        let ret = fetcharg("$retval", Fexit, &env).unwrap();
        assert!(ret.signed && ret.size == 8);
        assert_eq!(
            fetcharg("file->f_path.dentry->d_name.len", Fprobe, &env)
                .unwrap()
                .size,
            4
        );
        assert_eq!(
            fetcharg("file->f_path.dentry->d_name.name:string", Fprobe, &env).unwrap(),
            STRING
        );
        assert_eq!(
            fetcharg("$arg1->f_path.dentry->d_iname:string", Kprobe, &env).unwrap(),
            STRING
        );
        // A member the struct lacks: the kernel's, at the member, listing the struct.
        let text = "file->f_path.dentry->d_nam.name:string";
        let bad = fetcharg(text, Fprobe, &env).unwrap_err();
        assert_eq!(bad.fault, Fault::Kernel);
        assert_eq!(&text[bad.at.clone()], "d_nam");
        assert!(
            bad.msg
                .contains("it has: `d_name` (struct qstr), `d_iname` (unsigned char[40])"),
            "{}",
            bad.msg
        );
        // Strings only from `char *` / `char[]`; structs by value need a member.
        let bad = fetcharg("count:string", Fprobe, &env).unwrap_err();
        assert!(
            bad.msg.contains("not a `char *` or `char[]`"),
            "{}",
            bad.msg
        );
        let bad = fetcharg("file->f_path", Fprobe, &env).unwrap_err();
        assert!(bad.msg.contains("fetch one of its members"), "{}", bad.msg);
        // Argument names and numbers the prototype lacks.
        let bad = fetcharg("cout", Fprobe, &env).unwrap_err();
        assert!(bad.msg.contains("(did you mean `count`?)"), "{}", bad.msg);
        assert_eq!(bad.at, 0..4);
        assert!(
            fetcharg("$arg5", Fprobe, &env)
                .unwrap_err()
                .msg
                .contains("4 arguments")
        );
        // BTF names only at a function's entry for kprobes, and where BTF knows it.
        let past = Env {
            no_btf_here: true,
            ..env
        };
        assert_eq!(
            fetcharg("count", Kprobe, &past).unwrap_err().fault,
            Fault::Recipe
        );
        let missing = Env {
            owner: "nosuch".into(),
            proto_missing: true,
            ..Env::bare("x86_64")
        };
        let bad = fetcharg("count", Fprobe, &missing).unwrap_err();
        assert!(
            bad.msg.contains("BTF has no prototype of `nosuch`"),
            "{}",
            bad.msg
        );
        // Fields need 6.6 even where names work (6.5).
        let six_five = Env {
            btf_fields: false,
            ..Env::bare("x86_64")
        };
        assert!(fetcharg("count", Fprobe, &six_five).is_ok());
        let bad = fetcharg("file->f_path.dentry", Fprobe, &six_five).unwrap_err();
        assert!(bad.msg.contains("needs Linux 6.6"), "{}", bad.msg);
    }

    #[test]
    fn eprobes_read_the_events_fields() {
        use ProbeKind::*;
        let format = EventFormat::parse(
            "syscalls",
            "name: sys_enter_execve\nID: 1\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:const char * filename;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:const char *const * argv;\toffset:24;\tsize:8;\tsigned:0;\n\nprint fmt: \"\"\n",
        )
        .unwrap();
        let env = Env {
            event: Some(format),
            ..Env::bare("x86_64")
        };
        assert_eq!(
            fetcharg("+0(+u8($argv)):ustring", Eprobe, &env).unwrap(),
            STRING
        );
        assert_eq!(fetcharg("$argv", Eprobe, &env).unwrap(), WORD);
        assert_eq!(fetcharg("$comm:string", Eprobe, &env).unwrap(), STRING);
        let bad = fetcharg("$argx", Eprobe, &env).unwrap_err();
        assert!(
            bad.msg
                .contains("its fields are: `__syscall_nr`, `filename`, `argv`"),
            "{}",
            bad.msg
        );
        assert!(
            fetcharg("$comm", Eprobe, &env)
                .unwrap_err()
                .msg
                .contains("`$comm:string`")
        );
        assert!(
            fetcharg("%di", Eprobe, &env)
                .unwrap_err()
                .msg
                .contains("not registers")
        );
        // Names are BTF's, which eprobes do not have.
        assert!(fetcharg("argv", Eprobe, &env).is_err());
    }

    #[test]
    fn dynamic_event_kinds_define_their_lines() {
        let p = |kind, spec: &str| ResolvedProbe {
            kind,
            event: "e".into(),
            spec: spec.into(),
            filter: None,
            stacktrace: false,
            span: None,
        };
        for (kind, spec, line) in [
            (
                ProbeKind::Fprobe,
                "vfs_read count=count",
                "f:g/e vfs_read count=count",
            ),
            (
                ProbeKind::Fexit,
                "vfs_read%return r=$retval",
                "f:g/e vfs_read%return r=$retval",
            ),
            (
                ProbeKind::Tprobe,
                "sched_switch p=prev->pid",
                "t:g/e sched_switch p=prev->pid",
            ),
            (
                ProbeKind::Eprobe,
                "syscalls.sys_enter_execve a=$argv",
                "e:g/e syscalls.sys_enter_execve a=$argv",
            ),
        ] {
            let p = p(kind, spec);
            assert_eq!(p.definition("g"), line);
            assert_eq!(p.removal("g"), "-:g/e");
            assert_eq!(kind.events_file(), "dynamic_events");
        }
    }

    #[test]
    fn registers_are_the_traced_architectures() {
        use ProbeKind::*;
        for (arch, good, bad) in [
            ("aarch64", "%x0", "%di"),
            ("armv7l", "%r0", "%x0"),
            ("riscv64", "%a0", "%di"),
            ("s390x", "%r2", "%x0"),
            ("ppc64le", "%gpr3", "%r3"),
            ("x86_64", "%di", "%x0"),
        ] {
            assert!(
                fetcharg(good, Kprobe, &Env::bare(arch)).is_ok(),
                "{arch} {good}"
            );
            // Examples in messages name the architecture's own registers:
            // its first argument's, and the second's, each one it accepts.
            assert_eq!(arg_register(arch, 0), good, "{arch}");
            let example = Kprobe.example(arch);
            let second = arg_register(arch, 1);
            assert!(
                example.contains(&format!("+0({second}):string"))
                    && fetcharg(second, Kprobe, &Env::bare(arch)).is_ok(),
                "{arch}: {example}"
            );
            let msg = fetcharg(bad, Kprobe, &Env::bare(arch)).unwrap_err().msg;
            assert!(msg.contains("is not a register on"), "{arch}: {msg}");
        }
        // An architecture without a table: registers are not checked.
        assert!(fetcharg("%anything", Kprobe, &Env::bare("loongarch64")).is_ok());
    }

    #[test]
    fn uprobe_fetchargs_follow_uprobetracer_rst() {
        use ProbeKind::*;
        assert!(ok("+0($retval):string", Uretprobe));
        assert!(ok("@+0x10:u32", Uprobe));
        assert!(ok("%di:x64", Uprobe));
        assert!(!ok("$arg1", Uprobe));
        assert!(!ok("%di:symbol", Uprobe));
        assert!(!ok("+0(%di):ustring", Uprobe));
        let bad = fetcharg("+0(%qq):string", Uprobe, &Env::bare("x86_64")).unwrap_err();
        assert!(bad.msg.contains("%qq"), "{}", bad.msg);
        assert_eq!(bad.at, 3..6);
    }

    #[test]
    fn definitions_carry_the_group() {
        let p = ResolvedProbe {
            kind: ProbeKind::Kretprobe,
            event: "open_ret".into(),
            spec: "do_sys_openat2 ret=$retval:s32".into(),
            filter: None,
            stacktrace: false,
            span: None,
        };
        assert_eq!(
            p.definition("trace_recipe_7"),
            "r:trace_recipe_7/open_ret do_sys_openat2 ret=$retval:s32"
        );
        assert_eq!(p.removal("trace_recipe_7"), "-:trace_recipe_7/open_ret");
    }
}
