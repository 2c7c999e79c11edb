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
    // Half the inputs are opened as `unpack` does (every member read), half
    // as a reader of trace.dat alone.
    let all = data.len() % 2 == 0;
    let reads = |name: &str| all || name == "trace.dat";
    if let Ok(opened) = trace_recipe::bundle::open(&path, &reads) {
        // Every member the manifest lists and the caller reads was checked
        // against its hash and written; no other member was written.
        for name in opened.manifest.members.keys() {
            assert_eq!(
                opened.dir.path().join(name).is_file(),
                reads(name),
                "{name}"
            );
        }
    }
});
