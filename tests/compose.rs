//! Composition: `extends` chains, typed params, `check --explain`, and the run
//! folder and bundle carrying every file of the chain.

use std::path::Path;

use crate::common::{TracefsGuard, text, trace_recipe, write_recipe};

/// `team/common/base.toml` and `team/openat.toml` extending it, in `dir`.
fn chain(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("team/common")).unwrap();
    write_recipe(
        &dir.join("team/common"),
        "base.toml",
        r#"name = "base"
description = "execs and failed opens"
duration = "{{ dur }}"

[params.dur]
type = "duration"
default = "20s"
help = "how long to record at most"

[buffer]
size_kb = 1024
clock = "mono"

[scope]
follow_forks = true

[[events]]
name = "sched:sched_process_exec"

[[events]]
name = "syscalls:sys_exit_openat"
filter = "ret < 0"

[[expect]]
that = "lost_events == 0"

[[expect]]
that = "count(sched:sched_process_exec) >= 100"
"#,
    );
    write_recipe(
        &dir.join("team"),
        "openat.toml",
        r#"extends = "common/base.toml"
name = "openat-team"

[params.errno]
type = "int"
default = -2
help = "the error to keep"

[buffer]
size_kb = 2048

[[events]]
name = "syscalls:sys_exit_openat"
filter = "ret == {{ errno }}"

[[events]]
name = "sched:sched_process_exit"

[[expect]]
that = "count(sched:sched_process_exec) >= 1"
"#,
    )
}

#[test]
fn explain_names_the_file_and_line_of_every_effective_key() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = chain(dir.path());
    let out = trace_recipe(&["check", "--explain", recipe.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let base = dir.path().join("team/common/base.toml");
    let team = recipe.display().to_string();
    let base = base.display().to_string();
    for (key, place) in [
        ("buffer.size_kb = 2048", format!("{team}:10")),
        ("buffer.clock = \"mono\"", format!("{base}:12")),
        ("duration = \"20s\"", format!("{base}:3")),
        (
            "events[0].name = \"sched:sched_process_exec\"",
            format!("{base}:18"),
        ),
        // The team's entry of the same event replaces the base's in place...
        (
            "events[1].name = \"syscalls:sys_exit_openat\"",
            format!("{team}:13"),
        ),
        ("events[1].filter = \"ret == -2\"", format!("{team}:14")),
        // ... and a new one is appended.
        (
            "events[2].name = \"sched:sched_process_exit\"",
            format!("{team}:17"),
        ),
        (
            "expect[0].that = \"lost_events == 0\"",
            format!("{base}:25"),
        ),
        (
            "expect[1].that = \"count(sched:sched_process_exec) >= 1\"",
            format!("{team}:20"),
        ),
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no `{key}` in:\n{stdout}"));
        assert!(
            line.ends_with(&format!("# {place}")),
            "`{key}` should come from {place}:\n{stdout}"
        );
    }
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("events[")).count(),
        4,
        "three events (one with a filter):\n{stdout}"
    );
}

