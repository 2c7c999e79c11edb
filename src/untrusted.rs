//! The one reader for files that may come from elsewhere.
//!
//! A bundle member, a run folder's file, a fact file, an `extends` target, an
//! output template may have been written by someone else, so each is opened the
//! same way ([`open`], [`read`]; a trace.dat is judged alike by
//! `tracedat::TraceFile::open`):
//!
//! - the path is resolved (symbolic links followed) and judged before anything
//!   is opened: only a regular file is accepted, never a FIFO, a device or a
//!   socket (`stat`), so `/dev/zero` or a FIFO is refused by name instead of
//!   read forever or waited on;
//! - it is opened with `O_NONBLOCK | O_NOCTTY` and judged again on the open
//!   file (`fstat`), so a file swapped after the first look is still refused;
//! - its size is checked against the cap of its [`Kind`] before a byte is read,
//!   and reading stops at the cap should it grow meanwhile;
//! - a file of a run folder or an unpacked bundle ([`read_in`], [`member`])
//!   must resolve to a place inside that folder: a member that is a symbolic
//!   link to a host file is refused, named, and its content never read; and it
//!   must have one name only (`st_nlink == 1`, judged before and after opening):
//!   a hard link to a host file lies inside the folder by its path, so a member
//!   with other names is refused alike.
//!
//! Every error names the file (escaped with [`escape`]) and says why; none
//! carries the file's content.

