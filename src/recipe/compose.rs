//! Composition: the `extends` chain of a recipe and how its files merge.
//!
//! A recipe may name one base with `extends = "PATH"` (relative to its own
//! folder); the base may extend another, at most [`MAX_DEPTH`] deep, never in a
//! cycle. Each file is rendered on its own with the chain's merged parameters,
//! parsed at its offset in one [`Source`] (the recipe first, then its bases), and
//! the parsed tables are merged base first:
//!
//! - tables (`[buffer]`, `[scope]`, `[params]`, `options = {...}`, ...) merge key
//!   by key, the later file's value winning;
//! - `[[events]]`, `[[kprobes]]`, `[[uprobes]]`, `[[triggers]]`, `[[expect]]` and
//!   `[[answer]]` entries whose identity ([`identity`]) matches one of the base's replace it
//!   in place; the others are appended;
//! - everything else (strings, numbers, plain arrays) is replaced.
//!
//! Every key keeps the span it had in its own file, so diagnostics and
//! `check --explain` point into the file that set it.

use std::ops::Range;
use std::path::{Path, PathBuf};

use toml_edit::{ArrayOfTables, Item, Table, Value};

use super::render::{self, RawHead};
use super::spans::parse_at;
use crate::diagnostic::{Diagnostic, Source, SourcePart};

/// Most `extends` steps from a recipe to its last base.
pub(crate) const MAX_DEPTH: usize = 8;

/// One file of a chain as read from disk.
#[derive(Debug, Clone)]
pub(crate) struct ChainFile {
    /// The path as resolved (the recipe's as given; a base's joined to its
    /// extender's folder).
    pub(crate) path: PathBuf,
    /// The raw text.
    pub(crate) raw: String,
    /// It lies outside the folder of the recipe that was run: diagnostics in it
    /// name it but never show its content.
    pub(crate) foreign: bool,
}

/// Where the bases of a recipe's `extends` chain are read from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Chain {
    /// From the paths `extends` names, relative to the folder of the file that names them.
    #[default]
    Extends,
    /// From a run folder (or an unpacked bundle) whose recipe is
    /// `recipe.source.toml`: the N-th base is the folder's `recipe.base-N.toml`
    /// (see [`run_files`]), whatever path its `extends` names.
    Stored,
    /// None: the file alone, its `extends` not followed (`report --answer`
    /// reads the `[[answer]]` tables of the one file it is given, and no
    /// other file).
    Alone,
}

