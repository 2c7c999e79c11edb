//! What reaches a terminal (issue 37): every command that shows text from a
//! file, a bundle, a trace.dat, a fact file or a recipe is run on hostile
//! fixtures, and its stdout and stderr are rendered by a terminal emulator
//! (the `vt100` crate). The screen must be the bytes, line for line: no
//! control sequence took effect (no title set, no bell, no line erased, no
//! cursor returned), and the hostile text is there, escaped. The consent list
//! of `rerun` and `check --against` shows each command as a quoted array and
//! flags one that holds control characters; JSON and SARIF escape DEL and C1.

use std::path::{Path, PathBuf};

use crate::bundle::{Entry, build, manifest_for};
use crate::common::{bin, write_recipe};

/// OSC 0 (set the title) ended by BEL, CSI 2K (erase the line), CR, a C1 CSI
/// (U+009B) colouring red, DEL.
const H: &str = "h\u{1b}]0;PWNED\u{7}\u{1b}[2K\rX\u{9b}31m\u{7f}y";
/// [`H`] as a TOML basic string's escapes.
const H_TOML: &str = "h\\u001b]0;PWNED\\u0007\\u001b[2K\\rX\\u009b31m\\u007fy";
/// [`H`] as the escaper shows it.
const H_SHOWN: &str = "h\\u{1b}]0;PWNED\\u{7}\\u{1b}[2K\\u{d}X\\u{9b}31m\\u{7f}y";
/// The forged consent line of the issue: a shell comment that erases the
/// line, returns the cursor and writes a harmless-looking command over it.
const FORGED: &str = "touch /tmp/pwned #\u{1b}[2K\r  workload: true\u{1b}]0;t\u{7}";

/// What the terminal was asked to do besides showing text.
#[derive(Default)]
struct Effects(Vec<String>);

impl vt100::Callbacks for Effects {
    fn audible_bell(&mut self, _: &mut vt100::Screen) {
        self.0.push("bell".into());
    }
    fn visual_bell(&mut self, _: &mut vt100::Screen) {
        self.0.push("visual bell".into());
    }
    fn set_window_icon_name(&mut self, _: &mut vt100::Screen, name: &[u8]) {
        self.0
            .push(format!("icon name {:?}", String::from_utf8_lossy(name)));
    }
    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.0
            .push(format!("title {:?}", String::from_utf8_lossy(title)));
    }
    fn copy_to_clipboard(&mut self, _: &mut vt100::Screen, _: &[u8], _: &[u8]) {
        self.0.push("clipboard".into());
    }
    fn unhandled_control(&mut self, _: &mut vt100::Screen, b: u8) {
        self.0.push(format!("control {b:#x}"));
    }
    fn unhandled_escape(&mut self, _: &mut vt100::Screen, _: Option<u8>, _: Option<u8>, b: u8) {
        self.0.push(format!("escape {b:#x}"));
    }
    fn unhandled_csi(
        &mut self,
        _: &mut vt100::Screen,
        _: Option<u8>,
        _: Option<u8>,
        _: &[&[u16]],
        c: char,
    ) {
        self.0.push(format!("csi {c}"));
    }
    fn unhandled_osc(&mut self, _: &mut vt100::Screen, _: &[&[u8]]) {
        self.0.push("osc".into());
    }
}

/// `line` as a terminal lays it out: tabs to the next multiple of 8, the
/// blanks at the end dropped.
fn laid_out(line: &str) -> String {
    let mut out = String::new();
    for c in line.chars() {
        match c {
            '\t' => {
                let n = 8 - out.chars().count() % 8;
                out.extend(std::iter::repeat_n(' ', n));
            }
            c => out.push(c),
        }
    }
    out.trim_end().to_string()
}

