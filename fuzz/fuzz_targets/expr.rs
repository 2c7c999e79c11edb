//! Any text given to the expression parser of `[[expect]]` and `diff --fail-if`
//! parses or fails with a place inside the text, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trace_recipe::expr::{Context, Expr};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for context in [Context::Expect, Context::FailIf] {
        if let Err(e) = Expr::parse(text, context) {
            assert!(e.span.start <= text.len() && e.span.end <= text.len() + 1);
        }
    }
});
