//! Two teams, end to end: team A runs a recipe that extends a base, with
//! `[[expect]]` and `[collect]`, and bundles the run; team B, in another folder
//! that holds nothing of A's but the bundle (A's folder is deleted), checks the
//! bundle against this kernel (`check --against`) and offline against A's facts
//! as a non-root user, reruns it at the same speed and slower (`rerun --set`),
//! and diffs the bundles: a `--fail-if` rule on the p99 latency of
//! clock_nanosleep trips on the slower rerun and not on the same-speed one.
//!
//! The workload sleeps 3 times for `delay` seconds (a recipe param rendered
//! into `[scope] command`): 50 ms in A and the same-speed rerun, 1 s in the
//! slower one. The rule trips above six times A's p99, so a same-speed rerun
//! would need a 250 ms scheduling delay on a 50 ms sleep to trip it, and the
//! slower one misses it only if A's own p99 went past 166 ms.

use std::path::Path;

use crate::common::{TracefsGuard, assert_exit, run_bundled, text, trace_recipe, write_recipe};

const RULE: &str = "p99(syscalls:clock_nanosleep) > +500%";

/// The manifest of `bundle`, as `unpack` writes it.
fn manifest(bundle: &Path) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("u");
    let o = trace_recipe(&[
        "unpack",
        bundle.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_exit(&o, 0);
    serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap()
}

/// `check --against` an output folder recorded (as its facts.json says) on the
/// kernel lab's Debian 6.1, whose base adds a kprobe: invalid on this kernel
/// (no kprobe_events), reported at its line in `recipe.base-1.toml`, exit 1,
/// with the facts that differ and matter listed. Read-only: no tracefs lock.
#[test]
fn check_against_a_folder_from_another_kernel_says_why_it_cannot_run_here() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let write = |name: &str, body: &[u8]| std::fs::write(run.join(name), body).unwrap();
    let facts = zstd::decode_all(
        std::fs::File::open(crate::common::repo().join("tests/facts/debian-6.1.json.zst")).unwrap(),
    )
    .unwrap();
    write("facts.json", &facts);
    write(
        "report.json",
        b"{\"recipe\": \"opens\", \"kernel_release\": \"6.1.0-56-amd64\"}",
    );
    write("recipe.toml", b"name = \"opens\"\n");
    write("recipe.source.toml", b"name = \"opens\"\nextends = \"../lab/base.toml\"\n[[events]]\nname = \"sched:sched_switch\"\n");
    write(
        "recipe.base-1.toml",
        b"name = \"base\"\n[[kprobes]]\nevent = \"open\"\nkind = \"kprobe\"\ntarget = \"do_sys_openat2\"\n",
    );
    let o = trace_recipe(&["check", "--against", run.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert_exit(&o, 1);
    assert!(
        out.contains(
            "recipe.base-1.toml:2:3: error (this kernel): this kernel has no `kprobe_events`"
        ),
        "{out}"
    );
    for line in [
        "kernel release",
        "6.1.0-56-amd64 -> ",
        "event sched:sched_switch field prev_comm",
        "feature kprobe_events",
        "present -> absent",
    ] {
        assert!(out.contains(line), "`{line}` in:\n{out}");
    }
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn team_b_checks_reruns_and_diffs_team_a_bundle_and_a_slower_rerun_trips_the_rule() {
        let team_a = tempfile::tempdir().unwrap();
        let team_b = tempfile::tempdir().unwrap();
        let (a, b) = (team_a.path(), team_b.path());
        let base = "name = \"teams-base\"\nduration = \"60s\"\n[params]\ndelay = \"0.05\"\n[scope]\nfollow_forks = true\n[[events]]\nname = \"syscalls:sys_enter_clock_nanosleep\"\n[[events]]\nname = \"syscalls:sys_exit_clock_nanosleep\"\n";
        write_recipe(a, "base.toml", base);
        let recipe = write_recipe(
            a,
            "teams.toml",
            "name = \"teams\"\nextends = \"base.toml\"\n[scope]\ncommand = [\"sh\", \"-c\", \"for i in 1 2 3; do sleep {{ delay }}; done\"]\n[[expect]]\nthat = \"count(syscalls:sys_enter_clock_nanosleep) >= 3\"\n[[expect]]\nthat = \"lost_events == 0\"\n[collect]\nbefore = [[\"uname\", \"-r\"]]\n",
        );

        let guard = TracefsGuard::acquire();
        // Team A: run and bundle (the workload is the recipe's own `[scope] command`).
        let o = run_bundled(&recipe, &a.join("run"), &[]);
        assert_exit(&o, 0);
        let bundle = b.join("teams-a.tar.zst");
        std::fs::copy(a.join("run.tar.zst"), &bundle).unwrap();
        drop(team_a);
        let listing: Vec<_> = std::fs::read_dir(b)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            listing,
            ["teams-a.tar.zst"],
            "team B has the bundle and nothing else"
        );
        let bundle_s = bundle.to_str().unwrap();

        // Team B, will it run here? Valid on this kernel (the same as A's: no
        // difference), with the commands a rerun would start listed.
        let o = trace_recipe(&["check", "--against", bundle_s]);
        let out = text(&o.stdout);
        assert_exit(&o, 0);
        assert!(out.contains("ok: recipe `teams` is valid"), "{out}");
        assert!(out.contains("params delay=0.05"), "{out}");
        assert!(
            out.contains("no difference that matters to this recipe"),
            "{out}"
        );
        assert!(
            out.contains("workload: [\"sh\", \"-c\", \"for i in 1 2 3; do sleep 0.05; done\"]")
                && out.contains("collect before: [\"uname\", \"-r\"]"),
            "{out}"
        );
        // The same in JSON, with the base read from the bundle's recipe.base-1.toml:
        // an invalid override is reported at its line in that base.
        let o = trace_recipe(&["check", "--against", bundle_s, "--format", "json"]);
        assert_exit(&o, 0);
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        crate::runbook::assert_matches_schema("check", &j);
        assert_eq!(j["against"]["differences"], serde_json::json!([]), "{j:#}");
        assert_eq!(j["against"]["commands"][0]["purpose"], "workload", "{j:#}");

        // Offline against A's facts, as nobody: the bundle's standalone rendered recipe.
        let unpacked = b.join("teams-a");
        let o = trace_recipe(&["unpack", bundle_s, "-o", unpacked.to_str().unwrap()]);
        assert_exit(&o, 0);
        let o = crate::facts::check_offline_as_nobody(&bundle, &unpacked.join("recipe.toml"));
        let out = text(&o.stdout);
        assert_exit(&o, 0);
        assert!(
            out.contains("checked offline against the facts in"),
            "{out}"
        );

        // Rerun without agreeing to the bundle's commands: refused, nothing run.
        let same = b.join("same");
        let o = trace_recipe(&["rerun", bundle_s, "-o", same.to_str().unwrap()]);
        assert_exit(&o, 2);
        assert!(
            text(&o.stderr).contains("--allow-commands"),
            "{}",
            text(&o.stderr)
        );
        assert!(!same.exists(), "a refused rerun writes nothing");
        // A workload of B's own needs no agreement; the bundle's `[collect]` still does.
        let o = trace_recipe(&[
            "rerun",
            bundle_s,
            "-o",
            same.to_str().unwrap(),
            "--",
            "true",
        ]);
        let err = text(&o.stderr);
        assert_exit(&o, 2);
        assert!(
            err.contains("collect before: [\"uname\", \"-r\"]") && !err.contains("workload:"),
            "{err}"
        );
        assert!(!same.exists(), "a refused rerun writes nothing");
        guard.assert_unchanged();

        // Rerun at the same speed, and slower (the param the workload sleeps for).
        let rerun = |out: &Path, sets: &[&str]| {
            let mut args = vec!["rerun", bundle_s, "--allow-commands", "--bundle", "-o"];
            args.push(out.to_str().unwrap());
            args.extend(sets);
            let o = trace_recipe(&args);
            assert_exit(&o, 0);
            out.with_extension("tar.zst")
        };
        let same = rerun(&same, &[]);
        let slow = rerun(&b.join("slow"), &["--set", "delay=1"]);
        guard.assert_unchanged();
        drop(guard);

        // The reruns carry A's recipe as written, base included, and their params.
        for (bundle_b, delay) in [(&same, "0.05"), (&slow, "1")] {
            let m = manifest(bundle_b);
            assert_eq!(m["params"]["delay"], delay, "{m:#}");
            assert_eq!(
                m["workload"],
                serde_json::json!([
                    "sh",
                    "-c",
                    format!("for i in 1 2 3; do sleep {delay}; done")
                ])
            );
            assert!(m["members"]["recipe.base-1.toml"].is_object(), "{m:#}");
            assert_eq!(
                m["members"]["recipe.base-1.toml"]["sha256"],
                manifest(&bundle)["members"]["recipe.base-1.toml"]["sha256"],
                "the rerun's base is A's base"
            );
        }

        // Diff: the rule holds for the slower rerun only.
        let diff = |bundle_b: &Path| {
            trace_recipe(&[
                "diff",
                bundle_s,
                bundle_b.to_str().unwrap(),
                "--fail-if",
                RULE,
            ])
        };
        let o = diff(&same);
        assert_exit(&o, 0);
        let o = diff(&slow);
        assert_exit(&o, 6);
        assert!(text(&o.stderr).contains(RULE), "{}", text(&o.stderr));
    }

    /// One render per rerun: the commands a rerun lists for consent are the ones
    /// it starts. The bundle's `[collect] before` command embeds `{{ started }}`
    /// (a second-resolution time); the rerun is answered on a terminal (under
    /// `script`) two seconds after it asked, so a second render for the run would
    /// put another time in the command than the one listed. The command's output,
    /// saved in the rerun's folder, and the workload's argv, written to a file,
    /// are compared with the listing.
    #[test]
    fn a_rerun_starts_exactly_the_commands_it_listed_for_consent() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let argv_file = d.join("argv.txt");
        let recipe = write_recipe(
            d,
            "stamp.toml",
            &format!(
                "name = \"stamp\"\nduration = \"30s\"\n[params]\ntag = \"a\"\n[scope]\ncommand = [\"sh\", \"-c\", 'printf \"%s\\n\" \"$@\" > \"$0\"', \"{}\", \"tag-{{{{ tag }}}}\"]\n[[events]]\nname = \"sched:sched_process_exec\"\n[collect]\nbefore = [[\"echo\", \"at-{{{{ started }}}}-{{{{ tag }}}}\"]]\n",
                argv_file.display()
            ),
        );
        let guard = TracefsGuard::acquire();
        let o = run_bundled(&recipe, &d.join("run"), &[]);
        assert_exit(&o, 0);
        let bundle = d.join("run.tar.zst");
        std::fs::remove_file(&argv_file).unwrap();

        // Rerun with a param of our own, agreeing on a terminal two seconds later.
        let out = d.join("rerun");
        let command = shlex::try_join([
            env!("CARGO_BIN_EXE_trace-recipe"),
            "rerun",
            bundle.to_str().unwrap(),
            "--set",
            "tag=b",
            "-o",
            out.to_str().unwrap(),
        ])
        .unwrap();
        let mut child = std::process::Command::new("script")
            .args(["-qfec", &command, "/dev/null"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("script (util-linux)");
        std::thread::sleep(std::time::Duration::from_secs(2));
        child.stdin.as_mut().unwrap().write_all(b"y\n").unwrap();
        let o = child.wait_with_output().unwrap();
        let shown = text(&o.stdout).replace('\r', "");
        assert!(o.status.success(), "{shown}{}", text(&o.stderr));
        guard.assert_unchanged();
        drop(guard);

        // What was listed for consent (one quoted array a command; with nothing
        // to escape in it, it reads as JSON)...
        let listed = |purpose: &str| -> Vec<String> {
            let line = shown
                .lines()
                .find_map(|l| l.trim().strip_prefix(purpose))
                .unwrap_or_else(|| panic!("no `{purpose}` listed in:\n{shown}"));
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
        };
        let collect = listed("collect before: ");
        assert_eq!(collect[0], "echo", "{shown}");
        let collect = &collect[1];
        assert!(
            collect.starts_with("at-") && collect.ends_with("-b"),
            "{shown}"
        );
        let workload = listed("workload: ");
        assert_eq!(
            workload.last().map(String::as_str),
            Some("tag-b"),
            "{shown}"
        );
        // ... is what ran: the collect command's output and the workload's argv.
        let ran = std::fs::read_to_string(out.join("collect/before-1-echo.txt")).unwrap();
        assert_eq!(ran.trim_end(), collect, "{shown}");
        let argv = std::fs::read_to_string(&argv_file).unwrap();
        assert_eq!(
            workload.last().map(String::as_str),
            argv.lines().last(),
            "{shown}"
        );
    }
}
