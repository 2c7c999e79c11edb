//! The flight recorder's arm record: what `run` of a `[buffer] persistent`
//! recipe leaves for `trace-recipe collect-boot` after the next boot. A folder
//! (the run folder, and a copy in [`state_dir`]) with `arm.json` ([`ArmRecord`]:
//! the instance, this boot's id, the before-image of every file the arming
//! changed), `kallsyms` and `modules` of the armed boot, and `recipe.toml`.
//!
//! A boot-mapped instance (Linux 6.12+, Documentation/trace/debugging.rst)
//! keeps its ring buffer in memory reserved at boot (`reserve_mem=`); after a
//! reboot that kept RAM, the same instance holds the last boot's events and its
//! `last_boot_info` tells how far the kernel's text moved (KASLR).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::apply::journal::Undo;
use crate::tracefs::Tracefs;
use crate::untrusted::{Kind, read_in, read_optional_in};

/// Where arm records are kept across reboots, one folder per instance, unless
/// [`STATE_DIR_ENV`] says otherwise.
pub(crate) const STATE_DIR: &str = "/var/lib/trace-recipe/boot";
/// Environment variable overriding [`STATE_DIR`].
pub(crate) const STATE_DIR_ENV: &str = "TRACE_RECIPE_BOOT_STATE";
/// The arm record's format version written by this build.
const ARM_VERSION: u32 = 1;

/// The folder of instance `name`'s arm record: `$TRACE_RECIPE_BOOT_STATE/NAME`,
/// else `/var/lib/trace-recipe/boot/NAME`.
pub(crate) fn state_dir(name: &str) -> PathBuf {
    std::env::var_os(STATE_DIR_ENV)
        .map_or_else(|| PathBuf::from(STATE_DIR), PathBuf::from)
        .join(name)
}

/// `arm.json`: how a flight recorder was armed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ArmRecord {
    /// Always `trace-recipe-arm`.
    pub(crate) format: String,
    /// `ARM_VERSION` of the writer.
    pub(crate) version: u32,
    /// The boot-mapped instance's name.
    pub(crate) instance: String,
    /// The recipe's name.
    pub(crate) recipe: String,
    /// /proc/sys/kernel/random/boot_id of the armed boot.
    pub(crate) boot_id: String,
    /// `uname -r` of the armed boot.
    pub(crate) release: String,
    /// When it was armed (RFC 3339).
    pub(crate) armed_at: String,
    /// The instance's files before arming (`tracing_on`, `set_event`, ...), as read.
    pub(crate) before: BTreeMap<String, String>,
    /// How to release the instance: the arming's undos in the order they were
    /// made (performed in reverse).
    pub(crate) undo: Vec<Undo>,
}

impl ArmRecord {
    /// A record for `instance` armed by recipe `recipe` now.
    pub(crate) fn new(
        instance: &str,
        recipe: &str,
        before: BTreeMap<String, String>,
        undo: Vec<Undo>,
    ) -> ArmRecord {
        ArmRecord {
            format: "trace-recipe-arm".into(),
            version: ARM_VERSION,
            instance: instance.into(),
            recipe: recipe.into(),
            boot_id: boot_id(),
            release: rustix::system::uname()
                .release()
                .to_string_lossy()
                .into_owned(),
            armed_at: jiff::Timestamp::now().to_string(),
            before,
            undo,
        }
    }

    /// Reads `arm.json` of folder `dir` (hostile: bounded, a regular file, a
    /// member of `dir`). Errors say what is wrong, for the user.
    pub(crate) fn read(dir: &Path) -> Result<ArmRecord, String> {
        let name = crate::untrusted::escape_path(dir);
        let bytes = read_in(dir, "arm.json", Kind::Facts)
            .map_err(|e| format!("{name} holds no readable arm record (arm.json): {e}"))?;
        let r: ArmRecord = crate::untrusted::parse_json(&bytes, Kind::Facts)
            .map_err(|e| format!("{name}/arm.json is not a trace-recipe arm record: {e}"))?;
        if r.format != "trace-recipe-arm" || r.version > ARM_VERSION {
            return Err(format!(
                "{name}/arm.json is not an arm record this trace-recipe reads (format {}, version {})",
                crate::untrusted::escape(&r.format),
                r.version
            ));
        }
        // Only the instance's own files may be released through it.
        let prefix = format!("instances/{}/", r.instance);
        let confined = r.undo.iter().all(|u| match u {
            Undo::Write { file, .. } => file.starts_with(&prefix) && !file.contains(".."),
            _ => false,
        });
        if r.instance.is_empty() || r.instance.contains(['/', '.']) || !confined {
            return Err(format!(
                "{name}/arm.json names files outside its instance's folder: refused"
            ));
        }
        Ok(r)
    }

