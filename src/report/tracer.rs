//! What a tracer keeps in tracefs rather than in the ring buffer, as the run
//! saved it in the output folder, turned into report.json's `tracer`,
//! `stack_tracer`, `function_profile` and `hist` objects.
//!
//! A latency tracer (irqsoff, preemptoff, preemptirqsoff, wakeup, wakeup_rt,
//! wakeup_dl) keeps the largest latency since `tracing_max_latency` was reset
//! (µs) and, in its max buffer, the trace of that worst case, which `trace`
//! shows in the latency format (Documentation/trace/ftrace.rst, "irqsoff" and
//! "wakeup"); hwlat only keeps the number (kernel/trace/trace_hwlat.c). The
//! recorder drains the live buffer, not the max buffer, so that trace is saved
//! as the kernel prints it. At each new maximum the kernel swaps the live
//! buffer into the max buffer (kernel/trace/trace.c, `update_max_tr`), so with
//! such a tracer the recorder reads the live buffer only once tracing is off
//! ([`crate::record::Readers::start`]): reading consumes, and a reader running
//! meanwhile would empty the worst case's trace before the swap.
//!
//! The stack tracer (`[stack]`) keeps the deepest kernel stack seen since
//! `stack_max_size` was reset, with each frame's size, in `stack_trace`
//! (ftrace.rst, "Stack trace").
//!
//! The function profiler keeps per CPU, per function, its hits and time in
//! `trace_stat/function<CPU>` (Documentation/trace/ftrace.rst,
//! "function_profile_enabled"); the run copies each to `profile/`,
//! [`function_profile`] merges them.
//!
//! A hist trigger keeps its table in the event's `hist` file
//! (Documentation/trace/histogram.rst); `run` saves each as
//! `hist/SYSTEM-EVENT.txt` ([`hist_file`]) and [`hist_report`] parses them.
//!
//! The output stage of `run` (`run/output.rs`: `save_tracer_files`,
//! `save_tables`) copies those files into the output folder (`tracer/`,
//! `stack/`, `profile/`, `hist/`) as read, before the rollback, under the names
//! below; [`tracer_report`] and [`stack_report`] parse the saved copies, so the
//! numbers of report.json can be checked against the files beside it.

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validate::ValidRecipe;

/// The saved `tracing_max_latency` (µs, as the kernel prints it).
pub(crate) const MAX_LATENCY_FILE: &str = "tracer/tracing_max_latency.txt";
/// The saved max-latency trace (the `trace` file of a latency tracer).
pub(crate) const MAX_TRACE_FILE: &str = "tracer/max_latency_trace.txt";
/// The saved `stack_trace` table.
pub(crate) const STACK_TRACE_FILE: &str = "stack/stack_trace.txt";
/// The saved `stack_max_size` (bytes).
pub(crate) const STACK_MAX_FILE: &str = "stack/stack_max_size.txt";
/// Largest tracer file read back (a max trace of function entries can be long).
const MAX_READ: u64 = 64 << 20;

/// report.json `tracer`: the result of the run's tracer, for tracers that keep one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct TracerReport {
    /// The tracer (`current_tracer`).
    pub(crate) name: String,
    /// `tracing_max_latency` at the end of the run, in µs: the largest latency
    /// the tracer measured during the run (it was reset to 0 before). For hwlat,
    /// the largest inner or outer gap of its samples (its `tracing_max_latency`
    /// reads 1000 times too small); `null` for osnoise and timerlat, whose results
    /// are their per-CPU tables.
    pub(crate) max_latency_us: Option<u64>,
    /// The max-latency trace (the `trace` file of a latency tracer, in the
    /// kernel's latency format, as `trace-cmd report -l` prints), a file in the
    /// output folder (`tracer/max_latency_trace.txt`); `null` for tracers
    /// without one (hwlat) and when the max buffer held no events (no latency
    /// was measured).
    pub(crate) max_latency_trace: Option<String>,
    /// The task the worst case was measured on, `COMM-PID`, from the max
    /// trace's header (`task: ...`).
    pub(crate) task: Option<String>,
    /// The CPU of the worst case, from the max trace's header (`CPU#N`).
    pub(crate) cpu: Option<u32>,
    /// hwlat: per CPU, its samples (from the trace's `hwlat` entries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) hwlat: Vec<crate::analysis::HwlatCpu>,
    /// osnoise: per CPU, its periods (from the trace's `osnoise` entries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) osnoise: Vec<crate::analysis::OsnoiseCpu>,
    /// timerlat: per CPU, the IRQ and thread latencies (from the trace's `timerlat` entries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) timerlat: Vec<crate::analysis::TimerlatCpu>,
}

