//! What a tracer keeps in tracefs rather than in the ring buffer, read before
//! teardown and turned into report.json's `tracer` object.
//!
//! A latency tracer (irqsoff, preemptoff, preemptirqsoff, wakeup, wakeup_rt,
//! wakeup_dl) keeps the largest latency since `tracing_max_latency` was reset
//! (µs) and, in its max buffer, the trace of that worst case, which `trace`
//! shows in the latency format (Documentation/trace/ftrace.rst, "irqsoff" and
//! "wakeup"); hwlat only keeps the number (kernel/trace/trace_hwlat.c). The
//! recorder drains the live buffer, not the max buffer, so that trace is saved
//! here as the kernel prints it.
//!
//! The stack tracer (`[stack]`) keeps the deepest kernel stack seen since
//! `stack_max_size` was reset, with each frame's size, in `stack_trace`
//! (ftrace.rst, "Stack trace").
//!
//! [`save`] copies those files into the output folder (`tracer/`, `stack/`) as
//! read, before the rollback; [`tracer_report`] and [`stack_report`] parse the
//! saved copies, so the numbers of report.json can be checked against the
//! files beside it.

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::output::OutputDir;
use crate::run::RunError;
use crate::tracefs::{Instance, Tracefs};
use crate::validate::{MaxLatencyAt, ValidRecipe};

/// Folder of the output folder holding the tracer's own files, as read.
pub(crate) const TRACER_DIR: &str = "tracer";
/// The saved `tracing_max_latency` (µs, as the kernel prints it).
const MAX_LATENCY_FILE: &str = "tracer/tracing_max_latency.txt";
/// The saved max-latency trace (the `trace` file of a latency tracer).
const MAX_TRACE_FILE: &str = "tracer/max_latency_trace.txt";
/// The saved `stack_trace` table.
const STACK_TRACE_FILE: &str = "stack/stack_trace.txt";
/// The saved `stack_max_size` (bytes).
const STACK_MAX_FILE: &str = "stack/stack_max_size.txt";
/// Largest tracer file read back (a max trace of function entries can be long).
const MAX_READ: u64 = 64 << 20;

/// Tracers whose `trace` shows their max buffer (the worst case's trace):
/// those that set `use_max_tr` (kernel/trace/trace_irqsoff.c, trace_sched_wakeup.c).
const MAX_TRACE_TRACERS: &[&str] = &[
    "irqsoff",
    "preemptoff",
    "preemptirqsoff",
    "wakeup",
    "wakeup_rt",
    "wakeup_dl",
];

/// report.json `tracer`: the result of the run's tracer, for tracers that keep one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct TracerReport {
    /// The tracer (`current_tracer`).
    pub(crate) name: String,
    /// `tracing_max_latency` at the end of the run, in µs: the largest latency
    /// the tracer measured during the run (it was reset to 0 before).
    pub(crate) max_latency_us: Option<u64>,
    /// The max-latency trace (the `trace` file of a latency tracer, in the
    /// kernel's latency format, as `trace-cmd report -l` prints), a file in the
    /// output folder; `null` for tracers without one (hwlat).
    pub(crate) max_latency_trace: Option<String>,
    /// The task the worst case was measured on, `COMM-PID`, from the max
    /// trace's header (`task: ...`).
    pub(crate) task: Option<String>,
    /// The CPU of the worst case, from the max trace's header (`CPU#N`).
    pub(crate) cpu: Option<u32>,
}

/// report.json `stack_tracer`: the deepest kernel stack of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct StackTracerReport {
    /// `stack_max_size`: the most stack, in bytes, any traced function found in use.
    pub(crate) max_stack_bytes: u64,
    /// The frames of that deepest stack, innermost first, as `stack_trace` lists them.
    pub(crate) frames: Vec<StackFrame>,
    /// The table as the kernel printed it, a file in the output folder.
    pub(crate) file: String,
}

/// One frame of the deepest stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct StackFrame {
    /// Bytes of stack in use from this frame to the bottom (`Depth`).
    pub(crate) depth_bytes: u64,
    /// Bytes this frame itself takes (`Size`).
    pub(crate) size_bytes: u64,
    /// The function, `SYMBOL+OFFSET/LENGTH` (`Location`).
    pub(crate) location: String,
}

/// Reads what the run's tracer and the stack tracer kept (see the module doc)
/// into `out`, before the instance `inst` goes away and the rollback resets them.
pub(crate) fn save(
    tracefs: &Tracefs,
    inst: &Instance,
    valid: &ValidRecipe,
    out: &OutputDir,
) -> Result<(), RunError> {
    if valid.stack.is_some() {
        out.create_dir("stack")?;
        out.write_new(STACK_MAX_FILE, &tracefs.read_bytes("stack_max_size")?)?;
        out.write_new(STACK_TRACE_FILE, &tracefs.read_bytes("stack_trace")?)?;
    }
    let Some(t) = &valid.tracer else {
        return Ok(());
    };
    let Some(at) = t.max_latency else {
        return Ok(());
    };
    out.create_dir(TRACER_DIR)?;
    let max = match at {
        MaxLatencyAt::Instance => inst.read_bytes("tracing_max_latency")?,
        MaxLatencyAt::TopLevel => tracefs.read_bytes("tracing_max_latency")?,
    };
    out.write_new(MAX_LATENCY_FILE, &max)?;
    if MAX_TRACE_TRACERS.contains(&t.name.as_str()) {
        out.write_new(MAX_TRACE_FILE, &inst.read_bytes("trace")?)?;
    }
    Ok(())
}

