//! Recipes: template rendering, TOML parsing with spans, and the serde model;
//! and the summary [`Template`] a recipe's `[output] template` names.
//!
//! The passes, in order (each returns every problem it finds, and the next pass
//! runs only when the previous one found none):
//!
//! 1. **render** (`render`): `[params]` (and `name`) are read from the raw file,
//!    `--set KEY=VALUE` overrides them, and minijinja expands `{{ ... }}` with
//!    strict undefined variables. Rendering never adds lines, so line numbers
//!    in later diagnostics match the file.
//! 2. **parse**: the rendered text is parsed as TOML into `Recipe`; unknown keys
//!    anywhere are collected (not just the first) and reported at their key.
//! 3. **validate** (module `validate`): checks against the recipe alone and against
//!    `KernelFacts`.
//!
//! Nothing here touches the kernel.

mod answer;
mod compose;
mod model;
mod render;
mod spans;
mod summary;

use std::collections::BTreeMap;
use std::path::Path;

pub(crate) use answer::{
    Answer, AnswerBy, AnswerEngine, AnswerSort, AnswerValue, FieldRef, LatencyStat, SortKey,
};
pub(crate) use compose::{Chain, explain, run_files};
pub(crate) use model::{
    Collect, Event, OnAbort, ParamType, ParamValue, Probe, Recipe, Rotate, Stack, Tracer, Trigger,
    parse_duration,
};
pub use render::Builtins;
pub(crate) use spans::{PathSeg, SpanIndex};
pub use summary::{Template, TemplateError};

use crate::diagnostic::{Diagnostic, Source};

/// A parsed recipe together with its rendered text and the spans of its keys.
#[derive(Debug, Clone)]
pub struct LoadedRecipe {
    /// The rendered text and the file it came from.
    pub source: Source,
    /// The parsed model.
    pub(crate) recipe: Recipe,
    /// Byte ranges of keys and values in `source.text`.
    pub(crate) spans: SpanIndex,
    /// Problems that do not stop validation (unknown keys, values of the wrong
    /// type, left out of `recipe`); `validate` reports them together with its own.
    pub(crate) problems: Vec<Diagnostic>,
    /// The value of every parameter the recipe was rendered with: `[params]`
    /// of the chain, then `--set` (what `rerun` must pass to render it alike).
    pub(crate) params: BTreeMap<String, ParamValue>,
    /// It is a run's stored recipe (a bundle's or output folder's, loaded with
    /// [`Chain::Stored`]): it came from elsewhere and may read no host file.
    pub(crate) stored: bool,
}

/// Why a recipe could not be loaded: the file could not be read, or it has problems.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The recipe file could not be read.
    #[error("cannot read recipe `{path}`: {source}")]
    Read {
        /// The recipe path.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Rendering or parsing found problems; render them against `source`.
    #[error("{}", crate::diagnostic::render_all(.diagnostics, .text).trim_end())]
    Invalid {
        /// The text the diagnostics point into.
        text: Source,
        /// Every problem found (never empty).
        diagnostics: Vec<Diagnostic>,
    },
}

/// Reads, renders and parses the recipe at `path`, with every file it `extends`.
///
/// `sets` are the `--set KEY=VALUE` overrides. Errors: [`LoadError::Read`] when the
/// file cannot be read; [`LoadError::Invalid`] with every chain, template and TOML
/// problem, each in the file it comes from.
pub fn load(path: &Path, sets: &[String], builtins: &Builtins) -> Result<LoadedRecipe, LoadError> {
    load_with(path, sets, builtins, Chain::Extends)
}

/// Like [`load`], with the `extends` chain read from where `chain` says
/// ([`Chain::Stored`]: a run folder's `recipe.base-N.toml`, for `rerun` and
/// `check --against`).
pub(crate) fn load_with(
    path: &Path,
    sets: &[String],
    builtins: &Builtins,
    chain: Chain,
) -> Result<LoadedRecipe, LoadError> {
    let refused = |refusal: crate::untrusted::Refusal| LoadError::Read {
        path: path.to_path_buf(),
        source: refusal.into_io(),
    };
    if chain == Chain::Stored {
        // A run's stored recipe must be a file of its folder, not a link out of it.
        crate::untrusted::member(path.parent().unwrap_or(Path::new(".")), path).map_err(refused)?;
    }
    let raw =
        crate::untrusted::read_to_string(path, crate::untrusted::Kind::Recipe).map_err(refused)?;
    load_text(path, &raw, sets, builtins, chain)
}

/// Like [`load`], for recipe text already in memory (`path` is used in messages
/// and to resolve `extends`).
pub fn load_str(
    path: &Path,
    raw: &str,
    sets: &[String],
    builtins: &Builtins,
) -> Result<LoadedRecipe, LoadError> {
    load_text(path, raw, sets, builtins, Chain::Extends)
}

