//! `status` and `reset`: what differs from a clean boot, what runs left behind,
//! and removing exactly that.
//!
//! A run's instance is named `trace-recipe-NAME-PID`: `status` reports one whose
//! PID is no longer a live trace-recipe process as left behind, and `reset`
//! removes exactly those. Nothing else (other tools' instances, the top level) is
//! ever touched by `reset`. Likewise a run's probes live in probe group
//! `trace_recipe_PID` of kprobe_events / uprobe_events: `status` reports those of
//! dead runs and `reset` removes exactly them (`-:GROUP/EVENT`).

use std::fmt::Write as _;

use std::path::Path;

use crate::apply::journal::{JOURNAL_DIR, Undo};
use crate::apply::sweep::sweep;
use crate::plan::PROBE_GROUP_PREFIX;
use crate::tracefs::{
    FILE_RULES, INSTANCE_PREFIX, Instance, Tracefs, TracefsError, WriteMode, restore_value,
};

/// An instance of ours and whether its run is still alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OurInstance {
    /// Instance name.
    pub(crate) name: String,
    /// The pid in its name.
    pub(crate) pid: Option<u32>,
    /// Whether that pid is a live trace-recipe process (then the instance is in use).
    pub(crate) alive: bool,
}

/// Instances named `trace-recipe-*`, with their owner's liveness.
pub(crate) fn our_instances(tracefs: &Tracefs) -> Vec<OurInstance> {
    tracefs
        .instances()
        .into_iter()
        .filter(|n| n.starts_with(INSTANCE_PREFIX))
        .map(|name| {
            let pid = name.rsplit('-').next().and_then(|p| p.parse().ok());
            let alive = pid.is_some_and(is_trace_recipe);
            OurInstance { name, pid, alive }
        })
        .collect()
}

/// A probe of ours (group `trace_recipe_PID`) and whether its run is alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OurProbe {
    /// `kprobe_events`, `uprobe_events` or `dynamic_events` (fprobes,
    /// tracepoint and event probes).
    pub(crate) file: &'static str,
    /// `trace_recipe_PID`.
    pub(crate) group: String,
    /// The event name.
    pub(crate) event: String,
    /// Whether the run of that pid is a live trace-recipe process.
    pub(crate) alive: bool,
}

/// Probes defined in a `trace_recipe_PID` group, with their owner's liveness.
pub(crate) fn our_probes(tracefs: &Tracefs) -> Vec<OurProbe> {
    let mut out = Vec::new();
    for file in ["kprobe_events", "uprobe_events", "dynamic_events"] {
        let Ok(text) = tracefs.read(file) else {
            continue;
        };
        // dynamic_events lists kprobes and uprobes too: only the kinds that
        // live there alone (`f:`, `t:`, `e:`) are counted from it.
        let own = |line: &str| file != "dynamic_events" || line.starts_with(['f', 't', 'e']);
        for line in text.lines().filter(|l| own(l)) {
            // `p:GROUP/EVENT TARGET ...`
            let Some(name) = line
                .split_whitespace()
                .next()
                .and_then(|w| w.split_once(':'))
                .map(|(_, n)| n)
            else {
                continue;
            };
            let Some((group, event)) = name.split_once('/') else {
                continue;
            };
            let Some(pid) = group.strip_prefix(PROBE_GROUP_PREFIX) else {
                continue;
            };
            out.push(OurProbe {
                file,
                group: group.to_string(),
                event: event.to_string(),
                alive: pid.parse().is_ok_and(is_trace_recipe),
            });
        }
    }
    out
}

fn is_trace_recipe(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|c| c.trim().starts_with("trace-recipe"))
}

