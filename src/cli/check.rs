//! `check` (with `--plan`, `--export`, `--explain`, `--facts`, `--against`)
//! and `facts`: what the check stage says about a recipe, and the facts it
//! reads. Read-only.

use std::path::Path;

use super::args::{CheckArgs, CheckFormat, FactsArgs, PlanExport};
use super::{Context, Exit, Failure, find_recipe, started, with_tracefs};
use crate::check::{CheckError, FactsFrom, build_plan, load_and_validate, validate_loaded};
use crate::untrusted::{teprintln, tprint, tprintln};

/// `check RECIPE`: against this kernel or a fact file, or as an exported plan.
pub(super) fn check(a: CheckArgs) -> Exit {
    let CheckArgs {
        recipe,
        sets,
        plan,
        export,
        explain,
        format,
        facts,
        against,
    } = a;
    let recipe = match (against, recipe) {
        (Some(from), _) => return against_cmd(&from, &sets, plan, format),
        (None, None) => return Err(Failure::Usage(None)),
        (None, Some(recipe)) => recipe,
    };
    match find_recipe(&recipe) {
        Some(recipe) if let Some(export) = export => {
            export_cmd(&recipe, &sets, export, facts.as_deref())
        }
        Some(recipe) => {
            if explain && format == CheckFormat::Text {
                print_explain(&recipe, &sets);
            }
            check_live_or_offline(&recipe, &sets, plan, format, facts.as_deref())
        }
        None => {
            if format != CheckFormat::Text {
                let d = crate::diagnostic::Diagnostic::recipe(
                    None,
                    format!("no recipe `{}` on the recipe path", recipe.display()),
                )
                .with_help("see `trace-recipe list`");
                let source = crate::diagnostic::Source::single(recipe.clone(), String::new());
                check_machine(&recipe, format, Err((&[d], &source)), None);
            }
            Err(Failure::Invalid(None))
        }
    }
}

/// What `check --format json` says of a valid recipe: its name, the kernel's
/// release, and the scope note if it has one.
type Valid<'a> = (&'a str, &'a str, Option<crate::validate::ScopeNote>);

/// `check --format json|sarif`: the verdict as one document on stdout.
fn check_machine(
    recipe: &Path,
    format: CheckFormat,
    result: Result<Valid<'_>, (&[crate::diagnostic::Diagnostic], &crate::diagnostic::Source)>,
    against: Option<&crate::replay::AgainstJson>,
) {
    let (diags, source): (&[crate::diagnostic::Diagnostic], crate::diagnostic::Source) =
        match result {
            Ok(_) => (
                &[],
                crate::diagnostic::Source::single(recipe.to_path_buf(), String::new()),
            ),
            Err((d, s)) => (d, s.clone()),
        };
    let text = match format {
        CheckFormat::Sarif => crate::sarif::render(diags, &source),
        _ => crate::output::to_json(&crate::format::CheckJson {
            format_version: crate::output::FORMAT_VERSION,
            file: recipe.display().to_string(),
            ok: result.is_ok(),
            recipe: result.as_ref().ok().map(|r| r.0.to_string()),
            kernel_release: result.as_ref().ok().map(|r| r.1.to_string()),
            scope_note: result.as_ref().ok().and_then(|r| r.2.clone()),
            diagnostics: diags.iter().map(|d| d.to_json(&source)).collect(),
            against: against.cloned(),
        }),
    };
    tprint!("{text}");
}

/// `check --plan --export FORMAT`: the plan `run` would apply (with no
/// workload), as a shell script or a `trace-cmd record` command line on stdout;
/// problems as `check` prints them. Against the running kernel, or offline
/// against `facts_file` as `check` does.
fn export_cmd(
    recipe: &Path,
    sets: &[String],
    format: PlanExport,
    facts_file: Option<&Path>,
) -> Exit {
    with_facts(facts_file, |from| {
        match load_and_validate(from, recipe, sets, &started()) {
            Ok((valid, _, _)) => {
                let p = build_plan(&valid, None, &[]);
                let text = match format {
                    PlanExport::Sh => crate::plan_export::sh(&p, &valid.recipe.name),
                    PlanExport::TraceCmd => Ok(crate::plan_export::trace_cmd(&p, &valid)),
                };
                let script =
                    text.map_err(|e| Failure::failed(Context::new("cannot export this plan", e)))?;
                tprint!("{script}");
                Ok(())
            }
            Err(CheckError::Invalid { text, diagnostics }) => {
                tprint!("{}", crate::diagnostic::render_all(&diagnostics, &text));
                Err(Failure::Invalid(None))
            }
            Err(e) => Err(Failure::failed(e)),
        }
    })
}

