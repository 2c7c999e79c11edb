//! A run carried by a bundle (or an output folder) replayed on this host:
//! `check --against` and `rerun`.
//!
//! ```text
//! BUNDLE | DIR ──StoredRun::open──► members (recipe.source.toml, recipe.base-N.toml,
//!                                    facts.json) + manifest (params, workload)
//!   ──recipe::load_with(Chain::Stored, params as --set)──► the recipe as it ran there
//!   ──differences(recipe, facts.json, this kernel's facts)──► what changed that matters
//! ```
//!
//! The recipe is loaded from the run's own files: `recipe.source.toml` with its
//! `extends` chain read from `recipe.base-N.toml` (a folder written before runs
//! kept the recipe as written falls back to the rendered `recipe.toml`), and
//! rendered with the params the run used (the manifest's, from report.json).
//!
//! Commands a foreign bundle would start (its workload, `[scope] command`,
//! `[collect]`) are listed by [`foreign_commands`]; the CLI starts none of them
//! unless the user agrees (`rerun --allow-commands`, or yes on a terminal).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Serialize;

use crate::bundle::{BundleError, Manifest, Opened};
use crate::kernel::{FactsError, KernelFacts};
use crate::recipe::{LoadError, LoadedRecipe, ParamValue, Recipe};

/// A run's stored files, from a bundle (checked and unpacked into a temporary
/// folder that lives as long as this) or an output folder.
#[derive(Debug)]
pub struct StoredRun {
    /// The folder holding the run's files.
    pub dir: PathBuf,
    /// The bundle's manifest; for a folder, the manifest `pack` would write.
    pub manifest: Manifest,
    _opened: Option<Opened>,
}

impl StoredRun {
    /// Opens `path`: an output folder of a run, or a bundle (checked like
    /// `unpack` does). Errors: a refused bundle, a folder that is not a run's.
    pub fn open(path: &Path) -> Result<StoredRun, BundleError> {
        if path.is_dir() {
            use crate::untrusted::{Kind, present_in};
            for (missing, kind) in [("recipe.toml", Kind::Recipe), ("report.json", Kind::Report)] {
                if !present_in(path, missing, kind)? {
                    return Err(BundleError::NotOutputFolder {
                        dir: path.to_path_buf(),
                        missing,
                    });
                }
            }
            let manifest = crate::bundle::manifest_for(path, BTreeMap::new(), true)?;
            return Ok(StoredRun {
                dir: path.to_path_buf(),
                manifest,
                _opened: None,
            });
        }
        // Everything but the recording: the recipe's files (bases and
        // templates may be any member), report.json and facts.json.
        let opened = crate::bundle::open(path, &|name| name != "trace.dat")?;
        if !opened.dir.path().join("recipe.toml").is_file() {
            return Err(BundleError::Refused {
                path: path.to_path_buf(),
                reason: "it holds no recipe.toml: it is not the bundle of a run".into(),
            });
        }
        Ok(StoredRun {
            dir: opened.dir.path().to_path_buf(),
            manifest: opened.manifest.clone(),
            _opened: Some(opened),
        })
    }

    /// The recipe file to load with `crate::recipe::Chain::Stored`:
    /// `recipe.source.toml` (the recipe as written), or the rendered
    /// `recipe.toml` (which stands alone) when the run did not keep it.
    pub fn recipe(&self) -> PathBuf {
        let written = self.dir.join("recipe.source.toml");
        match written.is_file() {
            true => written,
            false => self.dir.join("recipe.toml"),
        }
    }

    /// The run's params as `--set KEY=VALUE` arguments, each replaced by the
    /// override of the same key in `overrides`, then the other overrides (an
    /// override that is not `KEY=VALUE` is kept for `--set`'s own error).
    pub fn sets(&self, overrides: &[String]) -> Vec<String> {
        let key = |s: &str| s.split_once('=').map(|(k, _)| k.trim().to_string());
        let mut out: Vec<String> = self
            .manifest
            .params
            .iter()
            .filter_map(|(k, v)| {
                let v: ParamValue = serde_json::from_value(v.clone()).ok()?;
                Some(format!("{k}={}", param_text(&v)))
            })
            .collect();
        for o in overrides {
            match out
                .iter()
                .position(|s| key(s).is_some() && key(s) == key(o))
            {
                Some(i) => out[i] = o.clone(),
                None => out.push(o.clone()),
            }
        }
        out
    }

