//! Pass 1: template rendering with minijinja.

use std::collections::BTreeMap;

use minijinja::{Environment, UndefinedBehavior, Value};

use super::ParamValue;
use crate::diagnostic::Diagnostic;

/// Variables every recipe may use besides its `[params]`.
#[derive(Debug, Clone, Default)]
pub struct Builtins {
    /// When the run started, `YYYYmmdd-HHMMSS` in UTC (for output folder names).
    pub started: String,
}

/// Largest rendered recipe accepted, in bytes.
const MAX_RENDERED: usize = 1 << 20;

/// Renders recipe text: `[params]` and `name` from the raw text, overridden by `sets`
/// (`KEY=VALUE`), expanded with strict undefined variables.
///
/// Templates can read nothing but these variables (no files, no environment), and
/// rendering is bounded (minijinja fuel, output size). Errors: one diagnostic per
/// problem (bad `--set`, undefined variable, template syntax, a template that
/// expands to several lines).
pub fn render(raw: &str, sets: &[String], builtins: &Builtins) -> Result<String, Vec<Diagnostic>> {
    let mut diagnostics = Vec::new();
    let (mut params, name) = raw_params(raw);
    for set in sets {
        let Some((key, value)) = set.split_once('=') else {
            diagnostics.push(
                Diagnostic::recipe(None, format!("`--set {set}` is not of the form KEY=VALUE"))
                    .with_help("write `--set comm=bash`"),
            );
            continue;
        };
        let key = key.trim();
        match params.get(key) {
            None => diagnostics.push(
                Diagnostic::recipe(
                    None,
                    format!("`--set {key}=...` names no parameter of this recipe"),
                )
                .with_help(if params.is_empty() {
                    "the recipe has no `[params]` table".to_string()
                } else {
                    format!(
                        "its `[params]` are: {}",
                        params.keys().cloned().collect::<Vec<_>>().join(", ")
                    )
                }),
            ),
            Some(old) => match typed_like(old, value) {
                Ok(v) => {
                    params.insert(key.to_string(), v);
                }
                Err(msg) => diagnostics.push(Diagnostic::recipe(None, msg)),
            },
        }
    }
    if !diagnostics.is_empty() {
        return Err(diagnostics);
    }

    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    if let Ok(syntax) = minijinja::syntax::SyntaxConfig::builder()
        .keep_trailing_newline(true)
        .build()
    {
        env.set_syntax(syntax);
    }
    env.set_fuel(Some(200_000));
    let mut ctx: BTreeMap<String, Value> = params
        .iter()
        .map(|(k, v)| (k.clone(), param_value(v)))
        .collect();
    ctx.entry("name".into())
        .or_insert_with(|| Value::from(name.unwrap_or_default()));
    ctx.entry("started".into())
        .or_insert_with(|| Value::from(builtins.started.clone()));

    let rendered = env.render_str(raw, ctx).map_err(|e| {
        let span = e
            .range()
            .or_else(|| e.line().map(|line| line_span(raw, line)));
        let mut msg = e
            .detail()
            .map_or_else(|| e.kind().to_string(), str::to_string);
        if e.kind() == minijinja::ErrorKind::UndefinedError {
            msg = format!("template uses an undefined variable: {msg}");
        }
        vec![
            Diagnostic::recipe(span, format!("template error: {msg}"))
                .with_help("define every variable under `[params]` (or pass `--set KEY=VALUE`)"),
        ]
    })?;
    if rendered.len() > MAX_RENDERED {
        return Err(vec![Diagnostic::recipe(
            None,
            format!(
                "the rendered recipe is {} bytes, over the limit of {MAX_RENDERED}",
                rendered.len()
            ),
        )]);
    }
    if rendered.lines().count() != raw.lines().count() {
        return Err(vec![
            Diagnostic::recipe(None, "a template expanded to text with a line break")
                .with_help("parameter values must not contain newlines"),
        ]);
    }
    Ok(rendered)
}

/// `[params]` and `name` as written in the raw file (before rendering).
fn raw_params(raw: &str) -> (BTreeMap<String, ParamValue>, Option<String>) {
    if let Ok(doc) = toml_edit::Document::parse(raw.to_string()) {
        let params = doc
            .get("params")
            .and_then(|p| p.as_table_like())
            .map(|t| {
                t.iter()
                    .filter_map(|(k, v)| Some((k.to_string(), edit_value(v.as_value()?)?)))
                    .collect()
            })
            .unwrap_or_default();
        let name = doc.get("name").and_then(|n| n.as_str()).map(str::to_string);
        return (params, name);
    }
    // The raw text is not TOML (templates outside strings): read the `[params]`
    // section and the `name` line on their own.
    let mut section = String::new();
    let mut in_params = false;
    let mut name = None;
    let mut seen_table = false;
    for line in raw.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            seen_table = true;
            in_params = t.trim_end_matches(|c: char| c != ']') == "[params]";
            continue;
        }
        if in_params {
            section.push_str(line);
            section.push('\n');
        } else if !seen_table
            && t.starts_with("name")
            && let Ok(v) = toml::from_str::<BTreeMap<String, ParamValue>>(t)
            && let Some(ParamValue::Str(s)) = v.get("name")
        {
            name = Some(s.clone());
        }
    }
    (toml::from_str(&section).unwrap_or_default(), name)
}

fn edit_value(v: &toml_edit::Value) -> Option<ParamValue> {
    Some(match v {
        toml_edit::Value::String(s) => ParamValue::Str(s.value().clone()),
        toml_edit::Value::Integer(i) => ParamValue::Int(*i.value()),
        toml_edit::Value::Float(f) => ParamValue::Float(*f.value()),
        toml_edit::Value::Boolean(b) => ParamValue::Bool(*b.value()),
        _ => return None,
    })
}

fn typed_like(old: &ParamValue, value: &str) -> Result<ParamValue, String> {
    if value.chars().any(char::is_control) {
        return Err(format!(
            "`--set` value {value:?} contains a control character"
        ));
    }
    let bad =
        |kind: &str| format!("`--set` value `{value}` is not {kind}, as the recipe's default is");
    Ok(match old {
        ParamValue::Str(_) => ParamValue::Str(value.to_string()),
        ParamValue::Int(_) => ParamValue::Int(value.parse().map_err(|_| bad("an integer"))?),
        ParamValue::Float(_) => ParamValue::Float(value.parse().map_err(|_| bad("a number"))?),
        ParamValue::Bool(_) => ParamValue::Bool(value.parse().map_err(|_| bad("true or false"))?),
    })
}

fn param_value(v: &ParamValue) -> Value {
    match v {
        ParamValue::Bool(b) => Value::from(*b),
        ParamValue::Int(i) => Value::from(*i),
        ParamValue::Float(f) => Value::from(*f),
        ParamValue::Str(s) => Value::from(s.clone()),
    }
}

/// Byte range of 1-based line `line` of `text`.
fn line_span(text: &str, line: usize) -> std::ops::Range<usize> {
    let mut start = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return start..start + l.trim_end_matches('\n').len();
        }
        start += l.len();
    }
    text.len()..text.len()
}
