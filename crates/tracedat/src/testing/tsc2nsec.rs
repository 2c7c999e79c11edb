//! A version 7 trace.dat given a TSC2NSEC option (id 14: u32 mult, u32
//! shift, u64 offset), as `trace-cmd record --tsc2nsec` writes one. Nothing
//! moves: the option goes into a new options section appended at the end of
//! the file (id 0, uncompressed, the first options section's description),
//! ending with DONE and no next section, and the last DONE of the existing
//! chain is pointed at it (v7 readers follow the chain; the project's
//! trace.dat spec, section 9).
//!
//! trace-cmd records such files only on x86 hosts with a TSC clock; the tests
//! add the option to another fixture and compare our listing with trace-cmd's
//! listing of the same rewritten file.

use super::zlib::{open_v7, options};

/// `file` (version 7, any compression) with a TSC2NSEC option of `mult`,
/// `shift` and `offset`. Panics on anything else.
pub fn add_tsc2nsec(file: &[u8], mult: u32, shift: u32, offset: u64) -> Vec<u8> {
    let (f, e, _, at) = open_v7(file);
    // Follow the options chain to its last DONE.
    let mut section = f.u64(at) as usize;
    let description = f.u32(section + 4);
    let last_done = loop {
        assert_eq!(f.u16(section), 0, "options section at {section}");
        assert_eq!(f.u16(section + 2) & 1, 0, "compressed options at {section}");
        let size = f.u64(section + 8) as usize;
        let (id, done) = *options(&f, section + 16, section + 16 + size)
            .last()
            .unwrap_or_else(|| panic!("empty options section at {section}"));
        assert_eq!(id, 0, "options section at {section} ends without DONE");
        match f.u64(done) {
            0 => break done,
            next => section = next as usize,
        }
    };
    let mut out = file.to_vec();
    let new = out.len() as u64;
    out[last_done..last_done + 8].copy_from_slice(&e.u64(new));
    let mut payload = e.u16(14);
    payload.extend(e.u32(16));
    payload.extend(e.u32(mult));
    payload.extend(e.u32(shift));
    payload.extend(e.u64(offset));
    payload.extend(e.u16(0));
    payload.extend(e.u32(8));
    payload.extend(e.u64(0));
    out.extend(e.u16(0));
    out.extend(e.u16(0));
    out.extend(e.u32(description));
    out.extend(e.u64(payload.len() as u64));
    out.extend(payload);
    out
}
