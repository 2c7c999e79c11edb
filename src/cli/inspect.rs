//! What a user looks up: `list`, `show`, `events`, `functions`, `report`,
//! `schema`, `completions` and `__man`. Read-only.

use std::io::{IsTerminal, Write};
use std::path::Path;

use super::args::{
    Cli, CompletionsArgs, EventsArgs, Format, FunctionsArgs, ListArgs, ManArgs, OutFormat,
    ReportArgs, SchemaArgs, ShowArgs,
};
use super::{Context, Error, Exit, Failure, find_recipe, started, with_tracefs};
use crate::analysis::{
    AnalysisName, Select, Selection, analyze_kept, check_answers, parse_answers,
};
use crate::check::{CheckError, FactsFrom, load_and_validate};
use crate::recipe::Template;
use crate::report::{JsonReport, RunInfo, render_html};
use crate::untrusted::{teprintln, tprint, tprintln};

/// `list`: every recipe on the recipe path, checked against this kernel.
pub(super) fn list(a: ListArgs) -> Exit {
    with_tracefs(|tracefs| {
        let dirs = crate::library::search_path();
        let started = started();
        let recipes = crate::library::discover(&dirs)
            .iter()
            .map(|f| {
                let verdict =
                    match load_and_validate(FactsFrom::Live(tracefs), &f.path, &[], &started) {
                        Ok(_) => Ok(()),
                        Err(CheckError::Invalid { text, diagnostics }) => Err(diagnostics
                            .iter()
                            .map(|d| d.render(&text).lines().next().unwrap_or("").to_string())
                            .collect()),
                        Err(e) => Err(vec![e.to_string()]),
                    };
                crate::library::entry(f, verdict)
            })
            .collect();
        let l = crate::library::ListJson {
            format_version: crate::output::FORMAT_VERSION,
            search_path: dirs.iter().map(|d| d.display().to_string()).collect(),
            recipes,
        };
        match a.format {
            OutFormat::Text => tprint!("{}", crate::library::list_text(&l)),
            OutFormat::Json => tprint!("{}", crate::output::to_json(&l)),
        }
        // Nothing found is a failure a script can see (the text says where it looked).
        match l.recipes.is_empty() {
            true => Err(Failure::Invalid(None)),
            false => Ok(()),
        }
    })
}

/// `events`: from a fact file, or from this kernel.
pub(super) fn events(a: EventsArgs) -> Exit {
    let EventsArgs {
        glob,
        fields,
        facts,
        format,
    } = a;
    let glob = glob.as_deref();
    let show = |e: crate::inventory::EventsJson| {
        match format {
            OutFormat::Text => {
                for u in &e.unreadable {
                    teprintln!("note: could not read {u}");
                }
                tprint!("{}", crate::inventory::events_text(&e));
            }
            OutFormat::Json => tprint!("{}", crate::output::to_json(&e)),
        }
        if e.substring {
            teprintln!(
                "note: no event is named `{}`: these are the events whose name contains it",
                glob.unwrap_or("*")
            );
        }
        if e.events.is_empty() {
            let near: Vec<String> = e.suggestions.iter().map(|s| format!("`{s}`")).collect();
            teprintln!(
                "trace-recipe: no event in {} matches `{}`, nor contains it{}",
                e.source,
                glob.unwrap_or("*"),
                match near.is_empty() {
                    true => String::new(),
                    false => format!("; did you mean {}?", near.join(", ")),
                }
            );
            Err(Failure::Invalid(None))
        } else {
            Ok(())
        }
    };
    match facts {
        Some(path) => {
            let f = crate::kernel::KernelFacts::load(&path).map_err(Failure::failed)?;
            show(crate::inventory::events(
                &f,
                &path.display().to_string(),
                glob,
                fields,
            ))
        }
        None => with_tracefs(|t| {
            let scope = crate::kernel::Scope {
                events: None,
                kernel_symbols: false,
                filter_functions: false,
                btf: Default::default(),
                btf_all: false,
            };
            let facts =
                crate::kernel::KernelFacts::read_scoped(t, &scope).map_err(Failure::failed)?;
            show(crate::inventory::events(&facts, "tracefs", glob, fields))
        }),
    }
}

