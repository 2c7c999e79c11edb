//! The kernel's BTF (`/sys/kernel/btf/vmlinux`, CONFIG_DEBUG_INFO_BTF): the
//! function prototypes and the structs that BTF-typed fetchargs name
//! (`vfs_read count`, `$arg1`, `file->f_path.dentry->d_name.name`, Linux 6.5+,
//! fields 6.6+), read into a digest ([`BtfFacts`]) that a fact file keeps, so
//! that `check --facts` walks the same types offline.
//!
//! Source of truth: Documentation/bpf/btf.rst ("Type encoding") and
//! include/uapi/linux/btf.h for the layout; kernel/trace/trace_probe.c
//! (`parse_btf_arg`, `parse_btf_field`) for how a fetcharg walks the types:
//! `->` needs a pointer to a struct or union, `.` a struct or union member,
//! members of anonymous members count as the parent's, `:string` needs a
//! `char *` or a `char[]`.
//!
//! The reader is bounded: at most [`MAX_BTF_BYTES`] are read, every offset is
//! checked against the section it points into, type chains are followed at
//! most [`MAX_CHAIN`] deep. A malformed file gives an error, never a panic.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where the running kernel exposes its BTF.
pub(crate) const VMLINUX: &str = "/sys/kernel/btf/vmlinux";
/// Largest BTF read: 64 MiB (a distribution kernel's is about 6 MiB).
const MAX_BTF_BYTES: u64 = 64 << 20;
/// Most typedef/modifier/pointer links followed from one type.
const MAX_CHAIN: usize = 32;
/// Most members (after flattening anonymous ones) kept for one struct.
const MAX_MEMBERS: usize = 1024;
/// Prefix of the function whose prototype is a tracepoint's: a tprobe is
/// attached to `__probestub_NAME(void *__data, ARGS)` (include/linux/tracepoint.h),
/// and kernel/trace/trace_fprobe.c names its BTF arguments by that function's
/// parameters after `__data`.
const TRACEPOINT_PREFIX: &str = "__probestub_";

/// A type as a fetcharg sees it: its C spelling (for messages) and its shape
/// (what `->`, `.`, `:string` and the event field's size need).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ty {
    /// The C spelling: `struct file *`, `size_t`, `const char *`.
    pub(crate) c: String,
    /// The shape after typedefs and qualifiers.
    pub(crate) shape: Shape,
}

/// What a type is, after typedefs and `const`/`volatile`/`restrict`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shape {
    /// An integer, enum or bool of `size` bytes (`i4s`, `i8u`).
    Int {
        /// Bytes.
        size: u8,
        /// Signed (BTF_INT_SIGNED).
        signed: bool,
    },
    /// A pointer to a struct or union, by its key (`p>struct file`).
    PtrAgg(String),
    /// A pointer to a one-byte integer: a C string (`pc`).
    PtrChar,
    /// Any other pointer (`p`).
    Ptr,
    /// A struct or union embedded by value (`s>struct path`).
    Agg(String),
    /// An array of one-byte integers (`ac`).
    CharArray,
    /// `void` (`v`).
    Void,
    /// Anything else: other arrays, floats, functions (`o`).
    Other,
}

impl From<Shape> for String {
    fn from(s: Shape) -> String {
        match s {
            Shape::Int { size, signed } => format!("i{size}{}", if signed { 's' } else { 'u' }),
            Shape::PtrAgg(k) => format!("p>{k}"),
            Shape::PtrChar => "pc".into(),
            Shape::Ptr => "p".into(),
            Shape::Agg(k) => format!("s>{k}"),
            Shape::CharArray => "ac".into(),
            Shape::Void => "v".into(),
            Shape::Other => "o".into(),
        }
    }
}

impl TryFrom<String> for Shape {
    type Error = String;
    fn try_from(s: String) -> Result<Shape, String> {
        Ok(match s.as_str() {
            "pc" => Shape::PtrChar,
            "p" => Shape::Ptr,
            "ac" => Shape::CharArray,
            "v" => Shape::Void,
            "o" => Shape::Other,
            _ => {
                if let Some(k) = s.strip_prefix("p>") {
                    Shape::PtrAgg(k.to_string())
                } else if let Some(k) = s.strip_prefix("s>") {
                    Shape::Agg(k.to_string())
                } else if let Some(rest) = s.strip_prefix('i') {
                    let (n, sign) = rest.split_at(rest.len().saturating_sub(1));
                    let size: u8 = n.parse().map_err(|_| format!("bad BTF shape {s:?}"))?;
                    match sign {
                        "s" => Shape::Int { size, signed: true },
                        "u" => Shape::Int {
                            size,
                            signed: false,
                        },
                        _ => return Err(format!("bad BTF shape {s:?}")),
                    }
                } else {
                    return Err(format!("bad BTF shape {s:?}"));
                }
            }
        })
    }
}

/// A named value: a parameter or a struct member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Var {
    /// The parameter's or member's name.
    pub(crate) name: String,
    /// Its type.
    pub(crate) ty: Ty,
}

