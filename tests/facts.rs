//! Kernel facts as data: `trace-recipe facts` reads tracefs without changing
//! it, `check --facts` validates offline (no root, no tracefs) against a fact
//! file, a bundle or an output folder, and validation runs from the fact files
//! of this host and the kernel lab's Debian 6.1, 6.12, 7.2 and arm64 6.12 (tests/facts/, made by
//! scripts/refresh-facts.sh) without the tracefs lock.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use trace_recipe::host::HostFacts;
use trace_recipe::kernel::KernelFacts;
use trace_recipe::recipe::{Builtins, load};
use trace_recipe::validate::validate;

use crate::common::{TracefsGuard, assert_exit, bin, repo, text, trace_recipe, write_recipe};

fn facts_file(name: &str) -> PathBuf {
    repo().join("tests/facts").join(format!("{name}.json.zst"))
}

/// `trace-recipe check --facts FACTS RECIPE` run as user and group 65534
/// (nobody), who may not read tracefs. The binary, the facts and the recipe are
/// copied into a world-readable temporary folder first (the checkout may sit
/// where nobody cannot read, e.g. under /root); a FACTS that does not exist
/// stays a path that does not exist.
pub(crate) fn check_offline_as_nobody(facts: &Path, recipe: &Path) -> Output {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("trace-recipe-nobody-")
        .tempdir_in("/tmp")
        .unwrap();
    let open = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    open(dir.path(), 0o755);
    let copy = |from: &Path, mode: u32| -> PathBuf {
        let to = dir.path().join(from.file_name().unwrap());
        if from.exists() {
            std::fs::copy(from, &to).unwrap();
            open(&to, mode);
        }
        to
    };
    let (exe, facts, recipe) = (copy(&bin(), 0o755), copy(facts, 0o644), copy(recipe, 0o644));
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&exe)
        .arg("check")
        .arg("--facts")
        .arg(&facts)
        .arg(&recipe)
        .current_dir(dir.path())
        .output()
        .expect("setpriv (util-linux)");
    // Paths in the output name the copies: say them as the caller gave them.
    let back = |b: Vec<u8>| {
        String::from_utf8_lossy(&b)
            .replace(&format!("{}/", dir.path().display()), "")
            .into_bytes()
    };
    Output {
        status: o.status,
        stdout: back(o.stdout),
        stderr: back(o.stderr),
    }
}

/// Validates `recipe` (a repo path) against fact file `facts` through the
/// library, as a unit test would: no tracefs, no lock.
fn verdict(facts: &str, recipe: &str) -> Result<(), String> {
    let facts = KernelFacts::load(&facts_file(facts)).unwrap();
    let loaded = load(
        &repo().join(recipe),
        &[],
        &Builtins {
            started: "20260101-000000".into(),
        },
    )
    .unwrap();
    let host = HostFacts::gather(&loaded);
    validate(&loaded, &facts, &host).map(|_| ()).map_err(|d| {
        d.iter()
            .map(|d| d.message.clone())
            .collect::<Vec<_>>()
            .join("; ")
    })
}