/// Tracers whose samples are entries of their own in the ring buffer, summed
/// per CPU into report.json `tracer` (see `analysis/noise.rs`).
const SAMPLING_TRACERS: &[&str] = &["hwlat", "osnoise", "timerlat"];

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

/// report.json `tracer` from the files the run saved in the output folder `dir`
/// and, for hwlat, osnoise and timerlat, the per-CPU tables of the trace's
/// analysis `noise`; `None` when the run's tracer keeps no result.
pub(crate) fn tracer_report(
    dir: &Path,
    valid: &ValidRecipe,
    noise: &crate::analysis::NoiseTables,
) -> Option<TracerReport> {
    let t = valid
        .tracer
        .as_ref()
        .filter(|t| t.max_latency.is_some() || SAMPLING_TRACERS.contains(&t.name.as_str()))?;
    let mut max_latency_us: Option<u64> = read_small(&dir.join(MAX_LATENCY_FILE))
        .and_then(|s| s.split_whitespace().next()?.parse().ok());
    // hwlat stores its µs samples where the file expects ns, so
    // `tracing_max_latency` shows them divided by 1000 (kernel/trace/trace_hwlat.c,
    // `get_sample`; trace.c prints the file with `nsecs_to_usecs`): the
    // largest inner or outer gap of its entries is the exact figure.
    // osnoise and timerlat keep the file in ns as it expects, but kernels
    // older than 6.3 and its stable updates of April 2023 ("tracing/osnoise:
    // Fix notify new tracing_max_latency", "tracing/timerlat: Notify new max
    // thread latency") leave it alone: their entries give the same figure,
    // the noisiest period and the largest thread latency.
    let from_entries = match t.name.as_str() {
        "hwlat" => noise
            .hwlat
            .iter()
            .map(|c| c.max_inner_us.max(c.max_outer_us))
            .max(),
        "osnoise" => noise.osnoise.iter().map(|c| c.max_noise_us).max(),
        "timerlat" => noise.timerlat.iter().map(|c| c.thread.max_ns / 1000).max(),
        _ => None,
    };
    if t.name == "hwlat" {
        max_latency_us = max_latency_us.map(|ms| ms.saturating_mul(1000));
    }
    max_latency_us = from_entries.or(max_latency_us);
    let trace = read_small(&dir.join(MAX_TRACE_FILE));
    let (task, cpu) = trace.as_deref().map(max_trace_header).unwrap_or_default();
    // The kernel prints the latency header only over a max buffer with
    // entries (none when no latency was measured).
    let has_trace = trace
        .as_deref()
        .is_some_and(|t| t.contains("\n# latency: "));
    Some(TracerReport {
        name: t.name.clone(),
        max_latency_us,
        max_latency_trace: has_trace.then(|| MAX_TRACE_FILE.to_string()),
        task,
        cpu,
        hwlat: noise.hwlat.clone(),
        osnoise: noise.osnoise.clone(),
        timerlat: noise.timerlat.clone(),
    })
}

/// report.json `stack_tracer` from the files the run saved in `dir`; `None`
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

/// Functions kept in report.json `function_profile` (the most total time first).
const PROFILE_ROWS: usize = 100;

