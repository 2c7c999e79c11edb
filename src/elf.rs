//! Resolving a uprobe's `PATH:SYMBOL` to the file offset uprobe_events takes
//! (Documentation/trace/uprobetracer.rst: "PATH:OFFSET").
//!
//! A symbol's value is a virtual address; the offset is that address moved into
//! the file through the program header (`PT_LOAD` segment) that maps it:
//! `offset = vaddr - segment.vaddr + segment.file_offset`. Read-only: opens the
//! file, never the kernel.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// Why a symbol could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElfError {
    /// The file could not be read.
    #[error("cannot read {}: {reason}", .path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error, as text.
        reason: String,
    },
    /// The file is not an ELF object `object` can parse.
    #[error("{} is not an ELF file: {reason}", .path.display())]
    NotElf {
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        reason: String,
    },
    /// No defined function symbol of that name in `.symtab` or `.dynsym`.
    #[error("{} has no function symbol `{symbol}`", .path.display())]
    NoSymbol {
        /// The file.
        path: PathBuf,
        /// The name asked for.
        symbol: String,
        /// Up to three defined function names close to it.
        near: Vec<String>,
    },
    /// The symbol's address lies in no loadable segment.
    #[error("symbol `{symbol}` of {} (address {address:#x}) lies in no loadable segment", .path.display())]
    NotMapped {
        /// The file.
        path: PathBuf,
        /// The symbol.
        symbol: String,
        /// Its value.
        address: u64,
    },
}

/// The file offset of function `symbol` in the ELF file at `path`, for a uprobe.
///
/// Looks in `.symtab` first, then `.dynsym`; only defined symbols count.
/// Errors: [`ElfError`] (unreadable, not ELF, no such symbol with near names,
/// address outside every segment).
pub fn symbol_file_offset(path: &Path, symbol: &str) -> Result<u64, ElfError> {
    let data = std::fs::read(path).map_err(|e| ElfError::Unreadable {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let file = object::File::parse(&*data).map_err(|e| ElfError::NotElf {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let defined = || {
        file.symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.is_definition() && s.address() != 0)
    };
    let Some(sym) = defined().find(|s| s.name() == Ok(symbol)) else {
        let names: Vec<String> = defined()
            .filter(|s| s.kind() == SymbolKind::Text)
            .filter_map(|s| s.name().ok().map(str::to_string))
            .collect();
        let near = crate::suggest::nearest_n(symbol, names.iter().map(String::as_str), 3)
            .into_iter()
            .map(str::to_string)
            .collect();
        return Err(ElfError::NoSymbol {
            path: path.to_path_buf(),
            symbol: symbol.to_string(),
            near,
        });
    };
    let address = sym.address();
    file.segments()
        .find_map(|seg| {
            let (file_off, file_size) = seg.file_range();
            let start = seg.address();
            (address >= start && address - start < file_size).then(|| address - start + file_off)
        })
        .ok_or_else(|| ElfError::NotMapped {
            path: path.to_path_buf(),
            symbol: symbol.to_string(),
            address,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_symbol_is_named_and_a_non_elf_is_refused() {
        let me = std::env::current_exe().unwrap();
        let e = symbol_file_offset(&me, "no_such_symbol_anywhere_xyz").unwrap_err();
        assert!(matches!(e, ElfError::NoSymbol { .. }), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let txt = dir.path().join("x.txt");
        std::fs::write(&txt, "hello").unwrap();
        assert!(matches!(
            symbol_file_offset(&txt, "main"),
            Err(ElfError::NotElf { .. })
        ));
    }

    #[test]
    fn main_of_this_test_binary_resolves_inside_the_file() {
        let me = std::env::current_exe().unwrap();
        let off = symbol_file_offset(&me, "main").unwrap();
        assert!(off > 0 && off < std::fs::metadata(&me).unwrap().len());
    }
}