/// Renders `bytes` (what `what` printed) on an emulated terminal wide and tall
/// enough for every line, each newline arriving as CR LF as a tty's `onlcr`
/// makes it; asserts that the screen shows exactly the lines of the bytes and
/// that nothing else was asked of the terminal. Returns the screen's text.
#[track_caller]
fn on_screen(what: &str, bytes: &[u8]) -> String {
    let text = String::from_utf8(bytes.to_vec())
        .unwrap_or_else(|_| panic!("{what}: not UTF-8: {bytes:?}"));
    let lines: Vec<String> = text.split('\n').map(laid_out).collect();
    let cols = lines
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(1, 60_000)
        + 1;
    let rows = (lines.len() + 1).min(60_000);
    let size = |n: usize| std::num::NonZeroU16::new(n as u16).unwrap();
    let mut p = vt100::Parser::new_with_callbacks(size(rows), size(cols), 0, Effects::default());
    p.process(text.replace('\n', "\r\n").as_bytes());
    let screen: Vec<String> = p
        .screen()
        .rows(0, cols as u16)
        .map(|r| r.trim_end().to_string())
        .take(lines.len())
        .collect();
    assert!(
        p.callbacks().0.is_empty(),
        "{what}: the output drove the terminal: {:?}\n{text:?}",
        p.callbacks().0
    );
    assert_eq!(
        screen, lines,
        "{what}: the screen is not the bytes (a control sequence took effect)\n{text:?}"
    );
    screen.join("\n")
}

/// Variables set for a command: name and value.
type Env<'a> = &'a [(&'a str, &'a Path)];

/// Runs `trace-recipe ARGS` (with `env`); stdout and stderr as they would
/// reach one terminal, one after the other.
fn shown(args: &[&str], env: Env) -> (Option<i32>, Vec<u8>) {
    let o = std::process::Command::new(bin())
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v.as_os_str())))
        .output()
        .expect("run trace-recipe");
    let mut all = o.stdout;
    all.extend(o.stderr);
    assert!(
        !String::from_utf8_lossy(&all).contains("panicked"),
        "{args:?}: {}",
        String::from_utf8_lossy(&all)
    );
    (o.status.code(), all)
}

/// A one-record trace.dat whose event system, comm and string field are `H`.
fn hostile_trace(dir: &Path) -> Vec<u8> {
    let dat = crate::common::one_record_trace(
        dir,
        b"\x1b[31mX\0",
        &format!("sys{H}"),
        tracedat::testing::small_format(),
        H,
        &format!("Linux {H} 6.0 x86_64"),
    );
    std::fs::read(dat).unwrap()
}

/// A run folder `name` in `dir` whose report.json, recipe.toml, facts.json
/// and trace.dat carry `H` (in `tag`-different values, so a diff shows them).
fn hostile_run(dir: &Path, name: &str, tag: &str, dat: &[u8]) -> PathBuf {
    let f = dir.join(name);
    std::fs::create_dir_all(&f).unwrap();
    std::fs::write(f.join("trace.dat"), dat).unwrap();
    let report = serde_json::json!({
        "recipe": format!("{tag}{H}"),
        "kernel_release": format!("{tag}{H}"),
        "duration_s": 1.0,
        "stop_reason": format!("{tag}{H}"),
    });
    std::fs::write(f.join("report.json"), report.to_string()).unwrap();
    std::fs::write(
        f.join("recipe.toml"),
        format!("name = \"{tag}{H_TOML}\"\n[params]\n\"k{H_TOML}\" = \"{tag}{H_TOML}\"\n"),
    )
    .unwrap();
    let facts = serde_json::json!({ format!("fact{H}"): format!("{tag}{H}") });
    std::fs::write(f.join("facts.json"), facts.to_string()).unwrap();
    f
}

/// A bundle `name` whose manifest's recipe, kernel release, host and start
/// are `H` and its param `k` is `param`, and whose recipe starts [`FORGED`] as
/// its workload and `H` as a `[collect]` command.
fn hostile_bundle(dir: &Path, name: &str, param: &str) -> PathBuf {
    let recipe = format!(
        "name = \"r\"\n[params]\nk = \"a\"\n[scope]\ncommand = [\"sh\", \"-c\", \"{}\"]\n[[events]]\nname = \"sched:sched_switch\"\n[collect]\nbefore = [[\"echo\", \"{H_TOML}\"]]\n",
        FORGED
            .replace('\u{1b}', "\\u001b")
            .replace('\r', "\\r")
            .replace('\u{7}', "\\u0007")
    );
    let mut m: serde_json::Value =
        serde_json::from_slice(&manifest_for(&[("recipe.toml", recipe.as_bytes())], 1)).unwrap();
    for k in ["recipe", "kernel_release", "host", "started"] {
        m[k] = H.into();
    }
    m["params"] = serde_json::json!({ "k": param });
    let bundle = dir.join(name);
    build(
        &bundle,
        vec![
            Entry::File("manifest.json", serde_json::to_vec(&m).unwrap()),
            Entry::File("recipe.toml", recipe.into_bytes()),
        ],
    );
    bundle
}