    /// The kernel facts the run was validated against (its `facts.json`).
    /// Errors: the run has none, or they do not parse.
    pub fn facts(&self) -> Result<KernelFacts, FactsError> {
        let path = self.dir.join("facts.json");
        crate::untrusted::member(&self.dir, &path).map_err(|r| FactsError::Read {
            path: crate::untrusted::escape_path(&path),
            source: r.into_io(),
        })?;
        KernelFacts::load(&path)
    }

    /// The workload `rerun` passes as `-- COMMAND`: the run's own, unless it was
    /// the recipe's `[scope] command` (`recipe_command`, rendered with the run's
    /// params): then none, so the recipe renders it again (with `--set` applied).
    pub fn workload(&self, recipe_command: &[String]) -> Vec<String> {
        match &self.manifest.workload {
            Some(w) if w.as_slice() != recipe_command => w.clone(),
            _ => Vec::new(),
        }
    }
}

/// A param value as `--set` takes it.
fn param_text(v: &ParamValue) -> String {
    match v {
        ParamValue::Bool(b) => b.to_string(),
        ParamValue::Int(i) => i.to_string(),
        ParamValue::Float(f) => f.to_string(),
        ParamValue::Str(s) => s.clone(),
    }
}

/// The commands a run of `recipe` with workload `command` (empty: the recipe's
/// `[scope] command`) starts, each with what it is for: `workload`,
/// `collect before`, `collect after`.
pub fn foreign_commands(recipe: &Recipe, command: &[String]) -> Vec<(&'static str, Vec<String>)> {
    let workload = match command.is_empty() {
        true => &recipe.scope.command,
        false => command,
    };
    let mut out = Vec::new();
    if !workload.is_empty() {
        out.push(("workload", workload.to_vec()));
    }
    for (phase, list) in [
        ("collect before", &recipe.collect.before),
        ("collect after", &recipe.collect.after),
    ] {
        out.extend(list.iter().filter_map(|c| Some((phase, c.argv()?))));
    }
    out
}

/// The modest default of a ring buffer a stored run may take without asking:
/// 64 MiB in all (`[buffer] size_kb` × this machine's CPUs).
pub const MODEST_BUFFER_TOTAL_KB: u64 = 64 << 10;

/// The modest default of a stored run's `duration`: 10 minutes.
pub const MODEST_DURATION: std::time::Duration = std::time::Duration::from_secs(600);

/// What a stored run asks of this machine beyond a modest default, listed for
/// consent like its commands (`rerun --allow-resources`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct MachineAsk {
    /// `ring buffer` (`[buffer] size_kb` × CPUs), `duration`, or `cpu time`
    /// (a tracer that samples CPUs: hwlat with interrupts off, osnoise,
    /// timerlat).
    pub what: String,
    /// What the recipe asks, in words (`262144 KiB per CPU × 2 CPUs = 512 MiB`).
    pub asked: String,
    /// The modest default it is over (`at most 64 MiB in all`).
    pub default: String,
}

/// Which `--duration`/`--buffer-size-kb` the user gave on the command line:
/// what they set is theirs, not asked by the bundle.
#[derive(Debug, Clone, Copy, Default)]
pub struct UserSet {
    /// `--duration` was given.
    pub duration: bool,
    /// `--buffer-size-kb` was given.
    pub buffer_size_kb: bool,
}

