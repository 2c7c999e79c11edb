//! Recipes: template rendering, TOML parsing with spans, and the serde model.
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

mod compose;
mod model;
mod render;
mod spans;

use std::collections::BTreeMap;
use std::path::Path;

pub(crate) use compose::{Chain, explain, run_files};
pub(crate) use model::{
    Collect, Event, OnAbort, ParamType, ParamValue, Probe, Recipe, Stack, Tracer, Trigger,
    parse_duration,
};
pub use render::Builtins;
pub(crate) use spans::{PathSeg, SpanIndex};

use crate::diagnostic::{Diagnostic, Source};

/// A parsed recipe together with its rendered text and the spans of its keys.
#[derive(Debug)]
pub struct LoadedRecipe {
    /// The rendered text and the file it came from.
    pub source: Source,
    /// The parsed model.
    pub(crate) recipe: Recipe,
    /// Byte ranges of keys and values in `source.text`.
    pub(crate) spans: SpanIndex,
    /// Problems that do not stop validation (unknown keys); `validate` reports
    /// them together with its own.
    pub(crate) problems: Vec<Diagnostic>,
    /// The value of every parameter the recipe was rendered with: `[params]`
    /// of the chain, then `--set` (what `rerun` must pass to render it alike).
    pub(crate) params: BTreeMap<String, ParamValue>,
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
    let raw = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
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

fn load_text(
    path: &Path,
    raw: &str,
    sets: &[String],
    builtins: &Builtins,
    chain: Chain,
) -> Result<LoadedRecipe, LoadError> {
    let invalid = |text, diagnostics| LoadError::Invalid { text, diagnostics };
    let (files, heads) = compose::read_chain(path, raw.to_string(), chain)
        .map_err(|(text, diagnostics)| invalid(text, diagnostics))?;
    let raw_source = || compose::concat(files.iter().map(|f| (f.path.as_path(), f.raw.as_str())));
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
    let source = compose::concat(
        files
            .iter()
            .zip(&rendered)
            .map(|(f, text)| (f.path.as_path(), text.as_str())),
    );
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
        }),
        Err(diagnostics) => Err(invalid(source, diagnostics)),
    }
}

/// Deserializes the merged root table. Unknown keys are returned beside the recipe
/// when it otherwise parsed; a type error fails the parse (with the unknown keys).
fn parse(root: toml_edit::Table) -> Result<(Recipe, SpanIndex, Vec<Diagnostic>), Vec<Diagnostic>> {
    let spans = SpanIndex::from_table(root.clone());
    let de = toml_edit::de::Deserializer::from(toml_edit::DocumentMut::from(root));
    let mut unknown = Vec::new();
    let result: Result<Recipe, _> = serde_ignored::deserialize(de, |path| {
        unknown.push(spans::segments(&path));
    });
    let mut diagnostics: Vec<Diagnostic> = unknown
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
        .collect();
    match result {
        Ok(recipe) => Ok((recipe, spans, diagnostics)),
        Err(e) => {
            diagnostics.push(toml_error(&e));
            Err(diagnostics)
        }
    }
}

fn toml_error(e: &toml_edit::de::Error) -> Diagnostic {
    Diagnostic::recipe(e.span(), e.message().trim_end().to_string())
}

#[cfg(test)]
mod tests;