#[test]
fn validation_runs_from_the_fact_files_of_three_kernels() {
    // kprobes and hist triggers: the Debian kernels have them, this host does not.
    for (recipe, missing) in [
        ("tests/lab/kprobe-fetch.toml", "kprobe_events"),
        ("tests/lab/hist-trigger.toml", "hist"),
    ] {
        assert_eq!(verdict("debian-6.1", recipe), Ok(()), "{recipe} on 6.1");
        assert_eq!(verdict("debian-6.12", recipe), Ok(()), "{recipe} on 6.12");
        assert_eq!(verdict("debian-7.2", recipe), Ok(()), "{recipe} on 7.2");
        let here = verdict("host", recipe).unwrap_err();
        assert!(here.contains(missing), "{recipe} here: {here}");
    }
    // function_graph: both Debian kernels offer it (6.1 at the top level only).
    let f61 = KernelFacts::load(&facts_file("debian-6.1")).unwrap();
    let f612 = KernelFacts::load(&facts_file("debian-6.12")).unwrap();
    assert!(!f61.instance.tracers.contains(&"function_graph".to_string()));
    assert!(
        f612.instance
            .tracers
            .contains(&"function_graph".to_string())
    );
    // Its graph filter files stay global (the instance has none).
    assert!(!f612.instance.files.contains("set_graph_function"));
    assert_eq!(
        verdict("debian-6.12", "tests/lab/function-graph.toml"),
        Ok(())
    );
    assert_eq!(
        verdict("debian-6.1", "tests/lab/function-graph.toml"),
        Ok(())
    );
    assert!(verdict("host", "tests/lab/function-graph.toml").is_err());
    // A freshly booted kernel's top-level ring buffer is still unexpanded.
    assert!(
        f61.top_buffer.expanded_size_kb.is_some(),
        "{:?}",
        f61.top_buffer
    );
    // Events of every kernel: the plain recipes pass everywhere.
    for facts in [
        "debian-6.1",
        "debian-6.12",
        "debian-7.2",
        "debian-arm64-6.12",
        "host",
    ] {
        assert_eq!(verdict(facts, "recipes/exec-tree.toml"), Ok(()), "{facts}");
    }
    // arm64 (Debian 12's 6.12): kprobes by arm64's registers and by BTF names,
    // hist triggers and function_graph in an instance; x86's registers and
    // fprobes (arm64 has them from 6.14) refused, and arm64's registers on x86.
    for recipe in [
        "tests/lab/arm64/kprobe-arm64.toml",
        "tests/lab/arm64/kprobe-btf.toml",
        "tests/lab/hist-trigger.toml",
        "tests/lab/function-graph.toml",
        "tests/lab/eprobe-exec.toml",
    ] {
        assert_eq!(verdict("debian-arm64-6.12", recipe), Ok(()), "{recipe}");
    }
    for (facts, recipe, why) in [
        (
            "debian-arm64-6.12",
            "tests/lab/kprobe-fetch.toml",
            "`%di` is not a register on aarch64",
        ),
        (
            "debian-arm64-6.12",
            "tests/lab/fprobe-btf.toml",
            "has no fprobe events",
        ),
        (
            "debian-6.12",
            "tests/lab/arm64/kprobe-arm64.toml",
            "`%x0` is not a register on x86_64",
        ),
    ] {
        let e = verdict(facts, recipe).unwrap_err();
        assert!(e.contains(why), "{recipe} on {facts}: {e}");
    }
}

/// func-args and funcgraph-args (issue 35 item 4): 7.2 has the options; 6.12
/// and 6.1 lack them, and `check` says which release brings them.
#[test]
fn func_args_checks_on_7_2_and_is_refused_before_6_15_naming_it() {
    for option in ["func-args", "funcgraph-args"] {
        let recipe = format!("tests/lab/{option}.toml");
        assert_eq!(verdict("debian-7.2", &recipe), Ok(()));
        for facts in ["debian-6.12", "debian-6.1"] {
            let why = verdict(facts, &recipe).unwrap_err();
            assert!(
                why.contains(&format!("no trace option `{option}`")) && why.contains("Linux 6.15"),
                "{facts}: {why}"
            );
        }
    }
}

#[test]
fn check_facts_as_nobody_gives_the_kernel_specific_verdict() {
    let recipe = repo().join("tests/lab/kprobe-fetch.toml");
    let ok = check_offline_as_nobody(&facts_file("debian-6.12"), &recipe);
    assert_exit(&ok, 0);
    assert!(
        text(&ok.stdout).contains("checked offline against the facts in"),
        "{}",
        text(&ok.stdout)
    );
    let bad = check_offline_as_nobody(&facts_file("host"), &recipe);
    let out = text(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "{out}{}", text(&bad.stderr));
    assert!(
        out.contains("kprobe-fetch.toml:") && out.contains("kprobe_events"),
        "{out}"
    );
}

#[test]
fn unusable_fact_files_are_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = repo().join("recipes/exec-tree.toml");
    let newer = dir.path().join("newer.json");
    std::fs::write(&newer, r#"{"format_version": 99}"#).unwrap();
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "not json").unwrap();
    let truncated = dir.path().join("cut.json.zst");
    let whole = std::fs::read(facts_file("host")).unwrap();
    std::fs::write(&truncated, &whole[..whole.len() / 2]).unwrap();
    for (file, want) in [
        (&newer, "newer than this trace-recipe reads"),
        (&junk, "is not a trace-recipe fact file"),
        (&truncated, "is not a trace-recipe fact file"),
        (&dir.path().join("absent.json"), "cannot read fact file"),
    ] {
        let o = check_offline_as_nobody(file, &recipe);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{}: {err}", file.display());
        assert!(err.contains(want), "{}: {err}", file.display());
    }
}

