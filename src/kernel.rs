//! `KernelFacts`: what a kernel's tracefs offers, as plain data (serde + JSON
//! Schema in `schema/facts.schema.json`), read once before validation — from a
//! live tracefs ([`KernelFacts::read`], read-only) or from a fact file
//! ([`KernelFacts::load`], `trace-recipe facts -o FILE` on any host).
//!
//! Read-only: nothing here writes tracefs. What only a write could tell (which
//! tracers an instance offers) comes from a kernel-version rule
//! (`instance_rule`); `run` learns the real answer in its own instance.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tracedat::EventFormat;

use crate::tracefs::{Tracefs, TracefsError, bracketed, words};

/// Version of the fact-file format this build writes and the newest it reads.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// The largest fact file [`KernelFacts::load`] reads, decompressed: 32 MiB (a
/// kernel with every event format and kallsyms names takes about 6 MiB).
const MAX_FACTS_BYTES: u64 = 32 << 20;
/// Most events a fact file may list (a distribution kernel has about 2,500).
const MAX_FACT_EVENTS: usize = 100_000;

/// Facts about one kernel's ftrace, as the validator needs them.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KernelFacts {
    /// Fact-file format version ([`FORMAT_VERSION`]); a newer one is refused.
    pub(crate) format_version: u32,
    /// `uname -r`.
    pub release: String,
    /// `uname -m` (e.g. `x86_64`).
    pub(crate) arch: String,
    /// Where tracefs was found (e.g. `/sys/kernel/tracing`).
    pub(crate) tracefs: String,
    /// Every `system:event` in `available_events` (at most 100,000 when read
    /// from a file).
    #[serde(deserialize_with = "capped_events")]
    pub(crate) events: BTreeSet<String>,
    /// `system:event` → the text of `events/SYSTEM/EVENT/format`
    /// (Documentation/trace/events.rst section 3), for every readable event.
    pub(crate) formats: BTreeMap<String, String>,
    /// Tracers in `available_tracers` (top level).
    pub(crate) tracers: Vec<String>,
    /// What a fresh instance offers (from a rule or an existing instance).
    pub instance: InstanceFacts,
    /// Clocks in `trace_clock`.
    pub(crate) clocks: Vec<String>,
    /// The default (current top-level) clock.
    pub(crate) default_clock: String,
    /// CPU numbers that have a `per_cpu/cpuN` directory.
    pub(crate) cpus: Vec<u32>,
    /// Names under `options/` (top level).
    pub(crate) options: BTreeSet<String>,
    /// Names of the files and directories at the tracefs root (feature probes:
    /// `set_graph_function`, `max_graph_depth`, `tracing_thresh`, ...).
    pub(crate) files: BTreeSet<String>,
    /// `kprobe_events` exists (CONFIG_KPROBE_EVENTS).
    pub(crate) has_kprobe_events: bool,
    /// `uprobe_events` exists (CONFIG_UPROBE_EVENTS).
    pub(crate) has_uprobe_events: bool,
    /// `dynamic_events` exists (CONFIG_DYNAMIC_EVENTS).
    pub(crate) has_dynamic_events: bool,
    /// Events have a `hist` file (CONFIG_HIST_TRIGGERS).
    pub(crate) has_hist_triggers: bool,
    /// `snapshot` exists (CONFIG_TRACER_SNAPSHOT).
    pub(crate) has_snapshot: bool,
    /// Physical memory in KiB (from /proc/meminfo), to bound buffer sizes.
    pub(crate) mem_total_kb: u64,
    /// `buffer_subbuf_size_kb` (Linux 6.8+), KiB; `None` when the file is absent.
    pub(crate) subbuf_size_kb: Option<u64>,
    /// The top-level ring buffer as found.
    pub top_buffer: TopBuffer,
    /// Function symbols from /proc/kallsyms (types `t`/`T`), as `NAME` and, for
    /// module functions, also `MODULE:NAME` (kprobe target syntax). `None` when
    /// /proc/kallsyms cannot be read or shows no names.
    pub(crate) kernel_symbols: Option<BTreeSet<String>>,
    /// `available_filter_functions`, or why it cannot be read (e.g.
    /// `EPERM: Operation not permitted` when the kernel refuses function tracing).
    pub(crate) filter_functions: Result<FilterFunctions, String>,
    /// Whether every event format, symbol and filter function was read (`trace-recipe
    /// facts`), or only those one recipe needs (a run's `facts.json`).
    #[serde(default)]
    pub complete: bool,
    /// The lines of tracefs's `README` on dynamic events (from `accepts:
    /// event-definitions` on: the definition forms `p[`, `r[`, `f[`, `t[`,
    /// `e[`, the fetchargs, the types), which tell the probe kinds and
    /// fetchargs this kernel accepts (kernel/trace/trace.c `readme_msg`).
    /// `None` in fact files written before it was kept: then the release decides.
    #[serde(default)]
    pub(crate) probe_syntax: Option<Vec<String>>,
    /// The kernel's BTF, as far as probes need it (see `crate::btf`): `None`
    /// without `/sys/kernel/btf/vmlinux` (or in older fact files).
    #[serde(default)]
    pub(crate) btf: Option<crate::btf::BtfFacts>,
    /// Instances mapped onto memory reserved at boot (`trace_instance=NAME@LABEL`
    /// with `reserve_mem=`, Linux 6.12+): those with a `last_boot_info` file.
    /// Empty in fact files written before it was kept.
    #[serde(default)]
    pub(crate) boot_instances: Vec<String>,
}

/// A dynamic-event feature that not every kernel has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeFeature {
    /// fprobe events, `f:` and `f:... FUNC%return` (CONFIG_FPROBE_EVENTS, Linux 6.5).
    Fprobe,
    /// Tracepoint probes, `t:` (CONFIG_FPROBE_EVENTS, Linux 6.5).
    Tprobe,
    /// Event probes, `e:` (CONFIG_EPROBE_EVENTS, Linux 5.15).
    Eprobe,
    /// BTF argument names and typed `$argN` (CONFIG_PROBE_EVENTS_BTF_ARGS, Linux 6.5).
    BtfArgs,
    /// `arg->field.field` (Linux 6.6).
    BtfFields,
    /// `$argN` and argument names in return probes (Linux 6.9).
    ReturnArgs,
}

