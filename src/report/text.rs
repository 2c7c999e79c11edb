//! summary.txt: report.json rendered through a minijinja template — the
//! built-in one ([`DEFAULT_TEMPLATE`]) or a user's (`report --template FILE`,
//! `[output] template`). The context is the [`JsonReport`] itself, so a
//! template can show any number report.json has, and nothing else.
//!
//! Filters besides minijinja's built-ins: `dur` (ns → `12.345µs`, `1.5ms`, `2.0s`),
//! `fixed(n)` (n decimals), `ljust(w)`/`rjust(w)` (pad to w characters),
//! `bar(max, w)` (`#` × w·value/max) and `spark` (a list of counts as ▁▂▃▄▅▆▇█).

use std::path::{Path, PathBuf};

use minijinja::{Environment, Value};

use super::JsonReport;

/// The built-in summary template.
pub const DEFAULT_TEMPLATE: &str = include_str!("templates/summary.txt.j2");
/// Upper bound on a template's work (minijinja fuel), so a runaway user
/// template fails instead of hanging a run.
const FUEL: u64 = 50_000_000;

/// A template that could not be read, compiled or rendered.
#[derive(Debug, thiserror::Error)]
#[error("template {}: {detail}\n  = help: {help}", .path.display())]
pub struct TemplateError {
    /// The template file (`<built-in>` for the default).
    pub(crate) path: PathBuf,
    /// What went wrong, with the line when minijinja knows it.
    pub(crate) detail: String,
    /// What to do.
    pub(crate) help: &'static str,
}

/// A template to render summaries with.
#[derive(Debug, Clone)]
pub struct Template {
    path: PathBuf,
    source: String,
}

impl Template {
    /// The built-in template.
    pub fn builtin() -> Template {
        Template {
            path: PathBuf::from("<built-in>"),
            source: DEFAULT_TEMPLATE.to_string(),
        }
    }

    /// Reads a template file. Errors: it cannot be read.
    pub(crate) fn load(path: &Path) -> Result<Template, TemplateError> {
        let source = crate::untrusted::read_to_string(path, crate::untrusted::Kind::Template)
            .map_err(|e| TemplateError {
                path: path.to_path_buf(),
                detail: format!("cannot read it: {}", e.reason()),
                help: "give a readable UTF-8 minijinja template file",
            })?;
        Ok(Template {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Compiles the template without rendering it. Errors: a syntax error, with its line.
    pub(crate) fn check(&self) -> Result<(), TemplateError> {
        environment()
            .template_from_str(&self.source)
            .map(|_| ())
            .map_err(|e| self.error(e))
    }

    fn error(&self, e: minijinja::Error) -> TemplateError {
        TemplateError {
            path: self.path.clone(),
            detail: match e.line() {
                Some(l) => format!("line {l}: {e}"),
                None => e.to_string(),
            },
            help: "fix the template; its context is report.json (schema/report.schema.json)",
        }
    }

    /// Renders `report`. Errors: a syntax error, an unknown filter or a
    /// failing expression, with its line.
    pub fn render(&self, report: &JsonReport) -> Result<String, TemplateError> {
        let env = environment();
        let t = env
            .template_from_str(&self.source)
            .map_err(|e| self.error(e))?;
        t.render(Value::from(minijinja::value::Serde(report)))
            .map_err(|e| self.error(e))
    }
}

/// A minijinja environment with the report filters and bounded fuel.
pub(super) fn environment<'s>() -> Environment<'s> {
    let mut env = Environment::new();
    env.set_fuel(Some(FUEL));
    env.add_filter("dur", dur);
    env.add_filter("fixed", |v: f64, n: usize| format!("{v:.n$}"));
    env.add_filter("ljust", |v: Value, w: usize| {
        format!("{:<w$}", v.to_string())
    });
    env.add_filter("rjust", |v: Value, w: usize| {
        format!("{:>w$}", v.to_string())
    });
    env.add_filter("bar", bar);
    env.add_filter("spark", spark);
    env
}

/// ns → a short duration: `850ns`, `12.345µs`, `1.500ms`, `2.000s`.
pub fn dur(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns}ns"),
        1_000..1_000_000 => format!("{:.3}µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.3}ms", ns as f64 / 1e6),
        _ => format!("{:.3}s", ns as f64 / 1e9),
    }
}

fn bar(v: u64, max: u64, width: usize) -> String {
    let n = (v as u128 * width as u128)
        .checked_div(max as u128)
        .unwrap_or(0) as usize;
    "#".repeat(if v > 0 { n.max(1) } else { 0 }.min(width))
}

fn spark(values: Vec<u64>) -> String {
    const TICKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = values.iter().copied().max().unwrap_or(0).max(1);
    values
        .iter()
        .map(|&v| match v {
            0 => ' ',
            v => TICKS[((v as u128 * 7) / max as u128) as usize],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_format_units_and_bars() {
        assert_eq!(dur(999), "999ns");
        assert_eq!(dur(12_345), "12.345µs");
        assert_eq!(dur(1_500_000), "1.500ms");
        assert_eq!(bar(5, 10, 20), "#".repeat(10));
        assert_eq!(bar(1, 1000, 20), "#");
        assert_eq!(bar(0, 0, 20), "");
        assert_eq!(spark(vec![0, 1, 8]), " ▁█");
    }
}
