//! Bundles: one file that carries a run from one team to another.
//!
//! `pack` turns an output folder into `DIR.tar.zst`: a tar archive compressed
//! with zstd (so `tar --zstd -xf` opens it too) holding `manifest.json` first and
//! then every artifact of the folder. The manifest ([`Manifest`], versioned, its
//! schema in `schema/bundle-manifest.schema.json`) records the tool version, the
//! recipe and its hashes, the params, the workload, the host, the kernel, when
//! and why the run ended, the recorder's statistics, lost events, the
//! irreversible kernel effects the run declared, and the sha256 of every member.
//!
//! Reading a bundle ([`open`], `unpack`) treats it as hostile: only regular
//! files with plain relative names are accepted (no `..`, no absolute path, no
//! symlink, hard link, device or fifo), sizes and the compression ratio are
//! bounded, a truncated or corrupt stream is refused, a manifest of a newer
//! format is refused, and every member must be listed in the manifest with the
//! hash it has. Members are written only into a fresh temporary folder, with
//! `O_EXCL`, and moved into place only when the whole bundle checked out.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The manifest's format name.
pub(crate) const MANIFEST_FORMAT: &str = "trace-recipe-bundle";
/// Version of [`Manifest`] written by this build; a newer one is refused.
///
/// Changelog: 1, first version.
pub(crate) const MANIFEST_VERSION: u32 = 1;
/// The manifest's member name, always the archive's first member.
pub(crate) const MANIFEST: &str = "manifest.json";
/// Most members a bundle may hold.
const MAX_MEMBERS: usize = 10_000;
/// Most bytes one bundle may unpack to, all members together (4 GiB).
const MAX_TOTAL: u64 = 4 << 30;
/// Most bytes `trace.dat` may unpack to (4 GiB).
const MAX_TRACE_DAT: u64 = 4 << 30;
/// Most bytes any other member may unpack to (256 MiB: reports, recipes,
/// histograms, collected command output).
const MAX_MEMBER: u64 = 256 << 20;
/// Largest unpacked / compressed ratio accepted once past 64 MiB unpacked, the
/// compressed side counted as the bytes the decompressor actually consumed (so
/// padding after the zstd frame does not dilute it). A decompression bomb
/// expands thousands of times; trace data compresses about 5 to 50 times.
const MAX_RATIO: u64 = 250;
/// Longest member name.
const MAX_NAME: usize = 255;

/// What `manifest.json` says about the run and its members.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Manifest {
    /// Always `trace-recipe-bundle`.
    pub(crate) format: String,
    /// [`MANIFEST_VERSION`] of the writer.
    pub(crate) format_version: u32,
    /// `trace-recipe X.Y.Z` that packed it.
    pub(crate) tool_version: String,
    /// The recipe's name.
    pub(crate) recipe: Option<String>,
    /// sha256 of the recipe as written (`recipe.source.toml`), hex.
    pub(crate) recipe_written_sha256: Option<String>,
    /// sha256 of the recipe as rendered (`recipe.toml`), hex.
    pub(crate) recipe_rendered_sha256: Option<String>,
    /// The params the run was rendered with (report.json `params`, after
    /// `--set`; from an older folder, `[params]` of the rendered recipe).
    pub(crate) params: BTreeMap<String, serde_json::Value>,
    /// The workload's command line.
    pub(crate) workload: Option<Vec<String>>,
    /// Host name of the machine that packed it (`null` with `--redact-host`).
    pub(crate) host: Option<String>,
    /// Kernel release of the traced machine.
    pub(crate) kernel_release: Option<String>,
    /// The kernel facts of the traced machine (`facts.json`), when the folder has them.
    pub(crate) kernel_facts: Option<serde_json::Value>,
    /// Start of the run, RFC 3339.
    pub(crate) started: Option<String>,
    /// End of the run, RFC 3339.
    pub(crate) ended: Option<String>,
    /// Why the run ended.
    pub(crate) stop_reason: Option<String>,
    /// How the workload ended (report.json's `workload.exit`).
    pub(crate) workload_exit: Option<serde_json::Value>,
    /// The recorder's statistics (report.json's `recorder`).
    pub(crate) recorder: Option<serde_json::Value>,
    /// Events lost (report.json's `lost_total`).
    pub(crate) lost_events: Option<u64>,
    /// Kernel effects the run declared it could not undo (report.json's
    /// `irreversible`), one sentence each.
    pub(crate) irreversible: Vec<serde_json::Value>,
    /// Every other member: name → size and sha256.
    pub members: BTreeMap<String, Member>,
}