impl ProbeFeature {
    /// The release that brought it to architecture `arch` (`uname -m`), as
    /// `(major, minor)`. fprobes (and the tracepoint probes built on them)
    /// needed `DYNAMIC_FTRACE_WITH_REGS` or ftrace_regs holding a pt_regs
    /// until Linux 6.14 put them on the function graph tracer
    /// (kernel/trace/Kconfig `FPROBE`): arm64 has neither, so its kernels
    /// have them from 6.14 (Debian's arm64 6.12 has none, seen in the lab).
    pub(crate) fn since(self, arch: &str) -> (u32, u32) {
        match self {
            ProbeFeature::Fprobe | ProbeFeature::Tprobe if matches!(arch, "aarch64" | "arm64") => {
                (6, 14)
            }
            ProbeFeature::Fprobe | ProbeFeature::Tprobe | ProbeFeature::BtfArgs => (6, 5),
            ProbeFeature::Eprobe => (5, 15),
            ProbeFeature::BtfFields => (6, 6),
            ProbeFeature::ReturnArgs => (6, 9),
        }
    }
    /// What it is, for messages: `fprobe events (`f:` in dynamic_events, CONFIG_FPROBE_EVENTS)`.
    pub(crate) fn what(self) -> &'static str {
        match self {
            ProbeFeature::Fprobe => "fprobe events (`f:` in dynamic_events, CONFIG_FPROBE_EVENTS)",
            ProbeFeature::Tprobe => {
                "tracepoint probes (`t:` in dynamic_events, CONFIG_FPROBE_EVENTS)"
            }
            ProbeFeature::Eprobe => "event probes (`e:` in dynamic_events, CONFIG_EPROBE_EVENTS)",
            ProbeFeature::BtfArgs => {
                "BTF fetchargs (argument names, typed `$argN`; CONFIG_PROBE_EVENTS_BTF_ARGS)"
            }
            ProbeFeature::BtfFields => "BTF field access (`arg->field.field`)",
            ProbeFeature::ReturnArgs => "arguments in return probes (`$argN`, argument names)",
        }
    }
    /// The README text whose presence shows it (see [`KernelFacts::probe_syntax`]).
    pub(crate) fn readme_mark(self) -> &'static str {
        match self {
            ProbeFeature::Fprobe => "f[",
            ProbeFeature::Tprobe => "t[",
            ProbeFeature::Eprobe => "e[",
            ProbeFeature::BtfArgs => "<argname>",
            ProbeFeature::BtfFields => "->field",
            ProbeFeature::ReturnArgs => "kernel return probes support: $retval, $arg<N>",
        }
    }
}

