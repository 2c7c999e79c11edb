//! The task column when the first records printed come from the idle task
//! (pid 0) and name tasks the saved cmdlines name otherwise: trace-cmd
//! then holds such a pid twice, and its task column shows whichever name
//! its binary search meets, which changes as new pids join its table. A
//! recording whose first record is a wakeup from an idle CPU (of the
//! workload's child, named after the parent before its exec) shows this;
//! our listing must name tasks as `trace-cmd report` does.

mod common;

use common::*;
use tracedat::testing::{Endian, Page, report::ReportLine};
use tracedat::{CaptureMeta, CpuData, EventFormat, TraceFile};

/// One record: its task, and the tasks it names (`sched_wakeup` names one,
/// `sched_switch` two).
struct Rec {
    pid: i32,
    named: Vec<(i32, &'static str)>,
}

fn wakeup(pid: i32, woken: (i32, &'static str)) -> Rec {
    Rec {
        pid,
        named: vec![woken],
    }
}

fn switch(pid: i32, prev: &'static str, next: (i32, &'static str)) -> Rec {
    Rec {
        pid,
        named: vec![(pid, prev), next],
    }
}

/// `f`'s record of `r`, comms cut to their 16-byte fields.
fn record(e: Endian, f: &EventFormat, r: &Rec) -> Vec<u8> {
    let fields: &[(&str, &str)] = match r.named.len() {
        1 => &[("pid", "comm")],
        _ => &[("prev_pid", "prev_comm"), ("next_pid", "next_comm")],
    };
    let mut values = vec![
        ("common_type", u64::from(f.id)),
        ("common_pid", r.pid as u64),
    ];
    values.extend(
        fields
            .iter()
            .zip(&r.named)
            .map(|((pid, _), t)| (*pid, t.0 as u64)),
    );
    let mut d = payload(e, f, &values);
    for ((_, comm), (_, name)) in fields.iter().zip(&r.named) {
        let at = f.field(comm).unwrap();
        let n = name.len().min(at.size - 1);
        d[at.offset..at.offset + n].copy_from_slice(&name.as_bytes()[..n]);
    }
    d
}

#[test]
fn tasks_named_twice_by_the_first_idle_records_print_as_trace_cmd_names_them() {
    if !have_trace_cmd() {
        eprintln!("trace-cmd not installed: task column comparison skipped");
        return;
    }
    let formats = kernel_formats(&facts_dir().join("host.json.zst"));
    let format = |name: &str| {
        let (sys, text) = formats
            .iter()
            .find(|(sys, t)| sys == "sched" && t.starts_with(&format!("name: {name}\n")))
            .unwrap();
        (text.clone(), EventFormat::parse(sys, text).unwrap())
    };
    let (switch_text, switch_format) = format("sched_switch");
    let (wakeup_text, wakeup_format) = format("sched_wakeup");

    // Saved cmdlines for pids 100..164; 130 is `sh`.
    let mut cmdlines = String::new();
    for pid in 100..164 {
        let comm = if pid == 130 {
            "sh".into()
        } else {
            format!("task-{pid}")
        };
        cmdlines.push_str(&format!("{pid} {comm}\n"));
    }
    // First, records of the idle task: a wakeup of 130 by its name before
    // its exec, a switch to 131 under another name, two names of 900.
    let mut recs = vec![
        wakeup(0, (130, "trace-recipe")),
        switch(0, "swapper/0", (131, "early-131")),
        wakeup(0, (900, "first-900")),
        wakeup(0, (900, "second-900")),
    ];
    // Then the tasks held twice run, each switching to a pid new to the
    // table, so that the binary search's midpoints move.
    let news: Vec<&'static str> = (0..48)
        .map(|k| &*Box::leak(format!("new-{k}").into_boxed_str()))
        .collect();
    for (k, new) in news.iter().enumerate() {
        let pid = [130, 131, 900][k % 3];
        recs.push(switch(pid, "running", (1000 + k as i32, new)));
        recs.push(wakeup(1000 + k as i32, (pid, "woken")));
    }

    let e = Endian::LITTLE64;
    let tmp = tempfile::tempdir().unwrap();
    let mut page = Page::new(e, 4096, 1_000_000_000);
    let mut data = Vec::new();
    for r in &recs {
        let f = match r.named.len() {
            1 => &wakeup_format,
            _ => &switch_format,
        };
        let d = record(e, f, r);
        if page.body.len() + d.len() + 8 + e.data_offset() > 4096 {
            data.extend(page.finish(None));
            page = Page::new(e, 4096, page.now);
        }
        page.event(1000, &d);
    }
    data.extend(page.finish(None));
    let cpu0 = tmp.path().join("cpu0");
    std::fs::write(&cpu0, data).unwrap();
    let meta = CaptureMeta {
        header_page: e.header_page(4096).into_bytes(),
        cpu_count: 1,
        trace_clock: "[local] global\n".into(),
        uname: "Linux tasktest 6.18 x86_64".into(),
        version: "tasktest".into(),
        cmdlines: cmdlines.into_bytes(),
        event_formats: vec![(
            "sched".into(),
            vec![switch_text.into_bytes(), wakeup_text.into_bytes()],
        )],
        ..Default::default()
    };
    let path = tmp.path().join("tasks.dat");
    tracedat::write_v6(
        std::fs::File::create(&path).unwrap(),
        &meta,
        &[CpuData { cpu: 0, path: cpu0 }],
    )
    .unwrap();

    let ours = our_report(&TraceFile::open(&path).unwrap());
    let theirs = trace_cmd_report(&path, &[]);
    tracedat::testing::report::assert_same_heads(&ours, &theirs, "tasks named twice");

    // The test shows the case: some task held twice is shown by a name the
    // saved cmdlines do not give it, and 900 under both of its names.
    let tasks: Vec<(i32, String)> = ours
        .lines()
        .filter_map(ReportLine::parse)
        .map(|r| (r.pid(), r.comm().trim().to_string()))
        .collect();
    assert!(
        tasks.iter().any(|(pid, comm)| *pid == 130 && comm != "sh")
            || tasks
                .iter()
                .any(|(pid, comm)| *pid == 131 && comm != "task-131"),
        "{ours}"
    );
    for name in ["first-900", "second-900"] {
        assert!(
            tasks.contains(&(900, name.into())),
            "900 as {name}:\n{ours}"
        );
    }
}