/// A fact file (the host's, from tests/facts) with an event `zz<H>:ev` (a
/// field's type or name with a control character does not parse: only the
/// event's name can carry one).
fn hostile_facts(dir: &Path) -> PathBuf {
    let packed = std::fs::read(crate::common::repo().join("tests/facts/host.json.zst")).unwrap();
    let mut f: serde_json::Value =
        serde_json::from_slice(&zstd::decode_all(&packed[..]).unwrap()).unwrap();
    let ev = format!("zz{H}:ev");
    let events = f["events"].as_array_mut().unwrap();
    events.push(ev.clone().into());
    events.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    f["formats"][&ev] = tracedat::testing::small_format().into();
    let p = dir.join("facts.json");
    std::fs::write(&p, f.to_string()).unwrap();
    p
}

/// Every string of `v`, keys included.
fn strings(v: &serde_json::Value) -> Vec<String> {
    match v {
        serde_json::Value::String(s) => vec![s.clone()],
        serde_json::Value::Array(a) => a.iter().flat_map(strings).collect(),
        serde_json::Value::Object(o) => o
            .iter()
            .flat_map(|(k, v)| std::iter::once(k.clone()).chain(strings(v)))
            .collect(),
        _ => Vec::new(),
    }
}

/// Every command that shows someone else's text, on hostile fixtures: the
/// screen is the bytes, the hostile text is on it escaped, and the machine
/// formats escape DEL and C1 (and still parse to the same strings).
#[test]
fn no_command_lets_a_file_drive_the_terminal() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let dat = hostile_trace(dir);
    let a = hostile_run(dir, "a", "A", &dat);
    let b = hostile_run(dir, "b", "B", &dat);
    let status = dir.join("down.json");
    std::fs::write(
        &status,
        serde_json::json!({ "host": H, "stage": H, "reason": H, "exit_code": 3 }).to_string(),
    )
    .unwrap();
    // A param with control characters is refused by the recipe (then no
    // command is listed): one bundle for the headers, one for the consent list.
    let bundle = hostile_bundle(dir, "hostile.tar.zst", H);
    let consent_bundle = hostile_bundle(dir, "consent.tar.zst", "b");
    let facts = hostile_facts(dir);
    let library = dir.join("library");
    std::fs::create_dir(&library).unwrap();
    write_recipe(
        &library,
        "lib.toml",
        &format!(
            "name = \"lib\"\ndescription = \"{H_TOML}\"\n[[events]]\nname = \"sched:sched_switch\"\n"
        ),
    );
    let raw = write_recipe(
        dir,
        "raw.toml",
        &format!("# {H}\nname = \"raw\"\n[[events]]\nname = \"sched:sched_switch\"\n"),
    );
    let keys = write_recipe(
        dir,
        "keys.toml",
        &format!(
            "name = \"keys\"\n[params]\n\"q{H_TOML}\" = \"{H_TOML}\"\n[[events]]\nname = \"sched:sched_switch\"\n"
        ),
    );
    let unknown = write_recipe(
        dir,
        &format!("unknown{H}.toml"),
        &format!("name = \"u\"\n[[events]]\nname = \"sched:{H_TOML}\"\n"),
    );
    let unpacked = dir.join("unpacked");
    let (a, b, bundle, consent_bundle, facts, status, raw, keys, unknown, unpacked) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        bundle.to_str().unwrap(),
        consent_bundle.to_str().unwrap(),
        facts.to_str().unwrap(),
        status.to_str().unwrap(),
        raw.to_str().unwrap(),
        keys.to_str().unwrap(),
        unknown.to_str().unwrap(),
        unpacked.to_str().unwrap(),
    );
    let no_env: Env = &[];
    let library_path = [("TRACE_RECIPE_PATH", library.as_path())];
    let texts: Vec<(&str, Vec<&str>, Env)> = vec![
        ("diff", vec!["diff", a, b], no_env),
        (
            "diff --format html",
            vec!["diff", a, b, "--format", "html"],
            no_env,
        ),
        ("fleet", vec!["fleet", a, b, status], no_env),
        (
            "check --against",
            vec!["check", "--against", bundle],
            no_env,
        ),
        ("rerun", vec!["rerun", bundle], no_env),
        ("unpack", vec!["unpack", bundle, "-o", unpacked], no_env),
        (
            "events --facts",
            vec!["events", "zz*:ev", "--fields", "--facts", facts],
            no_env,
        ),
        ("list", vec!["list"], &library_path),
        ("show", vec!["show", raw], no_env),
        (
            "check --explain",
            vec!["check", "--explain", "--facts", facts, keys],
            no_env,
        ),
        ("check", vec!["check", "--facts", facts, unknown], no_env),
    ];
    let mut failures = Vec::new();
    for (what, args, env) in &texts {
        let (code, out) = shown(args, env);
        let screen = std::panic::catch_unwind(|| on_screen(what, &out));
        match screen {
            Ok(s) if s.contains("\\u{1b}]0;PWNED\\u{7}") => {}
            Ok(s) => failures.push(format!(
                "{what} (exit {code:?}): the hostile text is not shown escaped:\n{s}"
            )),
            Err(e) => failures.push(format!(
                "{what} (exit {code:?}): {}",
                e.downcast_ref::<String>().map_or("?", String::as_str)
            )),
        }
    }

    // The consent list: one quoted array a command, flagged, on a screen
    // that is its bytes.
    let forged = "  workload: [\"sh\", \"-c\", \"touch /tmp/pwned #\\u{1b}[2K\\u{d}  workload: true\\u{1b}]0;t\\u{7}\"]\n    ^ warning: this workload command holds control or invisible characters";
    let collect = format!("  collect before: [\"echo\", \"{H_SHOWN}\"]\n    ^ warning:");
    for (what, args, exit) in [
        ("rerun", vec!["rerun", consent_bundle], 2),
        (
            "check --against",
            vec!["check", "--against", consent_bundle],
            0,
        ),
    ] {
        let (code, out) = shown(&args, no_env);
        let consent = String::from_utf8_lossy(&out);
        let screen = std::panic::catch_unwind(|| on_screen(what, &out));
        if code != Some(exit) || !screen.is_ok_and(|s| s.contains(forged) && s.contains(&collect)) {
            failures.push(format!(
                "{what} (exit {code:?}): the consent list is not one quoted, flagged array a command on the screen:\n{consent}"
            ));
        }
    }

    // The machine formats: DEL and C1 escaped too, the strings intact.
    let machine: Vec<(&str, Vec<&str>)> = vec![
        ("diff --format json", vec!["diff", a, b, "--format", "json"]),
        (
            "fleet --format json",
            vec!["fleet", a, b, status, "--format", "json"],
        ),
        (
            "check --against --format json",
            vec!["check", "--against", bundle, "--format", "json"],
        ),
        (
            "events --facts --format json",
            vec!["events", "zz*:ev", "--facts", facts, "--format", "json"],
        ),
        (
            "check --format sarif",
            vec!["check", "--facts", facts, unknown, "--format", "sarif"],
        ),
        (
            "check --format json",
            vec!["check", "--facts", facts, unknown, "--format", "json"],
        ),
    ];
    for (what, args) in &machine {
        let o = std::process::Command::new(bin())
            .args(args)
            .output()
            .unwrap();
        let json = String::from_utf8_lossy(&o.stdout).into_owned();
        let parsed: Result<serde_json::Value, _> = serde_json::from_str(&json);
        let raw_controls: Vec<char> = json
            .chars()
            .filter(|c| c.is_control() && *c != '\n')
            .collect();
        let ok = parsed
            .as_ref()
            .is_ok_and(|v| strings(v).iter().any(|s| s.contains("\u{9b}31m\u{7f}")))
            && raw_controls.is_empty()
            && json.contains("\\u009b31m\\u007f");
        if !ok {
            failures.push(format!(
                "{what}: raw controls {raw_controls:?}, parsed {:?}:\n{json}{}",
                parsed.err(),
                String::from_utf8_lossy(&o.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
