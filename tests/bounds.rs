//! Bounded work for any input (issue 37, item 3): small hostile files that
//! used to crash the tool (a stack overflow, a panic) or make it allocate
//! gigabytes are refused, or read within the budgets of docs/src/security.md
//! (its budget table names these tests). Memory is asserted through the
//! child's maximum resident set size as `wait4` reports it; time is not
//! asserted (a timed test is flaky), only measured by hand.

use std::io::Read;
use std::path::Path;

use crate::common::{bin, repo, text};

/// What a child run of trace-recipe did: its exit code, stdout and stderr
/// joined, its peak resident memory in MB and the CPU seconds it used (user
/// and system: the work done, whatever else runs on the machine).
pub(crate) struct Measured {
    pub(crate) code: Option<i32>,
    pub(crate) all: String,
    pub(crate) max_rss_mb: u64,
    pub(crate) cpu_s: f64,
}

/// Runs trace-recipe with `args` (stdin empty) and measures its peak memory
/// through `wait4`, which reports the rusage of that one child (not of the
/// other tests' children, as `RUSAGE_CHILDREN` would).
#[expect(clippy::zombie_processes, reason = "the child is reaped by wait4")]
pub(crate) fn measured(args: &[&str]) -> Measured {
    let mut child = std::process::Command::new(bin())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        out.read_to_end(&mut v).unwrap();
        v
    });
    let mut e = Vec::new();
    err.read_to_end(&mut e).unwrap();
    let o = reader.join().unwrap();
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let all = format!("{}{}", text(&o), text(&e));
    assert!(!all.contains("panicked"), "{args:?}: {all}");
    Measured {
        code,
        all,
        max_rss_mb: usage.ru_maxrss as u64 / 1024,
        cpu_s: [usage.ru_utime, usage.ru_stime]
            .iter()
            .map(|t| t.tv_sec as f64 + t.tv_usec as f64 / 1e6)
            .sum(),
    }
}

/// A trace.dat of one `synth:small` event whose format's print fmt is
/// `print`, written by the crate's writer.
fn trace_with_print_fmt(dir: &Path, print: &str) -> std::path::PathBuf {
    let format = tracedat::testing::small_format();
    let at = format.find("print fmt: ").unwrap();
    let format = format!("{}print fmt: {print}\n", &format[..at]);
    crate::common::one_record_trace(dir, b"x\0", "synth", format, "a", "Linux t 6.0 x86_64")
}

/// A print fmt nesting 100,000 parentheses or 200,000 minus signs used to
/// abort `report` with a stack overflow; now the event is listed as
/// trace-cmd lists one it cannot parse, with a note naming the event, in
/// every format.
#[test]
fn a_print_fmt_nesting_past_the_depth_bound_falls_back_to_raw_fields() {
    let d = tempfile::tempdir().unwrap();
    let n = 100_000;
    for (i, args) in [
        format!("{}REC->val{}", "(".repeat(n), ")".repeat(n)),
        format!("{}REC->val", "-".repeat(2 * n)),
    ]
    .iter()
    .enumerate()
    {
        let sub = d.path().join(i.to_string());
        std::fs::create_dir(&sub).unwrap();
        let dat = trace_with_print_fmt(&sub, &format!("\"val=%u name=%s\", {args}, REC->name"));
        assert!(std::fs::metadata(&dat).unwrap().len() < 300_000);
        let dat = dat.to_str().unwrap();
        let m = measured(&["report", dat]);
        assert_eq!(m.code, Some(0), "{}", m.all);
        assert!(m.max_rss_mb < 500, "{} MB", m.max_rss_mb);
        assert!(
            m.all.contains("[FAILED TO PARSE] val=1 name=x"),
            "{}",
            m.all
        );
        assert!(
            m.all.contains("event synth:small: print fmt not understood (the arguments nest deeper than 256 levels)"),
            "{}",
            m.all
        );
        for format in ["summary", "json", "html"] {
            let m = measured(&["report", "--format", format, dat]);
            assert_eq!(m.code, Some(0), "{format}: {}", m.all);
        }
    }
}

