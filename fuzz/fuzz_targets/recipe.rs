//! Recipe text → render → parse → validate against the kernel lab's Debian 6.12
//! facts (tests/facts, which have kprobes and hist triggers) and no host facts:
//! validation is pure, so no tracefs or file is touched. Any input must end in
//! a recipe or in diagnostics, never in a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use trace_recipe::diagnostic::render_all;
use trace_recipe::host::HostFacts;
use trace_recipe::kernel::KernelFacts;
use trace_recipe::recipe::{Builtins, LoadError, load_str};
use trace_recipe::validate::validate;

thread_local! {
    static FACTS: Option<KernelFacts> = KernelFacts::load(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/facts/debian-6.12.json.zst"
    )))
    .ok();
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let builtins = Builtins { started: "20260101-000000".into() };
    match load_str(Path::new("fuzz.toml"), text, &[], &builtins) {
        Ok(loaded) => FACTS.with(|facts| {
            if let Some(Err(diags)) = facts.as_ref().map(|f| validate(&loaded, f, &HostFacts::default())) {
                let _ = render_all(&diags, &loaded.source);
            }
        }),
        Err(LoadError::Invalid { text, diagnostics }) => {
            let _ = render_all(&diagnostics, &text);
        }
        Err(_) => {}
    }
});