/// What `recipe` asks of a machine with `cpus` CPUs beyond the modest defaults
/// ([`MODEST_BUFFER_TOTAL_KB`], [`MODEST_DURATION`], no CPU-sampling tracer),
/// leaving out what the user set (`user`). A value that does not parse is
/// left to validation, which refuses it.
pub fn machine_asks(recipe: &Recipe, cpus: u64, user: UserSet) -> Vec<MachineAsk> {
    let mut out = Vec::new();
    if let Some(kb) = recipe.buffer.size_kb.filter(|_| !user.buffer_size_kb) {
        let total = kb.saturating_mul(cpus.max(1));
        if total > MODEST_BUFFER_TOTAL_KB {
            out.push(MachineAsk {
                what: "ring buffer".into(),
                asked: format!(
                    "{kb} KiB per CPU × {cpus} CPUs = {} MiB",
                    total.div_ceil(1024)
                ),
                default: format!("at most {} MiB in all", MODEST_BUFFER_TOTAL_KB / 1024),
            });
        }
    }
    if let Some(text) = recipe.duration.as_deref().filter(|_| !user.duration)
        && crate::recipe::parse_duration(text).is_ok_and(|d| d > MODEST_DURATION)
    {
        out.push(MachineAsk {
            what: "duration".into(),
            asked: crate::untrusted::escape(text).into_owned(),
            default: format!("at most {} minutes", MODEST_DURATION.as_secs() / 60),
        });
    }
    if let Some(t) = recipe.tracer.as_ref().and_then(|t| t.name.as_deref())
        && matches!(t, "hwlat" | "osnoise" | "timerlat")
    {
        out.push(MachineAsk {
            what: "cpu time".into(),
            asked: format!("the {t} tracer, which occupies the CPUs it samples"),
            default: "no tracer that samples CPUs".into(),
        });
    }
    out
}

/// The online CPUs of this machine (`sysconf(_SC_NPROCESSORS_ONLN)`, at least 1).
pub fn online_cpus() -> u64 {
    // SAFETY: sysconf reads a configuration value; it has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u64::try_from(n).unwrap_or(1).max(1)
}

/// [`MachineAsk`]s as lines for people, one a line: `  WHAT: ASKED (modest
/// default: DEFAULT)`.
pub fn asks_text(asks: &[MachineAsk]) -> String {
    asks.iter()
        .map(|a| {
            format!(
                "  {}: {} (modest default: {})\n",
                a.what, a.asked, a.default
            )
        })
        .collect()
}

/// One kernel fact that differs between the bundle's kernel and this one and
/// matters to the recipe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct FactDifference {
    /// What differs: `kernel release`, `cpus`, `event sched:sched_switch`,
    /// `event syscalls:sys_enter_openat field flags`, `kprobe target do_sys_open`,
    /// `feature kprobe_events`, `tracer function`, `trace clock`, ...
    pub what: String,
    /// Its value on the bundle's kernel (`present`, `absent`, a type, a count).
    pub bundle: String,
    /// Its value here.
    pub here: String,
}

fn diff(
    what: impl Into<String>,
    bundle: impl Into<String>,
    here: impl Into<String>,
) -> FactDifference {
    FactDifference {
        what: what.into(),
        bundle: bundle.into(),
        here: here.into(),
    }
}

fn presence(b: bool) -> &'static str {
    if b { "present" } else { "absent" }
}