/// report.json `function_profile[]`: one function, over every CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct ProfiledFunction {
    /// The function.
    pub(crate) function: String,
    /// Calls, all CPUs (`Hit`).
    pub(crate) hits: u64,
    /// Time in it, µs, all CPUs (`Time`); `null` on kernels that count hits only
    /// (no function_graph tracer).
    pub(crate) total_us: Option<f64>,
    /// `total_us / hits`.
    pub(crate) avg_us: Option<f64>,
    /// Variance of one call's time, µs² (the kernel's `s^2`), pooled over CPUs.
    pub(crate) s2_us: Option<f64>,
}

/// One row of a `trace_stat/function<CPU>` table.
#[derive(Debug, Clone, PartialEq)]
struct ProfileRow {
    function: String,
    hits: u64,
    time_us: Option<f64>,
    s2_us: Option<f64>,
}

/// The rows of one `trace_stat/functionN` table (kernel/trace/ftrace.c,
/// `function_stat_show`): `  NAME   HIT   TIME us   AVG us   S2 us`, or
/// `  NAME   HIT` without the graph tracer; the two header lines are skipped.
fn profile_rows(table: &str) -> Vec<ProfileRow> {
    table
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().filter(|w| *w != "us").collect();
            let hits = w.get(1)?.parse().ok()?;
            let num = |i: usize| w.get(i).and_then(|v| v.parse::<f64>().ok());
            Some(ProfileRow {
                function: w[0].to_string(),
                hits,
                time_us: num(2),
                s2_us: num(4),
            })
        })
        .collect()
}

/// report.json `function_profile`: the per-CPU tables the run saved in `dir`'s
/// `profile/` (there only with `function_profile = true`) merged by function
/// (hits and times summed, variances pooled), the most total time (else hits)
/// first.
pub(crate) fn function_profile(dir: &Path) -> Vec<ProfiledFunction> {
    let Ok(entries) = std::fs::read_dir(dir.join("profile")) else {
        return Vec::new();
    };
    // Per function: (hits, time, sum of squares of call times).
    let mut merged: std::collections::BTreeMap<String, (u64, Option<f64>, Option<f64>)> =
        Default::default();
    for e in entries.flatten() {
        let Some(text) = read_small(&e.path()) else {
            continue;
        };
        for r in profile_rows(&text) {
            let m = merged
                .entry(r.function)
                .or_insert((0, Some(0.0), Some(0.0)));
            m.0 += r.hits;
            m.1 = m.1.zip(r.time_us).map(|(a, b)| a + b);
            // Σx² of this CPU's calls: (n-1)·s² + n·mean² (s² as the kernel's, over n-1).
            let n = r.hits as f64;
            let sq = r.time_us.zip(r.s2_us).map(|(t, s2)| {
                let mean = if n > 0.0 { t / n } else { 0.0 };
                (n - 1.0).max(0.0) * s2 + n * mean * mean
            });
            m.2 = m.2.zip(sq).map(|(a, b)| a + b);
        }
    }
    let mut out: Vec<ProfiledFunction> = merged
        .into_iter()
        .map(|(function, (hits, total, sq))| {
            let n = hits as f64;
            let avg = total.filter(|_| hits > 0).map(|t| t / n);
            let s2 = sq
                .zip(avg)
                .filter(|_| hits > 1)
                .map(|(sq, mean)| ((sq - n * mean * mean) / (n - 1.0)).max(0.0));
            ProfiledFunction {
                function,
                hits,
                total_us: total,
                avg_us: avg,
                s2_us: s2,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.total_us
            .unwrap_or(0.0)
            .total_cmp(&a.total_us.unwrap_or(0.0))
            .then(b.hits.cmp(&a.hits))
    });
    out.truncate(PROFILE_ROWS);
    out
}

/// Rows of one hist table kept in report.json (the kernel sorts them by the
/// trigger's `sort`; the whole table stays in its file).
const HIST_ROWS: usize = 200;

/// report.json `hist[]`: one hist trigger's table, parsed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct HistTable {
    /// The event the trigger sits on, `SYSTEM:EVENT` as the recipe names it.
    pub(crate) event: String,
    /// The table as the kernel printed it, a file in the output folder.
    pub(crate) file: String,
    /// The trigger as the kernel shows it (`hist:keys=...:vals=...`).
    pub(crate) trigger: Option<String>,
    /// The rows, in the kernel's order, at most 200.
    pub(crate) rows: Vec<HistRow>,
    /// Rows in the table (`Entries:`, or the rows counted).
    pub(crate) entries: u64,
    /// Events the trigger counted (`Hits:`).
    pub(crate) hits: Option<u64>,
    /// Events not counted because the table was full (`Dropped:`).
    pub(crate) dropped: Option<u64>,
    /// Each value summed over all rows (`hitcount` and every `vals=` field).
    pub(crate) totals: std::collections::BTreeMap<String, u64>,
}

