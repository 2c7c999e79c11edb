//! Any run folder (the input split at 0xFF bytes into report.json, recipe.toml,
//! recipe.source.toml, recipe.base-1.toml and facts.json) is refused or read by
//! `check --against`'s reader, never a panic, a hang or runaway memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

const FILES: [&str; 5] = [
    "report.json",
    "recipe.toml",
    "recipe.source.toml",
    "recipe.base-1.toml",
    "facts.json",
];

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else { return };
    for (name, part) in FILES.iter().zip(data.split(|&b| b == 0xFF)) {
        if std::fs::write(dir.path().join(name), part).is_err() {
            return;
        }
    }
    if let Ok(run) = trace_recipe::replay::StoredRun::open(dir.path()) {
        let _ = run.facts();
        let _ = run.replay(&[], Vec::new());
    }
});
