//! Bundles: `run --bundle` and `pack` write one DIR.tar.zst that `tar` opens,
//! `report` and `unpack` read back exactly; hostile bundles are refused with
//! their reason and nothing is written outside a temporary folder.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::common::{TracefsGuard, text, trace_recipe, write_recipe};

fn sha256(path: &Path) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(std::fs::read(path).unwrap());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs a small recipe with `--bundle`; returns (output folder, bundle).
fn bundled_run(dir: &Path) -> (PathBuf, PathBuf) {
    let recipe = write_recipe(
        dir,
        "b.toml",
        "name = \"bundled\"\ndescription = \"execs of a shell\"\nduration = \"30s\"\n[params]\nwho = \"me\"\n[scope]\nfollow_forks = true\n[[events]]\nname = \"sched:sched_process_exec\"\n",
    );
    let out = dir.join("run");
    let o = crate::common::run_bundled(&recipe, &out, &["sh", "-c", "ls / > /dev/null; true"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let bundle = dir.join("run.tar.zst");
    assert!(
        text(&o.stdout).contains(&format!("bundle: {}", bundle.display())),
        "{}",
        text(&o.stdout)
    );
    (out, bundle)
}

/// One tar entry for a hand-made (possibly hostile) bundle.
pub(crate) enum Entry {
    File(&'static str, Vec<u8>),
    /// Name bytes written raw into the header (no path checks).
    RawName(Vec<u8>, Vec<u8>),
    Kind(&'static str, tar::EntryType),
    HugeDeclared(&'static str),
}

pub(crate) fn manifest_for(members: &[(&str, &[u8])], version: u32) -> Vec<u8> {
    use sha2::Digest;
    let members: serde_json::Map<String, serde_json::Value> = members
        .iter()
        .map(|(n, b)| {
            let sha: String = sha2::Sha256::digest(b)
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect();
            (
                n.to_string(),
                serde_json::json!({"bytes": b.len(), "sha256": sha}),
            )
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "format": "trace-recipe-bundle", "format_version": version,
        "tool_version": "t", "recipe": "r", "recipe_written_sha256": null,
        "recipe_rendered_sha256": null, "params": {}, "workload": null, "host": null,
        "kernel_release": null, "kernel_facts": null, "started": null, "ended": null,
        "stop_reason": null, "workload_exit": null, "recorder": null, "lost_events": null,
        "irreversible": [], "members": members,
    }))
    .unwrap()
}

pub(crate) fn build(path: &Path, entries: Vec<Entry>) {
    let file = std::fs::File::create(path).unwrap();
    let enc = zstd::Encoder::new(file, 3).unwrap();
    let mut b = tar::Builder::new(enc);
    for e in entries {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        match e {
            Entry::File(name, data) => {
                h.set_size(data.len() as u64);
                h.set_entry_type(tar::EntryType::Regular);
                b.append_data(&mut h, name, data.as_slice()).unwrap();
            }
            Entry::RawName(name, data) => {
                h.set_size(data.len() as u64);
                h.set_entry_type(tar::EntryType::Regular);
                h.as_old_mut().name[..name.len()].copy_from_slice(&name);
                h.set_cksum();
                b.append(&h, data.as_slice()).unwrap();
            }
            Entry::Kind(name, kind) => {
                h.set_size(0);
                h.set_entry_type(kind);
                if matches!(kind, tar::EntryType::Symlink | tar::EntryType::Link) {
                    h.set_link_name("/etc/passwd").unwrap();
                }
                h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
                h.set_cksum();
                b.append(&h, std::io::empty()).unwrap();
            }
            Entry::HugeDeclared(name) => {
                h.set_size(1 << 44);
                h.set_entry_type(tar::EntryType::Regular);
                h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
                h.set_cksum();
                b.append(&h, &b"short"[..]).unwrap_or(());
            }
        }
    }
    let enc = b.into_inner().unwrap();
    enc.finish().unwrap();
}

#[test]
fn hostile_bundles_are_refused_and_write_nothing_outside_a_temporary_folder() {
    let dir = tempfile::tempdir().unwrap();
    let dat = b"not really a trace.dat".to_vec();
    let good_manifest = manifest_for(&[("trace.dat", &dat)], 1);
    let m = || Entry::File("manifest.json", good_manifest.clone());
    let f = || Entry::File("trace.dat", dat.clone());
    let bomb_size = 200usize << 20;
    let zeros = vec![0u8; bomb_size];
    let cases: Vec<(&str, Vec<Entry>, &str)> = vec![
        (
            "traversal",
            vec![m(), f(), Entry::RawName(b"../evil".to_vec(), b"x".to_vec())],
            "leaves the bundle",
        ),
        (
            "deep-traversal",
            vec![
                m(),
                f(),
                Entry::RawName(b"a/../../evil".to_vec(), b"x".to_vec()),
            ],
            "leaves the bundle",
        ),
        (
            "absolute",
            vec![
                m(),
                f(),
                Entry::RawName(b"/tmp/trace-recipe-evil-abs".to_vec(), b"x".to_vec()),
            ],
            "absolute path",
        ),
        (
            "symlink",
            vec![m(), f(), Entry::Kind("link", tar::EntryType::Symlink)],
            "symbolic link",
        ),
        (
            "hardlink",
            vec![m(), f(), Entry::Kind("hard", tar::EntryType::Link)],
            "hard link",
        ),
        (
            "chardev",
            vec![m(), f(), Entry::Kind("dev", tar::EntryType::Char)],
            "device file",
        ),
        (
            "blockdev",
            vec![m(), f(), Entry::Kind("blk", tar::EntryType::Block)],
            "device file",
        ),
        (
            "fifo",
            vec![m(), f(), Entry::Kind("fifo", tar::EntryType::Fifo)],
            "a fifo",
        ),
        (
            "directory",
            vec![m(), f(), Entry::Kind("sub/", tar::EntryType::Directory)],
            "directory entry",
        ),
        (
            "huge",
            vec![m(), Entry::HugeDeclared("trace.dat")],
            "over the limit",
        ),
        (
            "bomb",
            vec![
                Entry::File("manifest.json", manifest_for(&[("trace.dat", &zeros)], 1)),
                Entry::File("trace.dat", zeros.clone()),
            ],
            "decompression bomb",
        ),
        (
            "newer",
            vec![
                Entry::File("manifest.json", manifest_for(&[("trace.dat", &dat)], 99)),
                f(),
            ],
            "newer than this trace-recipe reads",
        ),
        ("no-manifest", vec![f()], "not manifest.json"),
        (
            "bad-manifest",
            vec![Entry::File("manifest.json", b"{not json".to_vec()), f()],
            "not JSON",
        ),
        (
            "altered",
            vec![m(), Entry::File("trace.dat", b"altered".to_vec())],
            "member `trace.dat` does not match its hash",
        ),
        (
            "unlisted",
            vec![m(), f(), Entry::File("extra.txt", b"x".to_vec())],
            "member `extra.txt` is not listed",
        ),
        (
            "missing",
            vec![m()],
            "member `trace.dat` of the manifest is missing",
        ),
        ("duplicate", vec![m(), f(), f()], "appears twice"),
        (
            "too-deep",
            vec![m(), f(), Entry::File("a/b/c/d/e/f/g/h/i/j", b"x".to_vec())],
            "not a plain relative path",
        ),
        (
            "non-utf8",
            vec![m(), f(), Entry::RawName(b"bad\xff".to_vec(), b"x".to_vec())],
            "not UTF-8",
        ),
    ];
    assert!(cases.len() >= 15);
    let mut refused = 0;
    for (name, entries, want) in cases {
        let bundle = dir.path().join(format!("{name}.tar.zst"));
        build(&bundle, entries);
        let scratch = dir.path().join(format!("scratch-{name}"));
        std::fs::create_dir(&scratch).unwrap();
        let dest = scratch.join("out");
        let o = trace_recipe(&[
            "unpack",
            bundle.to_str().unwrap(),
            "-o",
            dest.to_str().unwrap(),
        ]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{name}: must be refused: {err}");
        assert!(
            err.contains("refused") && err.contains(want),
            "{name}: expected `{want}` in: {err}"
        );
        let left: Vec<_> = std::fs::read_dir(&scratch).unwrap().collect();
        assert!(
            left.is_empty(),
            "{name}: wrote {left:?} beside the destination"
        );
        assert!(
            !dir.path().join("evil").exists() && !Path::new("/tmp/trace-recipe-evil-abs").exists(),
            "{name}"
        );
        // report refuses it the same way.
        let r = trace_recipe(&["report", bundle.to_str().unwrap()]);
        assert_eq!(r.status.code(), Some(3), "{name}: report must refuse it");
        refused += 1;
    }
    // A truncated bundle (half of a real-looking one) and a file that is not a bundle.
    let good = dir.path().join("good.tar.zst");
    build(&good, vec![m(), f()]);
    let ok = trace_recipe(&[
        "unpack",
        good.to_str().unwrap(),
        "-o",
        dir.path().join("good-out").to_str().unwrap(),
    ]);
    assert!(
        ok.status.success(),
        "the well-formed bundle unpacks: {}",
        text(&ok.stderr)
    );
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path().join("truncated.tar.zst");
    std::fs::File::create(&cut)
        .unwrap()
        .write_all(&bytes[..bytes.len() / 2])
        .unwrap();
    let o = trace_recipe(&[
        "unpack",
        cut.to_str().unwrap(),
        "-o",
        dir.path().join("cut-out").to_str().unwrap(),
    ]);
    assert!(
        text(&o.stderr).contains("truncated or corrupt"),
        "{}",
        text(&o.stderr)
    );
    assert!(!dir.path().join("cut-out").exists());
    refused += 1;
    eprintln!("FIGURE hostile bundles refused: {refused}/{refused}");
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn a_bundle_holds_the_run_and_reads_back_exactly() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let (out, bundle) = bundled_run(dir.path());
        guard.assert_unchanged();
        drop(guard);

        // GNU tar opens it; manifest.json comes first.
        let list = duct::cmd!("tar", "--zstd", "-tf", &bundle).read().unwrap();
        let names: Vec<&str> = list.lines().collect();
        assert_eq!(names.first(), Some(&"manifest.json"), "{list}");
        for m in [
            "trace.dat",
            "report.json",
            "summary.txt",
            "recipe.toml",
            "recipe.source.toml",
        ] {
            assert!(names.contains(&m), "{m} missing from:\n{list}");
        }

        // unpack gives back every member byte for byte, and the manifest names them.
        let unpacked = dir.path().join("unpacked");
        let o = trace_recipe(&[
            "unpack",
            bundle.to_str().unwrap(),
            "-o",
            unpacked.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(unpacked.join("manifest.json")).unwrap())
                .unwrap();
        for m in ["trace.dat", "report.json", "summary.txt", "recipe.toml"] {
            assert_eq!(sha256(&unpacked.join(m)), sha256(&out.join(m)), "{m}");
            assert_eq!(
                manifest["members"][m]["sha256"],
                sha256(&out.join(m)),
                "{m}"
            );
        }
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
                .unwrap();
        assert_eq!(manifest["format"], "trace-recipe-bundle");
        assert_eq!(manifest["recipe"], "bundled");
        assert_eq!(manifest["params"]["who"], "me");
        assert_eq!(manifest["kernel_release"], report["kernel_release"]);
        assert_eq!(manifest["stop_reason"], "workload exited");
        assert_eq!(manifest["workload"][0], "sh");
        assert_eq!(manifest["lost_events"], report["lost_total"]);
        assert_eq!(
            manifest["recipe_written_sha256"],
            sha256(&dir.path().join("b.toml"))
        );
        assert!(manifest["host"].is_string());

        // report reads a bundle, a folder and a trace.dat alike.
        let from_dat = trace_recipe(&["report", out.join("trace.dat").to_str().unwrap()]);
        let from_dir = trace_recipe(&["report", out.to_str().unwrap()]);
        let from_bundle = trace_recipe(&["report", bundle.to_str().unwrap()]);
        assert!(
            from_bundle.status.success(),
            "{}",
            text(&from_bundle.stderr)
        );
        assert!(text(&from_dat.stdout).contains("sched_process_exec"));
        assert_eq!(from_dat.stdout, from_dir.stdout);
        assert_eq!(from_dat.stdout, from_bundle.stdout);

        // pack of the folder again, with the host redacted.
        let again = dir.path().join("again.tar.zst");
        let o = trace_recipe(&[
            "pack",
            out.to_str().unwrap(),
            "-o",
            again.to_str().unwrap(),
            "--redact-host",
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let un2 = dir.path().join("un2");
        assert!(
            trace_recipe(&[
                "unpack",
                again.to_str().unwrap(),
                "-o",
                un2.to_str().unwrap()
            ])
            .status
            .success()
        );
        let m2: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(un2.join("manifest.json")).unwrap())
                .unwrap();
        assert!(m2["host"].is_null(), "{m2:#}");
    }
}
