//! Any bytes given to the fact-file reader, as JSON or as zstd, are refused or
//! read, never a panic, a hang or runaway memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else { return };
    for name in ["facts.json", "facts.json.zst"] {
        let path = dir.path().join(name);
        if std::fs::write(&path, data).is_ok() {
            let _ = trace_recipe::kernel::KernelFacts::load(&path);
        }
    }
});
