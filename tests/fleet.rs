//! The Ansible collection (`ansible/`, issue 11) for real: three hosts reached
//! over SSH, each an sshd of its own on 127.0.0.2, .3 and .4 port 2222
//! (tests/fleet/sshd.sh; host keys, client key and authorized_keys in a
//! temporary folder), all sharing this kernel, so their concurrent runs also
//! prove that runs in separate instances stay isolated. Each test holds the
//! tracefs lock for its whole play and checks that tracefs ends as it was.
//!
//! Needs root (sshd, tracefs) and ansible-playbook (`scripts/test` installs
//! ansible-core and openssh-server); skips with a message only when not root,
//! and never under CI.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{TracefsGuard, bin, in_ci, repo, text};

/// Whether these tests can run here: root. Under CI, not being root fails.
fn runnable() -> bool {
    if rustix::process::geteuid().is_root() {
        assert!(
            Command::new("ansible-playbook")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success()),
            "ansible-playbook is missing: install ansible-core (scripts/test does)"
        );
        assert!(
            Path::new("/usr/sbin/sshd").exists(),
            "/usr/sbin/sshd is missing: install openssh-server (scripts/test does)"
        );
        return true;
    }
    assert!(!in_ci(), "the fleet tests need root under CI");
    eprintln!(
        "skipping the fleet tests: they start sshd and trace as root (run scripts/test as root)"
    );
    false
}

/// Three SSH hosts on loopback, stopped on drop, and the tracefs lock (whose
/// guard checks tracefs after they stopped).
struct Fleet {
    dir: tempfile::TempDir,
    guard: TracefsGuard,
}

const HOSTS: [(&str, &str); 3] = [
    ("h1", "127.0.0.2"),
    ("h2", "127.0.0.3"),
    ("h3", "127.0.0.4"),
];

