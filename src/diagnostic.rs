//! Diagnostics: problems found in a recipe, each pointing at its place in the file.
//!
//! Every check of `recipe` and `validate` produces [`Diagnostic`]s; `check` prints
//! them all at once, rendered against the [`Source`] they refer to as
//! `FILE:LINE:COL: error: MESSAGE`, the offending line with a caret, a `help:` line
//! that says what to do, and whether the recipe or this kernel is at fault.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::PathBuf;

/// Who is at fault for a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Fault {
    /// The recipe is wrong: a typo, a bad value, an unknown key.
    Recipe,
    /// This kernel lacks something the recipe asks for (an event, a field, a clock, a feature).
    Kernel,
}

/// One problem, with the byte range of the rendered recipe text it refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Who is at fault.
    pub(crate) fault: Fault,
    /// Byte range in [`Source::text`]; `None` when the problem has no place (e.g. a missing key).
    pub(crate) span: Option<Range<usize>>,
    /// What is wrong, as a lowercase fragment with names in backticks.
    pub message: String,
    /// What to do about it.
    pub(crate) help: Option<String>,
}

impl Diagnostic {
    /// A problem of the recipe at `span`.
    pub(crate) fn recipe(span: Option<Range<usize>>, message: impl Into<String>) -> Self {
        Diagnostic {
            fault: Fault::Recipe,
            span,
            message: message.into(),
            help: None,
        }
    }

    /// A problem that comes from this kernel lacking something, at `span`.
    pub(crate) fn kernel(span: Option<Range<usize>>, message: impl Into<String>) -> Self {
        Diagnostic {
            fault: Fault::Kernel,
            span,
            message: message.into(),
            help: None,
        }
    }

    /// The same diagnostic with a `help:` line.
    #[must_use]
    pub(crate) fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Renders the diagnostic against its source: a `FILE:LINE:COL: error (FAULT):
    /// MESSAGE` line (the form editors and CI jump to), then the offending line
    /// with the span underlined and the `help:` line, drawn by annotate-snippets
    /// (which measures tabs and wide characters in display columns).
    pub(crate) fn render(&self, source: &Source) -> String {
        use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};
        let fault = match self.fault {
            Fault::Recipe => "recipe",
            Fault::Kernel => "this kernel",
        };
        let (source, span) = source.part_of(self.span.clone());
        if source.foreign {
            return format!("{}\n", self.foreign_message(&source));
        }
        let source = &source;
        let span = span.as_ref().map(|s| {
            let start = floor_char_boundary(&source.text, s.start.min(source.text.len()));
            // One line at most: the first line of the span, and never empty.
            let line_end = source.text[start..]
                .find('\n')
                .map_or(source.text.len(), |i| start + i);
            let end = floor_char_boundary(&source.text, s.end.clamp(start, line_end));
            start..end
        });
        let place = match &span {
            Some(span) => {
                let (line, col) = source.line_col(span.start);
                format!("{}:{line}:{col}", source.path.display())
            }
            None => source.path.display().to_string(),
        };
        let mut out = format!("{place}: error ({fault}): {}\n", self.message);
        let mut group = Group::with_level(Level::ERROR);
        let has_span = span.is_some();
        if let Some(span) = span {
            group = group.element(
                Snippet::source(source.text.as_str())
                    .line_start(1)
                    .fold(true)
                    .annotation(AnnotationKind::Primary.span(span)),
            );
        }
        if let Some(help) = &self.help {
            group = group.element(Level::HELP.message(help.as_str()));
        }
        if has_span || self.help.is_some() {
            out.push_str(&Renderer::plain().render(&[group]));
            out.push('\n');
        }
        out
    }
}

/// One diagnostic as `check --format json` prints it (schema/check.schema.json).
/// Lines and columns are 1-based; columns count characters; `end_column` is
/// exclusive. All four are `null` when the problem has no place in the file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub(crate) struct JsonDiagnostic {
    /// The recipe file as given on the command line.
    pub(crate) file: String,
    /// Line of the start of the problem.
    pub(crate) line: Option<usize>,
    /// Column of the start.
    pub(crate) column: Option<usize>,
    /// Line of the end.
    pub(crate) end_line: Option<usize>,
    /// Column just past the end.
    pub(crate) end_column: Option<usize>,
    /// Always `error`: every problem `check` reports stops a run.
    pub(crate) severity: String,
    /// `recipe` (fix the recipe) or `kernel` (this kernel lacks it).
    pub(crate) fault: Fault,
    /// What is wrong.
    pub(crate) message: String,
    /// What to do about it.
    pub(crate) help: Option<String>,
    /// The names a `did you mean` in `help` offers, best first (may be empty).
    pub(crate) suggestions: Vec<String>,
}