/// The lines of `README` that describe dynamic events (see
/// [`KernelFacts::probe_syntax`]): from the one with `accepts:
/// event-definitions` to the next file entry (`  NAME\t...`), at most 64, trimmed.
pub(crate) fn probe_syntax(readme: &str) -> Vec<String> {
    let mut lines = readme.lines();
    if !lines
        .by_ref()
        .any(|l| l.contains("accepts: event-definitions"))
    {
        return Vec::new();
    }
    lines
        .take_while(|l| !(l.starts_with("  ") && !l.starts_with("   ") && l.contains('\t')))
        .take(64)
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The kernel's build configuration where this machine shows it:
/// `/proc/config.gz` (CONFIG_IKCONFIG_PROC) or `/boot/config-RELEASE` (Debian's
/// packages), at most 4 MiB of text; `None` without either.
fn kernel_config(release: &str) -> Option<String> {
    use std::io::Read;
    const MAX: u64 = 4 << 20;
    let mut text = String::new();
    if let Ok(f) = std::fs::File::open("/proc/config.gz") {
        flate2::read::GzDecoder::new(f)
            .take(MAX)
            .read_to_string(&mut text)
            .ok()?;
        return Some(text);
    }
    std::fs::File::open(format!("/boot/config-{release}"))
        .ok()?
        .take(MAX)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The definition forms of [`probe_syntax`]'s `lines` that `config` (a kernel
/// build configuration) says were built: the README documents `e[` (eprobes)
/// whatever CONFIG_EPROBE_EVENTS says (6.18 built without it lists it, and an
/// `e:` definition fails there with EINVAL), so a form whose option reads `#
/// CONFIG_... is not set` is dropped; a configuration that does not name the
/// option changes nothing.
pub(crate) fn without_unbuilt(lines: Vec<String>, config: &str) -> Vec<String> {
    const FORMS: [(&str, &str); 3] = [
        ("CONFIG_EPROBE_EVENTS", "e["),
        ("CONFIG_FPROBE_EVENTS", "f["),
        ("CONFIG_FPROBE_EVENTS", "t["),
    ];
    let unbuilt: Vec<&str> = FORMS
        .iter()
        .filter(|(option, _)| {
            config
                .lines()
                .any(|l| l.trim() == format!("# {option} is not set"))
        })
        .map(|(_, form)| *form)
        .collect();
    lines
        .into_iter()
        .filter(|l| {
            let l = l.strip_prefix("Format:").unwrap_or(l).trim_start();
            !unbuilt.iter().any(|form| l.starts_with(form))
        })
        .collect()
}

/// The tracers' own records that an `[[answer]]` may name, with the tracer
/// that writes each (kernel/trace/trace_entries.h: `ftrace:function` is
/// `TRACE_FN`, the two funcgraph records `TRACE_GRAPH_ENT`/`_RET`). They are
/// in no `available_events`: nothing enables them but their tracer, and they
/// take no triggers.
pub(crate) const TRACER_RECORDS: [(&str, &str); 3] = [
    ("ftrace:function", "function"),
    ("ftrace:funcgraph_entry", "function_graph"),
    ("ftrace:funcgraph_exit", "function_graph"),
];

/// Which of the costly facts [`KernelFacts::read_scoped`] reads.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    /// Events whose formats to read, as `(system, event pattern)` (a glob of
    /// `*` and `?`); `None`: every event. One name per event a recipe names,
    /// not its whole system: in the kernel lab's emulated guests a format
    /// took about 0.1 s to read, and `syscalls` has some 700 events.
    pub(crate) events: Option<Vec<(String, String)>>,
    /// Read kallsyms function names (kprobe targets).
    pub(crate) kernel_symbols: bool,
    /// Read available_filter_functions (function tracers and filters).
    pub(crate) filter_functions: bool,
    /// What of the kernel's BTF to keep for one recipe.
    pub(crate) btf: BtfScope,
    /// Keep a digest of all of the kernel's BTF (`facts --btf`; costly: some
    /// 70,000 prototypes and structs).
    pub(crate) btf_all: bool,
}

/// The functions, tracepoints and fetchargs whose BTF types a recipe's
/// probes need (see `crate::btf::Btf::digest_for`).
#[derive(Debug, Clone, Default)]
pub(crate) struct BtfScope {
    /// Functions the probes sit on.
    pub(crate) functions: BTreeSet<String>,
    /// Tracepoints the tprobes sit on.
    pub(crate) tracepoints: BTreeSet<String>,
    /// Every fetcharg, without its `:TYPE`.
    pub(crate) fetches: BTreeSet<String>,
}

impl BtfScope {
    fn wanted(&self) -> bool {
        !self.functions.is_empty() || !self.tracepoints.is_empty()
    }
    fn read(&self, all: bool) -> Option<crate::btf::BtfFacts> {
        crate::btf::BtfFacts::read(all, &self.functions, &self.tracepoints, &self.fetches)
    }
}

impl Scope {
    /// Everything.
    pub(crate) fn all() -> Scope {
        Scope {
            events: None,
            kernel_symbols: true,
            filter_functions: true,
            btf: BtfScope::default(),
            btf_all: false,
        }
    }

    /// What validating `recipe` needs: the formats of the events its events,
    /// eprobes, triggers and answers name (every event of a system when the
    /// event is a bracket glob, every event when a system is a glob), the
    /// kernel's symbols when it has kprobes, the filter functions when it has a
    /// tracer or a function trigger.
    pub(crate) fn for_recipe(recipe: &crate::recipe::Recipe) -> Scope {
        // An eprobe's target names the event it sits on (`system:event`).
        let eprobes = recipe
            .kprobes
            .iter()
            .filter(|p| p.kind == "eprobe")
            .map(|p| p.target.as_str());
        let names = recipe
            .events
            .iter()
            .map(|e| e.name.as_str())
            .chain(eprobes)
            .chain(recipe.triggers.iter().filter_map(|t| t.event.as_deref()))
            .chain(recipe.triggers.iter().filter_map(|t| t.target.as_deref()))
            .chain(recipe.answer.iter().flat_map(|a| {
                [&a.event, &a.from, &a.to]
                    .into_iter()
                    .filter_map(|e| e.as_deref())
            }));
        let mut events = Some(Vec::new());
        for name in names {
            let (system, event) = name.split_once(':').unwrap_or((name, "*"));
            if system.contains(['*', '?', '[']) {
                events = None;
            }
            let event = match event.contains('[') {
                true => "*",
                false => event,
            };
            if let Some(e) = events.as_mut() {
                e.push((system.to_string(), event.to_string()));
            }
        }
        let mut btf = BtfScope::default();
        for p in &recipe.kprobes {
            match p.kind.as_str() {
                "tprobe" => {
                    btf.tracepoints.insert(p.target.clone());
                }
                "eprobe" => continue,
                _ => {
                    let symbol = p.target.rsplit(':').next().unwrap_or_default();
                    let symbol = symbol.split('+').next().unwrap_or_default();
                    btf.functions.insert(symbol.to_string());
                }
            }
            for f in p.fetch.values() {
                btf.fetches.insert(
                    f.rsplit_once(':')
                        .map_or(f.as_str(), |(a, _)| a)
                        .to_string(),
                );
            }
        }
        Scope {
            events,
            btf,
            btf_all: false,
            kernel_symbols: !recipe.kprobes.is_empty(),
            // fprobes sit on ftrace: their functions are checked against it.
            filter_functions: recipe.tracer.is_some()
                || recipe.stack.is_some()
                || recipe.triggers.iter().any(|t| t.function.is_some())
                || recipe
                    .kprobes
                    .iter()
                    .any(|p| matches!(p.kind.as_str(), "fprobe" | "fexit")),
        }
    }

    fn wants_event(&self, system: &str, event: &str) -> bool {
        self.events.as_ref().is_none_or(|wanted| {
            wanted
                .iter()
                .any(|(s, p)| s == system && (p == "*" || glob_match(p, event)))
        })
    }
}

/// The top-level ring buffer (`buffer_size_kb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TopBuffer {
    /// Size per CPU now, KiB (`buffer_size_kb`'s number).
    pub(crate) size_kb: u64,
    /// `Some(n)` while the buffer is still unexpanded: `buffer_size_kb` reads
    /// `7 (expanded: 1408)` until the first use grows it to `n` KiB per CPU.
    pub expanded_size_kb: Option<u64>,
}

impl TopBuffer {
    /// Parses `buffer_size_kb`: `1408`, or `7 (expanded: 1408)`. `None` if neither.
    pub(crate) fn parse(text: &str) -> Option<TopBuffer> {
        let text = text.trim();
        let (size, rest) = text.split_once(' ').unwrap_or((text, ""));
        let expanded_size_kb = match rest.trim() {
            "" => None,
            r => Some(
                r.strip_prefix("(expanded:")?
                    .strip_suffix(')')?
                    .trim()
                    .parse()
                    .ok()?,
            ),
        };
        Some(TopBuffer {
            size_kb: size.parse().ok()?,
            expanded_size_kb,
        })
    }
}

/// `available_filter_functions`: the functions the function tracers can trace.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub(crate) struct FilterFunctions {
    /// Every function name (a name in several modules appears once).
    pub(crate) names: BTreeSet<String>,
    /// Module name → its functions (lines `NAME [MODULE]`).
    pub(crate) modules: BTreeMap<String, BTreeSet<String>>,
}

/// What a fresh instance offers, which can be less than the top level
/// (tracers without `allow_instances`, their options and files).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct InstanceFacts {
    /// The instance's `available_tracers`.
    pub tracers: Vec<String>,
    /// Names under the instance's `options/` (nop tracer active).
    pub(crate) options: BTreeSet<String>,
    /// Files at the instance's root (`set_graph_function`, `max_graph_depth`, ...).
    pub files: BTreeSet<String>,
    /// Where these facts come from: `rule: ...` (a kernel-version rule, see
    /// [`instance_rule`]) or `instance NAME` (read from an existing instance).
    pub(crate) source: String,
}

