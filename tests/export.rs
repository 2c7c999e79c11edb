//! `export --format parquet`: the tables DuckDB and polars read hold what
//! trace-cmd lists (counts per event and per pid exact, 1,000 sampled values
//! equal), each field in the column type its format says, the records `-F`,
//! `--cpu`, ... keep as `report` keeps them; and hostile trace.dat files give
//! an error, never a crash.
//!
//! `export --format perfetto`: the trace `protoc --decode` reads against the
//! vendored Perfetto protos holds every record trace-cmd lists, per CPU in
//! its order, with its time, pid and the values the listing shows, and
//! every task's name; hostile files give an error, never a crash.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tracedat::testing::report::ReportLine;

use crate::common::{
    assert_exit, corpus_files, event_lines, in_ci, repo, text, trace_cmd_report, trace_recipe,
    unpacked_trace,
};

/// The venv's python with DuckDB and polars (scripts/test installs it);
/// `None` outside CI when it is missing (the test is skipped), a failure
/// under CI.
fn python() -> Option<PathBuf> {
    let py = repo().join("target/export-venv/bin/python");
    let ok = std::process::Command::new(&py)
        .args(["-c", "import duckdb, polars"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            !in_ci(),
            "{} with duckdb and polars is missing (scripts/test installs it)",
            py.display()
        );
        eprintln!("skipping: no target/export-venv (scripts/test installs it)");
        return None;
    }
    Some(py)
}

/// Exports `dat` into `out` (which must not exist yet) as Parquet; panics
/// when it fails.
fn export(dat: &Path, out: &Path, extra: &[&str]) {
    export_as("parquet", dat, out, extra);
}

/// Exports `dat` as `format` to `out` (which must not exist yet), with
/// `extra` arguments; panics when it fails, else returns what it printed.
fn export_as(format: &str, dat: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "export",
        dat.to_str().unwrap(),
        "--format",
        format,
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    let o = trace_recipe(&args);
    assert_exit(&o, 0);
    o
}