/// Writes `trace-recipe.1` and one `trace-recipe-SUBCOMMAND.1` per visible
/// subcommand into `dir` (created), each with EXIT STATUS and EXAMPLES
/// ([`super::man::page`]); returns how many.
fn write_man_pages(dir: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let cmd = <Cli as clap::CommandFactory>::command();
    let mut n = 0;
    let mut write = |name: String, cmd: clap::Command, command: &str| -> std::io::Result<()> {
        std::fs::write(
            dir.join(format!("{name}.1")),
            super::man::page(cmd, command)?,
        )?;
        n += 1;
        Ok(())
    };
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("trace-recipe-{}", sub.get_name());
        let page = sub
            .clone()
            .display_name(name.clone())
            .bin_name(format!("trace-recipe {}", sub.get_name()));
        write(name, page, sub.get_name())?;
    }
    write("trace-recipe".into(), cmd, "")?;
    Ok(n)
}

/// `show RECIPE`: the recipe file, under a `# PATH` line.
pub(super) fn show(a: ShowArgs) -> Exit {
    let path = find_recipe(&a.recipe).ok_or(Failure::Invalid(None))?;
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Failure::Invalid(Some(
            Context::new(
                format!("cannot read {}", crate::untrusted::escape_path(&path)),
                e,
            )
            .into(),
        ))
    })?;
    tprintln!("# {}", path.display());
    tprint!("{text}");
    Ok(())
}

/// `functions GLOB`: the kernel functions that match.
pub(super) fn functions(a: FunctionsArgs) -> Exit {
    with_tracefs(|t| {
        let glob = &a.glob;
        let facts = crate::kernel::KernelFacts::read(t).map_err(Failure::failed)?;
        let f = crate::inventory::functions(&facts, glob);
        for u in &f.unreadable {
            teprintln!("note: could not read {u}");
        }
        for n in &f.names {
            tprintln!("{n}");
        }
        if f.names.is_empty() {
            teprintln!("trace-recipe: no function in {} matches `{glob}`", f.source);
            return Err(Failure::Invalid(None));
        }
        Ok(())
    })
}

/// `report FILE`: a trace.dat (or a run's) as text, a summary, JSON or HTML,
/// over the records `-F`, `--cpu`, `--pid`, `--comm`, `--from`/`--to` keep.
/// A reader that goes away (a broken pipe) ends it quietly, with exit 0.
pub(super) fn report(a: ReportArgs) -> Exit {
    let template = a
        .template
        .as_deref()
        .map(|p| Template::load(p).and_then(|t| t.check().map(|()| t)))
        .transpose()
        .map_err(|e| Failure::Invalid(Some(e.into())))?
        .unwrap_or_else(Template::builtin);
    let mut input = super::Input::open(&a.file)?;
    if a.format == Format::Text {
        input.load_prototypes()?;
    }
    let file = &input.file;
    let run = input
        .run_json
        .as_ref()
        .and_then(|j| serde_json::from_value::<RunInfo>(j.json.clone()).ok())
        .map(|info| (info, input.run_json.as_ref()));
    let answers = match &a.answer {
        Some(p) => answers_of(p, file)?,
        None => Vec::new(),
    };
    let mut keep = input.select(&a.select.into())?;
    // `-o FILE` and a pipe get the report as it is (the text listing as
    // trace-cmd writes it); a terminal gets a trace.dat's strings with their
    // control characters escaped. Written through a 64 KiB buffer: one
    // dynamic call per chunk.
    let to: Result<Box<dyn Write>, Error> = match &a.output {
        Some(o) => std::fs::File::create(o)
            .map(|f| Box::new(f) as Box<dyn Write>)
            .map_err(|e| Context::new(format!("cannot write {}", o.display()), e).into()),
        None if std::io::stdout().is_terminal() => Ok(Box::new(
            crate::untrusted::TerminalSafe::new(std::io::stdout().lock()),
        )),
        None => Ok(Box::new(std::io::stdout().lock())),
    };
    let result = to.and_then(|to| {
        print_report(
            &input,
            run.as_ref(),
            &mut keep,
            a.format,
            &Selection::new(file, &a.analysis).with_answers(answers),
            &template,
            to,
        )
    });
    match result {
        Ok(()) => Ok(()),
        Err(e) if is_broken_pipe(e.as_ref()) => Ok(()),
        Err(e) => Err(Failure::failed(Context::new(
            input.path.display().to_string(),
            e,
        ))),
    }
}