/// What the headers of `rerun`, `check --against` and `unpack` show of a
/// [`Manifest`] (someone else's file): each field
/// [escaped](crate::untrusted::escape), so no control character (a newline
/// neither) reaches the terminal; `?` for a missing recipe or kernel release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ManifestText {
    /// The recipe's name.
    pub(crate) recipe: String,
    /// The kernel release.
    pub(crate) kernel_release: String,
    /// The host name, when the manifest has one.
    pub(crate) host: Option<String>,
    /// The start of the run, when the manifest has it.
    pub(crate) started: Option<String>,
}

impl ManifestText {
    /// The fields of `m`, escaped.
    pub(crate) fn of(m: &Manifest) -> ManifestText {
        let e = |v: &Option<String>| {
            v.as_deref()
                .map(|v| crate::untrusted::escape(v).into_owned())
        };
        ManifestText {
            recipe: e(&m.recipe).unwrap_or_else(|| "?".into()),
            kernel_release: e(&m.kernel_release).unwrap_or_else(|| "?".into()),
            host: e(&m.host),
            started: e(&m.started),
        }
    }
}

/// One member of a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Member {
    /// Size in bytes.
    pub(crate) bytes: u64,
    /// sha256, hex.
    pub(crate) sha256: String,
}

/// Why a bundle could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// A file could not be read or written.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The output folder to pack has no trace.dat or report.json.
    #[error("{} is not a trace-recipe output folder: it has no {missing}\n  = help: pack the folder a `run` wrote (it holds trace.dat, report.json and recipe.toml)", .dir.display())]
    NotOutputFolder {
        /// The folder.
        dir: PathBuf,
        /// What is missing.
        missing: &'static str,
    },
    /// The bundle is refused; nothing was written outside a temporary folder.
    #[error("{}: refused: {}", crate::untrusted::escape_path(.path), crate::untrusted::escape(.reason))]
    Refused {
        /// The bundle.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The destination exists.
    #[error("{} already exists\n  = help: choose another place with `-o`, or remove it", .path.display())]
    Exists {
        /// The destination.
        path: PathBuf,
    },
}