/// `events` of a fact file, refused past [`MAX_FACT_EVENTS`] while it is read.
fn capped_events<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeSet<String>, D::Error> {
    struct Capped;
    impl<'de> serde::de::Visitor<'de> for Capped {
        type Value = BTreeSet<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of at most {MAX_FACT_EVENTS} event names")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeSet::new();
            while let Some(e) = seq.next_element::<String>()? {
                if out.len() >= MAX_FACT_EVENTS {
                    return Err(serde::de::Error::custom(format!(
                        "`events` lists more than {MAX_FACT_EVENTS} events"
                    )));
                }
                out.insert(e);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Capped)
}

/// Why a fact file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FactsError {
    /// The file cannot be read.
    #[error("cannot read fact file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not a fact file (bad JSON, bad zstd, missing fields).
    #[error("{path} is not a trace-recipe fact file: {why}")]
    Parse {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// Written by a newer trace-recipe.
    #[error(
        "{path} has fact-file format_version {found}, newer than this trace-recipe reads ({FORMAT_VERSION}): upgrade trace-recipe or regenerate the file with this one (`trace-recipe facts -o FILE`)"
    )]
    TooNew {
        /// The file.
        path: String,
        /// Its format_version.
        found: u32,
    },
}

/// Top-level trace options an instance never has (kernel/trace/trace.c
/// `TOP_LEVEL_TRACE_FLAGS`).
const TOP_LEVEL_ONLY_OPTIONS: &[&str] = &[
    "trace_printk",
    "printk-msg-only",
    "record-cmd",
    "prof-text-offset",
];

/// The instances with a `last_boot_info` file (boot-mapped, see
/// [`KernelFacts::boot_instances`]), sorted.
pub(crate) fn boot_instances(tracefs: &Tracefs) -> Vec<String> {
    let mut names: Vec<String> = tracefs
        .instances()
        .into_iter()
        .filter(|n| tracefs.exists(&format!("instances/{n}/last_boot_info")))
        .collect();
    names.sort();
    names
}

/// Release `(major, minor)` from `uname -r` (`6.12.57+deb13-amd64` → (6, 12)).
fn release_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// What an instance offers by the kernel-version rule, given the top level's
/// tracers, options and files. No write needed: a tracer is offered in
/// instances when its `struct tracer` sets `allow_instances` (kernel/trace/):
/// `nop` and `function` on every kernel this tool supports; `function_graph`
/// from Linux 6.11 (the fgraph multiple-users work; the lab shows 6.1 without
/// and 6.12 with); `hwlat`, `osnoise`, `timerlat`, `wakeup*` set it too.
/// Options: the top level's minus the top-level-only flags and, where
/// function_graph stays at the top level, its `funcgraph-*` options. Files:
/// the top level's minus `set_graph_function`, `set_graph_notrace` and
/// `max_graph_depth`, which stay global even where instances offer
/// function_graph (the lab's 6.12 instance has no `set_graph_function`:
/// writing it there fails with ENOENT).
pub(crate) fn instance_rule(
    release: &str,
    tracers: &[String],
    options: &BTreeSet<String>,
    files: &BTreeSet<String>,
) -> InstanceFacts {
    let graph_ok = release_version(release).is_some_and(|v| v >= (6, 11));
    let allowed = |t: &str| match t {
        "function_graph" => graph_ok,
        "nop" | "function" | "hwlat" | "osnoise" | "timerlat" | "wakeup" | "wakeup_rt"
        | "wakeup_dl" => true,
        _ => false,
    };
    let graph_file = |f: &str| {
        matches!(
            f,
            "set_graph_function" | "set_graph_notrace" | "max_graph_depth"
        )
    };
    InstanceFacts {
        tracers: tracers.iter().filter(|t| allowed(t)).cloned().collect(),
        options: options
            .iter()
            .filter(|o| !TOP_LEVEL_ONLY_OPTIONS.contains(&o.as_str()))
            .filter(|o| graph_ok || !o.starts_with("funcgraph-"))
            .cloned()
            .collect(),
        files: files.iter().filter(|f| !graph_file(f)).cloned().collect(),
        source: format!(
            "rule: kernel {release} offers in an instance the tracers that set allow_instances ({}function_graph from Linux 6.11)",
            if graph_ok { "" } else { "not " }
        ),
    }
}

impl KernelFacts {
    /// Whether this kernel has `feature`: by the README lines it keeps, else
    /// (older fact files) by its release and `dynamic_events`.
    pub(crate) fn has_probe_feature(&self, feature: ProbeFeature) -> bool {
        match &self.probe_syntax {
            Some(lines) => {
                let mark = feature.readme_mark();
                lines.iter().any(|l| {
                    let l = l.strip_prefix("Format:").unwrap_or(l).trim_start();
                    match mark.ends_with('[') {
                        true => l.starts_with(mark),
                        false => l.contains(mark),
                    }
                })
            }
            None => {
                self.has_dynamic_events
                    && release_version(&self.release)
                        .is_some_and(|v| v >= feature.since(&self.arch))
            }
        }
    }

    /// Reads every fact from a live tracefs, read-only (root sees everything;
    /// others see what tracefs lets them read): what `trace-recipe facts`
    /// prints. Errors: a core tracefs file (`available_events`, `trace_clock`,
    /// `available_tracers`) is unreadable.
    pub fn read(tracefs: &Tracefs) -> Result<KernelFacts, TracefsError> {
        KernelFacts::read_scoped(tracefs, &Scope::all())
    }

