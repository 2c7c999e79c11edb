//! The function prototypes a `func-args` / `funcgraph-args` run keeps, so
//! that its trace.dat's listing prints each call's arguments as the kernel's
//! `trace` file prints them, offline ([`tracedat::Prototypes`]).
//!
//! The kernel (Linux 6.15+) records only the argument registers with each
//! call (`args[]` of `ftrace:function` and `ftrace:funcgraph_entry`) and
//! names and types them by BTF when its `trace` file is read
//! (kernel/trace/trace_output.c `print_function_args`). A run with either
//! option on therefore looks up, at its end, the prototypes of the functions
//! its records name in /sys/kernel/btf/vmlinux and writes them into the
//! output folder as [`FILE`]; `report --format text` of that folder (or its
//! bundle) reads them back.
//!
//! The file is text, one function a line: its name, then per parameter
//! `NAME:KIND` (`KIND`: `p` pointer, `s` signed integer, `u` unsigned, `e`
//! enum, `?` no type, `KINDNAME/SIZE` any other BTF kind, e.g.
//! `STRUCT/16`). Read from a folder it is untrusted: at most
//! [`MAX_FUNCTIONS`] lines of [`MAX_PARAMS`] parameters are kept, names cut
//! to [`MAX_NAME`] characters and their control characters escaped
//! ([`crate::untrusted::escape`]); a line that does not parse is skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use tracedat::{ArgKind, Param, Prototypes, Record, TraceFile};

use crate::untrusted::{Kind, Refusal};

/// The file in an output folder (and a bundle) that holds the prototypes.
pub(crate) const FILE: &str = "func-args.txt";
/// Most functions kept (written or read).
pub(crate) const MAX_FUNCTIONS: usize = 65_536;
/// Most parameters kept per function (BTF functions have at most a dozen:
/// MAX_BPF_FUNC_ARGS).
pub(crate) const MAX_PARAMS: usize = 64;
/// Most characters kept of a function's or a parameter's name (before
/// escaping; the kernel's KSYM_NAME_LEN is 512 bytes).
pub(crate) const MAX_NAME: usize = 512;

/// Whether a run with tracer options `options` records function arguments.
pub(crate) fn records_args(options: &[(String, bool)]) -> bool {
    options
        .iter()
        .any(|(name, on)| *on && matches!(name.as_str(), "func-args" | "funcgraph-args"))
}

/// The functions whose calls in `file` carry arguments: the symbols of
/// `ip` (`ftrace:function`) and `func` (`ftrace:funcgraph_entry`) of the
/// records with a non-empty `args[]`, at most [`MAX_FUNCTIONS`].
pub(crate) fn traced_functions(file: &TraceFile) -> Result<BTreeSet<String>, tracedat::Error> {
    let mut names = BTreeSet::new();
    file.records()
        .try_for_each_record(|rec| -> Result<(), tracedat::Error> {
            let Record::Event(ev) = rec else {
                return Ok(());
            };
            let key = match (ev.format.system.as_str(), ev.format.name.as_str()) {
                ("ftrace", "function") => "ip",
                ("ftrace", "funcgraph_entry") => "func",
                _ => return Ok(()),
            };
            let carries_args = ev
                .format
                .field("args")
                .is_some_and(|f| ev.data.len() > f.offset);
            if !carries_args || names.len() >= MAX_FUNCTIONS {
                return Ok(());
            }
            if let Some(tracedat::FieldValue::UInt(addr)) = ev.field(key)
                && let Some((name, _)) = file.symbol(addr)
                && !names.contains(name)
            {
                names.insert(name.to_string());
            }
            Ok(())
        })?;
    Ok(names)
}

/// The text of [`FILE`] for `prototypes`.
pub(crate) fn to_text(prototypes: &BTreeMap<String, Vec<Param>>) -> String {
    let mut out = String::new();
    for (func, params) in prototypes {
        out.push_str(func);
        for p in params {
            out.push(' ');
            out.push_str(&p.name);
            out.push(':');
            match &p.kind {
                ArgKind::Pointer => out.push('p'),
                ArgKind::Signed => out.push('s'),
                ArgKind::Unsigned => out.push('u'),
                ArgKind::Enum => out.push('e'),
                ArgKind::Unknown => out.push('?'),
                ArgKind::Other { kind, size } => out.push_str(&format!("{kind}/{size}")),
            }
        }
        out.push('\n');
    }
    out
}