impl From<crate::untrusted::Refusal> for BundleError {
    fn from(r: crate::untrusted::Refusal) -> Self {
        use crate::untrusted::Refusal;
        match r {
            Refusal::Io { path, source } => BundleError::Io { path, source },
            Refusal::NotRegular { ref path, .. }
            | Refusal::TooLarge { ref path, .. }
            | Refusal::Linked { ref path, .. }
            | Refusal::Outside { ref path, .. } => BundleError::Refused {
                path: path.clone(),
                reason: r.why(),
            },
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BundleError + '_ {
    move |source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The members of an output folder, relative names sorted: regular files only
/// (subfolders such as `hist/` are walked; links are skipped).
fn folder_members(dir: &Path) -> Result<Vec<String>, BundleError> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let abs = dir.join(&rel);
        for e in std::fs::read_dir(&abs).map_err(io(&abs))? {
            let e = e.map_err(io(&abs))?;
            let ty = e.file_type().map_err(io(&e.path()))?;
            let name = rel.join(e.file_name());
            if ty.is_dir() {
                stack.push(name);
            } else if ty.is_file() {
                out.push(name.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out.retain(|m| m != MANIFEST && !m.starts_with('.'));
    Ok(out)
}

/// Packs the output folder `dir` into `out` (default `DIR.tar.zst`); returns the
/// bundle's path. `redact_host` leaves the host name out. Errors: the folder is
/// not a run's output, a file cannot be read, `out` exists.
pub(crate) fn pack(
    dir: &Path,
    out: Option<&Path>,
    redact_host: bool,
) -> Result<PathBuf, BundleError> {
    for missing in ["trace.dat", "report.json", "recipe.toml"] {
        if !dir.join(missing).is_file() {
            return Err(BundleError::NotOutputFolder {
                dir: dir.to_path_buf(),
                missing,
            });
        }
    }
    let out = out.map(Path::to_path_buf).unwrap_or_else(|| {
        let name = dir
            .file_name()
            .map_or_else(|| "bundle".into(), |n| n.to_string_lossy().into_owned());
        dir.with_file_name(format!("{name}.tar.zst"))
    });
    let names = folder_members(dir)?;
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&out)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => BundleError::Exists { path: out.clone() },
            _ => BundleError::Io {
                path: out.clone(),
                source: e,
            },
        })?;
    if let Err(e) = write_bundle(dir, &names, file, &out, redact_host) {
        let _ = std::fs::remove_file(&out);
        return Err(e);
    }
    Ok(out)
}

/// Writes the bundle of `dir`'s members `names` into `file` (at `out`): each
/// member opened once through [`crate::untrusted::open_member`] (no link
/// followed, regular, one name, within its cap) and streamed once, into an
/// unnamed temporary archive and the hasher together, so the hash in the
/// manifest is the hash of the bytes packed; then the manifest (the first
/// member, as readers require) and that archive go into the bundle.
fn write_bundle(
    dir: &Path,
    names: &[String],
    file: File,
    out: &Path,
    redact_host: bool,
) -> Result<(), BundleError> {
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let staged = tempfile::tempfile_in(parent).map_err(io(parent))?;
    let mut body = tar::Builder::new(staged);
    body.mode(tar::HeaderMode::Deterministic);
    let mut members = BTreeMap::new();
    let mut total: u64 = 0;
    for name in names {
        let (cap, what) = match name.as_str() {
            "trace.dat" => (MAX_TRACE_DAT, "bundle's trace.dat"),
            _ => (MAX_MEMBER, "bundle member"),
        };
        let (member, len) = crate::untrusted::open_member(dir, name, cap, what)?;
        total = total.saturating_add(len);
        let p = dir.join(name);
        if total > MAX_TOTAL {
            return Err(BundleError::Refused {
                path: p,
                reason: format!(
                    "the members add up to more than {MAX_TOTAL} bytes, the limit of a bundle"
                ),
            });
        }
        let mut hashing = Hashing {
            inner: std::io::Read::take(member, len),
            hasher: Sha256::new(),
            bytes: 0,
        };
        let mut h = tar::Header::new_ustar();
        h.set_size(len);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        body.append_data(&mut h, name, &mut hashing)
            .map_err(io(&p))?;
        if hashing.bytes != len {
            return Err(BundleError::Refused {
                path: p,
                reason: format!(
                    "it shrank from {len} to {} bytes while it was packed",
                    hashing.bytes
                ),
            });
        }
        let sha256 = hashing
            .hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        members.insert(name.clone(), Member { bytes: len, sha256 });
    }
    let manifest = manifest_for(dir, members, redact_host)?;
    let json = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
    let write = || -> std::io::Result<()> {
        // The staged archive without its end (two zero blocks of 512 bytes).
        let mut staged = body.into_inner()?;
        let end = staged.stream_position()?.saturating_sub(1024);
        staged.seek(std::io::SeekFrom::Start(0))?;
        let enc = zstd::Encoder::new(file, 9)?;
        let mut tar = tar::Builder::new(enc);
        tar.mode(tar::HeaderMode::Deterministic);
        append(&mut tar, MANIFEST, &json)?;
        std::io::copy(&mut std::io::Read::take(staged, end), tar.get_mut())?;
        tar.into_inner()?.finish()?.sync_all()
    };
    write().map_err(io(out))
}

/// A reader that hashes and counts what is read through it.
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    bytes: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

fn append<W: Write>(tar: &mut tar::Builder<W>, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let mut h = tar::Header::new_ustar();
    h.set_size(bytes.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut h, name, bytes)
}

/// The manifest of output folder `dir` with `members` (what `pack` writes;
/// `rerun` and `check --against` read a folder's through it too). A missing or
/// malformed report.json, recipe or facts.json leaves its fields empty; one that
/// is refused (not a regular file, too large, a link out of the folder, see
/// [`crate::untrusted`]) is an error naming it.
pub(crate) fn manifest_for(
    dir: &Path,
    members: BTreeMap<String, Member>,
    redact_host: bool,
) -> Result<Manifest, BundleError> {
    use crate::untrusted::{Kind, read_optional_in};
    let report: serde_json::Value = read_optional_in(dir, "report.json", Kind::Report)?
        .and_then(|b| crate::untrusted::parse_json(&b, Kind::Report).ok())
        .unwrap_or_default();
    let rendered = read_optional_in(dir, "recipe.toml", Kind::Recipe)?.unwrap_or_default();
    let written = read_optional_in(dir, "recipe.source.toml", Kind::Recipe)?;
    let facts = read_optional_in(dir, "facts.json", Kind::Facts)?;
    let recipe: toml::Table = std::str::from_utf8(&rendered)
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_default();
    // The values the run used (report.json `params`, after `--set`); for a
    // folder written before report.json had them, the rendered recipe's `[params]`.
    let used = report["params"]
        .as_object()
        .filter(|p| !p.is_empty())
        .map(|p| p.clone().into_iter().collect());
    let params = used.unwrap_or_else(|| {
        recipe
            .get("params")
            .and_then(|p| p.as_table())
            .map(|t| {
                t.iter()
                    .filter_map(|(k, v)| Some((k.clone(), serde_json::to_value(v).ok()?)))
                    .collect()
            })
            .unwrap_or_default()
    });
    let str_of = |v: &serde_json::Value| v.as_str().map(str::to_string);
    Ok(Manifest {
        format: MANIFEST_FORMAT.into(),
        format_version: MANIFEST_VERSION,
        tool_version: format!("trace-recipe {}", env!("CARGO_PKG_VERSION")),
        recipe: str_of(&report["recipe"]).or_else(|| {
            recipe
                .get("name")
                .and_then(|n| n.as_str())
                .map(str::to_string)
        }),
        recipe_written_sha256: written.map(|b| sha256_hex(&b)),
        recipe_rendered_sha256: Some(sha256_hex(&rendered)),
        params,
        workload: report["workload"]["command"].as_array().map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        }),
        host: (!redact_host)
            .then(|| hostname::get().ok()?.into_string().ok())
            .flatten(),
        kernel_release: str_of(&report["kernel_release"]),
        kernel_facts: facts.and_then(|b| crate::untrusted::parse_json(&b, Kind::Facts).ok()),
        started: str_of(&report["started"]),
        ended: str_of(&report["ended"]),
        stop_reason: str_of(&report["stop_reason"]),
        workload_exit: report["workload"].get("exit").cloned(),
        recorder: report.get("recorder").cloned().filter(|r| !r.is_null()),
        lost_events: report["lost_total"].as_u64(),
        irreversible: report["irreversible"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
        members,
    })
}

/// A bundle checked and unpacked into a temporary folder (removed on drop).
#[derive(Debug)]
pub struct Opened {
    /// The temporary folder holding the members.
    pub dir: tempfile::TempDir,
    /// The manifest.
    pub manifest: Manifest,
}

/// Whether `path` starts like a zstd stream (a bundle, not a trace.dat). A
/// path that is not a regular file is not opened (and so not a bundle).
pub(crate) fn looks_like_bundle(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    crate::untrusted::open(path, crate::untrusted::Kind::Bundle)
        .and_then(|(mut f, _)| {
            f.read_exact(&mut magic)
                .map_err(|source| crate::untrusted::Refusal::Io {
                    path: path.to_path_buf(),
                    source,
                })
        })
        .is_ok()
        && magic == [0x28, 0xb5, 0x2f, 0xfd]
}

/// Opens the bundle file itself through [`crate::untrusted::open`].
fn open_bundle(path: &Path) -> Result<File, BundleError> {
    Ok(crate::untrusted::open(path, crate::untrusted::Kind::Bundle)?.0)
}

/// The members `report` and `diff` read of a bundle: nothing else of one is
/// written to disk or hashed for them.
pub(crate) const READ_BY_REPORT: &[&str] = &[
    "trace.dat",
    "report.json",
    "recipe.toml",
    "facts.json",
    crate::funcargs::FILE,
];

/// Checks the bundle at `path` and unpacks into a fresh temporary folder
/// the members for which `reads` is true, the ones the caller will read:
/// every other member is decompressed (the stream has to be walked) and
/// checked for its name, type and size against the manifest, but neither
/// written nor hashed. Errors: [`BundleError::Refused`] with the reason, for
/// any of the hostile cases in the module docs, a truncated or corrupt
/// stream, a member read whose hash does not match (named), a manifest that
/// is missing or newer.
pub fn open(path: &Path, reads: &dyn Fn(&str) -> bool) -> Result<Opened, BundleError> {
    let file = open_bundle(path)?;
    let dir = tempfile::Builder::new()
        .prefix("trace-recipe-bundle-")
        .tempdir()
        .map_err(io(Path::new("temporary folder")))?;
    let refuse = |reason: String| BundleError::Refused {
        path: path.to_path_buf(),
        reason,
    };
    let manifest = extract(file, dir.path(), reads).map_err(refuse)?;
    Ok(Opened { dir, manifest })
}

/// Unpacks the bundle at `path` into `out` (default: the bundle's name without
/// `.tar.zst`), which must not exist; returns the manifest. Everything is checked
/// in a temporary folder beside `out` first.
pub(crate) fn unpack(path: &Path, out: Option<&Path>) -> Result<(PathBuf, Manifest), BundleError> {
    let out = out.map(Path::to_path_buf).unwrap_or_else(|| {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let stem = name
            .strip_suffix(".tar.zst")
            .or_else(|| name.strip_suffix(".tzst"))
            .unwrap_or(&name);
        path.with_file_name(format!("{stem}.unpacked"))
    });
    if out.symlink_metadata().is_ok() {
        return Err(BundleError::Exists { path: out });
    }
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let file = open_bundle(path)?;
    let tmp = tempfile::Builder::new()
        .prefix(".trace-recipe-unpack-")
        .tempdir_in(parent)
        .map_err(io(parent))?;
    let manifest = extract(file, tmp.path(), &|_| true).map_err(|reason| BundleError::Refused {
        path: path.to_path_buf(),
        reason,
    })?;
    let staged = tmp.keep();
    std::fs::rename(&staged, &out).map_err(|e| {
        let _ = std::fs::remove_dir_all(&staged);
        BundleError::Io {
            path: out.clone(),
            source: e,
        }
    })?;
    Ok((out, manifest))
}

/// Reads a bundle stream into `dest` (an empty folder of ours), writing and
/// hashing only the members for which `reads` is true (and the manifest);
/// returns the manifest or why the bundle is refused.
fn extract(file: File, dest: &Path, reads: &dyn Fn(&str) -> bool) -> Result<Manifest, String> {
    let consumed = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let counted = Counted {
        inner: file,
        count: consumed.clone(),
    };
    let dec = zstd::Decoder::new(counted).map_err(|e| format!("not a zstd stream: {e}"))?;
    let mut archive = tar::Archive::new(dec);
    let entries = archive
        .entries()
        .map_err(|e| format!("not a tar archive: {e}"))?;
    let mut manifest: Option<Manifest> = None;
    // Each member's size and, when it was read, its hash.
    let mut seen: BTreeMap<String, (u64, Option<String>)> = BTreeMap::new();
    let mut total: u64 = 0;
    for (i, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|e| stream_error(&e))?;
        if i >= MAX_MEMBERS {
            return Err(format!("more than {MAX_MEMBERS} members"));
        }
        let raw_name = entry.path_bytes().into_owned();
        let name =
            String::from_utf8(raw_name).map_err(|_| "a member name is not UTF-8".to_string())?;
        let kind = entry.header().entry_type();
        if !kind.is_file() {
            let what = match kind {
                tar::EntryType::Symlink => "a symbolic link",
                tar::EntryType::Link => "a hard link",
                tar::EntryType::Char | tar::EntryType::Block => "a device file",
                tar::EntryType::Fifo => "a fifo",
                tar::EntryType::Directory => "a directory entry",
                _ => "not a regular file",
            };
            return Err(format!(
                "member `{name}` is {what}; bundles hold regular files only"
            ));
        }
        check_name(&name)?;
        let declared = entry
            .header()
            .size()
            .map_err(|e| format!("member `{name}` has a bad size: {e}"))?;
        let limit = match name.as_str() {
            MANIFEST => crate::untrusted::Kind::Manifest.cap(),
            "trace.dat" => MAX_TRACE_DAT,
            _ => MAX_MEMBER,
        };
        if declared > limit || total.saturating_add(declared) > MAX_TOTAL {
            return Err(format!(
                "member `{name}` declares {declared} bytes, over the limit of {} bytes",
                limit.min(MAX_TOTAL - total.min(MAX_TOTAL))
            ));
        }
        if i == 0 && name != MANIFEST {
            return Err(format!("the first member is `{name}`, not {MANIFEST}"));
        }
        if i > 0 && name == MANIFEST {
            return Err(format!("{MANIFEST} appears twice"));
        }
        if seen.contains_key(&name) {
            return Err(format!("member `{name}` appears twice"));
        }
        let target = dest.join(&name);
        let kept = name == MANIFEST || reads(&name);
        let mut out = match kept {
            true => {
                if let Some(p) = target.parent() {
                    std::fs::create_dir_all(p)
                        .map_err(|e| format!("cannot create {}: {e}", p.display()))?;
                }
                let out = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&target)
                    .map_err(|e| format!("cannot create {}: {e}", target.display()))?;
                Some(out)
            }
            false => None,
        };
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut n_member: u64 = 0;
        loop {
            let n = entry.read(&mut buf).map_err(|e| stream_error(&e))?;
            if n == 0 {
                break;
            }
            n_member += n as u64;
            total += n as u64;
            if n_member > declared || total > MAX_TOTAL {
                return Err(format!("member `{name}` is larger than it declares"));
            }
            if total > (64 << 20) && total / consumed.get().max(1) > MAX_RATIO {
                return Err(format!(
                    "it expands more than {MAX_RATIO} times its compressed size (a decompression bomb?)"
                ));
            }
            if let Some(out) = &mut out {
                hasher.update(&buf[..n]);
                out.write_all(&buf[..n])
                    .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
            }
        }
        // A member not read keeps no hash: only its size is compared.
        let sha: Option<String> = out.is_some().then(|| {
            hasher
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        });
        if name == MANIFEST {
            let text = crate::untrusted::read(&target, crate::untrusted::Kind::Manifest)
                .map_err(|e| e.reason())?;
            manifest = Some(parse_manifest(&text)?);
        } else {
            seen.insert(name, (n_member, sha));
        }
    }
    let manifest = manifest.ok_or_else(|| format!("it has no {MANIFEST}"))?;
    for (name, m) in &manifest.members {
        match seen.get(name) {
            None => return Err(format!("member `{name}` of the manifest is missing")),
            Some((bytes, sha))
                if *bytes != m.bytes || sha.as_ref().is_some_and(|s| *s != m.sha256) =>
            {
                return Err(format!(
                    "member `{name}` does not match its hash in the manifest (altered or corrupt)"
                ));
            }
            Some(_) => {}
        }
    }
    if let Some(extra) = seen.keys().find(|n| !manifest.members.contains_key(*n)) {
        return Err(format!("member `{extra}` is not listed in the manifest"));
    }
    Ok(manifest)
}