    /// Writes the record, `kallsyms`, `modules` and `recipe` (the recipe as
    /// run) into `dir`, creating it (mode 0700).
    pub(crate) fn save(
        &self,
        dir: &Path,
        kallsyms: &[u8],
        modules: &[u8],
        recipe: &[u8],
    ) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::write(dir.join("kallsyms"), kallsyms)?;
        std::fs::write(dir.join("modules"), modules)?;
        std::fs::write(dir.join("recipe.toml"), recipe)?;
        std::fs::write(dir.join("arm.json"), crate::output::to_json(self))
    }
}

/// The flight recorders armed in this boot: the boot-mapped instances whose
/// arm record (in [`state_dir`]) names this boot.
pub(crate) fn armed_now(tracefs: &Tracefs) -> Vec<ArmRecord> {
    let now = boot_id();
    crate::kernel::boot_instances(tracefs)
        .iter()
        .filter_map(|n| ArmRecord::read(&state_dir(n)).ok())
        .filter(|r| r.boot_id == now)
        .collect()
}

/// The armed boot's kallsyms from arm record folder `dir`, if it has one.
pub(crate) fn armed_kallsyms(dir: &Path) -> Result<Option<Vec<u8>>, String> {
    read_optional_in(dir, "kallsyms", Kind::Facts).map_err(|e| e.to_string())
}

/// This boot's id (/proc/sys/kernel/random/boot_id), or "" when unreadable.
pub(crate) fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The files of an instance read into [`ArmRecord::before`].
pub(crate) const STATE_FILES: &[&str] = &[
    "tracing_on",
    "set_event",
    "current_tracer",
    "trace_clock",
    "buffer_size_kb",
    "last_boot_info",
];

/// The instance's [`STATE_FILES`] as they read now (unreadable ones left out).
pub(crate) fn instance_state(tracefs: &Tracefs, name: &str) -> BTreeMap<String, String> {
    STATE_FILES
        .iter()
        .filter_map(|f| {
            let v = tracefs.read(&format!("instances/{name}/{f}")).ok()?;
            Some((f.to_string(), v))
        })
        .collect()
}

/// `last_boot_info`'s text delta: `text delta: N` (bytes the kernel's text
/// moved between the last boot and this one, this boot minus the last;
/// kernel/trace/trace.c). `None` when absent or unparsable.
pub(crate) fn text_delta(last_boot_info: &str) -> Option<i64> {
    last_boot_info.lines().find_map(|l| {
        l.trim()
            .strip_prefix("text delta:")
            .and_then(|v| v.trim().parse().ok())
    })
}

/// `kallsyms` (this boot's /proc/kallsyms text) with every address moved back
/// by `delta` ([`text_delta`]): the last boot's addresses, for symbols in the
/// kernel's text and data (modules load elsewhere each boot; their lines are
/// dropped). Absolute symbols (`A`/`a`) are kept as they are.
pub(crate) fn shift_kallsyms(kallsyms: &[u8], delta: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(kallsyms.len());
    for line in kallsyms.split(|&b| b == b'\n') {
        let Ok(text) = std::str::from_utf8(line) else {
            continue;
        };
        let mut parts = text.splitn(3, ' ');
        let (Some(addr), Some(kind), Some(rest)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if rest.contains('[') {
            continue;
        }
        let Ok(a) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let moved = match kind {
            "A" | "a" => a,
            _ => a.wrapping_sub(delta as u64),
        };
        out.extend_from_slice(format!("{moved:016x} {kind} {rest}\n").as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_boot_info_gives_the_text_delta() {
        assert_eq!(
            text_delta("text delta:\t-18874368\ndata delta:\t-18874368\n"),
            Some(-18874368)
        );
        assert_eq!(text_delta("# Current\n"), None);
    }

    #[test]
    fn kallsyms_move_back_by_the_delta_and_modules_are_dropped() {
        let now = b"0000000000000000 A fixed_percpu_data\nffffffff82000000 T _stext\nffffffffc0000000 t foo\t[mod]\n";
        let last = shift_kallsyms(now, -0x100000);
        assert_eq!(
            String::from_utf8(last).unwrap(),
            "0000000000000000 A fixed_percpu_data\nffffffff82100000 T _stext\n"
        );
    }
}
