//! The runbook-grade command line (issue 13): machine-readable output and its
//! schemas, SARIF, recipes by name, what this kernel can trace, run overrides,
//! and tests/runbook.sh, a runbook that reads only JSON and exit codes.

use std::process::Command;

use crate::common::{TracefsGuard, bin, repo, text, trace_recipe, write_recipe};

const SCHEMAS: &[&str] = &[
    "check", "status", "reset", "run", "list", "events", "facts", "diff", "fleet",
];

#[test]
fn checked_in_output_schemas_are_what_schema_of_prints() {
    for of in SCHEMAS {
        let out = trace_recipe(&["schema", "--of", of]);
        assert!(out.status.success(), "schema --of {of}");
        let path = repo().join(format!("schema/{of}.schema.json"));
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            text(&out.stdout).trim_end(),
            checked_in.trim_end(),
            "schema/{of}.schema.json is stale: run `cargo run -- schema --of {of} > schema/{of}.schema.json`"
        );
        let schema: serde_json::Value = serde_json::from_str(&checked_in).unwrap();
        assert!(
            schema["properties"].get("format_version").is_some(),
            "{of}: every output carries format_version"
        );
    }
}

/// Validates `instance` against the checked-in schema of `of`.
pub fn assert_matches_schema(of: &str, instance: &serde_json::Value) {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join(format!("schema/{of}.schema.json"))).unwrap(),
    )
    .unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v.iter_errors(instance).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{of} output does not match its schema: {errors:?}\n{instance:#}"
    );
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}):\n{}{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

fn bad_recipes() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(repo().join("tests/bad-recipes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// `events` lists this kernel's events and fields with types, or a fact
/// file's; `functions` falls back to kallsyms and says why.
#[test]
fn events_and_functions_of_this_kernel() {
    let out = trace_recipe(&[
        "events",
        "sched:sched_switch",
        "--fields",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let j = json(&out);
    assert_matches_schema("events", &j);
    let fields = j["events"][0]["fields"].as_array().unwrap();
    assert!(
        fields
            .iter()
            .any(|f| f["name"] == "prev_pid" && f["type"] == "pid_t"),
        "{j:#}"
    );
    let out = trace_recipe(&["events", "sched_process_*"]);
    let listed = text(&out.stdout);
    assert!(
        listed.lines().any(|l| l == "sched:sched_process_exec"),
        "{listed}"
    );
    assert_eq!(
        trace_recipe(&["events", "no_such_event_*"]).status.code(),
        Some(1)
    );

    // Another kernel's events, from its fact file (the lab's Debian 6.1).
    let facts = crate::common::repo().join("tests/facts/debian-6.1.json.zst");
    let out = trace_recipe(&[
        "events",
        "kmem:kmalloc",
        "--fields",
        "--facts",
        facts.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("size_t bytes_req"),
        "{}",
        text(&out.stdout)
    );

    let out = trace_recipe(&["functions", "vfs_rea*"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).lines().any(|l| l == "vfs_read"));
    if std::fs::read_to_string("/sys/kernel/tracing/available_filter_functions").is_err() {
        assert!(
            text(&out.stderr).contains("could not read available_filter_functions"),
            "{}",
            text(&out.stderr)
        );
    }
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    /// `check --format json` reports each `# expect: LINE:COL TEXT` of the bad
    /// recipes at that line and column, and nothing else, matching its schema.
    #[test]
    fn check_json_places_every_problem() {
        let _guard = TracefsGuard::acquire();
        for file in bad_recipes() {
            let body = std::fs::read_to_string(&file).unwrap();
            let out = trace_recipe(&["check", "--format", "json", file.to_str().unwrap()]);
            assert_eq!(out.status.code(), Some(1), "{}", file.display());
            let j = json(&out);
            assert_matches_schema("check", &j);
            assert_eq!(j["ok"], false);
            let diags = j["diagnostics"].as_array().unwrap();
            let expects: Vec<&str> = body
                .lines()
                .filter_map(|l| l.strip_prefix("# expect: "))
                .collect();
            assert_eq!(diags.len(), expects.len(), "{}: {j:#}", file.display());
            for e in expects {
                let (place, msg) = e.split_once(' ').unwrap_or((e, ""));
                let hit = diags.iter().any(|d| {
                    let at = match (d["line"].as_u64(), d["column"].as_u64()) {
                        (Some(l), Some(c)) => format!("{l}:{c}"),
                        _ => "-".into(),
                    };
                    at == place
                        && d["message"].as_str().unwrap().contains(msg)
                        && d["severity"] == "error"
                        && (d["fault"] == "recipe" || d["fault"] == "kernel")
                });
                assert!(hit, "{}: expected `{e}` in {j:#}", file.display());
            }
        }
        let typo = repo().join("tests/bad-recipes/no-such-event.toml");
        let j = json(&trace_recipe(&[
            "check",
            "--format",
            "json",
            typo.to_str().unwrap(),
        ]));
        assert_eq!(j["diagnostics"][0]["fault"], "kernel");
        assert_eq!(j["diagnostics"][0]["suggestions"][0], "sched:sched_switch");
        let ok = trace_recipe(&["check", "--format", "json", "exec-tree"]);
        assert!(ok.status.success(), "{}", text(&ok.stderr));
        let j = json(&ok);
        assert_matches_schema("check", &j);
        assert_eq!(j["ok"], true);
        assert_eq!(j["recipe"], "exec-tree");
    }

    /// `check --format sarif` is valid SARIF 2.1.0 (the official OASIS schema,
    /// vendored in tests/sarif/) and puts each problem on its recipe line.
    #[test]
    fn check_sarif_is_valid_sarif_2_1_0() {
        let _guard = TracefsGuard::acquire();
        let schema: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(repo().join("tests/sarif/sarif-schema-2.1.0.json")).unwrap(),
        )
        .unwrap();
        let validator = jsonschema::validator_for(&schema).expect("the SARIF schema compiles");
        // The validator is not vacuous: a log without `version` is refused.
        assert!(!validator.is_valid(&serde_json::json!({ "runs": [] })));
        let mut results = 0;
        for file in bad_recipes()
            .into_iter()
            .chain([repo().join("recipes/exec-tree.toml")])
        {
            let out = trace_recipe(&["check", "--format", "sarif", file.to_str().unwrap()]);
            let log = json(&out);
            let errors: Vec<String> = validator
                .iter_errors(&log)
                .map(|e| format!("{e} at {}", e.instance_path()))
                .collect();
            assert!(
                errors.is_empty(),
                "{}: invalid SARIF: {errors:?}\n{log:#}",
                file.display()
            );
            assert_eq!(log["version"], "2.1.0");
            let body = std::fs::read_to_string(&file).unwrap();
            let lines: Vec<u64> = body
                .lines()
                .filter_map(|l| l.strip_prefix("# expect: "))
                .filter_map(|e| e.split(':').next()?.parse().ok())
                .collect();
            let got = log["runs"][0]["results"].as_array().unwrap();
            results += got.len();
            for line in lines {
                assert!(
                    got.iter().any(
                        |r| r["locations"][0]["physicalLocation"]["region"]["startLine"] == line
                    ),
                    "{}: no SARIF result on line {line}",
                    file.display()
                );
            }
            if file.ends_with("exec-tree.toml") {
                assert!(got.is_empty() && out.status.success());
            }
        }
        assert!(results >= 15, "only {results} SARIF results");
    }

    /// On a clean tracefs, `status --exit-code` passes and `reset --dry-run` has
    /// nothing to do; both match their schemas. (tests/runbook.sh covers the
    /// leftovers of a killed run.)
    #[test]
    fn status_and_reset_json_on_a_clean_tracefs() {
        let _guard = TracefsGuard::acquire();
        let out = trace_recipe(&["status", "--exit-code", "--format", "json"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
        let j = json(&out);
        assert_matches_schema("status", &j);
        assert_eq!(j["left_behind"], false);
        let out = trace_recipe(&["reset", "--dry-run", "--format", "json"]);
        assert!(out.status.success());
        let j = json(&out);
        assert_matches_schema("reset", &j);
        assert_eq!(j["dry_run"], true);
        assert_eq!(j["actions"], serde_json::json!([]));
        // A name found nowhere is still one JSON document, and exit 1.
        let out = trace_recipe(&["check", "--format", "json", "no-such-recipe-here"]);
        assert_eq!(out.status.code(), Some(1));
        let j = json(&out);
        assert_matches_schema("check", &j);
        assert!(
            j["diagnostics"][0]["message"]
                .as_str()
                .unwrap()
                .contains("no recipe `no-such-recipe-here`")
        );
    }

    /// A recipe name is found on TRACE_RECIPE_PATH; a name in two folders says
    /// which one it took; `list` and `show` read the same path.
    #[test]
    fn recipes_by_name_on_the_recipe_path() {
        let _guard = TracefsGuard::acquire();
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let exec = std::fs::read_to_string(repo().join("recipes/exec-tree.toml")).unwrap();
        write_recipe(a.path(), "mine.toml", &exec.replace("exec-tree", "mine"));
        write_recipe(b.path(), "mine.toml", &exec.replace("exec-tree", "mine"));
        write_recipe(
            b.path(),
            "broken.toml",
            "# needs: nothing\n# kernels: 6.1\nname = \"broken\"\ndescription = \"d\"\n[[events]]\nname = \"sched:nope\"\n",
        );
        let path = std::env::join_paths([a.path(), b.path()]).unwrap();
        let run = |args: &[&str]| {
            Command::new(bin())
                .args(args)
                .env("TRACE_RECIPE_PATH", &path)
                .output()
                .unwrap()
        };
        let out = run(&["check", "mine"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("took {}", a.path().join("mine.toml").display()))
                && err.contains(&b.path().join("mine.toml").display().to_string()),
            "{err}"
        );
        let out = run(&["check", "mnie"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            text(&out.stderr).contains("did you mean `mine`"),
            "{}",
            text(&out.stderr)
        );
        let out = run(&["list", "--format", "json"]);
        assert!(out.status.success());
        let j = json(&out);
        assert_matches_schema("list", &j);
        let recipes = j["recipes"].as_array().unwrap();
        assert_eq!(recipes.len(), 2, "{j:#}");
        let broken = &recipes[0];
        assert_eq!(broken["name"], "broken");
        assert_eq!(broken["passes_check"], false);
        assert_eq!(broken["kernels"][0], "6.1");
        assert_eq!(broken["needs"], "nothing");
        assert!(
            broken["problems"][0]
                .as_str()
                .unwrap()
                .contains("sched:nope")
        );
        assert_eq!(recipes[1]["passes_check"], true);
        assert_eq!(recipes[1]["shadowed"].as_array().unwrap().len(), 1);
        let show = run(&["show", "mine"]);
        assert!(text(&show.stdout).contains("# What to look for:"));
        // A path is used as it is, never looked up.
        let out = run(&["check", "./mine.toml"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out.stderr).contains("cannot read recipe"));
    }

    /// `--duration` and `--buffer-size-kb` replace the recipe's keys, are checked
    /// like them, and an error names the flag.
    #[test]
    fn run_overrides_are_validated_and_named() {
        let _guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(
            dir.path(),
            "r.toml",
            "name = \"overrides\"\nduration = \"60s\"\n[[events]]\nname = \"sched:sched_process_exec\"\n",
        );
        let r = recipe.to_str().unwrap();
        let out = trace_recipe(&["run", r, "--duration", "ten"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            text(&out.stderr).contains("`--duration ten`"),
            "{}",
            text(&out.stderr)
        );
        let out = trace_recipe(&["run", r, "--buffer-size-kb", "1", "--format", "json"]);
        assert_eq!(out.status.code(), Some(1));
        let j = json(&out);
        assert_matches_schema("run", &j);
        assert!(
            j["error"]
                .as_str()
                .unwrap()
                .contains("`--buffer-size-kb 1`"),
            "{j:#}"
        );
        assert!(j["output"].is_null());
        // A valid override ends a 60 s recipe in a fraction of a second.
        let o = dir.path().join("out");
        let out = trace_recipe(&[
            "run",
            r,
            "--duration",
            "300ms",
            "--buffer-size-kb",
            "64",
            "-q",
            "--format",
            "json",
            "-o",
            o.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(out.stderr.is_empty(), "-q: {}", text(&out.stderr));
        let j = json(&out);
        assert_matches_schema("run", &j);
        assert_eq!(j["output"], o.to_str().unwrap());
        assert_eq!(j["exit_code"], 0);
        assert!(j["bundle"].is_null() && j["expectations"] == serde_json::json!([]));
        // -q in text mode: stdout is the output folder's path alone, nothing on stderr.
        let o2 = dir.path().join("out2");
        let out = trace_recipe(&[
            "run",
            r,
            "--duration",
            "200ms",
            "-q",
            "-o",
            o2.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(out.stderr.is_empty(), "-q: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), format!("{}\n", o2.display()));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(o.join("report.json")).unwrap()).unwrap();
        assert!(
            report["duration_s"].as_f64().unwrap() < 5.0,
            "--duration 300ms was not applied: {}",
            report["duration_s"]
        );
    }

    /// tests/runbook.sh: list, run by name, SIGKILL a run and its guard, status
    /// --exit-code, reset --dry-run, reset, all through JSON and exit codes.
    #[test]
    fn runbook_script_reads_only_json_and_exit_codes() {
        let _guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("bash")
            .arg(repo().join("tests/runbook.sh"))
            .current_dir(dir.path())
            .env("TRACE_RECIPE", bin())
            .env("TRACE_RECIPE_PATH", repo().join("recipes"))
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "runbook.sh failed:\n{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        assert!(text(&out.stdout).contains("runbook: ok"));
    }
}