/// Reads the chain of `path`: the recipe first, then each base in turn (from
/// where `chain` says).
/// Errors: `Err(Ok(io))` when the recipe itself cannot be read; `Err(Err((source,
/// diagnostics)))` for a base that cannot be read, a cycle or a chain deeper than
/// [`MAX_DEPTH`], each at the `extends` value that causes it.
#[allow(clippy::type_complexity)]
pub(crate) fn read_chain(
    path: &Path,
    raw: String,
    chain: Chain,
) -> Result<(Vec<ChainFile>, Vec<RawHead>), (Source, Vec<Diagnostic>)> {
    let mut files = vec![ChainFile {
        path: path.to_path_buf(),
        raw,
        foreign: false,
    }];
    let folder = path.parent().unwrap_or(Path::new(""));
    // The recipe's tree: its own folder, never widened (a base it names outside
    // it is read, yet foreign: its content is never shown).
    let root = canonical_folder(path);
    let mut heads = vec![render::raw_head(&files[0].raw, 0)];
    let mut seen = vec![std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())];
    loop {
        let last = files.len() - 1;
        let Some((name, span)) = heads[last].extends.clone() else {
            break;
        };
        if chain == Chain::Alone {
            break;
        }
        let fail = |files: &[ChainFile], message: String, help: String| {
            let source = concat(
                files
                    .iter()
                    .map(|f| (f.path.as_path(), f.raw.as_str(), f.foreign)),
            );
            (
                source,
                vec![Diagnostic::recipe(span.clone(), message).with_help(help)],
            )
        };
        let base = match chain {
            Chain::Extends | Chain::Alone => files[last]
                .path
                .parent()
                .unwrap_or(Path::new(""))
                .join(&name),
            Chain::Stored => path
                .parent()
                .unwrap_or(Path::new(""))
                .join(format!("recipe.base-{}.toml", files.len())),
        };
        if files.len() > MAX_DEPTH {
            return Err(fail(
                &files,
                format!("`extends` chain is longer than {MAX_DEPTH} steps"),
                "flatten the chain: let a recipe extend a base that extends nothing".into(),
            ));
        }
        let canonical = std::fs::canonicalize(&base).unwrap_or_else(|_| base.clone());
        if let Some(i) = seen.iter().position(|p| *p == canonical) {
            let cycle: Vec<String> = files[i..]
                .iter()
                .map(|f| f.path.display().to_string())
                .chain([base.display().to_string()])
                .collect();
            return Err(fail(
                &files,
                format!("`extends` makes a cycle: {}", cycle.join(" -> ")),
                "a base must not extend, directly or not, a recipe that extends it".into(),
            ));
        }
        let foreign = root
            .as_ref()
            .is_some_and(|root| !canonical.starts_with(root));
        // Only the recipe you run may name a base outside its folder; a base
        // of the recipe's folder may name one anywhere in it, and a base
        // outside it (foreign) one of its own folder only, so that a base
        // another team wrote cannot reach into a third place.
        let naming_folder = canonical_folder(&files[last].path);
        let refused = match chain {
            Chain::Stored => foreign,
            Chain::Extends if last == 0 => false,
            Chain::Extends if files[last].foreign => !naming_folder
                .as_ref()
                .is_some_and(|f| canonical.starts_with(f)),
            Chain::Extends | Chain::Alone => foreign,
        };
        if refused {
            let why = match chain {
                Chain::Extends if files[last].foreign => format!(
                    "base recipe `{}` lies outside the folder of the base that names it ({}); a base outside the folder of the recipe you run may only extend a file of its own folder",
                    crate::untrusted::escape_path(&base),
                    crate::untrusted::escape_path(
                        naming_folder.as_deref().unwrap_or(Path::new("?"))
                    )
                ),
                Chain::Extends | Chain::Alone => format!(
                    "base recipe `{}` lies outside the folder of the recipe you run ({}); only that recipe may name a base outside it",
                    crate::untrusted::escape_path(&base),
                    crate::untrusted::escape_path(root.as_deref().unwrap_or(folder))
                ),
                Chain::Stored => format!(
                    "stored base `{}` is a symbolic link leading outside its run folder (to {}); its content is not read",
                    crate::untrusted::escape_path(&base),
                    crate::untrusted::escape_path(&canonical)
                ),
            };
            return Err(fail(
                &files,
                why,
                "copy the base into the recipe's folder and name it relative to the recipe".into(),
            ));
        }
        // A stored base is a file of its run folder: one name only, too.
        let read = match chain {
            Chain::Stored => crate::untrusted::member(folder, &base),
            Chain::Extends | Chain::Alone => Ok(()),
        }
        .and_then(|()| crate::untrusted::read_to_string(&base, crate::untrusted::Kind::Recipe));
        let raw = match read {
            Ok(raw) => raw,
            Err(e) => {
                let help = match chain {
                    Chain::Extends | Chain::Alone => {
                        "`extends` is relative to the folder of the file that writes it"
                    }
                    Chain::Stored => {
                        "the run folder or bundle lacks this base: pack it from the output folder of a run"
                    }
                };
                return Err(fail(
                    &files,
                    format!(
                        "cannot read base recipe `{}`: {}",
                        crate::untrusted::escape_path(&base),
                        e.reason()
                    ),
                    help.into(),
                ));
            }
        };
        let offset: usize = files.iter().map(|f| f.raw.len()).sum();
        heads.push(render::raw_head(&raw, offset));
        seen.push(canonical);
        files.push(ChainFile {
            path: base,
            raw,
            foreign,
        });
    }
    Ok((files, heads))
}

