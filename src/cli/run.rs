//! `run` and `rerun`: a session (see [`crate::run`]) with its progress,
//! summary and verdict on the terminal, or its run object as JSON.

use std::path::Path;

use super::args::{CollectBootArgs, OutFormat, RerunArgs, RunArgs, RunFlags};
use super::{Exit, Failure, find_recipe};
use crate::check::CheckError;
use crate::run::{
    ArmedFlight, Ran, RunError, RunEvent, RunOptions, incomplete_message, run as run_session,
};
use crate::untrusted::{escape_path, teprint, teprintln, tprint, tprintln};

/// `run RECIPE [-- COMMAND]`.
pub(super) fn run(a: RunArgs) -> Exit {
    match find_recipe(&a.recipe) {
        Some(recipe) => a.flags.run(RunOptions {
            recipe,
            sets: a.sets,
            command: a.command,
            ..Default::default()
        }),
        None => {
            let failure = Failure::Invalid(None);
            if a.flags.format == OutFormat::Json {
                tprint!(
                    "{}",
                    crate::output::to_json(&crate::format::RunJson::failed(
                        failure.code(),
                        format!("no recipe `{}` on the recipe path", a.recipe.display())
                    ))
                );
            }
            Err(failure)
        }
    }
}

impl RunFlags {
    /// Runs `opts` (its recipe, params, workload and what `rerun` sets) with
    /// these flags (see [`run_cmd`]).
    fn run(self, opts: RunOptions) -> Exit {
        let opts = RunOptions {
            out_dir: self.out.clone(),
            bundle: self.bundle,
            overrides: crate::overrides::Overrides {
                duration: self.duration,
                buffer_size_kb: self.buffer_size_kb,
                system_wide: self.system_wide,
            },
            ..opts
        };
        run_cmd(opts, self.format, self.quiet, self.junit.as_deref())
    }

    /// A run that could not start: `failure`'s error on stderr, then with
    /// `--format json` the run object saying so on stdout.
    fn failed(&self, failure: Failure) -> Exit {
        let message = failure.error().map(ToString::to_string).unwrap_or_default();
        let failure = failure.printed();
        if self.format == OutFormat::Json {
            tprint!(
                "{}",
                crate::output::to_json(&crate::format::RunJson::failed(failure.code(), message))
            );
        }
        Err(failure)
    }
}

/// Runs `opts`; with `--format json`, the run object on stdout at the end.
fn run_cmd(opts: RunOptions, format: OutFormat, quiet: bool, junit: Option<&Path>) -> Exit {
    let json = format == OutFormat::Json;
    let (exit, j) = run_human(opts, json, quiet, junit);
    if let Some(j) = j {
        tprint!("{}", crate::output::to_json(&j));
    }
    exit
}

/// Runs, printing the human lines (on stderr, and the summary on stdout unless
/// `json`; when `quiet`, none of them, and in text only the output folder's
/// path on stdout). Returns how
/// it ended (every message printed) and, when `json`, the object to print.
fn run_human(
    opts: RunOptions,
    json: bool,
    quiet: bool,
    junit: Option<&Path>,
) -> (Exit, Option<crate::format::RunJson>) {
    let mut progress = crate::progress::ProgressDisplay::new();
    let result = run_session(&opts, |ev| match ev {
        _ if quiet => {}
        RunEvent::Mounted(m) => teprintln!("{m}"),
        RunEvent::Irreversible(effects) => {
            for e in effects {
                teprintln!("irreversible: this run {e}");
            }
        }
        RunEvent::Applied { instance, steps } => {
            let place = if instance.is_empty() {
                "the top level"
            } else {
                &instance
            };
            teprintln!("applied {steps} steps to {place} (tracing off)")
        }
        RunEvent::Recording { until } => teprintln!("recording until {until}"),
        RunEvent::Progress(p) => progress.update(&p),
        RunEvent::Stopped { reason } => {
            progress.finish();
            teprintln!("stopped: {reason}")
        }
        RunEvent::RolledBack => teprintln!("rolled back: tracefs is as it was before the run"),
        RunEvent::RollbackIncomplete { failures, journal } => teprintln!(
            "rollback incomplete: {} undo{} failed{}",
            failures.len(),
            if failures.len() == 1 { "" } else { "s" },
            journal.map_or(String::new(), |j| format!(
                "; journal kept: {}",
                j.display()
            ))
        ),
        RunEvent::Swept(line) | RunEvent::Waiting(line) => teprintln!("{line}"),
    });
    progress.finish();
    match result {
        Ok(Ran::Armed(a)) => {
            if !quiet {
                armed_message(&a);
            }
            (Ok(()), None)
        }
        Ok(Ran::Recorded(outcome)) => {
            let outcome = *outcome;
            if json && !quiet {
                teprint!("{}", outcome.summary);
                teprintln!("\noutput: {}", outcome.dir.display());
                if let Some(b) = &outcome.bundle {
                    teprintln!("bundle: {}", b.display());
                }
            } else if !json && quiet {
                // Quiet: stdout is the output folder's path (and the bundle's), for scripts.
                tprintln!("{}", outcome.dir.display());
                if let Some(b) = &outcome.bundle {
                    tprintln!("{}", b.display());
                }
            } else if !json {
                tprint!("{}", outcome.summary);
                tprintln!("\noutput: {}", outcome.dir.display());
                if let Some(b) = &outcome.bundle {
                    tprintln!("bundle: {}", b.display());
                }
            }
            if let Some(path) = junit
                && let Err(e) = std::fs::write(path, crate::report::render_junit(&outcome.report))
            {
                teprintln!("trace-recipe: error: cannot write {}: {e}", path.display());
                return (Err(Failure::Failed(None)), None);
            }
            let ended = run_outcome(&outcome);
            let code = ended.as_ref().err().map_or(super::exit::OK, Failure::code);
            (
                ended,
                json.then(|| crate::format::RunJson::finished(&outcome, code)),
            )
        }
        Err(e) => not_run(&e, json),
    }
}

