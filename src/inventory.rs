//! What this kernel can trace: `events [GLOB] [--fields] [--facts FILE]` and
//! `functions GLOB`. Read-only: nothing here writes tracefs.
//!
//! Events come from `available_events` and each event's
//! `events/SYSTEM/EVENT/format` (Documentation/trace/events.rst section 3), or
//! from a fact file (`trace-recipe facts`). Functions come from `available_filter_functions`,
//! or, where the kernel refuses the function tracer, from /proc/kallsyms (text
//! symbols: what kprobes can attach to). Each listing says what it could not read.

use schemars::JsonSchema;
use serde::Serialize;

use crate::kernel::{KernelFacts, glob_match};

/// One field of an event's format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct FieldInfo {
    /// Field name, as filters name it.
    pub name: String,
    /// Declared C type, e.g. `pid_t`, `char[16]`, `__data_loc char[]`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Size in bytes (`null` when the source does not say).
    pub size: Option<usize>,
    /// Whether the value is signed (`null` when the source does not say).
    pub signed: Option<bool>,
}

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct EventInfo {
    /// `system:event`.
    pub name: String,
    /// Its own fields (not the common ones); `null` without `--fields` or when
    /// they could not be read (then `error` says why).
    pub fields: Option<Vec<FieldInfo>>,
    /// Why the fields could not be read.
    pub error: Option<String>,
}

/// `events --format json`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EventsJson {
    /// Layout version.
    pub format_version: u32,
    /// `tracefs` or the fact file's path.
    pub source: String,
    /// Kernel release, when known.
    pub kernel_release: Option<String>,
    /// Events matching the glob, sorted; when it has no wildcard and names no
    /// event, the events whose name contains it (`substring`).
    pub events: Vec<EventInfo>,
    /// Whether `events` are substring matches: the pattern matched no name.
    #[serde(default)]
    pub substring: bool,
    /// When nothing matched at all: up to three event names near the pattern.
    #[serde(default)]
    pub suggestions: Vec<String>,
    /// What could not be read (files, and why).
    pub unreadable: Vec<String>,
}

/// The events of a kernel (`facts`, read from `source`: `tracefs` or a fact
/// file) matching `glob` (`*` when `None`), with their fields when `fields`.
pub fn events(facts: &KernelFacts, source: &str, glob: Option<&str>, fields: bool) -> EventsJson {
    let mut out = EventsJson {
        format_version: crate::output::FORMAT_VERSION,
        source: source.into(),
        kernel_release: Some(facts.release.clone()),
        events: Vec::new(),
        substring: false,
        suggestions: Vec::new(),
        unreadable: Vec::new(),
    };
    let mut names = facts.matching_events(&pattern(glob));
    if let Some(g) = glob.filter(|g| names.is_empty() && !g.contains(['*', '?', '['])) {
        names = facts.matching_events(&format!("*{g}*"));
        out.substring = !names.is_empty();
        if names.is_empty() {
            // A pattern without `:` is compared with event names alone.
            let pool: Vec<&str> = facts
                .events
                .iter()
                .map(|e| match g.contains(':') {
                    true => e.as_str(),
                    false => e.split_once(':').map_or(e.as_str(), |(_, ev)| ev),
                })
                .collect();
            out.suggestions = crate::suggest::nearest_n(g, pool, 3)
                .into_iter()
                .map(str::to_string)
                .collect();
        }
    }
    for name in names {
        let mut e = EventInfo {
            name: name.to_string(),
            fields: None,
            error: None,
        };
        if fields {
            match facts.format(name) {
                Some(f) => {
                    e.fields = Some(
                        f.fields
                            .iter()
                            .map(|f| FieldInfo {
                                name: f.name.clone(),
                                type_name: type_text(&f.type_name, f.array_len),
                                size: Some(f.size),
                                signed: Some(f.signed),
                            })
                            .collect(),
                    )
                }
                None => {
                    let (sys, ev) = name.split_once(':').unwrap_or((name, ""));
                    let why = format!("events/{sys}/{ev}/format: cannot be read or parsed");
                    out.unreadable.push(why.clone());
                    e.error = Some(why);
                }
            }
        }
        out.events.push(e);
    }
    out
}

/// A glob for `system:event` names: a glob without `:` matches the event name
/// in any system.
fn pattern(glob: Option<&str>) -> String {
    match glob {
        None => "*".into(),
        Some(g) if g.contains(':') => g.into(),
        Some(g) => format!("*:{g}"),
    }
}

fn type_text(type_name: &str, array_len: Option<usize>) -> String {
    match array_len {
        Some(n) if n > 0 && !type_name.ends_with(']') => format!("{type_name}[{n}]"),
        _ => type_name.to_string(),
    }
}

/// `events` as text: one event per line, fields indented under it as
/// `TYPE NAME (SIZE bytes, signed)`, then what could not be read. Names and
/// types (a fact file may be someone else's) are [escaped](crate::untrusted::escape).
pub fn events_text(e: &EventsJson) -> String {
    use crate::untrusted::escape;
    use std::fmt::Write as _;
    let mut o = String::new();
    for ev in &e.events {
        let _ = writeln!(o, "{}", escape(&ev.name));
        for f in ev.fields.iter().flatten() {
            let mut extra = Vec::new();
            match f.size {
                Some(1) => extra.push("1 byte".into()),
                Some(s) => extra.push(format!("{s} bytes")),
                None => {}
            }
            if f.signed == Some(true) {
                extra.push("signed".into());
            }
            let extra = match extra.is_empty() {
                true => String::new(),
                false => format!("  ({})", extra.join(", ")),
            };
            let _ = writeln!(o, "    {} {}{extra}", escape(&f.type_name), escape(&f.name));
        }
        if let Some(err) = &ev.error {
            let _ = writeln!(o, "    (fields unknown: {err})");
        }
    }
    o
}

/// Functions matching `glob`, and where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Functions {
    /// `available_filter_functions` or `/proc/kallsyms`.
    pub source: &'static str,
    /// Matching names, sorted, each once.
    pub names: Vec<String>,
    /// What could not be read, and what that means for the list.
    pub unreadable: Vec<String>,
}

/// Functions matching `glob`: from `available_filter_functions` (what the
/// function tracers can trace), else from /proc/kallsyms text symbols (what
/// kprobes can attach to), saying why.
pub fn functions(facts: &KernelFacts, glob: &str) -> Functions {
    match facts.filter_functions() {
        Ok(f) => Functions {
            source: "available_filter_functions",
            names: f
                .names
                .iter()
                .filter(|n| glob_match(glob, n))
                .cloned()
                .collect(),
            unreadable: Vec::new(),
        },
        Err(why) => {
            let mut unreadable = vec![format!(
                "available_filter_functions: {why}; this kernel refuses the function tracer, so these are /proc/kallsyms text symbols (kprobe targets), not function-tracer filters"
            )];
            let names = match facts.kernel_symbols() {
                Some(s) => s
                    .iter()
                    .filter(|n| !n.contains(':') && glob_match(glob, n))
                    .cloned()
                    .collect(),
                None => {
                    unreadable.push("/proc/kallsyms: cannot be read".into());
                    Vec::new()
                }
            };
            Functions {
                source: "/proc/kallsyms",
                names,
                unreadable,
            }
        }
    }
}