impl Diagnostic {
    /// What is said of a problem in a file outside the recipe's folder: its name
    /// and that it is refused, never its content (not even a key or value the
    /// message would quote).
    fn foreign_message(&self, source: &Source) -> String {
        format!(
            "{}: error (recipe): this base recipe, outside the folder of the recipe you run, has a problem; its content is not shown\n  = help: check it on its own with `trace-recipe check {}`",
            crate::untrusted::escape_path(&source.path),
            crate::untrusted::escape_path(&source.path)
        )
    }

    /// The diagnostic's place and text as [`JsonDiagnostic`], against `source`.
    pub(crate) fn to_json(&self, source: &Source) -> JsonDiagnostic {
        let (source, span) = source.part_of(self.span.clone());
        let source = &source;
        let place = span.as_ref().map(|s| {
            let start = s.start.min(source.text.len());
            let end = s.end.clamp(start, source.text.len());
            (source.line_col(start), source.line_col(end.max(start)))
        });
        JsonDiagnostic {
            file: source.path.display().to_string(),
            line: place.map(|p| p.0.0),
            column: place.map(|p| p.0.1),
            end_line: place.map(|p| p.1.0),
            end_column: place.map(|p| p.1.1),
            severity: "error".into(),
            fault: self.fault,
            message: if source.foreign {
                "this base recipe, outside the folder of the recipe you run, has a problem; its content is not shown".into()
            } else {
                self.message.clone()
            },
            help: self.help.clone().filter(|_| !source.foreign),
            suggestions: match source.foreign {
                true => Vec::new(),
                false => self.help.as_deref().map(suggestions).unwrap_or_default(),
            },
        }
    }
}