/// The differences between `bundle` (the facts the run was validated against)
/// and `here` that matter to `recipe`: kernel release and architecture, CPU
/// count, the trace clock, the events it enables or triggers on (missing, and
/// fields added, removed or of another type), its kprobe symbols and uprobe
/// files, and the features it uses (kprobe_events, uprobe_events, hist
/// triggers, snapshot, its tracer). Facts one side did not read are skipped.
pub fn differences(
    recipe: &Recipe,
    bundle: &KernelFacts,
    here: &KernelFacts,
) -> Vec<FactDifference> {
    let mut out = Vec::new();
    if bundle.release != here.release {
        out.push(diff("kernel release", &bundle.release, &here.release));
    }
    if bundle.arch != here.arch {
        out.push(diff("architecture", &bundle.arch, &here.arch));
    }
    if bundle.cpus.len() != here.cpus.len() {
        out.push(diff(
            "cpus",
            bundle.cpus.len().to_string(),
            here.cpus.len().to_string(),
        ));
    }
    match &recipe.buffer.clock {
        Some(c) => {
            let (b, h) = (bundle.clocks.contains(c), here.clocks.contains(c));
            if b != h {
                out.push(diff(format!("trace clock {c}"), presence(b), presence(h)));
            }
        }
        None if bundle.default_clock != here.default_clock => out.push(diff(
            "default trace clock (the recipe sets none)",
            &bundle.default_clock,
            &here.default_clock,
        )),
        None => {}
    }
    let patterns = recipe
        .events
        .iter()
        .map(|e| e.name.as_str())
        .chain(recipe.triggers.iter().filter_map(|t| t.event.as_deref()))
        .chain(recipe.triggers.iter().filter_map(|t| t.target.as_deref()));
    let mut names = std::collections::BTreeSet::new();
    for p in patterns {
        let p = if p.contains(':') {
            p.to_string()
        } else {
            format!("*:{p}")
        };
        names.extend(bundle.matching_events(&p).into_iter().map(str::to_string));
        names.extend(here.matching_events(&p).into_iter().map(str::to_string));
    }
    for name in &names {
        let (b, h) = (bundle.events.contains(name), here.events.contains(name));
        if b != h {
            out.push(diff(format!("event {name}"), presence(b), presence(h)));
            continue;
        }
        out.extend(field_differences(name, bundle, here));
    }
    let symbol = |target: &str| {
        let s = target.split_once('+').map_or(target, |(s, _)| s);
        s.to_string()
    };
    for p in &recipe.kprobes {
        let s = symbol(&p.target);
        if let (Some(bs), Some(hs)) = (bundle.kernel_symbols(), here.kernel_symbols()) {
            let (b, h) = (bs.contains(&s), hs.contains(&s));
            if b != h {
                out.push(diff(format!("kprobe target {s}"), presence(b), presence(h)));
            }
        }
    }
    for p in &recipe.uprobes {
        if let Some((file, _)) = crate::host::split_target(&p.target)
            && !Path::new(file).is_file()
        {
            out.push(diff(
                format!("uprobe target file {file}"),
                "present (the run probed it)",
                "absent",
            ));
        }
    }
    let mut feature = |name: &str, used: bool, b: bool, h: bool| {
        if used && b != h {
            out.push(diff(format!("feature {name}"), presence(b), presence(h)));
        }
    };
    feature(
        "kprobe_events",
        !recipe.kprobes.is_empty(),
        bundle.has_kprobe_events,
        here.has_kprobe_events,
    );
    feature(
        "uprobe_events",
        !recipe.uprobes.is_empty(),
        bundle.has_uprobe_events,
        here.has_uprobe_events,
    );
    let action = |a: &str| recipe.triggers.iter().any(|t| t.action.starts_with(a));
    feature(
        "hist triggers",
        action("hist"),
        bundle.has_hist_triggers,
        here.has_hist_triggers,
    );
    feature(
        "snapshot",
        action("snapshot"),
        bundle.has_snapshot,
        here.has_snapshot,
    );
    if let Some(t) = recipe.tracer.as_ref().and_then(|t| t.name.as_deref()) {
        let (b, h) = (
            bundle.tracers.iter().any(|x| x == t),
            here.tracers.iter().any(|x| x == t),
        );
        if b != h {
            out.push(diff(format!("tracer {t}"), presence(b), presence(h)));
        }
    }
    out
}

