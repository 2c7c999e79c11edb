//! Pass 1: template rendering with minijinja.

use std::collections::BTreeMap;

use std::ops::Range;

use minijinja::{Environment, UndefinedBehavior, Value};

use super::{ParamType, ParamValue};
use crate::diagnostic::Diagnostic;

/// Variables every recipe may use besides its `[params]`.
#[derive(Debug, Clone, Default)]
pub struct Builtins {
    /// When the run started, `YYYYmmdd-HHMMSS` in UTC (for output folder names).
    pub started: String,
}

/// Largest rendered recipe accepted, in bytes.
const MAX_RENDERED: usize = 1 << 20;

/// `[params]`, `name` and `extends` of one file of a recipe, read from its raw
/// text (before rendering), with spans shifted by the file's offset in the
/// chain's [`crate::diagnostic::Source`].
#[derive(Debug, Default)]
pub(crate) struct RawHead {
    /// The parameters this file declares.
    pub(crate) params: BTreeMap<String, ParamDef>,
    /// `name`, when this file sets it as a plain string.
    pub(crate) name: Option<String>,
    /// `extends` and the span of its value.
    pub(crate) extends: Option<(String, Option<Range<usize>>)>,
    /// Problems of typed parameters (unknown type, a default of another type).
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// One parameter as declared: its value (if any), its declared type (typed form
/// only), its help text, and the span of its key.
#[derive(Debug, Clone)]
pub(crate) struct ParamDef {
    /// The default value (plain form: the value).
    pub(crate) value: Option<ParamValue>,
    /// The declared type (typed form only).
    pub(crate) kind: Option<ParamType>,
    /// The help text (typed form only).
    pub(crate) help: Option<String>,
    /// Span of the parameter's key in the chain's source.
    pub(crate) span: Option<Range<usize>>,
}

/// Reads [`RawHead`] from `raw`, whose first byte is at `offset` of the chain's text.
pub(crate) fn raw_head(raw: &str, offset: usize) -> RawHead {
    let doc = match super::spans::parse_at(raw, offset) {
        Ok(doc) => doc,
        // The raw text is not TOML (templates outside strings): keep only the
        // lines that matter here, every other byte blanked so offsets still hold.
        Err(_) => match super::spans::parse_at(&head_lines(raw), offset) {
            Ok(doc) => doc,
            Err(_) => return RawHead::default(),
        },
    };
    let mut head = RawHead {
        name: doc.get("name").and_then(|n| n.as_str()).map(str::to_string),
        extends: doc.get_key_value("extends").and_then(|(_, v)| {
            let s = v.as_str()?.to_string();
            Some((s, v.span()))
        }),
        ..RawHead::default()
    };
    let Some(params) = doc.get("params").and_then(|p| p.as_table_like()) else {
        return head;
    };
    for (key, item) in params.iter() {
        let span = params.get_key_value(key).and_then(|(k, _)| k.span());
        let def = match item.as_table_like() {
            None => ParamDef {
                value: item.as_value().and_then(edit_value),
                kind: None,
                help: None,
                span,
            },
            Some(t) => typed_def(key, t, span, &mut head.diagnostics),
        };
        head.params.insert(key.to_string(), def);
    }
    head
}

fn typed_def(
    name: &str,
    t: &dyn toml_edit::TableLike,
    span: Option<Range<usize>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> ParamDef {
    const TYPES: &str = "\"int\", \"string\", \"duration\" or \"bool\"";
    for (k, _) in t.iter() {
        if !matches!(k, "type" | "default" | "help") {
            let at = t.get_key_value(k).and_then(|(k, _)| k.span());
            diagnostics.push(
                Diagnostic::recipe(at, format!("unknown key `{k}` in `params.{name}`"))
                    .with_help("known keys: type, default, help"),
            );
        }
    }
    let kind = match t.get("type") {
        None => {
            diagnostics.push(
                Diagnostic::recipe(span.clone(), format!("`params.{name}` has no `type`"))
                    .with_help(format!("write `type = ` {TYPES}")),
            );
            None
        }
        Some(item) => {
            let kind = match item.as_str() {
                Some("int") => Some(ParamType::Int),
                Some("string") => Some(ParamType::String),
                Some("duration") => Some(ParamType::Duration),
                Some("bool") => Some(ParamType::Bool),
                _ => None,
            };
            if kind.is_none() {
                diagnostics.push(
                    Diagnostic::recipe(
                        item.span(),
                        format!("`params.{name}.type` is not a parameter type"),
                    )
                    .with_help(format!("write {TYPES}")),
                );
            }
            kind
        }
    };
    let value = t.get("default").and_then(|d| {
        let v = d.as_value().and_then(edit_value);
        if let (Some(kind), Some(v)) = (kind, &v)
            && let Err(msg) = fits(kind, v)
        {
            diagnostics.push(Diagnostic::recipe(
                d.span(),
                format!("the default of `{name}` {msg}"),
            ));
        }
        v
    });
    ParamDef {
        value,
        kind,
        help: t.get("help").and_then(|h| h.as_str()).map(str::to_string),
        span,
    }
}

/// Whether `v` is a value of `kind`; the error completes "the value ...".
fn fits(kind: ParamType, v: &ParamValue) -> Result<(), String> {
    let ok = match (kind, v) {
        (ParamType::Int, ParamValue::Int(_))
        | (ParamType::Bool, ParamValue::Bool(_))
        | (ParamType::String, ParamValue::Str(_)) => true,
        (ParamType::Duration, ParamValue::Str(s)) => {
            return crate::recipe::parse_duration(s).map(|_| ());
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("is not {}", type_words(kind)))
    }
}

fn type_words(kind: ParamType) -> &'static str {
    match kind {
        ParamType::Int => "an integer",
        ParamType::String => "a string",
        ParamType::Duration => "a duration (`500ms`, `10s`, `2m`)",
        ParamType::Bool => "true or false",
    }
}

/// The lines of `raw` that [`raw_head`] reads (top-level `name` and `extends`,
/// `[params]` and `[params.NAME]` sections); every other byte but newlines
/// becomes a space.
fn head_lines(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut section: Option<bool> = None;
    for line in raw.split_inclusive('\n') {
        let t = line.trim();
        if t.starts_with('[') {
            let header = t
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim();
            section = Some(header == "params" || header.starts_with("params."));
        }
        let keep = match section {
            None => t.starts_with("name") || t.starts_with("extends"),
            Some(in_params) => in_params,
        };
        if keep {
            out.push_str(line);
        } else {
            out.extend(line.bytes().map(|b| if b == b'\n' { '\n' } else { ' ' }));
        }
    }
    out
}

/// Merges the parameters of a chain (base first; a later file's entry replaces an
/// earlier one, keeping a declared type) and applies `--set KEY=VALUE`. Errors: a
/// `--set` that is malformed, names no parameter or does not fit its type (at the
/// parameter's line), a typed parameter without a value.
pub(crate) fn merge_params(
    heads: &[&RawHead],
    sets: &[String],
) -> Result<BTreeMap<String, ParamDef>, Vec<Diagnostic>> {
    let mut diagnostics = Vec::new();
    let mut params: BTreeMap<String, ParamDef> = BTreeMap::new();
    for head in heads {
        diagnostics.extend(head.diagnostics.iter().cloned());
        for (k, def) in &head.params {
            let mut def = def.clone();
            if let Some(old) = params.get(k) {
                def.kind = def.kind.or(old.kind);
                def.help = def.help.or_else(|| old.help.clone());
                if let (Some(kind), Some(v)) = (def.kind, &def.value)
                    && let Err(msg) = fits(kind, v)
                {
                    diagnostics.push(
                        Diagnostic::recipe(def.span.clone(), format!("`{k}` {msg}"))
                            .with_help("its base recipe declares its type"),
                    );
                }
            }
            params.insert(k.clone(), def);
        }
    }
    for set in sets {
        let Some((key, value)) = set.split_once('=') else {
            diagnostics.push(
                Diagnostic::recipe(None, format!("`--set {set}` is not of the form KEY=VALUE"))
                    .with_help("write `--set comm=bash`"),
            );
            continue;
        };
        let key = key.trim();
        match params.get_mut(key) {
            None => {
                let declared = if params.is_empty() {
                    "the recipe has no `[params]` table".to_string()
                } else {
                    format!(
                        "its `[params]` are: {}",
                        params.keys().cloned().collect::<Vec<_>>().join(", ")
                    )
                };
                // Recipe keys that `run` replaces with an option of its own.
                let option = match key {
                    "duration" => Some("--duration"),
                    "size_kb" | "buffer.size_kb" | "buffer_size_kb" => Some("--buffer-size-kb"),
                    _ => None,
                };
                let help = match option {
                    Some(o) => format!(
                        "{declared}; to replace the recipe's `{key}`, use `{o} {}`",
                        value.trim()
                    ),
                    None => declared,
                };
                diagnostics.push(
                    Diagnostic::recipe(
                        None,
                        format!("`--set {key}=...` names no parameter of this recipe"),
                    )
                    .with_help(help),
                )
            }
            Some(def) => match set_value(def, value) {
                Ok(v) => def.value = Some(v),
                Err(msg) => diagnostics.push(
                    Diagnostic::recipe(def.span.clone(), format!("`--set {key}={value}`: {msg}"))
                        .with_help(format!("`{key}` is declared here")),
                ),
            },
        }
    }
    for (k, def) in &params {
        if def.value.is_none() && def.kind.is_some() {
            diagnostics.push(
                Diagnostic::recipe(def.span.clone(), format!("parameter `{k}` has no value"))
                    .with_help(format!("give it a `default`, or pass `--set {k}=...`")),
            );
        }
    }
    if diagnostics.is_empty() {
        Ok(params)
    } else {
        Err(diagnostics)
    }
}

/// The template context: the parameters, `name` and the builtins.
pub(crate) fn context(
    params: &BTreeMap<String, ParamDef>,
    name: Option<String>,
    builtins: &Builtins,
) -> BTreeMap<String, Value> {
    let mut ctx: BTreeMap<String, Value> = params
        .iter()
        .filter_map(|(k, d)| Some((k.clone(), param_value(d.value.as_ref()?))))
        .collect();
    ctx.entry("name".into())
        .or_insert_with(|| Value::from(name.unwrap_or_default()));
    ctx.entry("started".into())
        .or_insert_with(|| Value::from(builtins.started.clone()));
    ctx
}

/// Renders one file's raw text with `ctx`, strict about undefined variables;
/// spans of problems are shifted by `offset`.
///
/// Templates can read nothing but these variables (no files, no environment), and
/// rendering is bounded (minijinja fuel, output size). Errors: one diagnostic per
/// problem (undefined variable, template syntax, a template that expands to
/// several lines).
pub(crate) fn render(
    raw: &str,
    ctx: &BTreeMap<String, Value>,
    offset: usize,
) -> Result<String, Vec<Diagnostic>> {
    let shift = |r: Range<usize>| r.start + offset..r.end + offset;
    let rendered = confined(raw, ctx).map_err(|(span, msg, help)| {
        vec![Diagnostic::recipe(span.map(shift), msg).with_help(help)]
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

/// What rendering one recipe file may use: memory beyond the tool's own,
/// wall time, and bytes of rendered text (a rendered recipe over
/// [`MAX_RENDERED`] is refused anyway).
pub(crate) const RECIPE_BUDGET: crate::confine::Budget = crate::confine::Budget {
    memory: 256 << 20,
    time: std::time::Duration::from_secs(5),
    output: MAX_RENDERED + 1,
};

/// A problem of rendering: its span in the file's text (when known), the
/// message and what to do.
type RenderError = (Option<Range<usize>>, String, String);

/// `raw` rendered with `ctx` in a child confined to [`RECIPE_BUDGET`]
/// (minijinja's fuel bounds instructions, not what one instruction
/// allocates); text without template tags renders here (it is copied).
fn confined(raw: &str, ctx: &BTreeMap<String, Value>) -> Result<String, RenderError> {
    let undefined = |(span, msg)| {
        (
            span,
            format!("template error: {msg}"),
            "define every variable under `[params]` (or pass `--set KEY=VALUE`)".to_string(),
        )
    };
    if !["{{", "{%", "{#"].iter().any(|t| raw.contains(t)) {
        return render_here(raw, ctx).map_err(undefined);
    }
    let answer = crate::confine::run(RECIPE_BUDGET, || match render_here(raw, ctx) {
        Ok(s) => [b"O", s.as_bytes()].concat(),
        Err((span, msg)) => {
            let (start, end) = span.map_or((u64::MAX, 0), |r| (r.start as u64, r.end as u64));
            [
                b"E",
                &start.to_le_bytes()[..],
                &end.to_le_bytes(),
                msg.as_bytes(),
            ]
            .concat()
        }
    });
    let answer = match answer {
        Ok(a) => a,
        Err(e) => {
            // The answer carries one byte before the text: past the output
            // budget, the text itself is over MAX_RENDERED.
            let why = match e {
                crate::confine::Exceeded::Output(_) => {
                    format!("the rendered recipe is over the limit of {MAX_RENDERED} bytes")
                }
                other => other.to_string(),
            };
            return Err((
                None,
                format!("template error: rendering the recipe stopped: {why}"),
                format!(
                    "a recipe's templates may use {} MiB, {} s and render to {MAX_RENDERED} bytes",
                    RECIPE_BUDGET.memory >> 20,
                    RECIPE_BUDGET.time.as_secs()
                ),
            ));
        }
    };
    match answer.split_first() {
        Some((b'O', text)) => Ok(String::from_utf8_lossy(text).into_owned()),
        Some((_, rest)) if rest.len() >= 16 => {
            let word = |i: usize| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&rest[i..i + 8]);
                u64::from_le_bytes(b)
            };
            let span = (word(0) != u64::MAX).then(|| word(0) as usize..word(8) as usize);
            Err(undefined((
                span,
                String::from_utf8_lossy(&rest[16..]).into_owned(),
            )))
        }
        _ => Err(undefined((None, "rendering gave no answer".into()))),
    }
}

/// Renders `raw` with `ctx` in this process (fuel-bounded, strict about
/// undefined variables, values TOML-escaped).
fn render_here(
    raw: &str,
    ctx: &BTreeMap<String, Value>,
) -> Result<String, (Option<Range<usize>>, String)> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    if let Ok(syntax) = minijinja::syntax::SyntaxConfig::builder()
        .keep_trailing_newline(true)
        .build()
    {
        env.set_syntax(syntax);
    }
    env.set_fuel(Some(200_000));
    env.set_formatter(|out, state, value| {
        if let Some(s) = value.as_str() {
            out.write_str(&toml_escaped(s))?;
            Ok(())
        } else if value.kind() == minijinja::value::ValueKind::Bool {
            // TOML's spelling, not Python's (`True`): `trace_dat = {{ flag }}`.
            out.write_str(if value.is_true() { "true" } else { "false" })?;
            Ok(())
        } else {
            minijinja::escape_formatter(out, state, value)
        }
    });
    env.render_str(raw, ctx).map_err(|e| {
        let span = e
            .range()
            .or_else(|| e.line().map(|line| line_span(raw, line)));
        let mut msg = e
            .detail()
            .map_or_else(|| e.kind().to_string(), str::to_string);
        if e.kind() == minijinja::ErrorKind::UndefinedError {
            msg = format!("template uses an undefined variable: {msg}");
        }
        (span, msg)
    })
}

/// `s` as it may appear in TOML text: inside a basic string (`"..."`) it reads
/// back as exactly `s`; outside of one it cannot be a key, a separator or the end
/// of a string. Letters, digits, space and `_.:/-+@()*!?<>&|~^%$;` stay as they
/// are; every other character (quotes, backslash, `,`, `=`, brackets, braces,
/// `#`, control characters) becomes a `\uXXXX` escape. A param is a value,
/// never TOML syntax (`--set 'ev=x", filter = "..."'` adds no key).
pub(crate) fn toml_escaped(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if (c.is_alphanumeric() && !c.is_control()) || " _.:/-+@()*!?<>&|~^%$;".contains(c) {
            out.push(c);
        } else if u32::from(c) <= 0xFFFF {
            let _ = write!(out, "\\u{:04X}", u32::from(c));
        } else {
            let _ = write!(out, "\\U{:08X}", u32::from(c));
        }
    }
    out
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

/// The value of `--set NAME=value` for parameter `def`: of its declared type, or of
/// the type of its plain default.
fn set_value(def: &ParamDef, value: &str) -> Result<ParamValue, String> {
    if value.chars().any(char::is_control) {
        return Err(format!("the value {value:?} contains a control character"));
    }
    let kind = def.kind.or(match &def.value {
        Some(ParamValue::Int(_)) => Some(ParamType::Int),
        Some(ParamValue::Bool(_)) => Some(ParamType::Bool),
        Some(ParamValue::Str(_)) => Some(ParamType::String),
        Some(ParamValue::Float(_)) => None,
        None => Some(ParamType::String),
    });
    let bad = |kind: ParamType| {
        let whose = if def.kind.is_some() {
            "as the parameter's type says"
        } else {
            "as the recipe's default is"
        };
        format!("`{value}` is not {}, {whose}", type_words(kind))
    };
    Ok(match kind {
        Some(ParamType::Int) => ParamValue::Int(value.parse().map_err(|_| bad(ParamType::Int))?),
        Some(ParamType::Bool) => ParamValue::Bool(value.parse().map_err(|_| bad(ParamType::Bool))?),
        Some(ParamType::Duration) => {
            crate::recipe::parse_duration(value).map_err(|_| bad(ParamType::Duration))?;
            ParamValue::Str(value.to_string())
        }
        Some(ParamType::String) => ParamValue::Str(value.to_string()),
        None => ParamValue::Float(
            value
                .parse()
                .map_err(|_| format!("`{value}` is not a number, as the recipe's default is"))?,
        ),
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

#[cfg(test)]
mod tests {
    use super::Builtins;

    /// A `--set` value is a value: quotes in it cannot close the string it is
    /// placed in and add a key (here a filter) to the recipe.
    #[test]
    fn a_param_cannot_add_a_key() {
        let raw = "name = \"p\"\n[params]\nev = \"sched:sched_switch\"\n[[events]]\nname = \"{{ ev }}\"\n";
        let set = "ev=sched:sched_process_exit\", filter = \"common_pid == 4242".to_string();
        let loaded = crate::recipe::load_str(
            std::path::Path::new("p.toml"),
            raw,
            &[set],
            &Builtins::default(),
        )
        .expect("the value stays one string");
        let ev = &loaded.recipe.events[0];
        assert_eq!(
            ev.name,
            "sched:sched_process_exit\", filter = \"common_pid == 4242"
        );
        assert!(ev.filter.is_none(), "a param added a filter: {ev:?}");
    }

    /// A boolean param renders as TOML spells it: `trace_dat = {{ flag }}`
    /// reads back as the boolean, whether `flag` is the default or `--set`.
    #[test]
    fn a_boolean_param_renders_as_a_toml_boolean() {
        let raw = "name = \"p\"\n[params]\nflag = false\n[output]\ntrace_dat = {{ flag }}\n";
        for (sets, want) in [(vec![], false), (vec!["flag=true".to_string()], true)] {
            let loaded = crate::recipe::load_str(
                std::path::Path::new("p.toml"),
                raw,
                &sets,
                &Builtins::default(),
            )
            .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(loaded.recipe.output.trace_dat, Some(want));
        }
    }

    /// A template within its fuel whose single instructions allocate
    /// gigabytes (`'x' * 100000000`, then `~` doubling it) or render past
    /// the size limit stops with an error naming the budget; a template
    /// error keeps its span; plain text and a small template render.
    #[test]
    fn templates_are_bounded_in_memory_and_output_not_only_fuel() {
        let ctx = std::collections::BTreeMap::new();
        let bomb = "name = \"{% set a = 'x' * 100000000 %}{% set b = a ~ a ~ a ~ a %}\
{% set c = b ~ b ~ b ~ b %}{{ c | length }}\"\n";
        let e = super::render(bomb, &ctx, 0).unwrap_err();
        let shown = format!("{:?}", e);
        assert!(
            shown.contains("rendering the recipe stopped")
                && shown.contains("more than 256 MiB of memory"),
            "{shown}"
        );
        let wide = "name = \"{{ 'x' * 2000000 }}\"\n";
        let shown = format!("{:?}", super::render(wide, &ctx, 0).unwrap_err());
        assert!(
            shown.contains("the rendered recipe is over the limit of 1048576 bytes"),
            "{shown}"
        );
        let undefined = "name = \"{{ nope }}\"\n";
        let e = super::render(undefined, &ctx, 0).unwrap_err();
        assert_eq!(e[0].span, Some(11..15), "{e:?}");
        let n = "name = \"{{ 6 * 7 }}\"\n";
        assert_eq!(super::render(n, &ctx, 0).unwrap(), "name = \"42\"\n");
        assert_eq!(
            super::render("a = {b = 1}\n", &ctx, 0).unwrap(),
            "a = {b = 1}\n"
        );
    }

    #[test]
    fn escaped_text_reads_back_as_itself_in_a_basic_string() {
        for s in ["a\"b", "x\\y", "[t]", "k = v, w = {}", "é ✓ 🦀", "#c'"] {
            let doc: toml::Table = format!("v = \"{}\"", super::toml_escaped(s))
                .parse()
                .unwrap();
            assert_eq!(doc["v"].as_str(), Some(s));
        }
    }
}