/// Runs tests/export/read.py on the export `out` (a folder named `out`)
/// with `samples` ([file, row, column]); returns its JSON.
fn read(py: &Path, out: &Path, samples: &[(String, usize, String)]) -> Value {
    let input = json!({ "dir": out, "samples": samples });
    let o = duct::cmd(py, [repo().join("tests/export/read.py")])
        .stdin_bytes(input.to_string())
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .unwrap();
    assert!(o.status.success(), "read.py: {}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A value the listing shows for a column, to compare with the table's.
#[derive(Debug, Clone, PartialEq)]
enum Shown {
    Int(i64),
    Text(String),
}

impl Shown {
    fn of(v: &str, int: bool) -> Option<Shown> {
        match int {
            true => v.parse().ok().map(Shown::Int),
            false => Some(Shown::Text(v.to_string())),
        }
    }

    fn equals(&self, v: &Value) -> bool {
        match self {
            Shown::Int(i) => v.as_i64() == Some(*i),
            Shown::Text(s) => v.as_str() == Some(s),
        }
    }
}

/// The fields of `format` its print fmt shows as `NAME=%d` (or `%u`, `%i`,
/// `%s`, with a width or a length) of `REC->NAME`: name → whether an integer.
fn shown_fields(format: &tracedat::EventFormat) -> BTreeMap<String, bool> {
    let fmt = &format.print_fmt;
    let Some(end) = fmt[1..].find('"') else {
        return BTreeMap::new();
    };
    let (text, args) = (&fmt[1..end + 1], &fmt[end + 2..]);
    let args: Vec<&str> = args
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .collect();
    let mut out = BTreeMap::new();
    let mut n = 0;
    let mut rest = text;
    while let Some(at) = rest.find('%') {
        let before = &rest[..at];
        let spec = &rest[at + 1..];
        if let Some(after) = spec.strip_prefix('%') {
            rest = after;
            continue;
        }
        let len = spec
            .find(|c: char| c.is_ascii_alphabetic() && !matches!(c, 'l' | 'L' | 'h' | 'z'))
            .unwrap_or(spec.len());
        let conv = spec[len..].chars().next();
        let key = before.rsplit([' ', ':', '(', ',']).next().unwrap_or("");
        if let (Some(name), Some(arg)) = (key.strip_suffix('='), args.get(n))
            && *arg == format!("REC->{name}")
            && !spec[..len].contains('*')
        {
            match conv {
                Some('d' | 'u' | 'i') => {
                    out.insert(name.to_string(), true);
                }
                // A width pads the text (`%64s`): not the field as it is.
                Some('s') if len == 0 => {
                    out.insert(name.to_string(), false);
                }
                _ => {}
            }
        }
        n += 1;
        rest = &spec[len.min(spec.len())..];
    }
    out
}

/// The README's and the chapter's example: a trace-cmd recording of another
/// machine (tracedat's corpus: 45,254 records, 17 events, sched_switch and
/// sched_wakeup among them) exported, read with DuckDB and polars, and
/// compared with trace-cmd's listing of the same file: rows per event and
/// records per pid exact, the chapter's queries equal to the listing's
/// counts, and 1,000 values (the task, pid and time of records, and their
/// fields as the print format shows them) equal.
#[test]
fn duckdb_and_polars_read_what_trace_cmd_lists() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let dat = unpacked_trace(
        "crates/tracedat/tests/corpus/trappy-sched-hmp.dat.zst",
        dir.path(),
    );
    let out = dir.path().join("out");
    export(&dat, &out, &[]);
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["complete"], true);
    assert_eq!(meta["ts_column"], "ts_ns");
    let file_of: BTreeMap<String, String> = meta["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["file"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let trace = tracedat::TraceFile::open(&dat).unwrap();

    let listing = trace_cmd_report(&dat);
    let lines: Vec<ReportLine> = event_lines(&listing)
        .into_iter()
        .map(|l| ReportLine::parse(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 45_254);
    let mut per_event: BTreeMap<String, u64> = BTreeMap::new();
    let mut per_pid: BTreeMap<String, u64> = BTreeMap::new();
    let mut switch_comms: BTreeMap<String, u64> = BTreeMap::new();
    let mut next_comms: BTreeMap<String, u64> = BTreeMap::new();
    // Every value the listing shows that a column holds: (file, row,
    // column, value).
    let mut shown: Vec<(String, usize, String, Shown)> = Vec::new();
    let mut rows: BTreeMap<&str, usize> = BTreeMap::new();
    for l in &lines {
        let file = file_of[l.event].clone();
        *per_event.entry(file.clone()).or_default() += 1;
        let (comm, pid) = l.task.rsplit_once('-').unwrap();
        *per_pid.entry(pid.to_string()).or_default() += 1;
        let row = rows.entry(l.event).or_default();
        let format = trace
            .formats()
            .find(|f| f.name == l.event)
            .unwrap_or_else(|| panic!("no format {}", l.event));
        let named = |own: &str| match format.field(own) {
            Some(_) => format!("common_{own}"),
            None => own.to_string(),
        };
        shown.push((
            file.clone(),
            *row,
            named("pid"),
            Shown::Int(pid.parse().unwrap()),
        ));
        shown.push((
            file.clone(),
            *row,
            named("comm"),
            Shown::Text(comm.to_string()),
        ));
        // The listing rounds nanoseconds to microseconds.
        let (s, us) = l.timestamp.split_once('.').unwrap();
        let us: i64 = s.parse::<i64>().unwrap() * 1_000_000 + us.parse::<i64>().unwrap();
        shown.push((file.clone(), *row, "ts_us".into(), Shown::Int(us)));
        let fields = l.fields.trim();
        if l.event == "sched_switch" {
            // trace-cmd's sched_switch plugin: `PREV:PID [PRIO] S ==> NEXT:PID [PRIO]`.
            *switch_comms.entry(comm.to_string()).or_default() += 1;
            let (prev, next) = fields.split_once(" ==> ").unwrap();
            for (side, task) in [("prev", prev), ("next", next)] {
                let (name, rest) = task.rsplit_once(':').unwrap();
                let (tid, prio) = rest.split_once(" [").unwrap();
                let prio = prio.split(']').next().unwrap();
                if side == "next" {
                    *next_comms.entry(name.to_string()).or_default() += 1;
                }
                for (col, v, int) in [
                    ("comm", name, false),
                    ("pid", tid, true),
                    ("prio", prio, true),
                ] {
                    shown.push((
                        file.clone(),
                        *row,
                        format!("{side}_{col}"),
                        Shown::of(v, int).unwrap(),
                    ));
                }
            }
        } else {
            let kinds = shown_fields(format);
            for token in fields.split_whitespace() {
                if let Some((k, v)) = token.split_once('=')
                    && let Some(int) = kinds.get(k)
                    && let Some(value) = Shown::of(v, *int)
                {
                    shown.push((file.clone(), *row, k.to_string(), value));
                }
            }
        }
        *row += 1;
    }
    // 1,000 of them, spread over the file.
    let step = shown.len() / 1000;
    assert!(step >= 1, "only {} values shown", shown.len());
    let sample: Vec<_> = shown.iter().step_by(step).take(1000).cloned().collect();
    assert_eq!(sample.len(), 1000);
    let asked: Vec<(String, usize, String)> = sample
        .iter()
        .map(|(f, r, c, _)| {
            let c = if c == "ts_us" { "ts_ns" } else { c };
            (f.clone(), *r, c.to_string())
        })
        .collect();
    let got = read(&py, &out, &asked);

    for engine in ["duckdb", "polars"] {
        let rows: BTreeMap<String, u64> =
            serde_json::from_value(got[engine]["rows"].clone()).unwrap();
        assert_eq!(rows, per_event, "{engine}: rows per event");
        let pids: BTreeMap<String, u64> =
            serde_json::from_value(got[engine]["pids"].clone()).unwrap();
        assert_eq!(pids, per_pid, "{engine}: records per pid");
    }
    let comms: BTreeMap<String, u64> =
        serde_json::from_value(got["duckdb"]["switch_comms"].clone()).unwrap();
    assert_eq!(comms, switch_comms, "DuckDB: the chapter's query");
    let comms: BTreeMap<String, u64> =
        serde_json::from_value(got["polars"]["next_comms"].clone()).unwrap();
    assert_eq!(comms, next_comms, "polars: the chapter's query");

    let values = got["values"].as_array().unwrap();
    let mut differ = Vec::new();
    for ((file, row, col, want), v) in sample.iter().zip(values) {
        let v = match col.as_str() {
            // Nanoseconds rounded to microseconds, as the listing prints them.
            "ts_us" => json!(
                v.as_i64().unwrap().div_euclid(1000)
                    + i64::from(v.as_i64().unwrap().rem_euclid(1000) >= 500)
            ),
            _ => v.clone(),
        };
        if !want.equals(&v) {
            differ.push(format!("{file} row {row} {col}: listed {want:?}, read {v}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of 1000 differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    // The chapter shows these queries.
    let chapter = std::fs::read_to_string(repo().join("docs/src/elsewhere.md")).unwrap();
    let script = std::fs::read_to_string(repo().join("tests/export/read.py")).unwrap();
    for q in ["SWITCH_COMMS_SQL = ", "NEXT_COMMS_POLARS = "] {
        let line = script.lines().find_map(|l| l.strip_prefix(q)).unwrap();
        let query = &line[1..line.len() - 1];
        assert!(
            chapter.contains(query),
            "docs/src/elsewhere.md does not show `{query}`"
        );
    }
}

/// `export` keeps the records `report` keeps: `-F`, `--cpu`, `--pid`,
/// `--comm`, `--from`/`--to` are the same flags, read by the same parser
/// (the rows of each table are the lines of `report`'s listing, per event);
/// meta.json says what was asked. A folder that holds files is refused (exit
/// 2), before anything is written.
#[test]
fn the_selection_is_reports() {
    let dir = tempfile::tempdir().unwrap();
    let dat = unpacked_trace(
        "crates/tracedat/tests/corpus/trappy-sched-hmp.dat.zst",
        dir.path(),
    );
    let dat = dat.to_str().unwrap();
    for (i, select) in [
        &["-F", "sched_switch:prev_pid > 100", "--cpu", "0-3"][..],
        &["--comm", "Thread-*", "--from", "1.5", "--to", "@270.0"],
        &["-P", "2984,4135", "-F", "sched:*"],
    ]
    .into_iter()
    .enumerate()
    {
        let mut args = vec!["report", dat];
        args.extend(select);
        let o = trace_recipe(&args);
        assert_exit(&o, 0);
        let listing = text(&o.stdout);
        let mut want: BTreeMap<String, u64> = BTreeMap::new();
        for l in event_lines(&listing) {
            *want
                .entry(ReportLine::parse(l).unwrap().event.to_string())
                .or_default() += 1;
        }
        assert!(!want.is_empty(), "{select:?} keeps something");
        let out = dir.path().join(format!("out{i}"));
        export(Path::new(dat), &out, select);
        let meta: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
        let got: BTreeMap<String, u64> = meta["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_string(),
                    e["rows"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, want, "{select:?}");
        for e in meta["events"].as_array().unwrap() {
            let f = out.join(e["file"].as_str().unwrap());
            let rows = parquet_rows(&f);
            assert_eq!(rows, e["rows"].as_u64().unwrap(), "{}", f.display());
        }
        let asked = &meta["provenance"]["selection"];
        assert_eq!(
            asked["filters"].as_array().unwrap().len()
                + asked["comms"].as_array().unwrap().len()
                + asked["pids"].as_array().unwrap().len(),
            select
                .iter()
                .filter(|a| ["-F", "--comm"].contains(a))
                .count()
                + usize::from(select.contains(&"-P")) * 2,
            "{asked}"
        );
    }
    // A folder that holds files: refused, nothing added to it.
    let full = dir.path().join("out0");
    let before = std::fs::read_dir(&full).unwrap().count();
    let o = trace_recipe(&[
        "export",
        dat,
        "--format",
        "parquet",
        "-o",
        full.to_str().unwrap(),
    ]);
    assert_exit(&o, 2);
    assert!(
        text(&o.stderr).contains("is not empty"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(std::fs::read_dir(&full).unwrap().count(), before);
    // A filter naming an event the file lacks: report's error, exit 1.
    let o = trace_recipe(&[
        "export",
        dat,
        "--format",
        "parquet",
        "-o",
        dir.path().join("none").to_str().unwrap(),
        "-F",
        "no_such_event",
    ]);
    assert_exit(&o, 1);
    assert!(
        text(&o.stderr).contains("no event `no_such_event`"),
        "{}",
        text(&o.stderr)
    );
}

/// The rows of the Parquet file `f`, read with the parquet crate's reader
/// (its footer and every row group: a file cut short or mis-written fails).
fn parquet_rows(f: &Path) -> u64 {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let r = SerializedFileReader::new(std::fs::File::open(f).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    let mut n = 0;
    for row in r.get_row_iter(None).unwrap() {
        row.unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        n += 1;
    }
    assert_eq!(n, r.metadata().file_metadata().num_rows() as u64);
    n
}

/// Hostile trace.dat files (the fuzz corpus's, and what the reader's
/// corrupt-file tests make of the trace-cmd v7 fixture and of a synthetic
/// file of every record kind: cuts and changed bytes) are exported or
/// refused, never a crash: the library gives `Ok` or an error that says
/// what is wrong; when a record cannot be read, the tables written hold
/// the records before it (readable Parquet) and meta.json says
/// `"complete": false`; the Perfetto trace written holds whole packets
/// all the same; the command exits 0 or 3 with `error:`, never by a panic,
/// in both formats.
#[test]
fn hostile_traces_give_an_error_never_a_crash() {
    use trace_recipe::export::{ExportError, Provenance, to_parquet, to_perfetto};
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        std::fs::read(repo().join("crates/tracedat/tests/fixtures/trace-cmd-v7-zstd.dat")).unwrap();
    let (synthetic, _) = tracedat::testing::standard(tracedat::testing::Endian::LITTLE64);
    let synthetic = synthetic.build();
    let mut cases: Vec<Vec<u8>> = Vec::new();
    for seed in std::fs::read_dir(repo().join("fuzz/corpus/tracedat")).unwrap() {
        cases.push(std::fs::read(seed.unwrap().path()).unwrap());
    }
    // The pages of the synthetic file (at multiples of 4096 after its
    // metadata): a commit beyond the page, a broken first event header.
    for at in (4096..synthetic.len()).step_by(4096) {
        for (from, bytes) in [(8, &[0xffu8; 8][..]), (16, &[0xff; 4][..])] {
            let mut b = synthetic.clone();
            if let Some(s) = b.get_mut(at + from..at + from + bytes.len()) {
                s.copy_from_slice(bytes);
                cases.push(b);
            }
        }
    }
    for good in [&fixture, &synthetic] {
        let n = good.len();
        for at in (0..n).step_by((n / 150).max(1)) {
            cases.push(good[..at].to_vec());
            for v in [0xffu8, good[at] ^ 0x80] {
                let mut b = good.clone();
                b[at] = v;
                cases.push(b);
            }
        }
    }
    let (mut exported, mut refused, mut partial) = (0, 0, 0);
    for (i, bytes) in cases.iter().enumerate() {
        let Ok(file) = tracedat::TraceFile::from_bytes(bytes.clone()) else {
            refused += 1;
            continue;
        };
        let out = dir.path().join(format!("x{i}"));
        let provenance = Provenance {
            input: format!("case {i}"),
            kind: "trace.dat".into(),
            run: None,
            selection: trace_recipe::analysis::SelectArgs::default(),
        };
        match to_parquet(&file, None, &out, provenance) {
            Ok(_) => exported += 1,
            Err(ExportError::Trace(e)) => {
                partial += 1;
                assert!(!e.to_string().is_empty());
                let meta: Value =
                    serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap())
                        .unwrap();
                assert_eq!(meta["complete"], false, "case {i}");
                assert_eq!(meta["error"].as_str(), Some(e.to_string().as_str()));
                for e in meta["events"].as_array().unwrap() {
                    let rows = parquet_rows(&out.join(e["file"].as_str().unwrap()));
                    assert_eq!(rows, e["rows"].as_u64().unwrap(), "case {i}");
                }
                parquet_rows(&out.join("tasks.parquet"));
            }
            Err(e) => panic!("case {i}: {e}"),
        }
        let pftrace = dir.path().join(format!("x{i}.pftrace"));
        match to_perfetto(&file, None, &pftrace) {
            Ok(_) | Err(ExportError::Trace(_)) => {
                perfetto_packets(&std::fs::read(&pftrace).unwrap());
            }
            Err(e) => panic!("case {i}: {e}"),
        }
        // Every 25th through the command: exit 0 or 3, never a panic.
        if i % 25 == 0 {
            let dat = dir.path().join(format!("x{i}.dat"));
            std::fs::write(&dat, bytes).unwrap();
            for (format, out) in [("parquet", "cli{i}"), ("perfetto", "cli{i}.pftrace")] {
                let out = dir.path().join(out.replace("{i}", &i.to_string()));
                let o = trace_recipe(&[
                    "export",
                    dat.to_str().unwrap(),
                    "--format",
                    format,
                    "-o",
                    out.to_str().unwrap(),
                ]);
                let err = text(&o.stderr);
                assert!(matches!(o.status.code(), Some(0 | 3)), "case {i}: {o:?}");
                assert!(!err.contains("panicked"), "case {i}: {err}");
                if o.status.code() == Some(3) {
                    assert!(err.contains("trace-recipe: error: "), "case {i}: {err}");
                }
            }
        }
    }
    assert!(
        exported > 0 && refused > 0 && partial > 0,
        "exported {exported}, refused {refused}, partial {partial}"
    );
}

/// Each field in the column its format says: integers by size and sign,
/// pointers as unsigned integers, `char` arrays and `__data_loc` strings
/// decoded (up to the NUL; bytes that are not UTF-8 as U+FFFD), fixed
/// arrays as lists, a trailing `u8 buf[]` as bytes; a field named `pid`
/// keeps its name and the record's pid is `common_pid`. Read back with the
/// parquet crate's reader, whose rows show each value as its logical type
/// reads.
#[test]
fn fields_are_typed_columns() {
    use tracedat::testing::{Endian, Page, event_format};
    let fields = "\tfield:s8 a;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield:u16 b;\toffset:10;\tsize:2;\tsigned:0;\n\
\tfield:int pid;\toffset:12;\tsize:4;\tsigned:1;\n\
\tfield:u64 d;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:const char * p;\toffset:24;\tsize:8;\tsigned:0;\n\
\tfield:char name[8];\toffset:32;\tsize:8;\tsigned:0;\n\
\tfield:__data_loc char[] path;\toffset:40;\tsize:4;\tsigned:0;\n\
\tfield:int arr[3];\toffset:44;\tsize:12;\tsigned:1;\n\
\tfield:u8 tail[];\toffset:56;\tsize:0;\tsigned:0;\n";
    let mut rec = Vec::new();
    rec.extend(100u16.to_le_bytes());
    rec.extend([0, 0]);
    rec.extend(7i32.to_le_bytes());
    rec.extend([0xfb, 0]); // a = -5
    rec.extend(65_535u16.to_le_bytes());
    rec.extend((-1i32).to_le_bytes());
    rec.extend(u64::MAX.to_le_bytes());
    rec.extend(0xffff_ffff_8100_0000u64.to_le_bytes());
    rec.extend(b"bash\0\0\0\0");
    rec.extend((60u32 | (6 << 16)).to_le_bytes());
    for v in [-1i32, 2, 3] {
        rec.extend(v.to_le_bytes());
    }
    rec.extend([1, 2, 3, 4]);
    rec.extend(b"/b\xffn\0\0\0\0");
    let e = Endian::LITTLE64;
    let dir = tempfile::tempdir().unwrap();
    let mut page = Page::new(e, 4096, 1_000_000);
    page.event(10, &rec);
    let format = event_format("all_kinds", 100, fields, "\"a=%d\", REC->a");
    let dat = one_cpu_trace(dir.path(), e, &page.finish(None), format);
    let out = dir.path().join("out");
    export(&dat, &out, &[]);
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let r = SerializedFileReader::new(std::fs::File::open(out.join("all_kinds.parquet")).unwrap())
        .unwrap();
    let rows: Vec<String> = r
        .get_row_iter(None)
        .unwrap()
        .map(|row| row.unwrap().to_string())
        .collect();
    assert_eq!(
        rows,
        [
            "{ts_ns: 1000010, cpu: 0, common_pid: 7, comm: \"bash\", a: -5, b: 65535, pid: -1, \
             d: 18446744073709551615, p: 18446744071578845184, name: \"bash\", \
             path: \"/b\u{fffd}n\", arr: [-1, 2, 3], tail: [1, 2, 3, 4, 47, 98, 255, 110, 0, 0, 0, 0]}"
        ]
    );
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["kernel"]["release"], "6.18.0");
    assert_eq!(meta["events"][0]["file"], "all_kinds.parquet");
    let tasks =
        SerializedFileReader::new(std::fs::File::open(out.join("tasks.parquet")).unwrap()).unwrap();
    let rows: Vec<String> = tasks
        .get_row_iter(None)
        .unwrap()
        .map(|row| row.unwrap().to_string())
        .collect();
    assert_eq!(rows, ["{pid: 7, comm: \"bash\", tgid: null}"]);
}

/// `protoc`, to decode Perfetto traces (scripts/test installs it); `None`
/// outside CI when it is missing (the test is skipped), a failure under CI.
fn protoc() -> Option<&'static str> {
    let ok = std::process::Command::new("protoc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(!in_ci(), "protoc is missing (scripts/test installs it)");
        eprintln!("skipping: no protoc (scripts/test installs it)");
        return None;
    }
    Some("protoc")
}

/// One record of a decoded Perfetto trace.
#[derive(Debug, Clone, PartialEq)]
struct Decoded {
    /// The bundle it is in: 0 for the file's first.
    bundle: usize,
    cpu: u32,
    ts: u64,
    pid: i32,
    /// The typed message's name, or the generic event's `event_name`.
    event: String,
    /// Its fields: name → value as protoc prints it (strings unquoted).
    fields: BTreeMap<String, String>,
}

/// What `protoc --decode perfetto.protos.Trace` shows of a trace.
#[derive(Debug, Default)]
struct PerfettoTrace {
    events: Vec<Decoded>,
    /// The process tree's threads: tid → name.
    threads: BTreeMap<i32, String>,
    /// The bundles that say events were lost before them.
    lost_bundles: Vec<usize>,
}

/// A string as protoc's text format prints it, unquoted.
fn unquote(v: &str) -> String {
    let v = v.strip_prefix('"').and_then(|v| v.strip_suffix('"'));
    v.map_or_else(String::new, |v| {
        v.replace("\\\"", "\"").replace("\\\\", "\\")
    })
}

/// Decodes the Perfetto trace `file` with protoc against proto/perfetto and
/// reads its text: the events of every bundle, the process tree's threads.
fn decode_perfetto(protoc: &str, file: &Path) -> PerfettoTrace {
    let o = duct::cmd!(
        protoc,
        "-I",
        repo().join("proto/perfetto"),
        "--decode",
        "perfetto.protos.Trace",
        "protos/perfetto/trace/trace.proto"
    )
    .dir(repo().join("proto/perfetto"))
    .stdin_path(file)
    .stdout_capture()
    .stderr_capture()
    .unchecked()
    .run()
    .unwrap();
    assert!(o.status.success(), "protoc: {}", text(&o.stderr));
    let mut trace = PerfettoTrace::default();
    let mut path: Vec<String> = Vec::new();
    let (mut cpu, mut ev, mut field, mut tid) = (0, None::<Decoded>, None::<String>, None);
    let mut bundles = 0;
    for line in text(&o.stdout).lines() {
        let line = line.trim();
        if let Some(block) = line.strip_suffix(" {") {
            path.push(block.to_string());
            match path.iter().map(String::as_str).collect::<Vec<_>>()[..] {
                ["packet", "ftrace_events"] => bundles += 1,
                ["packet", "ftrace_events", "event"] => {
                    ev = Some(Decoded {
                        bundle: bundles - 1,
                        cpu,
                        ts: 0,
                        pid: -1,
                        event: String::new(),
                        fields: BTreeMap::new(),
                    })
                }
                ["packet", "ftrace_events", "event", name] => {
                    ev.as_mut().unwrap().event = name.to_string()
                }
                _ => {}
            }
            continue;
        }
        if line == "}" {
            if path.len() == 3 && path[1] == "ftrace_events" {
                trace.events.push(ev.take().unwrap());
            }
            path.pop();
            continue;
        }
        let (key, value) = line.split_once(": ").unwrap();
        let at: Vec<&str> = path.iter().map(String::as_str).collect();
        match (&at[..], key) {
            (["packet", "ftrace_events"], "cpu") => cpu = value.parse().unwrap(),
            (["packet", "ftrace_events"], "lost_events") => trace.lost_bundles.push(bundles - 1),
            (["packet", "ftrace_events", "event"], "timestamp") => {
                ev.as_mut().unwrap().ts = value.parse().unwrap()
            }
            (["packet", "ftrace_events", "event"], "pid") => {
                ev.as_mut().unwrap().pid = value.parse().unwrap()
            }
            (["packet", "ftrace_events", "event", "generic"], "event_name") => {
                ev.as_mut().unwrap().event = unquote(value)
            }
            (["packet", "ftrace_events", "event", "generic", "field"], "name") => {
                field = Some(unquote(value))
            }
            (["packet", "ftrace_events", "event", "generic", "field"], _) => {
                let name = field.take().unwrap();
                ev.as_mut().unwrap().fields.insert(name, unquote_or(value));
            }
            (["packet", "ftrace_events", "event", _], _) => {
                ev.as_mut()
                    .unwrap()
                    .fields
                    .insert(key.to_string(), unquote_or(value));
            }
            (["packet", "process_tree", "threads"], "tid") => tid = Some(value.parse().unwrap()),
            (["packet", "process_tree", "threads"], "name") => {
                trace.threads.insert(tid.take().unwrap(), unquote(value));
            }
            _ => {}
        }
    }
    trace
}

/// A value as protoc prints it: strings unquoted, numbers as they are.
fn unquote_or(v: &str) -> String {
    match v.starts_with('"') {
        true => unquote(v),
        false => v.to_string(),
    }
}

/// The chapter's example: a trace-cmd recording of another machine
/// (tracedat's corpus: 45,254 records of 17 events) exported as a Perfetto
/// trace and decoded with protoc against the vendored protos holds, per
/// CPU and in its order, every record `trace-cmd report -t` lists, with its
/// time (ns), pid and event (typed or generic: sched_switch, sched_wakeup
/// and the process events typed), and the values the listing shows as
/// `name=value`, or as sched_switch's `PREV:PID [PRIO] S ==> NEXT:PID
/// [PRIO]`; the process tree names every task the listing names. With
/// `-F`, `--cpu`, the records are those `report` keeps; an existing file is
/// refused.
#[test]
fn perfetto_holds_what_trace_cmd_lists() {
    let Some(protoc) = protoc() else { return };
    let dir = tempfile::tempdir().unwrap();
    let dat = unpacked_trace(
        "crates/tracedat/tests/corpus/trappy-sched-hmp.dat.zst",
        dir.path(),
    );
    let out = dir.path().join("t.pftrace");
    let o = export_as("perfetto", &dat, &out, &[]);
    assert!(
        text(&o.stderr).contains("wrote 45254 records of 17 events (945 as Perfetto's typed"),
        "{}",
        text(&o.stderr)
    );
    let got = decode_perfetto(protoc, &out);
    assert!(got.lost_bundles.is_empty());

    let listing = crate::common::trace_cmd(&[
        "report".as_ref(),
        "-t".as_ref(),
        "-i".as_ref(),
        dat.as_os_str(),
    ]);
    let lines: Vec<ReportLine> = event_lines(&listing)
        .into_iter()
        .map(|l| ReportLine::parse(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 45_254);
    assert_eq!(got.events.len(), lines.len());
    let mut per_cpu: BTreeMap<u32, Vec<&Decoded>> = BTreeMap::new();
    for e in &got.events {
        per_cpu.entry(e.cpu).or_default().push(e);
    }
    let mut next: BTreeMap<u32, usize> = BTreeMap::new();
    let mut names: BTreeMap<i32, String> = BTreeMap::new();
    let (mut compared, mut typed) = (0, 0);
    for l in &lines {
        let at = next.entry(l.cpu).or_default();
        let e = per_cpu[&l.cpu][*at];
        *at += 1;
        let (comm, pid) = l.task.rsplit_once('-').unwrap();
        let pid: i32 = pid.parse().unwrap();
        let (s, ns) = l.timestamp.split_once('.').unwrap();
        let ts = s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap();
        // trace_printk's records are Perfetto's `print`.
        let event = match l.event {
            "bprint" => "print",
            e => e,
        };
        assert_eq!(
            (e.ts, e.pid, e.event.as_str()),
            (ts, pid, event),
            "{}",
            l.line
        );
        names.insert(pid, comm.to_string());
        let mut shown: Vec<(String, String)> = Vec::new();
        if l.event == "bprint" {
            // `SYMBOL: TEXT`
            typed += 1;
            let text = l.fields.trim_start().split_once(": ").unwrap().1;
            // Bytes that are not UTF-8 (an argument printed with `%s` from
            // a bad pointer): protoc escapes what the trace holds as U+FFFD.
            if !text.contains('\u{fffd}') {
                shown.push(("buf".into(), text.to_string()));
            }
        } else if l.event == "sched_switch" {
            typed += 1;
            let (prev, next) = l.fields.trim().split_once(" ==> ").unwrap();
            for (side, task) in [("prev", prev), ("next", next)] {
                let (name, rest) = task.rsplit_once(':').unwrap();
                let (tid, prio) = rest.split_once(" [").unwrap();
                let prio = prio.split(']').next().unwrap();
                for (k, v) in [("comm", name), ("pid", tid), ("prio", prio)] {
                    shown.push((format!("{side}_{k}"), v.to_string()));
                }
            }
        } else {
            for token in l.fields.split_whitespace() {
                // A padded text (`label=%64s`) is not the field as it is.
                if let Some((k, v)) = token.split_once('=')
                    && !v.is_empty()
                {
                    shown.push((k.to_string(), v.to_string()));
                }
            }
        }
        for (k, v) in shown {
            // The print format's names are mostly the fields' (not
            // sched_process_fork's `comm=` of `parent_comm`).
            let Some(ours) = e.fields.get(&k) else {
                continue;
            };
            let same = match (v.parse::<i128>(), ours.parse::<i128>()) {
                (Ok(a), Ok(b)) => a == b,
                // The listing's lines end without their trailing blanks.
                _ => v == *ours || (k == "buf" && v == ours.trim_end()),
            };
            assert!(same, "{}: {k} is {ours}", l.line);
            compared += 1;
        }
    }
    assert!(compared > 100_000, "{compared} values compared");
    // sched_switch and bprint.
    assert_eq!(typed, 617 + 9);
    for (pid, name) in names.iter().filter(|(p, _)| **p > 0) {
        assert_eq!(got.threads.get(pid), Some(name), "thread {pid}");
    }

    // The records `report` keeps with the same selection, per event; an
    // existing file is refused (exit 2) and left as it was.
    let select = [
        "-F",
        "sched_switch:prev_pid > 100",
        "--cpu",
        "0-3",
        "-F",
        "bprint",
    ];
    let mut args = vec!["report", dat.to_str().unwrap()];
    args.extend(select);
    let o = trace_recipe(&args);
    assert_exit(&o, 0);
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for l in event_lines(&text(&o.stdout)) {
        let event = match ReportLine::parse(l).unwrap().event {
            "bprint" => "print",
            e => e,
        };
        *want.entry(event.to_string()).or_default() += 1;
    }
    let some = dir.path().join("some.pftrace");
    let mut args = vec![
        "export",
        dat.to_str().unwrap(),
        "--format",
        "perfetto",
        "-o",
    ];
    args.push(some.to_str().unwrap());
    args.extend(select);
    assert_exit(&trace_recipe(&args), 0);
    let mut kept: BTreeMap<String, u64> = BTreeMap::new();
    for e in decode_perfetto(protoc, &some).events {
        *kept.entry(e.event).or_default() += 1;
    }
    assert!(
        want.contains_key("print") && want.contains_key("sched_switch"),
        "{want:?}"
    );
    assert_eq!(kept, want);
    let before = std::fs::read(&some).unwrap();
    let o = trace_recipe(&args);
    assert_exit(&o, 2);
    assert!(text(&o.stderr).contains("exists"), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(&some).unwrap(), before);
}

/// The packets of the Perfetto trace `bytes`: every one a `Trace.packet`
/// record (field 1, length-delimited) that ends inside the file, the last
/// one at its end; panics otherwise.
fn perfetto_packets(bytes: &[u8]) -> usize {
    let varint = |at: &mut usize| -> usize {
        let mut v = 0usize;
        for shift in (0..64).step_by(7) {
            let b = bytes[*at];
            *at += 1;
            v |= usize::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return v;
            }
        }
        panic!("a varint longer than 10 bytes at {at}");
    };
    let (mut at, mut packets) = (0, 0);
    while at < bytes.len() {
        assert_eq!(bytes[at], 0x0a, "not a packet at {at}");
        at += 1;
        at += varint(&mut at);
        packets += 1;
    }
    assert_eq!(at, bytes.len(), "the last packet ends past the file");
    packets
}

/// Events the kernel lost on a CPU (a page that says so): the bundle of
/// the records after them says `lost_events`, the records before them are
/// in an earlier bundle.
#[test]
fn perfetto_says_where_events_were_lost() {
    use tracedat::testing::{Endian, Page, event_format};
    let Some(protoc) = protoc() else { return };
    let e = Endian::LITTLE64;
    let dir = tempfile::tempdir().unwrap();
    let fields = "\tfield:int value;\toffset:8;\tsize:4;\tsigned:1;\n";
    let record = |v: i32| {
        let mut rec = Vec::new();
        rec.extend(100u16.to_le_bytes());
        rec.extend([0, 0]);
        rec.extend(7i32.to_le_bytes());
        rec.extend(v.to_le_bytes());
        rec
    };
    let mut first = Page::new(e, 4096, 1_000_000);
    first.event(10, &record(1));
    let mut second = Page::new(e, 4096, 2_000_000);
    second.event(10, &record(2));
    let mut pages = first.finish(None);
    pages.extend(second.finish(Some(Some(5))));
    let format = event_format("counter", 100, fields, "\"value=%d\", REC->value");
    let dat = one_cpu_trace(dir.path(), e, &pages, format);
    let out = dir.path().join("t.pftrace");
    export_as("perfetto", &dat, &out, &[]);
    let got = decode_perfetto(protoc, &out);
    let seen: Vec<(usize, u64, &str, &str)> = got
        .events
        .iter()
        .map(|e| (e.bundle, e.ts, e.event.as_str(), e.fields["value"].as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (0, 1_000_010, "counter", "1"),
            (1, 2_000_010, "counter", "2")
        ]
    );
    assert_eq!(got.lost_bundles, [1]);
    assert_eq!(got.threads.get(&7).map(String::as_str), Some("bash"));
}

/// Writes `DIR/t.dat`, a v6 trace.dat of one CPU whose ring-buffer pages
/// (of 4096 bytes, in the byte order `e`) are `pages`, with the one event
/// format `format` (system `mix`) and pid 7 named `bash`; returns its path.
fn one_cpu_trace(
    dir: &Path,
    e: tracedat::testing::Endian,
    pages: &[u8],
    format: String,
) -> PathBuf {
    let raw = dir.join("cpu0.raw");
    std::fs::write(&raw, pages).unwrap();
    let meta = tracedat::CaptureMeta {
        header_page: e.header_page(4096).into_bytes(),
        header_event: Vec::new(),
        ftrace_formats: Vec::new(),
        event_formats: vec![("mix".into(), vec![format.into_bytes()])],
        kallsyms: Vec::new(),
        printk_formats: Vec::new(),
        cmdlines: b"7 bash\n".to_vec(),
        cpu_count: 1,
        trace_clock: "[local] global".into(),
        uname: "Linux h 6.18.0 x86_64".into(),
        version: "test".into(),
        cpu_stats: vec![String::new()],
    };
    let dat = dir.join("t.dat");
    tracedat::write_v6(
        std::fs::File::create(&dat).unwrap(),
        &meta,
        &[tracedat::CpuData { cpu: 0, path: raw }],
    )
    .unwrap();
    dat
}

/// A trace of more records than a row group holds (300,000 of one event,
/// 1.8 MiB of pages, so the records are also decoded on a second thread where
/// the machine has two CPUs) exports as several row groups written by the
/// writing thread: every record once, in time order, the counter field equal
/// to the record's place.
#[test]
fn many_row_groups_hold_every_record_in_order() {
    use tracedat::testing::{Endian, Page, event_format};
    let fields = "\tfield:u32 n;\toffset:8;\tsize:4;\tsigned:0;\n";
    let e = Endian::LITTLE64;
    let total = 300_000u32;
    let mut pages = Vec::new();
    let mut page = Page::new(e, 4096, 1_000_000);
    for n in 0..total {
        let mut rec = Vec::new();
        rec.extend(100u16.to_le_bytes());
        rec.extend([0, 0]);
        rec.extend(7i32.to_le_bytes());
        rec.extend(n.to_le_bytes());
        rec.extend([0, 0, 0, 0]);
        if page.body.len() + 4 + rec.len() > 4096 - 16 {
            let next = page.now + 1;
            pages.extend(page.finish(None));
            page = Page::new(e, 4096, next);
        }
        page.event(1, &rec);
    }
    pages.extend(page.finish(None));
    let dir = tempfile::tempdir().unwrap();
    let format = event_format("counter", 100, fields, "\"n=%u\", REC->n");
    let dat = one_cpu_trace(dir.path(), e, &pages, format);
    let out = dir.path().join("out");
    export(&dat, &out, &[]);
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let r = SerializedFileReader::new(std::fs::File::open(out.join("counter.parquet")).unwrap())
        .unwrap();
    assert!(
        r.metadata().num_row_groups() >= 3,
        "{} row groups",
        r.metadata().num_row_groups()
    );
    let mut expect = 0u64;
    let mut last_ts = 0u64;
    for row in r.get_row_iter(None).unwrap() {
        let row = row.unwrap();
        let (mut ts, mut n) = (None, None);
        for (name, field) in row.get_column_iter() {
            match (name.as_str(), field) {
                ("ts_ns", parquet::record::Field::ULong(v)) => ts = Some(*v),
                ("n", parquet::record::Field::UInt(v)) => n = Some(u64::from(*v)),
                _ => {}
            }
        }
        let (ts, n) = (ts.expect("ts_ns"), n.expect("n"));
        assert_eq!(n, expect, "row {expect}");
        assert!(ts > last_ts, "row {expect}: ts {ts} after {last_ts}");
        (expect, last_ts) = (expect + 1, ts);
    }
    assert_eq!(expect, u64::from(total));
}

/// Every file of tracedat's corpora (which tracedat's corpus test lists line
/// for line as trace-cmd does) exported both ways, whole: meta.json says
/// complete, each Parquet table holds the rows meta.json counts, and they
/// add up to the records of the events the file describes; the Perfetto
/// trace holds the same records.
#[test]
fn every_corpus_file_exports_whole() {
    use trace_recipe::export::{Provenance, to_parquet, to_perfetto};
    let dir = tempfile::tempdir().unwrap();
    let files = corpus_files(dir.path());
    assert!(files.len() >= 128, "{} corpus files", files.len());
    for (i, dat) in files.iter().enumerate() {
        let name = dat.file_name().unwrap().to_string_lossy();
        let file = tracedat::TraceFile::open(dat).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut records = 0u64;
        file.records()
            .try_for_each_record(|r| {
                if let tracedat::Record::Event(ev) = r
                    && !file.is_unknown(ev.format)
                {
                    records += 1;
                }
                Ok::<(), tracedat::Error>(())
            })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let out = dir.path().join(format!("out{i}"));
        let provenance = Provenance {
            input: name.to_string(),
            kind: "trace.dat".into(),
            run: None,
            selection: trace_recipe::analysis::SelectArgs::default(),
        };
        let meta = to_parquet(&file, None, &out, provenance)
            .unwrap_or_else(|e| panic!("{name}: parquet: {e}"));
        assert!(meta.complete, "{name}");
        let meta: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
        let mut rows = 0;
        for e in meta["events"].as_array().unwrap() {
            let n = parquet_rows(&out.join(e["file"].as_str().unwrap()));
            assert_eq!(n, e["rows"].as_u64().unwrap(), "{name}: {e}");
            rows += n;
        }
        assert_eq!(rows, records, "{name}: Parquet rows");
        let pftrace = dir.path().join(format!("out{i}.pftrace"));
        let perfetto =
            to_perfetto(&file, None, &pftrace).unwrap_or_else(|e| panic!("{name}: perfetto: {e}"));
        assert_eq!(perfetto.records, records, "{name}: Perfetto records");
        let packets = perfetto_packets(&std::fs::read(&pftrace).unwrap());
        assert!(packets > 0 || records == 0, "{name}: no packet");
    }
}
