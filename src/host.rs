//! `HostFacts`: what validating a recipe needs from this host besides its
//! kernel — which `[scope] pids` run, where each uprobe target's file and
//! symbol are, the `[output] template` — gathered by [`HostFacts::gather`]
//! before validation, so that `validate` itself does no I/O and can check a
//! recipe against another machine's [`crate::kernel::KernelFacts`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::recipe::LoadedRecipe;
use crate::recipe::Template;

/// Why a uprobe target cannot be resolved on this host: a message and a help line.
pub(crate) type TargetProblem = (String, Option<String>);

/// Facts about this host that validation needs (see the module docs).
#[derive(Debug, Default)]
pub struct HostFacts {
    /// `[scope] pids` that have a /proc entry (are running).
    pub(crate) live_pids: BTreeSet<u32>,
    /// Each uprobe target `PATH:SYMBOL` / `PATH:0xOFFSET` (as written) →
    /// `ABSPATH:0xOFFSET`, or why it cannot be resolved.
    pub(crate) uprobe_targets: BTreeMap<String, Result<String, TargetProblem>>,
    /// The `[output] template`, loaded and compiled, or why it cannot be.
    pub(crate) template: Option<Result<Template, String>>,
    /// Programs of `[collect]` commands that are neither a file nor on PATH.
    pub(crate) missing_programs: BTreeSet<String>,
}

/// `PATH:WHAT` split at its last `:`; `None` unless both parts are non-empty.
pub(crate) fn split_target(target: &str) -> Option<(&str, &str)> {
    target
        .rsplit_once(':')
        .filter(|(f, w)| !f.is_empty() && !w.is_empty())
}

impl HostFacts {
    /// Reads what `loaded` needs from this host: /proc for its pids, the ELF
    /// files its uprobes name (symbol → file offset, see `crate::elf`), its
    /// template file (relative to the recipe's folder). Never fails: every
    /// problem is kept for `validate` to report at its line.
    pub fn gather(loaded: &LoadedRecipe) -> HostFacts {
        let r = &loaded.recipe;
        let live_pids = r
            .scope
            .pids
            .iter()
            .copied()
            .filter(|pid| Path::new(&format!("/proc/{pid}")).exists())
            .collect();
        let uprobe_targets = r
            .uprobes
            .iter()
            .filter_map(|p| {
                let (file, what) = split_target(&p.target)?;
                let resolved = match loaded.stored {
                    true => resolve_stored_target(file, what),
                    false => resolve_user_target(file, what),
                };
                Some((p.target.clone(), resolved))
            })
            .collect();
        let template = r.output.template.as_ref().map(|t| {
            let dir = loaded.source.path.parent().unwrap_or(Path::new("."));
            let path = dir.join(t);
            template_allowed(loaded, dir, &path)?;
            Template::load(&path)
                .and_then(|tpl| tpl.check().map(|()| tpl))
                .map_err(|e| e.to_string())
        });
        let missing_programs = r
            .collect
            .before
            .iter()
            .chain(&r.collect.after)
            .filter_map(|c| c.argv()?.into_iter().next())
            .filter(|p| !crate::workload::resolvable(p))
            .collect();
        HostFacts {
            live_pids,
            uprobe_targets,
            template,
            missing_programs,
        }
    }
}

/// Whether the recipe may read template `path`: one inside the recipe's folder
/// always; one outside it only when the recipe you run names it itself (not a
/// base of its `extends` chain, never a run's stored recipe: a bundle or folder
/// from elsewhere cannot make a run read, print or pack a host file).
fn template_allowed(loaded: &LoadedRecipe, dir: &Path, path: &Path) -> Result<(), String> {
    // A stored recipe's folder is a run folder or bundle: its template must be
    // a member of it (one name only, see `crate::untrusted::member`).
    let within = match loaded.stored {
        true => crate::untrusted::member(dir, path),
        false => crate::untrusted::inside(dir, path),
    };
    match within {
        Ok(()) => return Ok(()),
        Err(e @ crate::untrusted::Refusal::Linked { .. }) => return Err(e.to_string()),
        Err(_) => {}
    }
    let at = loaded
        .spans
        .span(&[
            crate::recipe::PathSeg::from("output"),
            crate::recipe::PathSeg::from("template"),
        ])
        .map_or(0, |s| s.start);
    let in_first_file = loaded.source.parts.first().is_none_or(|p| at < p.start);
    if !loaded.stored && in_first_file {
        return Ok(());
    }
    let whose = match loaded.stored {
        true => "this recipe comes from a bundle or run folder",
        false => "it is named by a base recipe, not by the recipe you run",
    };
    Err(format!(
        "template `{}` lies outside the recipe's folder and {whose}: its content is not read",
        crate::untrusted::escape_path(path)
    ))
}

/// `FILE` made absolute, when it names a regular file (judged by `stat`, never
/// opened).
fn target_file(file: &str) -> Result<std::path::PathBuf, TargetProblem> {
    match std::fs::canonicalize(file) {
        Ok(p) if p.is_file() => Ok(p),
        _ => Err((
            format!("`{}` is not a file", crate::untrusted::escape(file)),
            Some("give the path of an executable or shared library".into()),
        )),
    }
}

/// `0xOFFSET` as a number.
fn hex_offset(what: &str) -> Option<Result<u64, TargetProblem>> {
    let hex = what.strip_prefix("0x")?;
    Some(u64::from_str_radix(hex, 16).map_err(|_| {
        (
            format!("`{}` is not a hex offset", crate::untrusted::escape(what)),
            None,
        )
    }))
}

/// A uprobe target of a run's stored recipe (a bundle's or folder's): checked
/// by name only, never opened — a stored recipe makes trace-recipe read no
/// host file. `FILE:0xOFFSET` naming a regular file is `ABSFILE:0xOFFSET`;
/// `FILE:SYMBOL` is refused (finding the symbol would read the file).
fn resolve_stored_target(file: &str, what: &str) -> Result<String, TargetProblem> {
    let abs = target_file(file)?;
    match hex_offset(what) {
        Some(offset) => Ok(format!("{}:{:#x}", abs.display(), offset?)),
        None => Err((
            format!(
                "uprobe target `{}:{}` comes from a bundle or run folder: its symbol is not looked up, since a stored recipe makes trace-recipe read no host file",
                crate::untrusted::escape(file),
                crate::untrusted::escape(what)
            ),
            Some("`trace-recipe unpack` it and run its recipe.toml as your own recipe, or give the symbol's file offset: PATH:0xOFFSET".into()),
        )),
    }
}

/// `FILE:0xOFFSET` or `FILE:SYMBOL` (its file offset from the ELF symbol table)
/// as `ABSFILE:0xOFFSET`.
fn resolve_user_target(file: &str, what: &str) -> Result<String, TargetProblem> {
    let abs = target_file(file)?;
    let offset = match hex_offset(what) {
        Some(offset) => offset?,
        None => crate::elf::symbol_file_offset(&abs, what).map_err(|e| {
            let help = match &e {
                crate::elf::ElfError::NoSymbol { near, .. } if !near.is_empty() => {
                    let names: Vec<String> = near.iter().map(|n| format!("`{n}`")).collect();
                    format!("did you mean {}?", names.join(", "))
                }
                _ => "give the symbol's file offset instead: PATH:0xOFFSET".to_string(),
            };
            (e.to_string(), Some(help))
        })?,
    };
    Ok(format!("{}:{offset:#x}", abs.display()))
}