/// The `status` text: top-level state that differs from a clean boot, other
/// instances, and anything a trace-recipe run left behind. The bool is true when
/// something of ours was left behind.
pub fn status(tracefs: &Tracefs) -> Result<(String, bool), TracefsError> {
    let mut o = String::new();
    let _ = writeln!(o, "tracefs: {}", tracefs.root().display());
    let top = Instance::top(tracefs);
    let mut differs = Vec::new();
    for rule in FILE_RULES {
        let Some(default) = rule.boot_default else {
            continue;
        };
        // Some files refuse reads on some kernels (set_ftrace_pid without the
        // function tracer): nothing to compare there.
        let Ok(v) = top.read(rule.name) else {
            continue;
        };
        if restore_value(rule.name, &v) != default {
            differs.push(format!(
                "  {}: {} (boot default: {})",
                rule.name,
                one_line(&v),
                if default.is_empty() { "empty" } else { default }
            ));
        }
    }
    for sys in top.list("events") {
        for ev in top.list(&format!("events/{sys}")) {
            let base = format!("events/{sys}/{ev}");
            if let Ok(f) = top.read(&format!("{base}/filter"))
                && f.trim() != "none"
            {
                differs.push(format!("  {base}/filter: {}", one_line(&f)));
            }
            if let Ok(t) = top.read(&format!("{base}/trigger"))
                && t.lines()
                    .any(|l| !l.starts_with('#') && !l.trim().is_empty())
            {
                differs.push(format!("  {base}/trigger: {}", one_line(&t)));
            }
        }
    }
    // Allocated by the first tracer or event since boot, and never freed again
    // (Documentation/trace/ftrace.rst, buffer_size_kb): not something to reset.
    let allocated = top
        .read("buffer_size_kb")
        .ok()
        .and_then(|t| crate::kernel::TopBuffer::parse(&t))
        .filter(|b| b.expanded_size_kb.is_none());
    if let (true, Some(b)) = (differs.is_empty(), allocated) {
        let _ = writeln!(
            o,
            "top level: as after a clean boot, except what user space cannot undo:\n  top-level ring buffer allocated since boot: {} KiB per CPU",
            b.size_kb
        );
    } else if differs.is_empty() {
        let _ = writeln!(o, "top level: as after a clean boot");
    } else {
        let _ = writeln!(o, "top level differs from a clean boot:");
        for d in differs {
            let _ = writeln!(o, "{d}");
        }
        if let Some(b) = allocated {
            let _ = writeln!(
                o,
                "  top-level ring buffer allocated since boot: {} KiB per CPU (user space cannot undo it)",
                b.size_kb
            );
        }
    }
    let ours = our_instances(tracefs);
    let armed = crate::flight::armed_now(tracefs);
    for a in &armed {
        let _ = writeln!(
            o,
            "armed flight recorder (recipe `{}`, armed {}): instances/{}; after a reboot: trace-recipe collect-boot -o DIR",
            crate::untrusted::escape(&a.recipe),
            crate::untrusted::escape(&a.armed_at),
            a.instance
        );
    }
    let others: Vec<String> = tracefs
        .instances()
        .into_iter()
        .filter(|n| !n.starts_with(INSTANCE_PREFIX))
        .filter(|n| !armed.iter().any(|a| &a.instance == n))
        .collect();
    if !others.is_empty() {
        let _ = writeln!(
            o,
            "other instances (not ours, never touched): {}",
            others.join(" ")
        );
    }
    let mut left = false;
    for i in &ours {
        if i.alive {
            let _ = writeln!(
                o,
                "in use by a running trace-recipe (pid {}): instances/{}",
                i.pid.unwrap_or(0),
                i.name
            );
        } else {
            left = true;
            let _ = writeln!(o, "left behind by a trace-recipe run: instances/{}", i.name);
        }
    }
    for j in dead_journals() {
        left = true;
        let _ = writeln!(
            o,
            "journal of a dead run, not rolled back yet: {}",
            j.display()
        );
    }
    for (_, w) in crate::workload::WorkloadRecord::list(Path::new(JOURNAL_DIR)) {
        if !w.run_alive() && w.workload_alive() {
            let _ = writeln!(
                o,
                "workload of dead run {} still running: pid {} (process group {}): {}",
                w.run_pid,
                w.pid,
                w.pid,
                w.command.join(" ")
            );
        }
    }
    for p in our_probes(tracefs) {
        let state = if p.alive {
            "in use by a running trace-recipe"
        } else {
            left = true;
            "left behind by a trace-recipe run"
        };
        let _ = writeln!(o, "{state}: probe {}/{} in {}", p.group, p.event, p.file);
    }
    if left {
        let _ = writeln!(
            o,
            "run `trace-recipe reset` to remove what trace-recipe runs left behind"
        );
    } else {
        let _ = writeln!(o, "nothing left behind by trace-recipe");
    }
    Ok((o, left))
}

