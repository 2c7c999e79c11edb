//! Spans of keys and values in rendered recipe text, looked up by key path.

use std::ops::Range;

use toml_edit::{Document, Item, Table, Value};

/// Parses `text` as TOML whose first byte sits at `offset` of a longer text (a
/// file of an `extends` chain), so every span the document holds is an offset
/// into that longer text. toml_edit has no base offset, so the text is parsed
/// behind `offset` spaces (whitespace TOML ignores).
pub(crate) fn parse_at(text: &str, offset: usize) -> Result<Document<String>, Diagnostic> {
    let mut padded = " ".repeat(offset);
    padded.push_str(text);
    Document::parse(padded)
        .map_err(|e| Diagnostic::recipe(e.span(), e.message().trim_end().to_string()))
}

use crate::diagnostic::Diagnostic;

/// Spans of a key and of its value, where known.
type KeyValueSpans = (Option<Range<usize>>, Option<Range<usize>>);

/// One step of a key path: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathSeg {
    /// A key of a table or inline table.
    Key(String),
    /// An index into an array or array of tables.
    Index(usize),
}

impl From<&str> for PathSeg {
    fn from(k: &str) -> Self {
        PathSeg::Key(k.to_string())
    }
}

impl From<usize> for PathSeg {
    fn from(i: usize) -> Self {
        PathSeg::Index(i)
    }
}

/// Byte ranges of keys and values of a parsed TOML document.
#[derive(Debug, Clone)]
pub(crate) struct SpanIndex {
    root: Table,
}

enum Node<'a> {
    Item(&'a Item),
    Value(&'a Value),
    Table(&'a Table),
}

impl SpanIndex {
    /// The index of an already parsed (or merged) root table.
    pub(crate) fn from_table(root: Table) -> SpanIndex {
        SpanIndex { root }
    }

    /// The root table the spans come from.
    pub(crate) fn root(&self) -> &Table {
        &self.root
    }

    /// The span of the value at `path` (e.g. `["events", 2, "filter"]`).
    pub(crate) fn span(&self, path: &[PathSeg]) -> Option<Range<usize>> {
        self.lookup(path).and_then(|(_, value)| value)
    }

    /// The span of the key at the end of `path`, falling back to its value or the
    /// nearest enclosing entry that has one.
    pub(crate) fn key_span(&self, path: &[PathSeg]) -> Option<Range<usize>> {
        for n in (1..=path.len()).rev() {
            if let Some((key, value)) = self.lookup(&path[..n])
                && let Some(s) = key.or(value)
            {
                return Some(s);
            }
        }
        None
    }

    /// Like [`Self::span`] with segments written inline: `at(&["events".into(), 0.into()])`.
    fn lookup(&self, path: &[PathSeg]) -> Option<KeyValueSpans> {
        let mut node = Node::Table(&self.root);
        let mut key_span = None;
        for seg in path {
            let (next, kspan) = match (seg, node) {
                (PathSeg::Key(k), Node::Table(t)) => {
                    let (key, item) = t.get_key_value(k)?;
                    (Node::Item(item), key.span())
                }
                (PathSeg::Key(k), Node::Item(Item::Table(t))) => {
                    let (key, item) = t.get_key_value(k)?;
                    (Node::Item(item), key.span())
                }
                (PathSeg::Key(k), Node::Item(Item::Value(Value::InlineTable(t))))
                | (PathSeg::Key(k), Node::Value(Value::InlineTable(t))) => {
                    let (key, item) = t.get_key_value(k)?;
                    (Node::Item(item), key.span())
                }
                (PathSeg::Index(i), Node::Item(Item::ArrayOfTables(a))) => {
                    (Node::Table(a.get(*i)?), None)
                }
                (PathSeg::Index(i), Node::Item(Item::Value(Value::Array(a))))
                | (PathSeg::Index(i), Node::Value(Value::Array(a))) => {
                    (Node::Value(a.get(*i)?), None)
                }
                _ => return None,
            };
            node = next;
            key_span = kspan;
        }
        let value_span = match node {
            Node::Item(i) => i.span(),
            Node::Value(v) => v.span(),
            Node::Table(t) => t.span(),
        };
        Some((key_span, value_span))
    }
}

/// Converts a serde_ignored path to key path segments.
pub(crate) fn segments(path: &serde_ignored::Path<'_>) -> Vec<PathSeg> {
    use serde_ignored::Path;
    let mut out = Vec::new();
    let mut p = path;
    loop {
        match p {
            Path::Root => break,
            Path::Seq { parent, index } => {
                out.push(PathSeg::Index(*index));
                p = parent;
            }
            Path::Map { parent, key } => {
                out.push(PathSeg::Key(key.clone()));
                p = parent;
            }
            Path::Some { parent }
            | Path::NewtypeStruct { parent }
            | Path::NewtypeVariant { parent } => p = parent,
        }
    }
    out.reverse();
    out
}

/// `events[2].filter` style display of a key path.
pub(crate) fn display_path(path: &[PathSeg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            PathSeg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            PathSeg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The keys the recipe contract knows at a table path (for "did you mean").
pub(crate) fn known_keys(path: &[PathSeg]) -> Vec<&'static str> {
    let mut keys = path.iter().filter_map(|s| match s {
        PathSeg::Key(k) => Some(k.as_str()),
        PathSeg::Index(_) => None,
    });
    let table = keys.next();
    match (table, keys.next()) {
        (Some("tracer"), Some("hwlat")) => return vec!["width_us", "window_us", "mode"],
        (Some("tracer"), Some("osnoise")) => {
            return vec![
                "period_us",
                "runtime_us",
                "stop_tracing_us",
                "stop_tracing_total_us",
                "cpus",
            ];
        }
        (Some("tracer"), Some("timerlat")) => {
            return vec![
                "period_us",
                "print_stack_us",
                "stop_tracing_us",
                "stop_tracing_total_us",
                "cpus",
            ];
        }
        _ => {}
    }
    match table {
        None => vec![
            "extends",
            "name",
            "description",
            "duration",
            "params",
            "buffer",
            "scope",
            "tracer",
            "kprobes",
            "uprobes",
            "events",
            "triggers",
            "stop",
            "output",
            "expect",
            "collect",
            "answer",
        ],
        Some("collect") => vec!["before", "after", "timeout", "max_output_kb", "required"],
        Some("buffer") => vec!["size_kb", "clock", "cpus", "overwrite", "persistent"],
        Some("scope") => vec![
            "pids",
            "comms",
            "follow_forks",
            "command",
            "system_wide",
            "on_abort",
            "include_self",
        ],
        Some("tracer") => vec![
            "name",
            "functions",
            "notrace",
            "graph_functions",
            "graph_notrace",
            "max_graph_depth",
            "options",
            "thresh_us",
            "function_profile",
            "hwlat",
            "osnoise",
            "timerlat",
        ],
        Some("kprobes") | Some("uprobes") => {
            vec!["event", "kind", "target", "fetch", "filter", "stacktrace"]
        }
        Some("events") => vec!["name", "filter", "stacktrace"],
        Some("answer") => vec![
            "name", "question", "event", "from", "to", "match", "by", "values", "where", "sort",
            "top", "engine",
        ],
        Some("triggers") => vec!["event", "function", "action", "target", "if", "count"],
        Some("stop") => vec!["on_traceoff", "max_size_mb"],
        Some("output") => vec!["dir", "trace_dat", "reports"],
        Some(_) => Vec::new(),
    }
}
