//! The tests' picture of tracefs ([`Snapshot`]), compared before and after every
//! test that touches tracefs: every buffer's settings and options, every
//! event's enable, filter and trigger, probe definitions, instance names and
//! rollback journals. Test support, not the tool's API.

use std::collections::BTreeMap;
use std::path::Path;

use trace_recipe::apply::journal::JOURNAL_DIR;
use trace_recipe::tracefs::Tracefs;

/// Files compared in every buffer (top level and each instance).
const BUFFER_FILES: &[&str] = &[
    "tracing_on",
    "current_tracer",
    "trace_clock",
    "buffer_size_kb",
    "tracing_cpumask",
    "set_event",
    "set_event_pid",
    "set_event_notrace_pid",
    "set_ftrace_pid",
    "set_ftrace_notrace_pid",
    "set_ftrace_filter",
    "set_ftrace_notrace",
    "set_graph_function",
    "set_graph_notrace",
    "max_graph_depth",
    "tracing_thresh",
];
/// Global files, top level only.
const GLOBAL_FILES: &[&str] = &[
    "kprobe_events",
    "uprobe_events",
    "dynamic_events",
    "saved_cmdlines_size",
];

/// A full picture of tracefs state: every buffer's settings, options, and every
/// event's enable, filter and trigger, plus probe definitions and instance names.
/// Keys are paths relative to tracefs; values are the files' text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot(pub BTreeMap<String, String>);

impl Snapshot {
    /// Reads the snapshot. Files that cannot be read (absent on this kernel, or
    /// refused) are recorded as `<unreadable>`.
    pub fn take(tracefs: &Tracefs) -> Snapshot {
        let mut map = BTreeMap::new();
        let mut read = |rel: String| {
            if tracefs.exists(&rel) {
                let v = tracefs
                    .read(&rel)
                    .unwrap_or_else(|_| "<unreadable>".to_string());
                map.insert(rel, v);
            }
        };
        for f in GLOBAL_FILES {
            read((*f).to_string());
        }
        let instances = tracefs.instances();
        let mut dirs = vec![String::new()];
        dirs.extend(instances.iter().map(|i| format!("instances/{i}/")));
        for dir in &dirs {
            for f in BUFFER_FILES {
                read(format!("{dir}{f}"));
            }
            for opt in tracefs.list(&format!("{dir}options")) {
                read(format!("{dir}options/{opt}"));
            }
            for sys in tracefs.list(&format!("{dir}events")) {
                for ev in tracefs.list(&format!("{dir}events/{sys}")) {
                    for f in ["enable", "filter", "trigger"] {
                        read(format!("{dir}events/{sys}/{ev}/{f}"));
                    }
                }
            }
        }
        map.insert("<instances>".into(), instances.join(" "));
        // Rollback journals are state too: one left behind means a run was not
        // finished, even when tracefs itself looks clean.
        let journals: Vec<String> = trace_recipe::apply::journal::list(Path::new(JOURNAL_DIR))
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        map.insert("<journals>".into(), journals.join(" "));
        Snapshot(map)
    }

    /// Lines describing how `after` differs from `self`: `path: before -> after`.
    pub fn diff(&self, after: &Snapshot) -> Vec<String> {
        let mut out = Vec::new();
        let keys: std::collections::BTreeSet<&String> =
            self.0.keys().chain(after.0.keys()).collect();
        for k in keys {
            let (a, b) = (self.0.get(k), after.0.get(k));
            if a != b {
                out.push(format!(
                    "{k}: {:?} -> {:?}",
                    a.map(|s| s.trim_end()),
                    b.map(|s| s.trim_end())
                ));
            }
        }
        out
    }
}