/// Journals in [`JOURNAL_DIR`] whose run and guard are both dead (nobody holds
/// their lock), so `reset` would roll them back.
pub(crate) fn dead_journals() -> Vec<std::path::PathBuf> {
    crate::apply::journal::list(Path::new(JOURNAL_DIR))
        .into_iter()
        .filter(|j| crate::apply::journal::lock(j, false).is_some())
        .collect()
}

fn one_line(s: &str) -> String {
    let t: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    if t.len() > 3 {
        format!("{} ... ({} lines)", t[..3].join("; "), t.len())
    } else {
        t.join("; ")
    }
}

/// Rolls back the journals of dead runs, then removes every instance of ours whose
/// run is dead. Returns one line per action; an `Err` line is a failure.
pub(crate) fn reset(tracefs: &Tracefs) -> Vec<Result<String, String>> {
    let mut out: Vec<Result<String, String>> = sweep(Path::new(JOURNAL_DIR))
        .into_iter()
        .map(|r| match r {
            Ok(s) if s.failures.is_empty() => Ok(s.to_string()),
            Ok(s) => Err(s.to_string()),
            Err(e) => Err(e.to_string()),
        })
        .collect();
    // Records of workloads that have ended, left by runs that died.
    for (path, w) in crate::workload::WorkloadRecord::list(Path::new(JOURNAL_DIR)) {
        if !w.run_alive() && !w.workload_alive() {
            let _ = std::fs::remove_file(path);
        }
    }
    for a in crate::flight::armed_now(tracefs) {
        out.push(Ok(format!(
            "kept instances/{}: an armed flight recorder (`trace-recipe collect-boot` releases it)",
            a.instance
        )));
    }
    for i in our_instances(tracefs) {
        let dir = Instance::named(tracefs, &i.name).dir();
        if i.alive {
            out.push(Ok(format!(
                "kept {dir}: in use by running trace-recipe pid {}",
                i.pid.unwrap_or(0)
            )));
            continue;
        }
        let undo = Undo::Rmdir { dir: dir.clone() };
        out.push(
            undo.perform(tracefs)
                .map(|()| format!("removed {dir}"))
                .map_err(|e| e.to_string()),
        );
    }
    // After the instances: a probe event still enabled in one cannot be removed.
    let top = Instance::top(tracefs);
    for p in our_probes(tracefs).into_iter().filter(|p| !p.alive) {
        let line = format!("-:{}/{}", p.group, p.event);
        out.push(
            top.write(p.file, &line, WriteMode::Append)
                .map(|()| format!("removed probe {}/{} from {}", p.group, p.event, p.file))
                .map_err(|e| e.to_string()),
        );
    }
    out
}