/// A user's summary template (`report --template`, a bundle's
/// `[output] template`) asking `ljust(1500000000)` used to panic; one
/// doubling a 100 MB string within its fuel allocated gigabytes; one
/// writing past the byte budget grew without bound. Each now stops with an
/// error naming the template and the budget, within 500 MB.
#[test]
fn a_summary_template_is_bounded_in_width_memory_and_output() {
    let d = tempfile::tempdir().unwrap();
    let dat = trace_with_print_fmt(d.path(), "\"val=%u name=%s\", REC->val, REC->name");
    let dat = dat.to_str().unwrap();
    // The bomb's 100 MB strings and the long loop take long on a loaded
    // machine: whether the memory (output) or the time budget stops them
    // first, they are stopped, within both (the RSS bound below).
    for (name, body, expect) in [
        (
            "wide.j2",
            "{{ 'x' | ljust(1500000000) }}",
            &["ljust(1500000000) is over the template budget of 4096"][..],
        ),
        (
            "bomb.j2",
            "{% set a = 'x' * 100000000 %}{% set b = a ~ a ~ a ~ a %}{% set c = b ~ b ~ b ~ b %}{{ c | length }}",
            &[
                "rendering stopped: it stopped without finishing (more than 256 MiB of memory",
                "rendering stopped: it ran past its time budget of",
            ][..],
        ),
        (
            "long.j2",
            "{% for i in range(100) %}{{ 'x' * 1000000 }}{% endfor %}",
            &[
                "rendering stopped: its output went past the budget of 16777216 bytes",
                "rendering stopped: it ran past its time budget of",
            ][..],
        ),
    ] {
        let t = d.path().join(name);
        std::fs::write(&t, body).unwrap();
        let m = measured(&[
            "report",
            "--format",
            "summary",
            "--template",
            t.to_str().unwrap(),
            dat,
        ]);
        assert_ne!(m.code, Some(0), "{name}: {}", m.all);
        assert!(m.code.is_some(), "{name}: killed by a signal: {}", m.all);
        assert!(
            m.all.contains(&format!("template {}", t.display()))
                && expect.iter().any(|e| m.all.contains(e)),
            "{name}: {}",
            m.all
        );
        assert!(m.max_rss_mb < 500, "{name}: {} MB", m.max_rss_mb);
    }
}

/// `[[],[],...]`: `n` empty arrays in one, 2 bytes each in the file, a
/// `serde_json::Value` of 32 bytes and more each once parsed.
fn nested_arrays(n: usize) -> String {
    let mut s = String::with_capacity(2 * n + 2);
    s.push('[');
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push_str("[]");
    }
    s.push(']');
    s
}

/// A 15 MiB manifest of nested arrays (within its 16 MiB cap) used to cost
/// a gigabyte before it was refused; now it is refused by its count of
/// values before it is parsed.
#[test]
fn a_manifest_of_nested_arrays_is_refused_before_it_is_parsed() {
    use crate::bundle::{Entry, build, manifest_for};
    let d = tempfile::tempdir().unwrap();
    let dat = b"x".to_vec();
    let manifest = String::from_utf8(manifest_for(&[("trace.dat", &dat)], 1)).unwrap();
    let hostile = manifest.replace(
        "\"kernel_facts\":null",
        &format!("\"kernel_facts\":{}", nested_arrays(5 << 20)),
    );
    assert!(hostile.len() > 10 << 20 && hostile.len() < 16 << 20);
    let bundle = d.path().join("b.tar.zst");
    build(
        &bundle,
        vec![
            Entry::File("manifest.json", hostile.into_bytes()),
            Entry::File("trace.dat", dat),
        ],
    );
    let m = measured(&["report", bundle.to_str().unwrap()]);
    assert_eq!(m.code, Some(3), "{}", m.all);
    assert!(
        m.all
            .contains("over the limit of 1000000 for a bundle manifest"),
        "{}",
        m.all
    );
    assert!(m.max_rss_mb < 500, "{} MB", m.max_rss_mb);
}

