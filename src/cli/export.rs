//! `export FILE --format parquet|perfetto -o PATH`: a trace for other tools
//! ([`crate::export`]).

use super::args::{ExportArgs, ExportFormat};
use super::{Context, Exit, Failure, Input};
use crate::analysis::SelectArgs;
use crate::export::{ExportError, Provenance};
use crate::report::RunInfo;
use crate::untrusted::{escape_path, teprintln};

/// `export`: the records the selection keeps, as Parquet tables in `-o DIR`
/// or a Perfetto trace `-o FILE`; a one-line summary on stderr.
pub(super) fn export(a: ExportArgs) -> Exit {
    let input = Input::open(&a.file)?;
    let args: SelectArgs = a.select.into();
    let mut keep = input.select(&args)?;
    let provenance = Provenance {
        input: a.file.display().to_string(),
        kind: input.kind.to_string(),
        run: input
            .run_json
            .as_ref()
            .and_then(|j| serde_json::from_value::<RunInfo>(j.json.clone()).ok()),
        selection: args.clone(),
    };
    let written = match a.format {
        ExportFormat::Parquet => {
            raise_open_file_limit();
            crate::export::to_parquet(&input.file, keep.as_mut(), &a.output, provenance).map(
                |meta| {
                    let rows: u64 = meta.events.iter().map(|e| e.rows).sum();
                    format!(
                        "{rows} records of {} events, {} tasks and meta.json",
                        meta.events.len(),
                        meta.tasks.rows
                    )
                },
            )
        }
        ExportFormat::Perfetto => crate::export::to_perfetto(&input.file, keep.as_mut(), &a.output)
            .map(|s| {
                format!(
                    "{} records of {} events ({} as Perfetto's typed events, {} generic) and {} tasks",
                    s.records,
                    s.events,
                    s.typed,
                    s.records - s.typed,
                    s.tasks
                )
            }),
    };
    match written {
        Ok(what) => {
            teprintln!("wrote {what} to {}", escape_path(&a.output));
            Ok(())
        }
        Err(e @ (ExportError::NotEmpty(_) | ExportError::Exists(_))) => {
            Err(Failure::Usage(Some(e.into())))
        }
        Err(e @ ExportError::Trace(_)) => Err(Failure::failed(Context::new(
            format!("cannot read {}", escape_path(&input.path)),
            e,
        ))),
        Err(e) => Err(Failure::failed(e)),
    }
}

/// Raises this process's soft limit of open files to its hard limit: an
/// export holds one file open per event with records (a trace of `-e all`
/// has hundreds). Nothing changes where that fails.
fn raise_open_file_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        let _ = setrlimit(Resource::Nofile, limit);
    }
}