#[test]
fn latency_and_stack_tracers_validate_from_the_rt_facts_and_check_names_what_a_kernel_lacks() {
    for recipe in [
        "tests/lab/rt/wakeup.toml",
        "tests/lab/rt/wakeup-rt.toml",
        "tests/lab/rt/wakeup-dl.toml",
        "tests/lab/stack.toml",
        "tests/lab/stack-filter.toml",
    ] {
        assert_eq!(verdict("debian-6.1-rt", recipe), Ok(()), "{recipe} on RT");
    }
    // Debian's stock kernels have the stack tracer, not the wakeup tracers;
    // this host has neither.
    assert_eq!(verdict("debian-6.12", "tests/lab/stack.toml"), Ok(()));
    let e = verdict("debian-6.1", "tests/lab/rt/wakeup-rt.toml").unwrap_err();
    assert!(e.contains("CONFIG_SCHED_TRACER"), "{e}");
    let e = verdict("host", "tests/lab/stack.toml").unwrap_err();
    assert!(e.contains("no stack tracer"), "{e}");

    // irqsoff is in no Debian kernel: the RT facts with irqsoff offered at the
    // top level only. Its plan resets the global tracing_max_latency and
    // restores it, and `check` says so.
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(facts_file("debian-6.1-rt")).unwrap();
    let mut facts: serde_json::Value =
        serde_json::from_slice(&zstd::decode_all(bytes.as_slice()).unwrap()).unwrap();
    facts["tracers"]
        .as_array_mut()
        .unwrap()
        .push("irqsoff".into());
    let with_irqsoff = dir.path().join("irqsoff-facts.json");
    std::fs::write(&with_irqsoff, facts.to_string()).unwrap();
    // `check --plan` of a recipe of `tracer` (expecting a max_latency) with
    // the facts `facts` resets and restores the global file.
    let top_level_plan = |facts: &Path, tracer: &str| {
        let recipe = write_recipe(
            dir.path(),
            &format!("{tracer}.toml"),
            &format!(
                "name = \"t\"\n[tracer]\nname = \"{tracer}\"\n[[expect]]\nthat = \"max_latency < 10ms\"\n"
            ),
        );
        let o = trace_recipe(&[
            "check",
            "--plan",
            "--facts",
            facts.to_str().unwrap(),
            recipe.to_str().unwrap(),
        ]);
        assert_exit(&o, 0);
        let out = text(&o.stdout);
        assert!(
            out.contains(
                "echo \"0\" > tracing_max_latency    (undo: write back the value read before)"
            ) && out.contains(&format!("offers tracer `{tracer}` only at the top level")),
            "{out}"
        );
    };
    top_level_plan(&with_irqsoff, "irqsoff");
    // timerlat keeps its largest thread latency in the same file: where the
    // instance lacks it (the RT facts with timerlat taken out of the
    // instance's tracers) it runs at the top level, and the global file is
    // reset and restored like irqsoff's.
    facts["instance"]["tracers"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t != "timerlat");
    let top_timerlat = dir.path().join("timerlat-facts.json");
    std::fs::write(&top_timerlat, facts.to_string()).unwrap();
    top_level_plan(&top_timerlat, "timerlat");
    // The same expectation with a tracer that measures no latency is the recipe's mistake.
    let recipe = write_recipe(
        dir.path(),
        "function.toml",
        "name = \"f\"\n[tracer]\nname = \"function\"\n[[expect]]\nthat = \"max_latency < 10ms\"\n",
    );
    let o = trace_recipe(&[
        "check",
        "--facts",
        facts_file("debian-6.1").to_str().unwrap(),
        recipe.to_str().unwrap(),
    ]);
    let out = text(&o.stdout) + &text(&o.stderr);
    assert!(
        out.contains(
            "error (recipe): `max_latency` is the result of a latency tracer, and this recipe's tracer is `function`"
        ),
        "{out}"
    );
}

