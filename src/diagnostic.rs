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
        let part = source.part(self.span.as_ref().map(|s| s.start));
        if part.foreign {
            return format!("{}\n", self.foreign_message(part.path));
        }
        let text = source.text.as_str();
        let ix = source.index();
        // One line at most: the first line of the span, and never past it.
        let span = self.span.as_ref().map(|s| {
            let start = floor_char_boundary(text, s.start.clamp(part.start, part.end));
            let next = ix.line_starts.partition_point(|&l| l <= start);
            let line_end = ix
                .line_starts
                .get(next)
                .map_or(text.len(), |l| l - 1)
                .min(part.end);
            let end = floor_char_boundary(text, s.end.clamp(start, line_end.max(start)));
            (start..end, line_end.max(start))
        });
        let place = match &span {
            Some((span, _)) => {
                let (line, col) = source.place_in(&part, span.start);
                format!("{}:{line}:{col}", part.path.display())
            }
            None => part.path.display().to_string(),
        };
        let mut out = format!("{place}: error ({fault}): {}\n", self.message);
        let mut group = Group::with_level(Level::ERROR);
        let has_span = span.is_some();
        if let Some((span, line_end)) = span {
            // The span's line (around the span when it is long), numbered as
            // in the file.
            let line_start = ix.line_start(span.start).max(part.start);
            let (from, to) = if line_end - line_start > SHOWN_LINE {
                let from = span.start.saturating_sub(SHOWN_LINE / 2).max(line_start);
                let from = floor_char_boundary(text, from);
                let to = floor_char_boundary(text, line_end.min(from + SHOWN_LINE));
                (from, to.max(span.start))
            } else {
                (line_start, line_end)
            };
            let mark = span.start - from..span.end.clamp(span.start, to) - from;
            #[cfg(test)]
            tests::SHOWN.fetch_add(to - from, std::sync::atomic::Ordering::Relaxed);
            let (line, _) = source.place_in(&part, span.start);
            group = group.element(
                Snippet::source(&text[from..to])
                    .line_start(line)
                    .fold(true)
                    .annotation(AnnotationKind::Primary.span(mark)),
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
    fn foreign_message(&self, path: &std::path::Path) -> String {
        format!(
            "{}: error (recipe): this base recipe, outside the folder of the recipe you run, has a problem; its content is not shown\n  = help: check it on its own with `trace-recipe check {}`",
            crate::untrusted::escape_path(path),
            crate::untrusted::escape_path(path)
        )
    }

    /// The diagnostic's place and text as [`JsonDiagnostic`], against `source`.
    pub(crate) fn to_json(&self, source: &Source) -> JsonDiagnostic {
        let part = source.part(self.span.as_ref().map(|s| s.start));
        let place = self.span.as_ref().map(|s| {
            let start = s.start.clamp(part.start, part.end);
            let end = s.end.clamp(start, part.end);
            (source.place_in(&part, start), source.place_in(&part, end))
        });
        JsonDiagnostic {
            file: part.path.display().to_string(),
            line: place.map(|p| p.0.0),
            column: place.map(|p| p.0.1),
            end_line: place.map(|p| p.1.0),
            end_column: place.map(|p| p.1.1),
            severity: "error".into(),
            fault: self.fault,
            message: if part.foreign {
                "this base recipe, outside the folder of the recipe you run, has a problem; its content is not shown".into()
            } else {
                self.message.clone()
            },
            help: self.help.clone().filter(|_| !part.foreign),
            suggestions: match part.foreign {
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
    /// of an `extends` chain): its content is never shown.
    pub(crate) foreign: bool,
    /// Where lines start, built on first use (the text is complete by then).
    index: Box<std::sync::OnceLock<LineIndex>>,
    /// Each file of the chain as it was read (before rendering), the recipe
    /// first, then its bases in order: what a run stores
    /// (`crate::recipe::run_files`), so no file is read twice. Empty for a
    /// source that was not read from files. Shared: a source is cloned often.
    pub(crate) written: std::sync::Arc<Vec<String>>,
}

/// Line starts and character counts of a text, so that the line and column
/// of any offset cost a binary search and at most [`CHECKPOINT`] bytes of
/// counting: every diagnostic of a check is placed in O(log size), and a
/// check of n problems renders in O(size + n), not O(size × n).
#[derive(Debug, Clone, Default)]
struct LineIndex {
    /// Byte offset of the start of every line after the first.
    line_starts: Vec<usize>,
    /// `(byte offset, characters before it)` at char boundaries about every
    /// [`CHECKPOINT`] bytes, the first at 0.
    checkpoints: Vec<(usize, usize)>,
}

/// Bytes between two [`LineIndex::checkpoints`].
const CHECKPOINT: usize = 4096;

/// Longest stretch of a line shown under a diagnostic, in bytes: a longer
/// line (a hostile one-line recipe) is shown around the span only.
const SHOWN_LINE: usize = 256;

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        let line_starts = memchr_lines(text);
        let mut checkpoints = vec![(0, 0)];
        let mut at = 0;
        let mut chars = 0;
        while at + CHECKPOINT < text.len() {
            let next = floor_char_boundary(text, at + CHECKPOINT).max(at + 1);
            let next = ceil_char_boundary(text, next);
            chars += text[at..next].chars().count();
            checkpoints.push((next, chars));
            at = next;
        }
        LineIndex {
            line_starts,
            checkpoints,
        }
    }

    /// Lines that start at or before `offset`, the first included.
    fn line_of(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&s| s <= offset) + 1
    }

    /// Start of the line `offset` falls in.
    fn line_start(&self, offset: usize) -> usize {
        let i = self.line_starts.partition_point(|&s| s <= offset);
        if i == 0 { 0 } else { self.line_starts[i - 1] }
    }

    /// Characters before byte `offset` (a char boundary) of `text`.
    fn chars_before(&self, text: &str, offset: usize) -> usize {
        let i = self.checkpoints.partition_point(|&(b, _)| b <= offset) - 1;
        let (b, c) = self.checkpoints[i];
        c + text[b..offset].chars().count()
    }
}

/// Offsets just past every `\n` of `text`.
fn memchr_lines(text: &str) -> Vec<usize> {
    text.bytes()
        .enumerate()
        .filter(|(_, b)| *b == b'\n')
        .map(|(i, _)| i + 1)
        .collect()
}

/// One file of a [`Source`], borrowed: its path, where its text starts in
/// the source, and whether its content may be shown.
pub(crate) struct Part<'s> {
    pub(crate) path: &'s std::path::Path,
    start: usize,
    end: usize,
    pub(crate) foreign: bool,
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
            index: Default::default(),
            written: Default::default(),
        }
    }

    fn index(&self) -> &LineIndex {
        self.index.get_or_init(|| LineIndex::new(&self.text))
    }

    /// The file `offset` falls in (the first when `None`).
    pub(crate) fn part(&self, offset: Option<usize>) -> Part<'_> {
        let first_end = self.parts.first().map_or(self.text.len(), |p| p.start);
        let first = Part {
            path: &self.path,
            start: 0,
            end: first_end,
            foreign: self.foreign,
        };
        let Some(offset) = offset else {
            return first;
        };
        let i = self.parts.partition_point(|p| p.start <= offset);
        if i == 0 {
            return first;
        }
        let p = &self.parts[i - 1];
        Part {
            path: &p.path,
            start: p.start,
            end: self.parts.get(i).map_or(self.text.len(), |n| n.start),
            foreign: p.foreign,
        }
    }

    /// 1-based line and column (in characters) of byte `offset` of the
    /// whole text, within `part`.
    fn place_in(&self, part: &Part<'_>, offset: usize) -> (usize, usize) {
        let offset = floor_char_boundary(&self.text, offset.clamp(part.start, part.end));
        let ix = self.index();
        let line = ix.line_of(offset) - ix.line_of(part.start) + 1;
        let start = ix.line_start(offset).max(part.start);
        let col = ix.chars_before(&self.text, offset) - ix.chars_before(&self.text, start) + 1;
        (line, col)
    }

    /// `FILE:LINE:COL` of byte offset `offset`, in the file it falls in.
    pub(crate) fn place(&self, offset: usize) -> String {
        let part = self.part(Some(offset));
        let (l, c) = self.place_in(&part, offset);
        format!("{}:{l}:{c}", part.path.display())
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i.min(s.len())
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

    /// Bytes of source handed to annotate-snippets, over all renders.
    pub(super) static SHOWN: std::sync::atomic::AtomicUsize =
        std::sync::atomic::AtomicUsize::new(0);

    #[test]
    fn line_and_column_are_one_based() {
        let src = Source::single("r.toml", "a = 1\nbb = \"x\"\n");
        let part = src.part(None);
        assert_eq!(src.place_in(&part, 0), (1, 1));
        assert_eq!(src.place_in(&part, 6), (2, 1));
        assert_eq!(src.place_in(&part, 11), (2, 6));
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

    /// Lines and columns from the index agree with counting from the start
    /// of each file, in every file of a chain, across checkpoints and
    /// multi-byte characters.
    #[test]
    fn the_line_index_places_offsets_as_counting_does() {
        let base: String = (0..3000).map(|i| format!("k{i} = \"é{i}日\"\n")).collect();
        let mut src = Source::single("r.toml", "a = 1\nbb = \"x\"\n");
        let start = src.text.len();
        src.text.push_str(&base);
        src.parts.push(SourcePart {
            path: "base.toml".into(),
            start,
            foreign: false,
        });
        let counted = |text: &str, at: usize| {
            let before = &text[..at];
            let line = before.matches('\n').count() + 1;
            let from = before.rfind('\n').map_or(0, |i| i + 1);
            (line, before[from..].chars().count() + 1)
        };
        for at in (0..src.text.len())
            .filter(|i| src.text.is_char_boundary(*i))
            .step_by(7)
        {
            let part = src.part(Some(at));
            let want = counted(&src.text[part.start..part.end], at - part.start);
            assert_eq!(src.place_in(&part, at), want, "at {at}");
        }
    }

    /// 2,000 problems on one 60 KB line render in bounded work and output:
    /// each hands annotate-snippets its own stretch of the line, not the
    /// whole text (2,000 × 60 KB scanned before).
    #[test]
    fn problems_on_a_long_line_show_a_stretch_of_it() {
        let items: Vec<String> = (0..2000)
            .map(|i| format!("{{name = \"nosys:e{i}\"}}"))
            .collect();
        let text = format!("events = [{}]\n", items.join(", "));
        let spans: Vec<_> = (0..2000)
            .map(|i| {
                let at = text.find(&format!("\"nosys:e{i}\"")).unwrap();
                Diagnostic::kernel(Some(at..at + 10), format!("no event e{i}"))
            })
            .collect();
        let src = Source::single("r.toml", text.clone());
        let before = SHOWN.load(std::sync::atomic::Ordering::Relaxed);
        let out = render_all(&spans, &src);
        let shown = SHOWN.load(std::sync::atomic::Ordering::Relaxed) - before;
        assert!(shown < 2000 * 1024, "{shown} bytes of source rendered");
        assert!(out.len() < 2000 * 1024, "{} bytes", out.len());
        let last = text.find("\"nosys:e1999\"").unwrap();
        assert!(
            out.contains(&format!(
                "r.toml:1:{}: error (this kernel): no event e1999\n",
                last + 1
            )),
            "{}",
            &out[out.len() - 2000..]
        );
        assert!(
            out.contains("{name = \"nosys:e1999\"}]"),
            "{}",
            &out[out.len() - 2000..]
        );

        // The same problems one per line: each shows its line only.
        let text: String = items
            .iter()
            .map(|i| format!("[[events]]\n{}\n", &i[1..i.len() - 1]))
            .collect();
        let spans: Vec<_> = (0..2000)
            .map(|i| {
                let at = text.find(&format!("\"nosys:e{i}\"")).unwrap();
                Diagnostic::kernel(Some(at..at + 10), format!("no event e{i}"))
            })
            .collect();
        let src = Source::single("r.toml", text);
        let before = SHOWN.load(std::sync::atomic::Ordering::Relaxed);
        let out = render_all(&spans, &src);
        let shown = SHOWN.load(std::sync::atomic::Ordering::Relaxed) - before;
        assert!(shown < 2000 * 1024, "{shown} bytes of source rendered");
        assert!(
            out.contains("r.toml:4000:8: error (this kernel): no event e1999\n     |\n4000 | name = \"nosys:e1999\"\n"),
            "{}",
            &out[out.len() - 500..]
        );
    }
}