/// What `run` says after arming a flight recorder: where it records, and how
/// to collect after a reboot.
fn armed_message(a: &ArmedFlight) {
    let armed = match &a.state {
        Ok(_) => String::new(),
        Err(why) => format!(
            " --armed {}\n  (the arm record could not be kept for the next boot: {why})",
            escape_path(&a.dir)
        ),
    };
    tprintln!(
        "armed: instances/{} records until the next reboot or crash (flight recorder); nothing else was left behind\nrun folder: {}\nafter the reboot: trace-recipe collect-boot -o DIR{armed}",
        a.instance,
        escape_path(&a.dir)
    );
}

/// `collect-boot`: the last boot's trace from a flight recorder into `-o DIR`.
pub(super) fn collect_boot(a: CollectBootArgs) -> Exit {
    let opts = crate::run::CollectBootOptions {
        instance: a.instance,
        armed: a.armed,
        out_dir: a.out,
        keep: a.keep,
    };
    let result = crate::run::collect_boot(&opts, |ev| {
        if let RunEvent::Mounted(m) = ev {
            teprintln!("{m}");
        }
    });
    match result {
        Ok(c) => {
            tprint!("{}", c.outcome.summary);
            tprintln!("\noutput: {}", escape_path(&c.outcome.dir));
            match c.released {
                true => teprintln!(
                    "released: instances/{} is as it was before arming",
                    c.instance
                ),
                false => teprintln!("kept: instances/{} left as it is (--keep)", c.instance),
            }
            Ok(())
        }
        Err(e) => Err(run_error(&e)),
    }
}

/// A run that failed before it finished: its error printed (see [`run_error`]),
/// and when `json` the run object saying so.
fn not_run(e: &RunError, json: bool) -> (Exit, Option<crate::format::RunJson>) {
    let failure = run_error(e);
    let code = failure.code();
    (
        Err(failure),
        json.then(|| crate::format::RunJson::failed(code, e.to_string())),
    )
}

/// Prints the warnings of a finished run; says how it ended.
fn run_outcome(outcome: &crate::run::RunOutcome) -> Exit {
    if !outcome.rollback.complete() {
        teprintln!(
            "trace-recipe: error: {}",
            incomplete_message(&outcome.rollback)
        );
        return Err(Failure::RollbackIncomplete);
    }
    if outcome.output_full {
        teprintln!(
            "trace-recipe: error: the output file system filled up after {:.1} MiB were recorded; recording stopped there, tracefs was rolled back, and trace.dat keeps what was written (marked truncated)\n  = help: free space in {}, or record to a larger file system with `-o DIR`; `[stop] max_size_mb` stops a run before its disk is full",
            outcome.report.recorder.as_ref().map_or(0, |r| r.bytes) as f64 / f64::from(1 << 20),
            outcome.dir.display()
        );
        return Err(Failure::Failed(None));
    }
    match outcome.signal {
        Some(sig) => {
            teprintln!("trace-recipe: interrupted by {sig}");
            Err(Failure::Signal(sig))
        }
        None => match outcome.lost_limit_exceeded {
            Some(max) => {
                teprintln!(
                    "trace-recipe: error: lost {} events ({:.3} % of recorded + lost), more than `[output] max_lost_percent = {max}`\n  = help: raise `[buffer] size_kb`, trace fewer events or add filters",
                    outcome.report.lost_total,
                    outcome.report.lost_percent
                );
                Err(Failure::LostLimit)
            }
            None if outcome.report.expectations.iter().any(|e| !e.passed) => {
                teprintln!(
                    "trace-recipe: error: {} of {} expectations failed (see summary.txt and report.json)",
                    outcome
                        .report
                        .expectations
                        .iter()
                        .filter(|e| !e.passed)
                        .count(),
                    outcome.report.expectations.len()
                );
                Err(Failure::ExpectationFailed)
            }
            None => Ok(()),
        },
    }
}