#[test]
fn hwlat_osnoise_and_timerlat_parameters_validate_from_the_rt_facts_and_check_names_what_this_host_lacks()
 {
    let recipes = [
        ("tests/lab/rt/hwlat.toml", "hwlat", "CONFIG_HWLAT_TRACER", 7),
        (
            "tests/lab/rt/osnoise.toml",
            "osnoise",
            "CONFIG_OSNOISE_TRACER",
            7,
        ),
        (
            "recipes/timerlat.toml",
            "timerlat",
            "CONFIG_TIMERLAT_TRACER",
            22,
        ),
    ];
    for (recipe, name, config, line) in recipes {
        assert_eq!(verdict("debian-6.1-rt", recipe), Ok(()), "{recipe} on RT");
        // This host's kernel has none of them: `check` names the config
        // option, at the recipe's `name` line.
        let tracers =
            std::fs::read_to_string("/sys/kernel/tracing/available_tracers").unwrap_or_default();
        if tracers.split_whitespace().any(|t| t == name) {
            continue;
        }
        let o = trace_recipe(&["check", repo().join(recipe).to_str().unwrap()]);
        assert_exit(&o, 1);
        let out = text(&o.stdout) + &text(&o.stderr);
        assert!(
            out.contains(&format!(
                "{recipe}:{line}:8: error (this kernel): this kernel offers no tracer `{name}` (it was built without {config})"
            )),
            "{out}"
        );
    }
    // The plan writes the global files from their before-image, before the
    // tracer; check declares them.
    let o = trace_recipe(&[
        "check",
        "--plan",
        "--facts",
        facts_file("debian-6.1-rt").to_str().unwrap(),
        repo().join("tests/lab/rt/hwlat.toml").to_str().unwrap(),
    ]);
    assert_exit(&o, 0);
    let out = text(&o.stdout);
    for want in [
        "this recipe writes top-level (global) tracefs files: tracing_thresh, hwlat_detector/width, hwlat_detector/window, hwlat_detector/mode;",
        "echo \"100000\" > hwlat_detector/width    (undo: write back the value read before)",
        "echo \"200000\" > hwlat_detector/window    (undo: write back the value read before)",
        "echo \"round-robin\" > hwlat_detector/mode    (undo: write back the value read before)",
    ] {
        assert!(out.contains(want), "{want}\n{out}");
    }
    // A window below hwlat's default width: the width is written first.
    let dir = tempfile::tempdir().unwrap();
    let check = |body: &str| {
        let r = write_recipe(dir.path(), "r.toml", body);
        let o = trace_recipe(&[
            "check",
            "--plan",
            "--facts",
            facts_file("debian-6.1-rt").to_str().unwrap(),
            r.to_str().unwrap(),
        ]);
        (o.status.code(), text(&o.stdout) + &text(&o.stderr))
    };
    let (rc, out) = check(
        "name = \"h\"\n[tracer]\nname = \"hwlat\"\n[tracer.hwlat]\nwidth_us = 1000\nwindow_us = 10000\n",
    );
    assert_eq!(rc, Some(0), "{out}");
    let (w, win) = (
        out.find("> hwlat_detector/width").unwrap(),
        out.find("> hwlat_detector/window").unwrap(),
    );
    assert!(w < win, "{out}");
    // Mistakes, each at its key.
    for (body, want) in [
        (
            "[tracer]\nname = \"hwlat\"\n[tracer.hwlat]\nwidth_us = 300000\nwindow_us = 300000\n",
            "r.toml:5:12: error (recipe): `width_us` = 300000 µs must be less than `window_us` = 300000 µs",
        ),
        (
            "[tracer]\nname = \"hwlat\"\n[tracer.hwlat]\nwidth_us = 2000000\n",
            "`width_us` = 2000000 µs must be less than `window_us` = 1000000 µs (the kernel's default window_us)",
        ),
        (
            "[tracer]\nname = \"hwlat\"\n[tracer.hwlat]\nwidth_ms = 100\n",
            "did you mean `width_us`?",
        ),
        (
            "[tracer]\nname = \"hwlat\"\n[tracer.hwlat]\nmode = \"fast\"\n",
            "hwlat has no mode `fast`",
        ),
        (
            "[tracer]\nname = \"osnoise\"\n[tracer.hwlat]\nwidth_us = 100\n",
            "`[tracer.hwlat]` sets the hwlat tracer's parameters, and this recipe's tracer is `osnoise`",
        ),
        (
            "[tracer]\nname = \"osnoise\"\n[tracer.osnoise]\nruntime_us = 2000\nperiod_us = 1000\n",
            "`runtime_us` = 2000 µs must be at most `period_us` = 1000 µs",
        ),
        (
            "[tracer]\nname = \"osnoise\"\n[tracer.osnoise]\ncpus = \"0,7\"\n",
            "this machine has no CPU 7",
        ),
        (
            "[tracer]\nname = \"timerlat\"\n[tracer.timerlat]\nperiod_us = 50\n",
            "timerlat's period is 50 µs; the kernel takes 100 to 1000000 µs",
        ),
        (
            "[tracer]\nname = \"timerlat\"\n[tracer.timerlat]\nperiod_us = \"1ms\"\n",
            "microseconds as an integer",
        ),
    ] {
        let (rc, out) = check(&format!("name = \"x\"\n{body}"));
        assert!(
            rc != Some(0) && out.contains(want),
            "{body}\nwant: {want}\n{out}"
        );
    }
}