/// Fields of `event` added, removed or of another type (C type, size,
/// signedness) between the two kernels; nothing when either format is unknown.
fn field_differences(event: &str, bundle: &KernelFacts, here: &KernelFacts) -> Vec<FactDifference> {
    let (Some(b), Some(h)) = (bundle.format(event), here.format(event)) else {
        return Vec::new();
    };
    let describe = |f: &tracedat::Field| {
        let ty = match f.array_len {
            Some(n) if n > 0 && !f.type_name.ends_with(']') => format!("{}[{n}]", f.type_name),
            _ => f.type_name.clone(),
        };
        format!(
            "{ty} ({} bytes, {})",
            f.size,
            if f.signed { "signed" } else { "unsigned" }
        )
    };
    let index = |fields: &[tracedat::Field]| -> BTreeMap<String, String> {
        fields
            .iter()
            .map(|f| (f.name.clone(), describe(f)))
            .collect()
    };
    let (bf, hf) = (index(&b.fields), index(&h.fields));
    let mut out = Vec::new();
    for name in bf.keys().chain(hf.keys().filter(|k| !bf.contains_key(*k))) {
        let (x, y) = (bf.get(name), hf.get(name));
        if x != y {
            out.push(diff(
                format!("event {event} field {name}"),
                x.map_or("absent", String::as_str),
                y.map_or("absent", String::as_str),
            ));
        }
    }
    out
}

/// `check --against` as text: the differences under a heading naming the
/// bundle's kernel, or a line saying there are none.
pub fn differences_text(bundle: &KernelFacts, diffs: &[FactDifference]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if diffs.is_empty() {
        let _ = writeln!(
            s,
            "no difference that matters to this recipe between the bundle's kernel ({} {}, {} cpus) and this one",
            bundle.release,
            bundle.arch,
            bundle.cpus.len()
        );
        return s;
    }
    let _ = writeln!(
        s,
        "differences that matter to this recipe (the bundle's kernel -> this one):"
    );
    let width = diffs.iter().map(|d| d.what.len()).max().unwrap_or(0);
    for d in diffs {
        let _ = writeln!(s, "  {:width$}  {} -> {}", d.what, d.bundle, d.here);
    }
    s
}

/// What replaying a stored run starts and with which arguments: the recipe
/// rendered once, whose commands are listed for consent and which the run then
/// runs as it is (never rendered again, so a recipe whose text depends on
/// `{{ started }}` or anything else that changes between renders cannot list
/// one command and start another).
#[derive(Debug)]
pub struct Replay {
    /// `--set` arguments: the run's params, then the user's.
    pub sets: Vec<String>,
    /// The workload to pass as `-- COMMAND` (empty: the recipe's `[scope] command`).
    pub command: Vec<String>,
    /// The commands that come from the run, not from the user, with what each
    /// is for ([`foreign_commands`]); empty when the recipe does not load (the
    /// run then stops at validation, before starting anything).
    pub foreign: Vec<(&'static str, Vec<String>)>,
    /// The recipe rendered with `sets` (its text and model): what `foreign`
    /// lists, and what `rerun` runs and `check --against` validates; or why it
    /// could not be loaded.
    pub rendered: Result<LoadedRecipe, LoadError>,
}

impl StoredRun {
    /// What a replay with the user's `overrides` (`--set`) and `command` (`--
    /// COMMAND`, empty for the run's own) starts. The recipe is loaded twice:
    /// with the run's params alone, to tell whether its workload was the
    /// recipe's `[scope] command`, and with the overrides: that render is the
    /// one the run runs ([`Replay::rendered`]).
    pub fn replay(&self, overrides: &[String], command: Vec<String>) -> Replay {
        let builtins = crate::recipe::Builtins {
            started: jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S").to_string(),
        };
        let load = |sets: &[String]| {
            crate::recipe::load_with(
                &self.recipe(),
                sets,
                &builtins,
                crate::recipe::Chain::Stored,
            )
        };
        let own = !command.is_empty();
        let command = match own {
            true => command,
            false => {
                let as_ran = load(&self.sets(&[])).ok();
                self.workload(as_ran.as_ref().map_or(&[][..], |l| &l.recipe.scope.command))
            }
        };
        let sets = self.sets(overrides);
        let rendered = load(&sets);
        let foreign = rendered.as_ref().map_or_else(
            |_| Vec::new(),
            |l| {
                let mut f = foreign_commands(&l.recipe, &command);
                if own {
                    f.retain(|(what, _)| *what != "workload");
                }
                f
            },
        );
        Replay {
            sets,
            command,
            foreign,
            rendered,
        }
    }
}

/// `check --against --format json`: the bundle, what differs here, what a
/// rerun starts (the `against` member of `check`'s JSON).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgainstJson {
    /// The bundle or output folder as given.
    pub bundle: String,
    /// The kernel release the run was recorded on.
    pub kernel_release: Option<String>,
    /// The params the recipe was checked with, as `KEY=VALUE`.
    pub params: Vec<String>,
    /// Kernel facts that differ between the bundle's kernel and this one and
    /// matter to the recipe; `null` when the bundle carries no facts.json.
    pub differences: Option<Vec<FactDifference>>,
    /// The commands a `rerun` would start that come from the bundle.
    pub commands: Vec<ForeignCommand>,
    /// What a `rerun` would take of this machine beyond the modest defaults
    /// (`rerun --allow-resources` agrees to it).
    pub asks: Vec<MachineAsk>,
}

