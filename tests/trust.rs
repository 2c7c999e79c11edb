//! The trust boundary (issue 24): files from elsewhere (extends targets, run
//! folders, bundles, fact files, templates, trace.dat) are read as hostile:
//! regular files only, bounded, never shown when they lie outside the recipe's
//! folder, and their names escaped when printed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{text, write_recipe};

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
    let r = write_recipe(
        dir.path(),
        "r.toml",
        &format!("extends = \"base.toml\"\n{RECIPE}"),
    );
    let (code, all) = bounded(&["check", r.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{all}");
    assert!(
        all.contains("only that recipe may name a base outside it"),
        "{all}"
    );
    assert!(!all.contains("TOP-SECRET"), "{all}");
    // A template outside the tree: a base may not name it, the recipe may.
    let tpl = format!("[output]\ntemplate = \"{}\"\n", secret.display());
    write_recipe(dir.path(), "base.toml", &tpl);
    let (code, all) = bounded(&["check", r.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{all}");
    assert!(
        all.contains("it is named by a base recipe, not by the recipe you run"),
        "{all}"
    );
    assert!(!all.contains("TOP-SECRET"), "{all}");
    let own = write_recipe(dir.path(), "own.toml", &format!("{RECIPE}{tpl}"));
    let (code, all) = bounded(&["check", own.to_str().unwrap()]);
    assert_eq!(code, Some(0), "the user's own recipe names it: {all}");
}

/// `check --explain` of a recipe whose `extends` names a TOML credentials file
/// outside its folder: neither the file's keys nor its values are listed
/// (before, every one was printed ahead of "its content is not shown").
#[test]
fn explain_never_shows_a_base_outside_the_recipes_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (_keep, secret) = secret();
    std::fs::write(
        &secret,
        "[default]\naws_access_key_id = \"AKIA-TOP-SECRET\"\naws_secret_access_key = \"TOP-SECRET-KEY\"\n",
    )
    .unwrap();
    let r = write_recipe(
        dir.path(),
        "r.toml",
        &format!("extends = \"{}\"\n{RECIPE}", secret.display()),
    );
    let (_, all) = bounded(&["check", "--explain", r.to_str().unwrap()]);
    assert!(!all.contains("TOP-SECRET"), "{all}");
    assert!(!all.contains("aws_"), "{all}");
    assert!(
        all.contains(&format!(
            "# 2 keys set by {}, outside the folder of the recipe you run: not shown",
            secret.display()
        )),
        "{all}"
    );
}

/// A run folder made by hand (no recording): a recipe and a report.
fn hand_run(dir: &Path, name: &str) -> PathBuf {
    let f = dir.join(name);
    std::fs::create_dir_all(&f).unwrap();
    std::fs::write(f.join("recipe.toml"), RECIPE).unwrap();
    std::fs::write(f.join("recipe.source.toml"), RECIPE).unwrap();
    std::fs::write(
        f.join("report.json"),
        r#"{"recipe":"x","kernel_release":"6.0","duration_s":1.0}"#,
    )
    .unwrap();
    f
}

/// A member of a run folder that is a hard link to a 0600 host file lies
/// inside the folder by its path: it is refused by name (`st_nlink > 1`),
/// its content never read nor shown.
#[test]
fn a_hard_link_in_a_run_folder_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (_keep, secret) = secret();
    for (member, cmd) in [
        ("recipe.source.toml", &["check", "--against"][..]),
        ("report.json", &["check", "--against"][..]),
        ("facts.json", &["check", "--against"][..]),
        ("trace.dat", &["report"][..]),
        ("summary.tpl", &["check", "--against"][..]),
    ] {
        let f = hand_run(dir.path(), member);
        if member == "summary.tpl" {
            let named = format!("{RECIPE}[output]\ntemplate = \"summary.tpl\"\n");
            std::fs::write(f.join("recipe.source.toml"), named).unwrap();
        }
        let _ = std::fs::remove_file(f.join(member));
        std::fs::hard_link(&secret, f.join(member)).unwrap();
        let mut args = cmd.to_vec();
        args.push(f.to_str().unwrap());
        let (code, all) = bounded(&args);
        assert_ne!(code, Some(0), "{member}: {all}");
        assert!(
            all.contains(&format!("{member}: refused: it has "))
                && all.contains("names (a hard link"),
            "{member}: {all}"
        );
        assert!(!all.contains("TOP-SECRET"), "{member}: {all}");
    }
}

/// A bundle of one `recipe.toml`, `recipe`.
fn recipe_bundle(dir: &Path, name: &str, recipe: &str) -> PathBuf {
    use crate::bundle::{Entry, build, manifest_for};
    let bundle = dir.join(name);
    build(
        &bundle,
        vec![
            Entry::File(
                "manifest.json",
                manifest_for(&[("recipe.toml", recipe.as_bytes())], 1),
            ),
            Entry::File("recipe.toml", recipe.as_bytes().to_vec()),
        ],
    );
    bundle
}

/// A bundle's `[[uprobes]] target = "FILE:SYMBOL"` would have the tool read
/// FILE whole to find the symbol (a 1.5 GiB file: 12 s, 1.6 GB): a stored
/// recipe's target is judged by name only (a regular file, `stat`), never
/// opened, so its symbol is refused with what to do; `FILE:0xOFFSET` passes.
/// FILE here is a real ELF file with that symbol (this tool's binary), which
/// the user's own recipe may probe.
#[test]
fn a_stored_recipes_uprobe_target_is_checked_by_name_never_opened() {
    let dir = tempfile::tempdir().unwrap();
    let exe = crate::common::bin();
    let probe = |target: &str| {
        format!(
            "name = \"u\"\n[[uprobes]]\nevent = \"m\"\nkind = \"uprobe\"\ntarget = \"{}:{target}\"\n[[events]]\nname = \"uprobes:m\"\n",
            exe.display()
        )
    };
    let own = write_recipe(dir.path(), "own.toml", &probe("main"));
    let (code, all) = bounded(&["check", own.to_str().unwrap()]);
    assert_eq!(code, Some(0), "the user's own recipe may: {all}");
    let symbol = recipe_bundle(dir.path(), "symbol.tar.zst", &probe("main"));
    let (code, all) = bounded(&["check", "--against", symbol.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{all}");
    assert!(
        all.contains(":main` comes from a bundle or run folder: its symbol is not looked up"),
        "{all}"
    );
    let offset = recipe_bundle(dir.path(), "offset.tar.zst", &probe("0x1000"));
    let (code, all) = bounded(&["check", "--against", offset.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{all}");
}

/// A bundle asking for a 1 GiB-per-CPU ring buffer, two hours and the
/// osnoise tracer: `rerun -- true` (no command of the bundle's) stops at the
/// consent step, listing each ask against its modest default (before, it went
/// on to apply them); `--allow-resources` or the user's own `--buffer-size-kb`
/// and `--duration` get past it (to validation, which refuses the recipe's
/// unknown event, so nothing is recorded either way); `check --against` lists
/// the asks.
#[test]
fn what_a_bundle_asks_of_the_machine_is_listed_for_consent() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = recipe_bundle(
        dir.path(),
        "greedy.tar.zst",
        "name = \"greedy\"\nduration = \"2h\"\n[buffer]\nsize_kb = 1048576\n[tracer]\nname = \"osnoise\"\n[[events]]\nname = \"nosuch:event\"\n",
    );
    let b = bundle.to_str().unwrap();
    let (code, all) = bounded(&["rerun", b, "--", "true"]);
    assert_eq!(code, Some(2), "{all}");
    for want in [
        "asks more of this machine than the modest defaults; nothing was run",
        "  ring buffer: 1048576 KiB per CPU × ",
        "(modest default: at most 64 MiB in all)",
        "  duration: 2h (modest default: at most 10 minutes)",
        "  cpu time: the osnoise tracer",
        "--allow-resources",
    ] {
        assert!(all.contains(want), "no `{want}` in:\n{all}");
    }
    assert!(!all.contains("starts commands"), "{all}");
    let (code, all) = bounded(&["rerun", b, "--allow-resources", "--", "true"]);
    assert_eq!(code, Some(1), "{all}");
    assert!(all.contains("no event `nosuch:event`"), "{all}");
    // What the user sets is theirs: only the tracer is still asked.
    let own = [
        "rerun",
        b,
        "--buffer-size-kb",
        "1024",
        "--duration",
        "1s",
        "--",
        "true",
    ];
    let (code, all) = bounded(&own);
    assert_eq!(code, Some(2), "{all}");
    assert!(all.contains("  cpu time: the osnoise"), "{all}");
    assert!(
        !all.contains("ring buffer:") && !all.contains("duration:"),
        "{all}"
    );
    let (_, all) = bounded(&["check", "--against", b]);
    assert!(
        all.contains("what a rerun takes of this machine beyond the modest defaults")
            && all.contains("  duration: 2h"),
        "{all}"
    );
}

/// One short real run (under the tracefs lock); returns its output folder.
fn one_run(dir: &Path) -> PathBuf {
    let _g = crate::common::TracefsGuard::acquire();
    let r = write_recipe(
        dir,
        "src.toml",
        "name = \"src\"\nduration = \"10s\"\n[[events]]\nname = \"sched:sched_process_exec\"\n",
    );
    let out = dir.join("run");
    let o = crate::common::run_recipe(&r, &out, &["true"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    out
}

fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn plant_link(folder: &Path, name: &str, target: &Path) {
    let _ = std::fs::remove_file(folder.join(name));
    std::os::unix::fs::symlink(target, folder.join(name)).unwrap();
}

fn plant_fifo(folder: &Path, name: &str) {
    let _ = std::fs::remove_file(folder.join(name));
    mkfifo(&folder.join(name));
}

#[test]
fn hostile_bundles_cannot_inject_escapes_or_bypass_the_budgets() {
    use crate::bundle::{Entry, build, manifest_for};
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let dat = b"x".to_vec();
    let m = || Entry::File("manifest.json", manifest_for(&[("trace.dat", &dat)], 1));
    let f = || Entry::File("trace.dat", dat.clone());
    // A member name that clears the screen and sets the terminal's title.
    let esc = dir.path().join("esc.tar.zst");
    build(
        &esc,
        vec![
            m(),
            f(),
            Entry::RawName(b"\x1b[2J\x1b]0;pwned\x07x".to_vec(), b"x".to_vec()),
        ],
    );
    // A bomb whose file is padded with random bytes after the zstd frame, so
    // that its expansion over the file's size looks harmless.
    let zeros = vec![0u8; 300 << 20];
    let padded = dir.path().join("padded.tar.zst");
    build(
        &padded,
        vec![
            Entry::File("manifest.json", manifest_for(&[("trace.dat", &zeros)], 1)),
            Entry::File("trace.dat", zeros.clone()),
        ],
    );
    let mut noise = vec![0u8; 2 << 20];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for b in noise.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    std::fs::OpenOptions::new()
        .append(true)
        .open(&padded)
        .unwrap()
        .write_all(&noise)
        .unwrap();
    // A manifest far larger than any real one (whitespace JSON).
    let mut big = manifest_for(&[("trace.dat", &dat)], 1);
    big.splice(1..1, std::iter::repeat_n(b' ', 20 << 20));
    let manifest_bomb = dir.path().join("manifest.tar.zst");
    build(&manifest_bomb, vec![Entry::File("manifest.json", big), f()]);
    // A report.json declaring 512 MiB.
    let member = dir.path().join("member.tar.zst");
    build(&member, vec![m(), f(), Entry::HugeDeclared("report.json")]);
    for (bundle, expect) in [
        (&esc, "member `\\u{1b}[2J\\u{1b}]0;pwned\\u{7}x`"),
        (&padded, "times its compressed size (a decompression bomb?)"),
        (&manifest_bomb, "over the limit of 16777216 bytes"),
        (&member, "over the limit of 268435456 bytes"),
    ] {
        let (code, all) = bounded(&["report", bundle.to_str().unwrap()]);
        assert_eq!(code, Some(3), "{}: {all}", bundle.display());
        assert!(all.contains(expect), "expected `{expect}` in:\n{all}");
        assert!(!all.contains('\x1b') && !all.contains('\x07'), "{all:?}");
    }
}

/// `report` of a FIFO whose name holds an escape character, in every format
/// (the folded ones included): refused, never read, and the name printed
/// escaped, never raw.
#[test]
fn report_of_a_fifo_with_a_control_character_in_its_name_is_refused_escaped() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("f\u{1b}[31mx.dat");
    mkfifo(&fifo);
    for format in ["text", "summary", "json", "folded", "folded-funcgraph"] {
        let (code, all) = bounded(&["report", fifo.to_str().unwrap(), "--format", format]);
        assert_eq!(code, Some(3), "{format}: {all}");
        assert!(
            !all.contains('\u{1b}')
                && all.contains("\\u{1b}")
                && all.contains("not a regular file"),
            "{format}: {all:?}"
        );
    }
}

/// A trace.dat whose comm (saved cmdlines) and string field carry escape
/// sequences: `report` piped writes them as trace-cmd does, byte for byte,
/// but on a terminal (a pty from `script`) they arrive escaped, so the file
/// cannot retitle, clear or recolour the terminal of whoever reads it.
#[test]
fn a_trace_dat_cannot_drive_the_terminal_through_the_text_listing() {
    use tracedat::testing::{Endian, Page, small, small_format};
    let d = tempfile::tempdir().unwrap();
    let e = Endian::LITTLE64;
    let mut page = Page::new(e, 4096, 1_000_000);
    page.event(10, &small(e, 7, 1, b"\x1b[31mX\0"));
    let raw = d.path().join("cpu0.raw");
    std::fs::write(&raw, page.finish(None)).unwrap();
    let meta = tracedat::CaptureMeta {
        header_page: e.header_page(4096).into_bytes(),
        header_event: Vec::new(),
        ftrace_formats: Vec::new(),
        event_formats: vec![("synth".into(), vec![small_format().into_bytes()])],
        kallsyms: Vec::new(),
        printk_formats: Vec::new(),
        cmdlines: b"7 a\x1b]0;pwned\x07b\n".to_vec(),
        cpu_count: 1,
        trace_clock: "[local] global".into(),
        uname: "Linux t 6.0 x86_64".into(),
        version: "test".into(),
        cpu_stats: vec![String::new()],
    };
    let dat = d.path().join("t.dat");
    tracedat::write_v6(
        std::fs::File::create(&dat).unwrap(),
        &meta,
        &[tracedat::CpuData { cpu: 0, path: raw }],
    )
    .unwrap();
    let dat = dat.to_str().unwrap();

    let (code, piped) = bounded(&["report", dat]);
    assert_eq!(code, Some(0), "{piped}");
    assert!(
        piped.contains("a\x1b]0;pwned\x07b-7") && piped.contains("name=\x1b[31mX"),
        "piped, the listing is trace-cmd's, bytes as they are: {piped:?}"
    );

    for format in ["text", "summary"] {
        let o = std::process::Command::new("script")
            .args(["-qec"])
            .arg(format!(
                "{} report --format {format} {dat}",
                crate::common::bin().display()
            ))
            .arg("/dev/null")
            .output()
            .unwrap();
        let shown = text(&o.stdout);
        assert!(o.status.success(), "{format}: {shown}");
        assert!(
            !shown.contains('\x1b') && !shown.contains('\x07'),
            "{format}: {shown:?}"
        );
        assert!(
            shown.contains("a\\u{1b}]0;pwned\\u{7}b"),
            "{format}: {shown:?}"
        );
    }
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn a_run_folder_with_hostile_members_is_refused_by_name_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let run = one_run(dir.path());
        let (_keep, secret) = secret();
        let zero = Path::new("/dev/zero");
        type Plant = Box<dyn Fn(&Path)>;
        let cases: Vec<(&str, Plant, &[&str], &str)> = vec![
            (
                "facts-dev-zero",
                Box::new(|f: &Path| plant_link(f, "facts.json", zero)),
                &["check", "--against"],
                "facts.json: refused: it is a symbolic link leading outside",
            ),
            (
                "facts-fifo",
                Box::new(|f: &Path| plant_fifo(f, "facts.json")),
                &["check", "--against"],
                "a FIFO, not a regular file",
            ),
            (
                "report-dev-zero-check",
                Box::new(|f: &Path| plant_link(f, "report.json", zero)),
                &["check", "--against"],
                "report.json: refused",
            ),
            (
                "report-dev-zero-diff",
                Box::new(|f: &Path| plant_link(f, "report.json", zero)),
                &["diff"],
                "report.json: refused",
            ),
            (
                "source-dev-zero",
                Box::new(|f: &Path| plant_link(f, "recipe.source.toml", zero)),
                &["check", "--against"],
                "recipe.source.toml: refused",
            ),
            (
                "base-link-to-secret",
                Box::new({
                    let secret = secret.clone();
                    move |f: &Path| {
                        std::fs::write(
                            f.join("recipe.source.toml"),
                            format!("extends = \"base.toml\"\n{RECIPE}"),
                        )
                        .unwrap();
                        plant_link(f, "recipe.base-1.toml", &secret);
                    }
                }),
                &["check", "--against"],
                "is a symbolic link leading outside its run folder",
            ),
            (
                "template-host-file",
                Box::new({
                    let secret = secret.clone();
                    move |f: &Path| {
                        std::fs::write(
                            f.join("recipe.source.toml"),
                            format!("{RECIPE}[output]\ntemplate = \"{}\"\n", secret.display()),
                        )
                        .unwrap();
                    }
                }),
                &["check", "--against"],
                "comes from a bundle or run folder: its content is not read",
            ),
            (
                "trace-dat-fifo",
                Box::new(|f: &Path| plant_fifo(f, "trace.dat")),
                &["report"],
                "not a regular file",
            ),
        ];
        for (name, plant, cmd, expect) in cases {
            let f = dir.path().join(name);
            copy_folder(&run, &f);
            plant(&f);
            let mut args: Vec<&str> = cmd.to_vec();
            args.push(f.to_str().unwrap());
            if cmd == ["diff"] {
                args.push(run.to_str().unwrap());
            }
            let (code, all) = bounded(&args);
            assert_ne!(code, Some(0), "{name}: must fail: {all}");
            assert!(
                all.contains(expect),
                "{name}: expected `{expect}` in:\n{all}"
            );
            assert!(!all.contains("TOP-SECRET"), "{name}: {all}");
        }
    }
}
