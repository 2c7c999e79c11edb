//! Recipes by name: the recipe search path, `list` and `show`.
//!
//! `trace-recipe run exec-tree` looks for `exec-tree.toml` in each folder of the
//! search path, in order: `./recipes`, `$XDG_CONFIG_HOME/trace-recipe/recipes`
//! (`~/.config` when unset), `/etc/trace-recipe/recipes`,
//! `/usr/share/trace-recipe/recipes`. `TRACE_RECIPE_PATH` (folders separated by
//! `:`) replaces that list. The first folder that has the file wins; a name found
//! in more than one folder is reported with the one taken. An argument with a
//! `/` or ending in `.toml` is a path, used as it is (so is a name no folder
//! has when a file of that name exists).
//!
//! A recipe describes itself: `description = "..."`, and header comments
//! `# needs: FEATURES` (what a kernel must offer) and `# kernels: 6.1, 6.12`
//! (where the kernel lab proves it), and a `# What to look for:` block.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Serialize;

/// The environment variable that replaces the search path.
pub const PATH_ENV: &str = "TRACE_RECIPE_PATH";

/// The folders searched for recipes by name, in order (see the module docs).
pub fn search_path() -> Vec<PathBuf> {
    if let Some(v) = std::env::var_os(PATH_ENV).filter(|v| !v.is_empty()) {
        return std::env::split_paths(&v)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
    let mut v = vec![PathBuf::from("recipes")];
    v.extend(config.map(|c| c.join("trace-recipe/recipes")));
    v.push(PathBuf::from("/etc/trace-recipe/recipes"));
    v.push(PathBuf::from("/usr/share/trace-recipe/recipes"));
    v
}

/// A recipe argument resolved to a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The file to read.
    pub path: PathBuf,
    /// Other files of the same name further down the search path (not taken).
    pub shadowed: Vec<PathBuf>,
}

impl Resolved {
    /// `note: ...` when the name was found in more than one folder.
    pub fn note(&self) -> Option<String> {
        (!self.shadowed.is_empty()).then(|| {
            let others: Vec<String> = self
                .shadowed
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            format!(
                "note: recipe found in {} places: took {} (first on the search path), not {}",
                self.shadowed.len() + 1,
                self.path.display(),
                others.join(", ")
            )
        })
    }
}

/// Whether `arg` names a file rather than a recipe on the search path.
pub fn is_path(arg: &str) -> bool {
    arg.contains('/') || arg.ends_with(".toml")
}

/// Resolves `arg` against `dirs`: a path as it is, a name to the first
/// `DIR/NAME.toml` that exists, else a file named `arg` in the current folder.
/// Errors: no folder has it (the message lists the
/// folders searched and near names).
pub fn resolve(arg: &Path, dirs: &[PathBuf]) -> Result<Resolved, String> {
    let text = arg.to_string_lossy();
    if is_path(&text) {
        return Ok(Resolved {
            path: arg.to_path_buf(),
            shadowed: Vec::new(),
        });
    }
    let mut found = dirs
        .iter()
        .map(|d| d.join(format!("{text}.toml")))
        .filter(|p| p.is_file());
    match found.next() {
        Some(path) => Ok(Resolved {
            path,
            shadowed: found.collect(),
        }),
        // A file of that name here (no `.toml`, no `/`) is still a path.
        None if arg.is_file() => Ok(Resolved {
            path: arg.to_path_buf(),
            shadowed: Vec::new(),
        }),
        None => {
            let names: Vec<String> = discover(dirs).into_iter().map(|f| f.name).collect();
            let hint = crate::suggest::did_you_mean(&text, names.iter().map(String::as_str), 3);
            let searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            Err(format!(
                "no recipe `{text}`: no `{text}.toml` in {}\n  = help: {hint}see `trace-recipe list`; give a path (with a `/` or ending in `.toml`) for a file elsewhere, or set {PATH_ENV}",
                searched.join(", ")
            ))
        }
    }
}

/// A recipe file found on the search path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// File name without `.toml`.
    pub name: String,
    /// The file taken for that name.
    pub path: PathBuf,
    /// Files of the same name further down the path.
    pub shadowed: Vec<PathBuf>,
}

/// Every `*.toml` in `dirs`, one per name (the first wins), sorted by name.
/// Folders that do not exist or cannot be read are skipped.
pub fn discover(dirs: &[PathBuf]) -> Vec<Found> {
    let mut out: Vec<Found> = Vec::new();
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        for path in files {
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            match out.iter_mut().find(|f| f.name == name) {
                Some(f) => f.shadowed.push(path),
                None => out.push(Found {
                    name: name.to_string(),
                    path,
                    shadowed: Vec::new(),
                }),
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// What a recipe says about itself in its text (read without rendering it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Header {
    /// `description = "..."`.
    pub description: Option<String>,
    /// The `# needs:` comment, continuation lines joined.
    pub needs: Option<String>,
    /// The `# kernels:` comment, split at commas.
    pub kernels: Vec<String>,
}

/// Reads [`Header`] from recipe text.
pub fn header(text: &str) -> Header {
    let mut h = Header::default();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("# needs:") {
            let mut needs = rest.trim().to_string();
            // Continuation: further non-empty comment lines that start no other key.
            while let Some(next) = lines.peek() {
                let Some(more) = next.strip_prefix("# ") else {
                    break;
                };
                if more.trim().is_empty()
                    || more.starts_with("kernels:")
                    || more.starts_with("What to look for")
                {
                    break;
                }
                needs.push(' ');
                needs.push_str(more.trim());
                lines.next();
            }
            h.needs = Some(needs);
        } else if let Some(rest) = line.strip_prefix("# kernels:") {
            h.kernels = rest
                .split(',')
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty())
                .collect();
        } else if line.starts_with("description") && h.description.is_none() {
            h.description = toml::from_str::<toml::Table>(line)
                .ok()
                .and_then(|t| t.get("description")?.as_str().map(str::to_string));
        }
    }
    h
}

