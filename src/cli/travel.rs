//! What travels between hosts and runs: `diff`, `fleet`, `pack`, `unpack`;
//! and what a run leaves behind in tracefs: `status`, `reset`.

use super::args::{
    DiffArgs, DiffFormat, FleetArgs, OutFormat, PackArgs, ResetArgs, StatusArgs, UnpackArgs,
};
use super::{Exit, Failure, with_tracefs};
use crate::diff::DiffError;
use crate::status;
use crate::untrusted::{teprintln, tprint, tprintln};

/// `diff A B`: the differences between two runs; [`Failure::DiffRuleHeld`]
/// when a `--fail-if` rule holds.
pub(super) fn diff(a: DiffArgs) -> Exit {
    let d = crate::diff::diff(&a.a, &a.b, &a.fail_if).map_err(|e| match e {
        e @ (DiffError::Rule { .. } | DiffError::Unknown { .. }) => Failure::Usage(Some(e.into())),
        e => Failure::failed(e),
    })?;
    let text = match a.format {
        DiffFormat::Text => crate::diff::render_text(&d),
        DiffFormat::Json => crate::output::to_json(&d),
        DiffFormat::Html => crate::diff::render_html(&d),
    };
    tprint!("{text}");
    let held: Vec<&str> = d
        .rules
        .iter()
        .filter(|r| r.held)
        .map(|r| r.rule.as_str())
        .collect();
    if held.is_empty() {
        Ok(())
    } else {
        teprintln!("trace-recipe: --fail-if held: {}", held.join("; "));
        Err(Failure::DiffRuleHeld)
    }
}

/// `fleet INPUT...`: one recipe's runs on many hosts, summarised.
pub(super) fn fleet(a: FleetArgs) -> Exit {
    let f = crate::fleet::fleet(&a.inputs).map_err(Failure::failed)?;
    tprint!(
        "{}",
        match a.format {
            DiffFormat::Text => crate::fleet::render_text(&f),
            DiffFormat::Json => crate::output::to_json(&f),
            DiffFormat::Html => crate::fleet::render_html(&f),
        }
    );
    Ok(())
}

/// `pack DIR`: the bundle's path on stdout.
pub(super) fn pack(a: PackArgs) -> Exit {
    let path =
        crate::bundle::pack(&a.dir, a.out.as_deref(), a.redact_host).map_err(Failure::failed)?;
    tprintln!("{}", path.display());
    Ok(())
}

/// `unpack BUNDLE`: the folder and what the manifest says, on stdout.
pub(super) fn unpack(a: UnpackArgs) -> Exit {
    let (dir, manifest) =
        crate::bundle::unpack(&a.bundle, a.out.as_deref()).map_err(Failure::failed)?;
    let m = crate::bundle::ManifestText::of(&manifest);
    tprintln!(
        "{}: recipe `{}`, kernel {}, {} members checked",
        dir.display(),
        m.recipe,
        m.kernel_release,
        manifest.members.len()
    );
    Ok(())
}

/// `status`: tracefs state that differs from a clean boot; with `--exit-code`,
/// [`Failure::Invalid`] when a run left something behind.
pub(super) fn status(a: StatusArgs) -> Exit {
    with_tracefs(|t| {
        let (text, left) = status::status(t).map_err(Failure::failed)?;
        match a.format {
            OutFormat::Text => tprint!("{text}"),
            OutFormat::Json => tprint!(
                "{}",
                crate::output::to_json(&crate::format::StatusJson {
                    format_version: crate::output::FORMAT_VERSION,
                    tracefs: t.root().display().to_string(),
                    left_behind: left,
                    trace_recipe: crate::format::Leftovers::read(t),
                    lines: text.lines().map(str::to_string).collect(),
                })
            ),
        }
        match a.exit_code && left {
            true => Err(Failure::Invalid(None)),
            false => Ok(()),
        }
    })
}

/// `reset`: removes what runs left behind (`--all`: everything), or with
/// `--dry-run` says what it would remove.
pub(super) fn reset(a: ResetArgs) -> Exit {
    let ResetArgs {
        all,
        dry_run,
        format,
    } = a;
    with_tracefs(|t| {
        let results: Vec<Result<String, String>> = if dry_run {
            crate::format::reset_plan(&crate::format::Leftovers::read(t))
                .into_iter()
                .map(|a| Ok(a.message))
                .collect()
        } else {
            t.require_root().map_err(Failure::failed)?;
            if all {
                status::reset_all(t)
            } else {
                status::reset(t)
            }
        };
        let ended = match results.iter().any(Result::is_err) {
            true => Err(Failure::Failed(None)),
            false => Ok(()),
        };
        if format == OutFormat::Json {
            tprint!(
                "{}",
                crate::output::to_json(&crate::format::ResetJson {
                    format_version: crate::output::FORMAT_VERSION,
                    dry_run,
                    all,
                    actions: results
                        .into_iter()
                        .map(|r| crate::format::ResetAction {
                            ok: r.is_ok(),
                            message: r.unwrap_or_else(|e| e),
                        })
                        .collect(),
                })
            );
            return ended;
        }
        if results.is_empty() {
            tprintln!("nothing to reset: no trace-recipe run left anything behind");
        }
        for r in results {
            match r {
                Ok(line) => tprintln!("{line}"),
                Err(e) => teprintln!(
                    "trace-recipe: error: {e}\n  = help: see `trace-recipe status`; fix what it names by hand if it persists"
                ),
            }
        }
        ended
    })
}
