//! What this kernel can trace: `events [GLOB] [--fields] [--facts FILE]` and
//! `functions GLOB`. Read-only: nothing here writes tracefs.
//!
//! Events come from `available_events` and each event's
//! `events/SYSTEM/EVENT/format` (Documentation/trace/events.rst section 3), or
//! from a fact file (JSON). Functions come from `available_filter_functions`,
//! or, where the kernel refuses the function tracer, from /proc/kallsyms (text
//! symbols: what kprobes can attach to). Each listing says what it could not read.

use std::path::Path;

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
    /// Events matching the glob, sorted.
    pub events: Vec<EventInfo>,
    /// What could not be read (files, and why).
    pub unreadable: Vec<String>,
}

/// The events of this kernel matching `glob` (`*` when `None`), with their
/// fields when `fields`.
pub fn events_live(facts: &KernelFacts, glob: Option<&str>, fields: bool) -> EventsJson {
    let mut out = EventsJson {
        format_version: crate::format::FORMAT_VERSION,
        source: "tracefs".into(),
        kernel_release: Some(facts.release.clone()),
        events: Vec::new(),
        unreadable: Vec::new(),
    };
    for name in facts.matching_events(&pattern(glob)) {
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

/// The events of a fact file (JSON) matching `glob`. Reads, leniently:
/// `release` (or `kernel_release`); `events` as a list of `system:event` names
/// or an object keyed by them; fields from `formats.NAME.fields` or
/// `events.NAME.fields`, each with `name` and `type` (or `type_name`), and
/// optional `size` and `signed`. Errors: the file cannot be read or is not JSON.
pub fn events_from_facts(
    path: &Path,
    glob: Option<&str>,
    fields: bool,
) -> Result<EventsJson, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read fact file {}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a JSON fact file: {e}", path.display()))?;
    let mut out = EventsJson {
        format_version: crate::format::FORMAT_VERSION,
        source: path.display().to_string(),
        kernel_release: v
            .get("release")
            .or_else(|| v.get("kernel_release"))
            .and_then(|r| r.as_str())
            .map(str::to_string),
        events: Vec::new(),
        unreadable: Vec::new(),
    };
    let mut names: Vec<String> = match v.get("events") {
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .filter_map(|e| e.as_str().map(str::to_string))
            .collect(),
        Some(serde_json::Value::Object(o)) => o.keys().cloned().collect(),
        _ => {
            out.unreadable
                .push(format!("{}: has no `events` list", path.display()));
            Vec::new()
        }
    };
    names.sort();
    let pat = pattern(glob);
    for name in names.into_iter().filter(|n| glob_match(&pat, n)) {
        let mut e = EventInfo {
            name: name.clone(),
            fields: None,
            error: None,
        };
        if fields {
            let list = v
                .get("formats")
                .and_then(|f| f.get(&name))
                .or_else(|| v.get("events").and_then(|f| f.get(&name)))
                .and_then(|f| f.get("fields"))
                .and_then(|f| f.as_array());
            match list {
                Some(list) => {
                    e.fields = Some(
                        list.iter()
                            .filter_map(|f| {
                                Some(FieldInfo {
                                    name: f.get("name")?.as_str()?.to_string(),
                                    type_name: f
                                        .get("type")
                                        .or_else(|| f.get("type_name"))
                                        .and_then(|t| t.as_str())
                                        .unwrap_or("?")
                                        .to_string(),
                                    size: f
                                        .get("size")
                                        .and_then(|s| s.as_u64())
                                        .map(|s| s as usize),
                                    signed: f.get("signed").and_then(|s| s.as_bool()),
                                })
                            })
                            .collect(),
                    )
                }
                None => {
                    let why = format!("{name}: the fact file has no fields for it");
                    out.unreadable.push(why.clone());
                    e.error = Some(why);
                }
            }
        }
        out.events.push(e);
    }
    Ok(out)
}

/// `events` as text: one event per line, fields indented under it as
/// `TYPE NAME (SIZE bytes, signed)`, then what could not be read.
pub fn events_text(e: &EventsJson) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    for ev in &e.events {
        let _ = writeln!(o, "{}", ev.name);
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
            let _ = writeln!(o, "    {} {}{extra}", f.type_name, f.name);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fact_file_events_and_fields() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("facts.json");
        std::fs::write(
            &p,
            r#"{"release":"6.1.0","events":["sched:sched_switch","irq:irq_handler_entry"],
               "formats":{"sched:sched_switch":{"fields":[{"name":"prev_pid","type":"pid_t","size":4,"signed":true}]}}}"#,
        )
        .unwrap();
        let e = events_from_facts(&p, Some("sched_*"), true).unwrap();
        assert_eq!(e.kernel_release.as_deref(), Some("6.1.0"));
        assert_eq!(e.events.len(), 1);
        let f = e.events[0].fields.as_ref().unwrap();
        assert_eq!(f[0].name, "prev_pid");
        assert_eq!(f[0].type_name, "pid_t");
        let all = events_from_facts(&p, None, true).unwrap();
        assert_eq!(all.events.len(), 2);
        assert_eq!(all.unreadable.len(), 1, "{:?}", all.unreadable);
        assert!(events_from_facts(&dir.path().join("none.json"), None, false).is_err());
    }
}