/// Prints a failed run's error; says how it ended.
fn run_error(e: &RunError) -> Failure {
    match e {
        RunError::Check(CheckError::Invalid { .. } | CheckError::Load(_)) => {
            teprint!("{}", format!("{e}\n").replace("\n\n", "\n"));
            teprintln!("trace-recipe: nothing was written to tracefs");
            Failure::Invalid(None)
        }
        e if e.incomplete_rollback().is_some() => {
            teprintln!("trace-recipe: error: {e}");
            Failure::RollbackIncomplete
        }
        RunError::Interrupted(sig) => {
            teprintln!("trace-recipe: {e}");
            Failure::Signal(*sig)
        }
        e => {
            teprintln!("trace-recipe: error: {e}");
            Failure::Failed(None)
        }
    }
}

/// `rerun BUNDLE`: the bundle's recipe run here like `run`, with the params it
/// ran with (then `sets`) and its workload (unless `command`). The commands that
/// come from the bundle start only with `allow_commands`, and what it asks of
/// the machine beyond the modest defaults ([`crate::replay::machine_asks`]) is
/// taken only with `allow_resources`, or either with a yes typed on a
/// terminal; otherwise nothing runs and the exit code is 2.
pub(super) fn rerun(a: RerunArgs) -> Exit {
    let RerunArgs {
        from,
        sets,
        allow_commands,
        allow_resources,
        flags: args,
        command,
    } = a;
    let stored = match crate::replay::StoredRun::open(&from) {
        Ok(s) => s,
        Err(e) => return args.failed(Failure::failed(e)),
    };
    let replay = stored.replay(&sets, command);
    if !args.quiet {
        let m = crate::bundle::ManifestText::of(&stored.manifest);
        teprintln!(
            "rerun: recipe `{}` of {} (kernel {}{}){}",
            m.recipe,
            escape_path(&from),
            m.kernel_release,
            m.host
                .as_ref()
                .map_or(String::new(), |h| format!(", host {h}")),
            match replay.sets.is_empty() {
                true => String::new(),
                false => format!(" with params {}", sets_text(&replay.sets)),
            }
        );
    }
    let commands: &[_] = match allow_commands {
        true => &[],
        false => &replay.foreign,
    };
    let asks = match (allow_resources, &replay.rendered) {
        (false, Ok(l)) => crate::replay::machine_asks(
            &l.recipe,
            crate::replay::online_cpus(),
            crate::replay::UserSet {
                duration: args.duration.is_some(),
                buffer_size_kb: args.buffer_size_kb.is_some(),
            },
        ),
        _ => Vec::new(),
    };
    let asked = !commands.is_empty() || !asks.is_empty();
    if asked && !agreed(commands, &asks) {
        let mut why = Vec::new();
        if !commands.is_empty() {
            why.push(format!(
                "the recipe of {} starts commands that come from the bundle, not from you; nothing was run\n{}  = help: read them; pass `--allow-commands` to start them, or give a workload of your own after `--` (`[collect]` commands still need `--allow-commands`)",
                escape_path(&from),
                crate::replay::commands_text(commands)
            ));
        }
        if !asks.is_empty() {
            why.push(format!(
                "the recipe of {} asks more of this machine than the modest defaults; nothing was run\n{}  = help: pass `--allow-resources` to grant it, or set your own with `--buffer-size-kb` / `--duration`",
                escape_path(&from),
                crate::replay::asks_text(&asks)
            ));
        }
        return args.failed(Failure::Usage(Some(why.join("\n").into())));
    }
    // The render whose commands were listed is the one that runs.
    let rendered = match replay.rendered {
        Ok(loaded) => loaded,
        Err(e) => {
            let (exit, json) = not_run(&RunError::Check(e.into()), args.format == OutFormat::Json);
            if let Some(j) = json {
                tprint!("{}", crate::output::to_json(&j));
            }
            return exit;
        }
    };
    args.run(RunOptions {
        recipe: stored.recipe(),
        sets: replay.sets,
        command: replay.command,
        stored: true,
        rendered: Some(rendered),
        ..Default::default()
    })
}

/// Asks on the terminal whether to start `commands` and grant `asks` (stdin
/// and stderr must both be terminals; otherwise no). True on `y` or `yes`.
fn agreed(commands: &[(&'static str, Vec<String>)], asks: &[crate::replay::MachineAsk]) -> bool {
    use std::io::IsTerminal;
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return false;
    }
    if !commands.is_empty() {
        teprint!(
            "this bundle's recipe starts these commands:\n{}",
            crate::replay::commands_text(commands)
        );
    }
    if !asks.is_empty() {
        teprint!(
            "this bundle's recipe asks this of the machine, beyond the modest defaults:\n{}",
            crate::replay::asks_text(asks)
        );
    }
    teprint!("go ahead? [y/N] ");
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).is_ok()
        && matches!(answer.trim().to_lowercase().as_str(), "y" | "yes")
}

/// The params a stored run is rerun (or checked) with, `KEY=VALUE` each
/// [escaped](crate::untrusted::escape) (they come from the bundle), joined by
/// spaces.
pub(super) fn sets_text(sets: &[String]) -> String {
    sets.iter()
        .map(|s| crate::untrusted::escape(s))
        .collect::<Vec<_>>()
        .join(" ")
}
