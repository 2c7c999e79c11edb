//! The checked-in schema, the recipes in recipes/ and the README stay true.

use crate::common::{TracefsGuard, repo, text, trace_recipe};

#[test]
fn checked_in_schema_is_what_schema_prints() {
    let out = trace_recipe(&["schema"]);
    assert!(out.status.success());
    let checked_in = std::fs::read_to_string(repo().join("schema/recipe.schema.json")).unwrap();
    assert_eq!(
        text(&out.stdout).trim_end(),
        checked_in.trim_end(),
        "schema/recipe.schema.json is stale: run `cargo run -- schema > schema/recipe.schema.json`"
    );
    let schema: serde_json::Value = serde_json::from_str(&checked_in).unwrap();
    assert_eq!(
        schema["additionalProperties"],
        serde_json::Value::Bool(false),
        "unknown top-level keys must be refused by the schema"
    );
    for key in [
        "name", "duration", "params", "buffer", "scope", "tracer", "kprobes", "uprobes", "events",
        "triggers", "stop", "output",
    ] {
        assert!(
            schema["properties"].get(key).is_some(),
            "schema lacks `{key}`"
        );
    }
}

fn recipes() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(repo().join("recipes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v
}

/// Every recipe points at the schema, has a description and a `# What to look
/// for` block, and checks clean on this kernel, except recipes that declare what
/// they need (`# needs: ...`) and on which kernels they are proven (`# kernels:
/// 6.1, 6.12`, checked in the kernel lab, tests/lab.rs): those may fail here, but
/// only with problems of this kernel, never of the recipe.
#[test]
fn every_recipe_points_at_the_schema_and_checks_clean_on_this_kernel() {
    // `check` of a recipe with a `[tracer]` probes a scratch instance: keep it
    // out of other tests' snapshots.
    let _guard = TracefsGuard::acquire();
    let all = recipes();
    assert!(all.len() >= 5, "recipes/ must hold at least five recipes");
    for r in all {
        let body = std::fs::read_to_string(&r).unwrap();
        assert!(
            body.starts_with("#:schema ../schema/recipe.schema.json\n"),
            "{} must start with the #:schema line",
            r.display()
        );
        assert!(
            body.contains("\ndescription = "),
            "{} needs a description",
            r.display()
        );
        assert!(
            body.contains("# What to look for"),
            "{} needs a `# What to look for` comment block",
            r.display()
        );
        let out = trace_recipe(&["check", r.to_str().unwrap()]);
        let needs = body.lines().any(|l| l.starts_with("# needs: "));
        if needs {
            assert!(
                body.lines().any(|l| l.starts_with("# kernels: ")),
                "{} declares `# needs:` but not `# kernels:` (where the lab proves it)",
                r.display()
            );
        }
        if needs && !out.status.success() {
            let stdout = text(&out.stdout);
            let errors: Vec<&str> = stdout.lines().filter(|l| l.contains(": error (")).collect();
            assert!(
                !errors.is_empty() && errors.iter().all(|l| l.contains(": error (this kernel):")),
                "{} may fail here only for what this kernel lacks:\n{stdout}{}",
                r.display(),
                text(&out.stderr)
            );
            continue;
        }
        assert!(
            out.status.success(),
            "{} does not check clean:\n{}{}",
            r.display(),
            text(&out.stdout),
            text(&out.stderr)
        );
    }
}

/// README's "Two commands on a fresh machine": the test command is the line CI
/// runs, and the run command names a recipe that exists and checks clean here.
#[test]
fn readme_names_the_commands_ci_and_users_run() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Two commands on a fresh machine"))
        .expect("README has a `Two commands on a fresh machine` section");
    let commands: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .map(str::trim)
        .collect();
    assert_eq!(commands.len(), 2, "two commands, indented: {commands:?}");
    let test_cmd = commands
        .iter()
        .find(|c| c.contains("scripts/test"))
        .expect("README gives the test command");
    assert!(
        ci.lines().any(|l| l.trim() == *test_cmd),
        "CI must run the README's test command `{test_cmd}` as it is written"
    );
    let run_cmd = commands
        .iter()
        .find(|c| c.contains(" run "))
        .expect("README gives a run command");
    let recipe = run_cmd
        .strip_prefix("cargo run --release -- run ")
        .unwrap_or_else(|| panic!("`{run_cmd}` is not `cargo run --release -- run RECIPE`"));
    assert!(
        recipe.starts_with("recipes/"),
        "{run_cmd} runs a recipe from recipes/"
    );
    let out = trace_recipe(&["check", repo().join(recipe).to_str().unwrap()]);
    assert!(
        out.status.success(),
        "README's recipe `{recipe}` must check clean:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn checked_in_report_schema_is_what_schema_report_prints() {
    let out = trace_recipe(&["schema", "--report"]);
    assert!(out.status.success());
    let checked_in = std::fs::read_to_string(repo().join("schema/report.schema.json")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        checked_in.trim_end(),
        "schema/report.schema.json is stale: run `cargo run -- schema --report > schema/report.schema.json`"
    );
    let schema: serde_json::Value = serde_json::from_str(&checked_in).unwrap();
    for key in [
        "format_version",
        "events",
        "lost_total",
        "lost_percent",
        "timeline",
        "latency",
        "stacks",
    ] {
        assert!(
            schema["properties"].get(key).is_some(),
            "report schema lacks `{key}`"
        );
    }
}

#[test]
fn checked_in_manifest_schema_is_what_schema_manifest_prints() {
    let out = trace_recipe(&["schema", "--manifest"]);
    assert!(out.status.success());
    let checked_in =
        std::fs::read_to_string(repo().join("schema/bundle-manifest.schema.json")).unwrap();
    assert_eq!(
        text(&out.stdout).trim_end(),
        checked_in.trim_end(),
        "schema/bundle-manifest.schema.json is stale: run `cargo run -- schema --manifest > schema/bundle-manifest.schema.json`"
    );
}
