//! `check` on the corpus of bad recipes: every expected `LINE:COL message` is
//! printed, and nothing else is reported. Each file lists its expectations as
//! `# expect: LINE:COL TEXT` comments.

use crate::common::{repo, text, trace_recipe};

#[test]
fn check_names_whether_the_recipe_or_the_kernel_is_at_fault() {
    let out = trace_recipe(&[
        "check",
        repo()
            .join("tests/bad-recipes/no-such-event.toml")
            .to_str()
            .unwrap(),
    ]);
    assert!(text(&out.stdout).contains("error (this kernel): this kernel has no event"));
    let out = trace_recipe(&[
        "check",
        repo().join("tests/bad-recipes/name.toml").to_str().unwrap(),
    ]);
    assert!(text(&out.stdout).contains("error (recipe): recipe name"));
}

#[test]
fn set_overrides_params_and_rejects_unknown_ones() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = crate::common::write_recipe(
        dir.path(),
        "p.toml",
        "name = \"p\"\n[params]\nevent = \"sched_swtch\"\n[[events]]\nname = \"sched:{{ event }}\"\n",
    );
    let r = recipe.to_str().unwrap();
    let bad = trace_recipe(&["check", r]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stdout).contains(
            "p.toml:5:8: error (this kernel): this kernel has no event `sched:sched_swtch`"
        ),
        "{}",
        text(&bad.stdout)
    );
    let good = trace_recipe(&["check", r, "--set", "event=sched_switch"]);
    assert_eq!(good.status.code(), Some(0), "{}", text(&good.stdout));
    let unknown = trace_recipe(&["check", r, "--set", "evnt=x"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        text(&unknown.stdout)
            .contains("p.toml: error (recipe): `--set evnt=...` names no parameter of this recipe"),
        "{}",
        text(&unknown.stdout)
    );
    // A recipe key that `run` has an option for: the help names the option.
    let duration = trace_recipe(&["check", r, "--set", "duration=2s"]);
    assert_eq!(duration.status.code(), Some(1));
    assert!(
        text(&duration.stdout).contains(
            "help: its `[params]` are: event; to replace the recipe's `duration`, use `--duration 2s`"
        ),
        "{}",
        text(&duration.stdout)
    );
}

/// Runs `check EXTRA... FILE` on every recipe of tests/bad-recipes and asserts
/// that exactly its `# expect:` problems are reported, at their places.
fn every_bad_recipe_reports_its_expected_places_with(extra: &[&str]) {
    let dir = repo().join("tests/bad-recipes");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 15, "corpus shrank: {files:?}");
    for file in files {
        let body = std::fs::read_to_string(&file).unwrap();
        let expects: Vec<(&str, &str)> = body
            .lines()
            .filter_map(|l| l.strip_prefix("# expect: "))
            .map(|e| e.split_once(' ').unwrap_or((e, "")))
            .collect();
        assert!(
            !expects.is_empty(),
            "{} has no `# expect:` line",
            file.display()
        );
        let mut args = vec!["check", file.to_str().unwrap()];
        args.extend(extra);
        let out = trace_recipe(&args);
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: check must fail:\n{stdout}{}",
            file.display(),
            text(&out.stderr)
        );
        let errors: Vec<&str> = stdout.lines().filter(|l| l.contains(": error (")).collect();
        for (place, msg) in &expects {
            let prefix = match *place {
                "-" => format!("{}: error (", file.display()),
                _ => format!("{}:{place}: error (", file.display()),
            };
            assert!(
                errors
                    .iter()
                    .any(|l| l.starts_with(&prefix) && l.contains(msg)),
                "{}: expected `{place} {msg}` in:\n{stdout}",
                file.display()
            );
        }
        assert_eq!(
            errors.len(),
            expects.len(),
            "{}: unexpected extra problems:\n{stdout}",
            file.display()
        );
        assert!(
            stdout.contains(&format!("{} problem", expects.len())),
            "{stdout}"
        );
    }
}

/// The corpus checked offline against this development machine's fact file
/// (`check --facts`: no root, no tracefs), in the fast tier.
#[test]
fn every_bad_recipe_reports_its_expected_places_from_the_host_facts() {
    let facts = repo().join("tests/facts/host.json.zst");
    every_bad_recipe_reports_its_expected_places_with(&["--facts", facts.to_str().unwrap()]);
}

/// The corpus checked against the live kernel (`check` reads tracefs and
/// writes nothing to it: no lock).
#[test]
fn every_bad_recipe_reports_its_expected_places_on_this_kernel() {
    every_bad_recipe_reports_its_expected_places_with(&[]);
}

/// `[buffer] persistent` offline, against 6.12's facts as booted without and
/// with the boot-mapped instance (`boot_instances`): without it, the error at
/// the key says which kernel command line makes it; with it, the recipe
/// passes; what such an instance cannot have is refused at its own key.
#[test]
fn a_flight_recorder_needs_its_boot_mapped_instance_and_says_how_to_boot() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = repo().join("tests/lab/persist/persistent.toml");
    let facts = repo().join("tests/facts/debian-6.12.json.zst");
    let out = trace_recipe(&[
        "check",
        recipe.to_str().unwrap(),
        "--facts",
        facts.to_str().unwrap(),
    ]);
    let said = text(&out.stdout);
    assert!(!out.status.success());
    assert!(
        said.contains("persistent.toml:12:14: error (this kernel): this kernel (6.12")
            && said.contains("has no boot-mapped instance `boot_map`"),
        "{said}"
    );
    assert!(
        said.contains("booted with `reserve_mem=8M:4096:trace trace_instance=boot_map@trace`"),
        "{said}"
    );
    // The same facts with the instance, as the lab's 6.12 booted with it.
    let json = zstd::decode_all(std::fs::File::open(&facts).unwrap()).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    v["boot_instances"] = serde_json::json!(["boot_map"]);
    let booted = dir.path().join("booted.json");
    std::fs::write(&booted, v.to_string()).unwrap();
    let out = trace_recipe(&[
        "check",
        recipe.to_str().unwrap(),
        "--facts",
        booted.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let bad = crate::common::write_recipe(
        dir.path(),
        "bad.toml",
        "name = \"bad\"\n[[events]]\nname = \"sched:sched_switch\"\n[[triggers]]\nevent = \"sched:sched_switch\"\naction = \"snapshot\"\n[scope]\ncommand = [\"true\"]\n[buffer]\npersistent = \"boot_map\"\n",
    );
    let out = trace_recipe(&[
        "check",
        bad.to_str().unwrap(),
        "--facts",
        booted.to_str().unwrap(),
    ]);
    let said = text(&out.stdout);
    assert!(
        said.contains(
            "bad.toml:6:10: error (recipe): a `snapshot` trigger needs a snapshot buffer"
        ),
        "{said}"
    );
    assert!(
        said.contains("bad.toml:8:11: error (recipe): `[scope] command` is a workload"),
        "{said}"
    );
}