/// The `[[answer]]` tables of `path`, each checked against `file`'s formats
/// (every problem at once).
fn answers_of(
    path: &Path,
    file: &tracedat::TraceFile,
) -> Result<Vec<crate::recipe::Answer>, Failure> {
    use crate::untrusted::{Kind, read_to_string};
    let text = read_to_string(path, Kind::Recipe).map_err(|e| {
        Failure::Invalid(Some(
            format!(
                "--answer {}: {}",
                crate::untrusted::escape_path(path),
                e.reason()
            )
            .into(),
        ))
    })?;
    // A recipe with templates (`thresh_us = {{ thresh_us }}`) is rendered as
    // `run` renders it, its params at their defaults: the file alone, its
    // `extends` not followed (no other file is read).
    let specs = match text.contains("{{") || text.contains("{%") {
        true => {
            let builtins = crate::recipe::Builtins::default();
            let alone = crate::recipe::Chain::Alone;
            let loaded =
                crate::recipe::load_text(path, &text, &[], &builtins, alone).map_err(|e| {
                    Failure::Invalid(Some(
                        format!("--answer {}: {e}", crate::untrusted::escape_path(path)).into(),
                    ))
                })?;
            match loaded.recipe.answer.is_empty() {
                true => parse_answers(path, "").map_err(|m| Failure::Invalid(Some(m.into())))?,
                false => loaded.recipe.answer,
            }
        }
        false => parse_answers(path, &text).map_err(|m| Failure::Invalid(Some(m.into())))?,
    };
    let errors = check_answers(file, &specs);
    if !errors.is_empty() {
        let all: Vec<String> = errors.iter().map(|e| format!("--answer: {e}")).collect();
        return Err(Failure::Invalid(Some(all.join("\n").into())));
    }
    Ok(specs)
}

