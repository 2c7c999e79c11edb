//! A test scenario on the real kernel: a recipe written into a temp folder,
//! `trace-recipe run` on it with arguments and a workload, the exit code
//! asserted, and tracefs found as it was when the scenario began.
//!
//! ```ignore
//! let s = Scenario::new("name = \"x\"\n[[events]]\nname = \"sched:sched_switch\"\n");
//! let report = s.run_ok(&["true"]);
//! s.finish();
//! ```

use std::path::{Path, PathBuf};
use std::process::Output;

use super::{TracefsGuard, assert_exit, run_args, trace_recipe, write_recipe};

/// The tracefs lock with its snapshot, a temp folder, and the recipe `r.toml`
/// in it.
pub struct Scenario {
    /// Holds the tracefs lock; checks tracefs on drop (or at [`Scenario::finish`]).
    pub guard: TracefsGuard,
    dir: tempfile::TempDir,
    /// The recipe, `r.toml` in the scenario's folder.
    pub recipe: PathBuf,
}

impl Scenario {
    /// Takes the tracefs lock and writes `body` as the recipe `r.toml` of a new
    /// temp folder.
    pub fn new(body: &str) -> Scenario {
        let guard = TracefsGuard::acquire();
        let dir = tempfile::tempdir().unwrap();
        let recipe = write_recipe(dir.path(), "r.toml", body);
        Scenario { guard, dir, recipe }
    }

    /// Writes `body` as the recipe, in place of the one written before (for a
    /// recipe that names files made in the scenario's folder).
    pub fn set_recipe(&self, body: &str) {
        write_recipe(self.dir.path(), "r.toml", body);
    }

    /// The scenario's folder.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `name` in the scenario's folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The output folder of [`Scenario::run`]: `out` in the scenario's folder.
    pub fn out(&self) -> PathBuf {
        self.path("out")
    }

    /// Runs the recipe (`run RECIPE -o OUT ARGS... [-- CMD...]`) with flags
    /// `args` and workload `cmd`, and asserts exit `code`.
    #[track_caller]
    pub fn run(&self, args: &[&str], cmd: &[&str], code: i32) -> Output {
        let out = self.out();
        let o = trace_recipe(&run_args(&self.recipe, &out, args, cmd));
        assert_exit(&o, code);
        o
    }

    /// Runs the recipe with workload `cmd`, asserts it succeeded, and returns
    /// its `report.json`.
    #[track_caller]
    pub fn run_ok(&self, cmd: &[&str]) -> serde_json::Value {
        self.run(&[], cmd, 0);
        self.report()
    }

    /// The `report.json` of the run.
    pub fn report(&self) -> serde_json::Value {
        let path = self.out().join("report.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap()
    }

    /// Asserts tracefs is as it was when the scenario began.
    pub fn finish(self) {
        self.guard.assert_unchanged();
    }
}