    /// [`KernelFacts::read`], with the costly facts (event formats, about 0.1 s
    /// for every event; kallsyms names; available_filter_functions) limited to
    /// `scope`: what `check` and `run` read for one recipe.
    pub(crate) fn read_scoped(
        tracefs: &Tracefs,
        scope: &Scope,
    ) -> Result<KernelFacts, TracefsError> {
        let all = scope.events.is_none() && scope.kernel_symbols && scope.filter_functions;
        let events: BTreeSet<String> = tracefs
            .read("available_events")?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        let clock_text = tracefs.read("trace_clock")?;
        let tracers = words(&tracefs.read("available_tracers")?);
        let mut cpus: Vec<u32> = tracefs
            .list("per_cpu")
            .iter()
            .filter_map(|n| n.strip_prefix("cpu")?.parse().ok())
            .collect();
        cpus.sort_unstable();
        let options: BTreeSet<String> = tracefs.list("options").into_iter().collect();
        let files: BTreeSet<String> = tracefs.list("").into_iter().collect();
        let mem_total_kb = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(u64::MAX);
        let mut formats = BTreeMap::new();
        let mut has_hist_triggers = false;
        for (i, e) in events.iter().enumerate() {
            let Some((sys, ev)) = e.split_once(':') else {
                continue;
            };
            if i < 8 && tracefs.exists(&format!("events/{sys}/{ev}/hist")) {
                has_hist_triggers = true;
            }
            if scope.wants_event(sys, ev)
                && let Ok(text) = tracefs.read(&format!("events/{sys}/{ev}/format"))
            {
                formats.insert(e.clone(), text);
            }
        }
        // The tracers' own records are in no available_events, but an answer
        // may count them: their formats are read like an event's.
        for (name, _) in TRACER_RECORDS {
            let ev = name.trim_start_matches("ftrace:");
            if scope.wants_event("ftrace", ev)
                && let Ok(text) = tracefs.read(&format!("events/ftrace/{ev}/format"))
            {
                formats.insert(name.to_string(), text);
            }
        }
        let uname = rustix::system::uname();
        let release = uname.release().to_string_lossy().into_owned();
        let instance = instance_rule(&release, &tracers, &options, &files);
        let probe_syntax = tracefs.read("README").ok().map(|r| {
            let lines = probe_syntax(&r);
            match kernel_config(&release) {
                Some(config) => without_unbuilt(lines, &config),
                None => lines,
            }
        });
        let top_buffer = tracefs
            .read("buffer_size_kb")
            .ok()
            .and_then(|t| TopBuffer::parse(&t))
            .unwrap_or(TopBuffer {
                size_kb: 0,
                expanded_size_kb: None,
            });
        Ok(KernelFacts {
            format_version: FORMAT_VERSION,
            arch: uname.machine().to_string_lossy().into_owned(),
            release,
            tracefs: tracefs.root().display().to_string(),
            events,
            formats,
            tracers,
            instance,
            clocks: words(&clock_text),
            default_clock: bracketed(&clock_text).unwrap_or("local").to_string(),
            cpus,
            options,
            has_kprobe_events: files.contains("kprobe_events"),
            has_uprobe_events: files.contains("uprobe_events"),
            has_dynamic_events: files.contains("dynamic_events"),
            has_hist_triggers,
            has_snapshot: files.contains("snapshot"),
            files,
            mem_total_kb,
            subbuf_size_kb: tracefs
                .read("buffer_subbuf_size_kb")
                .ok()
                .and_then(|t| t.trim().parse().ok()),
            top_buffer,
            kernel_symbols: scope.kernel_symbols.then(read_kallsyms).flatten(),
            filter_functions: match scope.filter_functions {
                true => read_filter_functions(tracefs),
                false => Err("not read (the recipe traces no function)".into()),
            },
            complete: all,
            probe_syntax,
            btf: (scope.btf_all || scope.btf.wanted())
                .then(|| scope.btf.read(scope.btf_all))
                .flatten(),
            boot_instances: boot_instances(tracefs),
        })
    }

    /// Reads a fact file written by `trace-recipe facts` (JSON, or JSON
    /// compressed with zstd when the name ends in `.zst`). Errors: unreadable,
    /// not a fact file, or a newer `format_version` than `FORMAT_VERSION`.
    pub fn load(path: &Path) -> Result<KernelFacts, FactsError> {
        let name = crate::untrusted::escape_path(path);
        let bytes = crate::untrusted::read(path, crate::untrusted::Kind::Facts).map_err(|r| {
            FactsError::Read {
                path: name.clone(),
                source: r.into_io(),
            }
        })?;
        let parse = |why: String| FactsError::Parse {
            path: name.clone(),
            why,
        };
        let bytes = if path.extension().is_some_and(|e| e == "zst") {
            let dec = zstd::stream::read::Decoder::new(bytes.as_slice())
                .map_err(|e| parse(format!("zstd: {e}")))?;
            let mut out = Vec::new();
            std::io::Read::read_to_end(
                &mut std::io::Read::take(dec, MAX_FACTS_BYTES + 1),
                &mut out,
            )
            .map_err(|e| parse(format!("zstd: {e}")))?;
            if out.len() as u64 > MAX_FACTS_BYTES {
                return Err(parse(format!(
                    "it decompresses to more than {} MiB",
                    MAX_FACTS_BYTES >> 20
                )));
            }
            out
        } else {
            bytes
        };
        // The version alone first (nothing else is kept), then the typed facts
        // straight from the bytes: no intermediate JSON tree.
        #[derive(Deserialize)]
        struct Version {
            format_version: Option<u64>,
        }
        let found = serde_json::from_slice::<Version>(&bytes)
            .map_err(|e| parse(e.to_string()))?
            .format_version
            .ok_or_else(|| parse("no format_version".into()))?;
        if found > u64::from(FORMAT_VERSION) {
            return Err(FactsError::TooNew {
                path: name,
                found: u32::try_from(found).unwrap_or(u32::MAX),
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| parse(e.to_string()))
    }

    /// Writes these facts to `path` as pretty JSON, compressed with zstd when
    /// the name ends in `.zst`. Errors: the file cannot be written.
    pub(crate) fn save(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let bytes = match path.extension().is_some_and(|e| e == "zst") {
            true => zstd::encode_all(json.as_slice(), 3)?,
            false => json,
        };
        std::fs::write(path, bytes)
    }

    /// Whether top-level file `rel` exists (a feature probe, e.g. `set_graph_function`).
    pub(crate) fn has_file(&self, rel: &str) -> bool {
        self.files.contains(rel)
    }

    /// [`KernelFacts::kernel_symbols`] as a reference.
    pub(crate) fn kernel_symbols(&self) -> Option<&BTreeSet<String>> {
        self.kernel_symbols.as_ref()
    }

    /// [`KernelFacts::filter_functions`], or why it is unreadable.
    pub(crate) fn filter_functions(&self) -> Result<&FilterFunctions, &str> {
        self.filter_functions.as_ref().map_err(String::as_str)
    }

    /// What an instance offers (see [`InstanceFacts::source`] for how it is known).
    pub(crate) fn instance_facts(&self) -> Option<&InstanceFacts> {
        Some(&self.instance)
    }

    /// The parsed format of `system:event`; `None` when the event does not
    /// exist or its format was unreadable or does not parse.
    pub fn format(&self, event: &str) -> Option<EventFormat> {
        let (system, _) = event.split_once(':')?;
        EventFormat::parse(system, self.formats.get(event)?).ok()
    }

    /// Whether this kernel's release is at least `major.minor` (false when
    /// the release does not parse).
    pub(crate) fn release_at_least(&self, major: u32, minor: u32) -> bool {
        release_version(&self.release).is_some_and(|v| v >= (major, minor))
    }

    /// Events matching a `system:event` glob (`*`, `?`), sorted.
    ///
    /// Only the events that begin with the pattern's literal head (what comes
    /// before its first `*` or `?`) are compared: a name without a wildcard
    /// costs a lookup, `sched:*` a walk of the `sched` events, and only a
    /// pattern that begins with a wildcard walks them all.
    pub(crate) fn matching_events(&self, pattern: &str) -> Vec<&str> {
        self.events_beginning_with(glob_head(pattern))
            .filter(|e| glob_match(pattern, e))
            .collect()
    }

    /// The events that begin with `head`, in order: a range of the sorted
    /// set, never a walk of the rest.
    fn events_beginning_with<'s>(&'s self, head: &str) -> impl Iterator<Item = &'s str> {
        self.events
            .range::<str, _>((std::ops::Bound::Included(head), std::ops::Bound::Unbounded))
            .map(String::as_str)
            .take_while(move |e| e.starts_with(head))
    }
}

