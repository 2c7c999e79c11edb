//! `check --format sarif`: the diagnostics as a SARIF 2.1.0 log (OASIS Static
//! Analysis Results Interchange Format), the form code-review systems read to
//! show findings on the lines of a change.
//!
//! One run of tool `trace-recipe`; two rules, `recipe` (the recipe is wrong)
//! and `kernel` (this kernel lacks what the recipe asks for); one result per
//! diagnostic, level `error`, with a physical location (1-based lines and
//! character columns, `endColumn` exclusive, as SARIF's default
//! `columnKind` "unicodeCodePoints") when the problem has a place. The help
//! text goes into the message after the problem, as it reads on the terminal.

use serde_json::{Value, json};

use crate::diagnostic::{Diagnostic, Fault, Source};

/// The SARIF 2.1.0 log of `diagnostics` found in `source`, pretty-printed with a
/// final newline. An empty list gives a run with no results (a clean check).
pub fn render(diagnostics: &[Diagnostic], source: &Source) -> String {
    let uri = source.path.display().to_string();
    let results: Vec<Value> = diagnostics
        .iter()
        .map(|d| {
            let j = d.to_json(source);
            let text = match &j.help {
                Some(h) => format!("{} (help: {h})", j.message),
                None => j.message.clone(),
            };
            let mut location = json!({ "artifactLocation": { "uri": j.file } });
            if let (Some(l), Some(c), Some(el), Some(ec)) =
                (j.line, j.column, j.end_line, j.end_column)
            {
                location["region"] = json!({
                    "startLine": l,
                    "startColumn": c,
                    "endLine": el,
                    "endColumn": ec,
                });
            }
            json!({
                "ruleId": rule_id(d.fault),
                "level": "error",
                "message": { "text": text },
                "locations": [{ "physicalLocation": location }],
            })
        })
        .collect();
    let log = json!({
        "$schema": "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "trace-recipe",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": [
                    {
                        "id": rule_id(Fault::Recipe),
                        "shortDescription": { "text": "The recipe is wrong: fix the recipe" },
                    },
                    {
                        "id": rule_id(Fault::Kernel),
                        "shortDescription": { "text": "This kernel lacks what the recipe asks for" },
                    },
                ],
            }},
            "columnKind": "unicodeCodePoints",
            "artifacts": [{ "location": { "uri": uri } }],
            "results": results,
        }],
    });
    crate::output::to_json(&log)
}

fn rule_id(f: Fault) -> &'static str {
    match f {
        Fault::Recipe => "recipe",
        Fault::Kernel => "kernel",
    }
}