/// The folder of file `path`, resolved (symbolic links followed); `None` when
/// it does not resolve.
fn canonical_folder(path: &Path) -> Option<PathBuf> {
    let folder = path.parent().unwrap_or(Path::new(""));
    std::fs::canonicalize(if folder.as_os_str().is_empty() {
        Path::new(".")
    } else {
        folder
    })
    .ok()
}

/// One [`Source`] of texts: the first at offset 0, each next one right after.
pub(crate) fn concat<'a>(texts: impl IntoIterator<Item = (&'a Path, &'a str, bool)>) -> Source {
    let mut source = Source::single(PathBuf::new(), String::new());
    for (i, (path, text, foreign)) in texts.into_iter().enumerate() {
        if i == 0 {
            source.path = path.to_path_buf();
        } else {
            source.parts.push(SourcePart {
                path: path.to_path_buf(),
                start: source.text.len(),
                foreign,
            });
        }
        source.text.push_str(text);
    }
    source
}

/// Parses each rendered file at its offset in `source` and merges them, base
/// first, into one root table whose spans point into `source`.
pub(crate) fn merge_files(source: &Source) -> Result<Table, Vec<Diagnostic>> {
    let mut bounds: Vec<Range<usize>> = Vec::new();
    let mut starts: Vec<usize> = vec![0];
    starts.extend(source.parts.iter().map(|p| p.start));
    for (i, s) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(source.text.len());
        bounds.push(*s..end);
    }
    let mut diagnostics = Vec::new();
    let mut merged: Option<Table> = None;
    for b in bounds.into_iter().rev() {
        match parse_at(&source.text[b.clone()], b.start) {
            Ok(doc) => {
                let table = doc.as_table().clone();
                merged = Some(match merged {
                    None => table,
                    Some(mut base) => {
                        merge_table(&mut base, table, true);
                        base
                    }
                });
            }
            Err(d) => diagnostics.push(d),
        }
    }
    match (merged, diagnostics.is_empty()) {
        (Some(t), true) => Ok(t),
        _ => Err(diagnostics),
    }
}

/// The arrays of entries merged by identity.
const ENTRY_ARRAYS: [&str; 6] = [
    "events", "kprobes", "uprobes", "triggers", "expect", "answer",
];

fn merge_table(base: &mut Table, over: Table, root: bool) {
    let keys: Vec<String> = over.iter().map(|(k, _)| k.to_string()).collect();
    let mut over = over;
    for k in keys {
        let Some((key, item)) = over.remove_entry(&k) else {
            continue;
        };
        let merged = match (base.remove(&k), item) {
            (Some(old), new) if root && ENTRY_ARRAYS.contains(&k.as_str()) => {
                match (entries(old), entries(new)) {
                    (Ok(old), Ok(new)) => Item::ArrayOfTables(merge_entries(&k, old, new)),
                    (_, Ok(new)) => Item::ArrayOfTables(new.into_iter().collect()),
                    (_, Err(new)) => *new,
                }
            }
            (Some(old), new) if is_table(&old) && is_table(&new) => {
                let (mut old, new) = (into_table(old), into_table(new));
                merge_table(&mut old, new, false);
                Item::Table(old)
            }
            (_, new) => new,
        };
        base.insert_formatted(&key, merged);
    }
}

fn is_table(item: &Item) -> bool {
    matches!(item, Item::Table(_) | Item::Value(Value::InlineTable(_)))
}

fn into_table(item: Item) -> Table {
    match item {
        Item::Table(t) => t,
        Item::Value(Value::InlineTable(t)) => t.into_table(),
        _ => Table::new(),
    }
}

/// The entries of an array of tables or an inline array of inline tables; the
/// item back when it is neither (the model's type check reports it).
fn entries(item: Item) -> Result<Vec<Table>, Box<Item>> {
    match item {
        Item::ArrayOfTables(a) => Ok(a.into_iter().collect()),
        Item::Value(Value::Array(a)) if a.iter().all(Value::is_inline_table) => Ok(a
            .into_iter()
            .filter_map(|v| match v {
                Value::InlineTable(t) => Some(t.into_table()),
                _ => None,
            })
            .collect()),
        other => Err(Box::new(other)),
    }
}