/// What every text a glob matches begins with: the pattern up to its first
/// `*` or `?`.
fn glob_head(pattern: &str) -> &str {
    &pattern[..pattern.find(['*', '?']).unwrap_or(pattern.len())]
}

/// /proc/kallsyms function symbols (`t`/`T`) as `NAME` and `MODULE:NAME`;
/// `None` when unreadable or empty.
///
/// Read by bytes (a line is `ADDR TYPE NAME`, then `\t[MODULE]` for a
/// module's symbol), and the set built at once from the collected names:
/// Debian 7.2 has some 200,000 symbols, and in the kernel lab's emulated
/// guests a `check` of a kprobe recipe spent most of its time here.
fn read_kallsyms() -> Option<BTreeSet<String>> {
    let set = kallsyms_functions(&std::fs::read("/proc/kallsyms").ok()?);
    (!set.is_empty()).then_some(set)
}

/// The function symbols of /proc/kallsyms text (see [`read_kallsyms`]).
fn kallsyms_functions(text: &[u8]) -> BTreeSet<String> {
    let mut names = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        let Some((ty, rest)) = kallsyms_fields(line) else {
            continue;
        };
        if !matches!(ty, b't' | b'T') {
            continue;
        }
        let (name, module) = match rest.iter().position(|&b| b == b'\t') {
            Some(tab) => (&rest[..tab], rest[tab + 1..].trim_ascii()),
            None => (rest.trim_ascii_end(), &b""[..]),
        };
        let Ok(name) = std::str::from_utf8(name) else {
            continue;
        };
        if let Some(m) = module
            .strip_prefix(b"[")
            .and_then(|m| m.strip_suffix(b"]"))
            .and_then(|m| std::str::from_utf8(m).ok())
        {
            names.push(format!("{m}:{name}"));
        }
        names.push(name.to_string());
    }
    names.into_iter().collect()
}

/// A kallsyms line's type letter and what follows it (`NAME`, then
/// `\t[MODULE]` for a module's symbol); `None` for a line of another shape.
fn kallsyms_fields(line: &[u8]) -> Option<(u8, &[u8])> {
    let space = line.iter().position(|&b| b == b' ')?;
    match &line[space + 1..] {
        [ty, b' ', rest @ ..] if !rest.is_empty() => Some((*ty, rest)),
        _ => None,
    }
}

/// `available_filter_functions`, or why it cannot be read, as text.
fn read_filter_functions(tracefs: &Tracefs) -> Result<FilterFunctions, String> {
    let text = tracefs
        .read("available_filter_functions")
        .map_err(|e| match e {
            TracefsError::Read { source, .. } => errno_text(&source),
            other => other.to_string(),
        })?;
    Ok(filter_functions(&text))
}

/// The functions of `available_filter_functions` text (`NAME` or
/// `NAME [MODULE]` per line). Each line is split at its first blank rather
/// than by `split_whitespace`, and the sets are built at once from the
/// collected names: some 60,000 lines, read by every `check` of a function
/// tracer recipe, in the kernel lab's emulated guests too.
fn filter_functions(text: &str) -> FilterFunctions {
    let blank = [' ', '\t'];
    let mut names = Vec::new();
    let mut in_modules = Vec::new();
    for line in text.lines() {
        let line = line.trim_ascii();
        let (name, rest) = line.split_once(blank).unwrap_or((line, ""));
        if name.is_empty() {
            continue;
        }
        let word = rest.trim_ascii_start().split(blank).next().unwrap_or("");
        if let Some(m) = word.strip_prefix('[').and_then(|m| m.strip_suffix(']')) {
            in_modules.push((m, name));
        }
        names.push(name.to_string());
    }
    let mut f = FilterFunctions {
        names: names.into_iter().collect(),
        modules: BTreeMap::new(),
    };
    in_modules.sort_unstable();
    for run in in_modules.chunk_by(|a, b| a.0 == b.0) {
        f.modules.insert(
            run[0].0.to_string(),
            run.iter().map(|(_, name)| name.to_string()).collect(),
        );
    }
    f
}

/// `EPERM: Operation not permitted` for an OS error, else its text.
fn errno_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text).to_string();
    match e.raw_os_error() {
        Some(libc::EPERM) => format!("EPERM: {text}"),
        Some(libc::EACCES) => format!("EACCES: {text}"),
        Some(libc::ENODEV) => format!("ENODEV: {text}"),
        Some(libc::ENOENT) => format!("ENOENT: {text}"),
        _ => text,
    }
}