/// One recipe of `list --format json`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ListEntry {
    /// The name to give `run`, `check` and `show`.
    pub name: String,
    /// The file taken for that name.
    pub path: String,
    /// Files of the same name further down the search path, not taken.
    pub shadowed: Vec<String>,
    /// The recipe's `description`.
    pub description: Option<String>,
    /// What a kernel must offer (`# needs:`), when the recipe says.
    pub needs: Option<String>,
    /// Kernels the kernel lab proves it on (`# kernels:`).
    pub kernels: Vec<String>,
    /// Whether `check` passes on this kernel.
    pub passes_check: bool,
    /// `check`'s problems on this kernel (each `FILE:LINE:COL: error (...)` line),
    /// or why the file could not be read.
    pub problems: Vec<String>,
}

/// `list --format json`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ListJson {
    /// Layout version.
    pub format_version: u32,
    /// The folders searched, in order.
    pub search_path: Vec<String>,
    /// Every recipe found, by name.
    pub recipes: Vec<ListEntry>,
}

/// The `list` entry of `found`; `check` is this kernel's verdict on the file:
/// `Ok(())` or the problems.
pub fn entry(found: &Found, check: Result<(), Vec<String>>) -> ListEntry {
    let text = std::fs::read_to_string(&found.path).unwrap_or_default();
    let h = header(&text);
    let (passes_check, problems) = match check {
        Ok(()) => (true, Vec::new()),
        Err(p) => (false, p),
    };
    ListEntry {
        name: found.name.clone(),
        path: found.path.display().to_string(),
        shadowed: found
            .shadowed
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        description: h.description,
        needs: h.needs,
        kernels: h.kernels,
        passes_check,
        problems,
    }
}

/// `list` as text: one block per recipe; names, kernels and paths
/// [escaped](crate::untrusted::escape) (a description, which may run over
/// lines, is escaped as text where it is printed).
pub fn list_text(l: &ListJson) -> String {
    use crate::untrusted::escape;
    use std::fmt::Write as _;
    let mut o = String::new();
    for r in &l.recipes {
        let verdict = if r.passes_check {
            "passes check here"
        } else {
            "does NOT pass check here"
        };
        let _ = writeln!(o, "{}  ({verdict})", escape(&r.name));
        if let Some(d) = &r.description {
            let _ = writeln!(o, "    {d}");
        }
        if let Some(n) = &r.needs {
            let _ = writeln!(o, "    needs: {n}");
        }
        if !r.kernels.is_empty() {
            let kernels: Vec<_> = r.kernels.iter().map(|k| escape(k)).collect();
            let _ = writeln!(o, "    kernels: {}", kernels.join(", "));
        }
        let _ = writeln!(o, "    file: {}", escape(&r.path));
        for p in r.problems.iter().take(3) {
            let _ = writeln!(o, "    problem: {p}");
        }
    }
    if l.recipes.is_empty() {
        let _ = writeln!(o, "no recipes found in {}", l.search_path.join(", "));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_folder_wins_and_the_others_are_named() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::write(a.path().join("x.toml"), "name = \"x\"\n").unwrap();
        std::fs::write(b.path().join("x.toml"), "name = \"x\"\n").unwrap();
        std::fs::write(b.path().join("y.toml"), "name = \"y\"\n").unwrap();
        let dirs = vec![
            a.path().to_path_buf(),
            PathBuf::from("/nonexistent"),
            b.path().to_path_buf(),
        ];
        let r = resolve(Path::new("x"), &dirs).unwrap();
        assert_eq!(r.path, a.path().join("x.toml"));
        assert_eq!(r.shadowed, vec![b.path().join("x.toml")]);
        assert!(r.note().unwrap().contains("took"));
        assert_eq!(
            resolve(Path::new("y"), &dirs).unwrap().path,
            b.path().join("y.toml")
        );
        let err = resolve(Path::new("xx"), &dirs).unwrap_err();
        assert!(
            err.contains("no recipe `xx`") && err.contains("did you mean `x`"),
            "{err}"
        );
        // A path is used as it is, even when it does not exist.
        assert_eq!(
            resolve(Path::new("x.toml"), &dirs).unwrap().path,
            PathBuf::from("x.toml")
        );
        let found = discover(&dirs);
        assert_eq!(
            found.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
            ["x", "y"]
        );
        assert_eq!(found[0].shadowed.len(), 1);
    }

    #[test]
    fn header_reads_description_needs_and_kernels() {
        let h = header(
            "# title\n# needs: function_graph (CONFIG_X); 6.1 at the top level,\n# where it restores files\n# kernels: 6.1, 6.12\n#\nname = \"a\"\ndescription = \"What \\\"it\\\" does\"\n",
        );
        assert_eq!(
            h.needs.as_deref(),
            Some("function_graph (CONFIG_X); 6.1 at the top level, where it restores files")
        );
        assert_eq!(h.kernels, ["6.1", "6.12"]);
        assert_eq!(h.description.as_deref(), Some("What \"it\" does"));
    }
}
