//! The run's output folder: created fresh, never inside /sys, /proc or tracefs,
//! files created with `O_EXCL | O_NOFOLLOW` so a planted symlink is never followed.

use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use tracedat::{CaptureMeta, CpuData};

/// The raw per-CPU files' folder inside the output folder (removed after trace.dat is written).
const RAW_DIR: &str = ".raw";

/// Why the output folder could not be used.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The folder is inside a pseudo file system.
    #[error("output folder {} is inside {place}\n  = help: choose a folder on a real file system with `-o DIR` or `[output] dir`", .path.display())]
    Forbidden {
        /// The folder.
        path: PathBuf,
        /// `/sys`, `/proc` or tracefs.
        place: String,
    },
    /// The folder is a symbolic link (never followed: it may point anywhere).
    #[error("output folder {} is a symbolic link; trace-recipe never writes through one\n  = help: give the real folder with `-o DIR`", .path.display())]
    Symlink {
        /// The folder.
        path: PathBuf,
    },
    /// The folder exists and holds files.
    #[error("output folder {} already exists and is not empty\n  = help: choose another folder with `-o DIR`, or remove it", .path.display())]
    NotEmpty {
        /// The folder.
        path: PathBuf,
    },
    /// Creating or writing failed.
    #[error("cannot write {}: {source}", .path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Writing trace.dat failed.
    #[error("cannot write {}: {source}", .path.display())]
    TraceDat {
        /// The file.
        path: PathBuf,
        /// Why.
        source: tracedat::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `path` with `.` and `..` folded lexically (no file system access).
fn fold_dots(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// A fresh output folder.
#[derive(Debug)]
pub struct OutputDir {
    path: PathBuf,
    /// Whether [`OutputDir::create`] made the folder (it did not exist).
    created: bool,
}

impl OutputDir {
    /// Creates `path` (and its parents). Errors: it lies inside /sys, /proc or
    /// `tracefs_root`; it exists and is not an empty folder; creation fails.
    pub fn create(path: &Path, tracefs_root: &Path) -> Result<OutputDir, OutputError> {
        let abs = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir().map_err(io(path))?.join(path)
        };
        if std::fs::symlink_metadata(&abs).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(OutputError::Symlink {
                path: path.to_path_buf(),
            });
        }
        // Resolve the deepest existing ancestor, so `..` and symlinks cannot hide the place.
        let mut existing = abs.as_path();
        let mut rest = Vec::new();
        while !existing.exists() {
            match (existing.parent(), existing.file_name()) {
                (Some(p), Some(n)) => {
                    rest.push(n.to_os_string());
                    existing = p;
                }
                _ => break,
            }
        }
        let mut real = existing.canonicalize().map_err(io(existing))?;
        for n in rest.iter().rev() {
            if n == ".." || n == "." {
                return Err(OutputError::Io {
                    path: abs.clone(),
                    source: std::io::Error::other(
                        "`..` or `.` in a folder that does not exist yet",
                    ),
                });
            }
            real.push(n);
        }
        let tracefs_real = tracefs_root
            .canonicalize()
            .unwrap_or_else(|_| tracefs_root.to_path_buf());
        // Both the path as written (`..` folded) and where it really leads count:
        // `/proc/self/cwd/x` leads elsewhere but names /proc.
        let lexical = fold_dots(&abs);
        for (place, root) in [
            ("tracefs", tracefs_real.as_path()),
            ("tracefs", tracefs_root),
            ("/sys", Path::new("/sys")),
            ("/proc", Path::new("/proc")),
        ] {
            if real.starts_with(root) || lexical.starts_with(root) {
                return Err(OutputError::Forbidden {
                    path: path.to_path_buf(),
                    place: place.to_string(),
                });
            }
        }
        match std::fs::symlink_metadata(&real) {
            Ok(m) if m.is_dir() => {
                if std::fs::read_dir(&real)
                    .map_err(io(&real))?
                    .next()
                    .is_some()
                {
                    return Err(OutputError::NotEmpty {
                        path: path.to_path_buf(),
                    });
                }
            }
            Ok(_) => {
                return Err(OutputError::NotEmpty {
                    path: path.to_path_buf(),
                });
            }
            Err(_) => {
                std::fs::create_dir_all(&real).map_err(io(&real))?;
                return Ok(OutputDir {
                    path: real,
                    created: true,
                });
            }
        }
        Ok(OutputDir {
            path: real,
            created: false,
        })
    }

    /// Removes what the run wrote here, for a run refused before it recorded
    /// anything, so that a retry with the same `-o` finds the folder as it was:
    /// gone when this run created it, else empty again (it was empty when
    /// [`OutputDir::create`] took it, so everything in it is the run's). Best
    /// effort: what cannot be removed stays.
    pub fn discard(&self) {
        if let Ok(entries) = std::fs::read_dir(&self.path) {
            for e in entries.flatten() {
                let p = e.path();
                let _ = match e.file_type() {
                    Ok(t) if t.is_dir() => std::fs::remove_dir_all(&p),
                    _ => std::fs::remove_file(&p),
                };
            }
        }
        if self.created {
            let _ = std::fs::remove_dir(&self.path);
        }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn create_new(&self, name: &str) -> Result<(std::fs::File, PathBuf), OutputError> {
        let p = self.path.join(name);
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&p)
            .map_err(io(&p))?;
        Ok((f, p))
    }

    /// Writes a new file `name` (fails if anything already exists there).
    pub fn write_new(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, OutputError> {
        let (mut f, p) = self.create_new(name)?;
        f.write_all(bytes).map_err(io(&p))?;
        Ok(p)
    }

    /// Creates sub-folder `name` if it does not exist yet (e.g. `hist`).
    pub fn create_dir(&self, name: &str) -> Result<PathBuf, OutputError> {
        let p = self.path.join(name);
        if !p.is_dir() {
            std::fs::create_dir(&p).map_err(io(&p))?;
        }
        Ok(p)
    }

    /// Creates the folder for raw per-CPU files.
    pub fn raw_dir(&self) -> Result<PathBuf, OutputError> {
        let p = self.path.join(RAW_DIR);
        std::fs::create_dir(&p).map_err(io(&p))?;
        Ok(p)
    }

    /// Removes the raw per-CPU files.
    pub fn remove_raw(&self) -> Result<(), OutputError> {
        let p = self.path.join(RAW_DIR);
        std::fs::remove_dir_all(&p).map_err(io(&p))
    }

    /// Removes file `name`.
    pub fn remove(&self, name: &str) -> Result<(), OutputError> {
        let p = self.path.join(name);
        std::fs::remove_file(&p).map_err(io(&p))
    }

    /// Writes trace.dat (v6) from the capture. When the recorded events name
    /// tasks that `saved_cmdlines` lacks (sched_switch, fork, exec, ...:
    /// [`tracedat::Comms`]), the file is written a second time with those
    /// comms added to its cmdlines section, so trace-cmd and KernelShark show
    /// them too.
    ///
    /// With `in_place` (the output file system filled up while recording),
    /// each piece of a raw file is punched out of it (`fallocate(2)`,
    /// `FALLOC_FL_PUNCH_HOLE`) once copied, so the copy needs little more room
    /// than the raw files already take, and the file is written once, with
    /// `saved_cmdlines` only (there is no room for a second copy). On a file
    /// system that cannot punch holes the copy needs the raw files' size again.
    pub fn write_trace_dat(
        &self,
        name: &str,
        meta: &CaptureMeta,
        cpus: &[CpuData],
        in_place: bool,
    ) -> Result<PathBuf, OutputError> {
        let (f, p) = self.create_new(name)?;
        if in_place {
            let mut open: Option<(PathBuf, std::fs::File)> = None;
            let punch = |path: &Path, offset: u64, len: u64| -> std::io::Result<()> {
                if open.as_ref().is_none_or(|(at, _)| at != path) {
                    open = Some((
                        path.to_path_buf(),
                        OpenOptions::new().write(true).open(path)?,
                    ));
                }
                let Some((_, raw)) = &open else {
                    return Ok(());
                };
                use rustix::fs::FallocateFlags as F;
                match rustix::fs::fallocate(raw, F::PUNCH_HOLE | F::KEEP_SIZE, offset, len) {
                    Ok(()) | Err(rustix::io::Errno::OPNOTSUPP) => Ok(()),
                    Err(e) => Err(e.into()),
                }
            };
            tracedat::write_v6_then(&f, meta, cpus, punch).map_err(|source| {
                OutputError::TraceDat {
                    path: p.clone(),
                    source,
                }
            })?;
            return Ok(p);
        }
        write_dat(f, &p, meta, cpus)?;
        let dat_err = |source| OutputError::TraceDat {
            path: p.clone(),
            source,
        };
        let learned = tracedat::TraceFile::open(&p)
            .and_then(|t| tracedat::Comms::of_file(&t))
            .map_err(dat_err)?;
        if !learned.is_empty() {
            let meta = CaptureMeta {
                cmdlines: learned.extend_cmdlines(&meta.cmdlines),
                ..meta.clone()
            };
            let f = std::fs::File::create(&p).map_err(io(&p))?;
            write_dat(f, &p, &meta, cpus)?;
        }
        Ok(p)
    }
}

fn write_dat(
    f: std::fs::File,
    p: &Path,
    meta: &CaptureMeta,
    cpus: &[CpuData],
) -> Result<(), OutputError> {
    let mut w = BufWriter::new(f);
    tracedat::write_v6(&mut w, meta, cpus).map_err(|source| OutputError::TraceDat {
        path: p.to_path_buf(),
        source,
    })?;
    w.flush().map_err(io(p))
}

/// Layout version of every object of the commands' `--format json` output
/// ([`crate::format`], `list`, `events`).
pub const FORMAT_VERSION: u32 = 1;

/// `value` as pretty JSON with a final newline: every JSON document a command
/// prints or a run writes.
pub fn to_json<T: serde::Serialize>(value: &T) -> String {
    crate::untrusted::json_pretty(value) + "\n"
}