/// The backticked names of a `did you mean `a`, `b`? ` in a help text
/// (the form [`crate::suggest::did_you_mean`] writes).
fn suggestions(help: &str) -> Vec<String> {
    let Some(rest) = help.split("did you mean ").nth(1) else {
        return Vec::new();
    };
    let list = rest.split('?').next().unwrap_or("");
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The text diagnostics point into: the recipe as rendered, and the file it came from.
///
/// A recipe that `extends` others is one text made of every file of its chain,
/// the recipe itself first, each file's text starting at its `SourcePart::start`;
/// a span into a base file is shown against that file, with its own line numbers.
#[derive(Debug, Clone)]
pub struct Source {
    /// The recipe file as given on the command line.
    pub(crate) path: PathBuf,
    /// The rendered recipe text (templates expanded). Line numbers match the file's
    /// because rendering never adds or removes lines.
    pub(crate) text: String,
    /// The files of an `extends` chain after the first (empty for a lone recipe).
    pub(crate) parts: Vec<SourcePart>,
    /// The file lies outside the folder of the recipe that was run (a part
    /// returned by [`Source::part_of`]): its content is never shown.
    pub(crate) foreign: bool,
    /// Each file of the chain as it was read (before rendering), the recipe
    /// first, then its bases in order: what a run stores
    /// (`crate::recipe::run_files`), so no file is read twice. Empty for a
    /// source that was not read from files. Shared: a source is cloned often.
    pub(crate) written: std::sync::Arc<Vec<String>>,
}

/// A base file's place in [`Source::text`].
#[derive(Debug, Clone)]
pub(crate) struct SourcePart {
    /// The base file, as its `extends` line resolves it.
    pub(crate) path: PathBuf,
    /// Byte offset of its first byte in [`Source::text`]; it runs to the next part's start.
    pub(crate) start: usize,
    /// It lies outside the folder of the recipe that was run (see [`Source::foreign`]).
    pub(crate) foreign: bool,
}

impl Source {
    /// A source made of one file.
    pub(crate) fn single(path: impl Into<PathBuf>, text: impl Into<String>) -> Source {
        Source {
            path: path.into(),
            text: text.into(),
            parts: Vec::new(),
            foreign: false,
            written: Default::default(),
        }
    }

    /// The single file `span` points into, with the span made relative to it.
    pub(crate) fn part_of(&self, span: Option<Range<usize>>) -> (Source, Option<Range<usize>>) {
        let first_end = self.parts.first().map_or(self.text.len(), |p| p.start);
        let Some(s) = span else {
            return (Source::single(&self.path, &self.text[..first_end]), None);
        };
        let found = self
            .parts
            .iter()
            .enumerate()
            .rev()
            .find(|(_, p)| p.start <= s.start);
        match found {
            None => (Source::single(&self.path, &self.text[..first_end]), Some(s)),
            Some((i, p)) => {
                let end = self.parts.get(i + 1).map_or(self.text.len(), |n| n.start);
                let shifted = s.start - p.start..s.end.saturating_sub(p.start);
                let mut part = Source::single(&p.path, &self.text[p.start..end]);
                part.foreign = p.foreign;
                (part, Some(shifted))
            }
        }
    }

    /// `FILE:LINE:COL` of byte offset `offset`, in the file it falls in.
    pub(crate) fn place(&self, offset: usize) -> String {
        let (part, span) = self.part_of(Some(offset..offset));
        let (l, c) = part.line_col(span.map_or(0, |s| s.start));
        format!("{}:{l}:{c}", part.path.display())
    }

    /// 1-based line and column (in characters) of byte offset `offset`.
    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..floor_char_boundary(&self.text, offset)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before[line_start..].chars().count() + 1;
        (line, col)
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Renders all diagnostics, followed by a count line.
pub fn render_all(diagnostics: &[Diagnostic], source: &Source) -> String {
    let mut out = String::new();
    for d in diagnostics {
        out.push_str(&d.render(source));
    }
    let n = diagnostics.len();
    let _ = writeln!(
        out,
        "{}: {n} problem{} found",
        source.path.display(),
        if n == 1 { "" } else { "s" }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based() {
        let src = Source::single("r.toml", "a = 1\nbb = \"x\"\n");
        assert_eq!(src.line_col(0), (1, 1));
        assert_eq!(src.line_col(6), (2, 1));
        assert_eq!(src.line_col(11), (2, 6));
        let d = Diagnostic::recipe(Some(11..14), "bad");
        let text = d.render(&src);
        assert!(
            text.starts_with("r.toml:2:6: error (recipe): bad\n"),
            "{text}"
        );
        assert!(text.contains("2 | bb = \"x\"\n  |      ^^^\n"), "{text}");
    }

    #[test]
    fn json_has_place_end_and_suggestions() {
        let src = Source::single("r.toml", "a = 1\nbb = \"x\"\n");
        let d = Diagnostic::kernel(Some(11..14), "no such event `x`")
            .with_help("did you mean `xa`, `xb`? see available_events");
        let j = d.to_json(&src);
        assert_eq!(
            (j.line, j.column, j.end_line, j.end_column),
            (Some(2), Some(6), Some(2), Some(9))
        );
        assert_eq!(j.fault, Fault::Kernel);
        assert_eq!(j.suggestions, ["xa", "xb"]);
        let none = Diagnostic::recipe(None, "the recipe enables no event").to_json(&src);
        assert_eq!((none.line, none.column), (None, None));
        assert!(none.suggestions.is_empty());
    }

    #[test]
    fn carets_line_up_under_tabs_and_wide_characters() {
        let text = "\tname = \"日本:x\"\n".to_string();
        let start = text.find('"').unwrap();
        let src = Source::single("r.toml", text.clone());
        let out = Diagnostic::kernel(Some(start..text.len() - 1), "no such event").render(&src);
        assert!(
            out.starts_with("r.toml:1:9: error (this kernel): no such event\n"),
            "{out}"
        );
        // The tab is drawn as four columns and each CJK character as two, so the
        // carets start under the quote and cover the 8 display columns of `"日本:x"`.
        assert!(
            out.contains("1 |     name = \"日本:x\"\n  |            ^^^^^^^^\n"),
            "{out}"
        );
    }
}
