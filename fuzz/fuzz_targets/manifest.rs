//! Any bytes as the manifest of an otherwise well-formed bundle are refused or
//! read, never a panic, a hang or runaway memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else { return };
    let path = dir.path().join("in.tar.zst");
    let write = || -> std::io::Result<()> {
        let enc = zstd::Encoder::new(std::fs::File::create(&path)?, 1)?;
        let mut tar = tar::Builder::new(enc);
        for (name, bytes) in [("manifest.json", data), ("trace.dat", &b"x"[..])] {
            let mut h = tar::Header::new_ustar();
            h.set_size(bytes.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut h, name, bytes)?;
        }
        tar.into_inner()?.finish()?;
        Ok(())
    };
    if write().is_ok() {
        let _ = trace_recipe::bundle::open(&path, &|_| true);
    }
});