#[test]
fn problems_in_a_base_point_into_the_base() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = chain(dir.path());
    let base = dir.path().join("team/common/base.toml");
    let body = std::fs::read_to_string(&base).unwrap();
    std::fs::write(
        &base,
        body.replace("clock = \"mono\"", "clok = \"mono\"").replace(
            "sched_process_exec\"\n\n[[events]]",
            "sched_process_exe\"\n\n[[events]]",
        ),
    )
    .unwrap();
    let out = trace_recipe(&["check", recipe.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let shown = dir.path().join("team/common/base.toml");
    let shown = shown.display();
    assert!(
        stdout.contains(&format!(
            "{shown}:12:1: error (recipe): unknown key `clok` in `buffer`"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("12 | clok = \"mono\""), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "{shown}:18:8: error (this kernel): this kernel has no event `sched:sched_process_exe`"
        )),
        "{stdout}"
    );
}

/// `team/r.toml` extends `../common/base.toml`: the recipe's tree stays
/// `team/` (never the folder both share), so the base is read but foreign:
/// `check --explain` lists neither its keys nor its values, only how many it
/// set, and its own `extends` may not leave `common/` (a base another team
/// wrote cannot name `../other/.ssh/id_ed25519`, whose first line a parse
/// error would show).
#[test]
fn a_base_beside_the_recipes_folder_is_foreign_and_cannot_reach_further() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for f in ["team", "common", "other/.ssh"] {
        std::fs::create_dir_all(d.join(f)).unwrap();
    }
    std::fs::write(
        d.join("other/.ssh/id_ed25519"),
        "-----BEGIN OPENSSH PRIVATE KEY SECRET-LINE\n",
    )
    .unwrap();
    write_recipe(
        &d.join("common"),
        "base.toml",
        "description = \"BASE-VALUE\"\n[buffer]\nsize_kb = 1024\n",
    );
    let r = write_recipe(
        &d.join("team"),
        "r.toml",
        "extends = \"../common/base.toml\"\nname = \"r\"\n[[events]]\nname = \"sched:sched_switch\"\n",
    );
    let out = trace_recipe(&["check", "--explain", r.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(!stdout.contains("BASE-VALUE"), "{stdout}");
    assert!(!stdout.contains("size_kb"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "# 2 keys set by {}, outside the folder of the recipe you run: not shown",
            d.join("team/../common/base.toml").display()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("name = \"r\""), "{stdout}");
    // The base names a file of a third folder: refused, its line never shown.
    write_recipe(
        &d.join("common"),
        "base.toml",
        "extends = \"../other/.ssh/id_ed25519\"\ndescription = \"x\"\n",
    );
    let out = trace_recipe(&["check", r.to_str().unwrap()]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(!all.contains("SECRET-LINE"), "{all}");
    // Refused at the base's `extends` line, the key file never read (a
    // problem in the key file itself would name it).
    assert!(
        all.contains(&format!(
            "{}: error (recipe): this base recipe, outside the folder of the recipe you run, has a problem; its content is not shown",
            d.join("team/../common/base.toml").display()
        )),
        "{all}"
    );
    assert!(!all.contains("id_ed25519"), "{all}");
    // A base of its own folder is fine.
    write_recipe(&d.join("common"), "root.toml", "description = \"y\"\n");
    write_recipe(
        &d.join("common"),
        "base.toml",
        "extends = \"root.toml\"\ndescription = \"x\"\n",
    );
    let out = trace_recipe(&["check", r.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

#[test]
fn cycles_and_long_chains_are_refused_at_the_extends_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_recipe(d, "a.toml", "extends = \"b.toml\"\nname = \"a\"\n");
    write_recipe(d, "b.toml", "name = \"b\"\nextends = \"a.toml\"\n");
    let out = trace_recipe(&["check", d.join("a.toml").to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "{}:2:11: error (recipe): `extends` makes a cycle: {} -> {} -> {}",
            d.join("b.toml").display(),
            d.join("a.toml").display(),
            d.join("b.toml").display(),
            d.join("a.toml").display()
        )),
        "{stdout}"
    );

    // c0 -> c1 -> ... -> c9: nine steps, one too many; c1's eight are fine.
    for i in 0..9 {
        write_recipe(
            d,
            &format!("c{i}.toml"),
            &format!("extends = \"c{}.toml\"\nname = \"c\"\n", i + 1),
        );
    }
    write_recipe(
        d,
        "c9.toml",
        "name = \"c\"\n[[events]]\nname = \"sched:sched_switch\"\n",
    );
    let out = trace_recipe(&["check", d.join("c0.toml").to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "{}:1:11: error (recipe): `extends` chain is longer than 8 steps",
            d.join("c8.toml").display()
        )),
        "{stdout}"
    );
    let out = trace_recipe(&["check", d.join("c1.toml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    write_recipe(d, "m.toml", "extends = \"nowhere/x.toml\"\nname = \"m\"\n");
    let out = trace_recipe(&["check", d.join("m.toml").to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "{}:1:11: error (recipe): cannot read base recipe `{}`",
            d.join("m.toml").display(),
            d.join("nowhere/x.toml").display()
        )),
        "{stdout}"
    );
}

#[test]
fn typed_params_check_set_values_at_the_param_line() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = chain(dir.path());
    let r = recipe.to_str().unwrap();
    let out = trace_recipe(&["check", r, "--set", "errno=-13", "--set", "dur=1s"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let out = trace_recipe(&["check", r, "--set", "errno=ENOENT", "--set", "dur=5"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "{r}:4:9: error (recipe): `--set errno=ENOENT`: `ENOENT` is not an integer, as the parameter's type says"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "{}:5:9: error (recipe): `--set dur=5`: `5` is not a duration",
            dir.path().join("team/common/base.toml").display()
        )),
        "{stdout}"
    );
    // A default of the wrong type, an unknown type, a typed param without a value.
    let bad = write_recipe(
        dir.path(),
        "bad.toml",
        "name = \"bad\"\n[params.a]\ntype = \"int\"\ndefault = \"x\"\n[params.b]\ntype = \"float\"\ndefault = 1\n[params.c]\ntype = \"string\"\n[[events]]\nname = \"sched:sched_switch\"\n",
    );
    let out = trace_recipe(&["check", bad.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    let b = bad.display();
    for want in [
        format!("{b}:4:11: error (recipe): the default of `a` is not an integer"),
        format!("{b}:6:8: error (recipe): `params.b.type` is not a parameter type"),
        format!("{b}:8:9: error (recipe): parameter `c` has no value"),
    ] {
        assert!(stdout.contains(&want), "no `{want}` in:\n{stdout}");
    }
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn a_run_folder_and_its_bundle_carry_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let recipe = chain(dir.path());
        let out_dir = dir.path().join("run");
        let guard = TracefsGuard::acquire();
        let o = trace_recipe(&crate::common::run_args(
            &recipe,
            &out_dir,
            &["--bundle"],
            &["sh", "-c", "ls /nonexistent 2>/dev/null; true"],
        ));
        guard.assert_unchanged();
        drop(guard);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let read = |n: &str| std::fs::read_to_string(out_dir.join(n)).unwrap();
        assert_eq!(
            read("recipe.source.toml"),
            std::fs::read_to_string(&recipe).unwrap()
        );
        assert_eq!(
            read("recipe.base-1.toml"),
            std::fs::read_to_string(dir.path().join("team/common/base.toml")).unwrap()
        );
        // The rendered recipe stands alone: it loads without its bases.
        let rendered = read("recipe.toml");
        assert!(!rendered.contains("extends"), "{rendered}");
        assert!(rendered.contains("ret == -2"), "{rendered}");
        let lone = write_recipe(dir.path(), "lone.toml", &rendered);
        let c = trace_recipe(&["check", lone.to_str().unwrap()]);
        assert_eq!(c.status.code(), Some(0), "{}", text(&c.stdout));
        let list = duct::cmd!("tar", "--zstd", "-tf", dir.path().join("run.tar.zst"))
            .read()
            .unwrap();
        for m in ["recipe.toml", "recipe.source.toml", "recipe.base-1.toml"] {
            assert!(list.lines().any(|l| l == m), "no {m} in:\n{list}");
        }
    }
}
