//! summary.txt: report.json rendered through a minijinja [`Template`] — the
//! built-in one ([`DEFAULT_TEMPLATE`]) or a user's (`report --template FILE`,
//! `[output] template`, read and compiled on the recipe side). The context is
//! the [`JsonReport`] itself, so a template can show any number report.json
//! has, and nothing else.
//!
//! Filters besides minijinja's built-ins: `dur` (ns → `12.345µs`, `1.5ms`, `2.0s`),
//! `fixed(n)` (n decimals), `ljust(w)`/`rjust(w)` (pad to w characters),
//! `bar(max, w)` (`#` × w·value/max) and `spark` (a list of counts as ▁▂▃▄▅▆▇█).

use std::borrow::Cow;
use std::path::PathBuf;

use minijinja::{Environment, Value};

use super::JsonReport;
use crate::recipe::{Template, TemplateError};

/// The built-in summary template.
pub const DEFAULT_TEMPLATE: &str = include_str!("templates/summary.txt.j2");
/// Upper bound on a template's work (minijinja fuel), so a runaway user
/// template fails instead of hanging a run.
const FUEL: u64 = 50_000_000;

// `Template` (the file, read and compiled) is the recipe's
// (`crate::recipe::Template`); the built-in one and rendering are the report's.
impl Template {
    /// The built-in template.
    pub fn builtin() -> Template {
        Template {
            path: PathBuf::from("<built-in>"),
            source: DEFAULT_TEMPLATE.to_string(),
        }
    }

    /// Renders `report`. Errors: a syntax error, an unknown filter or a
    /// failing expression, with its line; for a user's template, also one
    /// going past [`USER_BUDGET`] (it renders confined, see
    /// [`crate::confine`]).
    pub fn render(&self, report: &JsonReport) -> Result<String, TemplateError> {
        let render = || -> Result<String, TemplateError> {
            let env = environment();
            let t = env
                .template_from_str(&self.source)
                .map_err(|e| self.error(e))?;
            t.render(Value::from(minijinja::value::Serde(report)))
                .map_err(|e| self.error(e))
        };
        if self.path.as_os_str() == "<built-in>" {
            return render();
        }
        let answer = crate::confine::run(USER_BUDGET, || match render() {
            Ok(s) => [b"O", s.as_bytes()].concat(),
            Err(e) => [b"E", e.detail.as_bytes()].concat(),
        })
        .map_err(|e| TemplateError {
            path: self.path.clone(),
            detail: format!("rendering stopped: {e}"),
            help: "a summary template may use at most 256 MiB, 10 s and write 16 MiB",
        })?;
        let text = String::from_utf8_lossy(&answer[answer.len().min(1)..]).into_owned();
        match answer.first() {
            Some(b'O') => Ok(text),
            _ => Err(TemplateError {
                path: self.path.clone(),
                detail: text,
                help: "fix the template; its context is report.json (schema/report.schema.json)",
            }),
        }
    }
}

/// What a user's summary template may use (a bundle's may be hostile):
/// memory beyond the tool's own, wall time, and bytes of summary.
pub(crate) const USER_BUDGET: crate::confine::Budget = crate::confine::Budget {
    memory: 256 << 20,
    time: std::time::Duration::from_secs(10),
    output: 16 << 20,
};

