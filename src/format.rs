//! Machine-readable output of `check`, `status`, `reset` and `run`
//! (`--format json`): the serializable types, one per command, whose JSON
//! Schemas (schemars) are checked in under `schema/` and printed by
//! `trace-recipe schema --of NAME`.
//!
//! Every object carries `format_version` ([`FORMAT_VERSION`]); a field is only
//! ever added within a version.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::diagnostic::JsonDiagnostic;
use crate::output::FORMAT_VERSION;
use crate::status::{dead_journals, our_instances, our_probes};
use crate::tracefs::Tracefs;
use crate::workload::WorkloadExit;

/// `check --format json`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CheckJson {
    /// Layout version.
    pub format_version: u32,
    /// The recipe file as given (or as found on the recipe path).
    pub file: String,
    /// True when the recipe is valid for this kernel (exit 0).
    pub ok: bool,
    /// The recipe's `name`, when it parsed.
    pub recipe: Option<String>,
    /// This kernel's release, when validation reached the kernel.
    pub kernel_release: Option<String>,
    /// Every problem found; empty when `ok`. A file that cannot be read is one
    /// problem without a line.
    pub diagnostics: Vec<JsonDiagnostic>,
    /// A valid recipe scoped to some tasks (a workload, `pids`, `comms`) that
    /// enables events that mostly fire outside them: which, where they fire,
    /// and the key that records every task (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope_note: Option<crate::validate::ScopeNote>,
    /// `check --against`: the bundle, the kernel facts that differ, the commands
    /// a rerun would start (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against: Option<crate::replay::AgainstJson>,
}

/// What kind of thing a run can leave behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LeftKind {
    /// A journal in /run/trace-recipe whose run and guard are dead.
    Journal,
    /// A tracefs instance `trace-recipe-NAME-PID`.
    Instance,
    /// A probe in group `trace_recipe_PID` of kprobe_events / uprobe_events.
    Probe,
}

/// One thing of a trace-recipe run found in tracefs or in the journal folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Leftover {
    /// What it is.
    pub kind: LeftKind,
    /// The journal path, `instances/NAME`, or `GROUP/EVENT in FILE`.
    pub name: String,
    /// The pid of the run it belongs to, when its name holds one.
    pub pid: Option<u32>,
}

/// Things of trace-recipe runs: left behind by dead runs, or in use by live ones.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct Leftovers {
    /// Of dead runs: `reset` removes them.
    pub left_behind: Vec<Leftover>,
    /// Of running trace-recipe processes: `reset` keeps them.
    pub in_use: Vec<Leftover>,
}

impl Leftovers {
    /// Reads them: [`dead_journals`], [`our_instances`], [`our_probes`].
    pub fn read(tracefs: &Tracefs) -> Leftovers {
        let mut l = Leftovers::default();
        for j in dead_journals() {
            let pid = j
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.strip_prefix("run-"))
                .and_then(|s| s.parse().ok());
            l.left_behind.push(Leftover {
                kind: LeftKind::Journal,
                name: j.display().to_string(),
                pid,
            });
        }
        for i in our_instances(tracefs) {
            let item = Leftover {
                kind: LeftKind::Instance,
                name: format!("instances/{}", i.name),
                pid: i.pid,
            };
            match i.alive {
                true => l.in_use.push(item),
                false => l.left_behind.push(item),
            }
        }
        for p in our_probes(tracefs) {
            let item = Leftover {
                kind: LeftKind::Probe,
                name: format!("{}/{} in {}", p.group, p.event, p.file),
                pid: p
                    .group
                    .strip_prefix(crate::plan::PROBE_GROUP_PREFIX)
                    .and_then(|s| s.parse().ok()),
            };
            match p.alive {
                true => l.in_use.push(item),
                false => l.left_behind.push(item),
            }
        }
        l
    }
}

/// `status --format json`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StatusJson {
    /// Layout version.
    pub format_version: u32,
    /// Where tracefs is mounted.
    pub tracefs: String,
    /// True when a dead run left something behind (`status --exit-code` exits 1).
    pub left_behind: bool,
    /// What runs left behind and what live runs use.
    pub trace_recipe: Leftovers,
    /// The human `status` report, one line per entry (top-level state that
    /// differs from a clean boot, other tools' instances, ...).
    pub lines: Vec<String>,
}

/// One action of `reset`, done or (with `--dry-run`) to be done.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ResetAction {
    /// False when the action failed (`reset` then exits 3).
    pub ok: bool,
    /// What was, or would be, done: `removed instances/...`, `would remove ...`.
    pub message: String,
}

/// `reset --format json`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ResetJson {
    /// Layout version.
    pub format_version: u32,
    /// True for `--dry-run`: nothing was changed.
    pub dry_run: bool,
    /// True for `--all`.
    pub all: bool,
    /// Every action, in order.
    pub actions: Vec<ResetAction>,
}

/// The `would ...` actions of `reset --dry-run`: exactly what [`crate::status::reset`]
/// acts on (dead journals rolled back, dead runs' instances and probes removed;
/// live runs' things kept).
pub fn reset_plan(l: &Leftovers) -> Vec<ResetAction> {
    let mut v: Vec<ResetAction> = l
        .left_behind
        .iter()
        .map(|i| ResetAction {
            ok: true,
            message: match i.kind {
                LeftKind::Journal => format!("would roll back the journal {}", i.name),
                LeftKind::Instance | LeftKind::Probe => format!("would remove {}", i.name),
            },
        })
        .collect();
    v.extend(l.in_use.iter().map(|i| ResetAction {
        ok: true,
        message: format!(
            "would keep {}: in use by running trace-recipe pid {}",
            i.name,
            i.pid.unwrap_or(0)
        ),
    }));
    v
}