#[test]
fn the_function_profiler_is_a_key_where_the_kernel_has_it_and_named_as_missing_where_not() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = write_recipe(
        dir.path(),
        "profile.toml",
        "name = \"profile\"\n[tracer]\nname = \"function\"\nfunctions = [\"vfs_*\"]\nfunction_profile = true\n",
    );
    // No Debian kernel has CONFIG_FUNCTION_PROFILER: check says so.
    let o = trace_recipe(&[
        "check",
        "--facts",
        facts_file("debian-6.12").to_str().unwrap(),
        recipe.to_str().unwrap(),
    ]);
    let out = text(&o.stdout) + &text(&o.stderr);
    assert!(
        out.contains("error (this kernel): this kernel has no function profiler")
            && out.contains("CONFIG_FUNCTION_PROFILER"),
        "{out}"
    );
    // A kernel that has it (the 6.12 facts with function_profile_enabled):
    // the plan switches it on globally and restores it.
    let bytes = std::fs::read(facts_file("debian-6.12")).unwrap();
    let mut facts: serde_json::Value =
        serde_json::from_slice(&zstd::decode_all(bytes.as_slice()).unwrap()).unwrap();
    facts["files"]
        .as_array_mut()
        .unwrap()
        .push("function_profile_enabled".into());
    let with = dir.path().join("profiler-facts.json");
    std::fs::write(&with, facts.to_string()).unwrap();
    let o = trace_recipe(&[
        "check",
        "--plan",
        "--facts",
        with.to_str().unwrap(),
        recipe.to_str().unwrap(),
    ]);
    assert_exit(&o, 0);
    assert!(
        text(&o.stdout).contains(
            "echo \"1\" > function_profile_enabled    (undo: write back the value read before)"
        ),
        "{}",
        text(&o.stdout)
    );
    // As a trace option it is the recipe's mistake, not the kernel's.
    let recipe = write_recipe(
        dir.path(),
        "option.toml",
        "name = \"o\"\n[tracer]\nname = \"function\"\noptions = { function_profile_enabled = true }\n",
    );
    let o = trace_recipe(&[
        "check",
        "--facts",
        facts_file("debian-6.12").to_str().unwrap(),
        recipe.to_str().unwrap(),
    ]);
    let out = text(&o.stdout) + &text(&o.stderr);
    assert!(
        out.contains("error (recipe): `function_profile_enabled` is not a trace option")
            && !out.contains("this kernel has no trace option"),
        "{out}"
    );
}

