//! The check stage: a recipe loaded (render, `extends`, params), its
//! command-line overrides applied, and validated against a kernel's facts,
//! live or from a fact file; then the plan a run of it by this process would
//! apply. What `check` prints and the first half of every `run`; writes nothing.

use std::path::Path;

use crate::diagnostic::{Diagnostic, Source};
use crate::kernel::{FactsError, KernelFacts};
use crate::plan::{Plan, instance_name, plan, probe_group};
use crate::recipe::{Builtins, Chain, LoadError, LoadedRecipe, load_with};
use crate::tracefs::{Tracefs, TracefsError};
use crate::validate::{ValidRecipe, validate};

/// Why a recipe did not pass the check stage.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The kernel's facts could not be read from tracefs.
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    /// The recipe could not be read.
    #[error(transparent)]
    Load(LoadError),
    /// The fact file given to `check --facts` cannot be used.
    #[error(transparent)]
    Facts(#[from] FactsError),
    /// The recipe is invalid for this kernel; nothing was written.
    #[error("{}", crate::diagnostic::render_all(.diagnostics, .text).trim_end())]
    Invalid {
        /// Text the diagnostics point into (boxed: the error stays small).
        text: Box<Source>,
        /// Every problem.
        diagnostics: Vec<Diagnostic>,
    },
}

impl From<LoadError> for CheckError {
    /// A recipe with problems is [`CheckError::Invalid`]; one that could not be
    /// read is [`CheckError::Load`].
    fn from(e: LoadError) -> CheckError {
        match e {
            LoadError::Invalid { text, diagnostics } => CheckError::Invalid {
                text: Box::new(text),
                diagnostics,
            },
            other => CheckError::Load(other),
        }
    }
}

/// Where validation's [`KernelFacts`] come from.
#[derive(Debug, Clone, Copy)]
pub enum FactsFrom<'a> {
    /// Read from this live tracefs (read-only).
    Live(&'a Tracefs),
    /// Loaded from a fact file (`trace-recipe facts -o FILE`); needs no tracefs.
    File(&'a Path),
}

/// Validates a recipe against a kernel's facts: the shared first half of `check` and `run`.
pub fn load_and_validate(
    from: FactsFrom<'_>,
    path: &Path,
    sets: &[String],
    started: &str,
) -> Result<(ValidRecipe, Source, KernelFacts), CheckError> {
    load_and_validate_with(
        from,
        path,
        sets,
        started,
        &Default::default(),
        Chain::Extends,
    )
}

/// [`load_and_validate`] with command-line `overrides` of recipe keys applied
/// before validation (problems of an overridden key name its flag), and the
/// `extends` chain read from where `chain` says.
pub fn load_and_validate_with(
    from: FactsFrom<'_>,
    path: &Path,
    sets: &[String],
    started: &str,
    overrides: &crate::overrides::Overrides,
    chain: Chain,
) -> Result<(ValidRecipe, Source, KernelFacts), CheckError> {
    let loaded = load_with(
        path,
        sets,
        &Builtins {
            started: started.to_string(),
        },
        chain,
    )?;
    validate_loaded(from, loaded, overrides)
}

/// The second half of [`load_and_validate_with`]: a recipe already rendered
/// (`rerun` runs the very render it listed the commands of) with `overrides`
/// applied, validated against the facts `from` gives.
pub fn validate_loaded(
    from: FactsFrom<'_>,
    mut loaded: LoadedRecipe,
    overrides: &crate::overrides::Overrides,
) -> Result<(ValidRecipe, Source, KernelFacts), CheckError> {
    let flag_problems = overrides.apply(&mut loaded);
    let facts = match from {
        FactsFrom::Live(tracefs) => {
            KernelFacts::read_scoped(tracefs, &crate::kernel::Scope::for_recipe(&loaded.recipe))?
        }
        FactsFrom::File(file) => KernelFacts::load(file)?,
    };
    let host = crate::host::HostFacts::gather(&loaded);
    match validate(&loaded, &facts, &host) {
        Ok(valid) if flag_problems.is_empty() => Ok((valid, loaded.source, facts)),
        Ok(_) => Err(CheckError::Invalid {
            text: Box::new(loaded.source),
            diagnostics: flag_problems,
        }),
        Err(diagnostics) => Err(CheckError::Invalid {
            text: Box::new(loaded.source),
            diagnostics: [flag_problems, overrides.name_flags(diagnostics)].concat(),
        }),
    }
}

/// The plan of a run of `valid` by this process, the one function `run` and
/// `check --plan` share. `workload` is the workload's pid, scoped by
/// `set_event_pid` beside `[scope] pids` (`check` passes 0 for "the workload"),
/// unless `[scope] system_wide`. `own` are the run's own thread ids, kept out of the trace unless
/// `[scope] include_self` (`check` passes its own pid for them).
pub fn build_plan(valid: &ValidRecipe, workload: Option<u32>, own: &[u32]) -> Plan {
    let recipe = &valid.recipe;
    let mut pids = recipe.scope.pids.clone();
    pids.extend(workload.filter(|_| !recipe.scope.system_wide));
    plan(
        valid,
        &instance_name(&recipe.name, std::process::id()),
        &probe_group(std::process::id()),
        &pids,
        &crate::workload::pids_with_comm(&recipe.scope.comms),
        own,
    )
}