/// The hammer: resets all of tracefs to boot defaults, like `trace-cmd reset -a`.
/// Rolls back dead runs' journals, then removes EVERY instance (other tools'
/// too), disables every event, clears every filter, trigger, pid list and
/// function filter, sets the nop tracer, the local clock and all CPUs, removes
/// every probe definition, and turns tracing on. Buffer sizes and options are
/// left as they are. Files this kernel refuses (e.g. set_ftrace_pid without the
/// function tracer) are skipped. Returns one line per action.
pub(crate) fn reset_all(tracefs: &Tracefs) -> Vec<Result<String, String>> {
    let mut out = reset(tracefs);
    let top = Instance::top(tracefs);
    let w = |file: &str, value: &str, mode: WriteMode| {
        top.write(file, value, mode).map_err(|e| e.to_string())
    };
    for name in tracefs.instances() {
        let instance = Instance::named(tracefs, &name);
        // Triggers before the events are switched off (see below).
        clear_event_settings(&instance);
        out.push(
            instance
                .destroy()
                .map(|()| format!("removed {}", instance.dir()))
                .map_err(|e| e.to_string()),
        );
    }
    let _ = w("tracing_on", "0", WriteMode::Replace);
    // Triggers first: an `enable_event` trigger left in place could enable its
    // event again, after `events/enable`, the next time it fires.
    let cleared = clear_event_settings(&top);
    // Writing `events/enable` or `current_tracer` allocates a top-level ring
    // buffer still unexpanded since boot, which nothing can undo: write them only
    // when they differ from what reset wants.
    if top.read("events/enable").is_ok_and(|v| v.trim() != "0") {
        let _ = w("events/enable", "0", WriteMode::Replace);
    }
    out.push(Ok(format!(
        "disabled every event; cleared {cleared} event filters and triggers"
    )));
    let max_cpu = top
        .list("per_cpu")
        .iter()
        .filter_map(|c| c.strip_prefix("cpu")?.parse::<u32>().ok())
        .max();
    // Every file with a boot default, except those handled above and below
    // (tracing_on last, events through events/enable, probes by definition).
    let handled = [
        "tracing_on",
        "set_event",
        "kprobe_events",
        "uprobe_events",
        "dynamic_events",
    ];
    for rule in FILE_RULES.iter().filter(|r| !handled.contains(&r.name)) {
        let Some(default) = rule.boot_default else {
            continue;
        };
        // Only what differs is written: `current_tracer` allocates an
        // unexpanded top-level ring buffer even when set to what it is.
        if top
            .read(rule.name)
            .is_ok_and(|v| restore_value(rule.name, &v) != default)
            && w(rule.name, default, WriteMode::Replace).is_ok()
        {
            out.push(Ok(format!("reset {}", rule.name)));
        }
    }
    let all_cpus: Vec<u32> = (0..=max_cpu.unwrap_or(0)).collect();
    let mask = crate::validate::cpumask_hex(&all_cpus);
    if top.exists("tracing_cpumask") && w("tracing_cpumask", &mask, WriteMode::Replace).is_ok() {
        out.push(Ok("reset tracing_cpumask".to_string()));
    }
    for file in ["kprobe_events", "uprobe_events", "dynamic_events"] {
        if top.read(file).is_ok_and(|t| !t.trim().is_empty()) {
            out.push(
                w(file, "", WriteMode::Replace).map(|()| format!("removed every probe in {file}")),
            );
        }
    }
    out.push(w("tracing_on", "1", WriteMode::Replace).map(|()| "tracing_on = 1".to_string()));
    out
}

/// Clears every event filter and trigger of `instance`; returns how many were set.
fn clear_event_settings(instance: &Instance) -> usize {
    let mut n = 0;
    for sys in instance.list("events") {
        for ev in instance.list(&format!("events/{sys}")) {
            let base = format!("events/{sys}/{ev}");
            if instance
                .read(&format!("{base}/filter"))
                .is_ok_and(|f| f.trim() != "none")
            {
                n += 1;
                let _ = instance.write(&format!("{base}/filter"), "0", WriteMode::Replace);
            }
            let triggers = instance
                .read(&format!("{base}/trigger"))
                .unwrap_or_default();
            for line in triggers
                .lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            {
                n += 1;
                let _ = instance.write(
                    &format!("{base}/trigger"),
                    &trigger_removal(line),
                    WriteMode::Append,
                );
            }
        }
    }
    n
}

/// The `!...` command that removes a trigger as its `trigger` file lists it
/// (`traceoff:count=3 if prio > 0` → `!traceoff`; `hist:keys=pid:... [active]`
/// → `!hist:keys=pid:...`), per Documentation/trace/events.rst section 6.
fn trigger_removal(listed: &str) -> String {
    let spec = listed.split(" [").next().unwrap_or(listed);
    let spec = spec.split(" if ").next().unwrap_or(spec).trim();
    let kept: Vec<&str> = spec
        .split(':')
        .filter(|part| !part.starts_with("count="))
        .collect();
    format!("!{}", kept.join(":"))
}

#[cfg(test)]
mod tests {
    use super::trigger_removal;

    #[test]
    fn trigger_removals_follow_the_listing() {
        assert_eq!(trigger_removal("traceoff:count=3 if prio > 0"), "!traceoff");
        assert_eq!(
            trigger_removal("enable_event:sched:sched_wakeup:unlimited"),
            "!enable_event:sched:sched_wakeup:unlimited"
        );
        assert_eq!(
            trigger_removal("hist:keys=pid:vals=hitcount:sort=hitcount:size=2048 [active]"),
            "!hist:keys=pid:vals=hitcount:sort=hitcount:size=2048"
        );
    }
}
