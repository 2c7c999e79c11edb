//! The trust boundary (issue 24): files from elsewhere (extends targets, run
//! folders, bundles, fact files, templates, trace.dat) are read as hostile:
//! regular files only, bounded, never shown when they lie outside the recipe's
//! folder, and their names escaped when printed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{text, trace_recipe, write_recipe};

/// Runs trace-recipe with `args`, killing it after 20 s (a hang is a failure).
fn bounded(args: &[&str]) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(crate::common::bin())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("trace-recipe {args:?} hung for 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(!all.contains("panicked"), "{args:?}: {all}");
    (o.status.code(), all)
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// A 0600 file outside every recipe folder whose first line is a secret.
fn secret() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("secret");
    std::fs::write(&p, "TOP-SECRET-LINE\nmore\n").unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    (d, p)
}

const RECIPE: &str = "name = \"x\"\n[[events]]\nname = \"sched:sched_switch\"\n";

#[test]
fn extends_of_a_fifo_a_device_or_a_host_file_is_refused_without_showing_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_keep, secret) = secret();
    let fifo = dir.path().join("fifo.toml");
    mkfifo(&fifo);
    for (target, expect) in [
        (fifo.to_str().unwrap(), "a FIFO, not a regular file"),
        ("/dev/zero", "a character device, not a regular file"),
        (
            secret.to_str().unwrap(),
            "outside the folder of the recipe you run, has a problem; its content is not shown",
        ),
    ] {
        let r = write_recipe(
            dir.path(),
            "r.toml",
            &format!("extends = \"{target}\"\n{RECIPE}"),
        );
        let (code, all) = bounded(&["check", r.to_str().unwrap()]);
        assert_eq!(code, Some(1), "{target}: {all}");
        assert!(all.contains(expect), "{target}: {all}");
        assert!(!all.contains("TOP-SECRET"), "{target}: {all}");
    }
}

#[test]
fn only_the_recipe_you_run_may_extend_a_file_outside_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (_keep, secret) = secret();
    write_recipe(
        dir.path(),
        "base.toml",
        &format!("extends = \"{}\"\n", secret.display()),
    );
    let r = write_recipe(dir.path(), "r.toml", &format!("extends = \"base.toml\"\n{RECIPE}"));
    let (code, all) = bounded(&["check", r.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{all}");
    assert!(
        all.contains("only that recipe may name a base outside it"),
        "{all}"
    );
    assert!(!all.contains("TOP-SECRET"), "{all}");
}
