//! `KernelFacts`: what the running kernel's tracefs offers, read once before
//! validation (events, tracers, clocks, CPUs, options, probe support).
//!
//! Read-only: nothing here writes tracefs. Event formats are read on demand from
//! `events/SYSTEM/EVENT/format` (Documentation/trace/events.rst section 3).

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

use tracedat::EventFormat;

use crate::tracefs::{Tracefs, TracefsError, bracketed, words};

/// Facts about the running kernel's ftrace, as the validator needs them.
#[derive(Debug)]
pub struct KernelFacts {
    /// `uname -r`.
    pub release: String,
    /// Every `system:event` in `available_events`.
    pub events: BTreeSet<String>,
    /// Tracers in `available_tracers` (top level).
    pub tracers: Vec<String>,
    /// Clocks in `trace_clock`.
    pub clocks: Vec<String>,
    /// The default (current top-level) clock.
    pub default_clock: String,
    /// CPU numbers that have a `per_cpu/cpuN` directory.
    pub cpus: Vec<u32>,
    /// Names under `options/` (top level).
    pub options: BTreeSet<String>,
    /// `kprobe_events` exists (CONFIG_KPROBE_EVENTS).
    pub has_kprobe_events: bool,
    /// `uprobe_events` exists (CONFIG_UPROBE_EVENTS).
    pub has_uprobe_events: bool,
    /// Physical memory in KiB (from /proc/meminfo), to bound buffer sizes.
    pub mem_total_kb: u64,
    /// `snapshot` exists (CONFIG_TRACER_SNAPSHOT).
    pub has_snapshot: bool,
    tracefs: Tracefs,
    formats: RefCell<BTreeMap<String, Option<EventFormat>>>,
    kernel_symbols: OnceCell<Option<BTreeSet<String>>>,
    filter_functions: OnceCell<Result<FilterFunctions, String>>,
    instance: OnceCell<Option<InstanceFacts>>,
}

/// `available_filter_functions`: the functions the function tracers can trace.
#[derive(Debug, Clone, Default)]
pub struct FilterFunctions {
    /// Every function name (a name in several modules appears once).
    pub names: BTreeSet<String>,
    /// Module name → its functions (lines `NAME [MODULE]`).
    pub modules: BTreeMap<String, BTreeSet<String>>,
}

/// What a fresh instance offers, which can be less than the top level
/// (tracers without `allow_instances`, their options and files).
#[derive(Debug, Clone, Default)]
pub struct InstanceFacts {
    /// The instance's `available_tracers`.
    pub tracers: Vec<String>,
    /// Names under the instance's `options/` (nop tracer active).
    pub options: BTreeSet<String>,
    /// Files at the instance's root (`set_graph_function`, `max_graph_depth`, ...).
    pub files: BTreeSet<String>,
}