/// `check --explain`: the effective keys and where each was set (nothing when the
/// recipe does not load: the check that follows prints why).
fn print_explain(recipe: &Path, sets: &[String]) {
    let builtins = crate::recipe::Builtins { started: started() };
    if let Ok(loaded) = crate::recipe::load(recipe, sets, &builtins) {
        tprint!(
            "{}",
            crate::recipe::explain(loaded.spans.root(), &loaded.source)
        );
    }
}

/// `trace-recipe facts [-o FILE]`: the running kernel's facts as JSON.
pub(super) fn facts(a: FactsArgs) -> Exit {
    with_tracefs(|tracefs| {
        let scope = crate::kernel::Scope {
            btf_all: a.btf,
            ..crate::kernel::Scope::all()
        };
        let facts =
            crate::kernel::KernelFacts::read_scoped(tracefs, &scope).map_err(Failure::failed)?;
        match a.out {
            Some(path) => facts.save(&path).map_err(Failure::failed)?,
            None => tprint!("{}", crate::output::to_json(&facts)),
        }
        Ok(())
    })
}

/// `check`: against the running kernel, or offline against `facts_file` (a
/// fact file or a bundle), which needs neither root nor tracefs.
fn check_live_or_offline(
    recipe: &Path,
    sets: &[String],
    show_plan: bool,
    format: CheckFormat,
    facts_file: Option<&Path>,
) -> Exit {
    with_facts(facts_file, |from| {
        let builtins = crate::recipe::Builtins { started: started() };
        check_with(
            recipe,
            crate::recipe::load(recipe, sets, &builtins),
            show_plan,
            format,
            from,
            None,
        )
    })
}

