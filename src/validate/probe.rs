//! `[[kprobes]]` and `[[uprobes]]`: the probe definition line, its fetchargs and
//! types, the target (kernel symbol, or ELF symbol resolved to a file offset),
//! and the filter against the event format the kernel will create.
//!
//! Sources of truth: Documentation/trace/kprobetrace.rst and uprobetracer.rst
//! ("Synopsis of kprobe_events" / "Synopsis of uprobe_tracer", "Types").
//!
//! Why this file is long: the fetcharg grammar, the registers of each
//! architecture kprobetrace.rst lists (judged by the facts' architecture, not
//! this machine's), the uprobe target's symbol and offset, and their unit tests
//! are one concern, the probe definition line.

use std::ops::Range;

use tracedat::EventFormat;

use super::{Ctx, Span, check_predicates, filter};
use crate::recipe::Probe;
use crate::suggest;

/// Which of the four probe kinds.
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
}

impl ProbeKind {
    fn parse(kind: &str, kernel: bool) -> Option<ProbeKind> {
        match (kind, kernel) {
            ("kprobe", true) => Some(ProbeKind::Kprobe),
            ("kretprobe", true) => Some(ProbeKind::Kretprobe),
            ("uprobe", false) => Some(ProbeKind::Uprobe),
            ("uretprobe", false) => Some(ProbeKind::Uretprobe),
            _ => None,
        }
    }
    /// A return probe (`$retval` allowed, `__probe_func`/`__probe_ret_ip` fields).
    pub(crate) fn is_return(self) -> bool {
        matches!(self, ProbeKind::Kretprobe | ProbeKind::Uretprobe)
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
    /// A kernel probe (kprobe_events) rather than a user one (uprobe_events).
    pub(crate) fn is_kernel(self) -> bool {
        matches!(self, ProbeKind::Kprobe | ProbeKind::Kretprobe)
    }
    /// The global tracefs file that holds its definition.
    pub(crate) fn events_file(self) -> &'static str {
        if self.is_kernel() {
            "kprobe_events"
        } else {
            "uprobe_events"
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
    /// `p:GROUP/EVENT TARGET ARGS` (or `r:` for return probes).
    pub(crate) fn definition(&self, group: &str) -> String {
        let p = if self.kind.is_return() { 'r' } else { 'p' };
        format!("{p}:{group}/{} {}", self.event, self.spec)
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
    if !probes.is_empty() {
        let (has, file, config) = if kernel {
            (
                cx.facts.has_kprobe_events,
                "kprobe_events",
                "CONFIG_KPROBE_EVENTS",
            )
        } else {
            (
                cx.facts.has_uprobe_events,
                "uprobe_events",
                "CONFIG_UPROBE_EVENTS",
            )
        };
        if !has {
            let span = cx.key_span(&path!(table));
            cx.kernel(
                span,
                format!("this kernel has no `{file}` ({config}): it cannot define `[[{table}]]`"),
                Some(format!(
                    "run this recipe on a kernel built with {config} (e.g. a distribution kernel; see the kernel lab in README.md)"
                )),
            );
        }
    }
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
                "kprobe, kretprobe"
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
        let target = if kernel {
            kernel_target(cx, table, i, kind, &p.target)
        } else {
            user_target(cx, table, i, &p.target)
        };
        let mut spec = target.unwrap_or_default();
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
            match fetcharg(arg, kind, &cx.facts.arch) {
                Ok(layout) => {
                    spec.push_str(&format!(" {name}={arg}"));
                    fields.push((name.clone(), layout));
                }
                Err((msg, at)) => {
                    let span = cx.inner_span(&key, &at);
                    let doc = if kernel {
                        "kprobetrace.rst"
                    } else {
                        "uprobetracer.rst"
                    };
                    cx.recipe(
                        span,
                        format!("fetcharg `{name}`: {msg}"),
                        Some(format!("write FETCHARG[:TYPE] as in Documentation/trace/{doc}, e.g. \"+0(%si):string\", \"$retval:s32\"")),
                    );
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
        if cx.diags.len() == before {
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
            let near = suggest::nearest_n(&key, symbols.iter().map(String::as_str), 3);
            cx.kernel(
                span,
                format!("this kernel has no function `{key}` to probe"),
                Some(if near.is_empty() {
                    "see /proc/kallsyms for the functions of this kernel".into()
                } else {
                    format!("did you mean {}?", backticked(&near))
                }),
            );
            return None;
        }
    }
    Some(target.to_string())
}

/// `PATH:SYMBOL` (resolved from the ELF file) or `PATH:0xOFFSET`, as `PATH:0xOFFSET`
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

/// Checks `FETCHARG[:TYPE]`; returns the field layout it produces, or a message
/// and the byte range (in `text`) it is about.
fn fetcharg(text: &str, kind: ProbeKind, arch: &str) -> Result<Layout, (String, Range<usize>)> {
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
    let source = fetch_source(arg, 0, kind, arch)?;
    let Some((ty, at)) = ty else {
        return Ok(match source {
            Source::Comm => Layout {
                size: 4,
                signed: false,
                string: true,
            },
            _ => Layout {
                size: 8,
                signed: false,
                string: false,
            },
        });
    };
    let whole = at..text.len();
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
    let memory = matches!(source, Source::Memory | Source::Imm);
    let layout = match base {
        "string" | "ustring" | "symstr" => {
            if base != "string" && !kind.is_kernel() {
                return bad(format!("type `{base}` exists for kprobes only"));
            }
            if !(memory || source == Source::Comm) {
                return bad(format!(
                    "type `{base}` needs a memory dereference such as +0(%si) or @ADDR, or $comm"
                ));
            }
            Layout {
                size: 4,
                signed: false,
                string: true,
            }
        }
        _ if source == Source::Comm => {
            return bad("`$comm` is a string: its type can only be `string`".into());
        }
        "symbol" if kind.is_kernel() => Layout {
            size: 8,
            signed: false,
            string: false,
        },
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
    if array && layout.string && base != "string" {
        return bad(format!("`{base}` cannot be an array"));
    }
    Ok(layout)
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
}

/// Checks the FETCHARG part (no type); `at` is its offset in the whole text;
/// registers are those of `arch` (the traced kernel's `uname -m`).
fn fetch_source(
    arg: &str,
    at: usize,
    kind: ProbeKind,
    arch: &str,
) -> Result<Source, (String, Range<usize>)> {
    let here = at..at + arg.len().max(1);
    let err = |m: String| Err((m, here.clone()));
    let doc_kinds = if kind.is_kernel() {
        "kprobes"
    } else {
        "uprobes"
    };
    if let Some(reg) = arg.strip_prefix('%') {
        if let Some((name, regs)) = registers(arch)
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
                "`$retval` exists only on return probes (kind = \"kretprobe\" or \"uretprobe\")"
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
        fetch_source(inner, at + open + 1, kind, arch)?;
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
    let fixed: &[&str] = if kind.is_return() {
        &["__probe_func", "__probe_ret_ip"]
    } else {
        &["__probe_ip"]
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
mod tests {
    use super::*;

    fn ok(arg: &str, kind: ProbeKind) -> bool {
        fetcharg(arg, kind, "x86_64").is_ok()
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
            "foo",
        ] {
            assert!(!ok(a, Kprobe), "{a}");
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
            assert!(fetcharg(good, Kprobe, arch).is_ok(), "{arch} {good}");
            let (msg, _) = fetcharg(bad, Kprobe, arch).unwrap_err();
            assert!(msg.contains("is not a register on"), "{arch}: {msg}");
        }
        // An architecture without a table: registers are not checked.
        assert!(fetcharg("%anything", Kprobe, "loongarch64").is_ok());
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
        let (msg, at) = fetcharg("+0(%qq):string", Uprobe, "x86_64").unwrap_err();
        assert!(msg.contains("%qq"), "{msg}");
        assert_eq!(at, 3..6);
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
