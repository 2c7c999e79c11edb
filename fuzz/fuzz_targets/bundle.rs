//! Any bytes given to the bundle reader are refused or read, never a panic, a
//! hang, runaway memory, or a file written outside the reader's temporary folder.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else { return };
    let path = dir.path().join("in.tar.zst");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(opened) = trace_recipe::bundle::open(&path) {
        // Every member the manifest lists was checked against its hash.
        for name in opened.manifest.members.keys() {
            assert!(opened.dir.path().join(name).is_file());
        }
    }
});
