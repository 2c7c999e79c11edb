//! `run --duration`, `run --buffer-size-kb` and `run --system-wide`: command-line
//! values that replace the recipe's `duration`, `[buffer] size_kb` and `[scope]
//! system_wide` before validation, so they are checked exactly like the recipe's
//! own keys. A problem with one names the flag
//! (and has no place in the recipe file).

use crate::diagnostic::Diagnostic;
use crate::recipe::LoadedRecipe;
use crate::recipe::parse_duration;

/// Values given on the command line in place of recipe keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--duration`: replaces `duration` (`"500ms"`, `"10s"`, `"2m"`).
    pub duration: Option<String>,
    /// `--buffer-size-kb`: replaces `[buffer] size_kb` (KiB per CPU).
    pub buffer_size_kb: Option<u64>,
    /// `--system-wide`: sets `[scope] system_wide = true`.
    pub system_wide: bool,
}

impl Overrides {
    /// Writes the overrides into `loaded`'s recipe. Returns the problems of
    /// values that cannot stand for their key at all (a duration that does not
    /// parse); those keys are left as the recipe has them.
    pub fn apply(&self, loaded: &mut LoadedRecipe) -> Vec<Diagnostic> {
        let mut problems = Vec::new();
        if let Some(d) = &self.duration {
            match parse_duration(d) {
                Ok(_) => loaded.recipe.duration = Some(d.clone()),
                Err(msg) => problems.push(
                    Diagnostic::recipe(None, format!("`--duration {d}`: {msg}"))
                        .with_help("give a duration such as 500ms, 10s or 2m"),
                ),
            }
        }
        if let Some(kb) = self.buffer_size_kb {
            loaded.recipe.buffer.size_kb = Some(kb);
        }
        if self.system_wide {
            loaded.recipe.scope.system_wide = true;
        }
        problems
    }

    /// Validation's diagnostics with those about the overridden buffer size
    /// and system-wide scope reworded to name the flag, and their place in the recipe (the key the
    /// flag replaced) dropped. (`--duration` never reaches validation unless
    /// [`Overrides::apply`] parsed it, with the same parser.)
    pub fn name_flags(&self, diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
        diagnostics
            .into_iter()
            .map(|mut d| {
                if let Some(kb) = self.buffer_size_kb
                    && d.message.starts_with("buffer size ")
                {
                    d.message = format!("`--buffer-size-kb {kb}`: {}", d.message);
                    d.span = None;
                }
                if self.system_wide && d.message.starts_with("`system_wide = true`") {
                    d.message = format!("`--system-wide`: {}", d.message);
                    d.span = None;
                }
                d
            })
            .collect()
    }
}
