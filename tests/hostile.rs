//! Hostile and malformed input: every recipe in tests/hostile/ is refused with its
//! expected message (`# expect: TEXT` on its first line) and writes nothing: no
//! tracefs change, no output folder.

use crate::common::{TracefsGuard, repo, text, trace_recipe};

/// The path `output-symlink.toml` writes to; the test plants a symlink there.
const SYMLINK: &str = "/tmp/trace-recipe-hostile-symlink";

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    #[test]
    fn every_hostile_recipe_is_refused_and_nothing_is_written() {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let target = tempfile::tempdir().unwrap();
        let _ = std::fs::remove_file(SYMLINK);
        std::os::unix::fs::symlink(target.path(), SYMLINK).unwrap();
        let mut files: Vec<_> = std::fs::read_dir(repo().join("tests/hostile"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(
            files.len() >= 30,
            "the hostile corpus must hold at least 30 recipes, has {}",
            files.len()
        );
        let mut refused = 0;
        for (i, file) in files.iter().enumerate() {
            let body = std::fs::read_to_string(file).unwrap();
            let expect = body
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("# expect: "))
                .expect("first line is `# expect: TEXT`");
            let name = file.file_name().unwrap().to_str().unwrap();
            let out = dir.path().join(format!("out{i}"));
            let mut args = vec!["run", file.to_str().unwrap()];
            if !name.starts_with("output-") {
                args.extend(["-o", out.to_str().unwrap()]);
            }
            args.extend(["--", "true"]);
            let o = trace_recipe(&args);
            let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
            assert!(
                matches!(o.status.code(), Some(1 | 3)),
                "{name} must be refused: {all}"
            );
            assert!(
                all.contains(expect),
                "{name}: expected `{expect}` in:\n{all}"
            );
            assert!(!all.contains("panicked"), "{name}: {all}");
            assert!(!out.exists(), "{name}: an output folder was created");
            guard.assert_unchanged();
            refused += 1;
        }
        assert_eq!(
            std::fs::read_dir(target.path()).unwrap().count(),
            0,
            "nothing written through the symlink"
        );
        std::fs::remove_file(SYMLINK).unwrap();
        eprintln!("FIGURE hostile inputs rejected: {refused}/{}", files.len());
    }
}