/// A minijinja environment with the report filters and bounded fuel.
pub(super) fn environment<'s>() -> Environment<'s> {
    let mut env = Environment::new();
    env.set_fuel(Some(FUEL));
    // A duration in ns, whole or not (an answer's latencies are µs with a
    // fraction: `x * 1000` is not always a whole number in f64); rounded,
    // never below 0.
    env.add_filter("dur", |ns: f64| dur(ns.max(0.0).round() as u64));
    env.add_filter("fixed", |v: f64, n: usize| {
        let n = within("fixed", n, MAX_DECIMALS)?;
        Ok::<_, minijinja::Error>(format!("{v:.n$}"))
    });
    env.add_filter("ljust", |v: Value, w: usize| {
        let w = within("ljust", w, MAX_WIDTH)?;
        Ok::<_, minijinja::Error>(format!("{:<w$}", v.to_string()))
    });
    env.add_filter("rjust", |v: Value, w: usize| {
        let w = within("rjust", w, MAX_WIDTH)?;
        Ok::<_, minijinja::Error>(format!("{:>w$}", v.to_string()))
    });
    env.add_filter("bar", |v: u64, max: u64, w: usize| {
        Ok::<_, minijinja::Error>(bar(v, max, within("bar", w, MAX_WIDTH)?))
    });
    env.add_filter("spark", spark);
    // A value may come from the trace.dat (comms, symbols, event names):
    // each string is written with its control characters escaped, so a
    // summary shown on a terminal cannot be driven by a hostile file; then
    // as minijinja writes it (HTML-escaped in the HTML page, where markup
    // marked safe, the flame graph's, is left alone).
    env.set_formatter(|out, state, value| {
        let escaped = match value.as_str() {
            Some(s) if !value.is_safe() => crate::untrusted::escape_in_text(s),
            _ => return minijinja::escape_formatter(out, state, value),
        };
        match escaped {
            Cow::Borrowed(_) => minijinja::escape_formatter(out, state, value),
            Cow::Owned(s) => minijinja::escape_formatter(out, state, &Value::from(s)),
        }
    });
    env
}

/// Widest `ljust`/`rjust`/`bar` a template may ask for, in characters (a
/// wider one is an error; Rust's formatter panics past 65,535).
pub(crate) const MAX_WIDTH: usize = 4096;
/// Most decimals `fixed(n)` may ask for.
pub(crate) const MAX_DECIMALS: usize = 64;

/// `n` when it is at most `max`, else an error naming the filter and the bound.
fn within(filter: &str, n: usize, max: usize) -> Result<usize, minijinja::Error> {
    if n <= max {
        Ok(n)
    } else {
        Err(minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            format!("{filter}({n}) is over the template budget of {max}"),
        ))
    }
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
        // The filter takes whole and fractional ns (1.001 µs * 1000 is
        // 1000.9999999999999 in f64).
        let out = environment()
            .render_str("{{ 12345 | dur }} {{ (1.001 * 1000) | dur }}", ())
            .unwrap();
        assert_eq!(out, "12.345µs 1.001µs");
    }

    /// A string from a hostile file (a comm, a kallsyms name) is set into
    /// the summary with its control characters escaped; lines, tabs,
    /// backslashes and numbers as they are.
    #[test]
    fn values_cannot_drive_the_terminal() {
        let ctx = minijinja::context! { name => "r\x1b[31mzer\r\x07\\x\ty", n => 5 };
        let out = environment()
            .render_str("{{ name }}|{{ name | ljust(3) }}|{{ n }}", ctx)
            .unwrap();
        let want = "r\\u{1b}[31mzer\\u{d}\\u{7}\\x\ty";
        assert_eq!(out, format!("{want}|{want}|5"));
    }

    /// `Template::check` (recipe side, a plain environment) accepts and
    /// refuses what the report's environment compiles, with the same message.
    #[test]
    fn check_compiles_as_the_report_environment_does() {
        for source in [
            "{{ events | dur }}\n",
            "{%- for e in events %}{{ e.name | nosuchfilter }}{% endfor -%}",
            "{% for e in events %}{{ e.name }}",
            "{{ (1 + }}",
            "{% raw %}{{{% endraw %}",
        ] {
            let t = Template {
                path: PathBuf::from("t.j2"),
                source: source.to_string(),
            };
            let ours = environment()
                .template_from_str(source)
                .map(|_| ())
                .map_err(|e| t.error(e).to_string());
            assert_eq!(t.check().map_err(|e| e.to_string()), ours, "{source}");
        }
    }
}