/// `run --format json`: one object on stdout when the run ends.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunJson {
    /// Layout version.
    pub format_version: u32,
    /// trace-recipe's exit code for this run (see README "Exit codes").
    pub exit_code: i32,
    /// The recipe's name, when it was loaded.
    pub recipe: Option<String>,
    /// The output folder (trace.dat, report.json, summary.txt, recipe.toml);
    /// `null` when the run failed before writing one.
    pub output: Option<String>,
    /// The bundle of the output folder (`--bundle`, `[output] bundle`), else `null`.
    pub bundle: Option<String>,
    /// Why recording stopped.
    pub stop_reason: Option<String>,
    /// How the workload ended, when there was one.
    pub workload_exit: Option<WorkloadExit>,
    /// The signal that ended the run, if one did.
    pub signal: Option<i32>,
    /// Events in trace.dat.
    pub total_events: u64,
    /// Events per `system:event`.
    pub events: BTreeMap<String, u64>,
    /// Events the kernel lost (overrun + dropped), all CPUs.
    pub lost_total: u64,
    /// `lost_total` as a percentage of recorded plus lost events.
    pub lost_percent: f64,
    /// `[output] max_lost_percent`, when the run lost more than that.
    pub lost_limit_exceeded: Option<f64>,
    /// Undo steps that failed (run `trace-recipe reset`).
    pub undo_failures: Vec<String>,
    /// The journal kept for `trace-recipe reset` when the rollback was
    /// incomplete (exit code 7).
    pub journal_kept: Option<String>,
    /// The recipe's `[[expect]]` results, as in report.json.
    pub expectations: Vec<crate::report::ExpectResult>,
    /// Why the run failed, when it did (diagnostics rendered as text).
    pub error: Option<String>,
}

impl RunJson {
    /// The object of a run that ended with `exit_code` and `error` before
    /// writing an output folder.
    pub fn failed(exit_code: i32, error: String) -> RunJson {
        RunJson {
            format_version: FORMAT_VERSION,
            exit_code,
            recipe: None,
            output: None,
            bundle: None,
            stop_reason: None,
            workload_exit: None,
            signal: None,
            total_events: 0,
            events: BTreeMap::new(),
            lost_total: 0,
            lost_percent: 0.0,
            lost_limit_exceeded: None,
            undo_failures: Vec::new(),
            journal_kept: None,
            expectations: Vec::new(),
            error: Some(error),
        }
    }

    /// The object of a finished run.
    pub fn finished(o: &crate::run::RunOutcome, exit_code: i32) -> RunJson {
        RunJson {
            format_version: FORMAT_VERSION,
            exit_code,
            recipe: o.report.recipe.clone(),
            output: Some(o.dir.display().to_string()),
            bundle: o.bundle.as_ref().map(|b| b.display().to_string()),
            stop_reason: o.report.stop_reason.clone(),
            workload_exit: o.report.workload.as_ref().map(|w| w.exit),
            signal: o.signal.map(crate::run::Signal::number),
            total_events: o.report.total_events,
            events: o.report.events.clone(),
            lost_total: o.report.lost_total,
            lost_percent: o.report.lost_percent,
            lost_limit_exceeded: o.lost_limit_exceeded,
            undo_failures: o.rollback.failures.iter().map(|e| e.to_string()).collect(),
            journal_kept: o
                .rollback
                .journal_kept
                .as_ref()
                .map(|j| j.display().to_string()),
            expectations: o.report.expectations.clone(),
            error: None,
        }
    }
}

/// The machine-readable outputs that have a schema under `schema/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchemaOf {
    /// `check --format json` (schema/check.schema.json).
    Check,
    /// `status --format json` (schema/status.schema.json).
    Status,
    /// `reset --format json` (schema/reset.schema.json).
    Reset,
    /// `run --format json` (schema/run.schema.json).
    Run,
    /// `list --format json` (schema/list.schema.json).
    List,
    /// `events --format json` (schema/events.schema.json).
    Events,
    /// `diff --format json` (schema/diff.schema.json).
    Diff,
    /// `fleet --format json` (schema/fleet.schema.json).
    Fleet,
    /// `facts` (schema/facts.schema.json): a kernel's ftrace facts.
    Facts,
}

/// The JSON Schema (draft 2020-12) of `of`'s output, pretty-printed.
pub fn schema_of(of: SchemaOf) -> String {
    let schema = match of {
        SchemaOf::Check => schemars::schema_for!(CheckJson),
        SchemaOf::Status => schemars::schema_for!(StatusJson),
        SchemaOf::Reset => schemars::schema_for!(ResetJson),
        SchemaOf::Run => schemars::schema_for!(RunJson),
        SchemaOf::List => schemars::schema_for!(crate::library::ListJson),
        SchemaOf::Events => schemars::schema_for!(crate::inventory::EventsJson),
        SchemaOf::Diff => schemars::schema_for!(crate::diff::DiffReport),
        SchemaOf::Fleet => schemars::schema_for!(crate::fleet::FleetReport),
        SchemaOf::Facts => schemars::schema_for!(crate::kernel::KernelFacts),
    };
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}
