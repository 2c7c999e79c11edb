//! `[[expect]]`: checked after the run; a failed one exits 5 after everything is
//! written, and `check` places each bad expression at its line and column.

use crate::common::{TracefsGuard, repo, text, trace_recipe, write_recipe};

const RECIPE: &str = r#"name = "expect"
description = "three execs and what they must show"
duration = "30s"
[scope]
follow_forks = true
[[events]]
name = "sched:sched_process_exec"
[[events]]
name = "syscalls:sys_enter_openat"
[[events]]
name = "syscalls:sys_exit_openat"
[[expect]]
that = "count(sched:sched_process_exec) >= 3"
[[expect]]
that = "lost_events == 0"
[[expect]]
that = "p99(syscalls:openat) < 10s"
[[expect]]
that = "count(syscalls:sys_exit_openat) == count(syscalls:sys_enter_openat)"
"#;

#[test]
fn check_places_each_bad_expectation_at_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let body = "name = \"bad-expect\"\n[[events]]\nname = \"sched:sched_process_exec\"\n[[expect]]\nthat = \"count(sched:sched_switch) > 1\"\n[[expect]]\nthat = \"p99(syscalls:openat) < 2\"\n[[expect]]\nthat = \"count(sched:sched_process_exec) >= 3ms\"\n[[expect]]\nthat = \"p99(nosuch:x) < 2ms\"\n[[expect]]\nthat = \"lost_events = 0\"\n[[expect]]\nthat = \"count(sched:nosuch_event) > 0\"\n[[expect]]\nthat = \"count(sched:sched_process_exec) <= 2 * count(sched:sched_wakeup)\"\n[[expect]]\nthat = \"p99(syscalls:openat) < count(sched:sched_process_exec)\"\n";
    let r = write_recipe(dir.path(), "r.toml", body);
    let o = trace_recipe(&["check", r.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let p = r.display();
    for want in [
        format!("{p}:5:15: error (recipe): the recipe does not record `sched:sched_switch`"),
        format!("{p}:7:32: error (recipe): expectation: `2` needs a unit"),
        format!("{p}:9:44: error (recipe): expectation: the unit `ms` does not fit a count"),
        format!("{p}:11:13: error (recipe): no answer or latency analysis `nosuch`"),
        format!("{p}:13:21: error (recipe): expectation: expected a comparison"),
        format!("{p}:15:15: error (this kernel): this kernel has no event `sched:nosuch_event`"),
        // The right side of a comparison of two measurements is checked as the left.
        format!("{p}:17:54: error (recipe): the recipe does not record `sched:sched_wakeup`"),
        format!(
            "{p}:19:13: error (recipe): expectation: both sides must be of one kind: the left is a duration, the right a count"
        ),
    ] {
        assert!(out.contains(&want), "missing `{want}` in:\n{out}");
    }
    assert!(out.contains("8 problems found"), "{out}");
    let _ = repo();
}

/// A recipe of two answers on openat (a one-event count by comm and a span by
/// comm and result with its latency and `sum(ret)`).
const ANSWERS: &str = r#"name = "expect-answers"
[[events]]
name = "syscalls:sys_enter_openat"
[[events]]
name = "syscalls:sys_exit_openat"
[[answer]]
name = "missing"
event = "syscalls:sys_exit_openat"
by = ["common_comm"]
where = "ret == -ENOENT"
[[answer]]
name = "opens"
from = "syscalls:sys_enter_openat"
to = "syscalls:sys_exit_openat"
by = ["common_comm", "ret"]
values = ["count", "latency", "sum(ret)"]
"#;

/// `check` refuses an expectation on an answer the recipe does not declare,
/// a value it does not compute, or a row of more or fewer keys than its `by`,
/// each at its place with what there is; the forms that fit pass.
#[test]
fn check_refuses_an_answers_cell_the_recipe_cannot_produce() {
    let dir = tempfile::tempdir().unwrap();
    let expect = |that: &[&str]| -> String {
        that.iter()
            .map(|t| format!("[[expect]]\nthat = '{t}'\n"))
            .collect()
    };
    let good = expect(&[
        "count(missing:sh) >= 7",
        "p99(opens:sh,-2) < 5ms",
        "mean(opens:(all)) < 1s",
        "total(opens:(other)) < 1s",
        "sum(opens.ret:sh,-2) <= 0",
        r#"count(opens:"Web Content",0) == 0"#,
        "count(missing:(all)) >= count(opens:(all))",
    ]);
    let r = write_recipe(dir.path(), "good.toml", &format!("{ANSWERS}{good}"));
    let o = trace_recipe(&["check", r.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );

    let bad = expect(&[
        "p99(missng:sh) < 5ms",
        "p99(missing:sh) < 5ms",
        "sum(opens.rt:sh,0) < 1",
        "count(opens:sh) > 1",
        "count(misssing:sh) > 1",
        "p99(opens:(all)) < 2 * p50(mising:sh)",
    ]);
    let r = write_recipe(dir.path(), "bad.toml", &format!("{ANSWERS}{bad}"));
    let o = trace_recipe(&["check", r.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let p = r.display();
    for want in [
        format!("{p}:18:13: error (recipe): no answer or latency analysis `missng`"),
        "did you mean `missing`? the recipe's answers: missing, opens; latency analyses: syscalls,".into(),
        format!("{p}:20:13: error (recipe): answer `missing` computes no latency (`p99` reads its `latency` value, and it is one event, not a span); its values: count"),
        "an expectation on it may read: `count(missing:ROW)`".into(),
        format!("{p}:22:13: error (recipe): answer `opens` computes no `sum(rt)`; its values: count, latency, sum(ret)"),
        "did you mean `sum(ret)`?".into(),
        format!("{p}:24:21: error (recipe): answer `opens` has 2 keys per row (common_comm, ret), and `sh` gives 1"),
        "(`count(opens:COMMON_COMM,RET)`), or `(all)` for every row, `(other)` for the rows past `top`".into(),
        format!("{p}:26:15: error (this kernel): this kernel has no event `misssing:sh`"),
        "did you mean `missing`? (an answer's row is `count(NAME:ROW)`, NAME one of: missing, opens)".into(),
        format!("{p}:28:36: error (recipe): no answer or latency analysis `mising`"),
    ] {
        assert!(out.contains(&want), "missing `{want}` in:\n{out}");
    }
    assert!(out.contains("6 problems found"), "{out}");
}

/// `diff --fail-if` reads an answer's cells from each run's report.json
/// (here `report --answer` over a checked-in trace.dat of softirqs and irqs):
/// a row by its keys, `(all)`, `(other)`, a field's value, a latency
/// statistic; a row that is in neither run is an error naming the rows there
/// are, never a silent pass. report.json and the summary list the answers in
/// the order declared.
#[test]
fn diff_fail_if_reads_an_answers_cells() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::copy(
        repo().join("crates/tracedat/tests/corpus/lanhaocoder-langraph-v7.dat"),
        run.join("trace.dat"),
    )
    .unwrap();
    let answers = write_recipe(
        dir.path(),
        "answers.toml",
        r#"
[[answer]]
name = "softirq_time"
question = "How long do softirqs take, per vector?"
from = "irq:softirq_entry"
to = "irq:softirq_exit"
match = ["common_pid", "vec"]
by = ["vec"]

[[answer]]
name = "irqs"
event = "irq:irq_handler_entry"
by = ["name", "irq"]
values = ["count", "max(irq)"]
top = 2
"#,
    );
    let o = trace_recipe(&[
        "report",
        run.join("trace.dat").to_str().unwrap(),
        "--answer",
        answers.to_str().unwrap(),
        "--format",
        "json",
        "-o",
        run.join("report.json").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let json = std::fs::read_to_string(run.join("report.json")).unwrap();
    // `answers` in the order declared (`softirq_time` first), not by name,
    // and so in the summary.
    let at = |text: &str, what: &str| {
        text.find(what)
            .unwrap_or_else(|| panic!("no {what} in {text}"))
    };
    assert!(
        at(&json, "\"softirq_time\": {") < at(&json, "\"irqs\": {"),
        "{json}"
    );
    let o = trace_recipe(&[
        "report",
        run.join("trace.dat").to_str().unwrap(),
        "--answer",
        answers.to_str().unwrap(),
        "--format",
        "summary",
    ]);
    let summary = text(&o.stdout);
    assert!(
        at(&summary, "\nHow long do softirqs take, per vector?\n") < at(&summary, "\nirqs\n"),
        "{summary}"
    );
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let irqs = &report["answers"]["irqs"];
    // trace-cmd's listing of this file: 185 irq_handler_entry of irq 19
    // (enp0s3), 267 in all.
    assert_eq!(
        irqs["rows"][0]["keys"],
        serde_json::json!(["enp0s3", "19"]),
        "{irqs:#}"
    );
    assert_eq!(irqs["rows"][0]["count"], 185, "{irqs:#}");
    assert_eq!(irqs["total"]["count"], 267, "{irqs:#}");
    let vec7 = (report["answers"]["softirq_time"]["rows"]
        .as_array()
        .unwrap())
    .iter()
    .find(|r| r["keys"][0] == "7")
    .unwrap()["cells"][1]["latency"]
        .clone();
    let p99_us = vec7["p99_us"].as_f64().unwrap();
    let fail_if = |rules: &[String]| {
        let mut args = vec![
            "diff".to_string(),
            run.display().to_string(),
            run.display().to_string(),
        ];
        for r in rules {
            args.extend(["--fail-if".to_string(), r.clone()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        trace_recipe(&args)
    };
    let holding = [
        "count(irqs:enp0s3,19) == 185".to_string(),
        "count(irqs:(all)) >= 267".to_string(),
        "count(irqs:(other)) == 44".to_string(),
        "max(irqs.irq:vboxguest,20) >= 20".to_string(),
        format!("p99(softirq_time:7) >= {}ns", (p99_us * 1000.0).floor()),
        format!("p99(softirq_time:7) <= {}ns", (p99_us * 1000.0).ceil()),
    ];
    for rule in &holding {
        let o = fail_if(std::slice::from_ref(rule));
        assert_eq!(
            o.status.code(),
            Some(6),
            "{rule}: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }
    let not_holding = [
        "count(irqs:enp0s3,19) != 185",
        "count(irqs:(other)) > 44",
        "mean(softirq_time:(all)) > 1s",
    ]
    .map(String::from);
    let o = fail_if(&not_holding);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let out = text(&o.stdout);
    assert!(
        out.contains("ok    count(irqs:enp0s3,19) != 185  (A 185, B 185)"),
        "{out}"
    );

    // A row in neither run: exit 2, with the rows there are.
    let o = fail_if(&["p99(softirq_time:77) > 1ms".into()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("`p99(softirq_time:77)` is in neither run"),
        "{err}"
    );
    assert!(
        err.contains("answer `softirq_time` has no row `77`; its rows: 1; 7;"),
        "{err}"
    );
    // A row cut by `top` cannot be known.
    let o = fail_if(&["count(irqs:ata_piix,15) > 1".into()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("summed in `(other)`"),
        "{}",
        text(&o.stderr)
    );
}

/// A program whose `tr_work` is called 5 times, built in `dir`, and a recipe
/// probing it on entry (event `work`) and return (`work_ret`) with `expect`.
fn uprobe_recipe(
    dir: &std::path::Path,
    expect: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf) {
    let src = dir.join("w.c");
    std::fs::write(
        &src,
        "__attribute__((noinline)) int tr_work(int x) { return 2 * x + 1; }\nint main(void) { int s = 0; for (int i = 0; i < 5; i++) s += tr_work(i); return s == 25 ? 0 : 1; }\n",
    )
    .unwrap();
    let exe = dir.join("w");
    let o = std::process::Command::new("cc")
        .args(["-O0", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("a C compiler (cc) is installed");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut body = format!(
        "name = \"uprobe-expect\"\n[[uprobes]]\nevent = \"work\"\nkind = \"uprobe\"\ntarget = \"{exe}:tr_work\"\n[[uprobes]]\nevent = \"work_ret\"\nkind = \"uretprobe\"\ntarget = \"{exe}:tr_work\"\n[[events]]\nname = \"syscalls:sys_enter_openat\"\n[[events]]\nname = \"syscalls:sys_exit_openat\"\n",
        exe = exe.display()
    );
    for t in expect {
        body.push_str(&format!("[[expect]]\nthat = '{t}'\n"));
    }
    (write_recipe(dir, "uprobe.toml", &body), exe)
}

/// `check` refuses a latency group the recipe cannot produce: a function it
/// does not probe on entry and return (a uprobe pair's group is its entry
/// event's name), a syscall whose enter and exit it does not record.
#[test]
fn check_refuses_a_latency_group_the_recipe_cannot_produce() {
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = uprobe_recipe(
        dir.path(),
        &[
            "p99(kretprobe:work) < 5ms",
            "p99(syscalls:openat) < 5ms",
            "p99(kretprobe:wrk) < 5ms",
            "p99(syscalls:read) < 5ms",
        ],
    );
    let o = trace_recipe(&["check", r.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let p = r.display();
    for want in [
        format!("{p}:19:23: error (recipe): the recipe's `kretprobe` latency has no group `wrk`"),
        "did you mean `work`? its groups: work;".into(),
        format!("{p}:21:22: error (recipe): the recipe's `syscalls` latency has no group `read`"),
        "its groups: openat; record `syscalls:sys_enter_X` and `syscalls:sys_exit_X`".into(),
    ] {
        assert!(out.contains(&want), "missing `{want}` in:\n{out}");
    }
    assert!(out.contains("2 problems found"), "{out}");
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn expectations_that_hold_exit_0_and_one_that_fails_exits_5_after_writing_everything() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let workload = [
            "sh",
            "-c",
            "ls / > /dev/null; cat /etc/hostname > /dev/null; true",
        ];
        let ok = write_recipe(dir.path(), "ok.toml", RECIPE);
        let out = dir.path().join("ok");
        let junit = dir.path().join("ok.xml");
        let o = trace_recipe(&crate::common::run_args(
            &ok,
            &out,
            &["--junit", junit.to_str().unwrap()],
            &workload,
        ));
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
                .unwrap();
        let results = report["expectations"].as_array().unwrap();
        assert_eq!(results.len(), 4, "{report:#}");
        assert!(results.iter().all(|r| r["passed"] == true), "{results:#?}");
        // The measured count is the report's own count of the event.
        assert_eq!(
            results[0]["actual"].as_str().unwrap(),
            report["events"]["sched:sched_process_exec"].to_string()
        );
        // Two measurements: both read from the report, shown side by side.
        let (enter, exit) = (
            &report["events"]["syscalls:sys_enter_openat"],
            &report["events"]["syscalls:sys_exit_openat"],
        );
        assert!(enter.as_u64().unwrap() > 0, "{report:#}");
        assert_eq!(
            results[3]["actual"].as_str().unwrap(),
            format!("{exit} vs {enter}")
        );
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(summary.contains("expectations: 4 of 4 held"), "{summary}");
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(
            xml.contains("tests=\"4\"") && xml.contains("failures=\"0\""),
            "{xml}"
        );

        // Ask for more execs than the workload makes: exit 5, everything written.
        let bad = write_recipe(
            dir.path(),
            "bad.toml",
            &RECIPE
                .replace(">= 3\"", ">= 300\"")
                .replace("== count(", "> 2 * count("),
        );
        let out = dir.path().join("bad");
        let junit = dir.path().join("bad.xml");
        let o = trace_recipe(&crate::common::run_args(
            &bad,
            &out,
            &["--junit", junit.to_str().unwrap()],
            &workload,
        ));
        assert_eq!(o.status.code(), Some(5), "{}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("2 of 4 expectations failed"),
            "{}",
            text(&o.stderr)
        );
        for f in ["trace.dat", "report.json", "summary.txt"] {
            assert!(out.join(f).is_file(), "{f} is written before exit 5");
        }
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.contains("FAIL  count(sched:sched_process_exec) >= 300"),
            "{summary}"
        );
        assert!(
            summary.contains(
                "FAIL  count(syscalls:sys_exit_openat) > 2 * count(syscalls:sys_enter_openat)"
            ),
            "{summary}"
        );
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(
            xml.contains("failures=\"2\"") && xml.contains("&gt;= 300"),
            "{xml}"
        );
        guard.assert_unchanged();
    }

    /// A run whose recipe has answers and expectations on them: those that
    /// hold pass with the answer's own numbers; one that does not hold and one
    /// naming a row the answer does not have fail, the run exits 5 after
    /// writing everything, and the summary says why the missing row failed.
    #[test]
    fn expectations_on_answers_hold_or_fail_with_exit_5() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let body = format!(
            "{ANSWERS}[[expect]]\nthat = 'count(missing:sh) >= 5'\n[[expect]]\nthat = 'p99(opens:sh,-2) < 10s'\n[[expect]]\nthat = 'count(missing:sh) > 1000'\n[[expect]]\nthat = 'p99(opens:nosuch-comm,-2) < 10s'\n"
        );
        let recipe = write_recipe(dir.path(), "answers.toml", &body);
        let out = dir.path().join("out");
        let o = trace_recipe(&crate::common::run_args(
            &recipe,
            &out,
            &[],
            &[
                "sh",
                "-c",
                "for i in 1 2 3 4 5; do true < /nonexistent-trace-recipe-expect; done 2>/dev/null; true",
            ],
        ));
        assert_eq!(o.status.code(), Some(5), "{}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("2 of 4 expectations failed"),
            "{}",
            text(&o.stderr)
        );
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        let e = report["expectations"].as_array().unwrap();
        let passed: Vec<bool> = e.iter().map(|r| r["passed"] == true).collect();
        assert_eq!(passed, [true, true, false, false], "{e:#?}");
        // The count is the answer's row, as report.json has it.
        let rows = report["answers"]["missing"]["rows"].as_array().unwrap();
        let sh = rows.iter().find(|r| r["keys"][0] == "sh").unwrap();
        assert!(sh["count"].as_u64() >= Some(5), "{sh:#}");
        assert_eq!(e[0]["actual"].as_str().unwrap(), sh["count"].to_string());
        assert_eq!(e[2]["actual"], e[0]["actual"]);
        assert!(e[3]["actual"].is_null(), "{e:#?}");
        let why = e[3]["missing"].as_str().unwrap();
        assert!(
            why.starts_with("answer `opens` has no row `nosuch-comm,-2`; its rows: "),
            "{why}"
        );
        assert!(why.contains("sh,-2"), "{why}");
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.contains(
                "FAIL  p99(opens:nosuch-comm,-2) < 10s  (unknown: answer `opens` has no row"
            ),
            "{summary}"
        );
        guard.assert_unchanged();
    }

    /// A uprobe/uretprobe pair's latency group is the probe's name (`work`),
    /// not a runtime address, and an expectation naming it holds.
    #[test]
    fn a_uprobe_pairs_latency_group_is_its_probes_name() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let (recipe, exe) = uprobe_recipe(dir.path(), &["p99(kretprobe:work) < 10s"]);
        let out = dir.path().join("out");
        let o = trace_recipe(&crate::common::run_args(
            &recipe,
            &out,
            &[],
            &[exe.to_str().unwrap()],
        ));
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        let l = (report["latency"].as_array().unwrap())
            .iter()
            .find(|l| l["analysis"] == "kretprobe")
            .unwrap_or_else(|| panic!("no kretprobe latency: {report:#}"));
        let groups: Vec<(&str, u64)> = (l["groups"].as_array().unwrap())
            .iter()
            .map(|g| (g["key"].as_str().unwrap(), g["count"].as_u64().unwrap()))
            .collect();
        assert_eq!(groups, [("work", 5)], "{l:#}");
        assert_eq!(report["expectations"][0]["passed"], true, "{report:#}");
        guard.assert_unchanged();
    }
}