/// Like [`load_str`], with the `extends` chain read from where `chain` says
/// ([`Chain::Alone`]: not at all).
pub(crate) fn load_text(
    path: &Path,
    raw: &str,
    sets: &[String],
    builtins: &Builtins,
    chain: Chain,
) -> Result<LoadedRecipe, LoadError> {
    let invalid = |text, diagnostics| LoadError::Invalid { text, diagnostics };
    let (files, heads) = compose::read_chain(path, raw.to_string(), chain)
        .map_err(|(text, diagnostics)| invalid(text, diagnostics))?;
    let raw_source = || {
        compose::concat(
            files
                .iter()
                .map(|f| (f.path.as_path(), f.raw.as_str(), f.foreign)),
        )
    };
    let base_first: Vec<&render::RawHead> = heads.iter().rev().collect();
    let params = render::merge_params(&base_first, sets)
        .map_err(|diagnostics| invalid(raw_source(), diagnostics))?;
    let name = heads.iter().find_map(|h| h.name.clone());
    let ctx = render::context(&params, name, builtins);
    let mut rendered = Vec::with_capacity(files.len());
    let mut diagnostics = Vec::new();
    let mut offset = 0;
    for f in &files {
        match render::render(&f.raw, &ctx, offset) {
            Ok(text) => rendered.push(text),
            Err(d) => diagnostics.extend(d),
        }
        offset += f.raw.len();
    }
    if !diagnostics.is_empty() {
        return Err(invalid(raw_source(), diagnostics));
    }
    let mut source = compose::concat(
        files
            .iter()
            .zip(&rendered)
            .map(|(f, text)| (f.path.as_path(), text.as_str(), f.foreign)),
    );
    source.written = std::sync::Arc::new(files.into_iter().map(|f| f.raw).collect());
    let root = compose::merge_files(&source).map_err(|d| invalid(source.clone(), d))?;
    match parse(root) {
        Ok((recipe, spans, problems)) => Ok(LoadedRecipe {
            source,
            recipe,
            spans,
            problems,
            params: params
                .into_iter()
                .filter_map(|(k, d)| Some((k, d.value?)))
                .collect(),
            stored: chain == Chain::Stored,
        }),
        Err(diagnostics) => Err(invalid(source, diagnostics)),
    }
}

/// Deserializes the merged root table. Unknown keys and values of the wrong
/// type are returned beside the recipe (as problems `validate` reports with
/// its own): each value of the wrong type is reported at its place with the
/// accepted form and taken out of the table, so that the next pass finds the
/// next one, and the recipe is what remains. Fails only when what remains does
/// not deserialize (a required key of the wrong type).
fn parse(root: toml_edit::Table) -> Result<(Recipe, SpanIndex, Vec<Diagnostic>), Vec<Diagnostic>> {
    /// Enough passes for any real recipe; past them the rest waits for a rerun.
    const MAX_TYPE_ERRORS: usize = 64;
    let spans = SpanIndex::from_table(root.clone());
    let mut table = root;
    let mut type_errors = Vec::new();
    loop {
        let de = toml_edit::de::Deserializer::from(toml_edit::DocumentMut::from(table.clone()));
        let mut unknown = Vec::new();
        let result: Result<Recipe, _> = serde_ignored::deserialize(de, |path| {
            unknown.push(spans::segments(&path));
        });
        let e = match result {
            // Without the values of the wrong type: validation reports its
            // problems beside them.
            Ok(recipe) => {
                let mut problems = unknown_keys(&spans, &unknown);
                problems.extend(type_errors);
                return Ok((recipe, spans, problems));
            }
            Err(e) => e,
        };
        let key = e
            .span()
            .filter(|_| type_errors.len() < MAX_TYPE_ERRORS)
            .and_then(|span| take_item(&mut table, &span));
        type_errors.push(toml_error(&e, key.as_deref()));
        if key.is_none() {
            let mut diagnostics = unknown_keys(&spans, &unknown);
            diagnostics.extend(type_errors);
            return Err(diagnostics);
        }
    }
}

/// The diagnostics of the unknown keys at `unknown` (key paths).
fn unknown_keys(spans: &SpanIndex, unknown: &[Vec<PathSeg>]) -> Vec<Diagnostic> {
    unknown
        .iter()
        .map(|segs| {
            let key = segs.iter().rev().find_map(|s| match s {
                PathSeg::Key(k) => Some(k.as_str()),
                PathSeg::Index(_) => None,
            });
            let parent = spans::display_path(&segs[..segs.len().saturating_sub(1)]);
            let known = spans::known_keys(&segs[..segs.len().saturating_sub(1)]);
            let mut d = Diagnostic::recipe(
                spans.key_span(segs),
                format!(
                    "unknown key `{}` in {}",
                    key.unwrap_or("?"),
                    if parent.is_empty() {
                        "the recipe".to_string()
                    } else {
                        format!("`{parent}`")
                    }
                ),
            );
            if let Some(key) = key {
                let hint = crate::suggest::did_you_mean(key, known.iter().copied(), 1);
                d = d.with_help(format!("{hint}known keys: {}", known.join(", ")));
            }
            d
        })
        .collect()
}