/// A reader that counts the bytes read through it (the compressed bytes the
/// zstd decoder consumed).
struct Counted<R> {
    inner: R,
    count: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

fn stream_error(e: &std::io::Error) -> String {
    format!("truncated or corrupt archive: {e}")
}

/// A member name must be a plain relative path: no `..`, no absolute path, no
/// empty or `.` component, at most [`MAX_NAME`] bytes and 8 levels.
fn check_name(name: &str) -> Result<(), String> {
    let p = Path::new(name);
    if name.is_empty() || name.len() > MAX_NAME || name.contains('\0') {
        return Err(format!("member name `{name}` is empty or too long"));
    }
    if p.is_absolute() {
        return Err(format!("member `{name}` has an absolute path"));
    }
    let mut depth = 0;
    for c in p.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => {
                return Err(format!("member `{name}` leaves the bundle (`..`)"));
            }
            _ => return Err(format!("member `{name}` is not a plain relative path")),
        }
    }
    if depth > 8 || name.ends_with('/') {
        return Err(format!("member `{name}` is not a plain relative path"));
    }
    Ok(())
}

fn parse_manifest(text: &[u8]) -> Result<Manifest, String> {
    // Format and version alone first (nothing else kept), then the typed
    // manifest straight from the bytes: no intermediate JSON tree.
    #[derive(Deserialize)]
    struct Head {
        format: Option<String>,
        format_version: Option<u64>,
    }
    let head: Head = crate::untrusted::parse_json(text, crate::untrusted::Kind::Manifest)
        .map_err(|e| format!("{MANIFEST} is not JSON: {e}"))?;
    if head.format.as_deref() != Some(MANIFEST_FORMAT) {
        return Err(format!("{MANIFEST} is not a trace-recipe bundle manifest"));
    }
    let version = head.format_version.unwrap_or(0);
    if version > u64::from(MANIFEST_VERSION) {
        return Err(format!(
            "{MANIFEST} is format version {version}, newer than this trace-recipe reads ({MANIFEST_VERSION}); upgrade trace-recipe"
        ));
    }
    serde_json::from_slice(text).map_err(|e| format!("{MANIFEST} is malformed: {e}"))
}