/// A name from the file: at most [`MAX_NAME`] characters, control
/// characters escaped.
fn kept_name(s: &str) -> String {
    let cut: String = s.chars().take(MAX_NAME).collect();
    crate::untrusted::escape(&cut).into_owned()
}

/// One parameter's `KIND` ([`to_text`]); `None` when it does not parse.
fn parse_kind(s: &str) -> Option<ArgKind> {
    Some(match s {
        "p" => ArgKind::Pointer,
        "s" => ArgKind::Signed,
        "u" => ArgKind::Unsigned,
        "e" => ArgKind::Enum,
        "?" => ArgKind::Unknown,
        _ => {
            let (kind, size) = s.split_once('/')?;
            // The kernel's kind names are upper-case words (btf_kind_str).
            if kind.is_empty()
                || kind.len() > 16
                || !kind.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
            {
                return None;
            }
            ArgKind::Other {
                kind: kind.to_string(),
                size: size.parse().ok()?,
            }
        }
    })
}

/// The prototypes in `text` (a [`FILE`] from elsewhere), bounded and
/// escaped as the module describes.
pub(crate) fn parse(text: &str) -> Prototypes {
    let mut out = Prototypes::default();
    for line in text.lines() {
        if out.0.len() >= MAX_FUNCTIONS {
            break;
        }
        let mut words = line.split(' ');
        let Some(func) = words.next().filter(|f| !f.is_empty()) else {
            continue;
        };
        let params: Option<Vec<Param>> = words
            .take(MAX_PARAMS)
            .map(|w| {
                let (name, kind) = w.rsplit_once(':')?;
                Some(Param {
                    name: kept_name(name),
                    kind: parse_kind(kind)?,
                })
            })
            .collect();
        if let Some(params) = params {
            out.0.entry(kept_name(func)).or_insert(params);
        }
    }
    out
}

/// The prototypes an output folder (or unpacked bundle) `folder` keeps:
/// `None` when it has no [`FILE`] (a run without `func-args`); a file that
/// cannot be read safely is refused.
pub(crate) fn load(folder: &Path) -> Result<Option<Prototypes>, Refusal> {
    let Some(bytes) = crate::untrusted::read_optional_in(folder, FILE, Kind::Prototypes)? else {
        return Ok(None);
    };
    Ok(Some(parse(&String::from_utf8_lossy(&bytes))))
}

/// What a run keeps for its listing when it recorded arguments: the
/// prototypes of the functions `file`'s records name, from the running
/// kernel's BTF at `btf` ([`crate::btf::VMLINUX`]), as [`FILE`]'s text.
/// Errors: the BTF or the file cannot be read (the caller notes it; the
/// trace is whole without it).
pub(crate) fn prototypes_text(file: &TraceFile, btf: &Path) -> Result<String, String> {
    let names = traced_functions(file).map_err(|e| e.to_string())?;
    let btf = crate::btf::Btf::read(btf).map_err(|e| e.to_string())?;
    Ok(to_text(&btf.arg_prototypes(&names)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_reads_back_and_a_hostile_one_is_bounded_and_escaped() {
        let mut m = BTreeMap::new();
        m.insert(
            "vfs_read".to_string(),
            vec![
                Param {
                    name: "file".into(),
                    kind: ArgKind::Pointer,
                },
                Param {
                    name: "count".into(),
                    kind: ArgKind::Unsigned,
                },
                Param {
                    name: "".into(),
                    kind: ArgKind::Other {
                        kind: "STRUCT".into(),
                        size: 16,
                    },
                },
            ],
        );
        let text = to_text(&m);
        assert_eq!(text, "vfs_read file:p count:u :STRUCT/16\n");
        assert_eq!(parse(&text).0, m.into_iter().collect());

        // Control characters escaped, names cut, parameters and lines bounded,
        // a line that does not parse skipped.
        let evil = format!(
            "f\x1b[2J {}:p {}\nbad x:zz\n{}",
            "n".repeat(10_000),
            "a:s ".repeat(1000),
            (0..MAX_FUNCTIONS + 10)
                .map(|i| format!("g{i} x:u\n"))
                .collect::<String>()
        );
        let p = parse(&evil);
        let f = p.get("f\\u{1b}[2J").expect("escaped name kept");
        assert_eq!(f.len(), MAX_PARAMS);
        assert_eq!(f[0].name.len(), MAX_NAME);
        assert!(p.get("bad").is_none());
        assert!(p.0.len() <= MAX_FUNCTIONS);
        assert!(p.0.keys().all(|k| !k.chars().any(char::is_control)));
    }
}