impl KernelFacts {
    /// Reads the facts from a live tracefs. Errors: a core tracefs file is unreadable.
    pub fn read(tracefs: &Tracefs) -> Result<KernelFacts, TracefsError> {
        let events = tracefs
            .read("available_events")?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        let clock_text = tracefs.read("trace_clock")?;
        let mut cpus: Vec<u32> = std::fs::read_dir(tracefs.path("per_cpu"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        cpus.sort_unstable();
        let options = std::fs::read_dir(tracefs.path("options"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        let mem_total_kb = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(u64::MAX);
        Ok(KernelFacts {
            release: rustix::system::uname()
                .release()
                .to_string_lossy()
                .into_owned(),
            events,
            tracers: words(&tracefs.read("available_tracers")?),
            clocks: words(&clock_text),
            default_clock: bracketed(&clock_text).unwrap_or("local").to_string(),
            cpus,
            options,
            has_kprobe_events: tracefs.exists("kprobe_events"),
            has_uprobe_events: tracefs.exists("uprobe_events"),
            mem_total_kb,
            has_snapshot: tracefs.exists("snapshot"),
            tracefs: tracefs.clone(),
            formats: RefCell::new(BTreeMap::new()),
            kernel_symbols: OnceCell::new(),
            filter_functions: OnceCell::new(),
            instance: OnceCell::new(),
        })
    }

    /// Whether this kernel has hist triggers (CONFIG_HIST_TRIGGERS): events have a
    /// `hist` file. Looks at the first few events of `available_events`.
    pub fn has_hist_triggers(&self) -> bool {
        self.events.iter().take(8).any(|e| {
            let (sys, ev) = e.split_once(':').unwrap_or((e, ""));
            self.tracefs.exists(&format!("events/{sys}/{ev}/hist"))
        })
    }

    /// Whether top-level file `rel` exists (a feature probe, e.g. `set_graph_function`).
    pub fn has_file(&self, rel: &str) -> bool {
        self.tracefs.exists(rel)
    }

    /// Function symbols of the running kernel from /proc/kallsyms (types `t`/`T`),
    /// as `NAME` and, for module functions, also `MODULE:NAME` (kprobe target
    /// syntax). `None` when /proc/kallsyms cannot be read. Read on first use.
    pub fn kernel_symbols(&self) -> Option<&BTreeSet<String>> {
        self.kernel_symbols
            .get_or_init(|| {
                let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
                let mut set = BTreeSet::new();
                for line in text.lines() {
                    let mut w = line.split_whitespace();
                    let (_, ty, name) = (w.next(), w.next()?, w.next()?);
                    if !matches!(ty, "t" | "T") {
                        continue;
                    }
                    if let Some(m) = w
                        .next()
                        .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'))
                    {
                        set.insert(format!("{m}:{name}"));
                    }
                    set.insert(name.to_string());
                }
                (!set.is_empty()).then_some(set)
            })
            .as_ref()
    }

    /// `available_filter_functions`, read on first use. `Err` holds why it cannot
    /// be read (e.g. `Operation not permitted` when the kernel refuses function
    /// tracing), as text.
    pub fn filter_functions(&self) -> Result<&FilterFunctions, &str> {
        self.filter_functions
            .get_or_init(|| {
                let text =
                    self.tracefs
                        .read("available_filter_functions")
                        .map_err(|e| match e {
                            TracefsError::Read { source, .. } => errno_text(&source),
                            other => other.to_string(),
                        })?;
                let mut f = FilterFunctions::default();
                for line in text.lines() {
                    let mut w = line.split_whitespace();
                    let Some(name) = w.next() else { continue };
                    if let Some(m) = w
                        .next()
                        .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'))
                    {
                        f.modules
                            .entry(m.to_string())
                            .or_default()
                            .insert(name.to_string());
                    }
                    f.names.insert(name.to_string());
                }
                Ok(f)
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// What an instance offers, learnt once from a scratch instance
    /// (`instances/trace-recipe-probe-PID`, created and removed at once; `reset`
    /// removes it should this process die in between). `None` when it cannot be
    /// created (not root, no instances).
    pub fn instance_facts(&self) -> Option<&InstanceFacts> {
        self.instance
            .get_or_init(|| {
                let dir = format!(
                    "instances/{}probe-{}",
                    crate::tracefs::INSTANCE_PREFIX,
                    std::process::id()
                );
                self.tracefs.mkdir(&dir).ok()?;
                let list = |rel: &str| -> BTreeSet<String> {
                    std::fs::read_dir(self.tracefs.path(rel))
                        .map(|rd| {
                            rd.filter_map(|e| e.ok())
                                .filter_map(|e| e.file_name().into_string().ok())
                                .collect()
                        })
                        .unwrap_or_default()
                };
                let facts = InstanceFacts {
                    tracers: self
                        .tracefs
                        .read(&format!("{dir}/available_tracers"))
                        .map(|t| words(&t))
                        .unwrap_or_default(),
                    options: list(&format!("{dir}/options")),
                    files: list(&dir),
                };
                let _ = self.tracefs.rmdir(&dir);
                Some(facts)
            })
            .as_ref()
    }

    /// The format of `system:event`, read from tracefs on first use; `None` when the
    /// event does not exist or its format cannot be read or parsed.
    pub fn format(&self, event: &str) -> Option<EventFormat> {
        if let Some(f) = self.formats.borrow().get(event) {
            return f.clone();
        }
        let parsed = event.split_once(':').and_then(|(system, name)| {
            let text = self
                .tracefs
                .read(&format!("events/{system}/{name}/format"))
                .ok()?;
            EventFormat::parse(system, &text).ok()
        });
        self.formats
            .borrow_mut()
            .insert(event.to_string(), parsed.clone());
        parsed
    }

    /// Events matching a `system:event` glob (`*`, `?`), sorted.
    pub fn matching_events(&self, pattern: &str) -> Vec<&str> {
        self.events
            .iter()
            .map(String::as_str)
            .filter(|e| glob_match(pattern, e))
            .collect()
    }
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

/// Shell-style glob match of `text` against `pattern` (`*` any run, `?` one char).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs_match_like_the_shell() {
        assert!(glob_match("sched:*", "sched:sched_switch"));
        assert!(glob_match("sched:sched_?witch", "sched:sched_switch"));
        assert!(glob_match("*:sys_exit_open*", "syscalls:sys_exit_openat"));
        assert!(!glob_match("sched:*", "syscalls:sys_exit_openat"));
        assert!(!glob_match("sched:sched_switch", "sched:sched_switch2"));
    }
}