/// The trace.dat to read for `report` or `diff` given a path: a bundle (checked
/// and unpacked into the returned temporary folder), an output folder (its
/// trace.dat) or a trace.dat itself.
pub(crate) fn resolve_input(path: &Path) -> Result<(PathBuf, Option<Opened>), BundleError> {
    if path.is_dir() {
        let dat = path.join("trace.dat");
        crate::untrusted::member(path, &dat)?;
        // Whatever it is, `tracedat` judges it (a FIFO or device is refused there).
        return if std::fs::metadata(&dat).is_ok() {
            Ok((dat, None))
        } else {
            Err(BundleError::NotOutputFolder {
                dir: path.to_path_buf(),
                missing: "trace.dat",
            })
        };
    }
    if looks_like_bundle(path) {
        let opened = open(path, &|name| READ_BY_REPORT.contains(&name))?;
        let dat = opened.dir.path().join("trace.dat");
        return Ok((dat, Some(opened)));
    }
    Ok((path.to_path_buf(), None))
}

/// The manifest's JSON Schema (draft 2020-12).
pub(crate) fn manifest_schema_json() -> String {
    let schema = schemars::schema_for!(Manifest);
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::check_name;

    /// What `pack` meets when a member is swapped after the folder was
    /// listed: a symbolic link to a secret, a FIFO, a hard link to a file
    /// outside. Each is refused by name, nothing is read from it (the FIFO
    /// does not hang), and no bundle is left behind.
    #[test]
    fn pack_refuses_members_swapped_after_the_listing() {
        let d = tempfile::tempdir().unwrap();
        let secret_dir = tempfile::tempdir().unwrap();
        let secret = secret_dir.path().join("secret");
        std::fs::write(&secret, "TOP-SECRET\n").unwrap();
        let run = d.path().join("run");
        std::fs::create_dir(&run).unwrap();
        for m in ["trace.dat", "report.json", "recipe.toml"] {
            std::fs::write(run.join(m), "{}").unwrap();
        }
        std::os::unix::fs::symlink(&secret, run.join("link.txt")).unwrap();
        let c = std::ffi::CString::new(run.join("fifo.txt").to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::fs::hard_link(&secret, run.join("hard.txt")).unwrap();
        for (name, expect) in [
            ("link.txt", "it is a symbolic link, not a regular file"),
            ("fifo.txt", "it is a FIFO, not a regular file"),
            ("hard.txt", "it has 2 names (a hard link"),
        ] {
            let out = d.path().join(format!("{name}.tar.zst"));
            let file = std::fs::File::create(&out).unwrap();
            let names = vec!["report.json".to_string(), name.to_string()];
            let e = super::write_bundle(&run, &names, file, &out, true).unwrap_err();
            let shown = e.to_string();
            assert!(shown.contains(name) && shown.contains(expect), "{shown}");
            assert!(!shown.contains("TOP-SECRET"), "{shown}");
        }
        let listed = super::folder_members(&run).unwrap();
        assert_eq!(
            listed,
            ["hard.txt", "recipe.toml", "report.json", "trace.dat"]
        );
        let e = super::pack(&run, None, true).unwrap_err().to_string();
        assert!(e.contains("hard.txt") && e.contains("hard link"), "{e}");
        assert!(!d.path().join("run.tar.zst").exists());
    }

    /// A bundle is unpacked only as far as it is read: `report` and `diff`
    /// write (and hash) none of a large member they never read, which used
    /// to cost a 17 MB bundle 3.9 GiB written and hashed per `report`;
    /// `check --facts` writes its facts.json alone.
    #[test]
    fn a_bundles_members_are_written_only_when_read() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("run");
        std::fs::create_dir(&run).unwrap();
        for m in ["trace.dat", "report.json", "recipe.toml", "facts.json"] {
            std::fs::write(run.join(m), format!("{m}\n")).unwrap();
        }
        // 48 MiB of zeros (under the 64 MiB where the ratio bound starts): a
        // few KiB in the bundle.
        std::fs::write(run.join("junk.bin"), vec![0u8; 48 << 20]).unwrap();
        let bundle = super::pack(&run, None, true).unwrap();
        assert!(std::fs::metadata(&bundle).unwrap().len() < 1 << 20);
        let written = |o: &super::Opened| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(o.dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        let by_report = super::open(&bundle, &|n| super::READ_BY_REPORT.contains(&n)).unwrap();
        assert_eq!(
            written(&by_report),
            [
                "facts.json",
                "manifest.json",
                "recipe.toml",
                "report.json",
                "trace.dat"
            ]
        );
        let (dat, opened) = super::resolve_input(&bundle).unwrap();
        assert_eq!(std::fs::read(dat).unwrap(), b"trace.dat\n");
        assert!(!opened.unwrap().dir.path().join("junk.bin").exists());
        let facts_only = super::open(&bundle, &|n| n == "facts.json").unwrap();
        assert_eq!(written(&facts_only), ["facts.json", "manifest.json"]);
        // Every member written when all are read (`unpack`).
        let all = super::open(&bundle, &|_| true).unwrap();
        assert_eq!(
            std::fs::metadata(all.dir.path().join("junk.bin"))
                .unwrap()
                .len(),
            48 << 20
        );
    }

    #[test]
    fn member_names_are_plain_relative_paths() {
        for ok in ["trace.dat", "hist/kmem-kmalloc.txt", "context/before-1.txt"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "./a",
            "a/b/c/d/e/f/g/h/i",
            "a/",
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