/// A function's (or a tracepoint's) prototype. Stored as one string (a
/// kernel has some 60,000): the return type and each parameter as
/// `NAME|SHAPE|C`, joined by `;` (see [`Vars`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "String", into = "String")]
#[schemars(with = "String")]
pub(crate) struct Proto {
    /// The parameters in order (`$arg1` is the first); for a tracepoint those
    /// after `void *__data`.
    pub(crate) params: Vec<Var>,
    /// The return type (`$retval`).
    pub(crate) ret: Ty,
}

/// The part of the kernel's BTF that probes need (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BtfFacts {
    /// Function name → prototype (BTF_KIND_FUNC).
    pub(crate) functions: BTreeMap<String, Proto>,
    /// Tracepoint name → prototype (from its `__probestub_NAME` function).
    pub(crate) tracepoints: BTreeMap<String, Proto>,
    /// Struct or union key (`struct file`, `union NAME`, `struct #ID` when
    /// anonymous) → its members, those of anonymous members included.
    pub(crate) structs: BTreeMap<String, Vars>,
    /// Whether every function, tracepoint and struct of the kernel is here
    /// (`trace-recipe facts`); otherwise only those one recipe walks.
    pub(crate) complete: bool,
    /// The functions and tracepoints this digest was read for (one recipe's):
    /// one of them missing from `functions`/`tracepoints` is missing from the
    /// kernel's BTF.
    #[serde(default)]
    pub(crate) looked_up: BTreeSet<String>,
}

/// Struct members, stored as one string: `NAME|SHAPE|C` joined by `;`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "String", into = "String")]
#[schemars(with = "String")]
pub(crate) struct Vars(pub(crate) Vec<Var>);

impl From<Vars> for String {
    fn from(v: Vars) -> String {
        v.0.into_iter()
            .map(|v| format!("{}|{}|{}", v.name, String::from(v.ty.shape), v.ty.c))
            .collect::<Vec<_>>()
            .join(";")
    }
}