fn merge_entries(array: &str, base: Vec<Table>, over: Vec<Table>) -> ArrayOfTables {
    let mut out: Vec<Option<Table>> = base.into_iter().map(Some).collect();
    for t in over {
        let id = identity(array, &t);
        let same: Vec<usize> = out
            .iter()
            .enumerate()
            .filter(|(_, b)| id.is_some() && b.as_ref().and_then(|b| identity(array, b)) == id)
            .map(|(i, _)| i)
            .collect();
        match same.split_first() {
            Some((first, rest)) => {
                out[*first] = Some(t);
                for i in rest {
                    out[*i] = None;
                }
            }
            None => out.push(Some(t)),
        }
    }
    out.into_iter().flatten().collect()
}

/// The identity of an entry of `array`, which an entry of an extending recipe
/// replaces: `[[events]]` its `name`; `[[kprobes]]`/`[[uprobes]]` its `event`;
/// `[[triggers]]` its `event` (or `function`), `action` and `target`;
/// `[[expect]]` what its `that` measures (the text before the comparison, blanks
/// removed: `p99(syscalls:openat)`, `lost_events`); `[[answer]]` its `name`.
/// None when the keys are missing.
fn identity(array: &str, t: &Table) -> Option<String> {
    let s = |k: &str| t.get(k).and_then(Item::as_str).map(str::to_string);
    match array {
        "events" | "answer" => s("name"),
        "kprobes" | "uprobes" => s("event"),
        "triggers" => {
            let on = s("event")
                .map(|e| format!("event {e}"))
                .or_else(|| s("function").map(|f| format!("function {f}")))?;
            Some(format!(
                "{on} {} {}",
                s("action")?,
                s("target").unwrap_or_default()
            ))
        }
        "expect" => {
            let that = s("that")?;
            let cut = that.find(['=', '!', '<', '>']).unwrap_or(that.len());
            Some(that[..cut].split_whitespace().collect())
        }
        _ => None,
    }
}

/// `check --explain`: every effective key of the merged `root`, as `KEY = VALUE`
/// and the `FILE:LINE` that set it, one per line in document order; entries of
/// arrays of tables as `events[0].name`. Keys set by a base outside the
/// recipe's folder (a foreign part of `source`) are not listed, neither key nor
/// value: a last line per such file says how many keys it set.
pub(crate) fn explain(root: &Table, source: &Source) -> String {
    let mut rows: Vec<Row> = Vec::new();
    walk(root, String::new(), source, &mut rows);
    let (rows, hidden): (Vec<Row>, Vec<Row>) = rows.into_iter().partition(|r| r.foreign.is_none());
    let width = rows
        .iter()
        .map(|r| r.key.len() + r.value.len() + 3)
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for r in rows {
        let kv = format!("{} = {}", r.key, r.value);
        out.push_str(&format!("{kv:width$}  # {}\n", r.place));
    }
    let mut counts: Vec<(PathBuf, usize)> = Vec::new();
    for file in hidden.into_iter().filter_map(|r| r.foreign) {
        match counts.iter_mut().find(|(f, _)| *f == file) {
            Some((_, n)) => *n += 1,
            None => counts.push((file, 1)),
        }
    }
    for (file, n) in counts {
        out.push_str(&format!(
            "# {n} key{} set by {}, outside the folder of the recipe you run: not shown\n",
            if n == 1 { "" } else { "s" },
            crate::untrusted::escape_path(&file)
        ));
    }
    out
}

/// One row of [`explain`].
struct Row {
    /// The key's path (`events[0].name`), escaped.
    key: String,
    /// The value as written.
    value: String,
    /// `FILE:LINE` of the key.
    place: String,
    /// The base outside the recipe's folder that set it: the row is not shown.
    foreign: Option<PathBuf>,
}