/// One row of a hist table: `{ KEY: VALUE, ... } hitcount: N  VAL: M`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct HistRow {
    /// Each key field as the kernel prints it (`call_site` →
    /// `[ffffffffb787c3f0] tomoyo_find_next_domain`; signed values as unsigned 64-bit numbers).
    pub(crate) keys: std::collections::BTreeMap<String, String>,
    /// `hitcount` and each value field.
    pub(crate) values: std::collections::BTreeMap<String, u64>,
}

/// The file, in the output folder, that holds the hist table of `event` (`SYSTEM:EVENT`).
pub(crate) fn hist_file(event: &str) -> String {
    let (sys, ev) = event.split_once(':').unwrap_or((event, ""));
    format!("hist/{sys}-{ev}.txt")
}

/// report.json `hist`: the table of every hist trigger of the run, from the
/// files `run` saved in `dir` (missing ones are left out).
pub(crate) fn hist_report(dir: &Path, valid: &ValidRecipe) -> Vec<HistTable> {
    let mut events: Vec<&str> = valid
        .triggers
        .iter()
        .filter(|t| t.action == "hist")
        .filter_map(|t| t.event.as_deref())
        .collect();
    events.dedup();
    events
        .into_iter()
        .filter_map(|event| {
            let file = hist_file(event);
            let text = read_small(&dir.join(&file))?;
            Some(parse_hist(event, file, &text, HIST_ROWS))
        })
        .collect()
}

/// Parses a `hist` file: the `# trigger info:` line, rows (a key may span
/// lines, as a `stacktrace` key does, until its `}`; the first `max_rows`
/// kept, all of them totalled), and `Totals:`.
pub(crate) fn parse_hist(event: &str, file: String, text: &str, max_rows: usize) -> HistTable {
    let mut table = HistTable {
        event: event.to_string(),
        file,
        trigger: None,
        rows: Vec::new(),
        entries: 0,
        hits: None,
        dropped: None,
        totals: Default::default(),
    };
    let mut pending = String::new();
    let mut rows = 0u64;
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("# trigger info: ") {
            table.trigger = Some(t.trim_end_matches(" [active]").trim().to_string());
            continue;
        }
        let trimmed = line.trim();
        let number = |prefix: &str| trimmed.strip_prefix(prefix)?.trim().parse::<u64>().ok();
        if let Some(n) = number("Hits:") {
            table.hits = Some(n);
        } else if let Some(n) = number("Entries:") {
            table.entries = n;
        } else if let Some(n) = number("Dropped:") {
            table.dropped = Some(n);
        }
        if pending.is_empty() && !trimmed.starts_with('{') {
            continue;
        }
        pending.push_str(trimmed);
        pending.push(' ');
        let Some(close) = pending.rfind('}') else {
            continue;
        };
        let row = parse_row(&pending[1..close], &pending[close + 1..]);
        pending.clear();
        rows += 1;
        for (k, v) in &row.values {
            let t = table.totals.entry(k.clone()).or_default();
            *t = t.saturating_add(*v);
        }
        if table.rows.len() < max_rows {
            table.rows.push(row);
        }
    }
    table.entries = table.entries.max(rows);
    table
}

