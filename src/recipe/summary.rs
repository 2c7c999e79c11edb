//! The summary template of `[output] template` (and `report --template FILE`):
//! a user's minijinja file for summary.txt, read and compiled before a run so
//! that a broken one is a diagnostic at its recipe line. Rendering it (its
//! context is report.json, its filters `dur`, `fixed`, `bar`, ...) and the
//! built-in template are the report stage's: `crate::report` adds
//! `Template::builtin` and `Template::render`.

use std::path::{Path, PathBuf};

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
    /// The file it was read from (`<built-in>` for the default).
    pub(crate) path: PathBuf,
    /// Its minijinja source.
    pub(crate) source: String,
}

impl Template {
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
    ///
    /// A plain environment compiles as the report's does: minijinja looks
    /// filters up only when rendering, and the report's environment changes
    /// no syntax setting.
    pub(crate) fn check(&self) -> Result<(), TemplateError> {
        minijinja::Environment::new()
            .template_from_str(&self.source)
            .map(|_| ())
            .map_err(|e| self.error(e))
    }

    /// `e`, a minijinja error of this template, with its line and what to do.
    pub(crate) fn error(&self, e: minijinja::Error) -> TemplateError {
        TemplateError {
            path: self.path.clone(),
            detail: match e.line() {
                Some(l) => format!("line {l}: {e}"),
                None => e.to_string(),
            },
            help: "fix the template; its context is report.json (schema/report.schema.json)",
        }
    }
}