/// Function triggers that switch events: validated offline from the 6.1 facts
/// (the function, the target event), written `FUNCTION:enable_event:SYS:EV[:N]`
/// and removed by `!` and the whole command (the kernel matches a command with
/// a count or an event only so); `dump`/`cpudump` refused with the reason.
#[test]
fn function_event_triggers_are_planned_with_their_removal_and_dump_is_refused() {
    let facts = facts_file("debian-6.1");
    let recipe = repo().join("tests/lab/function-event.toml");
    let o = trace_recipe(&[
        "check",
        "--plan",
        "--facts",
        facts.to_str().unwrap(),
        recipe.to_str().unwrap(),
    ]);
    let plan = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{plan}{}", text(&o.stderr));
    for (command, undo) in [
        (
            "ksys_sync:disable_event:sched:sched_process_fork",
            "!ksys_sync:disable_event:sched:sched_process_fork",
        ),
        (
            "ksys_sync:enable_event:sched:sched_process_exit:1",
            "!ksys_sync:enable_event:sched:sched_process_exit:1",
        ),
        ("ksys_sync:snapshot:1", "!ksys_sync:snapshot:1"),
    ] {
        assert!(
            plan.lines()
                .any(|l| l.contains(&format!("echo \"{command}\" >> "))
                    && l.contains("/set_ftrace_filter")
                    && l.contains(&format!("(undo: echo \"{undo}\" >> "))),
            "{command}:\n{plan}"
        );
    }
    let out = check_refused(
        &facts,
        "bad.toml",
        "name = \"bad\"\n[[triggers]]\nfunction = \"ksys_sync\"\naction = \"enable_event\"\ntarget = \"sched:sched_nope\"\n[[triggers]]\nfunction = \"ksys_sync\"\naction = \"disable_event\"\n[[triggers]]\nfunction = \"ksys_sync\"\naction = \"cpudump\"\n",
    );
    for (place, msg) in [
        (
            "5:10",
            "this kernel has no event `sched:sched_nope` to enable",
        ),
        ("8:10", "`disable_event` needs `target = \"system:event\"`"),
        (
            "11:10",
            "`cpudump` is refused: it prints the top-level ring buffer",
        ),
    ] {
        assert!(
            out.lines()
                .any(|l| l.contains(&format!("bad.toml:{place}: error")) && l.contains(msg)),
            "{place} {msg}:\n{out}"
        );
    }
}

#[test]
fn a_raw_address_as_kprobe_target_is_refused_as_a_recipe_mistake() {
    let facts = facts_file("debian-6.1");
    let out = check_refused(
        &facts,
        "raw.toml",
        "name = \"raw\"\n[[kprobes]]\nevent = \"at\"\nkind = \"kprobe\"\ntarget = \"0xffffffff81234567\"\n[[kprobes]]\nevent = \"modat\"\nkind = \"kprobe\"\ntarget = \"ext4:0x10+4\"\n",
    );
    for (place, target) in [("5:10", "0xffffffff81234567"), ("9:10", "ext4:0x10+4")] {
        assert!(
            out.lines().any(|l| l.contains(&format!("raw.toml:{place}: error (recipe)"))
                && l.contains(&format!(
                    "kprobe target `{target}` is a raw address: raw addresses are not supported as targets"
                ))),
            "{place}:\n{out}"
        );
    }
    assert!(
        !out.contains("this kernel has no function") && out.contains("\"SYMBOL+OFFS\""),
        "{out}"
    );
}