/// Shell-style glob match of `text` against `pattern` (`*` any run, `?` one
/// character). Allocates nothing and never backtracks: the part before the
/// first `*` must begin the text, the part after the last must end it, and
/// each part between is taken at its leftmost place after the one before (a
/// substring search), so a check of thousands of patterns against thousands
/// of events stays cheap.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let Some((before_last, last)) = pattern.rsplit_once('*') else {
        return glob_part_at(pattern, text, 0) == Some(text.len());
    };
    let (head, middle) = before_last.split_once('*').unwrap_or((before_last, ""));
    let Some(mut at) = glob_part_at(head, text, 0) else {
        return false;
    };
    // Each character of a part matches one character of the text, so the
    // last part takes the text's last characters, as many as it has.
    let tail = if last.contains('?') {
        text[at..]
            .char_indices()
            .map(|(i, _)| at + i)
            .chain([text.len()])
            .rev()
            .nth(last.chars().count())
    } else {
        text.len()
            .checked_sub(last.len())
            .filter(|&t| t >= at && text.is_char_boundary(t))
    };
    let Some(tail) = tail else {
        return false;
    };
    if glob_part_at(last, text, tail).is_none() {
        return false;
    }
    let inner = &text[..tail];
    for part in middle.split('*').filter(|p| !p.is_empty()) {
        let found = if part.contains('?') {
            inner[at..]
                .char_indices()
                .find_map(|(i, _)| glob_part_at(part, inner, at + i))
        } else {
            inner[at..].find(part).map(|i| at + i + part.len())
        };
        match found {
            Some(end) => at = end,
            None => return false,
        }
    }
    true
}

/// Where `part` (literal characters and `?`, no `*`) ends when it matches
/// `text` from byte `at`, if it does.
fn glob_part_at(part: &str, text: &str, at: usize) -> Option<usize> {
    if !part.contains('?') {
        return text[at..].starts_with(part).then_some(at + part.len());
    }
    let mut rest = text[at..].chars();
    for want in part.chars() {
        let got = rest.next()?;
        if want != '?' && want != got {
            return None;
        }
    }
    Some(text.len() - rest.as_str().len())
}