/// One row from the inside of its `{ }` and what follows it.
fn parse_row(keys: &str, values: &str) -> HistRow {
    // Keys are `NAME: VALUE` joined by `, `; a value may itself hold `, ` (a
    // stack), so a piece starts a new key only when it reads `NAME: `.
    let mut parsed: Vec<(String, String)> = Vec::new();
    for piece in keys.split(", ") {
        let named = piece.trim_start().split_once(": ").filter(|(n, _)| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        });
        match (named, parsed.last_mut()) {
            (Some((n, v)), _) => parsed.push((n.trim().to_string(), v.trim().to_string())),
            (None, Some((_, v))) => {
                v.push_str(", ");
                v.push_str(piece.trim());
            }
            (None, None) => {}
        }
    }
    let mut vals = std::collections::BTreeMap::new();
    let words: Vec<&str> = values.split_whitespace().collect();
    for pair in words.windows(2) {
        if let Some(name) = pair[0].strip_suffix(':')
            && let Ok(n) = pair[1].parse::<u64>()
        {
            vals.insert(name.to_string(), n);
        }
    }
    HistRow {
        keys: parsed.into_iter().collect(),
        values: vals,
    }
}

/// A regular file of ours, read whole up to [`MAX_READ`] bytes; `None` when missing or unreadable.
pub(crate) fn read_small(path: &Path) -> Option<String> {
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
    fn a_hist_table_becomes_rows_and_totals() {
        // As the kernel lab's Debian 6.1 printed them (tests/lab/hist-trigger.toml,
        // kretprobe-filter.toml).
        let text = "# event histogram\n#\n# trigger info: hist:keys=call_site.sym:vals=hitcount,bytes_req:sort=bytes_req.descending:size=2048 [active]\n#\n\n{ call_site: [ffffffffb787c3f0] tomoyo_find_next_domain                       } hitcount:          1  bytes_req:       4096\n{ call_site: [ffffffffb77700e2] alloc_bprm                                    } hitcount:          8  bytes_req:       3328\n\nTotals:\n    Hits: 9\n    Entries: 2\n    Dropped: 0\n";
        let t = parse_hist("kmem:kmalloc", hist_file("kmem:kmalloc"), text, HIST_ROWS);
        assert_eq!(t.file, "hist/kmem-kmalloc.txt");
        assert_eq!(
            t.trigger.as_deref(),
            Some(
                "hist:keys=call_site.sym:vals=hitcount,bytes_req:sort=bytes_req.descending:size=2048"
            )
        );
        assert_eq!((t.entries, t.hits, t.dropped), (2, Some(9), Some(0)));
        assert_eq!(t.rows[1].keys["call_site"], "[ffffffffb77700e2] alloc_bprm");
        assert_eq!(t.rows[1].values["hitcount"], 8);
        assert_eq!(t.totals["bytes_req"], 7424);
        assert_eq!(t.totals["hitcount"], 9);

        let t = parse_hist(
            "kprobes:open_ret",
            "f".into(),
            "{ ret: 18446744073709551614 } hitcount:          1\n{ ret:          3 } hitcount:          1\n\nTotals:\n    Hits: 2\n",
            HIST_ROWS,
        );
        assert_eq!(t.rows[1].keys["ret"], "3");
        assert_eq!((t.entries, t.hits, t.dropped), (2, Some(2), None));

        // Two keys, and a stack key over several lines.
        let t = parse_hist(
            "sched:sched_switch",
            "f".into(),
            "{ common_pid: bash [ 12], prev_prio: 120 } hitcount: 3\n{ stacktrace:\n         do_sys_openat2+0x5/0x10\n         __x64_sys_openat+0x1/0x2\n} hitcount: 2\n",
            HIST_ROWS,
        );
        assert_eq!(t.rows[0].keys["common_pid"], "bash [ 12]");
        assert_eq!(t.rows[0].keys["prev_prio"], "120");
        assert!(
            t.rows[1].keys["stacktrace"].contains("__x64_sys_openat"),
            "{:?}",
            t.rows[1]
        );
        assert_eq!(t.totals["hitcount"], 5);
        assert_eq!(parse_hist("a:b", "f".into(), "", HIST_ROWS).rows.len(), 0);
    }

    #[test]
    fn per_cpu_profiles_merge_by_function() {
        let cpu0 = "  Function                               Hit    Time            Avg             s^2\n  --------                               ---    ----            ---             ---\n  vfs_read                                 2    30.000 us       15.000 us       50.000 us\n  do_idle                                  1    100.0 us        100.0 us        0.000 us\n";
        let cpu1 = "  Function                               Hit    Time            Avg             s^2\n  --------                               ---    ----            ---             ---\n  vfs_read                                 2    10.000 us       5.000 us        2.000 us\n";
        let rows = profile_rows(cpu0);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].function, "vfs_read");
        assert_eq!(
            (rows[0].hits, rows[0].time_us, rows[0].s2_us),
            (2, Some(30.0), Some(50.0))
        );
        // Hits only (no graph tracer).
        let bare = profile_rows("  Function    Hit\n  --------    ---\n  vfs_read    7\n");
        assert_eq!((bare[0].hits, bare[0].time_us), (7, None));

        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("profile")).unwrap();
        std::fs::write(dir.path().join("profile/function0.txt"), cpu0).unwrap();
        std::fs::write(dir.path().join("profile/function1.txt"), cpu1).unwrap();
        assert!(function_profile(&dir.path().join("none")).is_empty());
        let p = function_profile(dir.path());
        assert_eq!(p[0].function, "do_idle");
        let v = &p[1];
        assert_eq!(
            (v.function.as_str(), v.hits, v.total_us, v.avg_us),
            ("vfs_read", 4, Some(40.0), Some(10.0))
        );
        // Calls 15±5 (s² 50) and 5±1 (s² 2): 10, 20, 4, 6, whose variance is 152/3.
        let s2 = v.s2_us.unwrap();
        assert!((s2 - 152.0 / 3.0).abs() < 1e-9, "{s2}");
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

    #[test]
    fn osnoise_and_timerlat_tables_show_in_the_summary_and_the_page() {
        use crate::analysis::{Selection, analyze, osnoise_timerlat_trace};
        let dir = tempfile::tempdir().unwrap();
        let file = tracedat::TraceFile::open(&osnoise_timerlat_trace(dir.path())).unwrap();
        let a = analyze(&file, &Selection::for_file(&file)).unwrap();
        // summary.txt and report.html show the per-CPU tables.
        let mut r = crate::report::JsonReport::new(&file, &a, None);
        r.tracer = Some(TracerReport {
            name: "timerlat".into(),
            max_latency_us: None,
            max_latency_trace: None,
            task: None,
            cpu: None,
            hwlat: Vec::new(),
            osnoise: a.noise.osnoise.clone(),
            timerlat: a.noise.timerlat.clone(),
        });
        let summary = crate::recipe::Template::builtin().render(&r).unwrap();
        // The tracer's own samples answer first (osnoise before timerlat).
        let after = summary.split("\nlost events:").nth(1).unwrap();
        let first = after.split_once("\n\n").unwrap().1;
        assert!(first.starts_with("osnoise: "), "{summary}");
        assert!(first.contains("\ntimerlat: "), "{summary}");
        assert!(
            summary.contains("osnoise per CPU")
                && summary.contains("cpu1   thread          2")
                && summary.contains("12.000µs"),
            "{summary}"
        );
        let html = crate::report::render_html(&r);
        assert!(
            html.contains("<table id=\"timerlat\">")
                && html.contains("<tr><td>1</td><td>thread</td><td>2</td>")
                && html.contains("<table id=\"osnoise\">"),
            "{html}"
        );
    }
}