/// Writes `file` in `format` to `to` (buffered), over the records `keep`
/// keeps, with `run`'s header (and its report.json) in the summary, JSON and
/// HTML; what only the run knew (expectations, tracer results, ...) too when
/// the report is of every record with the default analyses.
fn print_report(
    input: &super::Input,
    run: Option<&(RunInfo, Option<&crate::report::RunReport>)>,
    keep: &mut Option<Select>,
    format: Format,
    selection: &Selection,
    template: &Template,
    to: impl Write,
) -> Result<(), Error> {
    let file = &input.file;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, to);
    match format {
        Format::Text => {
            writeln!(out, "cpus={}", file.cpu_count())?;
            write_text(file, keep.as_mut(), input.prototypes.as_ref(), &mut out)?;
        }
        Format::Folded | Format::FoldedFuncgraph => {
            let name = match format {
                Format::Folded => AnalysisName::Stacks,
                _ => AnalysisName::Funcgraph,
            };
            let a = analyze_kept(file, &Selection::new(file, &[name]), keep.as_mut())?;
            let folded = match format {
                Format::Folded => a.stacks.map(|s| s.folded),
                _ => a.funcgraph_folded,
            };
            let folded = folded.unwrap_or_default();
            if folded.is_empty() {
                teprintln!(
                    "note: no {} in this trace (nothing to fold)",
                    match format {
                        Format::Folded => "kernel_stack or user_stack record",
                        _ => "funcgraph_entry and funcgraph_exit records",
                    }
                );
            }
            out.write_all(folded.text().as_bytes())?;
        }
        Format::Summary | Format::Json | Format::Html => {
            let a = analyze_kept(file, selection, keep.as_mut())?;
            let mut r = JsonReport::new(file, &a, run.map(|(info, _)| info));
            if let Some((_, Some(j))) = run
                && keep.is_none()
                && !selection.explicit()
            {
                r.add_run_results(j);
            }
            let text = match format {
                Format::Json => crate::output::to_json(&r),
                Format::Html => render_html(&r),
                _ => template.render(&r)?,
            };
            out.write_all(text.as_bytes())?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Bytes of lines [`write_text`] gathers before writing them.
const TEXT_CHUNK: usize = 1 << 16;

/// Writes the records of `file` (those `keep` keeps, when given) as
/// `trace-cmd report` lists them, with each call's arguments as the kernel's
/// `trace` file prints them when `prototypes` are given (see
/// [`crate::funcargs`]). The lines
/// are formatted in place in one buffer that goes to `out` [`TEXT_CHUNK`]
/// bytes at a time, never copied one by one; on a record that cannot be read
/// the lines before it are written, then its error returned.
fn write_text(
    file: &tracedat::TraceFile,
    keep: Option<&mut Select>,
    prototypes: Option<&tracedat::Prototypes>,
    out: &mut impl Write,
) -> Result<(), Error> {
    let mut printer = tracedat::Printer::new(file);
    if let Some(p) = prototypes {
        printer = printer.with_prototypes(p);
    }
    // Room for a chunk and the longest lines that may overrun it.
    let mut buf = Vec::with_capacity(2 * TEXT_CHUNK);
    let mut write_failed = false;
    // The events' bodies are rendered on the thread that decodes the
    // records when the walk is pipelined (tracedat::Bodies).
    let mut bodies = printer.bodies();
    let prepare = |rec: &tracedat::Record<'_>, into: &mut Vec<u8>| bodies.prepare(rec, into);
    let mut on_record = |rec: &tracedat::Record<'_>, prepared: &[u8]| -> Result<(), Error> {
        printer.append_prepared(rec, prepared, &mut buf);
        if buf.len() >= TEXT_CHUNK {
            out.write_all(&buf).inspect_err(|_| write_failed = true)?;
            buf.clear();
        }
        Ok(())
    };
    let walked = match keep {
        Some(k) => k
            .records(file)
            .try_for_each_prepared(prepare, &mut on_record),
        // No per-record work beyond printing when nothing narrows.
        None => file
            .records()
            .try_for_each_prepared(prepare, &mut on_record),
    };
    if let Err(e) = walked {
        // What was read before a record that cannot be read is printed,
        // then its error.
        if !write_failed {
            out.write_all(&buf)?;
        }
        return Err(e);
    }
    printer.finish(&mut buf)?;
    out.write_all(&buf)?;
    Ok(())
}

/// Whether `e`, or an error in its source chain, is a broken pipe.
fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(e), |e| e.source()).any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `schema`: a JSON Schema on stdout.
pub(super) fn schema(a: SchemaArgs) -> Exit {
    if a.manifest {
        tprintln!("{}", crate::bundle::manifest_schema_json());
    } else if let Some(of) = a.of {
        tprintln!("{}", crate::format::schema_of(of));
    } else if a.report {
        tprintln!("{}", crate::report_schema_json());
    } else {
        tprintln!("{}", crate::schema_json());
    }
    Ok(())
}

/// `completions SHELL`: the completion script on stdout.
pub(super) fn completions(a: CompletionsArgs) -> Exit {
    clap_complete::generate(
        a.shell,
        &mut <Cli as clap::CommandFactory>::command(),
        "trace-recipe",
        &mut std::io::stdout(),
    );
    Ok(())
}

/// `__man DIR`: the man pages, written into DIR.
pub(super) fn man(a: ManArgs) -> Exit {
    let n = write_man_pages(&a.dir).map_err(|e| {
        Failure::failed(Context::new(
            format!("cannot write man pages to {}", a.dir.display()),
            e,
        ))
    })?;
    tprintln!("wrote {n} man pages to {}", a.dir.display());
    Ok(())
}