/// Removes the value whose span is `span` from `table` (at any depth: a key's
/// value, an array element, an entry of an inline table); returns the key it
/// was under, or `None` when no value has that span.
fn take_item(table: &mut toml_edit::Table, span: &std::ops::Range<usize>) -> Option<String> {
    let keys: Vec<String> = table.iter().map(|(k, _)| k.to_string()).collect();
    for key in keys {
        let item = table.get_mut(&key)?;
        if item.span().as_ref() == Some(span) {
            table.remove(&key);
            return Some(key);
        }
        let found = match item {
            toml_edit::Item::Table(t) => take_item(t, span),
            toml_edit::Item::ArrayOfTables(a) => a.iter_mut().find_map(|t| take_item(t, span)),
            toml_edit::Item::Value(v) => take_value(v, span).then(|| key.clone()),
            toml_edit::Item::None => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Removes the element or inline-table entry of `value` whose span is `span`.
fn take_value(value: &mut toml_edit::Value, span: &std::ops::Range<usize>) -> bool {
    match value {
        toml_edit::Value::Array(a) => {
            let at = a.iter().position(|v| v.span().as_ref() == Some(span));
            if let Some(i) = at {
                a.remove(i);
                return true;
            }
            a.iter_mut().any(|v| take_value(v, span))
        }
        toml_edit::Value::InlineTable(t) => {
            let keys: Vec<String> = t.iter().map(|(k, _)| k.to_string()).collect();
            for k in keys {
                if t.get(&k).and_then(|v| v.span()).as_ref() == Some(span) {
                    t.remove(&k);
                    return true;
                }
                if t.get_mut(&k).is_some_and(|v| take_value(v, span)) {
                    return true;
                }
            }
            false
        }
        _ => false,
    }
}

/// A deserialization error as a diagnostic; `key` is the key whose value has
/// the wrong type, when known, for a help line with the accepted form.
fn toml_error(e: &toml_edit::de::Error, key: Option<&str>) -> Diagnostic {
    let message = e.message().trim_end();
    let d = Diagnostic::recipe(
        e.span(),
        match key {
            Some(k) => format!("`{k}`: {message}"),
            None => message.to_string(),
        },
    );
    match key
        .and_then(accepted_form)
        .or_else(|| expected_form(message))
    {
        Some(help) => d.with_help(help),
        None => d,
    }
}

/// The accepted form of a recipe key, by its name (`../shared/design/recipe-format.md`).
fn accepted_form(key: &str) -> Option<String> {
    let form = match key {
        "size_kb" => "`size_kb` is KiB per CPU as an integer: 8192",
        "max_size_mb" => "`max_size_mb` is MiB as an integer: 512",
        "max_output_kb" => "`max_output_kb` is KiB as an integer: 1024",
        "max_lost_percent" => "`max_lost_percent` is a number from 0 to 100: 0.5",
        "duration" | "timeout" => "durations are strings: \"10s\", \"500ms\", \"2m\"",
        "thresh_us" => "`thresh_us` is microseconds as an integer: 100",
        "width_us"
        | "window_us"
        | "period_us"
        | "runtime_us"
        | "stop_tracing_us"
        | "stop_tracing_total_us"
        | "print_stack_us" => "microseconds as an integer, without quotes: 500000",
        "max_graph_depth" | "count" => "an integer: 5",
        "pids" => "`pids` is an array of integers: [1234]",
        "comms" => "`comms` is an array of task names: [\"bash\"]",
        "command" => "`command` is an argv array: [\"make\", \"-j4\"]",
        "by" => {
            "an array of strings: [\"common_comm\", \"errno(ret)\"]; each is a field, `from.FIELD`, common_comm, common_pid, cpu, stack, errno(F), syscall(F), sym(F) or log2(F)"
        }
        "values" => {
            "an array of strings: [\"count\", \"sum(bytes)\"] (an answer's: count, sum(F), min(F), max(F), avg(F), latency; a hist trigger's: field names)"
        }
        "match" => "an array of field names: [\"common_pid\"]",
        "top" => "an integer: 20",
        "engine" => "one of \"auto\", \"kernel\", \"trace\"",
        "functions" | "notrace" | "graph_functions" | "graph_notrace" | "keys" | "reports" => {
            "an array of strings: [\"vfs_*\"]"
        }
        "overwrite" | "follow_forks" | "include_self" | "system_wide" | "stacktrace"
        | "on_traceoff" | "trace_dat" | "bundle" | "required" => "`true` or `false`",
        "name" | "description" | "event" | "kind" | "target" | "filter" | "if" | "action"
        | "clock" | "cpus" | "dir" | "template" | "that" | "extends" | "mode" | "question"
        | "from" | "to" | "where" => "a quoted string: \"...\"",
        _ => return None,
    };
    Some(form.to_string())
}

/// A help line from what serde expected (`expected u64` → an integer).
fn expected_form(message: &str) -> Option<String> {
    let expected = message.rsplit("expected ").next()?;
    let form = if expected.starts_with('u') || expected.starts_with('i') {
        "an integer, without quotes: 8192"
    } else if expected.starts_with("a boolean") {
        "`true` or `false`"
    } else if expected.starts_with("a string") {
        "a quoted string: \"...\""
    } else if expected.starts_with("a sequence") {
        "an array: [...]"
    } else {
        return None;
    };
    Some(form.to_string())
}