impl TryFrom<String> for Vars {
    type Error = String;
    fn try_from(s: String) -> Result<Vars, String> {
        if s.is_empty() {
            return Ok(Vars::default());
        }
        s.split(';')
            .map(|one| {
                let mut p = one.splitn(3, '|');
                let (Some(name), Some(shape), Some(c)) = (p.next(), p.next(), p.next()) else {
                    return Err(format!("bad BTF entry {one:?}: not NAME|SHAPE|C"));
                };
                Ok(Var {
                    name: name.to_string(),
                    ty: Ty {
                        c: c.to_string(),
                        shape: Shape::try_from(shape.to_string())?,
                    },
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Vars)
    }
}

impl From<Proto> for String {
    fn from(p: Proto) -> String {
        let ret = Var {
            name: String::new(),
            ty: p.ret,
        };
        String::from(Vars([ret].into_iter().chain(p.params).collect()))
    }
}

impl TryFrom<String> for Proto {
    type Error = String;
    fn try_from(s: String) -> Result<Proto, String> {
        let mut vars = Vars::try_from(s)?.0.into_iter();
        let ret = vars.next().ok_or("empty BTF prototype")?.ty;
        Ok(Proto {
            params: vars.collect(),
            ret,
        })
    }
}

/// Why BTF could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BtfError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not BTF, or a field points outside the file.
    #[error("{0}")]
    Malformed(String),
}

/// BTF kinds (include/uapi/linux/btf.h).
mod kind {
    pub(super) const INT: u8 = 1;
    pub(super) const PTR: u8 = 2;
    pub(super) const ARRAY: u8 = 3;
    pub(super) const STRUCT: u8 = 4;
    pub(super) const UNION: u8 = 5;
    pub(super) const ENUM: u8 = 6;
    pub(super) const FWD: u8 = 7;
    pub(super) const TYPEDEF: u8 = 8;
    pub(super) const VOLATILE: u8 = 9;
    pub(super) const CONST: u8 = 10;
    pub(super) const RESTRICT: u8 = 11;
    pub(super) const FUNC: u8 = 12;
    pub(super) const FUNC_PROTO: u8 = 13;
    pub(super) const VAR: u8 = 14;
    pub(super) const DATASEC: u8 = 15;
    pub(super) const FLOAT: u8 = 16;
    pub(super) const DECL_TAG: u8 = 17;
    pub(super) const TYPE_TAG: u8 = 18;
    pub(super) const ENUM64: u8 = 19;
}

/// One `struct btf_type` and where its trailing data starts.
#[derive(Debug, Clone, Copy)]
struct Raw {
    name_off: u32,
    kind: u8,
    vlen: u16,
    kind_flag: bool,
    /// `size` or `type`, by kind.
    size_type: u32,
    /// Offset of the kind-specific data in the type section.
    extra: usize,
}

/// A parsed BTF blob: its type table and string section.
pub(crate) struct Btf {
    data: Vec<u8>,
    big_endian: bool,
    types_at: usize,
    types_len: usize,
    strings_at: usize,
    strings_len: usize,
    /// Index = type id; id 0 is `void` (a placeholder entry).
    types: Vec<Raw>,
    /// [`Btf::ty`] of each type id asked so far (a digest of everything asks
    /// for the same few thousand types some 400,000 times).
    seen: std::cell::RefCell<std::collections::HashMap<u32, Ty>>,
}

impl Btf {
    /// Reads and parses the running kernel's BTF ([`VMLINUX`]).
    pub(crate) fn read_vmlinux() -> Result<Btf, BtfError> {
        Btf::read(Path::new(VMLINUX))
    }

    /// Reads and parses the BTF file `path` (at most [`MAX_BTF_BYTES`]).
    pub(crate) fn read(path: &Path) -> Result<Btf, BtfError> {
        use std::io::Read;
        let err = |source| BtfError::Read {
            path: path.display().to_string(),
            source,
        };
        let f = std::fs::File::open(path).map_err(err)?;
        let mut data = Vec::new();
        f.take(MAX_BTF_BYTES + 1)
            .read_to_end(&mut data)
            .map_err(err)?;
        if data.len() as u64 > MAX_BTF_BYTES {
            return Err(BtfError::Malformed(format!(
                "{} is larger than {} MiB",
                path.display(),
                MAX_BTF_BYTES >> 20
            )));
        }
        Btf::parse(data)
    }

    /// Parses a BTF blob (either byte order, judged by the magic 0xeB9F).
    pub(crate) fn parse(data: Vec<u8>) -> Result<Btf, BtfError> {
        let bad = |m: &str| BtfError::Malformed(format!("not BTF: {m}"));
        let magic = data.get(0..2).ok_or_else(|| bad("too short"))?;
        let big_endian = match magic {
            [0x9f, 0xeb] => false,
            [0xeb, 0x9f] => true,
            _ => return Err(bad("no 0xeB9F magic")),
        };
        let mut btf = Btf {
            data,
            big_endian,
            types_at: 0,
            types_len: 0,
            strings_at: 0,
            strings_len: 0,
            types: Vec::new(),
            seen: Default::default(),
        };
        let hdr_len = btf.u32_at(4).ok_or_else(|| bad("short header"))? as usize;
        let field = |i: usize| btf.u32_at(8 + 4 * i).map(|v| v as usize);
        let (Some(type_off), Some(type_len), Some(str_off), Some(str_len)) =
            (field(0), field(1), field(2), field(3))
        else {
            return Err(bad("short header"));
        };
        let section = |off: usize, len: usize| {
            let start = hdr_len.checked_add(off)?;
            let end = start.checked_add(len)?;
            (end <= btf.data.len()).then_some(start)
        };
        btf.types_at =
            section(type_off, type_len).ok_or_else(|| bad("type section outside the file"))?;
        btf.types_len = type_len;
        btf.strings_at =
            section(str_off, str_len).ok_or_else(|| bad("string section outside the file"))?;
        btf.strings_len = str_len;
        btf.types = btf
            .scan()
            .ok_or_else(|| bad("a type runs past its section"))?;
        Ok(btf)
    }

    fn u32_at(&self, at: usize) -> Option<u32> {
        let b: [u8; 4] = self.data.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(match self.big_endian {
            true => u32::from_be_bytes(b),
            false => u32::from_le_bytes(b),
        })
    }

    /// A u32 at `off` of the type section.
    fn type_u32(&self, off: usize) -> Option<u32> {
        (off.checked_add(4)? <= self.types_len).then_some(())?;
        self.u32_at(self.types_at + off)
    }

    /// Walks the type section once, recording each type.
    fn scan(&self) -> Option<Vec<Raw>> {
        let mut out = vec![Raw {
            name_off: 0,
            kind: 0,
            vlen: 0,
            kind_flag: false,
            size_type: 0,
            extra: 0,
        }];
        let mut off = 0usize;
        while off < self.types_len {
            let name_off = self.type_u32(off)?;
            let info = self.type_u32(off + 4)?;
            let size_type = self.type_u32(off + 8)?;
            let kind = ((info >> 24) & 0x1f) as u8;
            let vlen = (info & 0xffff) as u16;
            let extra = off + 12;
            let n = usize::from(vlen);
            let trailing = match kind {
                kind::INT | kind::VAR | kind::DECL_TAG => 4,
                kind::ARRAY => 12,
                kind::STRUCT | kind::UNION | kind::DATASEC | kind::ENUM64 => 12 * n,
                kind::ENUM | kind::FUNC_PROTO => 8 * n,
                kind::PTR
                | kind::FWD
                | kind::TYPEDEF
                | kind::VOLATILE
                | kind::CONST
                | kind::RESTRICT
                | kind::FUNC
                | kind::FLOAT
                | kind::TYPE_TAG => 0,
                _ => return None,
            };
            off = extra.checked_add(trailing)?;
            if off > self.types_len {
                return None;
            }
            out.push(Raw {
                name_off,
                kind,
                vlen,
                kind_flag: info >> 31 == 1,
                size_type,
                extra,
            });
        }
        Some(out)
    }

    /// The string at `off` of the string section ("" when out of bounds or not UTF-8).
    fn name(&self, off: u32) -> &str {
        let start = off as usize;
        if start >= self.strings_len {
            return "";
        }
        let bytes = &self.data[self.strings_at + start..self.strings_at + self.strings_len];
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        std::str::from_utf8(&bytes[..end]).unwrap_or("")
    }

    fn raw(&self, id: u32) -> Option<&Raw> {
        self.types.get(id as usize).filter(|_| id != 0)
    }

    /// Follows typedefs and qualifiers from `id`.
    fn skip_modifiers(&self, mut id: u32) -> u32 {
        for _ in 0..MAX_CHAIN {
            match self.raw(id) {
                Some(r)
                    if matches!(
                        r.kind,
                        kind::TYPEDEF
                            | kind::VOLATILE
                            | kind::CONST
                            | kind::RESTRICT
                            | kind::TYPE_TAG
                    ) =>
                {
                    id = r.size_type
                }
                _ => return id,
            }
        }
        id
    }

    /// The key of struct/union `id` (`struct NAME`, `union NAME`, `struct #ID`).
    fn agg_key(&self, id: u32) -> String {
        let Some(r) = self.raw(id) else {
            return "void".into();
        };
        let word = match (r.kind, r.kind_flag) {
            (kind::UNION, _) | (kind::FWD, true) => "union",
            _ => "struct",
        };
        match self.name(r.name_off) {
            "" => format!("{word} #{id}"),
            n => format!("{word} {n}"),
        }
    }

    /// The C spelling of `id`, at most `depth` links deep.
    fn c_name(&self, id: u32, depth: usize) -> String {
        if depth == 0 {
            return "...".into();
        }
        let Some(r) = self.raw(id) else {
            return "void".into();
        };
        let name = self.name(r.name_off);
        match r.kind {
            kind::PTR => {
                let inner = self.raw(r.size_type).map(|t| t.kind);
                if inner == Some(kind::FUNC_PROTO) {
                    "function pointer".into()
                } else {
                    format!("{} *", self.c_name(r.size_type, depth - 1))
                }
            }
            kind::CONST => format!("const {}", self.c_name(r.size_type, depth - 1)),
            kind::VOLATILE => format!("volatile {}", self.c_name(r.size_type, depth - 1)),
            kind::RESTRICT | kind::TYPE_TAG => self.c_name(r.size_type, depth - 1),
            kind::ARRAY => {
                let elem = self.type_u32(r.extra).unwrap_or(0);
                let n = self.type_u32(r.extra + 8).unwrap_or(0);
                format!("{}[{n}]", self.c_name(elem, depth - 1))
            }
            kind::STRUCT | kind::UNION | kind::FWD => self.agg_key(id),
            kind::ENUM | kind::ENUM64 if name.is_empty() => "enum".into(),
            kind::ENUM | kind::ENUM64 => format!("enum {name}"),
            kind::FUNC_PROTO => "function".into(),
            _ if name.is_empty() => "?".into(),
            _ => name.to_string(),
        }
    }

    /// The shape of `id` (see [`Shape`]).
    fn shape(&self, id: u32) -> Shape {
        let id = self.skip_modifiers(id);
        let Some(r) = self.raw(id) else {
            return Shape::Void;
        };
        match r.kind {
            kind::INT => {
                let enc = self.type_u32(r.extra).unwrap_or(0);
                Shape::Int {
                    size: r.size_type.min(16) as u8,
                    signed: (enc >> 24) & 1 == 1,
                }
            }
            kind::ENUM | kind::ENUM64 => Shape::Int {
                size: r.size_type.min(16) as u8,
                signed: r.kind_flag,
            },
            kind::PTR => {
                let to = self.skip_modifiers(r.size_type);
                match self.raw(to) {
                    Some(t) if matches!(t.kind, kind::STRUCT | kind::UNION | kind::FWD) => {
                        Shape::PtrAgg(self.agg_key(to))
                    }
                    Some(t) if t.kind == kind::INT && t.size_type == 1 => Shape::PtrChar,
                    _ => Shape::Ptr,
                }
            }
            kind::STRUCT | kind::UNION => Shape::Agg(self.agg_key(id)),
            kind::ARRAY => {
                let elem = self.skip_modifiers(self.type_u32(r.extra).unwrap_or(0));
                match self.raw(elem) {
                    Some(t) if t.kind == kind::INT && t.size_type == 1 => Shape::CharArray,
                    _ => Shape::Other,
                }
            }
            _ => Shape::Other,
        }
    }

    fn ty(&self, id: u32) -> Ty {
        if let Some(t) = self.seen.borrow().get(&id) {
            return t.clone();
        }
        let t = Ty {
            c: self.c_name(id, MAX_CHAIN),
            shape: self.shape(id),
        };
        self.seen.borrow_mut().insert(id, t.clone());
        t
    }

    /// The prototype of FUNC_PROTO `id`, without its first `skip` parameters.
    fn proto(&self, id: u32, skip: usize) -> Option<Proto> {
        let r = self.raw(id).filter(|r| r.kind == kind::FUNC_PROTO)?;
        let params = (0..usize::from(r.vlen))
            .skip(skip)
            .filter_map(|i| {
                let name_off = self.type_u32(r.extra + 8 * i)?;
                let ty = self.type_u32(r.extra + 8 * i + 4)?;
                // A variadic function ends in a nameless, typeless parameter.
                (ty != 0).then(|| Var {
                    name: self.name(name_off).to_string(),
                    ty: self.ty(ty),
                })
            })
            .collect();
        Some(Proto {
            params,
            ret: self.ty(r.size_type),
        })
    }

    /// Members of struct/union `id`, those of anonymous members flattened in
    /// (as `btf_find_struct_member` searches them).
    fn members(&self, id: u32, out: &mut Vec<Var>, depth: usize) {
        let Some(r) = self
            .raw(id)
            .filter(|r| matches!(r.kind, kind::STRUCT | kind::UNION))
        else {
            return;
        };
        for i in 0..usize::from(r.vlen) {
            if out.len() >= MAX_MEMBERS {
                return;
            }
            let (Some(name_off), Some(ty)) = (
                self.type_u32(r.extra + 12 * i),
                self.type_u32(r.extra + 12 * i + 4),
            ) else {
                return;
            };
            match self.name(name_off) {
                "" if depth > 0 => self.members(self.skip_modifiers(ty), out, depth - 1),
                "" => {}
                n => out.push(Var {
                    name: n.to_string(),
                    ty: self.ty(ty),
                }),
            }
        }
    }

    /// Every struct and union by key, with the id to read its members from.
    fn aggregates(&self) -> BTreeMap<String, u32> {
        let mut out = BTreeMap::new();
        for (id, r) in self.types.iter().enumerate() {
            if matches!(r.kind, kind::STRUCT | kind::UNION) {
                out.entry(self.agg_key(id as u32)).or_insert(id as u32);
            }
        }
        out
    }

    /// The digest of everything: every function, tracepoint and struct.
    pub(crate) fn digest_all(&self) -> BtfFacts {
        let mut d = BtfFacts {
            complete: true,
            ..BtfFacts::default()
        };
        for r in &self.types {
            self.add_named(r, &mut d);
        }
        for (key, id) in self.aggregates() {
            let mut m = Vec::new();
            self.members(id, &mut m, MAX_CHAIN);
            d.structs.insert(key, Vars(m));
        }
        d
    }

    /// A FUNC into `d`: a tracepoint's stub as the tracepoint, any other as a function.
    fn add_named(&self, r: &Raw, d: &mut BtfFacts) {
        let name = self.name(r.name_off);
        if r.kind != kind::FUNC {
            return;
        }
        match name.strip_prefix(TRACEPOINT_PREFIX) {
            Some(tp) if !d.tracepoints.contains_key(tp) => {
                if let Some(p) = self.proto(r.size_type, 1) {
                    d.tracepoints.insert(tp.to_string(), p);
                }
            }
            None if !d.functions.contains_key(name) => {
                if let Some(p) = self.proto(r.size_type, 0) {
                    d.functions.insert(name.to_string(), p);
                }
            }
            _ => {}
        }
    }

    /// How the kernel prints the arguments of each of `functions` that BTF
    /// describes (kernel/trace/trace_output.c `print_function_args`): per
    /// parameter its name and its kind after typedefs and qualifiers
    /// (`btf_type_skip_modifiers`), an integer's signedness from its
    /// encoding, any other kind by the kernel's name of it (kernel/bpf/btf.c
    /// `btf_kind_str`) and its `size`. The first FUNC of a name is taken, as
    /// `btf_find_func_proto` takes it.
    pub(crate) fn arg_prototypes(
        &self,
        functions: &BTreeSet<String>,
    ) -> BTreeMap<String, Vec<tracedat::Param>> {
        let mut out = BTreeMap::new();
        for r in &self.types {
            if r.kind != kind::FUNC {
                continue;
            }
            let name = self.name(r.name_off);
            if out.contains_key(name) || !functions.contains(name) {
                continue;
            }
            let Some(p) = self.raw(r.size_type).filter(|p| p.kind == kind::FUNC_PROTO) else {
                continue;
            };
            let params = (0..usize::from(p.vlen))
                .map_while(|i| {
                    let name_off = self.type_u32(p.extra + 8 * i)?;
                    let ty = self.type_u32(p.extra + 8 * i + 4)?;
                    Some(tracedat::Param {
                        name: self.name(name_off).to_string(),
                        kind: self.arg_kind(ty),
                    })
                })
                .collect();
            out.insert(name.to_string(), params);
        }
        out
    }

    /// How a parameter of type `id` prints (see [`Btf::arg_prototypes`]).
    fn arg_kind(&self, id: u32) -> tracedat::ArgKind {
        use tracedat::ArgKind;
        /// kernel/bpf/btf.c `btf_kind_str`, by kind number.
        const KIND_NAMES: [&str; 20] = [
            "UNKN",
            "INT",
            "PTR",
            "ARRAY",
            "STRUCT",
            "UNION",
            "ENUM",
            "FWD",
            "TYPEDEF",
            "VOLATILE",
            "CONST",
            "RESTRICT",
            "FUNC",
            "FUNC_PROTO",
            "VAR",
            "DATASEC",
            "FLOAT",
            "DECL_TAG",
            "TYPE_TAG",
            "ENUM64",
        ];
        let Some(r) = self.raw(self.skip_modifiers(id)) else {
            return ArgKind::Unknown;
        };
        match r.kind {
            kind::PTR => ArgKind::Pointer,
            kind::ENUM => ArgKind::Enum,
            kind::INT => match self.type_u32(r.extra).map(|v| (v >> 24) & 0x0f) {
                // BTF_INT_SIGNED (include/uapi/linux/btf.h).
                Some(enc) if enc & 1 != 0 => ArgKind::Signed,
                _ => ArgKind::Unsigned,
            },
            k => ArgKind::Other {
                kind: KIND_NAMES
                    .get(usize::from(k))
                    .unwrap_or(&"UNKN")
                    .to_string(),
                size: r.size_type,
            },
        }
    }

    /// The digest one recipe needs: the prototypes of `functions` and
    /// `tracepoints`, and every struct that any of `fetches` walks from any of
    /// their parameters or return values (see [`BtfFacts::walk`]).
    pub(crate) fn digest_for(
        &self,
        functions: &BTreeSet<String>,
        tracepoints: &BTreeSet<String>,
        fetches: &BTreeSet<String>,
    ) -> BtfFacts {
        let mut d = BtfFacts {
            looked_up: functions.iter().chain(tracepoints).cloned().collect(),
            ..BtfFacts::default()
        };
        for r in &self.types {
            let name = self.name(r.name_off);
            let wanted = r.kind == kind::FUNC
                && match name.strip_prefix(TRACEPOINT_PREFIX) {
                    Some(tp) => tracepoints.contains(tp),
                    None => functions.contains(name),
                };
            if wanted {
                self.add_named(r, &mut d);
            }
        }
        // Walk each fetch from each root it could start at, keeping the
        // structs it passes (and the one it stops in, for the listing).
        let aggs = self.aggregates();
        let roots: Vec<Ty> = d
            .functions
            .values()
            .chain(d.tracepoints.values())
            .flat_map(|p| p.params.iter().map(|v| v.ty.clone()).chain([p.ret.clone()]))
            .collect();
        let mut cache: BTreeMap<String, Vec<Var>> = BTreeMap::new();
        let mut members = |key: &str| -> Vec<Var> {
            cache
                .entry(key.to_string())
                .or_insert_with(|| {
                    let mut m = Vec::new();
                    if let Some(&id) = aggs.get(key) {
                        self.members(id, &mut m, MAX_CHAIN);
                    }
                    m
                })
                .clone()
        };
        for fetch in fetches {
            let Ok(path) = FieldPath::parse(fetch) else {
                continue;
            };
            for root in roots.iter().filter(|_| !path.fields.is_empty()) {
                let mut ty = root.clone();
                for (arrow, field) in &path.fields {
                    let key = match (&ty.shape, arrow) {
                        (Shape::PtrAgg(k), true) | (Shape::Agg(k), false) => k.clone(),
                        _ => break,
                    };
                    let m = members(&key);
                    d.structs.insert(key, Vars(m.clone()));
                    match m.into_iter().find(|v| &v.name == field) {
                        Some(v) => ty = v.ty,
                        None => break,
                    }
                }
            }
        }
        d
    }
}

/// A BTF fetch: a root (`NAME`, `$argN`, `$retval`) and its field accesses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldPath<'a> {
    /// `count`, `$arg2`, `$retval`.
    pub(crate) root: &'a str,
    /// Each access: (`->` rather than `.`, the member's name), with the byte
    /// offset of the member name in the fetch text.
    pub(crate) fields: Vec<(bool, &'a str)>,
    /// Byte offset of each field name in the text.
    pub(crate) at: Vec<usize>,
}

impl<'a> FieldPath<'a> {
    /// Splits `root(->f|.f)*`; `Err` when it is not of that form (then it is
    /// some other fetcharg).
    pub(crate) fn parse(text: &'a str) -> Result<FieldPath<'a>, ()> {
        let ident = |s: &str| {
            let mut b = s.bytes();
            b.next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
                && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
        };
        let end = text.find(['-', '.']).unwrap_or(text.len());
        let root = &text[..end];
        let root_ok = ident(root)
            || root == "$retval"
            || root
                .strip_prefix("$arg")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !root_ok {
            return Err(());
        }
        let mut fields = Vec::new();
        let mut at = Vec::new();
        let mut rest = end;
        while rest < text.len() {
            let s = &text[rest..];
            let (arrow, skip) = if s.starts_with("->") {
                (true, 2)
            } else if s.starts_with('.') {
                (false, 1)
            } else {
                return Err(());
            };
            let start = rest + skip;
            let stop = text[start..]
                .find(['-', '.'])
                .map_or(text.len(), |i| start + i);
            let name = &text[start..stop];
            if !ident(name) {
                return Err(());
            }
            fields.push((arrow, name));
            at.push(start);
            rest = stop;
        }
        Ok(FieldPath { root, fields, at })
    }
}

/// Why a BTF fetch does not fit the kernel's types: the message and the byte
/// range of the fetch text it is about.
pub(crate) type WalkError = (String, std::ops::Range<usize>);

impl BtfFacts {
    /// Reads the running kernel's BTF digest for one recipe (or everything
    /// when `all`); `None` without `/sys/kernel/btf/vmlinux` or when it is
    /// unreadable.
    pub(crate) fn read(
        all: bool,
        functions: &BTreeSet<String>,
        tracepoints: &BTreeSet<String>,
        fetches: &BTreeSet<String>,
    ) -> Option<BtfFacts> {
        let btf = Btf::read_vmlinux().ok()?;
        Some(match all {
            true => btf.digest_all(),
            false => btf.digest_for(functions, tracepoints, fetches),
        })
    }

    /// Walks `path`'s fields from `root` (the type of its root), as the
    /// kernel's `parse_btf_field` does; returns the type it ends at, or what is
    /// wrong and where. `None` when a struct on the way is not in this digest
    /// (a digest of another recipe): nothing can be said.
    pub(crate) fn walk(&self, root: &Ty, path: &FieldPath<'_>) -> Option<Result<Ty, WalkError>> {
        let mut ty = root.clone();
        let mut shown = path.root.to_string();
        for (i, (arrow, field)) in path.fields.iter().enumerate() {
            let at = path.at[i];
            let here = at..at + field.len();
            let op = if *arrow { "->" } else { "." };
            let key = match (&ty.shape, arrow) {
                (Shape::PtrAgg(k), true) | (Shape::Agg(k), false) => k,
                (Shape::Agg(_), true) => {
                    return Some(Err((
                        format!(
                            "`{shown}` is a `{}`, not a pointer: write `{shown}.{field}`",
                            ty.c
                        ),
                        here,
                    )));
                }
                (Shape::PtrAgg(_), false) => {
                    return Some(Err((
                        format!(
                            "`{shown}` is a pointer (`{}`): write `{shown}->{field}`",
                            ty.c
                        ),
                        here,
                    )));
                }
                _ => {
                    return Some(Err((
                        format!(
                            "`{shown}` is a `{}`, which has no members: `{op}{field}` needs a struct or union{}",
                            ty.c,
                            if *arrow { " pointer" } else { "" }
                        ),
                        here,
                    )));
                }
            };
            let members = &self.structs.get(key)?.0;
            match members.iter().find(|m| m.name == *field) {
                Some(m) => ty = m.ty.clone(),
                None => {
                    return Some(Err((
                        format!(
                            "`{key}` has no member `{field}`; it has: {}",
                            list_vars(members, 40)
                        ),
                        here,
                    )));
                }
            }
            shown = format!("{shown}{op}{field}");
        }
        Some(Ok(ty))
    }
}

/// `name (type), ...` for messages, at most `max` of them.
pub(crate) fn list_vars(vars: &[Var], max: usize) -> String {
    let mut s = vars
        .iter()
        .take(max)
        .map(|v| format!("`{}` ({})", v.name, v.ty.c))
        .collect::<Vec<_>>()
        .join(", ");
    if vars.len() > max {
        s.push_str(&format!(" and {} more", vars.len() - max));
    }
    if vars.is_empty() {
        s.push_str("nothing");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny BTF blob built by hand: `int`, `char`, `struct qstr { const
    /// char *name; }`, `struct dentry { struct qstr d_name; }`, `struct file
    /// { struct dentry *dentry; union { int a; }; }`, and
    /// `long f(struct file *file, int n)`.
    fn blob(big_endian: bool) -> Vec<u8> {
        let mut strings =
            b"\0int\0char\0qstr\0name\0dentry\0d_name\0file\0a\0f\0n\0long\0".to_vec();
        strings.push(0);
        let s = |n: &str| {
            let hay = b"\0int\0char\0qstr\0name\0dentry\0d_name\0file\0a\0f\0n\0long\0";
            let needle: Vec<u8> = [b"\0", n.as_bytes(), b"\0"].concat();
            hay.windows(needle.len()).position(|w| w == needle).unwrap() as u32 + 1
        };
        let mut t: Vec<u32> = Vec::new();
        let info = |kind: u32, vlen: u32| (kind << 24) | vlen;
        // 1: int (4 bytes, signed)
        t.extend([s("int"), info(1, 0), 4, (1 << 24) | 32]);
        // 2: char (1 byte)
        t.extend([s("char"), info(1, 0), 1, 8]);
        // 3: const char
        t.extend([0, info(10, 0), 2]);
        // 4: const char *
        t.extend([0, info(2, 0), 3]);
        // 5: struct qstr { const char *name; }
        t.extend([s("qstr"), info(4, 1), 8, s("name"), 4, 0]);
        // 6: struct dentry { struct qstr d_name; }
        t.extend([s("dentry"), info(4, 1), 8, s("d_name"), 5, 0]);
        // 7: struct dentry *
        t.extend([0, info(2, 0), 6]);
        // 8: anonymous union { int a; }
        t.extend([0, info(5, 1), 4, s("a"), 1, 0]);
        // 9: struct file { struct dentry *dentry; union { int a; }; }
        t.extend([s("file"), info(4, 2), 16, s("dentry"), 7, 0, 0, 8, 64]);
        // 10: struct file *
        t.extend([0, info(2, 0), 9]);
        // 11: long
        t.extend([s("long"), info(1, 0), 8, (1 << 24) | 64]);
        // 12: long (*)(struct file *file, int n)
        t.extend([0, info(13, 2), 11, s("file"), 10, s("n"), 1]);
        // 13: FUNC f
        t.extend([s("f"), info(12, 0), 12]);
        let w = |v: u32| match big_endian {
            true => v.to_be_bytes(),
            false => v.to_le_bytes(),
        };
        let types: Vec<u8> = t.iter().flat_map(|&v| w(v)).collect();
        let mut out = Vec::new();
        out.extend(match big_endian {
            true => [0xeb, 0x9f],
            false => [0x9f, 0xeb],
        });
        out.extend([1, 0]);
        for v in [
            24,
            0,
            types.len() as u32,
            types.len() as u32,
            strings.len() as u32,
        ] {
            out.extend(w(v));
        }
        out.extend(types);
        out.extend(strings);
        out
    }

    #[test]
    fn a_hand_made_blob_gives_prototypes_and_flattened_members() {
        for be in [false, true] {
            let d = Btf::parse(blob(be)).unwrap().digest_all();
            let f = &d.functions["f"];
            assert_eq!(f.params[0].name, "file");
            assert_eq!(f.params[0].ty.c, "struct file *");
            assert_eq!(f.params[0].ty.shape, Shape::PtrAgg("struct file".into()));
            assert_eq!(
                f.params[1].ty.shape,
                Shape::Int {
                    size: 4,
                    signed: true
                }
            );
            assert_eq!(
                f.ret.shape,
                Shape::Int {
                    size: 8,
                    signed: true
                }
            );
            let file: Vec<&str> = d.structs["struct file"]
                .0
                .iter()
                .map(|v| v.name.as_str())
                .collect();
            assert_eq!(
                file,
                ["dentry", "a"],
                "the anonymous union's member is the struct's"
            );
            let path = FieldPath::parse("file->dentry->d_name.name").unwrap();
            let end = d.walk(&f.params[0].ty, &path).unwrap().unwrap();
            assert_eq!(end.shape, Shape::PtrChar);
            assert_eq!(end.c, "const char *");
        }
    }

    #[test]
    fn walking_says_what_the_struct_has_and_which_operator_fits() {
        let btf = Btf::parse(blob(false)).unwrap();
        let fetches = ["file->dentry->d_name.nosuch".to_string()].into();
        let d = btf.digest_for(&["f".to_string()].into(), &BTreeSet::new(), &fetches);
        // The digest keeps the structs the fetch walks, and only those.
        assert_eq!(
            d.structs.keys().collect::<Vec<_>>(),
            ["struct dentry", "struct file", "struct qstr"]
        );
        let root = &d.functions["f"].params[0].ty;
        let text = "file->dentry->d_name.nosuch";
        let (msg, at) = d
            .walk(root, &FieldPath::parse(text).unwrap())
            .unwrap()
            .unwrap_err();
        assert!(
            msg.contains("`struct qstr` has no member `nosuch`; it has: `name` (const char *)"),
            "{msg}"
        );
        assert_eq!(&text[at], "nosuch");
        let (msg, _) = d
            .walk(root, &FieldPath::parse("file.dentry").unwrap())
            .unwrap()
            .unwrap_err();
        assert!(msg.contains("write `file->dentry`"), "{msg}");
        let (msg, _) = d
            .walk(
                root,
                &FieldPath::parse("file->dentry->d_name->name").unwrap(),
            )
            .unwrap()
            .unwrap_err();
        assert!(msg.contains("write `file->dentry->d_name.name`"), "{msg}");
    }

    #[test]
    fn malformed_blobs_are_errors() {
        let good = blob(false);
        assert!(Btf::parse(Vec::new()).is_err());
        assert!(Btf::parse(b"nope".to_vec()).is_err());
        // Every truncation is an error or a smaller table, never a panic.
        for n in 0..good.len() {
            let _ = Btf::parse(good[..n].to_vec()).map(|b| b.digest_all());
        }
        // A type section length that runs past the file.
        let mut bad = good.clone();
        bad[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Btf::parse(bad).is_err());
    }

    #[test]
    fn field_paths_split_at_arrows_and_dots() {
        let p = FieldPath::parse("file->f_path.dentry").unwrap();
        assert_eq!(p.root, "file");
        assert_eq!(p.fields, [(true, "f_path"), (false, "dentry")]);
        assert_eq!(p.at, [6, 13]);
        assert!(FieldPath::parse("$retval->name").is_ok());
        assert!(FieldPath::parse("$arg2").is_ok());
        for bad in [
            "+0(%di)", "%di", "$stack", "a->", "a-b", "@sym", "1abc", "$argx",
        ] {
            assert!(FieldPath::parse(bad).is_err(), "{bad}");
        }
    }

    /// This machine's own BTF, where it has one: `vfs_read`'s parameters and
    /// the path of a file's name.
    #[test]
    fn the_running_kernels_btf_has_vfs_read() {
        // A kernel without BTF (none of ours: this host's and the lab's
        // have it) has nothing to check here.
        if !std::path::Path::new(VMLINUX).exists() {
            return;
        }
        let btf = Btf::read_vmlinux().unwrap();
        let fetch = "file->f_path.dentry->d_name.name".to_string();
        let d = btf.digest_for(
            &["vfs_read".to_string()].into(),
            &["sched_switch".to_string()].into(),
            &[fetch.clone()].into(),
        );
        let p = &d.functions["vfs_read"];
        let names: Vec<&str> = p.params.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["file", "buf", "count", "pos"]);
        let end = d
            .walk(&p.params[0].ty, &FieldPath::parse(&fetch).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(end.shape, Shape::PtrChar, "{end:?}");
        let sw: Vec<&str> = d.tracepoints["sched_switch"]
            .params
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        assert!(sw.starts_with(&["preempt", "prev", "next"]), "{sw:?}");
    }
}