/// `check --facts FACTS` of a recipe `text` written as `name`: it must be
/// refused (exit 1); returns what it printed.
fn check_refused(facts: &Path, name: &str, text_of_recipe: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let recipe = write_recipe(dir.path(), name, text_of_recipe);
    let o = trace_recipe(&[
        "check",
        "--facts",
        facts.to_str().unwrap(),
        recipe.to_str().unwrap(),
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    out
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn facts_and_check_leave_tracefs_unchanged_and_a_run_carries_its_facts() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f.json");
        let o = trace_recipe(&["facts", "-o", f.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let facts = KernelFacts::load(&f).unwrap();
        assert_eq!(
            facts.release,
            rustix::system::uname().release().to_str().unwrap()
        );
        assert!(facts.complete);
        assert!(facts.format("sched:sched_switch").is_some());
        for r in ["recipes/exec-tree.toml", "tests/lab/kprobe-fetch.toml"] {
            let _ = trace_recipe(&["check", "--plan", repo().join(r).to_str().unwrap()]);
        }
        guard.assert_unchanged();

        // A run writes the facts it validated against; its bundle carries them, and
        // `check --facts BUNDLE` (as nobody) validates another recipe against them.
        let recipe = write_recipe(
            dir.path(),
            "r.toml",
            "name = \"carry\"\n[[events]]\nname = \"sched:sched_process_exec\"\n",
        );
        let out = dir.path().join("out");
        let o = Command::new(bin())
            .args(crate::common::run_args(
                &recipe,
                &out,
                &["--bundle"],
                &["true"],
            ))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let carried = KernelFacts::load(&out.join("facts.json")).unwrap();
        assert_eq!(carried.release, facts.release);
        assert!(carried.format("sched:sched_process_exec").is_some());
        let bundle = dir.path().join("out.tar.zst");
        assert!(bundle.is_file(), "{}", text(&o.stdout));
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let c = check_offline_as_nobody(&bundle, &recipe);
        assert_exit(&c, 0);
        guard.assert_unchanged();
    }
}

/// A copy of the Debian 6.12 fact file as a 7.2 guest writes it: the
/// dynamic-event lines of its tracefs README (as the lab's 7.2 guest printed
/// them) and a BTF digest of `vfs_read`, the `sched_process_exec`
/// tracepoint and the structs from `struct file` to a file's name (Linux 7.2's
/// types, trimmed to the members walked).
fn facts_with_btf(dir: &Path) -> PathBuf {
    let bytes = zstd::decode_all(std::fs::File::open(facts_file("debian-6.12")).unwrap()).unwrap();
    let mut facts: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    facts["probe_syntax"] = serde_json::json!([
        "accepts: event-definitions (one definition per line)",
        "Format: p[:[<group>/][<event>]] <place> [<args>]",
        "r[maxactive][:[<group>/][<event>]] <place> [<args>]",
        "f[:[<group>/][<event>]] <func-name>[%return] [<args>]",
        "t[:[<group>/][<event>]] <tracepoint> [<args>]",
        "s:[synthetic/]<event> <field> [<field>]",
        "e[:[<group>/][<event>]] <attached-group>.<attached-event> [<args>] [if <filter>]",
        "-:[<group>/][<event>]",
        "fetcharg: (%<register>|$<efield>), @<address>, @<symbol>[+|-<offset>],",
        "$stack<index>, $stack, $retval, $comm, $arg<N>,",
        "<argname>[->field[->field|.field...]],",
        "kernel return probes support: $retval, $arg<N>, $comm"
    ]);
    facts["btf"] = serde_json::json!({
        "functions": {
            "vfs_read": "|i8s|ssize_t;file|p>struct file|struct file *;buf|pc|char *;count|i8u|size_t;pos|p|loff_t *"
        },
        "tracepoints": {
            "sched_process_exec": "|v|void;p|p>struct task_struct|struct task_struct *;old_pid|i4s|pid_t;bprm|p>struct linux_binprm|struct linux_binprm *"
        },
        "structs": {
            "struct file": "f_mode|i4u|fmode_t;f_path|s>struct path|struct path;f_inode|p>struct inode|struct inode *",
            "struct path": "mnt|p>struct vfsmount|struct vfsmount *;dentry|p>struct dentry|struct dentry *",
            "struct dentry": "d_flags|i4u|unsigned int;d_parent|p>struct dentry|struct dentry *;d_name|s>struct qstr|struct qstr;d_iname|ac|unsigned char[40]",
            "struct qstr": "hash|i4u|u32;len|i4u|u32;name|pc|const unsigned char *",
            "struct task_struct": "pid|i4s|pid_t;comm|ac|char[16]",
            "struct linux_binprm": "filename|pc|const char *;argc|i4s|int"
        },
        "complete": false,
        "looked_up": ["vfs_read", "sched_process_exec", "do_sys_openat2"]
    });
    let path = dir.join("debian-7.2-like.json");
    std::fs::write(&path, serde_json::to_vec(&facts).unwrap()).unwrap();
    path
}

/// fprobes, fexits, tprobes and eprobes are checked offline against a fact
/// file's README lines and BTF digest: the names and fields that exist pass,
/// and each one the kernel's types lack is refused at the recipe's line:col
/// as this kernel's problem, listing what it has; a kernel before 6.5 refuses
/// the kinds, naming the release that has them.
#[test]
fn btf_fetchargs_are_checked_offline_against_the_fact_file() {
    let dir = tempfile::tempdir().unwrap();
    let facts = facts_with_btf(dir.path());
    let check = |facts: &Path, body: &str| {
        let r = write_recipe(dir.path(), "probes.toml", body);
        let o = Command::new(bin())
            .args(["check", "--facts"])
            .arg(facts)
            .arg(&r)
            .output()
            .unwrap();
        (o.status.code(), text(&o.stdout) + &text(&o.stderr))
    };
    let good = r#"name = "p"
description = "d"
[[kprobes]]
event = "read_entry"
kind = "fprobe"
target = "vfs_read"
fetch = { file = "$arg1", count = "count", name = "file->f_path.dentry->d_name.name:string" }
filter = 'name == "marker.txt" && count > 8'
[[kprobes]]
event = "read_exit"
kind = "fexit"
target = "vfs_read"
fetch = { ret = "$retval" }
filter = "ret < 0"
[[kprobes]]
event = "exec_tp"
kind = "tprobe"
target = "sched_process_exec"
fetch = { task_pid = "p->pid", file = "bprm->filename:string", comm = "p->comm:string" }
[[kprobes]]
event = "exec_args"
kind = "eprobe"
target = "syscalls:sys_enter_execve"
fetch = { a0 = "+0(+u0($argv)):ustring", file = "+0($filename):ustring", comm = "$comm:string" }
"#;
    let (code, out) = check(&facts, good);
    assert_eq!(code, Some(0), "{out}");
    // A member the struct lacks: at its column, with the members it has.
    let bad_field = good.replace("d_name.name:string", "d_nam.name:string");
    let (code, out) = check(&facts, &bad_field);
    assert_eq!(code, Some(1), "{out}");
    // One problem: the probe's filter on `name` still checks against a string field.
    assert_eq!(out.matches(": error (").count(), 1, "{out}");
    let line = bad_field
        .lines()
        .position(|l| l.contains("d_nam."))
        .unwrap()
        + 1;
    let col = bad_field
        .lines()
        .nth(line - 1)
        .unwrap()
        .find("d_nam.")
        .unwrap()
        + 1;
    assert!(
        out.contains(&format!("probes.toml:{line}:{col}: error (this kernel): fetcharg `name`: `struct dentry` has no member `d_nam`; it has: `d_flags` (unsigned int), `d_parent` (struct dentry *), `d_name` (struct qstr), `d_iname` (unsigned char[40])")),
        "{out}"
    );
    // An argument name the function lacks: near name and the argument list.
    let (code, out) = check(
        &facts,
        &good.replace("count = \"count\"", "count = \"cout\""),
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("`vfs_read` has no argument `cout` (did you mean `count`?)")
            && out.contains("its arguments are: `file` (struct file *), `buf` (char *), `count` (size_t), `pos` (loff_t *)"),
        "{out}"
    );
    // `->` on a struct by value, `:string` on an integer, `$arg5` of four.
    for (from, to, says) in [
        (
            "file->f_path.dentry",
            "file->f_path->dentry",
            "`file->f_path` is a `struct path`, not a pointer: write `file->f_path.dentry`",
        ),
        (
            "count = \"count\"",
            "count = \"count:string\"",
            "`count` is a `size_t`, not a `char *` or `char[]`",
        ),
        (
            "file = \"$arg1\"",
            "file = \"$arg5\"",
            "`vfs_read` has 4 arguments: there is no `$arg5`",
        ),
        (
            "$comm:string\"",
            "$comm\"",
            "in an eprobe `$comm` without a type records an address: write `$comm:string`",
        ),
        (
            "+0($filename)",
            "+0($filenam)",
            "the event has no field `filenam`; its fields are: `__syscall_nr`, `filename`, `argv`, `envp`",
        ),
    ] {
        let (code, out) = check(&facts, &good.replace(from, to));
        assert_eq!(code, Some(1), "{to}: {out}");
        assert!(out.contains(says), "{to}: {out}");
    }
    // 6.1 has eprobes but neither fprobes nor tracepoint probes: refused as this
    // kernel's lack, with the release that has them.
    let (code, out) = check(&facts_file("debian-6.1"), good);
    assert_eq!(code, Some(1), "{out}");
    let lacks: Vec<&str> = out.lines().filter(|l| l.contains(": error (")).collect();
    assert!(
        lacks.len() == 3
            && lacks
                .iter()
                .all(|l| l.contains("error (this kernel): this kernel (6.1."))
            && lacks
                .iter()
                .filter(|l| l.contains("has no fprobe events"))
                .count()
                == 2
            && out.contains("come with Linux 6.5"),
        "{out}"
    );
}