use std::borrow::Cow;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What a file is read as; each kind has its size cap ([`Kind::cap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A recipe, a base of its `extends` chain or a stored copy (1 MiB).
    Recipe,
    /// An output template (`[output] template`, 1 MiB).
    Template,
    /// A fact file as stored, JSON or zstd (32 MiB).
    Facts,
    /// A run's `report.json` (64 MiB).
    Report,
    /// A bundle's `manifest.json` (16 MiB: it carries the kernel facts).
    Manifest,
    /// A run's saved function prototypes (`func-args.txt`, 4 MiB: see
    /// `crate::funcargs`).
    Prototypes,
    /// A bundle file itself, compressed (4 GiB; its members have budgets of
    /// their own, see `crate::bundle`).
    Bundle,
}

impl Kind {
    /// Largest accepted size, in bytes.
    pub(crate) fn cap(self) -> u64 {
        match self {
            Kind::Recipe | Kind::Template => 1 << 20,
            Kind::Facts => 32 << 20,
            Kind::Report => 64 << 20,
            Kind::Manifest => 16 << 20,
            Kind::Prototypes => 4 << 20,
            Kind::Bundle => 4 << 30,
        }
    }

    /// Most JSON values (keys counted too) a file of this kind may hold:
    /// each costs a `serde_json::Value` (32 bytes, more in a growing
    /// vector) when parsed, so a file of `[[],[],...]` would cost 16 times
    /// its size; past this it is refused before anything is parsed (see
    /// [`parse_json`]). A real fact file of 6 MB holds 130,000.
    pub(crate) fn json_values(self) -> usize {
        match self {
            Kind::Report => 4_000_000,
            _ => 1_000_000,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Recipe => "recipe",
            Kind::Template => "template",
            Kind::Facts => "fact file",
            Kind::Report => "report",
            Kind::Manifest => "bundle manifest",
            Kind::Prototypes => "prototype file",
            Kind::Bundle => "bundle",
        }
    }
}

/// Why a file from elsewhere was not read. Displayed as `FILE: refused: WHY`
/// (`FILE: OS ERROR` when it could not be opened), the name escaped.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// It could not be opened or read.
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// It is not a regular file (after following symbolic links).
    NotRegular {
        /// The file.
        path: PathBuf,
        /// `a FIFO`, `a character device`, ...
        what: &'static str,
    },
    /// It is larger than its kind allows.
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size (at least).
        bytes: u64,
        /// The cap of its kind.
        cap: u64,
        /// The kind, in words.
        what: &'static str,
    },
    /// It has other names besides this one (`st_nlink > 1`): a hard link
    /// may lead to a file outside the folder, whatever its name says.
    Linked {
        /// The file.
        path: PathBuf,
        /// How many names it has.
        links: u64,
    },
    /// It resolves to a place outside the folder it belongs to.
    Outside {
        /// The file as named.
        path: PathBuf,
        /// The folder it must stay in.
        folder: PathBuf,
        /// Where it leads.
        target: PathBuf,
    },
}

impl Refusal {
    /// Whether the file does not exist (callers that treat a missing file as
    /// absent, and any other problem as an error).
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, Refusal::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    /// Why, without the file's name (for messages that name it already).
    pub(crate) fn reason(&self) -> String {
        match self {
            Refusal::Io { source, .. } => source.to_string(),
            _ => format!("refused: {}", self.why()),
        }
    }

    /// Why it was refused (a refusal that is not an I/O error), in words.
    pub(crate) fn why(&self) -> String {
        match self {
            Refusal::Io { source, .. } => source.to_string(),
            Refusal::NotRegular { what, .. } => format!(
                "it is {what}, not a regular file (FIFOs, devices and sockets are never read)"
            ),
            Refusal::TooLarge {
                bytes, cap, what, ..
            } => format!("{bytes} bytes, over the limit of {cap} bytes for a {what}"),
            Refusal::Linked { links, .. } => format!(
                "it has {links} names (a hard link, maybe to a file outside the folder); a run folder's or bundle's file must have one: its content is not read (copy the folder with `cp -r`, not `cp -al`)"
            ),
            Refusal::Outside { folder, target, .. } => format!(
                "it is a symbolic link leading outside {} (to {}); its content is not read",
                escape_path(folder),
                escape_path(target)
            ),
        }
    }

    /// The reason as an I/O error (for callers whose errors carry one).
    pub(crate) fn into_io(self) -> std::io::Error {
        match self {
            Refusal::Io { source, .. } => source,
            other => std::io::Error::other(other.reason()),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (Refusal::Io { path, .. }
        | Refusal::NotRegular { path, .. }
        | Refusal::TooLarge { path, .. }
        | Refusal::Linked { path, .. }
        | Refusal::Outside { path, .. }) = self;
        write!(f, "{}: {}", escape_path(path), self.reason())
    }
}

impl std::error::Error for Refusal {}

fn kind_words(ft: std::fs::FileType) -> Option<&'static str> {
    if ft.is_file() {
        None
    } else if ft.is_fifo() {
        Some("a FIFO")
    } else if ft.is_char_device() {
        Some("a character device")
    } else if ft.is_block_device() {
        Some("a block device")
    } else if ft.is_socket() {
        Some("a socket")
    } else if ft.is_dir() {
        Some("a folder")
    } else {
        Some("not a regular file")
    }
}

/// Opens `path` for reading as a file of `kind`: a regular file (judged before
/// and after opening, without blocking) of at most [`Kind::cap`] bytes.
/// Returns the file and its size.
pub(crate) fn open(path: &Path, kind: Kind) -> Result<(File, u64), Refusal> {
    let io = |source| Refusal::Io {
        path: path.to_path_buf(),
        source,
    };
    judge(path, &std::fs::metadata(path).map_err(io)?, kind)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(io)?;
    let len = judge(path, &file.metadata().map_err(io)?, kind)?;
    Ok((file, len))
}

/// Whether file `name` of `folder` exists, judged as [`read_in`] would read it
/// (inside the folder, a regular file within the cap of `kind`), without
/// opening it. Errors: it exists and would be refused.
pub(crate) fn present_in(folder: &Path, name: &str, kind: Kind) -> Result<bool, Refusal> {
    let path = folder.join(name);
    member(folder, &path)?;
    match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(Refusal::Io { path, source }),
        Ok(meta) => judge(&path, &meta, kind).map(|_| true),
    }
}

/// A regular file within the cap of `kind`: its size; otherwise why not.
fn judge(path: &Path, meta: &std::fs::Metadata, kind: Kind) -> Result<u64, Refusal> {
    if let Some(what) = kind_words(meta.file_type()) {
        return Err(Refusal::NotRegular {
            path: path.to_path_buf(),
            what,
        });
    }
    if meta.len() > kind.cap() {
        return Err(Refusal::TooLarge {
            path: path.to_path_buf(),
            bytes: meta.len(),
            cap: kind.cap(),
            what: kind.what(),
        });
    }
    Ok(meta.len())
}

/// An upper bound on the JSON values of `bytes` (keys included): commas,
/// colons and opening brackets outside strings, plus one. One pass, nothing
/// allocated.
fn json_values(bytes: &[u8]) -> usize {
    let mut n = 1;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b',' | b':' | b'[' | b'{' => n += 1,
                _ => {}
            }
        }
    }
    n
}

/// `bytes` (a file of `kind`) parsed as JSON into `T`, refused before any
/// parsing when it holds more values than [`Kind::json_values`] allows.
/// Errors: the refusal or serde_json's message.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    kind: Kind,
) -> Result<T, String> {
    let n = json_values(bytes);
    if n > kind.json_values() {
        return Err(format!(
            "it holds about {n} JSON values, over the limit of {} for a {}",
            kind.json_values(),
            kind.what()
        ));
    }
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

/// Reads the whole of `path` as a file of `kind` (see [`open`]).
pub(crate) fn read(path: &Path, kind: Kind) -> Result<Vec<u8>, Refusal> {
    let (file, len) = open(path, kind)?;
    read_open(path, file, len, kind)
}

/// The rest of `file` (`path`, opened by [`open`] with size `len`), at most
/// the cap of `kind`.
fn read_open(path: &Path, file: File, len: u64, kind: Kind) -> Result<Vec<u8>, Refusal> {
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(kind.cap() + 1)
        .read_to_end(&mut out)
        .map_err(|source| Refusal::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if out.len() as u64 > kind.cap() {
        return Err(Refusal::TooLarge {
            path: path.to_path_buf(),
            bytes: out.len() as u64,
            cap: kind.cap(),
            what: kind.what(),
        });
    }
    Ok(out)
}

/// [`read`] as UTF-8 text.
pub(crate) fn read_to_string(path: &Path, kind: Kind) -> Result<String, Refusal> {
    String::from_utf8(read(path, kind)?).map_err(|_| Refusal::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
    })
}

/// Whether `path` resolves to a place inside `folder` (both resolved); the
/// place it leads to otherwise. A path that does not resolve (missing) is
/// judged inside: opening it fails by itself.
pub(crate) fn inside(folder: &Path, path: &Path) -> Result<(), Refusal> {
    let (Ok(root), Ok(real)) = (folder.canonicalize(), path.canonicalize()) else {
        return Ok(());
    };
    if real.starts_with(&root) {
        Ok(())
    } else {
        Err(Refusal::Outside {
            path: path.to_path_buf(),
            folder: folder.to_path_buf(),
            target: real,
        })
    }
}

/// Opens file `name` of `folder` to give it to someone else (`pack`): once,
/// without following a symbolic link in its last component (one swapped in
/// after the folder was listed is refused, not followed), judged by the
/// opened file itself: a regular file (a FIFO is never waited on), with one
/// name (a hard link may be a file from outside), of at most `cap` bytes
/// (`what` names the limit), and still inside `folder` (a folder on its way
/// swapped for a link is caught by where the descriptor leads). Returns the
/// file and its size.
pub(crate) fn open_member(
    folder: &Path,
    name: &str,
    cap: u64,
    what: &'static str,
) -> Result<(File, u64), Refusal> {
    let path = folder.join(name);
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(Refusal::NotRegular {
                path,
                what: "a symbolic link",
            });
        }
        Err(source) => return Err(Refusal::Io { path, source }),
    };
    let meta = file.metadata().map_err(|source| Refusal::Io {
        path: path.clone(),
        source,
    })?;
    if let Some(what) = kind_words(meta.file_type()) {
        return Err(Refusal::NotRegular { path, what });
    }
    let links = std::os::unix::fs::MetadataExt::nlink(&meta);
    if links > 1 {
        return Err(Refusal::Linked { path, links });
    }
    if meta.len() > cap {
        return Err(Refusal::TooLarge {
            path,
            bytes: meta.len(),
            cap,
            what,
        });
    }
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    let real = std::fs::read_link(format!("/proc/self/fd/{fd}"));
    if let (Ok(root), Ok(real)) = (folder.canonicalize(), real)
        && !real.starts_with(&root)
    {
        return Err(Refusal::Outside {
            path,
            folder: folder.to_path_buf(),
            target: real,
        });
    }
    Ok((file, meta.len()))
}

/// Whether `path`, a file of the run folder (or unpacked bundle) `folder`, may
/// be read as one: it resolves [inside](inside) `folder` and, when it exists,
/// has one name only (a hard link to a host file is inside by its path).
pub(crate) fn member(folder: &Path, path: &Path) -> Result<(), Refusal> {
    inside(folder, path)?;
    match std::fs::metadata(path) {
        Ok(meta) => single_name(path, &meta),
        Err(_) => Ok(()),
    }
}

/// A regular file with more than one name is refused ([`Refusal::Linked`]).
fn single_name(path: &Path, meta: &std::fs::Metadata) -> Result<(), Refusal> {
    use std::os::unix::fs::MetadataExt;
    if meta.is_file() && meta.nlink() > 1 {
        return Err(Refusal::Linked {
            path: path.to_path_buf(),
            links: meta.nlink(),
        });
    }
    Ok(())
}

/// Reads file `name` of the run folder (or unpacked bundle) `folder` as a file
/// of `kind`: like [`read`], and it must be a [`member`] of `folder` (judged
/// again on the open file, so a hard link made after the first look is
/// refused too).
pub(crate) fn read_in(folder: &Path, name: &str, kind: Kind) -> Result<Vec<u8>, Refusal> {
    let path = folder.join(name);
    member(folder, &path)?;
    let (file, len) = open(&path, kind)?;
    let meta = file.metadata().map_err(|source| Refusal::Io {
        path: path.clone(),
        source,
    })?;
    single_name(&path, &meta)?;
    read_open(&path, file, len, kind)
}

/// [`read_in`], with a missing file as `None` (any other problem is an error).
pub(crate) fn read_optional_in(
    folder: &Path,
    name: &str,
    kind: Kind,
) -> Result<Option<Vec<u8>>, Refusal> {
    match read_in(folder, name, kind) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// `s` with every control character (ESC, BEL, CR, newline, DEL, the C1
/// range, ...) written as a `\u{..}` escape, and backslashes doubled, so an
/// untrusted string printed to a terminal cannot move the cursor, clear the
/// screen, set the title or fake a line. Borrowed when there is nothing to escape.
pub(crate) fn escape(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| c.is_control() || c == '\\')
}

/// [`escape`] for a value set into text laid out in lines and columns (a
/// summary): control characters other than newline and tab are written as
/// `\u{..}` escapes, backslashes left as they are. A terminal showing the text
/// cannot be driven by the value (no ESC, CR, BEL, ...).
pub(crate) fn escape_in_text(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| c.is_control() && c != '\n' && c != '\t')
}

/// Whether `c` changes how the text around it is shown rather than showing
/// itself: the bidirectional embeddings, overrides and isolates (U+202A..E,
/// U+2066..9), the marks and zero-width characters (U+200B..F) and the
/// byte-order mark. Not control characters, yet a command line holding them
/// reads on the screen other than it runs.
fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// `s` in double quotes, as one argument of a command line is shown for
/// consent: every control character (newline and tab too), every
/// [invisible format character](is_invisible_format) as a `\u{..}` escape,
/// a backslash or double quote after a backslash. What is between the quotes
/// is on the screen exactly as it is in the bytes: nothing of it can move the
/// cursor, erase, end the quotes or reorder what follows.
pub(crate) fn quote(s: &str) -> String {
    let e = escape_where(s, |c| {
        c.is_control() || c == '\\' || c == '"' || is_invisible_format(c)
    });
    format!("\"{e}\"")
}

/// Whether `s` holds a character [`quote`] shows escaped other than a
/// backslash or double quote: a control or an invisible format character.
pub(crate) fn has_hidden(s: &str) -> bool {
    s.chars().any(|c| c.is_control() || is_invisible_format(c))
}

/// `s` with the characters `escaped` picks written as escapes (a backslash
/// or double quote after a backslash, others as `\u{..}`).
fn escape_where(s: &str, escaped: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&escaped) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !escaped(c) {
            out.push(c);
        } else if c == '\\' || c == '"' {
            out.push('\\');
            out.push(c);
        } else {
            out.extend(c.escape_unicode());
        }
    }
    Cow::Owned(out)
}

/// A writer to a terminal of text that may carry someone else's bytes (a
/// trace.dat's comms, symbols and strings in `report --format text`, which
/// prints them as `trace-cmd report` does): what it is given goes on with
/// [`escape_in_text`] applied, and each byte that is not UTF-8 written as
/// `\x..`, so no ESC, CR, BEL or C1 control reaches the terminal. A UTF-8
/// sequence split between two writes is held until the next one (or the
/// flush) completes it.
pub(crate) struct TerminalSafe<W: std::io::Write> {
    inner: W,
    /// The start of a UTF-8 sequence the last write ended in.
    held: Vec<u8>,
}

impl<W: std::io::Write> TerminalSafe<W> {
    pub(crate) fn new(inner: W) -> TerminalSafe<W> {
        TerminalSafe {
            inner,
            held: Vec::new(),
        }
    }

    /// Writes `bytes` escaped; with `last`, an incomplete UTF-8 sequence at
    /// the end is written as bytes that are not UTF-8, else it is held.
    fn write_escaped(&mut self, mut bytes: &[u8], last: bool) -> std::io::Result<()> {
        loop {
            let (valid, bad) = match std::str::from_utf8(bytes) {
                Ok(s) => (s, None),
                Err(e) => {
                    let (ok, rest) = bytes.split_at(e.valid_up_to());
                    let s = std::str::from_utf8(ok).unwrap_or_default();
                    (s, Some((e.error_len(), rest)))
                }
            };
            self.inner.write_all(escape_in_text(valid).as_bytes())?;
            let Some((len, rest)) = bad else {
                return Ok(());
            };
            let len = match len {
                Some(n) => n,
                None if last => rest.len(),
                None => {
                    self.held = rest.to_vec();
                    return Ok(());
                }
            };
            for b in &rest[..len] {
                write!(self.inner, "\\x{b:02x}")?;
            }
            bytes = &rest[len..];
        }
    }
}

impl<W: std::io::Write> std::io::Write for TerminalSafe<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.held.is_empty() {
            self.write_escaped(buf, false)?;
        } else {
            let mut joined = std::mem::take(&mut self.held);
            joined.extend_from_slice(buf);
            self.write_escaped(&joined, false)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let held = std::mem::take(&mut self.held);
        self.write_escaped(&held, true)?;
        self.inner.flush()
    }
}

/// [`escape`] of a path shown lossily as UTF-8.
pub(crate) fn escape_path(p: &Path) -> String {
    escape(&p.to_string_lossy()).into_owned()
}

/// `print!` for text that may carry someone else's bytes: the formatted text
/// goes to stdout with [`escape_in_text`] applied. Every line the command
/// line prints goes through it (or [`tprintln`], [`teprint`], [`teprintln`]),
/// so a name, key, value or message from a file cannot drive the terminal.
macro_rules! tprint {
    ($($arg:tt)*) => {
        ::std::print!("{}", $crate::untrusted::escape_in_text(&::std::format!($($arg)*)))
    };
}

/// [`tprint`] with a newline.
macro_rules! tprintln {
    ($($arg:tt)*) => {
        ::std::println!("{}", $crate::untrusted::escape_in_text(&::std::format!($($arg)*)))
    };
}

/// [`tprint`] to stderr.
macro_rules! teprint {
    ($($arg:tt)*) => {
        ::std::eprint!("{}", $crate::untrusted::escape_in_text(&::std::format!($($arg)*)))
    };
}

/// [`tprint`] to stderr, with a newline.
macro_rules! teprintln {
    ($($arg:tt)*) => {
        ::std::eprintln!("{}", $crate::untrusted::escape_in_text(&::std::format!($($arg)*)))
    };
}

pub(crate) use {teprint, teprintln, tprint, tprintln};

/// serde_json's pretty layout with DEL and the C1 controls (U+007F..U+009F)
/// escaped as `\u007f`..`\u009f` too: serde_json escapes the C0 controls only,
/// and a C1 CSI (U+009B) passed raw drives a terminal the JSON is shown on as
/// ESC `[` does.
struct JsonSafe(serde_json::ser::PrettyFormatter<'static>);

impl serde_json::ser::Formatter for JsonSafe {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut rest = fragment;
        while let Some(i) = rest.find(|c: char| matches!(c, '\u{7f}'..='\u{9f}')) {
            let c = rest[i..].chars().next().unwrap_or_default();
            w.write_all(&rest.as_bytes()[..i])?;
            write!(w, "\\u{:04x}", u32::from(c))?;
            rest = &rest[i + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// `value` as pretty-printed JSON (two-space indent, as
/// `serde_json::to_string_pretty`) in which no string carries a control
/// character raw: C0 as serde_json escapes them, DEL and C1 as `\u007f`..
/// `\u009f`. Empty when `value` cannot be serialized.
pub(crate) fn json_pretty<T: serde::Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(
        &mut out,
        JsonSafe(serde_json::ser::PrettyFormatter::new()),
    );
    match value.serialize(&mut ser) {
        Ok(()) => String::from_utf8(out).unwrap_or_default(),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {

    /// Commas, colons and brackets inside strings (escaped quotes too) are
    /// not counted; past the budget nothing is parsed.
    #[test]
    fn json_values_are_counted_outside_strings() {
        assert_eq!(json_values(br#"{"a,[{:": "x\",y", "b": [1, 2]}"#), 7);
        assert_eq!(json_values(b"[[],[],[]]"), 7);
        let many = format!("[{}0]", "0,".repeat(1_000_000));
        let e = parse_json::<serde_json::Value>(many.as_bytes(), Kind::Manifest).unwrap_err();
        assert!(
            e.contains("over the limit of 1000000 for a bundle manifest"),
            "{e}"
        );
        assert!(parse_json::<Vec<u8>>(b"[1, 2]", Kind::Manifest).is_ok());
    }

    use super::*;

    /// Control characters and bytes that are not UTF-8 reach a terminal
    /// escaped, however the text is split between writes; newlines, tabs
    /// and other characters pass as they are.
    #[test]
    fn terminal_safe_text_escapes_controls_across_writes() {
        use std::io::Write;
        let mut t = TerminalSafe::new(Vec::new());
        let pieces: [&[u8]; 7] = [
            b"comm=a\x1b[31mb\tc\r\n",
            b"csi=\xc2",
            b"\x9b2J caf\xc3",
            b"\xa9 bad=\xff\x07",
            b"",
            b"\n",
            b"end\xe2\x82",
        ];
        for p in pieces {
            assert_eq!(t.write(p).unwrap(), p.len());
        }
        t.flush().unwrap();
        assert_eq!(
            String::from_utf8(t.inner).unwrap(),
            "comm=a\\u{1b}[31mb\tc\\u{d}\ncsi=\\u{9b}2J caf\u{e9} bad=\\xff\\u{7}\nend\\xe2\\x82"
        );
    }

    #[test]
    fn fifos_devices_and_folders_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("facts.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read(&fifo, Kind::Facts).unwrap_err().to_string();
        assert!(e.contains("a FIFO, not a regular file"), "{e}");
        let e = read(Path::new("/dev/zero"), Kind::Recipe)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/dev/zero: refused: it is a character device"),
            "{e}"
        );
        let e = read(dir.path(), Kind::Recipe).unwrap_err().to_string();
        assert!(e.contains("a folder"), "{e}");
    }

    #[test]
    fn a_symlink_to_a_device_is_judged_by_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("report.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = read(&link, Kind::Report).unwrap_err().to_string();
        assert!(e.contains("character device"), "{e}");
    }

    #[test]
    fn size_is_capped_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("r.toml");
        let f = File::create(&big).unwrap();
        f.set_len(Kind::Recipe.cap() + 1).unwrap();
        let e = read(&big, Kind::Recipe).unwrap_err().to_string();
        assert!(
            e.contains("over the limit of 1048576 bytes for a recipe"),
            "{e}"
        );
    }

    #[test]
    fn a_folder_member_leading_outside_is_refused_and_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let secret = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(secret.path(), "TOP-SECRET\n").unwrap();
        std::os::unix::fs::symlink(secret.path(), dir.path().join("recipe.base-1.toml")).unwrap();
        let e = read_in(dir.path(), "recipe.base-1.toml", Kind::Recipe)
            .unwrap_err()
            .to_string();
        assert!(e.contains("symbolic link leading outside"), "{e}");
        assert!(!e.contains("TOP-SECRET"), "{e}");
        std::fs::write(dir.path().join("ok.toml"), "x = 1").unwrap();
        assert_eq!(
            read_in(dir.path(), "ok.toml", Kind::Recipe).unwrap(),
            b"x = 1"
        );
    }

    /// Every line the tool prints goes through the one escaper: no
    /// `print!`, `println!`, `eprint!` or `eprintln!` of std anywhere in src/
    /// but in this file's `tprint!` family.
    #[test]
    fn nothing_prints_around_the_escaper() {
        fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    rust_files(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        assert!(files.len() > 20, "{files:?}");
        let mut raw = Vec::new();
        for f in files.iter().filter(|f| !f.ends_with("untrusted.rs")) {
            let text = std::fs::read_to_string(f).unwrap();
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for (i, _) in line.match_indices("!(") {
                    let ident: String = line[..i]
                        .chars()
                        .rev()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    if ["print", "println", "eprint", "eprintln"].contains(&ident.as_str()) {
                        raw.push(format!("{}:{}: {line}", f.display(), n + 1));
                    }
                }
            }
        }
        assert!(
            raw.is_empty(),
            "printed around the escaper:\n{}",
            raw.join("\n")
        );
    }

    /// A command line for consent: each argument quoted, nothing in it able
    /// to end the quotes, move the cursor or reorder the text.
    #[test]
    fn quoted_arguments_show_every_hidden_character() {
        assert_eq!(quote("plain arg"), "\"plain arg\"");
        assert_eq!(
            quote("a\"b\\c\nd\u{1b}[2K\re\u{9b}\u{7f}\u{202e}f\tg"),
            "\"a\\\"b\\\\c\\u{a}d\\u{1b}[2K\\u{d}e\\u{9b}\\u{7f}\\u{202e}f\\u{9}g\""
        );
        assert!(!has_hidden("a\"b\\c é"));
        for c in [
            '\n', '\t', '\u{1b}', '\u{7f}', '\u{85}', '\u{9b}', '\u{200b}', '\u{2067}',
        ] {
            assert!(has_hidden(&format!("x{c}y")), "{c:?}");
        }
    }

    /// JSON as serde_json lays it out, but DEL and C1 escaped too; the
    /// strings read back the same.
    #[test]
    fn json_escapes_del_and_c1() {
        let v = serde_json::json!({ "k\u{9b}": ["a\u{1b}b\u{7f}c\u{85}d\u{9f}\u{a0}é\n"] });
        let j = json_pretty(&v);
        assert_eq!(
            j,
            "{\n  \"k\\u009b\": [\n    \"a\\u001bb\\u007fc\\u0085d\\u009f\u{a0}é\\n\"\n  ]\n}"
        );
        assert!(!j.chars().any(|c| c.is_control() && c != '\n'), "{j:?}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&j).unwrap(), v);
        let plain = serde_json::json!({"a": [1, {"b": null}], "c": "d"});
        assert_eq!(
            json_pretty(&plain),
            serde_json::to_string_pretty(&plain).unwrap()
        );
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape("plain/name.txt"), "plain/name.txt");
        let e = escape("a\u{1b}[2J\u{1b}]0;t\u{7}\r\\b");
        assert!(!e.chars().any(char::is_control), "{e}");
        assert_eq!(e, "a\\u{1b}[2J\\u{1b}]0;t\\u{7}\\u{d}\\\\b");
    }
}