/// `diff` (and `report`) of run folders whose report.json is 60 MiB of nested arrays
/// (within the 64 MiB cap) used to cost a gigabyte; the report is now
/// counted before it is parsed and, past its budget, left unread like a
/// malformed one.
#[test]
fn diff_of_a_report_json_of_nested_arrays_stays_within_500_mb() {
    let d = tempfile::tempdir().unwrap();
    let report = format!("{{\"recipe\":\"x\",\"hist\":{}}}", nested_arrays(20 << 20));
    let mut sides = Vec::new();
    for name in ["a", "b"] {
        let dir = d.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        let dat = trace_with_print_fmt(&dir, "\"val=%u\", REC->val");
        std::fs::rename(&dat, dir.join("trace.dat")).unwrap();
        std::fs::remove_file(dir.join("cpu0.raw")).unwrap();
        std::fs::write(dir.join("report.json"), &report).unwrap();
        sides.push(dir.to_str().unwrap().to_string());
    }
    let m = measured(&["diff", &sides[0], &sides[1]]);
    assert!(m.code.is_some(), "{}", m.all);
    assert!(m.max_rss_mb < 500, "{} MB: {}", m.max_rss_mb, m.all);
    let m = measured(&["report", "--format", "summary", &sides[0]]);
    assert_eq!(m.code, Some(0), "{}", m.all);
    assert!(m.max_rss_mb < 500, "report: {} MB", m.max_rss_mb);
}

/// `pack` used to read every member whole, twice (a 600 MiB sparse
/// trace.dat: 600 MB allocated); now each member is streamed once into the
/// archive and the hasher, and the bundle still reads back.
#[test]
fn pack_streams_members_instead_of_reading_them_whole() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let dat = trace_with_print_fmt(&run, "\"val=%u\", REC->val");
    std::fs::rename(&dat, run.join("trace.dat")).unwrap();
    std::fs::remove_file(run.join("cpu0.raw")).unwrap();
    std::fs::write(run.join("report.json"), "{\"recipe\":\"x\"}").unwrap();
    std::fs::write(run.join("recipe.toml"), "name = \"x\"\n").unwrap();
    let sparse = std::fs::File::create(run.join("big.bin")).unwrap();
    sparse.set_len(200 << 20).unwrap();
    let sparse = std::fs::File::create(run.join("trace.dat.big")).unwrap();
    sparse.set_len(250 << 20).unwrap();
    let out = d.path().join("run.tar.zst");
    let m = measured(&["pack", run.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(m.code, Some(0), "{}", m.all);
    assert!(m.max_rss_mb < 200, "{} MB", m.max_rss_mb);
    let dec = zstd::Decoder::new(std::fs::File::open(&out).unwrap()).unwrap();
    let mut archive = tar::Archive::new(dec);
    let listed: Vec<(String, u64)> = archive
        .entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.path().unwrap().display().to_string(), e.size())
        })
        .collect();
    assert_eq!(listed[0].0, "manifest.json", "{listed:?}");
    assert!(
        listed.contains(&("big.bin".into(), 200 << 20)),
        "{listed:?}"
    );
}

/// `check` of a recipe naming 8,000 events this kernel lacks used to take
/// 38 CPU seconds (71 s on a loaded machine): every name was compared with
/// every event of the kernel, and every search for a suggestion walked them
/// all again after the suggestion budget was spent. Now an unknown name costs
/// a lookup and the suggestions cost their budget once; every name is still
/// reported, the first ones with a suggestion. The ceiling is CPU time, not
/// wall time, and generous: the unoptimized build does this in about 5 s.
#[test]
fn check_of_8000_unknown_events_reports_each_in_bounded_work() {
    let d = tempfile::tempdir().unwrap();
    let mut recipe =
        String::from("name = \"many\"\nduration = \"1s\"\n\n[scope]\nsystem_wide = true\n");
    for i in 0..8000 {
        recipe.push_str(&format!(
            "\n[[events]]\nname = \"sched:madeup_event_{i}\"\n"
        ));
    }
    let r = d.path().join("many.toml");
    std::fs::write(&r, recipe).unwrap();
    let facts = repo().join("tests/facts/debian-6.1.json.zst");
    let m = measured(&[
        "check",
        "--facts",
        facts.to_str().unwrap(),
        r.to_str().unwrap(),
    ]);
    assert_eq!(m.code, Some(1), "{}", &m.all[..m.all.len().min(2000)]);
    assert_eq!(
        m.all
            .matches("this kernel has no event `sched:madeup_event_")
            .count(),
        8000
    );
    assert!(m.all.contains("no event `sched:madeup_event_7999`"));
    assert!(
        m.all.contains("did you mean `sched:"),
        "{}",
        &m.all[..m.all.len().min(2000)]
    );
    assert!(m.max_rss_mb < 500, "{} MB", m.max_rss_mb);
    assert!(m.cpu_s < 20.0, "{:.1} CPU seconds", m.cpu_s);
}