/// A command that comes from a bundle.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ForeignCommand {
    /// `workload`, `collect before` or `collect after`.
    pub purpose: String,
    /// The argv.
    pub argv: Vec<String>,
}

/// The commands of a [`Replay`] as lines for people, one command a line:
/// `  PURPOSE: ["ARG", "ARG", ...]`, every argument in double quotes with its
/// control and invisible format characters, backslashes and quotes escaped
/// ([`crate::untrusted::quote`]), so what is read on the screen is what
/// starts: no argument can erase the line, return the cursor, retitle the
/// terminal or fake another command. A command holding such characters is
/// followed by a line that says so.
pub fn commands_text(foreign: &[(&'static str, Vec<String>)]) -> String {
    foreign
        .iter()
        .map(|(what, argv)| {
            let args: Vec<String> = argv.iter().map(|a| crate::untrusted::quote(a)).collect();
            let mut line = format!("  {what}: [{}]\n", args.join(", "));
            if argv.iter().any(|a| crate::untrusted::has_hidden(a)) {
                line.push_str(&format!(
                    "    ^ warning: this {what} command holds control or invisible characters (shown escaped as \\u{{..}}): read it with care\n"
                ));
            }
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::kernel::test_facts as facts;

    fn recipe(text: &str) -> Recipe {
        let builtins = crate::recipe::Builtins::default();
        crate::recipe::load_str(Path::new("r.toml"), text, &[], &builtins)
            .unwrap()
            .recipe
    }

    #[test]
    fn differences_name_what_the_recipe_uses_and_changed() {
        let r = recipe(
            "name = \"r\"\n[[events]]\nname = \"sched:sched_switch\"\n[[events]]\nname = \"syscalls:sys_enter_openat\"\n[[kprobes]]\nevent = \"open\"\nkind = \"kprobe\"\ntarget = \"do_sys_openat2\"\n",
        );
        let (debian, here) = (facts("debian-6.1"), facts("host"));
        let got: Vec<String> = differences(&r, &debian, &here)
            .iter()
            .map(|d| format!("{}: {} -> {}", d.what, d.bundle, d.here))
            .collect();
        assert_eq!(
            got,
            [
                "kernel release: 6.1.0-56-amd64 -> 6.18.44-fc-v782",
                "cpus: 1 -> 2",
                "event sched:sched_switch field next_comm: char[16] (16 bytes, signed) -> char[16] (16 bytes, unsigned)",
                "event sched:sched_switch field prev_comm: char[16] (16 bytes, signed) -> char[16] (16 bytes, unsigned)",
                "feature kprobe_events: present -> absent",
            ],
            "{got:#?}"
        );
        // Nothing differs between a kernel and itself; a recipe that uses none
        // of the changed facts sees only the kernel-wide ones.
        assert!(differences(&r, &here, &here).is_empty());
        let plain = recipe("name = \"p\"\n[[events]]\nname = \"syscalls:sys_enter_openat\"\n");
        assert_eq!(differences(&plain, &debian, &here).len(), 2);
    }
}