/// The facts of `tests/facts/NAME.json.zst` (`debian-6.1`, `debian-6.12`,
/// `host`, ...), for unit tests.
#[cfg(test)]
pub(crate) fn test_facts(name: &str) -> KernelFacts {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/facts")
        .join(format!("{name}.json.zst"));
    KernelFacts::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::{TopBuffer, glob_match, release_version};

    /// Function symbols (`t`/`T`) are kept, a module's twice (`NAME` and
    /// `MODULE:NAME`); data symbols and malformed lines are skipped.
    #[test]
    fn kallsyms_text_gives_its_function_symbols() {
        let text = b"ffffffff81000000 T _stext\nffffffff81001000 t do_one\nffffffff82000000 D jiffies\nffffffffc0a01000 t v9fs_open\t[9p]\nffffffffc0a02000 d v9fs_data\t[9p]\ngarbage\nffffffff81002000 T\n\n";
        let got: Vec<String> = super::kallsyms_functions(text).into_iter().collect();
        assert_eq!(got, ["9p:v9fs_open", "_stext", "do_one", "v9fs_open"]);
    }

    /// `NAME [MODULE]` lines put the name in the module's set too.
    #[test]
    fn filter_functions_text_gives_names_and_modules() {
        let f = super::filter_functions(
            "do_one\nv9fs_open [9p]\nv9fs_read\t[9p]\nsame [a]\nsame [b]\n\n  \nodd [notamodule\n",
        );
        let names: Vec<&str> = f.names.iter().map(String::as_str).collect();
        assert_eq!(names, ["do_one", "odd", "same", "v9fs_open", "v9fs_read"]);
        let modules: Vec<(&str, Vec<&str>)> = f
            .modules
            .iter()
            .map(|(m, n)| (m.as_str(), n.iter().map(String::as_str).collect()))
            .collect();
        assert_eq!(
            modules,
            [
                ("9p", vec!["v9fs_open", "v9fs_read"]),
                ("a", vec!["same"]),
                ("b", vec!["same"])
            ]
        );
    }

    /// The README lists `e[` whether or not eprobes were built (this
    /// development kernel, 6.18 without CONFIG_EPROBE_EVENTS, does): a
    /// configuration saying an option is not set drops its forms, so `check`
    /// refuses an eprobe there; a configuration that has it, or does not name
    /// it, keeps them.
    #[test]
    fn probe_forms_the_kernel_was_built_without_are_dropped() {
        let readme = "  dynamic_events\t\t- Create/append/remove/show the generic dynamic events\n\t\t\t  Write into this file to define/undefine new trace events.\n  accepts: event-definitions (one definition per line)\n\t   Format: p[:[<group>/][<event>]] <place> [<args>]\n\t           f[:[<group>/][<event>]] <func-name>[%return] [<args>]\n\t           t[:[<group>/][<event>]] <tracepoint> [<args>]\n\t           e[:[<group>/][<event>]] <attached-group>.<attached-event> [<args>] [if <filter>]\n\t           -:[<group>/][<event>]\n  events/\t\t- Directory containing all trace event subsystems:\n";
        let lines = super::probe_syntax(readme);
        assert_eq!(lines.len(), 5, "{lines:?}");
        let forms = |config: &str| -> Vec<char> {
            super::without_unbuilt(lines.clone(), config)
                .iter()
                .filter_map(|l| {
                    l.strip_prefix("Format:")
                        .unwrap_or(l)
                        .trim_start()
                        .chars()
                        .next()
                })
                .filter(|c| c.is_ascii_alphabetic())
                .collect()
        };
        assert_eq!(
            forms("# CONFIG_EPROBE_EVENTS is not set\nCONFIG_FPROBE_EVENTS=y\n"),
            ['p', 'f', 't']
        );
        assert_eq!(
            forms("CONFIG_EPROBE_EVENTS=y\n# CONFIG_FPROBE_EVENTS is not set\n"),
            ['p', 'e']
        );
        assert_eq!(forms(""), ['p', 'f', 't', 'e']);
    }

    /// A fact file is bounded: in bytes before it is read, and in events while
    /// it is parsed (a file listing millions of events is refused, not kept).
    #[test]
    fn fact_files_are_capped_in_bytes_and_events() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/facts/debian-6.1.json.zst");
        let mut facts = super::KernelFacts::load(&real).unwrap();
        facts.events.extend((0..100_001).map(|i| format!("s:e{i}")));
        let many = dir.path().join("many.json");
        facts.save(&many).unwrap();
        let e = super::KernelFacts::load(&many).unwrap_err().to_string();
        assert!(e.contains("`events` lists more than 100000 events"), "{e}");
        let big = dir.path().join("big.json");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(super::MAX_FACTS_BYTES + 1)
            .unwrap();
        let e = super::KernelFacts::load(&big).unwrap_err().to_string();
        assert!(
            e.contains("over the limit of 33554432 bytes for a fact file"),
            "{e}"
        );
    }

    #[test]
    fn buffer_size_kb_parses_expanded_and_not() {
        assert_eq!(
            TopBuffer::parse("7 (expanded: 1408)\n"),
            Some(TopBuffer {
                size_kb: 7,
                expanded_size_kb: Some(1408)
            })
        );
        assert_eq!(
            TopBuffer::parse("1410\n"),
            Some(TopBuffer {
                size_kb: 1410,
                expanded_size_kb: None
            })
        );
        assert_eq!(TopBuffer::parse("x"), None);
    }

    /// arm64 has fprobes and tracepoint probes from 6.14 (x86-64 from 6.5):
    /// by the README where the facts keep it (Debian's arm64 6.12 lists no
    /// `f[`, its BTF arguments yes), else by release and architecture.
    #[test]
    fn fprobes_come_to_arm64_with_6_14() {
        use super::ProbeFeature::{BtfArgs, Fprobe, Tprobe};
        let mut arm = super::test_facts("debian-arm64-6.12");
        assert_eq!(arm.arch, "aarch64");
        assert!(!arm.has_probe_feature(Fprobe) && !arm.has_probe_feature(Tprobe));
        assert!(arm.has_probe_feature(BtfArgs));
        arm.probe_syntax = None;
        assert!(!arm.has_probe_feature(Fprobe) && arm.has_probe_feature(BtfArgs));
        arm.release = "6.14.0-1-arm64".into();
        assert!(arm.has_probe_feature(Fprobe));
        let mut x86 = super::test_facts("debian-6.12");
        x86.probe_syntax = None;
        assert!(x86.has_probe_feature(Fprobe));
        assert_eq!(
            (Fprobe.since("aarch64"), Fprobe.since("x86_64")),
            ((6, 14), (6, 5))
        );
    }

    #[test]
    fn release_versions_parse() {
        assert_eq!(release_version("6.12.57+deb13-amd64"), Some((6, 12)));
        assert_eq!(release_version("6.1.0-40-amd64"), Some((6, 1)));
    }

    #[test]
    fn globs_match_like_the_shell() {
        assert!(glob_match("sched:*", "sched:sched_switch"));
        assert!(glob_match("sched:sched_?witch", "sched:sched_switch"));
        assert!(glob_match("*:sys_exit_open*", "syscalls:sys_exit_openat"));
        assert!(!glob_match("sched:*", "syscalls:sys_exit_openat"));
        assert!(!glob_match("sched:sched_switch", "sched:sched_switch2"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("?", ""));
        assert!(glob_match("a*b*c", "aXbYbZc"));
        assert!(!glob_match("a*b*c", "aXbYbZ"));
        // `?` is one character, not one byte.
        assert!(glob_match("s:é?", "s:éü"));
        assert!(!glob_match("s:?", "s:éü"));
        assert!(glob_match("*ü", "s:éü"));
        assert!(glob_match("s:*?", "s:ü"));
    }

    /// Every pattern of up to four of `a b é * ?` against every text of up
    /// to four of `a b é` matches as the definition says (a recursive
    /// reading of it).
    #[test]
    fn globs_match_as_defined_exhaustively() {
        fn defined(p: &[char], t: &[char]) -> bool {
            match p.split_first() {
                None => t.is_empty(),
                Some(('*', rest)) => (0..=t.len()).any(|i| defined(rest, &t[i..])),
                Some((&c, rest)) => t
                    .split_first()
                    .is_some_and(|(&x, t)| (c == '?' || c == x) && defined(rest, t)),
            }
        }
        fn all(alphabet: &[char], max: usize) -> Vec<Vec<char>> {
            let mut out = vec![vec![]];
            let mut last = vec![vec![]];
            for _ in 0..max {
                last = last
                    .iter()
                    .flat_map(|w: &Vec<char>| {
                        alphabet.iter().map(move |&c| {
                            let mut w = w.clone();
                            w.push(c);
                            w
                        })
                    })
                    .collect();
                out.extend(last.iter().cloned());
            }
            out
        }
        let texts = all(&['a', 'b', 'é'], 4);
        for p in all(&['a', 'b', 'é', '*', '?'], 4) {
            let ps: String = p.iter().collect();
            for t in &texts {
                let ts: String = t.iter().collect();
                assert_eq!(glob_match(&ps, &ts), defined(&p, t), "{ps:?} {ts:?}");
            }
        }
    }

    /// A pattern is compared only with the events that begin with its
    /// literal head: an unknown name looks at none, `sched:*` at the
    /// `sched` events, and only a leading wildcard at them all.
    #[test]
    fn matching_looks_only_at_events_sharing_the_patterns_head() {
        let real = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/facts/debian-6.1.json.zst");
        let facts = super::KernelFacts::load(&real).unwrap();
        let looked = |p: &str| facts.events_beginning_with(super::glob_head(p)).count();
        let all = facts.events.len();
        assert!(all > 1000, "{all}");
        assert_eq!(looked("sched:madeup_event_1"), 0);
        assert_eq!(looked("sched:sched_switch"), 1);
        let sched = facts
            .events
            .iter()
            .filter(|e| e.starts_with("sched:"))
            .count();
        assert_eq!(looked("sched:*"), sched);
        assert!(sched > 10 && sched < 100, "{sched}");
        assert_eq!(looked("*:sched_switch"), all);
        assert_eq!(
            facts.matching_events("sched:sched_switch"),
            ["sched:sched_switch"]
        );
        assert_eq!(
            facts.matching_events("*:sched_switch"),
            ["sched:sched_switch"]
        );
        assert_eq!(facts.matching_events("sched:sched_wak*").len(), 4);
        assert!(facts.matching_events("sched:madeup").is_empty());
    }
}