/// report.json `tracer` from the files [`save`] left in the output folder `dir`;
/// `None` when the run's tracer keeps no result.
pub(crate) fn tracer_report(dir: &Path, valid: &ValidRecipe) -> Option<TracerReport> {
    let t = valid.tracer.as_ref().filter(|t| t.max_latency.is_some())?;
    let max_latency_us = read_small(&dir.join(MAX_LATENCY_FILE))
        .and_then(|s| s.split_whitespace().next()?.parse().ok());
    let trace = read_small(&dir.join(MAX_TRACE_FILE));
    let (task, cpu) = trace.as_deref().map(max_trace_header).unwrap_or_default();
    Some(TracerReport {
        name: t.name.clone(),
        max_latency_us,
        max_latency_trace: trace.is_some().then(|| MAX_TRACE_FILE.to_string()),
        task,
        cpu,
    })
}

/// report.json `stack_tracer` from the files [`save`] left in `dir`; `None`
/// without `[stack]` or when they are missing.
pub(crate) fn stack_report(dir: &Path, valid: &ValidRecipe) -> Option<StackTracerReport> {
    valid.stack.as_ref()?;
    let table = read_small(&dir.join(STACK_TRACE_FILE))?;
    let frames = stack_frames(&table);
    let max_stack_bytes = read_small(&dir.join(STACK_MAX_FILE))
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .or_else(|| frames.first().map(|f| f.depth_bytes))?;
    Some(StackTracerReport {
        max_stack_bytes,
        frames,
        file: STACK_TRACE_FILE.to_string(),
    })
}

/// The rows of a `stack_trace` table (kernel/trace/trace_stack.c, `t_show`):
/// `  0)     2512      48   rcu_segcblist_pend_cbs+0x5/0x20`.
fn stack_frames(table: &str) -> Vec<StackFrame> {
    table
        .lines()
        .filter_map(|l| {
            let (index, rest) = l.trim_start().split_once(')')?;
            index.parse::<u32>().ok()?;
            let mut w = rest.split_whitespace();
            Some(StackFrame {
                depth_bytes: w.next()?.parse().ok()?,
                size_bytes: w.next()?.parse().ok()?,
                location: w.next()?.to_string(),
            })
        })
        .collect()
}

/// A regular file of ours, read whole up to [`MAX_READ`] bytes; `None` when missing or unreadable.
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_READ)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The task (`COMM-PID`) and CPU of a latency trace's header:
/// `# latency: 111777 us, #15374/15374, CPU#1 | (M:preempt_rt ...)` and
/// `#    | task: ktimers/1-28 (uid:0 nice:0 policy:1 rt_prio:1)`
/// (kernel/trace/trace.c, `print_trace_header`).
fn max_trace_header(trace: &str) -> (Option<String>, Option<u32>) {
    let header = trace.lines().take_while(|l| l.starts_with('#'));
    let (mut task, mut cpu) = (None, None);
    for l in header {
        if let Some(rest) = l.split("task: ").nth(1) {
            task = rest.split_whitespace().next().map(str::to_string);
        }
        if l.contains("latency: ")
            && let Some(rest) = l.split("CPU#").nth(1)
        {
            cpu = rest
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse().ok());
        }
    }
    (task, cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_max_trace_header_names_the_task_and_cpu() {
        // The header of a wakeup_rt max trace seen in the kernel lab (Debian 6.1 RT).
        let trace = "# tracer: wakeup_rt\n#\n# wakeup_rt latency trace v1.1.5 on 6.1.0-56-rt-amd64\n# --------------------------------------------------------------------\n# latency: 111777 us, #15374/15374, CPU#1 | (M:preempt_rt VP:0, KP:0, SP:0 HP:0 #P:2)\n#    -----------------\n#    | task: ktimers/1-28 (uid:0 nice:0 policy:1 rt_prio:1)\n#    -----------------\n  <idle>-0         1dn.h5..    3us+:        0:120:R   + [001]      28: 98:R ktimers/1\n";
        assert_eq!(
            max_trace_header(trace),
            (Some("ktimers/1-28".into()), Some(1))
        );
        assert_eq!(max_trace_header("# tracer: nop\n"), (None, None));
    }

    #[test]
    fn a_stack_trace_table_becomes_frames() {
        // As the kernel lab's Debian 6.1 RT kernel printed it.
        let table = "        Depth    Size   Location    (3 entries)\n        -----    ----   --------\n  0)     2512      48   rcu_segcblist_pend_cbs+0x5/0x20\n  1)     2464      80   call_rcu+0xd6/0x5f0\n  2)      176     176   entry_SYSCALL_64_after_hwframe+0x6e/0xd8\n";
        let f = stack_frames(table);
        assert_eq!(f.len(), 3);
        assert_eq!(
            f[0],
            StackFrame {
                depth_bytes: 2512,
                size_bytes: 48,
                location: "rcu_segcblist_pend_cbs+0x5/0x20".into()
            }
        );
        assert_eq!(f[2].size_bytes, 176);
        assert!(stack_frames("").is_empty());
    }
}