fn walk(table: &Table, prefix: String, source: &Source, rows: &mut Vec<Row>) {
    for (k, item) in table.iter() {
        // A quoted key may hold any character: escaped, it cannot drive the
        // terminal nor fake a line of the listing.
        let shown = crate::untrusted::escape(k);
        let path = if prefix.is_empty() {
            shown.into_owned()
        } else {
            format!("{prefix}.{shown}")
        };
        let key_span = table.key(k).and_then(|k| k.span());
        match item {
            Item::Table(t) => walk(t, path, source, rows),
            Item::ArrayOfTables(a) => {
                for (i, t) in a.iter().enumerate() {
                    walk(t, format!("{path}[{i}]"), source, rows);
                }
            }
            Item::Value(v) => {
                let text = v
                    .span()
                    .and_then(|s| source.text.get(s))
                    .map_or_else(|| v.to_string(), |t| t.trim().to_string());
                let at = key_span.or(v.span());
                let place = at.clone().map_or_else(
                    || "?".to_string(),
                    |s| {
                        let p = source.place(s.start);
                        p.rsplit_once(':')
                            .map_or(p.clone(), |(fl, _)| fl.to_string())
                    },
                );
                let part = source.part(at.map(|s| s.start));
                rows.push(Row {
                    key: path,
                    value: text,
                    place,
                    foreign: part.foreign.then(|| part.path.to_path_buf()),
                });
            }
            Item::None => {}
        }
    }
}

/// The recipe files a run folder (and so a bundle) carries, as `(name, bytes)`:
/// `recipe.toml`, the recipe as rendered (for a recipe that extends others, the
/// merged recipe with `extends` dropped, so it stands alone); `recipe.source.toml`,
/// the recipe as written; `recipe.base-N.toml`, the N-th file of its `extends`
/// chain as written (1 is the base the recipe names). The files as written are
/// the bytes read when the recipe was loaded ([`Source::written`]), never read
/// again: a file swapped since (a link to a host file, a FIFO) changes nothing.
pub(crate) fn run_files(source: &Source, recipe: &super::Recipe) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    if source.parts.is_empty() {
        out.push(("recipe.toml".to_string(), source.text.clone().into_bytes()));
    } else {
        let mut merged = recipe.clone();
        merged.extends = None;
        let mut text = format!(
            "# `{}` merged with {}\n",
            source.path.display(),
            source
                .parts
                .iter()
                .map(|p| format!("`{}`", p.path.display()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        text.push_str(&toml::to_string(&merged).unwrap_or_default());
        out.push(("recipe.toml".to_string(), text.into_bytes()));
    }
    for (i, raw) in source.written.iter().enumerate() {
        let name = match i {
            0 => "recipe.source.toml".to_string(),
            i => format!("recipe.base-{i}.toml"),
        };
        out.push((name, raw.clone().into_bytes()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files a run stores are the bytes read when the recipe was loaded:
    /// a recipe or base swapped for a link to a host file between the load
    /// and the run's start is not read again (before: the run folder got the
    /// host file's content).
    #[test]
    fn run_files_are_the_bytes_loaded_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "TOP-SECRET\n").unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let base = "[[events]]\nname = \"sched:sched_switch\"\n";
        let own = "extends = \"base.toml\"\nname = \"r\"\n";
        std::fs::write(run.join("base.toml"), base).unwrap();
        std::fs::write(run.join("r.toml"), own).unwrap();
        let loaded = crate::recipe::load(
            &run.join("r.toml"),
            &[],
            &crate::recipe::Builtins::default(),
        )
        .unwrap();
        for name in ["r.toml", "base.toml"] {
            std::fs::remove_file(run.join(name)).unwrap();
            std::os::unix::fs::symlink(&secret, run.join(name)).unwrap();
        }
        let files = run_files(&loaded.source, &loaded.recipe);
        let get = |n: &str| {
            files
                .iter()
                .find(|(name, _)| name == n)
                .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        };
        assert_eq!(get("recipe.source.toml").as_deref(), Some(own));
        assert_eq!(get("recipe.base-1.toml").as_deref(), Some(base));
        assert!(
            files.iter().all(|(_, b)| !b.starts_with(b"TOP-SECRET")),
            "{files:?}"
        );
    }
}