impl Fleet {
    /// Takes the tracefs lock and starts the hosts; `None` where the fleet
    /// tests cannot run ([`runnable`]).
    fn start() -> Option<Fleet> {
        if !runnable() {
            return None;
        }
        let guard = TracefsGuard::acquire();
        let dir = tempfile::Builder::new()
            .prefix("trace-recipe-fleet-")
            .tempdir()
            .unwrap();
        let out = Command::new(repo().join("tests/fleet/sshd.sh"))
            .arg("start")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "sshd.sh start: {}", text(&out.stderr));
        Some(Fleet { dir, guard })
    }

    /// Waits for tracefs to be as the guard found it (guards roll back after
    /// the process they watch dies); the guard's drop then checks it.
    fn wait_clean(&self) {
        wait_until("tracefs to be clean", 60, || {
            self.guard.changes().is_empty()
        });
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Writes the inventory: `recipe` for every host, `extra[i]` (YAML flow
    /// entries) for host i, `vars` for the play.
    fn inventory(&self, recipe: &Path, extra: [&str; 3], vars: &str) -> PathBuf {
        let d = self.dir.path().display();
        let mut hosts = String::new();
        for ((name, addr), extra) in HOSTS.iter().zip(extra) {
            hosts.push_str(&format!(
                "    {name}: {{ansible_host: {addr}, trace_recipe_remote_dir: {d}/{name}{}{extra}}}\n",
                if extra.is_empty() { "" } else { ", " }
            ));
        }
        let inv = format!(
            "all:\n  vars:\n    ansible_user: root\n    ansible_port: 2222\n    ansible_python_interpreter: /usr/bin/python3\n    ansible_ssh_private_key_file: {d}/client_key\n    ansible_ssh_common_args: \"-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null\"\n    trace_recipe_install: binary\n    trace_recipe_local_binary: {bin}\n    trace_recipe_controller_binary: {bin}\n    trace_recipe_recipe: {recipe}\n    trace_recipe_fleet_dir: {d}/fleet\n{vars}  hosts:\n{hosts}",
            bin = bin().display(),
            recipe = recipe.display(),
        );
        let path = self.path("inventory.yml");
        std::fs::write(&path, inv).unwrap();
        path
    }

    fn play(&self, inventory: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("ansible-playbook");
        c.arg("-i")
            .arg(inventory)
            .arg("trace_recipe.fleet.run")
            .args(args)
            .current_dir(self.dir.path())
            .env("ANSIBLE_COLLECTIONS_PATH", repo().join("ansible"))
            .env("ANSIBLE_PIPELINING", "true")
            .env("ANSIBLE_NOCOLOR", "1")
            .env("ANSIBLE_HOST_KEY_CHECKING", "false")
            .env("ANSIBLE_LOCAL_TEMP", self.path("ansible-local"))
            .stdin(Stdio::null());
        c
    }

    fn run(&self, inventory: &Path, args: &[&str]) -> Output {
        self.play(inventory, args).output().unwrap()
    }

    fn spawn(&self, inventory: &Path, args: &[&str]) -> Child {
        self.play(inventory, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Asserts that no host keeps the play's work files.
    fn assert_hosts_cleaned(&self) {
        for (h, _) in HOSTS {
            for f in ["recipe", "facts.json", "out", "out.tar.zst", "bin"] {
                let p = self.path(&format!("{h}/{f}"));
                assert!(!p.exists(), "{} was left on the host", p.display());
            }
        }
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn json(&self, rel: &str) -> serde_json::Value {
        serde_json::from_str(&self.read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    /// The pids of `trace-recipe run` processes of host `name`.
    fn runs_of(&self, name: &str) -> Vec<i32> {
        let needle = format!("{}/{name}/", self.dir.path().display());
        let mut pids = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if args.len() > 2
                && args[0].ends_with("trace-recipe")
                && args[1] == "run"
                && args.iter().any(|a| a.contains(&needle))
            {
                pids.push(pid);
            }
        }
        pids
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("tests/fleet/sshd.sh"))
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn log(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    )
}

fn matrix_line<'a>(matrix: &'a str, host: &str) -> &'a str {
    matrix
        .lines()
        .find(|l| l.split_whitespace().next() == Some(host))
        .unwrap_or_else(|| panic!("no row for {host} in the preflight matrix:\n{matrix}"))
}

fn recipe() -> PathBuf {
    repo().join("tests/fleet/fleet-exec.toml")
}

/// Asserts that no host ran the recipe: no bundle, the play never reached
/// its run task, and the hosts were cleaned.
fn assert_nothing_ran(fleet: &Fleet, out: &Output) {
    for (h, _) in HOSTS {
        assert!(!fleet.path(&format!("fleet/latest/{h}.tar.zst")).exists());
    }
    assert!(
        !text(&out.stdout).contains("TASK [Run the recipe"),
        "nothing may run after a failed preflight:\n{}",
        log(out)
    );
    fleet.assert_hosts_cleaned();
}

#[test]
fn fleet_summary_of_failed_hosts_only_and_a_file_that_is_no_host_status() {
    let dir = tempfile::tempdir().unwrap();
    let down = dir.path().join("db-1.json");
    std::fs::write(
        &down,
        r#"{"host": "db-1", "stage": "unreachable", "reason": "ssh: connection refused"}"#,
    )
    .unwrap();
    let out = Command::new(bin())
        .arg("fleet")
        .arg(&down)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::runbook::assert_matches_schema("fleet", &v);
    assert_eq!(v["totals"]["hosts"], 1);
    assert_eq!(v["totals"]["failed"], 1);
    assert_eq!(v["failed"][0]["reason"], "ssh: connection refused");

    let bad = dir.path().join("db-2.json");
    std::fs::write(&bad, r#"{"hostname": "db-2"}"#).unwrap();
    let out = Command::new(bin()).arg("fleet").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = text(&out.stderr);
    assert!(
        err.contains("db-2.json: not a host status file") && err.contains("missing field `host`"),
        "{err}"
    );
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn fleet_preflights_runs_fetches_and_summarises_three_hosts_over_ssh() {
        let Some(fleet) = Fleet::start() else {
            return;
        };
        // The recipe and the binary given relative to the project folder, where
        // the play runs (not the collection's playbooks/ folder).
        std::fs::create_dir_all(fleet.path("recipes")).unwrap();
        std::fs::copy(recipe(), fleet.path("recipes/fleet-exec.toml")).unwrap();
        std::fs::create_dir_all(fleet.path("bin")).unwrap();
        std::os::unix::fs::symlink(bin(), fleet.path("bin/trace-recipe")).unwrap();
        let inv = fleet.inventory(Path::new("/nonexistent/recipe.toml"), ["", "", ""], "");
        let out = fleet.run(
            &inv,
            &[
                "-e",
                "trace_recipe_recipe=recipes/fleet-exec.toml",
                "-e",
                "trace_recipe_local_binary=bin/trace-recipe",
            ],
        );
        assert!(out.status.success(), "the play failed:\n{}", log(&out));
        fleet.assert_hosts_cleaned();

        let matrix = fleet.read("fleet/latest/preflight.txt");
        let release = rustix::system::uname()
            .release()
            .to_string_lossy()
            .into_owned();
        for (h, _) in HOSTS {
            let row: Vec<&str> = matrix_line(&matrix, h).split_whitespace().collect();
            assert_eq!(row[1..4], ["ok", release.as_str(), "clean"], "{matrix}");
        }

        let summary = fleet.json("fleet/latest/summary/fleet.json");
        let rows = summary["hosts"].as_array().unwrap();
        assert_eq!(rows.len(), 3, "{summary:#}");
        assert_eq!(summary["failed"], serde_json::json!([]));
        let mut total = 0;
        for (h, _) in HOSTS {
            let bundle = fleet.path(&format!("fleet/latest/{h}.tar.zst"));
            assert!(bundle.is_file(), "{} was not fetched", bundle.display());
            let unpacked = fleet.path(&format!("{h}.unpacked"));
            let u = Command::new(bin())
                .arg("unpack")
                .arg(&bundle)
                .arg("-o")
                .arg(&unpacked)
                .output()
                .unwrap();
            assert!(u.status.success(), "unpack {h}: {}", text(&u.stderr));
            let report: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(unpacked.join("report.json")).unwrap(),
            )
            .unwrap();
            let row = rows
                .iter()
                .find(|r| {
                    r["path"]
                        .as_str()
                        .unwrap()
                        .ends_with(&format!("/{h}.tar.zst"))
                })
                .unwrap_or_else(|| panic!("no row for {h}: {summary:#}"));
            assert!(row["host"].as_str().unwrap().starts_with(h), "{row}");
            assert_eq!(row["events"], report["total_events"], "{h}");
            assert!(
                report["total_events"].as_u64().unwrap() > 0,
                "{h} recorded nothing"
            );
            assert_eq!(row["lost_events"], report["lost_total"], "{h}");
            assert_eq!(row["stop_reason"], report["stop_reason"], "{h}");
            let passed = report["expectations"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["passed"] == true)
                .count();
            assert_eq!(row["expectations_passed"], passed, "{h}");
            assert_eq!(passed, 1, "{h}: lost_events == 0 holds");
            total += report["total_events"].as_u64().unwrap();
        }
        assert_eq!(summary["totals"]["events"], total);
        assert_eq!(summary["totals"]["ran"], 3);
        let shown = fleet.read("fleet/latest/summary/fleet.text");
        assert!(
            shown.starts_with("fleet: 3 hosts, 3 ran, 0 failed (recipe fleet-exec)"),
            "{shown}"
        );
        assert!(text(&out.stdout).contains("fleet: 3 hosts, 3 ran, 0 failed"));
        fleet.wait_clean();
    }

    #[test]
    fn fleet_preflight_failing_on_one_host_applies_nothing_anywhere() {
        let Some(fleet) = Fleet::start() else {
            return;
        };
        // h1 is checked against the kernel lab's Debian 6.1 facts (kprobe_events);
        // h2 and h3 against this kernel's own (no kprobe_events).
        // The fact file is given relative to the project folder.
        std::fs::create_dir_all(fleet.path("facts")).unwrap();
        std::fs::copy(
            repo().join("tests/facts/debian-6.1.json.zst"),
            fleet.path("facts/debian-6.1.json.zst"),
        )
        .unwrap();
        let inv = fleet.inventory(
            &repo().join("recipes/kretprobe-returns.toml"),
            ["trace_recipe_facts_file: facts/debian-6.1.json.zst", "", ""],
            "",
        );
        let out = fleet.run(&inv, &[]);
        assert!(!out.status.success(), "the play must fail:\n{}", log(&out));
        let matrix = fleet.read("fleet/latest/preflight.txt");
        eprintln!("{matrix}");
        let h1: Vec<&str> = matrix_line(&matrix, "h1").split_whitespace().collect();
        assert_eq!(h1[1..3], ["ok", "6.1.0-56-amd64"], "{matrix}");
        for h in ["h2", "h3"] {
            let row = matrix_line(&matrix, h);
            assert!(row.contains(" FAIL "), "{matrix}");
            assert!(
                row.contains("kretprobe-returns.toml:") && row.contains("kprobe_events"),
                "the matrix names the missing feature and the recipe line: {matrix}"
            );
        }
        assert!(
            text(&out.stdout)
                .contains("preflight failed on h2, h3: nothing was applied on any host"),
            "{}",
            log(&out)
        );
        assert_nothing_ran(&fleet, &out);
        fleet.guard.assert_unchanged();
    }

    #[test]
    fn fleet_preflight_that_errors_on_one_host_is_a_failed_preflight() {
        let Some(fleet) = Fleet::start() else {
            return;
        };
        // h2 is reached, but its check cannot read the fact file it is given:
        // that is a failed preflight, not an unreachable host, and nothing runs
        // on h1 and h3 although their preflight passes.
        let inv = fleet.inventory(
            &recipe(),
            ["", "trace_recipe_facts_file: facts/h2-missing.json", ""],
            "",
        );
        let out = fleet.run(&inv, &[]);
        assert!(!out.status.success(), "the play must fail:\n{}", log(&out));
        let matrix = fleet.read("fleet/latest/preflight.txt");
        for h in ["h1", "h3"] {
            let row: Vec<&str> = matrix_line(&matrix, h).split_whitespace().collect();
            assert_eq!(row[1], "ok", "{matrix}");
        }
        let missing = fleet.path("facts/h2-missing.json");
        let h2 = matrix_line(&matrix, "h2");
        assert!(
            h2.contains(" ERROR ")
                && h2.contains(&format!("cannot read fact file {}", missing.display())),
            "the row carries the check's own error:\n{matrix}"
        );
        assert!(
            text(&out.stdout).contains("preflight failed on h2: nothing was applied on any host"),
            "{}",
            log(&out)
        );
        let status = fleet.json("fleet/latest/h2.json");
        assert_eq!(status["stage"], "preflight", "{status}");
        assert!(
            status["reason"]
                .as_str()
                .unwrap()
                .contains("cannot read fact file"),
            "{status}"
        );
        assert_nothing_ran(&fleet, &out);
        fleet.guard.assert_unchanged();
    }

    #[test]
    fn allow_partial_runs_where_the_preflight_passes_and_reports_the_rest() {
        let Some(fleet) = Fleet::start() else {
            return;
        };
        let inv = fleet.inventory(
            &recipe(),
            [
                "",
                "",
                "trace_recipe_sets: [\"exec_event=sched:no_such_event\"]",
            ],
            "    allow_partial: true\n",
        );
        let out = fleet.run(&inv, &[]);
        assert!(
            out.status.success(),
            "the play ran where it could:\n{}",
            log(&out)
        );
        let matrix = fleet.read("fleet/latest/preflight.txt");
        assert!(
            matrix_line(&matrix, "h3").contains("sched:no_such_event"),
            "{matrix}"
        );
        let summary = fleet.json("fleet/latest/summary/fleet.json");
        assert_eq!(summary["totals"]["ran"], 2, "{summary:#}");
        assert!(
            fleet.path("fleet/latest/h1.tar.zst").is_file()
                && fleet.path("fleet/latest/h2.tar.zst").is_file()
        );
        assert!(!fleet.path("fleet/latest/h3.tar.zst").exists() && !fleet.path("h3/out").exists());
        let h3 = fleet.json("fleet/latest/h3.json");
        assert_eq!(h3["stage"], "preflight", "{h3}");
        assert!(
            h3["reason"]
                .as_str()
                .unwrap()
                .contains("sched:no_such_event"),
            "{h3}"
        );
        fleet.wait_clean();
    }

    #[test]
    fn fleet_reports_an_unreachable_host_and_a_run_killed_by_sigkill() {
        let Some(fleet) = Fleet::start() else {
            return;
        };
        // h3: nothing listens on 127.0.0.4:2299.
        let inv = fleet.inventory(
            &recipe(),
            ["", "", "ansible_port: 2299"],
            "    trace_recipe_duration: 15s\n",
        );
        let play = fleet.spawn(&inv, &[]);
        wait_until("h2's run to start", 240, || !fleet.runs_of("h2").is_empty());
        std::thread::sleep(Duration::from_secs(1));
        for pid in fleet.runs_of("h2") {
            rustix::process::kill_process(
                rustix::process::Pid::from_raw(pid).unwrap(),
                rustix::process::Signal::KILL,
            )
            .unwrap();
        }
        let out = play.wait_with_output().unwrap();
        let summary = fleet.json("fleet/latest/summary/fleet.json");
        assert_eq!(summary["totals"]["ran"], 1, "{summary:#}\n{}", log(&out));
        assert!(fleet.path("fleet/latest/h1.tar.zst").is_file());
        let h2 = fleet.json("fleet/latest/h2.json");
        assert_eq!(h2["stage"], "run", "{h2}");
        assert_eq!(h2["exit_code"], 137, "{h2}");
        assert!(h2["reason"].as_str().unwrap().contains("SIGKILL"), "{h2}");
        let h3 = fleet.json("fleet/latest/h3.json");
        assert_eq!(h3["stage"], "unreachable", "{h3}");
        assert!(
            h3["reason"]
                .as_str()
                .unwrap()
                .contains("port 2299: Connection refused"),
            "ssh's own reason: {h3}"
        );
        let matrix = fleet.read("fleet/latest/preflight.txt");
        assert!(
            matrix_line(&matrix, "h3").contains("port 2299: Connection refused"),
            "{matrix}"
        );
        let failed: Vec<&str> = summary["failed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["host"].as_str().unwrap())
            .collect();
        assert_eq!(failed, ["h2", "h3"]);
        let shown = fleet.read("fleet/latest/summary/fleet.text");
        assert!(
            shown.contains("h2: run: trace-recipe run was killed by SIGKILL"),
            "{shown}"
        );
        assert!(shown.contains("h3: unreachable"), "{shown}");
        fleet.wait_clean();
    }

    #[test]
    fn interrupted_playbook_leaves_every_host_clean_and_the_next_preflight_says_so() {
        let Some(fleet) = Fleet::start() else {
            return;
        };
        let inv = fleet.inventory(&recipe(), ["", "", ""], "    trace_recipe_duration: 6s\n");
        let play = fleet.spawn(&inv, &[]);
        wait_until("every host's run to start", 240, || {
            HOSTS.iter().all(|(h, _)| !fleet.runs_of(h).is_empty())
        });
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(play.id() as i32).unwrap(),
            rustix::process::Signal::INT,
        )
        .unwrap();
        let out = play.wait_with_output().unwrap();
        assert!(
            !out.status.success(),
            "SIGINT ends the play:\n{}",
            log(&out)
        );
        wait_until("the runs to end by their duration", 60, || {
            HOSTS.iter().all(|(h, _)| fleet.runs_of(h).is_empty())
        });
        fleet.wait_clean();

        let check = fleet.run(&inv, &["--check"]);
        assert!(check.status.success(), "--check:\n{}", log(&check));
        let plays = std::fs::read_dir(fleet.path("fleet"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name() != "latest")
            .count();
        assert_eq!(plays, 2, "each play keeps a folder of its own");
        let matrix = fleet.read("fleet/latest/preflight.txt");
        for (h, _) in HOSTS {
            let row: Vec<&str> = matrix_line(&matrix, h).split_whitespace().collect();
            assert_eq!((row[1], row[3]), ("ok", "clean"), "{matrix}");
            assert!(
                !fleet.path(&format!("fleet/latest/{h}.tar.zst")).exists(),
                "--check runs nothing"
            );
        }
        fleet.guard.assert_unchanged();
    }
}