/// Runs `f` with the facts of `facts_file` (a fact file, an output folder's
/// facts.json or a bundle's), or without one with the running kernel's; an
/// error is [`Failure::Failed`].
fn with_facts(facts_file: Option<&Path>, f: impl FnOnce(FactsFrom<'_>) -> Exit) -> Exit {
    match facts_file {
        Some(file) => {
            // A bundle's facts are its facts.json member, read from a temporary
            // folder; an output folder's, its facts.json.
            let is_bundle = file.to_string_lossy().ends_with(".tar.zst");
            let opened = match is_bundle {
                true => Some(
                    crate::bundle::open(file, &|name| name == "facts.json")
                        .map_err(Failure::failed)?,
                ),
                false => None,
            };
            let path = match &opened {
                Some(o) => o.dir.path().join("facts.json"),
                None if file.is_dir() => file.join("facts.json"),
                None => file.to_path_buf(),
            };
            f(FactsFrom::File(&path))
        }
        None => with_tracefs(|tracefs| f(FactsFrom::Live(tracefs))),
    }
}

/// `check`'s verdict on `recipe` (its chain read as `chain` says) against the
/// facts `from`, printed in `format`; `against` joins the JSON of `check --against`.
fn check_with(
    recipe: &Path,
    loaded: Result<crate::recipe::LoadedRecipe, crate::recipe::LoadError>,
    show_plan: bool,
    format: CheckFormat,
    from: FactsFrom<'_>,
    against: Option<&crate::replay::AgainstJson>,
) -> Exit {
    let checked = loaded
        .map_err(CheckError::from)
        .and_then(|l| validate_loaded(from, l, &Default::default()));
    match checked {
        Ok((valid, _, facts)) if format != CheckFormat::Text => {
            let note = crate::validate::scope_note(&valid);
            check_machine(
                recipe,
                format,
                Ok((&valid.recipe.name, &facts.release, note)),
                against,
            );
            Ok(())
        }
        Ok((valid, _, facts)) => {
            print_valid(recipe, &valid, &facts, from, show_plan);
            Ok(())
        }
        Err(CheckError::Invalid { text, diagnostics }) => {
            match format {
                CheckFormat::Text => {
                    tprint!("{}", crate::diagnostic::render_all(&diagnostics, &text))
                }
                _ => check_machine(recipe, format, Err((&diagnostics, &text)), against),
            }
            Err(Failure::Invalid(None))
        }
        Err(CheckError::Load(e)) => {
            teprintln!("trace-recipe: error: {e}");
            if format != CheckFormat::Text {
                // The file has no text to point into: one problem without a place.
                let d = crate::diagnostic::Diagnostic::recipe(None, e.to_string());
                let source = crate::diagnostic::Source::single(recipe.to_path_buf(), String::new());
                check_machine(recipe, format, Err((&[d], &source)), against);
            }
            Err(Failure::Invalid(None))
        }
        Err(e) => Err(Failure::failed(e)),
    }
}

/// `check`'s text verdict on a valid recipe: the ok line, the notes (top-level
/// files, tracer, offline facts, probes, self-exclusion), what a run cannot
/// undo, and with `show_plan` the plan.
fn print_valid(
    recipe: &Path,
    valid: &crate::validate::ValidRecipe,
    facts: &crate::kernel::KernelFacts,
    from: FactsFrom<'_>,
    show_plan: bool,
) {
    tprintln!(
        "{}: ok: recipe `{}` is valid for kernel {} ({} event{}, {} trigger{}, {} probe{}, tracer {})",
        recipe.display(),
        valid.recipe.name,
        facts.release,
        valid.events.len(),
        if valid.events.len() == 1 { "" } else { "s" },
        valid.triggers.len(),
        if valid.triggers.len() == 1 { "" } else { "s" },
        valid.probes.len(),
        if valid.probes.len() == 1 { "" } else { "s" },
        valid.tracer.as_ref().map_or("nop", |t| t.name.as_str()),
    );
    let workload = (!valid.recipe.scope.command.is_empty()).then_some(0);
    let p = build_plan(valid, workload, &[std::process::id()]);
    let top = p.top_level_files();
    if let Some(t) = valid.tracer.as_ref().filter(|t| t.at_top_level) {
        tprintln!(
            "note: this kernel offers tracer `{}` only at the top level, not in an instance: the run works in the top-level buffer (cleared first), restores the before-image of each of the {} top-level files it writes, and holds {} meanwhile",
            t.name,
            top.len(),
            crate::plan::TOP_LEVEL_LOCK
        );
    } else if !top.is_empty() {
        tprintln!(
            "note: this recipe writes top-level (global) tracefs files: {}; a run restores their before-image and holds {} meanwhile",
            top.join(", "),
            crate::plan::TOP_LEVEL_LOCK
        );
    }
    if let Some(t) = valid
        .tracer
        .as_ref()
        .filter(|t| t.name != "nop" && !t.at_top_level)
    {
        tprintln!(
            "note: whether an instance offers tracer `{}` is not read from the kernel (learning it takes a write); it comes from the {}; `run` finds the real answer in its own instance",
            t.name,
            facts.instance.source
        );
    }
    if let FactsFrom::File(file) = from {
        tprintln!(
            "note: checked offline against the facts in {} (kernel {} {}); pids, comms, files named by uprobes and templates are this host's",
            file.display(),
            facts.release,
            facts.arch
        );
    }
    if !valid.probes.is_empty() {
        tprintln!(
            "note: this recipe defines {} probe{} in the global kprobe_events/uprobe_events, in probe group trace_recipe_PID of its own",
            valid.probes.len(),
            if valid.probes.len() == 1 { "" } else { "s" }
        );
    }
    for i in crate::plan::irreversible(&p, &facts.top_buffer) {
        tprintln!(
            "irreversible: a run of this recipe {} ({}: `{}` -> `{}`)",
            i.effect,
            i.file,
            i.before,
            i.after
        );
    }
    let function_tracer = valid
        .tracer
        .as_ref()
        .is_some_and(|t| t.is_function_tracer());
    tprintln!("note: {}", valid.self_exclusion.describe(function_tracer));
    if let Some(n) = crate::validate::scope_note(valid) {
        tprintln!("note: {}", n.message);
    }
    for a in &valid.answers {
        tprintln!(
            "answer `{}`: {} engine: {}",
            a.answer.name,
            match a.engine {
                crate::answer::EngineUsed::Kernel => "kernel",
                crate::answer::EngineUsed::Trace => "trace",
            },
            a.why
        );
    }
    if show_plan {
        tprintln!(
            "plan (pid 0 stands for the workload's pid, {} for each of the run's own threads):",
            std::process::id()
        );
        for (i, step) in p.steps.iter().enumerate() {
            tprintln!("{:>3}. {step:#}", i + 1);
        }
    }
}

/// `check --against BUNDLE`: the bundle's recipe, with the params it ran with
/// (then `sets`), validated on this kernel like `check`; then the kernel facts
/// that differ from the bundle's and matter to it, and the commands a rerun
/// would start. Read-only. Exit 0 when the recipe is valid here, 1 when not.
fn against_cmd(from: &Path, sets: &[String], show_plan: bool, format: CheckFormat) -> Exit {
    let stored = crate::replay::StoredRun::open(from).map_err(Failure::failed)?;
    let replay = stored.replay(sets, Vec::new());
    let recipe = stored.recipe();
    with_tracefs(|tracefs| {
        // The differences need the recipe (even one invalid here) and both
        // facts; the recipe is the one render the commands are listed from and
        // that is checked.
        let bundle_facts = stored.facts();
        let differences = replay
            .rendered
            .as_ref()
            .ok()
            .zip(bundle_facts.as_ref().ok())
            .map(|(loaded, theirs)| {
                let scope = crate::kernel::Scope::for_recipe(&loaded.recipe);
                crate::kernel::KernelFacts::read_scoped(tracefs, &scope)
                    .map(|here| crate::replay::differences(&loaded.recipe, theirs, &here))
            })
            .transpose()
            .map_err(Failure::failed)?;
        let m = &stored.manifest;
        let asks = replay.rendered.as_ref().map_or_else(
            |_| Vec::new(),
            |l| {
                crate::replay::machine_asks(
                    &l.recipe,
                    crate::replay::online_cpus(),
                    crate::replay::UserSet::default(),
                )
            },
        );
        let json = crate::replay::AgainstJson {
            bundle: from.display().to_string(),
            kernel_release: m.kernel_release.clone(),
            params: replay.sets.clone(),
            differences: differences.clone(),
            commands: replay
                .foreign
                .iter()
                .map(|(what, argv)| crate::replay::ForeignCommand {
                    purpose: what.to_string(),
                    argv: argv.clone(),
                })
                .collect(),
            asks: asks.clone(),
        };
        if format == CheckFormat::Text {
            let m = crate::bundle::ManifestText::of(m);
            tprintln!(
                "{}: recipe `{}` as run on kernel {}{}{}{}",
                crate::untrusted::escape_path(from),
                m.recipe,
                m.kernel_release,
                m.host
                    .as_ref()
                    .map_or(String::new(), |h| format!(" (host {h})")),
                m.started
                    .as_ref()
                    .map_or(String::new(), |t| format!(" at {t}")),
                match replay.sets.is_empty() {
                    true => String::new(),
                    false => format!(", params {}", super::run::sets_text(&replay.sets)),
                }
            );
            let bases = (1..)
                .map(|n| format!("recipe.base-{n}.toml"))
                .take_while(|b| stored.dir.join(b).is_file());
            let files: Vec<String> = [recipe
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()]
            .into_iter()
            .chain(bases)
            .collect();
            tprintln!(
                "note: the run's recipe files are checked in {}{}: {}",
                stored.dir.display(),
                if from.is_dir() {
                    ""
                } else {
                    " (unpacked, removed on exit)"
                },
                files.join(", ")
            );
        }
        let verdict = check_with(
            &recipe,
            replay.rendered,
            show_plan,
            format,
            FactsFrom::Live(tracefs),
            Some(&json),
        );
        if let Err(f @ Failure::Failed(_)) = verdict {
            return Err(f);
        }
        if format == CheckFormat::Text {
            match (&differences, &bundle_facts) {
                (Some(d), Ok(theirs)) => tprint!("{}", crate::replay::differences_text(theirs, d)),
                (_, Err(e)) => tprintln!("note: no kernel facts to compare with: {e}"),
                (None, Ok(_)) => {}
            }
            if !replay.foreign.is_empty() {
                tprintln!(
                    "commands a rerun starts that come from the bundle (`rerun --allow-commands` agrees to them):"
                );
                tprint!("{}", crate::replay::commands_text(&replay.foreign));
            }
            if !asks.is_empty() {
                tprintln!(
                    "what a rerun takes of this machine beyond the modest defaults (`rerun --allow-resources` agrees to it):"
                );
                tprint!("{}", crate::replay::asks_text(&asks));
            }
        }
        verdict
    })
}
